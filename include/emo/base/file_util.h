// Writing output files so that an interrupted run never leaves a partial file that looks complete,
// and never damages what the output path names:
//   - a regular file (or a name that does not exist yet) is written to "NAME.tmp.<pid>" beside it and
//     renamed over NAME once complete;
//   - a symbolic link is followed (a chain of them too) and its TARGET is replaced that way: the link
//     stays a link (a dangling link gets its target created);
//   - a device, FIFO or socket (/dev/null, a named pipe, ...) and the descriptor names /dev/stdout,
//     /dev/stderr, /dev/fd/N and /proc/self/fd/N are written IN PLACE: opened and written, no temporary
//     file, no rename (so running as root never replaces /dev/null with a file);
//   - "-" is standard output.
// The temporaries live in a process-wide, async-signal-safe registry: SIGINT, SIGTERM, SIGHUP, SIGQUIT
// and SIGPIPE remove every live temporary file and folder (and AtomicDir's lock) before the signal
// takes its course (the disposition that was there before ours, the default one as a rule).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "emo/base/result.h"

namespace emo {

class AtomicFile {
 public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless commit() succeeded

  // "-" means standard output (written through, commit just flushes); see the top of this file for
  // links, devices, FIFOs and descriptor names. A folder is refused here ("cannot write: ...").
  Status open(const std::string& path);
  Status write(std::string_view data);
  Status commit();
  std::FILE* handle() { return f_; }

 private:
  Status write_in_place(int fd, const std::string& path);  // takes `fd` (an open descriptor) for writing
  enum class Mode { kClosed, kStream, kInPlace, kAtomic };
  std::string path_;    // as the caller spelled it: messages name it
  std::string target_;  // what commit() renames over (links resolved)
  std::string tmp_;
  std::FILE* f_ = nullptr;
  Mode mode_ = Mode::kClosed;
  int slot_ = -1;  // the temporary's registry entry
  bool failed_ = false;
};

// A folder built as "DIR.tmp.<pid>" and put in place by commit(): the old DIR (if any) is replaced only
// once the new one is complete; without commit() the temporary folder is removed — also when the
// process is stopped by SIGINT, SIGTERM, SIGHUP, SIGQUIT or SIGPIPE meanwhile (the handler unlinks the
// files written into it, through write() or an AtomicFile, removes its folders, then the signal takes
// its course). Each such folder holds a file named kFolderMark; open() refuses a DIR that is a file, or
// a folder with something in it and no such mark (a folder emo did not write), rather than replace it.
// A DIR that is a symbolic link is followed: its target folder is replaced, the link stays.
// open() also takes "DIR.lock" (flock'd, holding the pid): a second writer of the same folder, in this
// process or another one, is refused with an Error naming the folder and the pid holding it; a lock file
// left by a process that is gone is taken over. The lock goes on commit(), destruction or a signal.
inline constexpr const char* kFolderMark = ".emo-folder";
class AtomicDir {
 public:
  AtomicDir() = default;
  AtomicDir(const AtomicDir&) = delete;
  AtomicDir& operator=(const AtomicDir&) = delete;
  ~AtomicDir();

  // `what` names the folder in messages ("report folder").
  Status open(const std::string& dir, const std::string& what);
  const std::string& tmp_path() const { return tmp_; }
  // DIR as given (normalized), also where it is a link to the folder that is replaced.
  const std::string& final_path() const { return final_; }
  // Writes `name` (may contain '/': subfolders are created) inside the temporary folder.
  Status write(const std::string& name, std::string_view data);
  Status commit();

 private:
  void release();
  std::string final_, real_, tmp_, what_, lock_path_;
  int lock_fd_ = -1;
  int lock_slot_ = -1;
  int root_slot_ = -1;
  bool done_ = false;
};

// Whole-file convenience: atomically replaces `path` ("-": stdout) with `data`.
Status write_file_atomic(const std::string& path, std::string_view data);

// The whole file as text; a missing or unreadable file (or a directory) -> Error naming it.
Result<std::string> read_file(const std::string& path);

// Refuses outputs that would destroy an input or each other, before anything is written. `inputs` are
// the paths a command reads (files or folders); `outputs` are (flag, path) pairs, e.g.
// {"--json", "w0.json"}, {"-o", "report"}. The Error (where "FLAG PATH") names the first conflict:
//   - an output that is an input, also through a link, a hard link or another spelling:
//     "--json w0.json: is also an input (w0.json); it would be overwritten";
//   - an output folder that holds an input (replacing the folder would delete it);
//   - two outputs naming the same file, or one inside the other ("--csv x: is the same file as --json x").
// Existing paths are compared with std::filesystem::equivalent; a path that does not exist yet
// conflicts only where it spells the same path (std::filesystem::weakly_canonical, links resolved).
// Never a conflict: "-" (stdout/stdin), empty paths (an output not asked for: callers may pass every
// flag), and outputs written in place (devices such as /dev/null, FIFOs, sockets, /dev/stdout,
// /dev/stderr, /dev/fd/N, /proc/self/fd/N).
Status check_outputs(const std::vector<std::string>& inputs,
                     const std::vector<std::pair<std::string, std::string>>& outputs);

}  // namespace emo
