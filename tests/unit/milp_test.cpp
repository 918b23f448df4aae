// The GLPK MILP oracle: it agrees with the exhaustive search where that runs, its objective equals the
// replayed energy of its plan, the optimizer's DP stays within the 1 % goal of it on cases with 15–30
// packs (too many for the exhaustive search), and limits or impossible targets are errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "emo/backends/evaluation.h"
#include "emo/backends/profiling.h"
#include "emo/optimize/check.h"
#include "emo/optimize/milp.h"
#include "emo/optimize/optimize.h"
#include "emo/synth/synth.h"
#include "emo/trace/trace.h"
#include "synth_workload.h"

namespace emo::optimize {
namespace {

// A synthetic step (2 steps rendered, the last analysed), packed with the given minimum pack length and
// profiled on the emulated H100 (the same cases as bench/dp_oracle_gap.cpp).
std::unique_ptr<test::ProfiledStep> setup(synth::Workload kind, int ranks, int layers, double min_pack_ms,
                                          uint64_t seed = 1) {
  return test::profiled_step(kind, ranks, layers, min_pack_ms, seed, 4);
}

const std::vector<int> kFiveClocks = {1200, 1410, 1605, 1800, 1980};

// The oracle's plan is verified by replay: feasible, and its energy is the MILP's objective.
void expect_consistent(const Problem& pr, double d, const Plan& plan, const MilpStats& st) {
  const Plan again = predict(pr, plan.pack_clock_mhz);
  const Plan def = predict(pr, std::vector<int>(pr.packing->packs.size(), pr.default_clock_mhz));
  EXPECT_LE(again.time_ns, int64_t(std::floor(double(def.time_ns) * (1 + d))));
  EXPECT_DOUBLE_EQ(again.energy_j, plan.energy_j);
  EXPECT_NEAR(st.objective_j, plan.energy_j, 1e-6 * plan.energy_j);
  EXPECT_LE(plan.energy_j, def.energy_j);
}

TEST(Milp, MatchesTheExhaustiveSearchOnSmallCases) {
  struct C {
    synth::Workload kind;
    int ranks, layers;
    double min_pack_ms;
  };
  for (const C& c : {C{synth::Workload::kTrainDP, 1, 6, 5}, C{synth::Workload::kTrainPP, 2, 2, 15}}) {
    auto s = setup(c.kind, c.ranks, c.layers, c.min_pack_ms);
    const size_t P = s->packing.packs.size();
    ASSERT_GE(P, 2u);
    ASSERT_LE(P, 7u);
    Problem pr = s->problem(kFiveClocks);
    pr.idle_from_replay = false;  // the MILP's idle model; the DP below solves the same problem
    for (double d : {0.0, 0.02, 0.05, 0.10}) {
      MilpStats st;
      MilpOptions mo;
      mo.stats = &st;
      auto milp = milp_oracle(pr, d, mo);
      auto ex = exhaustive(pr, d);
      ASSERT_TRUE(milp.ok()) << milp.error().what;
      ASSERT_TRUE(ex.ok());
      std::printf("%s, %zu packs, delta %.2f: milp %.6f J (%lld nodes, %.0f ms), exhaustive %.6f J\n",
                  synth::workload_name(c.kind), P, d, milp->energy_j, static_cast<long long>(st.nodes), st.solve_ms,
                  ex->energy_j);
      EXPECT_NEAR(milp->energy_j, ex->energy_j, 1e-6 * ex->energy_j) << d;
      expect_consistent(pr, d, *milp, st);
    }
  }
}

TEST(Milp, DpIsWithinOnePercentOfTheOptimumOnLargerCases) {
  struct C {
    synth::Workload kind;
    int ranks, layers;
    double min_pack_ms;
    const std::vector<int>* clocks;
  };
  const C cases[] = {
      {synth::Workload::kTrainDP, 2, 6, 2.0, &kFiveClocks},
      {synth::Workload::kTrainPP, 2, 2, 2.0, &kFiveClocks},
      {synth::Workload::kTrainTP, 2, 4, 2.0, &kFiveClocks},
  };
  double worst = 0, sum = 0, worst_without_kicks = 0, sum_without = 0;
  int n = 0;
  for (const C& c : cases) {
    auto s = setup(c.kind, c.ranks, c.layers, c.min_pack_ms);
    const size_t P = s->packing.packs.size();
    EXPECT_GE(P, 15u);
    EXPECT_LE(P, 30u);
    Problem pr = s->problem(*c.clocks);
    pr.idle_from_replay = false;
    for (double d : {0.02, 0.05}) {
      OptimizeOptions o;
      o.max_slowdown = d;
      o.reserve = 0;  // the oracle's target
      auto sol = optimize(pr, o);
      MilpStats st;
      MilpOptions mo;
      mo.stats = &st;
      auto milp = milp_oracle(pr, d, mo);
      ASSERT_TRUE(sol.ok() && milp.ok()) << (milp.ok() ? "" : milp.error().what);
      expect_consistent(pr, d, *milp, st);
      const double gap = sol->policy.energy_j / milp->energy_j - 1;
      worst = std::max(worst, gap);
      std::printf("%s, %zu packs x %zu clocks, delta %.2f: dp %.4f J, milp %.4f J (%lld nodes, %.0f ms), gap %.3f %%\n",
                  synth::workload_name(c.kind), P, c.clocks->size(), d, sol->policy.energy_j, milp->energy_j,
                  static_cast<long long>(st.nodes), st.solve_ms, 100 * gap);
      EXPECT_LE(sol->policy.time_ns, sol->plan_target_ns);
      EXPECT_GE(gap, -1e-9) << "the DP beat the proven optimum: the MILP is not exact";
      EXPECT_LE(gap, 0.01) << d;  // the goal (docs/optimize.md, "DP against the exact optimum")
      sum += gap;
      ++n;
      // Without kick and repair some trades between GPUs are out of reach: the pipeline cases end up to
      // 0.6 % above the optimum without them, at it with them.
      o.kick_replays = 0;
      auto no_kicks = optimize(pr, o);
      ASSERT_TRUE(no_kicks.ok());
      EXPECT_GE(no_kicks->policy.energy_j, sol->policy.energy_j * (1 - 1e-9));
      const double gap_without = no_kicks->policy.energy_j / milp->energy_j - 1;
      worst_without_kicks = std::max(worst_without_kicks, gap_without);
      sum_without += gap_without;
      std::printf("  without kick and repair: gap %.3f %%\n", 100 * gap_without);
    }
  }
  std::printf("mean gap %.3f %%, worst %.3f %% (without kick and repair: mean %.3f %%, worst %.3f %%)\n", 100 * sum / n,
              100 * worst, 100 * sum_without / n, 100 * worst_without_kicks);
  EXPECT_LE(sum / n, 0.002);
  EXPECT_GT(sum_without / n, sum / n + 0.0005);  // kick and repair closes a measurable part of the gap
}

TEST(Milp, LimitsAndImpossibleTargetsAreErrors) {
  auto s = setup(synth::Workload::kTrainDP, 1, 6, 5);
  Problem pr = s->problem(kFiveClocks);
  auto replayed_idle = milp_oracle(pr, 0.05);  // the MILP cannot write replayed idle as constraints
  ASSERT_FALSE(replayed_idle.ok());
  EXPECT_NE(replayed_idle.error().what.find("idle"), std::string::npos);
  pr.idle_from_replay = false;
  EXPECT_FALSE(milp_oracle(pr, -0.01).ok());  // faster than the default clock allows
  MilpOptions mo;
  mo.node_limit = 0;  // not even the root
  auto stopped = milp_oracle(pr, 0.05, mo);
  ASSERT_FALSE(stopped.ok());
  EXPECT_NE(stopped.error().what.find("node limit"), std::string::npos);
  pack::Packing empty = s->packing;
  empty.packs.clear();
  Problem none = pr;
  none.packing = &empty;
  EXPECT_FALSE(milp_oracle(none, 0.05).ok());
  Problem no_clocks = pr;
  no_clocks.clocks_mhz = {};
  no_clocks.default_clock_mhz = 100;  // below every supported clock: no candidates
  EXPECT_FALSE(milp_oracle(no_clocks, 0.05).ok());
}

}  // namespace
}  // namespace emo::optimize
