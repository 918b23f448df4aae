// Predicted step energy against the emulated GPU's, at the default clocks and at the clocks of every
// plan (policy and baselines), as `emo optimize` predicts and `emo evaluate` measures them — on real
// steps where the three accounting errors found on ../shared's traces showed (docs/profiling.md,
// "Predicted against measured step energy"): collectives priced as compute, the idle between packs
// priced at the default clock, and clock switches priced as busy time. And the doubt the check reports
// when the gap is larger than kEnergyDoubtPct.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "emo/backends/evaluation.h"
#include "emo/backends/profiling.h"
#include "emo/optimize/check.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"
#include "emo/session/session.h"
#include "synth_workload.h"
#include "test_util.h"

namespace emo {
namespace {

struct PlanGap {
  std::string plan;
  double predicted_j = 0, measured_j = 0;
  double gap() const { return measured_j > 0 ? predicted_j / measured_j - 1 : 1.0; }
};

// `emo optimize --device h100 --profile-on GPU` then `emo evaluate --device GPU`, in process.
std::vector<PlanGap> predicted_and_measured(const std::vector<std::string>& files, const std::string& gpu,
                                            const pack::FitOptions& fit = {}) {
  std::vector<PlanGap> out;
  auto w = analysis::load(files, {});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
  if (!w.ok()) return out;
  const device::DeviceProfile profile = *device::builtin_profile("h100");
  auto p = pack::make_packs(*w, analysis::analyze(*w), profile);
  EXPECT_TRUE(p.ok());
  if (!p.ok()) return out;
  auto runs = backends::profile_plan(test::target(gpu), *w, *p);
  EXPECT_TRUE(runs.ok());
  if (!runs.ok()) return out;
  auto m = pack::fit_pack_models(*w, *p, *runs, profile, fit);
  EXPECT_TRUE(m.ok());
  if (!m.ok()) return out;
  optimize::Problem pr;
  pr.workload = &*w;
  pr.packing = &*p;
  pr.models = &*m;
  pr.default_clock_mhz = int(profile.default_clock_mhz.value);
  optimize::OptimizeOptions oo;
  oo.max_slowdown = 0.05;
  auto checked = optimize::optimize_checked(pr, oo, test::meter(gpu, pr));
  EXPECT_TRUE(checked.ok());
  if (!checked.ok()) return out;
  const optimize::Solution& s = checked->solution;
  auto pf = optimize::read_policy("policy", optimize::policy_json(pr, s, 0.05).dump(), *w, profile);
  EXPECT_TRUE(pf.ok());
  if (!pf.ok()) return out;
  auto measure = [&](const std::string& name, double predicted, const std::vector<int>& clocks,
                     const std::vector<int64_t>& issues) {
    auto r = test::meter(gpu, pr).measure(pf->packs, clocks, issues, 12, name);
    EXPECT_TRUE(r.ok());
    if (r.ok()) out.push_back({name, predicted, r->energy_j});
  };
  measure("default", s.default_plan.energy_j, {}, {});
  std::vector<int> policy_clocks;
  for (const auto& ap : pf->packs) policy_clocks.push_back(ap.clock_mhz);
  measure("policy", s.policy.energy_j, policy_clocks, {});
  for (const auto& b : pf->baselines) {
    for (const optimize::Plan& pl : s.baselines) {
      if (pl.name == b.name) measure(b.name, pl.energy_j, b.clocks_mhz, b.issue_at_ns);
    }
  }
  return out;
}

void expect_within(const std::vector<PlanGap>& gaps, double limit, const std::string& what) {
  ASSERT_GE(gaps.size(), 5u) << what << ": default, policy and three baselines";
  for (const PlanGap& g : gaps) {
    std::printf("%s %-12s predicted %9.3f J, measured %9.3f J: %+.2f %%\n", what.c_str(), g.plan.c_str(), g.predicted_j,
                g.measured_j, 100 * g.gap());
    EXPECT_LT(std::abs(g.gap()), limit) << what << ", " << g.plan;
  }
}

// The 8-rank DLRM step: 21.63 J predicted against 20.06 J measured at the default clocks (7.9 %), and
// 35.7 % "saved" against 19.0 % measured, while the all-to-all and all-reduce kernels (a quarter of the
// GPUs' busy time) were priced as compute-bound kernels at full power.
TEST(Prediction, EightRankDlrmStepEnergyHoldsAtEveryPlan) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  const std::vector<std::string> files = test::files_in(dir);
  ASSERT_EQ(files.size(), 8u);
  const auto gaps = predicted_and_measured(files, "emulated:h100");
  expect_within(gaps, 0.03, "dlrm");
  ASSERT_GE(gaps.size(), 2u);
  EXPECT_LT(std::abs(gaps[0].gap()), 0.03) << "the default clocks' step energy";
  // The saving the policy is predicted to make is the one it makes, within 3 points.
  const double predicted_saving = 1 - gaps[1].predicted_j / gaps[0].predicted_j;
  const double measured_saving = 1 - gaps[1].measured_j / gaps[0].measured_j;
  EXPECT_NEAR(predicted_saving, measured_saving, 0.03);
}

// HTA's simple_add benchmark: 16 µs of GPU work in a 19.8 s step. The packs are short; the idle after
// each runs at the clock the pack set (nothing changes it back), and was priced at the default clock:
// a 0.06 % saving predicted where the GPU saved 12.6 %.
TEST(Prediction, IdleAfterAPackRunsAtThePacksClock) {
  EMO_REQUIRE_SHARED(p, "traces/hta/tests/data/execution_trace/benchmark_simple_add_trace.json.gz");
  expect_within(predicted_and_measured({p}, "emulated:h100"), 0.03, "simple_add");
}

// A sampled rank of a production model: NCCL kernels overlap compute on other streams, and the
// slack-only plan switches clocks between short packs and long idle gaps; a raise lands early in the
// idle before the pack, not in busy time (slack-only was 12.5 % over before).
TEST(Prediction, OverlappingCollectivesAndSwitchesIntoIdleArePricedAsTheyRun) {
  EMO_REQUIRE_SHARED(p, "traces/hta/tests/data/trace_filter/sampled_rank-0.json.gz");
  expect_within(predicted_and_measured({p}, "emulated:h100@4"), 0.03, "sampled_rank-0");
}

// HTA's trace_filter sampled_rank-1: NCCL kernels wait beside compute on other streams, and the
// compute stretches into those waits as the clock falls (on emulated H100 GPU 1, 45 ms a step run at
// once at 1980 MHz, 171 ms at 990). Two kernels at once draw less than each alone added up: priced as
// the sum, the energy fit could not scale the static and dynamic power apart (least squares wanted a
// static scale of 0.48) and fell back to one scale, 3.8 % under the measured energy at the default
// clocks. Priced as sharing the GPU, the overlap as each run measured it and the share fitted per GPU,
// the runs are fitted within 1 % and the default clocks within 1.5 %.
TEST(Prediction, KernelsThatRunAtOnceShareTheGpusPower) {
  EMO_REQUIRE_SHARED(p, "traces/hta/tests/data/trace_filter/sampled_rank-1.json.gz");
  const std::string gpu = "emulated:h100@1";
  auto w = analysis::load({p}, {});
  ASSERT_TRUE(w.ok()) << w.error().message();
  const device::DeviceProfile profile = *device::builtin_profile("h100");
  auto packing = pack::make_packs(*w, analysis::analyze(*w), profile);
  ASSERT_TRUE(packing.ok());
  auto runs = backends::profile_plan(test::target(gpu), *w, *packing);
  ASSERT_TRUE(runs.ok());
  pack::FitOptions summed;
  summed.share_overlaps = false;
  auto with = pack::fit_pack_models(*w, *packing, *runs, profile);
  auto without = pack::fit_pack_models(*w, *packing, *runs, profile, summed);
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_FALSE(with->overlaps.empty());
  EXPECT_TRUE(without->overlaps.empty());
  const pack::GpuCorrection& c = with->gpus[0];
  std::printf("shared: static x%.3f dynamic x%.3f share %.3f, worst run %+.2f %%; summed: common scale %d, worst run %+.2f %%\n",
              c.static_scale, c.dynamic_scale, c.concurrent_share, pack::worst_energy_fit(*with).gap_pct,
              int(without->gpus[0].common_scale), pack::worst_energy_fit(*without).gap_pct);
  EXPECT_FALSE(c.common_scale);
  EXPECT_GE(c.concurrent_share, 0.0);
  EXPECT_LT(c.concurrent_share, 1.0);
  EXPECT_LT(std::abs(pack::worst_energy_fit(*with).gap_pct), 1.0);
  EXPECT_TRUE(without->gpus[0].common_scale);
  EXPECT_GT(std::abs(pack::worst_energy_fit(*without).gap_pct), 3.0);
  const auto gaps = predicted_and_measured({p}, gpu);
  const auto summed_gaps = predicted_and_measured({p}, gpu, summed);
  ASSERT_FALSE(gaps.empty());
  ASSERT_FALSE(summed_gaps.empty());
  EXPECT_EQ(gaps[0].plan, "default");
  std::printf("default clocks: %+.2f %% (summed: %+.2f %%)\n", 100 * gaps[0].gap(), 100 * summed_gaps[0].gap());
  EXPECT_LT(std::abs(gaps[0].gap()), 0.015);
  // The default clocks are a profiled clock: anchored there (GpuCorrection::residual), even the summed
  // fit prices them at what their run measured; its own gap (+5 % above) is what sharing the power fixes.
  EXPECT_LT(std::abs(summed_gaps[0].gap()), 0.015);
  expect_within(gaps, 0.03, "sampled_rank-1");
}

// HTA's trace_diff step on an emulated H100, whose per-phase plan raises the clock to 1920 MHz for two
// of its six packs: a raise is issued a p99 latency ahead and lands about a spread (11.9 ms) early, a
// lowering about as late, so the packs beside a 1920 MHz pack run part of their work at 1920. That work
// was priced as the spread's length at the higher clock's power (3.0 J a step, 3.1 % over the measured
// energy), where the higher clock gets through more of it in that time, each piece of it for a little
// more energy, and the time it saves idles (now 2.3 J; 1.6 % over). Every plan within 2 %.
TEST(Prediction, AClockSwitchThatLandsEarlyIsPricedAsTheWorkItRuns) {
  EMO_REQUIRE_SHARED(p, "traces/hta/tests/data/trace_diff/test/test.json.gz");
  expect_within(predicted_and_measured({p}, "emulated:h100@2"), 0.02, "trace_diff/test");
}

// HTA's trace_diff step on an emulated A100: copies and memory-bound kernels take as long at 945 MHz
// as at 1410 (flat above the memory knee) and 1/f below it, which a time fit on the two lowest clocks
// alone reads as SM-bound: they were marked throttled at ~950 MHz and priced at the power limit (21 of
// the step's 30 J). The fit keeps them unthrottled and still finds the GEMMs the limit holds back
// (throttled at 1.2–1.3 GHz on these GPUs).
TEST(Prediction, MemoryBoundSignaturesAreNotTakenForThrottled) {
  EMO_REQUIRE_SHARED(p, "traces/hta/tests/data/trace_diff/test/test.json.gz");
  auto w = analysis::load({p}, {});
  ASSERT_TRUE(w.ok()) << w.error().message();
  const device::DeviceProfile profile = *device::builtin_profile("a100");
  auto packing = pack::make_packs(*w, analysis::analyze(*w), profile);
  ASSERT_TRUE(packing.ok());
  for (const std::string gpu : {"emulated:a100@1", "emulated:a100@4"}) {
    auto runs = backends::profile_plan(test::target(gpu), *w, *packing);
    ASSERT_TRUE(runs.ok()) << gpu;
    auto m = pack::fit_pack_models(*w, *packing, *runs, profile);
    ASSERT_TRUE(m.ok()) << gpu;
    size_t copies = 0, gemms_throttled = 0;
    for (size_t s = 0; s < packing->signatures.size(); ++s) {
      const std::string& name = packing->signatures[s].first_name;
      const pack::SignatureModel& sm = m->signatures[s];
      if (name.rfind("Memcpy", 0) == 0 || name.rfind("Memset", 0) == 0) {
        ++copies;
        EXPECT_EQ(sm.unit.throttle_mhz, 0.0) << gpu << ": " << name;
      }
      if (name.rfind("volta_sgemm", 0) == 0 && sm.unit.throttle_mhz > 0) {
        ++gemms_throttled;
        EXPECT_GT(sm.unit.throttle_mhz, 0.8 * profile.max_clock_mhz()) << gpu << ": " << name;
      }
    }
    EXPECT_GT(copies, 10u) << gpu;
    EXPECT_GT(gemms_throttled, 5u) << gpu;
  }
}

// `emo optimize --device DEV --profile-on GPU` then `emo evaluate` through the session (with or without
// --no-refine-profile): the largest |predicted / measured − 1| over the plans, and the profiled clocks.
double worst_session_gap(const std::vector<std::string>& files, const std::string& device, const std::string& gpu,
                         bool refine, size_t* clocks) {
  session::Options o;
  o.traces = files;
  o.device = device;
  o.profile_on = gpu;
  o.optimize.max_slowdown = 0.05;
  o.refine_profile = refine;
  auto s = session::Session::open(std::move(o));
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
  if (!s.ok()) return 1.0;
  auto m = s->models();
  EXPECT_TRUE(m.ok());
  if (!m.ok()) return 1.0;
  *clocks = (*m)->clocks_mhz.size();
  auto ev = s->evaluation();
  EXPECT_TRUE(ev.ok()) << (ev.ok() ? "" : ev.error().message());
  if (!ev.ok()) return 1.0;
  double w = 0;
  size_t predicted = 0;
  for (const session::EvaluatedPlan& e : **ev) {
    if (!e.predicted) continue;
    ++predicted;
    const double gap = e.predicted_energy_j / e.measured.energy_j - 1;
    std::printf("%s on %s, refine %d: %-12s predicted %9.3f J, measured %9.3f J: %+.2f %%\n", device.c_str(),
                gpu.c_str(), int(refine), e.name.c_str(), e.predicted_energy_j, e.measured.energy_j, 100 * gap);
    w = std::max(w, std::abs(gap));
  }
  EXPECT_GE(predicted, 5u) << "default, policy and three baselines";
  return w;
}

// sampled_rank-1 on emulated H200 GPU 4: the plans run at 1.2-1.3 GHz, between the profiled clocks,
// where this GPU's static power (rising with the voltage) leaves the fitted curve 4 % under the measured
// energy (per-phase baseline 4.2 % under). By default the session solves once, profiles the clocks the
// policy and the per-phase baseline mostly run at and fits again: every plan's prediction holds to 3 %
// (1.5 %; docs/profiling.md, "Profiling where the plan runs").
TEST(Prediction, ProfilingWhereThePlanRunsPinsItsEnergy) {
  EMO_REQUIRE_SHARED(p, "traces/hta/tests/data/trace_filter/sampled_rank-1.json.gz");
  size_t plain_clocks = 0, refined_clocks = 0;
  const double plain = worst_session_gap({p}, "h200", "emulated:h200@4", false, &plain_clocks);
  const double refined = worst_session_gap({p}, "h200", "emulated:h200@4", true, &refined_clocks);
  EXPECT_EQ(refined_clocks, plain_clocks + 2) << "two more profiled clocks: where the first policy runs, and "
                                                 "where the per-phase baseline runs";
  EXPECT_LT(refined, 0.03);
  EXPECT_LT(refined, plain);
}

// The Kineto plugin's ResNet-50 on emulated A100 GPU 1: one scale per GPU cannot follow its kernels'
// power split (the least-squares static scale is negative), and the common scale left the default
// clock's step 4.4 % under its own profiled run — 4.6 % under the measured step. Anchored at the profiled
// clocks (GpuCorrection::residual), every plan holds to 3 %.
TEST(Prediction, AStepAtAProfiledClockIsPricedAtWhatItsRunMeasured) {
  EMO_REQUIRE_SHARED(p, "traces/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz");
  size_t clocks = 0;
  EXPECT_LT(worst_session_gap({p}, "a100", "emulated:a100@1", true, &clocks), 0.03);
}

// The Kineto plugin's ResNet-50 with 4 workers on emulated A100 GPU 5: the policy runs at profiled clocks
// (nothing to refine for it), but the slack-only baseline runs at 1140 and 1020 MHz, between 945 and 1260, where the fitted knee (3 %
// above the profile's, from the one run between knee and f_max) left a uniform 1140 MHz step 4.4 % under
// its measured energy, and the baseline 3.4 % under. Profiling each baseline's clock too holds every plan
// to 3 % (docs/profiling.md, "Profiling where the plan runs").
TEST(Prediction, EveryPricedPlanIsProfiledWhereItRuns) {
  EMO_REQUIRE_SHARED(p, "traces/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.pt.trace.json.gz");
  size_t plain_clocks = 0, refined_clocks = 0;
  const double plain = worst_session_gap({p}, "a100", "emulated:a100@5", false, &plain_clocks);
  const double refined = worst_session_gap({p}, "a100", "emulated:a100@5", true, &refined_clocks);
  EXPECT_EQ(refined_clocks, plain_clocks + 1) << "the slack-only baseline's clock";
  EXPECT_GT(plain, 0.03);
  EXPECT_LT(refined, 0.03);
}

// The check measures the default clocks and the plan it hands out: past kEnergyDoubtPct between the
// models' step energy and that measurement, the predicted saving is doubted aloud.
TEST(Prediction, TheCheckWarnsWhenItsMeasuredEnergyIsFarFromThePrediction) {
  optimize::Checked c;
  c.default_predicted_j = 100;
  c.default_measured_j = 99;
  optimize::CheckRound r;
  r.accepted = true;
  r.predicted_energy_j = 80;
  r.measured_energy_j = 79;
  c.rounds.push_back(r);
  EXPECT_NEAR(optimize::energy_gap_pct(c), 100.0 * (80.0 / 79 - 1), 1e-9);  // the larger of 1.01 % and 1.27 %
  EXPECT_TRUE(optimize::check_warnings(c).empty());
  c.rounds[0].measured_energy_j = 75;  // 6.7 % over
  ASSERT_EQ(optimize::check_warnings(c).size(), 1u);
  EXPECT_NE(optimize::check_warnings(c)[0].find("6.7 %"), std::string::npos) << optimize::check_warnings(c)[0];
  c.rounds[0].accepted = false;  // a rejected round is not what is handed out
  EXPECT_TRUE(optimize::check_warnings(c).empty());
  c.default_measured_j = 90;  // the default clocks 11 % over
  EXPECT_EQ(optimize::check_warnings(c).size(), 1u);
  EXPECT_EQ(optimize::check_json(c)["energy_gap_pct"].get<double>(), optimize::energy_gap_pct(c));

  // In a real check: models whose static and dynamic power are 10 % high are caught; the fitted ones not.
  auto s = test::profiled_step(synth::Workload::kTrainDP, 2, 6, 5, 3);
  optimize::OptimizeOptions oo;
  oo.max_slowdown = 0.05;
  auto good = optimize::optimize_checked(s->problem(), oo, test::meter("emulated:h100", s->problem()));
  ASSERT_TRUE(good.ok());
  EXPECT_LT(optimize::energy_gap_pct(*good), optimize::kEnergyDoubtPct);
  EXPECT_TRUE(optimize::check_warnings(*good).empty());
  for (pack::GpuCorrection& g : s->models.gpus) {
    g.static_scale *= 1.1;
    g.dynamic_scale *= 1.1;
  }
  auto bad = optimize::optimize_checked(s->problem(), oo, test::meter("emulated:h100", s->problem()));
  ASSERT_TRUE(bad.ok());
  EXPECT_GT(optimize::energy_gap_pct(*bad), 8.0);
  EXPECT_EQ(optimize::check_warnings(*bad).size(), 1u);
}

}  // namespace
}  // namespace emo
