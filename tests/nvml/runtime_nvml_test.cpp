// The runtime inside a job on nvml:0 through the stand-in libnvidia-ml.so.1: the policy's locks reach
// the GPU from the controller thread, the energy counter it reads gives the measured saving, the clock
// is reset at stop(), and a job killed by SIGTERM mid-policy leaves the GPU at its default clock.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "emo/device/nvml.h"
#include "emo/runtime/runtime.h"
#include "standin_util.h"

namespace emo::runtime {
namespace {

using namespace std::chrono_literals;
using NvmlRuntime = test::StandinTest;

RuntimeOptions options(device::Device& gpu, ClockControl& clock) {
  RuntimeOptions o;
  o.program.default_clock_mhz = 1980;
  o.program.max_slowdown = 0.5;
  o.program.ranks = {{Change{0, 1200, 0}}};
  o.clock = &clock;
  o.energy_j = [&gpu] { return gpu.energy_j(); };
  o.phases = PhaseOptions{4, true, 2, 0};
  o.log_to_stderr = false;
  return o;
}

TEST_F(NvmlRuntime, LocksFromTheControllerThreadMeasuresTheSavingAndResetsAtStop) {
  auto gpu = device::open_nvml_device(0);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message();
  {
    DeviceClockControl clock(**gpu);
    auto rt = Runtime::start(options(**gpu, clock));
    ASSERT_TRUE(rt.ok()) << rt.error().message();
    for (int k = 0; k < 16; ++k) {
      (*rt)->step_begin();
      if (k == 6) {
        EXPECT_EQ(locked_mhz(), 1200) << "a policy block runs at the policy's clock";
      }
      std::this_thread::sleep_for(25ms);
    }
    (*rt)->step_begin();
    auto rep = (*rt)->stop();
    ASSERT_TRUE(rep.ok()) << rep.error().message();
    EXPECT_EQ(locked_mhz(), 0);
    // The stand-in draws 90 + 310 (f/1980)² W: 400 W at the default clock, 204 W at 1200 MHz.
    EXPECT_NEAR(rep->measured.saving_pct, 49, 8);
    EXPECT_GE(rep->measured.policy_side.energy_windows, 2);
  }
  const auto sets = calls("nvmlDeviceSetGpuLockedClocks");
  ASSERT_GE(sets.size(), 2u);  // one per policy block (the default blocks reset)
  for (const auto& c : sets) EXPECT_EQ(c.args, (std::vector<std::string>{"0", "1200", "1200"}));
  EXPECT_GE(calls("nvmlDeviceResetGpuLockedClocks").size(), sets.size());
}

TEST_F(NvmlRuntime, AJobKilledBySigtermMidPolicyLeavesTheDefaultClock) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto gpu = device::open_nvml_device(0);
    if (!gpu.ok()) ::_exit(3);
    DeviceClockControl clock(**gpu);
    RuntimeOptions o = options(**gpu, clock);
    o.phases = PhaseOptions{2, false, 1, 0};
    auto rt = Runtime::start(std::move(o));
    if (!rt.ok()) ::_exit(4);
    for (int k = 0; k < 1000; ++k) {
      (*rt)->step_begin();
      std::this_thread::sleep_for(10ms);
      if (k == 5) (void)!::write(fds[1], "x", 1);  // in the policy: 1200 MHz is locked
    }
    ::_exit(5);
  }
  ::close(fds[1]);
  char c = 0;
  ASSERT_EQ(::read(fds[0], &c, 1), 1);
  ::close(fds[0]);
  EXPECT_EQ(locked_mhz(), 1200);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(locked_mhz(), 0);
}

}  // namespace
}  // namespace emo::runtime
