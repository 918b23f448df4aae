// Writing output files so that an interrupted run never leaves a partial file
// that looks complete: write to "NAME.tmp.<pid>", then rename over NAME.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "emo/base/result.h"

namespace emo {

class AtomicFile {
 public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless commit() succeeded

  // "-" means standard output (written through, commit just flushes).
  Status open(const std::string& path);
  Status write(std::string_view data);
  Status commit();
  std::FILE* handle() { return f_; }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool stdout_ = false;
  bool failed_ = false;
};

// A folder built as "DIR.tmp.<pid>" and put in place by commit(): the old DIR (if any) is replaced only
// once the new one is complete; without commit() the temporary folder is removed — also when the
// process is stopped by SIGINT or SIGTERM meanwhile (the handler removes it, then the signal takes its
// default course). One such folder at a time per process. Each such folder holds a file named
// kFolderMark; open() refuses a DIR that is a file, or a folder with something in it and no such mark
// (a folder emo did not write), rather than replace it.
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
  const std::string& final_path() const { return final_; }
  // Writes `name` (may contain '/': subfolders are created) inside the temporary folder.
  Status write(const std::string& name, std::string_view data);
  Status commit();

 private:
  std::string final_, tmp_, what_;
  bool done_ = false;
};

// Whole-file convenience: atomically replaces `path` ("-": stdout) with `data`.
Status write_file_atomic(const std::string& path, std::string_view data);

// The whole file as text; a missing or unreadable file (or a directory) -> Error naming it.
Result<std::string> read_file(const std::string& path);

}  // namespace emo
