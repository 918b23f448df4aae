// Calibration against a fake device whose time and power follow a known analytic truth: the fit must
// recover the truth's voltage knee, power coefficients and memory knee (which differ from the
// built-in profile it starts from), and the SM clock must be reset after success, after an error in
// the middle of the runs, and by ClockGuard on destruction and on SIGTERM/SIGINT.
#include "emo/calibrate/calibrate.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "emo/device/device.h"

namespace emo::calibrate {
namespace {

using device::BenchKind;
using device::BenchRun;
using device::BenchSpec;

// The fake GPU's truth, in the model's own form (docs/calibrate.md) so that a correct fit recovers
// it closely. Deliberately unlike the h100 profile the fit starts from (knee 1575, floor 0.824,
// P_const 74.7 W, dynamic 520 W, mem 90 W, memory knee 0.717, exponent 1.81).
struct Truth {
  double f_max = 1980;
  double v_knee = 1500, v_floor = 0.80;
  double const_w = 60, dynamic_w = 500, clock_frac = 0.25, mem_w = 80;
  double gemm_activity = 1.2;  // tensor cores burn more than the FMA loop
  double mem_knee = 0.65 * 1980, mem_gamma = 1.6;
  double fma_s = 0.004, copy_s = 0.01, flop_s_per_fpb = 0.0005;  // per iteration, at f_max
  double noise = 0.003;                                          // ± relative, deterministic per run
  double throttle_above = 0;  // > 0: FMA and GEMM runs never get above this clock (a power cap)

  double v(double f) const {
    return f <= v_knee ? v_floor : v_floor + (1 - v_floor) * (f - v_knee) / (f_max - v_knee);
  }
  double g(double f) const { return f < mem_knee ? std::pow(mem_knee / f, mem_gamma) : 1.0; }
  // Time per iteration and power of one benchmark at the clock in effect.
  void run(const BenchSpec& s, double f, double& t, double& p) const {
    double q = v(f) * v(f) * f / f_max, a = dynamic_w * clock_frac, b = dynamic_w * (1 - clock_frac);
    switch (s.kind) {
      case BenchKind::kFmaLoop:
        t = fma_s * f_max / f, p = const_w + q * (a + b);
        return;
      case BenchKind::kTensorGemm:
        t = 2 * fma_s * f_max / f, p = const_w + q * (a + gemm_activity * b);
        return;
      case BenchKind::kStreamCopy:
        t = copy_s * g(f), p = const_w + mem_w + q * a;
        return;
      case BenchKind::kIntensity: {
        double tc = s.flops_per_byte * flop_s_per_fpb * f_max / f, tm = copy_s * g(f), mx = std::max(tc, tm);
        t = mx, p = const_w + mem_w * tm / mx + q * (a + b * tc / mx);
        return;
      }
      case BenchKind::kIdle:
        t = 0, p = 55 + 10 * f / f_max;
        return;
    }
  }
};

class FakeDevice : public device::Device {
 public:
  explicit FakeDevice(Truth truth = {}) : truth_(truth), profile_(*device::builtin_profile("h100")) {}

  std::string spec() const override { return "fake:0"; }
  std::string model_name() const override { return "Fake H100-like GPU"; }
  const device::DeviceProfile& profile() const override { return profile_; }
  Result<std::vector<int>> supported_sm_clocks() override { return profile_.sm_clocks.mhz; }
  Status lock_sm_clock(int mhz) override {
    log.push_back("lock " + std::to_string(mhz));
    if (fail_lock)
      return make_error(spec(), "nvmlDeviceSetGpuLockedClocks failed: No permission", "needs root");
    locked_mhz = mhz;
    return {};
  }
  Status reset_sm_clock() override {
    log.push_back("reset");
    if (fail_reset) return make_error(spec(), "nvmlDeviceResetGpuLockedClocks failed: GPU is lost");
    locked_mhz = 0;
    if (reset_fd >= 0) (void)!::write(reset_fd, "R", 1);
    return {};
  }
  Result<double> energy_j() override { return counter_j; }
  Result<BenchRun> run_benchmark(const BenchSpec& s) override {
    ++benches;
    log.push_back(std::string("bench ") + device::to_string(s.kind));
    if (fail_on_bench == benches)
      return make_error(spec(), "emo-microbench: exited with status 1: out of memory");
    double f = locked_mhz > 0 ? locked_mhz : truth_.f_max;
    if (truth_.throttle_above > 0 && (s.kind == BenchKind::kFmaLoop || s.kind == BenchKind::kTensorGemm))
      f = std::min(f, truth_.throttle_above);
    double t = 0, p = 0;
    truth_.run(s, f, t, p);
    // Deterministic ±noise from the run number, on time and power independently.
    auto jitter = [&](int salt) {
      double u = std::fmod(std::sin(benches * 12.9898 + salt * 78.233) * 43758.5453, 1.0);
      return 1 + truth_.noise * u;  // u in (-1, 1)
    };
    BenchRun r;
    if (s.kind == BenchKind::kIdle) {
      r.seconds = s.min_seconds;
      r.iterations = 0;
    } else {
      t *= jitter(1);
      r.iterations = static_cast<int64_t>(std::ceil(s.min_seconds / t));
      r.seconds = t * double(r.iterations);
    }
    r.energy_j = p * jitter(2) * r.seconds;
    counter_j += r.energy_j;
    clocks_run.push_back(locked_mhz);
    return r;
  }

  std::vector<std::string> log;
  std::vector<int> clocks_run;  // the locked clock at each run (0 = none)
  int locked_mhz = 0;
  int benches = 0;
  int fail_on_bench = 0;  // 1-based; 0 = never
  bool fail_lock = false;
  bool fail_reset = false;
  int reset_fd = -1;

 private:
  Truth truth_;
  device::DeviceProfile profile_;
  double counter_j = 1000;
};

CalibrateOptions options() {
  CalibrateOptions o;
  o.date = "2026-01-02";
  return o;
}

TEST(Calibrate, RecoversTheVoltageKneeAndPowerCoefficientsOfAKnownDevice) {
  FakeDevice dev;
  auto r = calibrate(dev, options());
  ASSERT_TRUE(r.ok()) << r.error().message();
  const Truth t;
  const auto& p = r->profile;
  // Tolerances: the ±0.3 % noise moves the fit a little; each is far tighter than the distance
  // between the truth and the h100 profile the fit starts from.
  EXPECT_NEAR(p.voltage.knee_mhz.value, t.v_knee, 40);
  EXPECT_NEAR(p.voltage.floor_rel.value, t.v_floor, 0.015);
  EXPECT_NEAR(p.power.const_w.value, t.const_w, 5);
  EXPECT_NEAR(p.power.dynamic_w.value, t.dynamic_w, 0.03 * t.dynamic_w);
  EXPECT_NEAR(p.power.clock_frac.value, t.clock_frac, 0.03);
  EXPECT_NEAR(p.power.mem_w.value, t.mem_w, 5);
  EXPECT_NEAR(r->fit.gemm_dynamic_w, t.dynamic_w * (t.clock_frac + t.gemm_activity * (1 - t.clock_frac)),
              0.04 * 575);
  EXPECT_NEAR(p.time.mem_knee_frac.value, 0.65, 0.02);
  EXPECT_NEAR(p.time.mem_gamma.value, t.mem_gamma, 0.12);
  EXPECT_NEAR(p.idle_power_w.value, 65, 0.5);  // idle at the default (max) clock: 55 + 10
  EXPECT_TRUE(r->fit.mem_knee_seen);
  EXPECT_TRUE(r->fit.voltage_floor_seen);
  EXPECT_LT(r->fit.power_rms_pct, 1.0);
  EXPECT_LT(r->fit.fma_time_rms_pct, 0.5);
  EXPECT_TRUE(r->warnings.empty()) << r->warnings.front();
  // 6 clocks × (FMA, GEMM, 3 intensities, copy, idle), each point's residual reported.
  EXPECT_EQ(r->clocks_mhz.size(), 6u);
  EXPECT_EQ(r->measurements.size(), 6u * 7u);
  int in_fit = 0;
  for (const auto& m : r->measurements) {
    if (m.kind == BenchKind::kIdle) {
      EXPECT_FALSE(m.in_power_fit);
      continue;
    }
    ASSERT_TRUE(m.in_power_fit) << device::to_string(m.kind) << " at " << m.clock_mhz;
    EXPECT_LT(std::abs(m.power_error_pct), 2.0);
    ++in_fit;
  }
  EXPECT_EQ(r->fit.power_points, in_fit);
  EXPECT_EQ(r->profile.model, "Fake H100-like GPU");
}

TEST(Calibrate, FitDoesNotDependOnTheStartingProfile) {
  // The same measurements fitted from h200's priors instead of h100's (same power limit, other V(f),
  // memory and power values): everything the runs determine agrees.
  FakeDevice dev;
  auto r = calibrate(dev, options());
  ASSERT_TRUE(r.ok());
  auto h200 = *device::builtin_profile("h200");
  h200.voltage.knee_mhz.value = 1000;
  h200.voltage.floor_rel.value = 0.7;
  h200.power.const_w.value = 150;
  auto other = fit_profile(h200, dev.profile().sm_clocks.mhz, r->measurements, "test");
  ASSERT_TRUE(other.ok()) << other.error().message();
  EXPECT_NEAR(other->profile.voltage.knee_mhz.value, r->profile.voltage.knee_mhz.value, 1);
  EXPECT_NEAR(other->profile.power.dynamic_w.value, r->profile.power.dynamic_w.value, 0.5);
  EXPECT_NEAR(other->profile.time.mem_gamma.value, r->profile.time.mem_gamma.value, 0.01);
  EXPECT_EQ(other->profile.sm_clocks.mhz, dev.profile().sm_clocks.mhz);  // the device's table
}

TEST(Calibrate, ResetsTheClockAfterSuccess) {
  FakeDevice dev;
  auto r = calibrate(dev, options());
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(dev.locked_mhz, 0);
  ASSERT_FALSE(dev.log.empty());
  EXPECT_EQ(dev.log.back(), "reset");
  // Every run happened at a locked clock, the one the measurement says.
  ASSERT_EQ(dev.clocks_run.size(), r->measurements.size());
  for (size_t i = 0; i < dev.clocks_run.size(); ++i)
    EXPECT_EQ(dev.clocks_run[i], r->measurements[i].clock_mhz);
  EXPECT_EQ(std::count_if(dev.log.begin(), dev.log.end(),
                          [](const std::string& s) { return s.rfind("lock", 0) == 0; }),
            6);
}

TEST(Calibrate, ResetsTheClockWhenABenchmarkFailsMidway) {
  FakeDevice dev;
  dev.fail_on_bench = 3;
  auto r = calibrate(dev, options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("out of memory"), std::string::npos) << r.error().message();
  EXPECT_EQ(dev.benches, 3);  // stopped at the failure
  EXPECT_EQ(dev.locked_mhz, 0);
  ASSERT_FALSE(dev.log.empty());
  EXPECT_EQ(dev.log.back(), "reset");
  EXPECT_EQ(dev.log.front().rfind("lock", 0), 0u);
}

TEST(Calibrate, FailedLockIsReportedAndUndone) {
  FakeDevice dev;
  dev.fail_lock = true;
  auto r = calibrate(dev, options());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().note, "needs root");
  EXPECT_EQ(dev.benches, 0);
  ASSERT_GE(dev.log.size(), 2u);
  EXPECT_EQ(dev.log.back(), "reset");
}

TEST(Calibrate, UnsupportedClockIsAnErrorBeforeAnythingIsLocked) {
  FakeDevice dev;
  CalibrateOptions o = options();
  o.clocks_mhz = {1980, 1000, 600};  // the h100 table steps by 15 from 345: 1000 is not in it
  auto r = calibrate(dev, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("1000 MHz is not a supported SM clock"), std::string::npos);
  EXPECT_NE(r.error().note.find("1005"), std::string::npos) << r.error().note;
  EXPECT_TRUE(dev.log.empty());
  o.clocks_mhz = {1980, 1005};
  auto two = calibrate(dev, o);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.error().what.find("3 or more"), std::string::npos);
}

TEST(Calibrate, ClocksGivenAreTheClocksMeasured) {
  FakeDevice dev;
  CalibrateOptions o = options();
  o.clocks_mhz = {1980, 705, 1200, 1500, 990};
  auto r = calibrate(dev, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->clocks_mhz, (std::vector<int>{705, 990, 1200, 1500, 1980}));
}

TEST(Calibrate, DefaultClocksSpreadFromThirtyPercentOfMaxToMax) {
  auto a100 = *device::builtin_profile("a100");
  auto c = default_clocks(a100.sm_clocks.mhz, 6);
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c.front(), 420);  // 0.3 × 1410 = 423, snapped to the table
  EXPECT_EQ(c.back(), 1410);
  for (size_t i = 1; i < c.size(); ++i) {
    EXPECT_GT(c[i], c[i - 1]);
    EXPECT_NEAR(c[i] - c[i - 1], (1410 - 423) / 5.0, 15);
    EXPECT_TRUE(std::binary_search(a100.sm_clocks.mhz.begin(), a100.sm_clocks.mhz.end(), c[i]));
  }
  // A short table gives what it has.
  EXPECT_EQ(default_clocks({900, 1000, 1100}, 6), (std::vector<int>{900, 1000, 1100}));
  EXPECT_TRUE(default_clocks({}, 6).empty());
}

TEST(Calibrate, ProfileNamesItsSourcesAndLoadsBack) {
  FakeDevice dev;
  auto r = calibrate(dev, options());
  ASSERT_TRUE(r.ok());
  auto j = nlohmann::json::parse(to_json(*r));
  EXPECT_EQ(j["schema"], "emo-calibration/1");
  EXPECT_EQ(j["device"], "fake:0");
  EXPECT_EQ(j["measurements"].size(), r->measurements.size());
  auto back = device::profile_from_json(j["profile"].dump(), "calibrated.json");
  ASSERT_TRUE(back.ok()) << back.error().message();
  const std::string prefix = "calibrated: emo calibrate on fake:0, 2026-01-02";
  for (const device::Sourced* s : {&back->voltage.knee_mhz, &back->voltage.floor_rel, &back->power.const_w,
                                   &back->power.dynamic_w, &back->power.clock_frac, &back->power.mem_w,
                                   &back->time.mem_knee_frac, &back->time.mem_gamma, &back->idle_power_w}) {
    EXPECT_EQ(s->source.rfind(prefix, 0), 0u) << s->source;
  }
  EXPECT_EQ(back->sm_clocks.source.rfind(prefix, 0), 0u);
  // What calibration does not measure stays the base profile's, with its source.
  EXPECT_EQ(back->tdp_w.source, dev.profile().tdp_w.source);
  EXPECT_DOUBLE_EQ(back->switch_latency_median_ms.value, dev.profile().switch_latency_median_ms.value);
}

TEST(Calibrate, RunsBelowTheLockAreLeftOutOfTheFit) {
  Truth t;
  t.throttle_above = 1800;  // a power cap: compute-heavy runs never get above 1800 MHz
  FakeDevice dev(t);
  auto r = calibrate(dev, options());
  ASSERT_TRUE(r.ok()) << r.error().message();
  bool fma_top_excluded = false;
  for (const auto& m : r->measurements) {
    if (m.kind == BenchKind::kFmaLoop && m.clock_mhz == 1980)
      fma_top_excluded = !m.in_power_fit && !m.excluded.empty();
  }
  EXPECT_TRUE(fma_top_excluded);
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings.front().find("slower than 1/f"), std::string::npos) << r->warnings.front();
  EXPECT_LT(r->fit.fma_time_rms_pct, 0.5);  // the remaining FMA runs follow 1/f
}

TEST(Calibrate, FlatStreamCopyKeepsTheExponentAndSaysSo) {
  Truth t;
  t.mem_knee = 500;  // below every calibrated clock: the copy never slows down
  FakeDevice dev(t);
  auto r = calibrate(dev, options());
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(r->fit.mem_knee_seen);
  EXPECT_DOUBLE_EQ(r->profile.time.mem_gamma.value, dev.profile().time.mem_gamma.value);
  EXPECT_NEAR(r->profile.time.mem_knee_frac.value, double(r->clocks_mhz.front()) / 1980, 1e-9);
  EXPECT_NEAR(r->profile.voltage.knee_mhz.value, t.v_knee, 40);  // the power fit is unaffected
}

TEST(Calibrate, MissingBenchmarksAreAnError) {
  auto h100 = *device::builtin_profile("h100");
  std::vector<Measurement> ms;
  for (int f : {990, 1500, 1980}) {
    Measurement m;
    m.clock_mhz = f;
    m.kind = BenchKind::kFmaLoop;
    m.run = BenchRun{1.0, 100, 300.0};
    ms.push_back(m);
  }
  auto r = fit_profile(h100, h100.sm_clocks.mhz, ms, "test");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("stream-copy"), std::string::npos);
  ms[0].run.energy_j = 0;
  auto zero = fit_profile(h100, h100.sm_clocks.mhz, ms, "test");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().what.find("no energy"), std::string::npos);
}

// ---- ClockGuard -----------------------------------------------------------------------------------

TEST(ClockGuard, ResetsOnDestruction) {
  FakeDevice dev;
  {
    device::ClockGuard guard(dev);
    ASSERT_TRUE(guard.lock(1200).ok());
    EXPECT_TRUE(guard.locked());
    EXPECT_EQ(dev.locked_mhz, 1200);
    ASSERT_TRUE(guard.lock(900).ok());  // relocking keeps one guard
    EXPECT_EQ(dev.locked_mhz, 900);
  }
  EXPECT_EQ(dev.locked_mhz, 0);
  EXPECT_EQ(dev.log.back(), "reset");
  // A guard that never locked leaves the device alone.
  FakeDevice untouched;
  { device::ClockGuard guard(untouched); }
  EXPECT_TRUE(untouched.log.empty());
}

TEST(ClockGuard, AFailedResetIsRetriedSaidAndCounted) {
  const int before = device::clock_reset_failures();
  FakeDevice dev;
  testing::internal::CaptureStderr();
  {
    device::ClockGuard guard(dev);
    ASSERT_TRUE(guard.lock(1200).ok());
    dev.fail_reset = true;
    Status s = guard.reset();  // an explicit reset gives the error back, and keeps the guard armed
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().what.find("GPU is lost"), std::string::npos);
    EXPECT_TRUE(guard.locked());
  }  // the destructor tries again, then says so and counts it
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("error: the SM clock of fake:0 could not be reset"), std::string::npos) << err;
  EXPECT_EQ(device::clock_reset_failures(), before + 1);
  EXPECT_GE(std::count(dev.log.begin(), dev.log.end(), "reset"), 3);
  // The slot is free again for another guard.
  FakeDevice other;
  device::ClockGuard g2(other);
  EXPECT_TRUE(g2.lock(900).ok());
}

TEST(ClockGuard, OneGuardHoldsALockAtATime) {
  FakeDevice a, b;
  device::ClockGuard ga(a);
  ASSERT_TRUE(ga.lock(1200).ok());
  {
    device::ClockGuard gb(b);
    Status s = gb.lock(900);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().what.find("another ClockGuard"), std::string::npos);
    EXPECT_TRUE(b.log.empty());
  }
  ASSERT_TRUE(ga.reset().ok());
  EXPECT_FALSE(ga.locked());
  device::ClockGuard gb(b);
  EXPECT_TRUE(gb.lock(900).ok());  // free again after the reset
}

// Runs `body` in a child process; returns its wait status and what it wrote to the pipe.
template <class Body>
std::pair<int, std::string> in_child(Body body) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    body(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char c;
  while (::read(fds[0], &c, 1) == 1) got += c;
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {status, got};
}

int g_prev_fd = -1;
extern "C" void previous_handler(int) {
  (void)!::write(g_prev_fd, "P", 1);
  ::_exit(7);
}

TEST(ClockGuard, SigintResetsThenRunsTheEarlierHandler) {
  auto [status, got] = in_child([](int fd) {
    g_prev_fd = fd;
    ::signal(SIGINT, previous_handler);
    FakeDevice dev;
    dev.reset_fd = fd;
    device::ClockGuard guard(dev);
    if (!guard.lock(1200).ok()) ::_exit(3);
    ::raise(SIGINT);
    ::_exit(4);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_EQ(got, "RP");  // reset first, then the handler that was there before
}

TEST(ClockGuard, HandlersAreRemovedAfterTheReset) {
  auto [status, got] = in_child([](int fd) {
    g_prev_fd = fd;
    ::signal(SIGINT, previous_handler);
    FakeDevice dev;
    dev.reset_fd = fd;
    {
      device::ClockGuard guard(dev);
      if (!guard.lock(1200).ok()) ::_exit(3);
    }
    ::raise(SIGINT);  // the guard is gone: only the earlier handler runs
    ::_exit(4);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_EQ(got, "RP");  // "R" from the destructor, "P" from the signal
}

}  // namespace
// Each signal the guard handles resets the clock, then still ends the process as it would have.
TEST(ClockGuard, EachSignalResetsTheClockAndStillKillsTheProcess) {
  for (int sig : {SIGTERM, SIGHUP, SIGQUIT}) {
    auto [status, got] = in_child([sig](int fd) {
      const rlimit no_core{0, 0};  // SIGQUIT's default action would dump core
      ::setrlimit(RLIMIT_CORE, &no_core);
      FakeDevice dev;
      dev.reset_fd = fd;
      device::ClockGuard guard(dev);
      if (!guard.lock(1200).ok()) ::_exit(3);
      ::raise(sig);
      ::_exit(4);
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << sig << ": exit status " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_EQ(got, "R");
  }
}

}  // namespace emo::calibrate
