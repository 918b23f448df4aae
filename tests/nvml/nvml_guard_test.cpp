// ClockGuard over the NVML backend and the stand-in libnvidia-ml.so.1: the destructor resets, a failed
// reset is retried and, when it keeps failing, counted and said on stderr; a signal resets the GPU of
// the process it kills (seen through the shared state file); SIGKILL, which nothing can catch, leaves
// the lock behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "emo/device/device.h"
#include "emo/device/nvml.h"
#include "standin_util.h"

namespace emo::device {
namespace {

using NvmlStandinGuard = test::StandinTest;

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

TEST_F(NvmlStandinGuard, TheDestructorResets) {
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  {
    ClockGuard guard(**dev);
    ASSERT_TRUE(guard.lock(1410).ok());
    EXPECT_TRUE(guard.locked());
    EXPECT_EQ(locked_mhz(), 1410);
  }
  EXPECT_EQ(locked_mhz(), 0);
  auto resets = calls("nvmlDeviceResetGpuLockedClocks");
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].rc, 0);
}

TEST_F(NvmlStandinGuard, AResetFailingOnceIsRetried) {
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  const int failures_before = clock_reset_failures();
  testing::internal::CaptureStderr();
  {
    ClockGuard guard(**dev);
    ASSERT_TRUE(guard.lock(1410).ok());
    ::setenv("EMO_NVML_STANDIN_FAIL", "nvmlDeviceResetGpuLockedClocks:1", 1);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(locked_mhz(), 0);
  auto resets = calls("nvmlDeviceResetGpuLockedClocks");
  ASSERT_EQ(resets.size(), 2u) << log_text();
  EXPECT_EQ(resets[0].rc, 999);
  EXPECT_EQ(resets[1].rc, 0);
  EXPECT_EQ(clock_reset_failures(), failures_before);
  EXPECT_FALSE(has(err, "could not be reset")) << err;
}

TEST_F(NvmlStandinGuard, AResetFailingAlwaysIsCountedAndSaid) {
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  const int failures_before = clock_reset_failures();
  testing::internal::CaptureStderr();
  {
    ClockGuard guard(**dev);
    ASSERT_TRUE(guard.lock(1410).ok());
    ::setenv("EMO_NVML_STANDIN_FAIL", "nvmlDeviceResetGpuLockedClocks", 1);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(clock_reset_failures(), failures_before + 1);
  EXPECT_TRUE(has(err, "could not be reset")) << err;
  EXPECT_TRUE(has(err, "nvml:0")) << err;
  EXPECT_TRUE(has(err, "nvmlDeviceResetGpuLockedClocks failed: Unknown Error (999)")) << err;
  EXPECT_EQ(locked_mhz(), 1410) << "the GPU really is still locked";
  EXPECT_EQ(calls("nvmlDeviceResetGpuLockedClocks").size(), 3u) << "one reset and two retries";
  ::unsetenv("EMO_NVML_STANDIN_FAIL");
  ASSERT_TRUE((*dev)->reset_sm_clock().ok());
  EXPECT_EQ(locked_mhz(), 0);
}

TEST_F(NvmlStandinGuard, AFailedLockIsUndoneAndKeepsItsError) {
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  ::setenv("EMO_NVML_STANDIN_FAIL", "nvmlDeviceSetGpuLockedClocks:perm", 1);
  ClockGuard guard(**dev);
  Status st = guard.lock(1410);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(has(st.error().what, "Insufficient Permissions")) << st.error().what;
  EXPECT_FALSE(guard.locked());
  EXPECT_EQ(locked_mhz(), 0);
  auto resets = calls("nvmlDeviceResetGpuLockedClocks");
  ASSERT_EQ(resets.size(), 1u) << "the guard resets after a failed lock";
  EXPECT_EQ(resets[0].rc, 0);
}

// A child that opens nvml:0, locks `mhz` through a ClockGuard (installing its signal handlers), tells
// the parent on `ready`, then raises `raise_sig` itself or (0) waits to be killed.
[[noreturn]] void locked_child(int ready, int mhz, int raise_sig) {
  auto dev = open_nvml_device(0);
  if (!dev.ok()) ::_exit(10);
  ClockGuard guard(**dev);
  if (!guard.lock(mhz).ok()) ::_exit(11);
  char c = 'r';
  if (::write(ready, &c, 1) != 1) ::_exit(12);
  if (raise_sig != 0) ::raise(raise_sig);
  for (;;) ::pause();
}

// Forks locked_child; returns its pid once it holds the lock.
pid_t start_locked_child(int mhz, int raise_sig) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    locked_child(fds[1], mhz, raise_sig);
  }
  ::close(fds[1]);
  char c = 0;
  ssize_t got = ::read(fds[0], &c, 1);
  ::close(fds[0]);
  return pid > 0 && got == 1 ? pid : -1;
}

TEST_F(NvmlStandinGuard, ASignalResetsTheGpuOfTheProcessItKills) {
  struct Case {
    int sig;
    bool raised;  // by the child itself, else sent by the parent
  };
  for (Case c : {Case{SIGTERM, true}, Case{SIGTERM, false}, Case{SIGINT, false}, Case{SIGHUP, false}}) {
    SCOPED_TRACE(std::string(::strsignal(c.sig)) + (c.raised ? " raised" : " sent"));
    std::ofstream(log_, std::ios::trunc).close();
    pid_t pid = start_locked_child(1200, c.raised ? c.sig : 0);
    ASSERT_GT(pid, 0);
    if (!c.raised) {
      EXPECT_EQ(locked_mhz(), 1200) << "the child holds the lock";
      ASSERT_EQ(::kill(pid, c.sig), 0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << status;
    EXPECT_EQ(WTERMSIG(status), c.sig);
    EXPECT_EQ(locked_mhz(), 0) << log_text();
    auto sets = calls("nvmlDeviceSetGpuLockedClocks");
    auto resets = calls("nvmlDeviceResetGpuLockedClocks");
    ASSERT_EQ(sets.size(), 1u);
    EXPECT_EQ(sets[0].pid, long(pid));
    EXPECT_EQ(sets[0].args, (std::vector<std::string>{"0", "1200", "1200"}));
    ASSERT_EQ(resets.size(), 1u) << log_text();
    EXPECT_EQ(resets[0].pid, long(pid));
    EXPECT_EQ(resets[0].rc, 0);
  }
}

TEST_F(NvmlStandinGuard, SigkillLeavesTheLockBehind) {
  pid_t pid = start_locked_child(1200, 0);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(locked_mhz(), 1200) << "nothing runs on SIGKILL: only another process can reset it";
  EXPECT_TRUE(calls("nvmlDeviceResetGpuLockedClocks").empty());
}

}  // namespace
}  // namespace emo::device
