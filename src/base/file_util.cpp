// AtomicFile: temporary name + rename, so readers never see half a file.
#include "emo/base/file_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace emo {

AtomicFile::~AtomicFile() {
  if (f_ && !stdout_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

Status AtomicFile::open(const std::string& path) {
  path_ = path;
  if (path == "-") {
    f_ = stdout;
    stdout_ = true;
    return {};
  }
  tmp_ = path + ".tmp." + std::to_string(::getpid());
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) return make_error(path, std::string("cannot write: ") + std::strerror(errno));
  return {};
}

Status AtomicFile::write(std::string_view data) {
  if (!f_) return make_error(path_, "file is not open");
  if (std::fwrite(data.data(), 1, data.size(), f_) != data.size()) {
    failed_ = true;
    return make_error(path_, std::string("write failed: ") + std::strerror(errno));
  }
  return {};
}

Status AtomicFile::commit() {
  if (!f_) return make_error(path_, "file is not open");
  if (stdout_) {
    std::fflush(f_);
    f_ = nullptr;
    return {};
  }
  bool ok = !failed_ && std::fflush(f_) == 0;
  ok = (std::fclose(f_) == 0) && ok;
  f_ = nullptr;
  if (!ok) {
    std::remove(tmp_.c_str());
    return make_error(path_, "write failed (disk full?)");
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    std::remove(tmp_.c_str());
    return make_error(path_, std::string("cannot rename into place: ") + std::strerror(err));
  }
  return {};
}

Status write_file_atomic(const std::string& path, std::string_view data) {
  AtomicFile f;
  EMO_RETURN_IF_ERROR(f.open(path));
  EMO_RETURN_IF_ERROR(f.write(data));
  return f.commit();
}

Result<std::string> read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return make_error(path, "is a directory, not a file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return make_error(path, std::string("cannot open: ") + std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) return make_error(path, "read error");
  return out;
}

namespace {

// The temporary folder to remove if a signal stops the process; empty = none. The handler only uses
// async-signal-safe calls: fork, execv of rm, waitpid, then the default action of the signal.
char g_cleanup_dir[4096];
volatile sig_atomic_t g_cleanup_set = 0;

void cleanup_and_reraise(int sig) {
  if (g_cleanup_set) {
    const pid_t child = fork();
    if (child == 0) {
      char rm[] = "/bin/rm", rf[] = "-rf", dashes[] = "--";
      char* argv[] = {rm, rf, dashes, g_cleanup_dir, nullptr};
      execv(rm, argv);
      _exit(127);
    }
    if (child > 0) {
      int status = 0;
      waitpid(child, &status, 0);
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void watch_dir(const std::string& path) {
  if (path.size() >= sizeof g_cleanup_dir) return;
  g_cleanup_set = 0;
  std::memcpy(g_cleanup_dir, path.c_str(), path.size() + 1);
  g_cleanup_set = 1;
  struct sigaction sa{};
  sa.sa_handler = cleanup_and_reraise;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old{};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // a background job keeps ignoring SIGINT
    sigaction(sig, &sa, nullptr);
  }
}

void unwatch_dir() { g_cleanup_set = 0; }

}  // namespace

AtomicDir::~AtomicDir() {
  if (done_ || tmp_.empty()) return;
  unwatch_dir();
  std::error_code ec;
  std::filesystem::remove_all(tmp_, ec);
}

Status AtomicDir::open(const std::string& dir, const std::string& what) {
  namespace fs = std::filesystem;
  if (dir.empty()) return make_error("-o", "the " + what + " name is empty");
  // Built beside its final place, so the closing rename stays on one file system.
  final_ = fs::path(dir).lexically_normal().string();
  if (!final_.empty() && final_.back() == '/') final_.pop_back();
  what_ = what;
  std::error_code ec;
  const char* note = "give -o another name, or remove it first";
  if (fs::exists(final_, ec)) {
    if (!fs::is_directory(final_, ec)) return make_error(final_, "exists and is not a folder", note);
    if (!fs::is_empty(final_, ec) && !fs::exists(fs::path(final_) / kFolderMark, ec))
      return make_error(final_, "is a folder that emo did not write (it has no " + std::string(kFolderMark) +
                                    " file); it is not replaced", note);
  }
  tmp_ = final_ + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp_, ec);
  if (!fs::create_directories(tmp_, ec) || ec) {
    const std::string why = ec ? ec.message() : "it exists";
    tmp_.clear();
    return make_error(final_ + ".tmp.*", "cannot create the " + what + ": " + why);
  }
  watch_dir(tmp_);
  return write(kFolderMark, what + " written by emo; emo replaces a folder only when it has this file\n");
}

Status AtomicDir::write(const std::string& name, std::string_view data) {
  namespace fs = std::filesystem;
  const fs::path p = fs::path(tmp_) / name;
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (ec) return make_error(p.parent_path().string(), "cannot create the folder: " + ec.message());
  return write_file_atomic(p.string(), data);
}

Status AtomicDir::commit() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string old = final_ + ".old." + std::to_string(::getpid());
  const bool had_old = fs::exists(final_, ec);
  if (had_old) {
    fs::remove_all(old, ec);
    fs::rename(final_, old, ec);
    if (ec) return make_error(final_, "cannot move the old " + what_ + " aside: " + ec.message());
  }
  fs::rename(tmp_, final_, ec);
  if (!ec) unwatch_dir();
  if (ec) {
    std::error_code ec2;
    if (had_old) fs::rename(old, final_, ec2);
    return make_error(final_, "cannot put the " + what_ + " in place: " + ec.message());
  }
  done_ = true;
  if (had_old) fs::remove_all(old, ec);
  return {};
}

}  // namespace emo
