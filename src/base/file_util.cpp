// AtomicFile / AtomicDir: temporary name + rename, so readers never see half a file; links followed,
// devices and pipes written in place; a signal-safe registry removes the temporaries on a signal.
#include "emo/base/file_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <system_error>
#include <vector>

namespace emo {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) { return std::strerror(err); }

// ---------------------------------------------------------------------------------------------------
// The registry of live temporaries, read by the signal handler.
//
// A fixed array of slots; each holds a kind, the owning folder's slot (for what was written into an
// AtomicDir's temporary folder) and an absolute path (heap text, allocated and freed outside the
// handler). Discipline: a thread changes slots only inside a Critical section, which blocks the
// signals below in that thread (so the handler never interrupts its own thread mid-change) and counts
// itself in g_busy; the handler raises g_dying, waits for g_busy to drain (bounded), then reads.
// A thread that finds g_dying raised waits for it to drop before entering. All atomics are lock-free.
// ---------------------------------------------------------------------------------------------------

enum Kind : int {
  kFree = 0,
  kClaimed = 1,   // being filled in
  kTempFile = 2,  // an AtomicFile's NAME.tmp.<pid>: unlink
  kDirFile = 3,   // a file written into an AtomicDir's temporary folder: unlink
  kDirSub = 4,    // a subfolder of one: rmdir (deepest first)
  kDirRoot = 5,   // an AtomicDir's DIR.tmp.<pid>: rmdir, or rm -rf when something unlisted is left
  kLock = 6,      // an AtomicDir's DIR.lock: unlink, last
};

constexpr int kSlots = 16384;
std::atomic<int> g_kind[kSlots];
std::atomic<int> g_owner[kSlots];
std::atomic<char*> g_path[kSlots];
std::atomic<int> g_high{0};  // slots [0, g_high) have been used
std::atomic<int> g_busy{0};
std::atomic<int> g_dying{0};
std::atomic<int> g_fired{0};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<char*>::is_always_lock_free);

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
constexpr int kNumSignals = static_cast<int>(sizeof kSignals / sizeof kSignals[0]);
struct sigaction g_prev[kNumSignals];
bool g_have_prev[kNumSignals];
std::mutex g_install_mu;

void sleep_ms_fraction(long ns) {
  struct timespec ts{};
  ts.tv_nsec = ns;
  ::nanosleep(&ts, nullptr);
}

class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t s;
    sigemptyset(&s);
    for (int sig : kSignals) sigaddset(&s, sig);
    pthread_sigmask(SIG_BLOCK, &s, &old_);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

class Critical {
 public:
  Critical() {
    for (;;) {
      g_busy.fetch_add(1);
      if (g_dying.load() == 0) return;
      g_busy.fetch_sub(1);
      sleep_ms_fraction(1000000);
    }
  }
  ~Critical() { g_busy.fetch_sub(1); }
  Critical(const Critical&) = delete;
  Critical& operator=(const Critical&) = delete;

 private:
  SignalsBlocked blocked_;  // constructed before the body runs, released after the destructor's body
};

// Removes a folder with whatever is left in it: fork + execv of rm (both async-signal-safe), as the
// handler did before the registry listed the files.
void rm_rf(char* path) {
  const pid_t child = fork();
  if (child == 0) {
    char rm[] = "/bin/rm", rf[] = "-rf", dashes[] = "--";
    char* argv[] = {rm, rf, dashes, path, nullptr};
    execv(rm, argv);
    _exit(127);
  }
  if (child > 0) {
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

// Async-signal-safe: unlink, rmdir, fork/execv/waitpid only.
void remove_all_temporaries() {
  const int high = g_high.load();
  auto live = [](int i, int kind) -> char* {
    return g_kind[i].load() == kind ? g_path[i].load() : nullptr;
  };
  for (int i = 0; i < high; ++i)
    if (char* p = live(i, kTempFile)) ::unlink(p);
  for (int i = 0; i < high; ++i)
    if (char* p = live(i, kDirFile)) ::unlink(p);
  // Subfolders were listed parents first: walking back removes children first; a few passes cover
  // any other order.
  for (int pass = 0; pass < 16; ++pass) {
    bool any = false;
    for (int i = high - 1; i >= 0; --i)
      if (char* p = live(i, kDirSub); p && ::rmdir(p) == 0) any = true;
    if (!any) break;
  }
  for (int i = high - 1; i >= 0; --i) {
    if (char* p = live(i, kDirRoot); p && ::rmdir(p) != 0 && (errno == ENOTEMPTY || errno == EEXIST)) rm_rf(p);
  }
  for (int i = 0; i < high; ++i)
    if (char* p = live(i, kLock)) ::unlink(p);
}

extern "C" void emo_file_util_on_signal(int sig) {
  const int saved_errno = errno;
  const bool first = g_fired.exchange(1) == 0;
  g_dying.fetch_add(1);
  for (int i = 0; i < 2000 && g_busy.load() > 0; ++i) sleep_ms_fraction(500000);  // at most ~1 s
  remove_all_temporaries();
  g_dying.fetch_sub(1);
  // The disposition that was there before ours (the default one, as a rule) takes over; a second
  // time through (a previous handler that hands back to us) it is the default one.
  int idx = -1;
  for (int i = 0; i < kNumSignals; ++i)
    if (kSignals[i] == sig) idx = i;
  if (first && idx >= 0 && g_have_prev[idx]) {
    sigaction(sig, &g_prev[idx], nullptr);
  } else {
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
  }
  raise(sig);  // blocked while in here: delivered when the handler returns
  errno = saved_errno;
}

// Installs the handler where it is not (again: a guard elsewhere may have put back an older one),
// keeping what was there; a signal that is ignored (SIGINT in a background job) stays ignored.
// Called inside a Critical section.
void ensure_handlers() {
  std::lock_guard<std::mutex> lock(g_install_mu);
  struct sigaction ours{};
  ours.sa_handler = emo_file_util_on_signal;
  sigemptyset(&ours.sa_mask);
  for (int sig : kSignals) sigaddset(&ours.sa_mask, sig);
  for (int i = 0; i < kNumSignals; ++i) {
    struct sigaction cur{};
    if (sigaction(kSignals[i], nullptr, &cur) != 0) continue;
    const bool plain = (cur.sa_flags & SA_SIGINFO) == 0;
    if (plain && (cur.sa_handler == emo_file_util_on_signal || cur.sa_handler == SIG_IGN)) continue;
    g_prev[i] = cur;
    g_have_prev[i] = true;
    sigaction(kSignals[i], &ours, nullptr);
  }
}

// Inside a Critical section: a free slot for `copy` (owned by the slot from now on), or -1.
int add_locked(Kind kind, char* copy, int owner) {
  for (int i = 0; i < kSlots; ++i) {
    if (g_kind[i].load(std::memory_order_relaxed) != kFree) continue;
    int expected = kFree;
    if (!g_kind[i].compare_exchange_strong(expected, kClaimed)) continue;
    g_path[i].store(copy);
    g_owner[i].store(owner);
    int high = g_high.load();
    while (high < i + 1 && !g_high.compare_exchange_weak(high, i + 1)) {
    }
    g_kind[i].store(kind);
    return i;
  }
  std::free(copy);
  return -1;
}

std::string absolute_text(const std::string& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return ec ? p : a.string();
}

int registry_add(Kind kind, const std::string& abs_path, int owner) {
  char* copy = ::strdup(abs_path.c_str());
  if (!copy) return -1;
  Critical c;
  if (kind == kTempFile || kind == kDirRoot || kind == kLock) ensure_handlers();
  return add_locked(kind, copy, owner);
}

void registry_remove(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  char* p = nullptr;
  {
    Critical c;
    p = g_path[slot].exchange(nullptr);
    g_owner[slot].store(-1);
    g_kind[slot].store(kFree);
  }
  std::free(p);
}

// A folder's slot and those of everything listed in it.
void registry_remove_dir(int root) {
  if (root < 0 || root >= kSlots) return;
  std::vector<char*> freed;
  {
    Critical c;
    const int high = g_high.load();
    for (int i = 0; i < high; ++i) {
      const int k = g_kind[i].load();
      if (i == root || ((k == kDirFile || k == kDirSub) && g_owner[i].load() == root)) {
        freed.push_back(g_path[i].exchange(nullptr));
        g_owner[i].store(-1);
        g_kind[i].store(kFree);
      }
    }
  }
  for (char* p : freed) std::free(p);
}

bool has_child_locked(int root, int kind, const std::string& path, int high) {
  for (int i = 0; i < high; ++i) {
    if (g_kind[i].load() != kind || g_owner[i].load() != root) continue;
    const char* p = g_path[i].load();
    if (p && path == p) return true;
  }
  return false;
}

// A file about to appear at `abs` (absolute): when it lies inside a live AtomicDir's temporary folder,
// list it (and the subfolders on the way) under that folder, so the handler can take the folder apart
// with unlink and rmdir alone.
void registry_note_file(const std::string& abs) {
  Critical c;
  const int high = g_high.load();
  int root = -1;
  size_t best = 0;
  for (int i = 0; i < high; ++i) {
    if (g_kind[i].load() != kDirRoot) continue;
    const char* p = g_path[i].load();
    if (!p) continue;
    const size_t n = std::strlen(p);
    if (abs.size() > n + 1 && abs.compare(0, n, p) == 0 && abs[n] == '/' && n > best) {
      root = i;
      best = n;
    }
  }
  if (root < 0) return;
  for (size_t pos = abs.find('/', best + 1); pos != std::string::npos; pos = abs.find('/', pos + 1)) {
    const std::string sub = abs.substr(0, pos);
    if (!has_child_locked(root, kDirSub, sub, g_high.load())) {
      if (char* copy = ::strdup(sub.c_str())) add_locked(kDirSub, copy, root);
    }
  }
  if (!has_child_locked(root, kDirFile, abs, g_high.load())) {
    if (char* copy = ::strdup(abs.c_str())) add_locked(kDirFile, copy, root);
  }
}

// ---------------------------------------------------------------------------------------------------
// What an output path names.
// ---------------------------------------------------------------------------------------------------

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 9) return false;
  for (char ch : s)
    if (ch < '0' || ch > '9') return false;
  return true;
}

// The descriptor that /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N (/proc/<our pid>/fd/N,
// /proc/thread-self/fd/N) name; -1 for any other path.
int fd_alias(const std::string& p) {
  if (p == "/dev/stdout") return 1;
  if (p == "/dev/stderr") return 2;
  const std::string own = "/proc/" + std::to_string(::getpid()) + "/fd/";
  for (const std::string& prefix : {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
                                    std::string("/proc/thread-self/fd/"), own}) {
    if (p.size() > prefix.size() && p.compare(0, prefix.size(), prefix) == 0) {
      const std::string_view rest = std::string_view(p).substr(prefix.size());
      if (all_digits(rest)) return std::atoi(std::string(rest).c_str());
    }
  }
  return -1;
}

struct Resolved {
  std::string path;  // links followed; the path itself where it is no link (or does not exist)
  int fd = -1;       // >= 0: a descriptor name, written through that descriptor
};

// Follows a chain of symbolic links from `path` (at most 40, as the kernel does).
Result<Resolved> resolve_output(const std::string& path) {
  std::string p = path;
  for (int hops = 0;; ++hops) {
    if (const int fd = fd_alias(p); fd >= 0) return Resolved{p, fd};
    struct stat st{};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return Resolved{p, -1};
    if (hops >= 40) return make_error(path, "cannot write: " + errno_text(ELOOP));
    std::error_code ec;
    const fs::path t = fs::read_symlink(p, ec);
    if (ec) return make_error(path, "cannot write: " + ec.message());
    p = t.is_absolute() ? t.string() : (fs::path(p).parent_path() / t).string();
  }
}

bool is_pid_text(const std::string& s) {
  std::string_view v = s;
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.remove_suffix(1);
  return all_digits(v);
}

std::string read_fd(int fd) {
  std::string out;
  char buf[256];
  off_t at = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0 || out.size() > 4096) break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// AtomicFile
// ---------------------------------------------------------------------------------------------------

AtomicFile::~AtomicFile() {
  if (!f_ || mode_ == Mode::kStream) return;
  std::fclose(f_);
  if (mode_ == Mode::kAtomic) {
    std::remove(tmp_.c_str());
    registry_remove(slot_);
  }
}

Status AtomicFile::write_in_place(int fd, const std::string& path) {
  f_ = ::fdopen(fd, "wb");
  if (!f_) {
    const int err = errno;
    ::close(fd);
    return make_error(path, "cannot write: " + errno_text(err));
  }
  mode_ = Mode::kInPlace;
  return {};
}

Status AtomicFile::open(const std::string& path) {
  if (f_) return make_error(path, "cannot write: another file is open in this writer");
  path_ = path;
  failed_ = false;
  if (path == "-") {
    f_ = stdout;
    mode_ = Mode::kStream;
    return {};
  }
  auto resolved = resolve_output(path);
  if (!resolved) return resolved.error();
  if (resolved->fd >= 0) {  // a descriptor: written through it, in place
    if (resolved->fd == 1 || resolved->fd == 2) {
      f_ = resolved->fd == 1 ? stdout : stderr;
      mode_ = Mode::kStream;
      return {};
    }
    const int fd = ::fcntl(resolved->fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return make_error(path, "cannot write: " + errno_text(errno));
    return write_in_place(fd, path);
  }
  target_ = resolved->path;
  struct stat st{};
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) return make_error(path, "cannot write: " + errno_text(EISDIR));
  if (exists && !S_ISREG(st.st_mode)) {  // a device, FIFO or socket: opened and written, never replaced
    const int fd = ::open(target_.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (S_ISSOCK(st.st_mode))
        return make_error(path, "cannot write: it is a socket (" + errno_text(err) + ")",
                          "emo writes files, devices and pipes; give another output path");
      return make_error(path, "cannot write: " + errno_text(err));
    }
    return write_in_place(fd, path);
  }
  // A regular file, or nothing yet: a temporary beside the target, renamed over it by commit().
  const std::string base = target_ + ".tmp." + std::to_string(::getpid());
  const std::string abs_base = absolute_text(base);
  for (int n = 0; n < 100; ++n) {
    const std::string suffix = n == 0 ? std::string() : "." + std::to_string(n);
    tmp_ = base + suffix;
    int fd = -1, err = 0;
    {
      SignalsBlocked blocked;  // listed and created together: a signal sees both or neither
      slot_ = registry_add(kTempFile, abs_base + suffix, -1);
      fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      err = errno;
      if (fd < 0) {
        registry_remove(slot_);
        slot_ = -1;
      }
    }
    if (fd < 0) {
      if (err == EEXIST) continue;  // another writer of the same name in this process, or a leftover
      return make_error(path, "cannot write: " + errno_text(err));
    }
    if (exists) (void)::fchmod(fd, st.st_mode & 07777);  // the replaced file's permissions stay
    f_ = ::fdopen(fd, "wb");
    if (!f_) {
      err = errno;
      ::close(fd);
      ::unlink(tmp_.c_str());
      registry_remove(slot_);
      slot_ = -1;
      return make_error(path, "cannot write: " + errno_text(err));
    }
    mode_ = Mode::kAtomic;
    return {};
  }
  return make_error(path, "cannot write: too many temporary files beside it (" + base + ".*)");
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
  if (mode_ == Mode::kStream) {
    std::fflush(f_);
    f_ = nullptr;
    mode_ = Mode::kClosed;
    return {};
  }
  const Mode mode = mode_;
  bool ok = !failed_ && std::fflush(f_) == 0;
  int err = errno;
  if (std::fclose(f_) != 0 && ok) {
    ok = false;
    err = errno;
  }
  f_ = nullptr;
  mode_ = Mode::kClosed;
  if (mode == Mode::kInPlace) {
    if (!ok) return make_error(path_, "write failed: " + errno_text(err));
    return {};
  }
  if (!ok) {
    std::remove(tmp_.c_str());
    registry_remove(slot_);
    slot_ = -1;
    return make_error(path_, "write failed (disk full?)");
  }
  registry_note_file(absolute_text(target_));  // listed before it appears
  if (std::rename(tmp_.c_str(), target_.c_str()) != 0) {
    err = errno;
    std::remove(tmp_.c_str());
    registry_remove(slot_);
    slot_ = -1;
    return make_error(path_, std::string("cannot rename into place: ") + std::strerror(err));
  }
  registry_remove(slot_);
  slot_ = -1;
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

// ---------------------------------------------------------------------------------------------------
// AtomicDir
// ---------------------------------------------------------------------------------------------------

AtomicDir::~AtomicDir() {
  if (!done_ && !tmp_.empty()) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  release();
}

void AtomicDir::release() {
  registry_remove_dir(root_slot_);
  root_slot_ = -1;
  if (lock_fd_ >= 0) {
    // Off the list first: a signal in between leaves a stale lock (taken over later), never removes
    // a lock another run has taken meanwhile.
    registry_remove(lock_slot_);
    lock_slot_ = -1;
    ::unlink(lock_path_.c_str());
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
}

Status AtomicDir::open(const std::string& dir, const std::string& what) {
  if (dir.empty()) return make_error("-o", "the " + what + " name is empty");
  if (lock_fd_ >= 0 || root_slot_ >= 0) return make_error(dir, "this " + what_ + " writer is already open");
  // Built beside its final place, so the closing rename stays on one file system.
  final_ = fs::path(dir).lexically_normal().string();
  if (!final_.empty() && final_.back() == '/') final_.pop_back();
  what_ = what;
  const char* note = "give -o another name, or remove it first";
  // A link is followed: the folder it names is replaced, the link stays.
  auto resolved = resolve_output(final_);
  if (!resolved) return resolved.error();
  if (resolved->fd >= 0) return make_error(final_, "exists and is not a folder", note);
  real_ = final_;
  if (resolved->path != final_) {
    std::error_code ec;
    fs::path canon = fs::weakly_canonical(resolved->path, ec);
    real_ = ec ? fs::path(resolved->path).lexically_normal().string() : canon.string();
    while (real_.size() > 1 && real_.back() == '/') real_.pop_back();
  }
  std::error_code ec;
  if (fs::exists(real_, ec)) {
    if (!fs::is_directory(real_, ec)) return make_error(final_, "exists and is not a folder", note);
    if (!fs::is_empty(real_, ec) && !fs::exists(fs::path(real_) / kFolderMark, ec))
      return make_error(final_, "is a folder that emo did not write (it has no " + std::string(kFolderMark) +
                                    " file); it is not replaced", note);
  }
  const fs::path parent = fs::path(real_).parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) return make_error(final_ + ".tmp.*", "cannot create the " + what + ": " + ec.message());
  }

  // The lock: DIR.lock, flock'd while this writer lives, holding its pid.
  lock_path_ = real_ + ".lock";
  bool locked = false;
  for (int attempt = 0; attempt < 20 && !locked; ++attempt) {
    SignalsBlocked blocked;  // taken and listed together
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      const int err = errno;
      return make_error(lock_path_, "cannot create the lock file of the " + what + ": " + errno_text(err),
                        "give -o a folder in a place you can write");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string holder = read_fd(fd);
      ::close(fd);
      if (err == EWOULDBLOCK) {
        std::string who = is_pid_text(holder) ? "pid " + holder.substr(0, holder.find_first_of("\r\n"))
                                              : "a process";
        return make_error(final_, "is being written by another emo run (" + who + " holds " + lock_path_ + ")",
                          "wait for it to finish, or give -o another folder");
      }
      return make_error(lock_path_, "cannot lock the " + what + ": " + errno_text(err));
    }
    // Still the file at that name? A run releasing its lock unlinks it before closing.
    struct stat held{}, named{};
    if (::fstat(fd, &held) != 0 || ::stat(lock_path_.c_str(), &named) != 0 || held.st_ino != named.st_ino ||
        held.st_dev != named.st_dev) {
      ::close(fd);
      continue;
    }
    const std::string old = read_fd(fd);
    if (!old.empty() && !is_pid_text(old)) {
      ::close(fd);
      return make_error(lock_path_, "exists and is not an emo lock file; it is not replaced",
                        "remove it, or give -o another folder");
    }
    // Free: ours now (a lock left by a process that is gone is taken over).
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
      const int err = errno;
      ::unlink(lock_path_.c_str());
      ::close(fd);
      return make_error(lock_path_, "cannot write the lock file: " + errno_text(err));
    }
    lock_fd_ = fd;
    lock_slot_ = registry_add(kLock, absolute_text(lock_path_), -1);
    locked = true;
  }
  if (!locked) return make_error(lock_path_, "cannot take the lock of the " + what + " (it keeps changing hands)");

  tmp_ = real_ + ".tmp." + std::to_string(::getpid());
  root_slot_ = registry_add(kDirRoot, absolute_text(tmp_), -1);
  fs::remove_all(tmp_, ec);
  if (!fs::create_directories(tmp_, ec) || ec) {
    const std::string why = ec ? ec.message() : "it exists";
    tmp_.clear();
    release();
    return make_error(final_ + ".tmp.*", "cannot create the " + what + ": " + why);
  }
  return write(kFolderMark, what + " written by emo; emo replaces a folder only when it has this file\n");
}

Status AtomicDir::write(const std::string& name, std::string_view data) {
  if (tmp_.empty() || done_) return make_error(final_, "the " + what_ + " is not open");
  const fs::path p = fs::path(tmp_) / name;
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (ec) return make_error(p.parent_path().string(), "cannot create the folder: " + ec.message());
  return write_file_atomic(p.string(), data);
}

Status AtomicDir::commit() {
  if (tmp_.empty() || done_) return make_error(final_, "the " + what_ + " is not open");
  std::error_code ec;
  const std::string old = real_ + ".old." + std::to_string(::getpid());
  const bool had_old = fs::exists(real_, ec);
  if (had_old) {
    fs::remove_all(old, ec);
    fs::rename(real_, old, ec);
    if (ec) return make_error(final_, "cannot move the old " + what_ + " aside: " + ec.message());
  }
  fs::rename(tmp_, real_, ec);
  if (ec) {
    std::error_code ec2;
    if (had_old) fs::rename(old, real_, ec2);
    return make_error(final_, "cannot put the " + what_ + " in place: " + ec.message());
  }
  done_ = true;
  registry_remove_dir(root_slot_);
  root_slot_ = -1;
  if (had_old) fs::remove_all(old, ec);
  release();  // the lock last
  return {};
}

// ---------------------------------------------------------------------------------------------------
// check_outputs
// ---------------------------------------------------------------------------------------------------

namespace {

struct Spot {
  std::string given;
  fs::path canon;  // weakly_canonical, links followed
  bool exists = false;
};

Spot locate(const std::string& p) {
  Spot s;
  s.given = p;
  auto r = resolve_output(p);
  const std::string target = r ? r->path : p;
  std::error_code ec;
  s.canon = fs::weakly_canonical(target, ec);
  if (ec) {
    std::error_code ec2;
    s.canon = fs::absolute(target, ec2).lexically_normal();
  }
  s.exists = fs::exists(target, ec) && !ec;
  return s;
}

// Written through a descriptor or in place (a device, FIFO, socket): never a conflict.
bool written_in_place(const std::string& p) {
  auto r = resolve_output(p);
  if (!r) return false;
  if (r->fd >= 0) return true;
  struct stat st{};
  return ::stat(r->path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

bool same_file(const Spot& a, const Spot& b) {
  if (a.exists && b.exists) {
    std::error_code ec;
    const bool eq = fs::equivalent(a.given, b.given, ec);
    return !ec && eq;
  }
  return a.canon == b.canon;
}

// `inner` lies strictly inside `outer`.
bool is_under(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty() && std::next(o) == outer.end()) break;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  for (; i != inner.end(); ++i)
    if (!i->empty()) return true;
  return false;
}

}  // namespace

Status check_outputs(const std::vector<std::string>& inputs,
                     const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::vector<Spot> ins;
  for (const auto& in : inputs)
    if (!in.empty() && in != "-") ins.push_back(locate(in));
  struct Out {
    const std::string* flag;
    Spot spot;
  };
  std::vector<Out> outs;
  for (const auto& [flag, path] : outputs) {
    if (path.empty() || path == "-" || written_in_place(path)) continue;
    outs.push_back(Out{&flag, locate(path)});
  }
  const char* note = "give the output another name";
  for (const Out& o : outs) {
    const std::string where = *o.flag + " " + o.spot.given;
    for (const Spot& in : ins) {
      if (same_file(o.spot, in))
        return make_error(where, "is also an input (" + in.given + "); it would be overwritten", note);
      if (is_under(in.canon, o.spot.canon))
        return make_error(where, "holds an input (" + in.given + "); replacing it would delete that input", note);
    }
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    const std::string where = *outs[k].flag + " " + outs[k].spot.given;
    for (size_t i = 0; i < k; ++i) {
      const std::string other = *outs[i].flag + " " + outs[i].spot.given;
      if (same_file(outs[k].spot, outs[i].spot))
        return make_error(where, "is the same file as " + other + "; each output needs a file of its own", note);
      if (is_under(outs[k].spot.canon, outs[i].spot.canon))
        return make_error(where, "is inside " + other + ", which is written as a whole; it would be lost", note);
      if (is_under(outs[i].spot.canon, outs[k].spot.canon))
        return make_error(where, "holds " + other + ", and is written as a whole; that output would be lost", note);
    }
  }
  return {};
}

}  // namespace emo
