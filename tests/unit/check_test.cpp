// The policy checked on the device before it is handed out (optimize::optimize_checked): a plan whose
// measured slowdown is over the check's limit is re-solved with a lower target or replaced by a baseline
// that passes, and whatever comes out passes on the device.
#include <gtest/gtest.h>

#include <cmath>

#include "emo/backends/evaluation.h"
#include "emo/backends/profiling.h"
#include "emo/optimize/check.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/fit.h"
#include "synth_workload.h"

namespace emo::optimize {
namespace {

// Measured slowdown (%) of a solution's policy, as the check runs it.
double measured_pct(const optimize::Problem& pr, const optimize::Solution& s, double delta, const CheckOptions& c) {
  auto pf = optimize::read_policy("policy", optimize::policy_json(pr, s, delta).dump(), *pr.workload,
                                  pr.models->profile);
  EXPECT_TRUE(pf.ok());
  std::vector<int> clocks;
  for (const auto& ap : pf->packs) clocks.push_back(ap.clock_mhz);
  auto def = test::meter("emulated:h100", pr).measure(pf->packs, {}, {}, c.steps,
                             "default", c.seed);
  auto pol = test::meter("emulated:h100", pr).measure(pf->packs, clocks, {}, c.steps,
                             "policy", c.seed);
  EXPECT_TRUE(def.ok() && pol.ok());
  return 100 * (pol->mean_step_ns() / def->mean_step_ns() - 1);
}

TEST(Check, ModelsThatUnderPredictSlowdownAreCaughtAndTheResultPasses) {
  auto s = test::profiled_step(synth::Workload::kTrainDP, 1, 8, 4, 11);
  // Models fitted from runs labelled with clocks 10 % below the ones they ran at: every slowdown is
  // believed to need a lower clock than it does, so plans slow the step more than predicted.
  auto runs = backends::profile_plan(test::target("emulated:h100"), s->w, s->packing);
  ASSERT_TRUE(runs.ok());
  const int top = s->packing.plan_clocks_mhz.front();
  for (auto& r : *runs) {
    if (r.clock_mhz != top) r.clock_mhz = int(r.clock_mhz * 0.90);
  }
  // One time curve per signature: relabelled so, the top clock's times are longer than 1/f from the
  // lower ones gives, which the fit would otherwise read as throttling (pack::FitOptions::fit_throttle)
  // and price as a far larger error than this test's moderate one.
  pack::FitOptions fo;
  fo.fit_throttle = false;
  auto m = pack::fit_pack_models(s->w, s->packing, *runs, s->profile, fo);
  ASSERT_TRUE(m.ok());
  optimize::Problem pr = s->problem();
  pr.models = &*m;
  optimize::OptimizeOptions o;
  o.max_slowdown = 0.05;
  const CheckOptions c;
  const double limit = 100 * o.max_slowdown * (1 - o.reserve / 2);

  // Negative control: unchecked, the policy runs over the limit on the device.
  auto plain = optimize::optimize(pr, o);
  ASSERT_TRUE(plain.ok());
  const double plain_pct = measured_pct(pr, *plain, o.max_slowdown, c);
  EXPECT_GT(plain_pct, limit) << "the mislabelled models should mislead the optimizer";

  auto checked = optimize_checked(pr, o, test::meter("emulated:h100", pr), c);
  ASSERT_TRUE(checked.ok()) << checked.error().what;
  ASSERT_GE(checked->rounds.size(), 2u);
  EXPECT_FALSE(checked->rounds.front().accepted);
  EXPECT_NEAR(checked->rounds.front().measured_pct, plain_pct, 1e-9);  // the same plan, the same run
  for (const CheckRound& r : checked->rounds) {
    std::printf("%-12s reserve %.3f: predicted %+.2f %%, measured %+.2f %% (%d steps, bound %+.2f %%) %s\n",
                r.plan.c_str(), r.reserve, r.predicted_pct, r.measured_pct, r.steps, r.bound_pct,
                r.accepted ? "passed" : "");
    EXPECT_EQ(r.accepted, r.measured_pct <= limit && r.bound_pct <= 100 * o.max_slowdown);
    EXPECT_GE(r.bound_pct, r.measured_pct);
  }
  // A later dp round is made with a larger reserve (a lower plan target).
  EXPECT_GT(checked->rounds[1].reserve, o.reserve);
  const optimize::Solution& sol = checked->solution;
  if (checked->fell_back) {
    EXPECT_EQ(sol.policy.pack_clock_mhz, sol.default_plan.pack_clock_mhz);
  } else {
    const double final_pct = measured_pct(pr, sol, o.max_slowdown, c);
    EXPECT_LE(final_pct, limit);
    EXPECT_LT(sol.policy.energy_j, sol.default_plan.energy_j);
  }
  // The baselines are those of the plain solve (the user's reserve), not of the re-solves.
  ASSERT_EQ(sol.baselines.size(), plain->baselines.size());
  for (size_t i = 0; i < sol.baselines.size(); ++i)
    EXPECT_EQ(sol.baselines[i].pack_clock_mhz, plain->baselines[i].pack_clock_mhz) << sol.baselines[i].name;
}

// The check's statistic: the mean slowdown over the measured steps and mean + 2 standard errors.
TEST(Check, StepSlowdownBoundGrowsWithTheSpreadAndShrinksWithMoreSteps) {
  const StepSlowdown steady = step_slowdown({104, 104, 104, 104}, 100);
  EXPECT_NEAR(steady.mean_pct, 4.0, 1e-12);
  EXPECT_NEAR(steady.bound_pct, 4.0, 1e-12);  // no spread: the bound is the mean
  EXPECT_EQ(steady.steps, 4);
  // Same mean, steps ±2 %: sample sd 2.31 %, standard error 1.15 %, bound 4 + 2.31 %.
  const StepSlowdown varying = step_slowdown({102, 106, 102, 106}, 100);
  EXPECT_NEAR(varying.mean_pct, 4.0, 1e-12);
  EXPECT_NEAR(varying.bound_pct, 4.0 + 2 * std::sqrt(16.0 / 3 / 4), 1e-9);
  // The same spread over four times the steps: about half the margin (the sample sd's n − 1 aside).
  const StepSlowdown longer = step_slowdown({102, 106, 102, 106, 102, 106, 102, 106, 102, 106, 102, 106, 102, 106,
                                             102, 106}, 100);
  EXPECT_NEAR(longer.bound_pct - longer.mean_pct, 2 * std::sqrt(4.0 * 16 / 15 / 16), 1e-9);
  EXPECT_LT(longer.bound_pct, varying.bound_pct);
  const StepSlowdown one = step_slowdown({103}, 100);  // one step: no spread to estimate
  EXPECT_NEAR(one.bound_pct, 3.0, 1e-12);
}

TEST(Check, BadCheckStepsIsAnError) {
  auto s = test::profiled_step(synth::Workload::kTrainDP, 1, 4, 4, 11);
  CheckOptions c;
  c.steps = 1;
  auto r = optimize_checked(s->problem(), {}, test::meter("emulated:h100", s->problem()), c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("step"), std::string::npos);
  c.steps = 3;
  c.max_steps = 2;
  auto fewer = optimize_checked(s->problem(), {}, test::meter("emulated:h100", s->problem()), c);
  ASSERT_FALSE(fewer.ok());
  EXPECT_NE(fewer.error().what.find("max_steps"), std::string::npos);
}

}  // namespace
}  // namespace emo::optimize
