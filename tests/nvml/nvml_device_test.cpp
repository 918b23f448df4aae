// NvmlDevice over the stand-in libnvidia-ml.so.1: open_nvml_device really dlopens it, and what the
// backend reports (name, profile, clocks, energy, errors) follows what the "driver" says and does.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "emo/device/nvml.h"
#include "standin_util.h"

namespace emo::device {
namespace {

using test::StandinTest;
using NvmlStandin = StandinTest;

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

TEST_F(NvmlStandin, OpensGpu0AsAnH100) {
  {
    auto dev = open_nvml_device(0);
    ASSERT_TRUE(dev.ok()) << dev.error().message();
    EXPECT_EQ(init_count_(), 1);
    EXPECT_EQ((*dev)->spec(), "nvml:0");
    EXPECT_EQ((*dev)->model_name(), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ((*dev)->profile().name, "h100");
    auto* nvml = dynamic_cast<NvmlDevice*>(dev->get());
    ASSERT_NE(nvml, nullptr);
    EXPECT_TRUE(nvml->profile_note().empty()) << nvml->profile_note();
    // The Device contract: ascending, distinct, though NVML lists them descending.
    auto clocks = (*dev)->supported_sm_clocks();
    ASSERT_TRUE(clocks.ok()) << clocks.error().message();
    ASSERT_EQ(clocks->size(), 110u);
    EXPECT_EQ(clocks->front(), 345);
    EXPECT_EQ(clocks->back(), 1980);
    EXPECT_TRUE(std::adjacent_find(clocks->begin(), clocks->end(), std::greater_equal<int>()) == clocks->end());
    EXPECT_EQ(*clocks, (*dev)->profile().sm_clocks.mhz);
    // The SM clocks were asked for at the (only, highest) memory clock.
    auto graphics = calls("nvmlDeviceGetSupportedGraphicsClocks");
    ASSERT_FALSE(graphics.empty());
    ASSERT_GE(graphics.back().args.size(), 2u);
    EXPECT_EQ(graphics.back().args[1], "2619");
  }
  EXPECT_EQ(init_count_(), 0);
  EXPECT_EQ(calls("nvmlInit_v2").size(), 1u);
  EXPECT_EQ(calls("nvmlShutdown").size(), 1u);
  EXPECT_TRUE(calls("nvmlDeviceSetGpuLockedClocks").empty()) << "opening must not touch the clock";
}

TEST_F(NvmlStandin, AnIndexOutOfRangeIsAnErrorNamingIt) {
  auto dev = open_nvml_device(1);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.error().where, "nvml:1");
  EXPECT_TRUE(has(dev.error().what, "nvmlDeviceGetHandleByIndex_v2")) << dev.error().what;
  EXPECT_TRUE(has(dev.error().what, "Invalid Argument (2)")) << dev.error().what;
  EXPECT_EQ(init_count_(), 0) << "the failed open must shut NVML down again";

  // With two GPUs, nvml:1 exists and is its own GPU.
  ::setenv("EMO_NVML_STANDIN_GPUS", "2", 1);
  auto dev0 = open_nvml_device(0);
  auto dev1 = open_nvml_device(1);
  ASSERT_TRUE(dev0.ok()) << dev0.error().message();
  ASSERT_TRUE(dev1.ok()) << dev1.error().message();
  EXPECT_EQ((*dev1)->spec(), "nvml:1");
  ASSERT_TRUE((*dev1)->lock_sm_clock(1005).ok());
  EXPECT_EQ(locked_mhz(1), 1005);
  EXPECT_EQ(locked_mhz(0), 0);
  auto dev2 = open_nvml_device(2);
  ASSERT_FALSE(dev2.ok());
  EXPECT_EQ(dev2.error().where, "nvml:2");
  ASSERT_TRUE((*dev1)->reset_sm_clock().ok());
  EXPECT_EQ(locked_mhz(1), 0);
}

TEST_F(NvmlStandin, TheProductNameChoosesTheProfile) {
  ::setenv("EMO_NVML_STANDIN_NAME", "NVIDIA A100-SXM4-80GB", 1);
  {
    auto dev = open_nvml_device(0);
    ASSERT_TRUE(dev.ok()) << dev.error().message();
    EXPECT_EQ((*dev)->profile().name, "a100");
    EXPECT_EQ((*dev)->model_name(), "NVIDIA A100-SXM4-80GB");
  }
  ::setenv("EMO_NVML_STANDIN_NAME", "NVIDIA H800", 1);
  {
    auto dev = open_nvml_device(0);
    ASSERT_TRUE(dev.ok()) << dev.error().message();
    EXPECT_EQ((*dev)->profile().name.front(), 'h');
    auto* nvml = dynamic_cast<NvmlDevice*>(dev->get());
    ASSERT_NE(nvml, nullptr);
    EXPECT_TRUE(has(nvml->profile_note(), "no built-in profile")) << nvml->profile_note();
  }
  ::setenv("EMO_NVML_STANDIN_NAME", "NVIDIA GeForce RTX 4090", 1);
  auto dev = open_nvml_device(0);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.error().where.rfind("nvml:0", 0), 0u) << dev.error().where;
  EXPECT_TRUE(has(dev.error().what, "no built-in device profile")) << dev.error().what;
  EXPECT_EQ(init_count_(), 0);
}

TEST_F(NvmlStandin, AFailingInitIsAnErrorAndCountsApply) {
  ::setenv("EMO_NVML_STANDIN_FAIL", "nvmlInit_v2:1", 1);
  auto first = open_nvml_device(0);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().where, "nvml:0");
  EXPECT_TRUE(has(first.error().what, "nvmlInit_v2 failed: Unknown Error (999)")) << first.error().what;
  EXPECT_EQ(init_count_(), 0);
  auto second = open_nvml_device(0);  // only the first call fails
  EXPECT_TRUE(second.ok()) << second.error().message();
}

TEST_F(NvmlStandin, LockAndResetChangeTheGpu) {
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  EXPECT_EQ(locked_mhz(), 0);
  EXPECT_EQ(sm_clock(), 1980u);

  ASSERT_TRUE((*dev)->lock_sm_clock(1410).ok());
  EXPECT_EQ(locked_mhz(), 1410);
  EXPECT_EQ(sm_clock(), 1410u);
  auto sets = calls("nvmlDeviceSetGpuLockedClocks");
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].args, (std::vector<std::string>{"0", "1410", "1410"}));
  EXPECT_EQ(sets[0].rc, 0);
  EXPECT_EQ(sets[0].pid, long(::getpid()));

  ASSERT_TRUE((*dev)->reset_sm_clock().ok());
  EXPECT_EQ(locked_mhz(), 0);
  EXPECT_EQ(sm_clock(), 1980u);
  auto resets = calls("nvmlDeviceResetGpuLockedClocks");
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].rc, 0);
}

TEST_F(NvmlStandin, UnsupportedClocksAreRefused) {
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  ASSERT_TRUE((*dev)->lock_sm_clock(1410).ok());
  for (int mhz : {1411, 2000, 330}) {
    Status st = (*dev)->lock_sm_clock(mhz);
    ASSERT_FALSE(st.ok()) << mhz;
    EXPECT_EQ(st.error().where, "nvml:0");
    EXPECT_TRUE(has(st.error().what, "nvmlDeviceSetGpuLockedClocks(" + std::to_string(mhz) + ")")) << st.error().what;
    EXPECT_TRUE(has(st.error().what, "Invalid Argument")) << st.error().what;
    EXPECT_EQ(locked_mhz(), 1410) << "a refused lock keeps the clock in effect";
  }
  // Nonsense never reaches NVML.
  const size_t before = calls("nvmlDeviceSetGpuLockedClocks").size();
  EXPECT_FALSE((*dev)->lock_sm_clock(0).ok());
  EXPECT_FALSE((*dev)->lock_sm_clock(-300).ok());
  EXPECT_EQ(calls("nvmlDeviceSetGpuLockedClocks").size(), before);
}

// Joules per second of wall time over `ms`, as the backend reads the counter.
double power_over(Device& dev, int ms) {
  using Clock = std::chrono::steady_clock;
  auto e0 = dev.energy_j();
  auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  auto e1 = dev.energy_j();
  auto t1 = Clock::now();
  if (!e0.ok() || !e1.ok()) return -1;
  return (*e1 - *e0) / std::chrono::duration<double>(t1 - t0).count();
}

TEST_F(NvmlStandin, EnergyGrowsWithTimeAndFasterAtAHighClock) {
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  auto a = (*dev)->energy_j();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto b = (*dev)->energy_j();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(*b, *a);

  const double p_default = power_over(**dev, 200);  // 1980 MHz: 90 + 310 W
  ASSERT_TRUE((*dev)->lock_sm_clock(345).ok());
  const double p_low = power_over(**dev, 200);  // 90 + 310 * (345/1980)^2 = 99.4 W
  ASSERT_TRUE((*dev)->reset_sm_clock().ok());
  EXPECT_NEAR(p_default, 400.0, 40.0);
  EXPECT_NEAR(p_low, 99.4, 10.0);
  EXPECT_GT(p_default, 3 * p_low);
  auto c = (*dev)->energy_j();
  ASSERT_TRUE(c.ok());
  EXPECT_GE(*c, *b) << "the counter is monotone";
}

TEST_F(NvmlStandin, EachCallTakesTheConfiguredLatency) {
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  ::setenv("EMO_NVML_STANDIN_LATENCY_MS", "20", 1);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE((*dev)->lock_sm_clock(1200).ok());
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(20));
  EXPECT_EQ(locked_mhz(), 1200);
  ::unsetenv("EMO_NVML_STANDIN_LATENCY_MS");
}

TEST_F(NvmlStandin, NoPermissionSaysRootIsNeeded) {
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  ::setenv("EMO_NVML_STANDIN_FAIL", "nvmlDeviceSetGpuLockedClocks:1:perm", 1);
  Status st = (*dev)->lock_sm_clock(1410);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().where, "nvml:0");
  EXPECT_TRUE(has(st.error().what, "Insufficient Permissions (4)")) << st.error().what;
  EXPECT_TRUE(has(st.error().note, "root")) << st.error().note;
  EXPECT_TRUE(has(st.error().note, "emo clockd")) << st.error().note;
  EXPECT_EQ(locked_mhz(), 0) << "a refused lock changes nothing";
  EXPECT_TRUE((*dev)->lock_sm_clock(1410).ok()) << "only the first call was to fail";
  EXPECT_EQ(locked_mhz(), 1410);
  // A reset refused likewise says so.
  ::setenv("EMO_NVML_STANDIN_FAIL", "nvmlDeviceResetGpuLockedClocks:perm", 1);
  Status reset = (*dev)->reset_sm_clock();
  ASSERT_FALSE(reset.ok());
  EXPECT_TRUE(has(reset.error().what, "nvmlDeviceResetGpuLockedClocks")) << reset.error().what;
  EXPECT_TRUE(has(reset.error().note, "root")) << reset.error().note;
  ::unsetenv("EMO_NVML_STANDIN_FAIL");
  EXPECT_TRUE((*dev)->reset_sm_clock().ok());
  EXPECT_EQ(locked_mhz(), 0);
}

TEST_F(NvmlStandin, AFailingEnergyCounterIsAnError) {
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  ::setenv("EMO_NVML_STANDIN_FAIL", "nvmlDeviceGetTotalEnergyConsumption", 1);
  for (int i = 0; i < 3; ++i) {
    auto e = (*dev)->energy_j();
    ASSERT_FALSE(e.ok());
    EXPECT_TRUE(has(e.error().what, "nvmlDeviceGetTotalEnergyConsumption failed")) << e.error().what;
  }
  ::unsetenv("EMO_NVML_STANDIN_FAIL");
  EXPECT_TRUE((*dev)->energy_j().ok());
}

// The stand-in's NVML contract itself, which a clock daemon's tests rely on.
TEST_F(NvmlStandin, ArrayQueriesFollowNvmlsSizeProtocol) {
  auto init = sym<int (*)()>("nvmlInit_v2");
  auto shutdown = sym<int (*)()>("nvmlShutdown");
  auto handle = sym<int (*)(unsigned, void**)>("nvmlDeviceGetHandleByIndex_v2");
  auto count = sym<int (*)(unsigned*)>("nvmlDeviceGetCount_v2");
  auto mem = sym<int (*)(void*, unsigned*, unsigned*)>("nvmlDeviceGetSupportedMemoryClocks");
  auto gfx = sym<int (*)(void*, unsigned, unsigned*, unsigned*)>("nvmlDeviceGetSupportedGraphicsClocks");
  auto name = sym<int (*)(void*, char*, unsigned)>("nvmlDeviceGetName");
  ASSERT_TRUE(init && shutdown && handle && count && mem && gfx && name);

  void* h = nullptr;
  EXPECT_EQ(handle(0, &h), 1) << "NVML_ERROR_UNINITIALIZED before nvmlInit_v2";
  ASSERT_EQ(init(), 0);
  unsigned n = 0;
  ASSERT_EQ(count(&n), 0);
  EXPECT_EQ(n, 1u);
  ASSERT_EQ(handle(0, &h), 0);
  EXPECT_EQ(handle(1, &h), 2);

  unsigned clocks[200] = {};
  n = 0;
  EXPECT_EQ(mem(h, &n, nullptr), 7);  // NVML_ERROR_INSUFFICIENT_SIZE, with the size needed
  EXPECT_EQ(n, 1u);
  ASSERT_EQ(mem(h, &n, clocks), 0);
  EXPECT_EQ(clocks[0], 2619u);

  n = 10;
  EXPECT_EQ(gfx(h, 2619, &n, clocks), 7);
  EXPECT_EQ(n, 110u);
  n = 200;
  ASSERT_EQ(gfx(h, 2619, &n, clocks), 0);
  ASSERT_EQ(n, 110u);
  EXPECT_EQ(clocks[0], 1980u);
  EXPECT_EQ(clocks[109], 345u);
  EXPECT_EQ(clocks[1], 1965u);
  n = 200;
  EXPECT_EQ(gfx(h, 1593, &n, clocks), 6) << "NVML_ERROR_NOT_FOUND at an unsupported memory clock";

  char buf[96];
  EXPECT_EQ(name(h, buf, 5), 7);
  ASSERT_EQ(name(h, buf, sizeof buf), 0);
  EXPECT_STREQ(buf, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(shutdown(), 0);
  EXPECT_EQ(shutdown(), 1) << "one shutdown per init";
}

// The state file is the GPU: another process's lock is seen here, and a process that dies without
// resetting leaves its lock behind, as on hardware.
TEST_F(NvmlStandin, TheStateFileIsSharedAcrossProcesses) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto dev = open_nvml_device(0);
    if (!dev.ok() || !(*dev)->lock_sm_clock(1305).ok()) ::_exit(3);
    ::_exit(0);  // no reset: the lock outlives the process
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(locked_mhz(), 1305);
  EXPECT_EQ(sm_clock(), 1305u);
  auto sets = calls("nvmlDeviceSetGpuLockedClocks");
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].pid, long(pid));

  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  ASSERT_TRUE((*dev)->reset_sm_clock().ok());
  EXPECT_EQ(locked_mhz(), 0);
}

TEST_F(NvmlStandin, FailureCountsSpanProcesses) {
  ::setenv("EMO_NVML_STANDIN_FAIL", "nvmlDeviceResetGpuLockedClocks:2", 1);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto dev = open_nvml_device(0);
    if (!dev.ok()) ::_exit(3);
    ::_exit((*dev)->reset_sm_clock().ok() ? 4 : 0);  // the first failure
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto dev = open_nvml_device(0);
  ASSERT_TRUE(dev.ok()) << dev.error().message();
  EXPECT_FALSE((*dev)->reset_sm_clock().ok()) << "the second failure";
  EXPECT_TRUE((*dev)->reset_sm_clock().ok()) << "two failures were asked for";
  auto resets = calls("nvmlDeviceResetGpuLockedClocks");
  ASSERT_EQ(resets.size(), 3u);
  EXPECT_EQ(resets[0].rc, 999);
  EXPECT_EQ(resets[1].rc, 999);
  EXPECT_EQ(resets[2].rc, 0);
}

}  // namespace
}  // namespace emo::device
