// StringTable, AtomicFile, parallel_for and median behaviour.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "emo/base/file_util.h"
#include "emo/base/parallel.h"
#include "emo/base/stats.h"
#include "emo/base/strings.h"
#include "test_util.h"

namespace emo {
namespace {

TEST(ParallelFor, RunsEveryIndexOnceOnSeveralThreads) {
  for (int threads : {1, 2, 4}) {
    std::vector<int> hits(1000, 0);
    std::mutex mu;
    std::set<std::thread::id> ids;
    parallel_for(
        hits.size(),
        [&](size_t i) {
          ++hits[i];  // each index is its own slot
          std::this_thread::sleep_for(std::chrono::microseconds(i % 7 == 0 ? 200 : 0));
          std::lock_guard<std::mutex> lock(mu);
          ids.insert(std::this_thread::get_id());
        },
        threads);
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "index " << i << ", " << threads << " threads";
    EXPECT_LE(ids.size(), size_t(threads));
    if (threads == 1) {
      EXPECT_EQ(ids.size(), 1u);
    } else {
      EXPECT_GE(ids.size(), 2u) << "no second thread took part";
    }
  }
  parallel_for(0, [](size_t) { FAIL() << "no index to run"; }, 4);
}

TEST(ParallelFor, RethrowsATaskException) {
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_for(
                   100,
                   [&](size_t i) {
                     ++ran;
                     if (i == 3) throw std::runtime_error("task 3");
                   },
                   2),
               std::runtime_error);
  EXPECT_GE(ran.load(), 4);
}

TEST(ParallelFor, ThreadsComeFromEmoThreads) {
  const char* old = std::getenv("EMO_THREADS");
  const std::string keep = old ? old : "";
  setenv("EMO_THREADS", "3", 1);
  EXPECT_EQ(worker_threads(), 3);
  setenv("EMO_THREADS", "zero", 1);  // not a number: the hardware's count
  EXPECT_GE(worker_threads(), 1);
  EXPECT_LE(worker_threads(), 8);
  setenv("EMO_THREADS", "0", 1);
  EXPECT_GE(worker_threads(), 1);
  if (old) {
    setenv("EMO_THREADS", keep.c_str(), 1);
  } else {
    unsetenv("EMO_THREADS");
  }
}

TEST(StringTable, InterningIsStableAndDense) {
  StringTable t;
  StrId a = t.intern("aten::mm");
  StrId b = t.intern("aten::add");
  EXPECT_NE(a, b);
  EXPECT_EQ(t.intern("aten::mm"), a);
  EXPECT_EQ(t.view(a), "aten::mm");
  EXPECT_EQ(t.view(kEmptyStr), "");
  for (int i = 0; i < 10000; ++i) t.intern("k" + std::to_string(i));
  EXPECT_EQ(t.view(a), "aten::mm");  // views survive growth
  bool found = true;
  t.find("never", &found);
  EXPECT_FALSE(found);
}

TEST(AtomicFile, UncommittedWriteLeavesNoFile) {
  std::string dir = test::temp_dir("atomic");
  std::string path = dir + "/out.json";
  {
    AtomicFile f;
    ASSERT_TRUE(f.open(path).ok());
    ASSERT_TRUE(f.write("{\"partial\":").ok());
  }  // destroyed without commit, as on an error path
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  ASSERT_TRUE(write_file_atomic(path, "{}").ok());
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(s, "{}");
}

TEST(AtomicFile, UnwritableDirectoryIsAnError) {
  Status s = write_file_atomic("/nonexistent-dir/x.json", "{}");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what.find("cannot write"), std::string::npos);
}

TEST(Stats, MedianTakesTheMeanOfTheTwoMiddleValues) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({7.5}), 7.5);
  EXPECT_EQ(median({5, 1, 3}), 3.0);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);  // (2 + 3) / 2, not the upper 3
  EXPECT_EQ(median({-1, 10, 10, -1, 2, 2}), 2.0);
  const std::vector<double> v = {9, 8, 7, 6};
  EXPECT_EQ(median(v), 7.5);
  EXPECT_EQ(v, (std::vector<double>{9, 8, 7, 6}));  // taken by value: the caller's order stays
}

TEST(Stats, UpperMedianTakesTheUpperMiddleValue) {
  std::vector<int64_t> empty;
  EXPECT_EQ(upper_median(empty, int64_t{-5}), -5);
  std::vector<int64_t> odd = {50, 10, 30};
  EXPECT_EQ(upper_median(odd, int64_t{0}), 30);
  std::vector<int64_t> even = {4, 1, 3, 2};
  EXPECT_EQ(upper_median(even, int64_t{0}), 3);  // the upper of 2 and 3, never their mean
  // Always one of the values: no overflow where a mean of two large ones would.
  const int64_t big = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> large = {big, big - 2};
  EXPECT_EQ(upper_median(large, int64_t{0}), big);
  std::vector<double> d = {1.0, 2.0};
  EXPECT_EQ(upper_median(d, 0.0), 2.0);
}

}  // namespace
}  // namespace emo

// ---- output safety: links, devices, FIFOs, inputs named as outputs, the folder lock, signals ----
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace emo {
namespace {

namespace fs = std::filesystem;

// The names in `dir` (not recursive), sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A temporary ("NAME.tmp.*") or a lock ("NAME.lock") left in `dir`.
bool has_leftover(const std::string& dir) {
  for (const auto& n : names_in(dir))
    if (n.find(".tmp.") != std::string::npos || (n.size() > 5 && n.substr(n.size() - 5) == ".lock")) return true;
  return false;
}

TEST(AtomicFile, SymlinkedOutputReplacesTheTargetAndKeepsTheLink) {
  const std::string dir = test::temp_dir("atomic_link");
  test::write(dir, "target.json", "old");
  fs::create_symlink("target.json", dir + "/link.json");
  fs::create_symlink("link.json", dir + "/chain.json");  // a chain of links
  ASSERT_TRUE(write_file_atomic(dir + "/chain.json", "new").ok());
  EXPECT_TRUE(fs::is_symlink(dir + "/chain.json"));
  EXPECT_TRUE(fs::is_symlink(dir + "/link.json"));
  EXPECT_EQ(fs::read_symlink(dir + "/link.json"), "target.json");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir + "/target.json")));
  EXPECT_EQ(test::slurp(dir + "/target.json"), "new");
  // The replaced target keeps its permissions.
  const fs::perms rw = fs::perms::owner_read | fs::perms::owner_write;
  fs::permissions(dir + "/target.json", rw);
  ASSERT_TRUE(write_file_atomic(dir + "/link.json", "again").ok());
  EXPECT_EQ(test::slurp(dir + "/target.json"), "again");
  EXPECT_EQ(fs::status(dir + "/target.json").permissions() & fs::perms::all, rw);
  // A dangling link gets its target created; the link stays.
  fs::create_directories(dir + "/sub");
  fs::create_symlink("sub/fresh.json", dir + "/dangling.json");
  ASSERT_TRUE(write_file_atomic(dir + "/dangling.json", "fresh").ok());
  EXPECT_TRUE(fs::is_symlink(dir + "/dangling.json"));
  EXPECT_EQ(test::slurp(dir + "/sub/fresh.json"), "fresh");
  EXPECT_FALSE(has_leftover(dir));
  EXPECT_FALSE(has_leftover(dir + "/sub"));
  fs::remove_all(dir);
}

TEST(AtomicFile, FifoIsWrittenInPlace) {
  const std::string dir = test::temp_dir("atomic_fifo");
  const std::string fifo = dir + "/pipe.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // Opened before the writer comes (non-blocking), so a writer that never opens the FIFO (one that
  // renames a file over it) leaves the reader waiting only until its deadline, not forever.
  const int rfd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(rfd, 0) << std::strerror(errno);
  std::string got;
  std::thread reader([&] {
    bool seen = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    char buf[1 << 16];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{rfd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::read(rfd, buf, sizeof buf);
      if (n > 0) {
        got.append(buf, static_cast<size_t>(n));
        seen = true;
      } else if (n == 0 && seen) {
        break;  // the writer closed its end
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  });
  const std::string payload = std::string(300000, 'x') + "end";  // more than a pipe holds: needs the reader
  Status s = write_file_atomic(fifo, payload);
  reader.join();
  ::close(rfd);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(got.size(), payload.size());
  EXPECT_TRUE(got == payload);
  struct stat st{};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"pipe.json"});
  fs::remove_all(dir);
}

TEST(AtomicFile, DeviceBehindALinkStaysADevice) {
  const std::string dir = test::temp_dir("atomic_dev");
  std::string dev = "/dev/null";
  if (::geteuid() == 0) {
    // As root a rename over /dev/null would succeed: aim at a device node of our own (the same
    // null device) so that a broken writer cannot damage the machine's /dev/null.
    dev = dir + "/null";
    if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
      GTEST_SKIP() << "running as root without the right to mknod: " << std::strerror(errno);
  }
  fs::create_symlink(dev, dir + "/out.json");
  Status s = write_file_atomic(dir + "/out.json", "{}");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_TRUE(fs::is_symlink(dir + "/out.json"));
  struct stat st{};
  ASSERT_EQ(::stat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // The device named directly: written in place too (no DEV.tmp.* is attempted: as non-root that
  // would fail in /dev).
  s = write_file_atomic(dev, "x");
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(::stat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_FALSE(has_leftover(dir));
  fs::remove_all(dir);
}

TEST(AtomicFile, DescriptorNamesAreWrittenThroughTheDescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  for (const std::string prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    Status s = write_file_atomic(prefix + std::to_string(fds[1]), "abc");
    ASSERT_TRUE(s.ok()) << prefix << ": " << s.error().message();
    char buf[8] = {};
    ASSERT_EQ(::read(fds[0], buf, 3), 3);
    EXPECT_EQ(std::string(buf, 3), "abc") << prefix;
  }
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(CheckOutputs, RefusesAnOutputThatIsAnInput) {
  const std::string dir = test::temp_dir("check_outputs_in");
  const std::string in = test::write(dir, "w0.json", "{}");
  fs::create_symlink("w0.json", dir + "/link.json");
  fs::create_directories(dir + "/sub");
  // Through a link, another spelling, the same spelling.
  for (const std::string& out : {dir + "/link.json", dir + "/./sub/../w0.json", in}) {
    Status s = check_outputs({in}, {{"--json", out}});
    ASSERT_FALSE(s.ok()) << out;
    EXPECT_EQ(s.error().where, "--json " + out);
    EXPECT_NE(s.error().what.find("is also an input (" + in + ")"), std::string::npos) << s.error().what;
    EXPECT_NE(s.error().what.find("it would be overwritten"), std::string::npos) << s.error().what;
  }
  // An output folder holding an input: replacing the folder would delete it.
  fs::create_directories(dir + "/rep/input");
  const std::string in2 = test::write(dir + "/rep/input", "rank0.json", "{}");
  Status s = check_outputs({in2}, {{"-o", dir + "/rep"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().where, "-o " + dir + "/rep");
  // Other names (existing or not yet), stdout, outputs not asked for: fine.
  test::write(dir, "old.csv", "a,b\n");
  EXPECT_TRUE(check_outputs({in, "-"}, {{"--json", dir + "/out.json"},
                                         {"--csv", dir + "/old.csv"},
                                         {"--html", "-"},
                                         {"--plan", ""}})
                  .ok());
  // A not-yet-existing output never meets an existing input of another name.
  EXPECT_TRUE(check_outputs({in}, {{"--json", dir + "/sub/w0.json"}}).ok());
  fs::remove_all(dir);
}

TEST(CheckOutputs, RefusesTwoOutputsOnOneFileButAllowsStdout) {
  const std::string dir = test::temp_dir("check_outputs_two");
  // Not existing yet, the same spelling.
  Status s = check_outputs({}, {{"--json", dir + "/x"}, {"--csv", dir + "/x"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().where, "--csv " + dir + "/x");
  EXPECT_NE(s.error().what.find("--json " + dir + "/x"), std::string::npos) << s.error().what;
  // Existing, through a link.
  test::write(dir, "y", "");
  fs::create_symlink("y", dir + "/y-link");
  s = check_outputs({}, {{"--json", dir + "/y"}, {"--csv", dir + "/y-link"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().where, "--csv " + dir + "/y-link");
  // An output inside an output folder (replaced as a whole).
  EXPECT_FALSE(check_outputs({}, {{"-o", dir + "/rep"}, {"--json", dir + "/rep/s.json"}}).ok());
  // stdout, or a device written in place, can take several outputs.
  EXPECT_TRUE(check_outputs({"-"}, {{"--json", "-"}, {"--csv", "-"}}).ok());
  EXPECT_TRUE(check_outputs({}, {{"--json", "/dev/null"}, {"--csv", "/dev/null"}}).ok());
  EXPECT_TRUE(check_outputs({}, {{"--json", dir + "/a"}, {"--csv", dir + "/b"}}).ok());
  fs::remove_all(dir);
}

TEST(AtomicDir, ASecondWriterOfTheSameFolderIsRefused) {
  const std::string dir = test::temp_dir("atomic_lock");
  const std::string out = dir + "/rep";
  {
    AtomicDir a;
    ASSERT_TRUE(a.open(out, "report folder").ok());
    EXPECT_TRUE(fs::exists(out + ".lock"));
    AtomicDir b;
    Status s = b.open(dir + "/./rep/", "report folder");  // another spelling of the same folder
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message().find(out), std::string::npos) << s.error().message();
    EXPECT_NE(s.error().what.find("pid " + std::to_string(::getpid())), std::string::npos) << s.error().what;
    EXPECT_NE(s.error().note.find("wait"), std::string::npos) << s.error().note;
    EXPECT_TRUE(fs::is_directory(a.tmp_path()));  // the refused writer did not touch the first one's work
    ASSERT_TRUE(a.write("x.json", "{}").ok());
    ASSERT_TRUE(a.commit().ok());
  }
  EXPECT_FALSE(fs::exists(out + ".lock"));
  EXPECT_EQ(test::slurp(out + "/x.json"), "{}");
  // Through a link to the folder: the same lock.
  fs::create_symlink("rep", dir + "/rep-link");
  {
    AtomicDir a;
    ASSERT_TRUE(a.open(out, "report folder").ok());
    AtomicDir b;
    EXPECT_FALSE(b.open(dir + "/rep-link", "report folder").ok());
  }  // destroyed without commit: the lock goes too
  EXPECT_FALSE(fs::exists(out + ".lock"));
  AtomicDir c;
  ASSERT_TRUE(c.open(out, "report folder").ok());
  ASSERT_TRUE(c.commit().ok());
  EXPECT_FALSE(has_leftover(dir));
  fs::remove_all(dir);
}

TEST(AtomicDir, AStaleLockIsTakenOver) {
  const std::string dir = test::temp_dir("atomic_stale");
  const std::string out = dir + "/rep";
  const pid_t gone = ::fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) _exit(0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);  // reaped: that pid holds nothing any more
  test::write(dir, "rep.lock", std::to_string(gone) + "\n");
  AtomicDir a;
  Status s = a.open(out, "report folder");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(test::slurp(out + ".lock"), std::to_string(::getpid()) + "\n");
  ASSERT_TRUE(a.commit().ok());
  EXPECT_FALSE(fs::exists(out + ".lock"));
  EXPECT_TRUE(fs::exists(fs::path(out) / kFolderMark));
  // A file of that name that is no lock of emo's is left alone.
  test::write(dir, "rep.lock", "my notes");
  AtomicDir b;
  EXPECT_FALSE(b.open(out, "report folder").ok());
  EXPECT_EQ(test::slurp(out + ".lock"), "my notes");
  fs::remove_all(dir);
}

TEST(AtomicDir, ALinkedFolderIsReplacedAndTheLinkStays) {
  const std::string dir = test::temp_dir("atomic_dirlink");
  {
    AtomicDir first;
    ASSERT_TRUE(first.open(dir + "/real", "report folder").ok());
    ASSERT_TRUE(first.write("old.json", "{}").ok());
    ASSERT_TRUE(first.commit().ok());
  }
  fs::create_symlink("real", dir + "/rep");
  AtomicDir a;
  ASSERT_TRUE(a.open(dir + "/rep", "report folder").ok());
  EXPECT_EQ(a.final_path(), dir + "/rep");
  ASSERT_TRUE(a.write("new.json", "{}").ok());
  ASSERT_TRUE(a.commit().ok());
  EXPECT_TRUE(fs::is_symlink(dir + "/rep"));
  EXPECT_TRUE(fs::exists(dir + "/real/new.json"));
  EXPECT_FALSE(fs::exists(dir + "/real/old.json"));
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"real", "rep"}));
  fs::remove_all(dir);
}

// Where a fork made by the signal handler (its `rm -rf` fallback) leaves a mark: set in the child.
char g_fork_mark[512];
extern "C" void mark_fork_in_child() {
  const int fd = ::open(g_fork_mark, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
}

// A forked child writes a report folder (files through AtomicDir::write and through AtomicFile, one
// left uncommitted inside and one outside), then is stopped by a signal: nothing may stay behind.
TEST(AtomicDir, SignalsRemoveTheTemporariesAndTheLock) {
  struct Case {
    int sig;
    bool unlisted;  // also a file the registry does not list (written around AtomicDir)
  };
  for (const Case c : {Case{SIGHUP, false}, Case{SIGQUIT, false}, Case{SIGPIPE, false}, Case{SIGTERM, false},
                       Case{SIGINT, false}, Case{SIGTERM, true}}) {
    SCOPED_TRACE(std::string(strsignal(c.sig)) + (c.unlisted ? " (with an unlisted file)" : ""));
    const std::string parent = test::temp_dir("atomic_sig_" + std::to_string(c.sig) + (c.unlisted ? "u" : ""));
    const std::string out = parent + "/rep";
    const std::string fork_mark = parent + ".forked";
    fs::remove(fork_mark);
    std::fflush(nullptr);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      struct rlimit no_core{0, 0};
      ::setrlimit(RLIMIT_CORE, &no_core);  // SIGQUIT dumps no core
      ::prctl(PR_SET_DUMPABLE, 0);
      for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::signal(s, SIG_DFL);  // as a fresh process
      // A folder whose every file is listed is taken apart with unlink/rmdir alone: no fork then.
      std::snprintf(g_fork_mark, sizeof g_fork_mark, "%s", fork_mark.c_str());
      ::pthread_atfork(nullptr, nullptr, mark_fork_in_child);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      AtomicDir d;
      if (!d.open(out, "report folder").ok()) _exit(10);
      if (!d.write("summary.json", "{}").ok()) _exit(11);
      if (!d.write("1410mhz/rank0.json", "{}").ok()) _exit(12);
      if (!d.write("1410mhz/deeper/rank1.json", "{}").ok()) _exit(13);
      fs::create_directories(d.tmp_path() + "/input");  // as synth writes a report's example traces
      if (!write_file_atomic(d.tmp_path() + "/input/rank0.json", "{}").ok()) _exit(14);
      AtomicFile inside;
      if (!inside.open(d.tmp_path() + "/input/rank1.json").ok() || !inside.write("{\"partial\":").ok()) _exit(15);
      AtomicFile loose;
      if (!loose.open(parent + "/loose.json").ok() || !loose.write("{\"partial\":").ok()) _exit(16);
      if (c.unlisted) std::ofstream(d.tmp_path() + "/1410mhz/unlisted.txt") << "written around AtomicDir";
      ::raise(c.sig);
      _exit(20);  // not reached: the signal ends the process
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child exited with " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    EXPECT_EQ(WTERMSIG(status), c.sig);
    EXPECT_EQ(names_in(parent), std::vector<std::string>{}) << "left behind in " << parent;
    if (!c.unlisted) {
      EXPECT_FALSE(fs::exists(fork_mark)) << "the handler fell back on rm -rf";
    }
    fs::remove(fork_mark);
    fs::remove_all(parent);
  }
}

}  // namespace
}  // namespace emo
