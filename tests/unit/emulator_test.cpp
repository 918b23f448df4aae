// The emulated GPU: at the default clock it reproduces the trace it was given; lower clocks slow
// compute-bound work more than memory-bound work; clock changes land after the switching latency;
// the energy counter behaves like NVML's; its Kineto output reads back into the same step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../../src/emulator/emulator_detail.h"
#include "../../src/emulator/truth.h"
#include "emo/analysis/analysis.h"
#include "emo/device/profile.h"
#include "emo/emulator/emulator.h"
#include "emo/executor/executor.h"
#include "emo/model/datasets.h"
#include "emo/synth/synth.h"
#include "synth_workload.h"
#include "test_util.h"

namespace emo::emulator {
namespace {

analysis::Workload synth_workload(synth::Workload kind, int ranks, int layers) {
  return test::synth_workload(kind, ranks, layers, 3);
}

EmulatedGpu gpu(const char* name, uint64_t seed = 5) { return EmulatedGpu(*device::builtin_profile(name), seed); }

TEST(Emulator, DefaultClockReproducesTheTrace) {
  auto w = synth_workload(synth::Workload::kTrainDP, 2, 3);
  RunOptions o;
  o.jitter = 0;
  auto run = gpu("h100").run(w.ranks, {}, o);
  ASSERT_TRUE(run.ok()) << run.error().what;
  // The emulated GPU times the step with the executor: at the default clock (the trace's durations)
  // it is the executor's step, and so the measured one.
  auto ex = executor::execute(w.ranks);
  ASSERT_TRUE(ex.ok());
  ASSERT_EQ(run->step_ns.size(), 1u);
  EXPECT_NEAR(double(run->step_ns[0]), double(ex->span_ns), 0.001 * double(ex->span_ns));
  EXPECT_NEAR(double(run->step_ns[0]), double(ex->measured_span_ns), 0.002 * double(ex->measured_span_ns));
  // Energy lies between all-idle and all-at-TDP.
  const double span_s = double(run->end_ns - run->begin_ns) * 1e-9;
  const device::DeviceProfile p = *device::builtin_profile("h100");
  EXPECT_GT(run->energy_j, 2 * 0.8 * p.idle_power_w.value * span_s);
  EXPECT_LT(run->energy_j, 2 * p.tdp_w.value * span_s);
}

// A caller that takes each rank's trace as it is written gets the same text as the run would hold, rank
// by rank with the rank's energy already in; an error it returns ends the run.
TEST(Emulator, TracesAreHandedOverRankByRankAsWritten) {
  auto w = synth_workload(synth::Workload::kTrainDP, 3, 2);
  RunOptions o;
  o.steps = 3;
  auto whole = gpu("a100").run(w.ranks, ClockSchedule::locked(1200), o);
  ASSERT_TRUE(whole.ok()) << whole.error().what;
  std::vector<std::string> taken;
  o.take_trace = [&](RankRun& rr) -> Status {
    EXPECT_FALSE(rr.energy.empty());
    EXPECT_GT(rr.energy_j, 0);
    taken.push_back(std::move(rr.trace_json));
    return {};
  };
  auto handed = gpu("a100").run(w.ranks, ClockSchedule::locked(1200), o);
  ASSERT_TRUE(handed.ok()) << handed.error().what;
  ASSERT_EQ(taken.size(), 3u);
  for (size_t r = 0; r < taken.size(); ++r) {
    EXPECT_EQ(taken[r], whole->ranks[r].trace_json) << r;
    EXPECT_TRUE(handed->ranks[r].trace_json.empty()) << r;
    EXPECT_EQ(handed->ranks[r].energy_j, whole->ranks[r].energy_j) << r;
  }
  int calls = 0;
  o.take_trace = [&](RankRun&) -> Status { return ++calls == 2 ? make_error("disk", "full") : Status{}; };
  auto stopped = gpu("a100").run(w.ranks, ClockSchedule::locked(1200), o);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.error().what, "full");
  EXPECT_EQ(calls, 2);
}

// Energy per step: the steps add up to the run, and a run that starts at the default clock and lowers
// it within the first step spends more in that step than in the next ones (so evaluations leave the
// first step out of energy as they do of time).
TEST(Emulator, StepEnergiesAddUpAndTheFirstStepCarriesTheStartingClock) {
  auto w = synth_workload(synth::Workload::kTrainDP, 1, 24);  // steps of ≈ 80 ms: the switch lands in the first
  RunOptions o;
  o.steps = 4;
  o.trace_steps = 0;
  ClockSchedule s;  // starts at the default clock; lowered at the start of every step
  s.ranks.assign(1, {{0, 1200}});
  auto run = gpu("h100").run(w.ranks, s, o);
  ASSERT_TRUE(run.ok()) << run.error().what;
  ASSERT_EQ(run->step_energy_j.size(), 4u);
  double sum = 0;
  for (double e : run->step_energy_j) sum += e;
  EXPECT_NEAR(sum, run->energy_j, 1e-9 * run->energy_j);
  std::printf("step energies %.3f %.3f %.3f %.3f J, steps %.1f ms\n", run->step_energy_j[0], run->step_energy_j[1],
              run->step_energy_j[2], run->step_energy_j[3], double(run->step_ns[0]) * 1e-6);
  EXPECT_GT(run->step_energy_j[0], 1.02 * run->step_energy_j[2]);  // the switch lands tens of ms in
  EXPECT_NEAR(run->step_energy_j[2], run->step_energy_j[3], 0.02 * run->step_energy_j[3]);
}

// Two changes issued 1 ns apart land at the same time when the second's switching latency is the
// shorter (it is clamped behind the first): the clock in effect is then the second, for the power as
// for the kernels' time — a run that lowers and at once restores the default clock every step (here
// through an online schedule, as `emo apply` drives it) costs what the default clock costs.
TEST(Emulator, ChangesLandingTogetherLeaveTheLastOneInEffectForPowerToo) {
  auto w = synth_workload(synth::Workload::kTrainDP, 1, 24);
  const EmulatedGpu g = gpu("h100");
  RunOptions o;
  o.steps = 20;
  o.trace_steps = 0;
  o.energy_log = false;
  auto locked = g.run(w.ranks, ClockSchedule::locked(1980), o);
  ASSERT_TRUE(locked.ok());
  ClockSchedule s;
  int calls = 0;
  s.online = [&](int, int64_t start, std::vector<std::vector<ClockChange>>& out) {
    ++calls;
    out[0] = {{start, 1200}, {start + 1, 1980}};
  };
  auto run = g.run(w.ranks, s, o);
  ASSERT_TRUE(run.ok()) << run.error().what;
  EXPECT_EQ(calls, 20);
  EXPECT_EQ(run->ranks[0].clock_changes, 40);
  for (size_t k = 1; k < run->step_energy_j.size(); ++k) {
    EXPECT_NEAR(double(run->step_ns[k]), double(locked->step_ns[k]), 0.08 * double(locked->step_ns[k])) << k;
    EXPECT_GT(run->step_energy_j[k], 0.97 * locked->step_energy_j[k]) << k;
  }
}

TEST(Emulator, LowerClockSlowsComputeMoreThanMemory) {
  const device::DeviceProfile p = *device::builtin_profile("a100");
  detail::GpuTruth g = detail::make_gpu_truth(p, 1);
  const double half = p.max_clock_mhz() / 2.0;
  const double gemm = g.time_ratio(detail::make_kernel_truth("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 1), half);
  const double elem = g.time_ratio(detail::make_kernel_truth("void at::native::vectorized_elementwise_kernel<4>", 1),
                                   0.8 * p.max_clock_mhz());
  EXPECT_GT(gemm, 1.8);   // ~1/f
  EXPECT_LT(gemm, 2.05);
  EXPECT_LT(elem, 1.05);  // flat above the memory knee
  // Power rises with the clock for every class.
  for (const char* name : {"ampere_gemm", "flash_fwd_kernel", "vectorized_elementwise", "reduce_kernel", "ncclDevKernel"}) {
    auto k = detail::make_kernel_truth(name, 1);
    EXPECT_LT(g.power_w(k, half), g.power_w(k, p.max_clock_mhz())) << name;
  }
}

TEST(Emulator, LockedLowClockIsSlowerAndClockChangesLandLate) {
  auto w = synth_workload(synth::Workload::kTrainDP, 1, 4);
  EmulatedGpu dev = gpu("h100");
  RunOptions o;
  o.jitter = 0;
  auto hi = dev.run(w.ranks, ClockSchedule::locked(1980), o);
  auto lo = dev.run(w.ranks, ClockSchedule::locked(990), o);
  ASSERT_TRUE(hi && lo);
  EXPECT_GT(lo->step_ns[0], hi->step_ns[0] * 5 / 4);
  // A change issued at the step's start takes effect only after the switching latency: the first
  // milliseconds still run at the old clock, so the step is faster than when locked low throughout.
  ClockSchedule s;
  s.initial_mhz = 1980;
  s.ranks = {{{0, 990}}};
  auto mixed = dev.run(w.ranks, s, o);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->ranks[0].clock_changes, 1);
  EXPECT_LT(mixed->step_ns[0], lo->step_ns[0]);
  EXPECT_GE(mixed->step_ns[0], hi->step_ns[0]);
}

TEST(Emulator, UnsupportedClockIsAnError) {
  auto w = synth_workload(synth::Workload::kTrainDP, 1, 1);
  auto run = gpu("h100").run(w.ranks, ClockSchedule::locked(1234), {});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().what.find("not a supported clock"), std::string::npos);
}

TEST(Emulator, RunLengthOutsideItsRangeIsAnError) {
  auto w = synth_workload(synth::Workload::kTrainDP, 1, 1);
  for (int steps : {0, kMaxEmulatedSteps + 1, 1'000'000'000}) {  // (a billion used to run for hours)
    RunOptions o;
    o.steps = steps;
    o.trace_steps = 0;
    auto run = gpu("h100").run(w.ranks, ClockSchedule::locked(1980), o);
    ASSERT_FALSE(run.ok()) << steps;
    EXPECT_NE(run.error().what.find("steps must be from 1 to"), std::string::npos) << run.error().what;
  }
  // Within the step count, but more GPU ops and calls than a run executes: an error naming both.
  auto program = executor::Program::compile(w.ranks);
  ASSERT_TRUE(program.ok());
  const auto items = int64_t(program->gpu_ops().size() + program->calls().size());
  EXPECT_LE(items, int64_t(w.graph.num_nodes()));  // the packing's plans, bounded by nodes, always run
  RunOptions o;
  o.steps = int(kMaxRunNodeSteps / items) + 1;
  o.trace_steps = 0;
  auto run = gpu("h100").run(w.ranks, ClockSchedule::locked(1980), o);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().what.find("GPU ops and runtime calls are more than a run executes"), std::string::npos)
      << run.error().what;
  // A short step runs as many times as 2 s of it take: here a few thousand steps.
  o.steps = 3000;
  o.energy_log = false;
  auto many = gpu("h100").run(w.ranks, ClockSchedule::locked(1980), o);
  ASSERT_TRUE(many.ok()) << many.error().message();
  EXPECT_EQ(many->step_ns.size(), 3000u);
}

TEST(Emulator, EnergyCounterUpdatesCoarselyAndAddsUp) {
  auto w = synth_workload(synth::Workload::kTrainDP, 1, 3);
  RunOptions o;
  o.steps = 40;
  o.trace_steps = 0;
  auto run = gpu("a100").run(w.ranks, {}, o);
  ASSERT_TRUE(run.ok());
  const auto& log = run->ranks[0].energy;
  ASSERT_GT(log.size(), 3u);
  for (size_t i = 1; i < log.size(); ++i) {
    EXPECT_GE(log[i].energy_mj, log[i - 1].energy_mj);
    const double gap_ms = double(log[i].t_ns - log[i - 1].t_ns) / 1e6;
    EXPECT_GT(gap_ms, 15);
    EXPECT_LT(gap_ms, 25);
  }
  // The counter's rate over its whole log is the run's mean power.
  const double span_s = double(log.back().t_ns - log.front().t_ns) * 1e-9;
  const double counter_w = double(log.back().energy_mj - log.front().energy_mj) * 1e-3 / span_s;
  const double mean_w = run->energy_j / (double(run->end_ns - run->begin_ns) * 1e-9);
  EXPECT_NEAR(counter_w, mean_w, 0.1 * mean_w);
}

TEST(Emulator, TraceReadsBackAsTheSameStep) {
  auto w = synth_workload(synth::Workload::kTrainDP, 2, 2);
  RunOptions o;
  o.steps = 3;
  o.trace_steps = 2;
  o.jitter = 0;
  auto run = gpu("h200").run(w.ranks, ClockSchedule::locked(1410), o);
  ASSERT_TRUE(run.ok());
  std::vector<trace::RankTrace> back;
  for (const auto& rr : run->ranks) {
    auto t = trace::parse_trace(rr.trace_json, "emulated");
    ASSERT_TRUE(t.ok()) << t.error().what;
    EXPECT_EQ(t->stats.error_count(), 0);
    back.push_back(std::move(*t));
  }
  auto w2 = analysis::assemble(std::move(back), {});
  ASSERT_TRUE(w2.ok()) << w2.error().what;
  int64_t gpu_ops = 0, gpu_ops2 = 0;
  for (auto k : w.graph.kind) gpu_ops += graph::is_gpu(k);
  for (auto k : w2->graph.kind) gpu_ops2 += graph::is_gpu(k);
  EXPECT_EQ(gpu_ops, gpu_ops2);
  replay::Replayer rp(w2->graph);
  replay::Timeline tl;
  rp.run(tl);
  EXPECT_NEAR(double(tl.makespan_ns()), double(run->step_ns.back()), 0.01 * double(run->step_ns.back()));
}

TEST(Emulator, SameSeedSameGpuDifferentSeedDifferentGpu) {
  auto w = synth_workload(synth::Workload::kInferDecode, 1, 2);
  auto a = gpu("h100", 1).run(w.ranks, ClockSchedule::locked(1200), {});
  auto b = gpu("h100", 1).run(w.ranks, ClockSchedule::locked(1200), {});
  auto c = gpu("h100", 2).run(w.ranks, ClockSchedule::locked(1200), {});
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->step_ns, b->step_ns);
  EXPECT_EQ(a->energy_j, b->energy_j);
  EXPECT_NE(a->energy_j, c->energy_j);
}

// scripts/power_sensitivity.py moves one power parameter of the h100 profile in a profile file and
// builds the emulated GPU from it: the file must load, and the GPU drawn from it (same seed, so the
// same ±3–7 % draw) must move by exactly that factor where the truth's formula says it does.
TEST(Emulator, ScaledProfileFileMovesTheTruthByItsFactor) {
  const device::DeviceProfile h100 = *device::builtin_profile("h100");
  const std::string dir = test::temp_dir("emulator_scaled_profile");
  auto scaled = [&](const char* group, const char* key, double factor) {
    auto j = nlohmann::json::parse(device::profile_to_json(h100));
    j[group][key]["value"] = j[group][key]["value"].get<double>() * factor;
    const std::string path = dir + "/h100_" + key + ".json";
    std::ofstream(path) << j.dump(1);
    auto p = device::load_profile(path);
    EXPECT_TRUE(p.ok()) << p.error().message();
    return *p;
  };
  const uint64_t seed = 3;
  const detail::GpuTruth g0 = detail::make_gpu_truth(h100, seed);
  const detail::KernelTruth fma = detail::fma_truth();  // no memory term: power is static + V²·f dynamic
  const double below_knee = 990, f_max = h100.max_clock_mhz();

  // Dynamic power x1.2: the dynamic part at any clock is 1.2x, static unchanged.
  const detail::GpuTruth gd = detail::make_gpu_truth(scaled("power_model", "dynamic_w", 1.2), seed);
  EXPECT_NEAR(gd.dynamic_w / g0.dynamic_w, 1.2, 1e-12);
  EXPECT_NEAR(gd.dynamic_part_w(fma, below_knee) / g0.dynamic_part_w(fma, below_knee), 1.2, 1e-9);
  EXPECT_EQ(gd.static_w, g0.static_w);

  // Static power x0.8: below the knee the leakage is static_w itself, so busy power falls by 0.2·static_w.
  const detail::GpuTruth gs = detail::make_gpu_truth(scaled("power_model", "const_w", 0.8), seed);
  EXPECT_NEAR(gs.power_w(fma, below_knee) - g0.power_w(fma, below_knee), -0.2 * g0.static_w, 1e-9);
  EXPECT_NEAR(gs.dynamic_part_w(fma, below_knee), g0.dynamic_part_w(fma, below_knee), 1e-9);

  // Voltage floor x0.8: dynamic power below the knee goes as V², i.e. 0.64x; at f_max V = 1 either way.
  const detail::GpuTruth gf = detail::make_gpu_truth(scaled("voltage", "floor_rel", 0.8), seed);
  EXPECT_NEAR(gf.v_floor / g0.v_floor, 0.8, 1e-12);
  EXPECT_NEAR(gf.dynamic_part_w(fma, below_knee) / g0.dynamic_part_w(fma, below_knee), 0.64, 1e-9);
  EXPECT_NEAR(gf.dynamic_part_w(fma, f_max), g0.dynamic_part_w(fma, f_max), 1e-9);

  // Voltage knee x0.8 (1575 -> 1260 MHz): at 1400 MHz the voltage rises above the floor, which it did
  // not before; below the new knee nothing changes.
  const detail::GpuTruth gk = detail::make_gpu_truth(scaled("voltage", "knee_mhz", 0.8), seed);
  EXPECT_NEAR(gk.v_knee / g0.v_knee, 0.8, 1e-12);
  EXPECT_EQ(g0.voltage(1400), g0.v_floor);
  EXPECT_GT(gk.voltage(1400), g0.voltage(1400) + 0.01);
  EXPECT_EQ(gk.voltage(below_knee), g0.voltage(below_knee));

  // The whole emulated GPU: time depends on the power parameters only through the power limit (a
  // throttled kernel's trace duration stands for its throttle clock); with the limit lifted it does
  // not, and energy still does.
  auto w = synth_workload(synth::Workload::kTrainDP, 1, 2);
  RunOptions o;
  o.jitter = 0;
  device::DeviceProfile cool = h100, hot = scaled("power_model", "dynamic_w", 1.2);
  cool.tdp_w.value *= 10;
  hot.tdp_w.value *= 10;
  auto base = EmulatedGpu(cool, seed).run(w.ranks, ClockSchedule::locked(1200), o);
  auto more = EmulatedGpu(hot, seed).run(w.ranks, ClockSchedule::locked(1200), o);
  ASSERT_TRUE(base && more);
  EXPECT_EQ(base->step_ns, more->step_ns);
  EXPECT_GT(more->energy_j, base->energy_j * 1.03);
}

// The power limit: a kernel that would draw more than the board's limit at f_max (an A100 GEMM) runs
// at the lower clock where it meets the limit, as the hardware's power brake has it. Its time then
// stops shortening: at f_max it is longer than 1/f scaling from a clock below the throttle gives, it
// takes as long at every clock above its throttle clock, and it draws no more than the limit there.
TEST(Emulator, AKernelOverThePowerLimitThrottlesItsClock) {
  const auto profile = *device::builtin_profile("a100");
  for (uint64_t seed : {1, 2, 3}) {
    detail::GpuTruth g = detail::make_gpu_truth(profile, seed);
    detail::KernelTruth k = detail::make_kernel_truth("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x32", seed);
    ASSERT_EQ(k.cls, detail::KernelClass::kGemm);
    const detail::KernelTruth free = k;  // before set_throttle: nothing limits its clock
    // What it would draw at f_max with nothing limiting it: leakage at V(f_max) plus its dynamic power.
    const double unlimited = g.static_w * (1 + g.leak_slope) + g.dynamic_part_w(free, g.f_max);
    g.set_throttle(k);
    ASSERT_GT(unlimited, g.tdp_w) << "this GEMM should draw more than the A100's limit at f_max (seed " << seed << ")";
    ASSERT_LT(k.throttle_mhz, g.f_max);
    ASSERT_GT(k.throttle_mhz, 0.5 * g.f_max);
    const double low = 0.6 * g.f_max;  // below the throttle clock: the kernel runs at the clock set
    ASSERT_LT(low, k.throttle_mhz);
    // From `low` to f_max: its time shortens by less than 1/f, and by less than the same kernel's without
    // the limit (the times are relative to f_max as each runs there).
    const double gain = g.time_ratio(k, low) / g.time_ratio(k, g.f_max);
    EXPECT_LT(gain * 1.04, g.f_max / low) << "seed " << seed;
    EXPECT_LT(gain * 1.04, g.time_ratio(free, low) / g.time_ratio(free, g.f_max)) << "seed " << seed;
    EXPECT_NEAR(g.time_ratio(k, 0.5 * (k.throttle_mhz + g.f_max)), g.time_ratio(k, g.f_max), 1e-12);
    EXPECT_GT(g.time_ratio(k, 0.95 * k.throttle_mhz), g.time_ratio(k, g.f_max) * 1.02);
    for (double f : {k.throttle_mhz, 0.5 * (k.throttle_mhz + g.f_max), g.f_max}) {
      EXPECT_LE(g.power_w(k, f), g.tdp_w * (1 + 1e-9)) << f << " MHz";
      EXPECT_GT(g.power_w(k, f), g.tdp_w * 0.999) << f << " MHz";  // at the limit, not below it
    }
    EXPECT_LT(g.power_w(k, 0.9 * k.throttle_mhz), g.tdp_w * 0.99);
    // A memory-bound kernel draws far less: it never throttles.
    detail::KernelTruth e = detail::make_kernel_truth("vectorized_elementwise_kernel", seed);
    g.set_throttle(e);
    EXPECT_GE(e.throttle_mhz, g.f_max);
  }
  // In a run: a GEMM-heavy step on an A100 takes as long at 1395 MHz as at 1410 (its GEMMs throttle
  // below both), while a lower clock still slows it.
  auto w = synth_workload(synth::Workload::kTrainDP, 1, 4);
  auto top = gpu("a100", 1).run(w.ranks, ClockSchedule::locked(1410), {});
  auto near = gpu("a100", 1).run(w.ranks, ClockSchedule::locked(1395), {});
  auto below = gpu("a100", 1).run(w.ranks, ClockSchedule::locked(1050), {});
  ASSERT_TRUE(top && near && below);
  EXPECT_NEAR(near->mean_step_ns() / top->mean_step_ns(), 1.0, 0.002);
  EXPECT_GT(below->mean_step_ns() / top->mean_step_ns(), 1.05);
}

// ---- the truth's curves against measured DVFS data ----
namespace shape {

struct Fit {
  double time_mape = 0, power_mape = 0;
  size_t units = 0;
};

// For each measured unit, the best kernel of the truth's family (compute share, overhead, activity on
// a grid) for its normalized time curve T(f)/T(f_max) and power curve P(f)/P(f_max); the median over
// units of the per-unit MAPE says whether the emulator's curves have the real data's shape.
Fit fit_family(const model::Dataset& d, const device::DeviceProfile& p, double min_frac) {
  detail::GpuTruth g = detail::make_gpu_truth(p, 1);
  std::vector<double> tm, pm;
  for (const auto& u : d.units) {
    if (u.samples.size() < 4) continue;
    const model::Point& top = u.samples.back();
    g.f_max = top.clock_mhz;  // normalize at the unit's highest measured clock
    double best_t = 1e9, best_p = 1e9;
    for (double c = 0.0; c <= 1.0001; c += 0.02) {
      for (double o = 0.0; o <= 0.6001; o += 0.02) {
        detail::KernelTruth k;
        k.compute = std::min(0.999, c);
        k.overhead = o;
        double et = 0;
        size_t n = 0;
        for (const auto& s : u.samples) {
          if (s.clock_mhz < min_frac * top.clock_mhz) continue;
          const double want = s.time_s / top.time_s;
          et += std::abs(g.time_ratio(k, s.clock_mhz) - want) / want;
          ++n;
        }
        et /= double(std::max<size_t>(1, n));
        if (et > best_t + 1e-12) continue;
        best_t = et;
        // Power shape at this time fit: best activity split (static vs dynamic) on a grid.
        double bp = 1e9;
        for (double act = 0.2; act <= 1.6; act += 0.05) {
          k.activity = act;
          double ep = 0;
          const double p_top = g.power_w(k, top.clock_mhz);
          const double m_top = top.energy_j / top.time_s;
          for (const auto& s : u.samples) {
            if (s.clock_mhz < min_frac * top.clock_mhz) continue;
            const double want = (s.energy_j / s.time_s) / m_top;
            ep += std::abs(g.power_w(k, s.clock_mhz) / p_top - want) / want;
          }
          bp = std::min(bp, ep / double(std::max<size_t>(1, n)));
        }
        best_p = bp;
      }
    }
    tm.push_back(100 * best_t);
    pm.push_back(100 * best_p);
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + ptrdiff_t(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  Fit f;
  f.units = tm.size();
  if (!tm.empty()) {
    f.time_mape = median(tm);
    f.power_mape = median(pm);
  }
  return f;
}

}  // namespace shape

TEST(EmulatorShape, FitsTheV100KernelSweeps) {
  EMO_REQUIRE_SHARED(path, "dvfs/dvfs_v100pcie_nvdvfsbench_real_slim.csv");
  auto d = model::load_dataset(path, model::Format::kNvDvfs);
  ASSERT_TRUE(d.ok()) << d.error().what;
  const shape::Fit f = shape::fit_family(*d, *device::builtin_profile("v100-pcie"), 0.45);
  std::printf("V100 kernel sweeps: %zu units, median time MAPE %.2f %%, power MAPE %.2f %%\n", f.units,
              f.time_mape, f.power_mape);
  ASSERT_GT(f.units, 10u);
  EXPECT_LT(f.time_mape, 3.0);
  EXPECT_LT(f.power_mape, 5.0);
}

TEST(EmulatorShape, FitsThePerseusA100Stages) {
  EMO_REQUIRE_SHARED(path, "dvfs/zeus-kronos__emulation__stage_profile__gpt3-175b_a100_sxm_bf16.csv");
  auto d = model::load_dataset(path, model::Format::kPerseus);
  ASSERT_TRUE(d.ok()) << d.error().what;
  const shape::Fit f = shape::fit_family(*d, *device::builtin_profile("a100"), 0.45);
  std::printf("Perseus A100 stages: %zu units, median time MAPE %.2f %%, power MAPE %.2f %%\n", f.units,
              f.time_mape, f.power_mape);
  ASSERT_GT(f.units, 4u);
  EXPECT_LT(f.time_mape, 3.0);
  EXPECT_LT(f.power_mape, 5.0);
}

}  // namespace
}  // namespace emo::emulator

namespace emo::emulator {
namespace {

// A run's op spans are 16 bytes (begin, a 32-bit duration): an op longer than 2^32 ns is held as
// consecutive spans that cover it exactly, so the energy integral sees the same busy time.
// The sweep as a run drives it (step by step, each step swept once the next cannot come before its end)
// and in one go at the end give the same bytes; the energies are the power model's.
TEST(EnergySweep, SteppedAndWholeSweepsGiveTheSameEnergies) {
  const device::DeviceProfile p = *device::builtin_profile("h100");
  const detail::GpuTruth g = detail::make_gpu_truth(p, 3);
  const std::vector<detail::KernelTruth> truths = {detail::gemm_truth(), detail::stream_truth()};
  const detail::TruthMemo memo(g, truths);
  std::vector<int64_t> clock_at = {std::numeric_limits<int64_t>::min()};
  std::vector<double> clock_mhz = {1980};
  detail::EnergySweep stepped(memo, clock_at, clock_mhz), whole(memo, clock_at, clock_mhz);
  // Three steps of 1 ms: a GEMM, a copy overlapping its tail, then idle; from the second step on, at 990 MHz.
  std::vector<size_t> s_slots, w_slots;
  auto ask_both = [&](int64_t t) {
    s_slots.push_back(stepped.ask(t));
    w_slots.push_back(whole.ask(t));
  };
  for (int step = 0; step < 3; ++step) {
    const int64_t t0 = step * 1'000'000;
    if (step == 1) {
      clock_at.push_back(t0 + 25'000);
      clock_mhz.push_back(990);
    }
    ask_both(t0);
    ask_both(t0 + 333'333);
    for (auto* s : {&stepped, &whole}) {
      s->add_op(t0 + 10'000, t0 + 600'000, 0);
      s->add_op(t0 + 500'000, t0 + 800'000, 1);
    }
    ask_both(t0 + 700'001);
    ask_both(t0 + 900'000);  // idle: in the last step, on the stretch the finish closes
    stepped.advance(t0 + 1'000'000);
  }
  ask_both(3'000'000);
  ask_both(5'000'000);  // past the end: the total
  stepped.finish(3'000'000);
  whole.finish(3'000'000);
  EXPECT_EQ(stepped.total_j(), whole.total_j());
  EXPECT_EQ(stepped.busy_ns(), 3 * 790'000);
  EXPECT_EQ(whole.busy_ns(), 3 * 790'000);
  for (size_t i = 0; i < s_slots.size(); ++i) EXPECT_EQ(stepped.answer(s_slots[i]), whole.answer(w_slots[i])) << i;
  EXPECT_EQ(whole.answer(w_slots.back()), whole.total_j());
  EXPECT_EQ(whole.answer(w_slots[0]), 0.0);
  // The first step from the model: idle, the GEMM alone, both (static once, a quarter of the smaller
  // dynamic power), the copy alone, idle.
  auto busy = [&](std::initializer_list<uint32_t> ks, double f) {
    double sum = 0, mx = 0;
    for (uint32_t k : ks) {
      sum += memo.dynamic_part_w(k, f);
      mx = std::max(mx, memo.dynamic_part_w(k, f));
    }
    const uint32_t front = *ks.begin();
    return std::min(g.tdp_w, memo.power_w(front, f) - memo.dynamic_part_w(front, f) + mx + 0.25 * (sum - mx));
  };
  const double f = 1980;
  const double step0 = g.idle_power_w(f) * 10e-6 + busy({0}, f) * 490e-6 + busy({0, 1}, f) * 100e-6 +
                       busy({1}, f) * 200e-6 + g.idle_power_w(f) * 200e-6;
  const size_t one_ms = 4;  // the question at the second step's start (four a step)
  EXPECT_NEAR(whole.answer(w_slots[one_ms]), step0, 1e-12 * step0);
  // Between breakpoints the energy is linear: a third into the GEMM-only stretch of the first step.
  const double at_third = g.idle_power_w(f) * 10e-6 + busy({0}, f) * 323'333e-9;
  EXPECT_NEAR(whole.answer(w_slots[1]), at_third, 1e-9 * at_third);
  // The clock change lowers the second step's energy.
  EXPECT_LT(whole.answer(w_slots[8]) - whole.answer(w_slots[4]), 0.9 * step0);
  // The last step's idle tail (its copy ends at 2.8 ms): 0.1 ms of idle power at 990 MHz short of the total.
  const double tail = whole.total_j() - g.idle_power_w(990) * 100e-6;
  EXPECT_NEAR(whole.answer(w_slots[11]), tail, 1e-9 * tail);
  EXPECT_NEAR(stepped.answer(s_slots[11]), tail, 1e-9 * tail);
}

}  // namespace
}  // namespace emo::emulator
