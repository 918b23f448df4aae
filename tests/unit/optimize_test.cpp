// Packing, pack-level models and the optimizer on synthetic workloads run on the emulated GPU: repeated
// layers share signatures, pack models predict unprofiled clocks, the DP matches an exhaustive search
// of the same models, every returned plan meets the target in a full replay, and stale or foreign
// policies are rejected.
#include <gtest/gtest.h>

#include <cmath>

#include "emo/backends/evaluation.h"
#include "emo/backends/profiling.h"
#include "emo/optimize/check.h"
#include "emo/emulator/emulator.h"
#include "emo/optimize/optimize.h"
#include "emo/synth/synth.h"
#include "synth_workload.h"

namespace emo::optimize {
namespace {

analysis::Workload workload(int ranks, int layers) {
  return test::synth_workload(synth::Workload::kTrainDP, ranks, layers, 11);
}

std::unique_ptr<test::ProfiledStep> setup(int ranks, int layers, double min_pack_ms) {
  return test::profiled_step(synth::Workload::kTrainDP, ranks, layers, min_pack_ms, 11);
}

TEST(Pack, RepeatedLayersShareSignaturesAndPacksOutlastSwitches) {
  auto w = workload(2, 24);
  const auto profile = *device::builtin_profile("h100");
  auto p = pack::make_packs(w, analysis::analyze(w), profile, {});
  ASSERT_TRUE(p.ok());
  EXPECT_GE(p->reduction(), 10.0);  // issue goal on transformer workloads
  const int64_t min_ns = int64_t(profile.switch_latency_median_ms.value * 1e6);
  for (const auto& pk : p->packs) {
    if (p->packs.size() > 2) {
      EXPECT_GE(pk.end_ns - pk.begin_ns, min_ns) << "pack shorter than a clock switch";
    }
  }
  // Packs of a GPU are contiguous, in order and cover every op exactly once.
  std::vector<uint32_t> next(p->gpus.size(), 0);
  for (const auto& pk : p->packs) {
    if (pk.first_op > pk.last_op) continue;
    EXPECT_EQ(pk.first_op, next[pk.rank.index()]);
    next[pk.rank.index()] = pk.last_op + 1;
  }
  for (size_t gi = 0; gi < p->gpus.size(); ++gi) EXPECT_EQ(next[gi], p->gpus[gi].ops.size());
}

// The time each two atoms of a GPU run at once, from their ops' intervals: pairs of different atoms
// only (an atom's own ops on two streams are one busy interval already), each GPU on its own, by first
// then second atom; three at once count each pair.
TEST(Pack, AtomOverlapsCountEachPairOfAtomsThatRunAtOnce) {
  pack::Packing p;
  p.gpus.resize(2);
  p.gpus[0].rank = graph::RankIndex(0);
  p.gpus[1].rank = graph::RankIndex(1);
  p.gpus[0].ops.resize(5);
  p.gpus[1].ops.resize(2);
  auto atom = [](uint32_t rank, uint32_t first, uint32_t last) {
    pack::Atom a;
    a.rank = graph::RankIndex(rank);
    a.first = first;
    a.last = last;
    return a;
  };
  // GPU 0: atom 0 = ops 0-1 (two streams, overlapping each other), atom 1 = op 2 (a collective), an idle
  // atom, atom 3 = ops 3-4. GPU 1: atom 4 = op 0, atom 5 = op 1.
  p.atoms = {atom(0, 0, 1), atom(0, 2, 2), atom(0, 3, 2), atom(0, 3, 4), atom(1, 0, 0), atom(1, 1, 1)};
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> spans = {
      {{0, 100}, {50, 150}, {80, 400}, {300, 350}, {390, 500}},
      {{0, 10}, {10, 20}},  // back to back: no overlap
  };
  const auto ov = pack::atom_overlaps(p, spans);
  ASSERT_EQ(ov.size(), 2u);
  EXPECT_EQ(ov[0].first, 0u);
  EXPECT_EQ(ov[0].second, 1u);
  EXPECT_EQ(ov[0].ns, 20 + 70);  // op 0 [80, 100) and op 1 [80, 150) beside the collective
  EXPECT_EQ(ov[1].first, 1u);
  EXPECT_EQ(ov[1].second, 3u);
  EXPECT_EQ(ov[1].ns, 50 + 10);  // op 3 [300, 350) and op 4 [390, 400)
}

TEST(Pack, OptionsOutsideTheirRangeAreNamedErrors) {
  auto w = workload(1, 2);
  const auto profile = *device::builtin_profile("h100");
  const auto an = analysis::analyze(w);
  auto refused_as = [&](const pack::PackOptions& o) {
    auto p = pack::make_packs(w, an, profile, o);
    return p.ok() ? std::string("accepted") : p.error().where;
  };
  pack::PackOptions o;
  EXPECT_EQ(refused_as(o), "accepted");
  o.min_switch_multiple = std::nan("");
  EXPECT_EQ(refused_as(o), "--min-pack");
  o.min_switch_multiple = 1e308;  // would overflow the nanosecond conversion
  EXPECT_EQ(refused_as(o), "--min-pack");
  o = {};
  o.min_pack_ns = int64_t(2e15);
  EXPECT_EQ(refused_as(o), "--min-pack-ms");
  o = {};
  for (int64_t ns : {int64_t(-1000), int64_t(2e12)}) {
    o.critical_slack_ns = ns;
    EXPECT_EQ(refused_as(o), "--critical-slack-us") << ns;
  }
}

// The plan fills each clock's counter window with steps; a run's graph-node replays are bounded, so a
// step with many nodes gets fewer steps and a shorter window, and the emulated plan that would fall
// below the counter's shortest window is refused with its cause before anything runs.
TEST(Pack, PlanStepsFillTheWindowWithinTheRunsNodeBound) {
  auto w = workload(1, 2);
  const auto profile = *device::builtin_profile("h100");
  const auto an = analysis::analyze(w);
  auto p = pack::make_packs(w, an, profile, {});
  ASSERT_TRUE(p.ok());
  const double step_s = double(p->step_ns) * 1e-9;
  EXPECT_EQ(p->plan_steps, std::max(3, int(std::ceil(2.0 / step_s))));
  EXPECT_FALSE(p->plan_steps_bounded);
  EXPECT_NEAR(double(p->plan_window_ns) * 1e-9, 2.0, step_s);
  const int64_t nodes = int64_t(w.graph.num_nodes());
  pack::PackOptions o;
  o.max_plan_node_steps = nodes * (p->plan_steps / 20);  // a twentieth of the steps fit: 0.1 s
  auto bounded = pack::make_packs(w, an, profile, o);
  ASSERT_TRUE(bounded.ok());
  EXPECT_TRUE(bounded->plan_steps_bounded);
  EXPECT_EQ(bounded->plan_steps, std::max(3, p->plan_steps / 20));
  EXPECT_LE(int64_t(bounded->plan_steps) * nodes, o.max_plan_node_steps);
  EXPECT_LT(bounded->plan_window_ns, p->plan_window_ns / 10);
  // Below the shortest window (ten counter updates): the emulated plan says why and runs nothing.
  if (bounded->plan_window_ns < pack::kMinProfileWindowNs) {
    auto runs = backends::profile_plan(test::target("emulated:h100"), w, *bounded);
    ASSERT_FALSE(runs.ok());
    EXPECT_EQ(runs.error().where, "profiling plan");
    EXPECT_NE(runs.error().what.find("graph nodes"), std::string::npos) << runs.error().what;
  } else {
    ADD_FAILURE() << "a twentieth of the 2 s window is " << double(bounded->plan_window_ns) * 1e-9 << " s";
  }
}

TEST(Pack, ModelsPredictAnUnprofiledClockOnTheEmulator) {
  auto s = setup(1, 12, 5);
  const int f = 1200;  // not a plan clock
  for (int c : s->packing.plan_clocks_mhz) ASSERT_NE(c, f);
  Problem pr = s->problem();
  Plan pred = predict(pr, std::vector<int>(s->packing.packs.size(), f), "locked");
  emulator::EmulatedGpu gpu(s->profile, 1);
  emulator::RunOptions o;
  o.steps = 4;
  o.trace_steps = 0;
  auto truth = gpu.run(s->w.ranks, emulator::ClockSchedule::locked(f), o);
  ASSERT_TRUE(truth.ok());
  const double t_err = std::abs(double(pred.time_ns) / truth->mean_step_ns() - 1);
  const double e_err = std::abs(pred.energy_j / truth->energy_per_step_j() - 1);
  std::printf("step at %d MHz: time error %.2f %%, energy error %.2f %%\n", f, 100 * t_err, 100 * e_err);
  EXPECT_LT(t_err, 0.02);
  EXPECT_LT(e_err, 0.03);
}

TEST(Optimize, EveryPlanMeetsTheTargetInReplay) {
  auto s = setup(2, 8, 4);
  Problem pr = s->problem();
  for (double d : {0.01, 0.05, 0.10}) {
    OptimizeOptions o;
    o.max_slowdown = d;
    auto sol = optimize(pr, o);
    ASSERT_TRUE(sol.ok());
    Plan again = predict(pr, sol->policy.pack_clock_mhz);
    // Plans keep the reserve (10 % of the allowed slowdown by default) for model error.
    EXPECT_LT(sol->plan_target_ns, sol->target_ns) << d;
    EXPECT_LE(again.time_ns, sol->plan_target_ns) << d;
    EXPECT_LE(sol->policy.energy_j, sol->default_plan.energy_j);
    for (const Plan& b : sol->baselines) {
      EXPECT_LE(predict(pr, b.pack_clock_mhz).time_ns, sol->plan_target_ns) << b.name;
      EXPECT_LE(sol->policy.energy_j, b.energy_j + 1e-9) << b.name;  // never worse than a baseline
    }
  }
}

// A start plan (the first solve's policy where the session refits and solves again) is taken where the
// models price it below the DP's and the baselines', so the second solve is never worse than the first
// under its own models; one outside the candidate clocks, or of another length, is not used.
TEST(Optimize, AStartPlanIsUsedWhereItIsPricedLowest) {
  auto s = setup(2, 8, 4);
  Problem pr = s->problem();
  OptimizeOptions full;
  auto best = optimize(pr, full);
  ASSERT_TRUE(best.ok());
  OptimizeOptions weak;  // the DP and the baselines alone: no polishing search
  weak.polish_replays = 0;
  weak.block_replays = 0;
  weak.kick_replays = 0;
  auto plain = optimize(pr, weak);
  ASSERT_TRUE(plain.ok());
  ASSERT_LT(best->policy.energy_j, plain->policy.energy_j * (1 - 1e-6)) << "the search must add something here";
  weak.start_clocks = best->policy.pack_clock_mhz;
  auto started = optimize(pr, weak);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->policy_from, "first_solve");
  EXPECT_LE(started->policy.energy_j, best->policy.energy_j + 1e-9);
  EXPECT_LE(started->policy.time_ns, started->plan_target_ns);
  // One replay for the start; the plain solve's may have paid one more to put its plan's changes in order.
  EXPECT_LE(started->replays, plain->replays + 1);
  for (std::vector<int> bad : {std::vector<int>(best->policy.pack_clock_mhz.size(), 1234),
                               std::vector<int>(best->policy.pack_clock_mhz.size() + 1, 1980)}) {
    weak.start_clocks = bad;
    auto ignored = optimize(pr, weak);
    ASSERT_TRUE(ignored.ok());
    EXPECT_EQ(ignored->policy_from, plain->policy_from);
    EXPECT_EQ(ignored->policy.pack_clock_mhz, plain->policy.pack_clock_mhz);
    EXPECT_EQ(ignored->replays, plain->replays);
  }
}

// Past shares_per_gpu_max GPUs the budget search gives a replica set one share: on 40 data-parallel
// ranks (one set) it replays far fewer plans than GPU by GPU, and the policy is as good (the ranks differ
// only by their recorded jitter).
TEST(Optimize, ReplicaSetsShareTheirBudgetSharePastAFewGpus) {
  auto s = setup(40, 2, 4);
  Problem pr = s->problem();
  ASSERT_EQ(pr.packing->replica_sets, 1);
  OptimizeOptions per_gpu;
  per_gpu.shares_per_gpu_max = 64;
  OptimizeOptions per_set;
  ASSERT_LT(per_set.shares_per_gpu_max, size_t(40));
  auto a = optimize(pr, per_gpu), b = optimize(pr, per_set);
  ASSERT_TRUE(a.ok() && b.ok());
  // Two passes of 9 multiples: 720 replays GPU by GPU, 18 for the set.
  EXPECT_LT(b->replays + 600, a->replays) << a->replays << " GPU by GPU, " << b->replays << " by set";
  EXPECT_LE(b->policy.time_ns, b->plan_target_ns);
  EXPECT_LE(b->policy.energy_j, a->policy.energy_j * 1.001) << "the set's share loses energy";
  for (const Plan& base : b->baselines) EXPECT_LE(b->policy.energy_j, base.energy_j + 1e-9) << base.name;
}

// Trial plans replayed on worker threads, and replays priced from the per-clock tables, give the same
// solution as one thread: the same clocks, times and energies, baselines and replay count.
TEST(Optimize, SameSolutionOnAnyNumberOfThreads) {
  for (int ranks : {1, 2}) {  // one GPU: polish and block moves; two: also the budget-share search
    auto s = setup(ranks, 8, 4);
    Problem pr = s->problem();
    OptimizeOptions one;
    one.threads = 1;
    OptimizeOptions many = one;
    many.threads = 3;
    many.parallel_min_points = 0;  // small step: force the parallel path
    auto a = optimize(pr, one), b = optimize(pr, many);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->policy.pack_clock_mhz, b->policy.pack_clock_mhz) << ranks;
    EXPECT_EQ(a->policy.time_ns, b->policy.time_ns);
    EXPECT_EQ(a->policy.energy_j, b->policy.energy_j);
    EXPECT_EQ(a->replays, b->replays);
    EXPECT_EQ(a->policy_from, b->policy_from);
    ASSERT_EQ(a->baselines.size(), b->baselines.size());
    for (size_t i = 0; i < a->baselines.size(); ++i) {
      EXPECT_EQ(a->baselines[i].pack_clock_mhz, b->baselines[i].pack_clock_mhz) << a->baselines[i].name;
      EXPECT_EQ(a->baselines[i].energy_j, b->baselines[i].energy_j) << a->baselines[i].name;
    }
    // The optimizer prices plans from its tables; predict() computes every number afresh.
    for (const Plan* pl : {&a->policy, &a->baselines.front()}) {
      const Plan fresh = predict(pr, pl->pack_clock_mhz);
      EXPECT_EQ(fresh.time_ns, pl->time_ns);
      EXPECT_NEAR(fresh.energy_j, pl->energy_j, 1e-9 * pl->energy_j);
    }
  }
}

TEST(Optimize, DpMatchesExhaustiveSearchOnSmallCases) {
  auto s = setup(1, 6, 5);
  Problem pr = s->problem();
  ASSERT_LE(s->packing.packs.size(), 6u);
  ASSERT_GE(s->packing.packs.size(), 2u);
  pr.clocks_mhz = {1200, 1410, 1605, 1800, 1980};
  for (double d : {0.02, 0.05, 0.10}) {
    OptimizeOptions o;
    o.max_slowdown = d;
    o.reserve = 0;  // the same target as the exhaustive search
    auto sol = optimize(pr, o);
    auto ex = exhaustive(pr, d);
    ASSERT_TRUE(sol.ok() && ex.ok());
    const double gap = sol->policy.energy_j / ex->energy_j - 1;
    std::printf("delta %.2f: dp %.4f J, exhaustive %.4f J, gap %.3f %%\n", d, sol->policy.energy_j, ex->energy_j, 100 * gap);
    EXPECT_LT(gap, 0.02);  // goal 1 %; docs/optimize.md reports the gaps measured
    EXPECT_GE(gap, -1e-9);  // the exhaustive search is the optimum of the same models
  }
}

TEST(Optimize, DpSolvesTheKnapsackExactlyOnIntegers) {
  // Three packs, budget 10: options (cost, energy). Best: (0,5) + (4,2) + (6,1) = 8.
  std::vector<std::vector<Option>> packs = {{{0, 5}, {5, 3}}, {{0, 6}, {4, 2}}, {{0, 4}, {6, 1}, {11, 0}}};
  auto ch = solve_dp(packs, 10, 10);
  double e = 0;
  int64_t c = 0;
  for (size_t k = 0; k < packs.size(); ++k) {
    e += packs[k][size_t(ch[k])].energy_j;
    c += packs[k][size_t(ch[k])].cost_ns;
  }
  EXPECT_LE(c, 10);
  EXPECT_DOUBLE_EQ(e, 8.0);
}

TEST(Policy, RoundTripsAndRejectsStaleOrForeignPolicies) {
  auto s = setup(2, 4, 3);
  Problem pr = s->problem();
  auto sol = optimize(pr, {});
  ASSERT_TRUE(sol.ok());
  const std::string text = policy_json(pr, *sol, 0.05).dump();
  auto pf = read_policy("p.json", text, s->w, s->profile);
  ASSERT_TRUE(pf.ok()) << pf.error().what;
  EXPECT_EQ(pf->device, "h100");
  EXPECT_FALSE(pf->packs.empty());
  EXPECT_EQ(pf->baselines.size(), 3u);
  // Another device.
  auto other = read_policy("p.json", text, s->w, *device::builtin_profile("a100"));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().what.find("made for device"), std::string::npos);
  // Another trace (more layers: other op counts).
  auto w2 = workload(2, 5);
  auto stale = read_policy("p.json", text, w2, s->profile);
  ASSERT_FALSE(stale.ok());
  // Garbage and a wrong schema.
  EXPECT_FALSE(read_policy("p.json", "{not json", s->w, s->profile).ok());
  nlohmann::json j = nlohmann::json::parse(text);
  j["schema"] = "emo-policy/9";
  EXPECT_FALSE(read_policy("p.json", j.dump(), s->w, s->profile).ok());
  j = nlohmann::json::parse(text);
  j["packs"][0]["first"]["name"] = "not_the_kernel";
  auto renamed = read_policy("p.json", j.dump(), s->w, s->profile);
  ASSERT_FALSE(renamed.ok());
  EXPECT_NE(renamed.error().what.find("in the trace"), std::string::npos);
  // Hand-edited numbers out of range are refused by name, never read as a default.
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"max_slowdown", -3}, {"max_slowdown", 5}, {"max_slowdown", "0.05"}, {"switch_latency_ms", -1},
           {"switch_latency_ms", nullptr}}) {
    j = nlohmann::json::parse(text);
    j[key] = value;
    auto bad = read_policy("p.json", j.dump(), s->w, s->profile);
    ASSERT_FALSE(bad.ok()) << key << "=" << value.dump();
    EXPECT_EQ(bad.error().what.rfind(key + ":", 0), 0u) << bad.error().what;
    EXPECT_EQ(bad.error().where, "p.json");
  }
}

// A clock switch into a pack is charged for the latency's spread (11.9 ms on h100) at most as long as
// the pack lasts: with packs of a few hundred microseconds, alternating clocks used to be priced at
// several times the step's whole energy (here 136 J against 13.4 J for every pack at 1980 MHz; on the
// kernel-level pipeline step, 273 J against 82 J for the default clock).
TEST(Optimize, ShortPacksPayForSwitchesNoLongerThanThemselves) {
  auto s = setup(1, 6, 0.2);  // packs of about 0.2 ms
  const pack::Packing& p = s->packing;
  ASSERT_GE(p.packs.size(), 20u);
  Problem pr = s->problem();
  std::vector<int> high(p.packs.size(), 1980), alternating(p.packs.size(), 1980);
  for (size_t k = 0; k < alternating.size(); k += 2) alternating[k] = 990;
  Plan a = predict(pr, high, "high"), b = predict(pr, alternating, "alternating");
  // Half the packs at half the clock, each switch costing at most its pack's length at the higher
  // clock's extra power: at most about the all-high plan's energy over the longer step, plus that extra
  // once over the step (17.3 J here).
  EXPECT_LT(b.energy_j, 1.5 * a.energy_j) << a.energy_j << " J all high, " << b.energy_j << " J alternating";
  EXPECT_GT(b.time_ns, a.time_ns);  // (the low packs do run slower)
}

// Changes take effect in the order issued: a raise is issued a p99 latency ahead of its pack, a lowering
// 2·median − p99 ahead (the spread, 2 × 11.9 ms on h100, between them), so a pack that lowers the clock
// and begins less than that before the next pack, which raises it again, would have its change issued
// after the next one's and its low clock held through the next pack. It keeps the clock before it; a run
// of low packs longer than the spread keeps its clocks, and the policy file then issues every change in
// pack order. optimize() returns its policy and baselines so.
TEST(Optimize, AChangeThatWouldLandOutOfOrderKeepsTheClockBeforeIt) {
  auto s = setup(1, 24, 2);
  const pack::Packing& p = s->packing;
  Problem pr = s->problem();
  const int high = s->profile.max_clock_mhz(), low = s->profile.min_clock_mhz();
  const int64_t spread = 2 * int64_t((s->profile.switch_latency_p99_ms.value - s->profile.switch_latency_median_ms.value) * 1e6);
  std::vector<size_t> ops;  // the packs with ops
  for (size_t k = 0; k < p.packs.size(); ++k) {
    if (p.packs[k].first_op <= p.packs[k].last_op) ops.push_back(k);
  }
  ASSERT_GE(ops.size(), 12u);
  // A short pack in the middle lowered (the next pack begins well within the spread).
  size_t j = 0;  // well after the step's start (the raise's issue time not wrapped around)
  while (j + 1 < ops.size() && (p.packs[ops[j]].begin_ns - p.packs[ops[0]].begin_ns < 2 * spread ||
                                p.packs[ops[j + 1]].begin_ns - p.packs[ops[j]].begin_ns > spread / 2))
    ++j;
  ASSERT_LT(j + 1, ops.size());
  std::vector<int> clocks(p.packs.size(), high);
  clocks[ops[j]] = low;
  const Plan short_low = predict(pr, clocks, "short");
  Solution sol;
  sol.default_plan = predict(pr, std::vector<int>(p.packs.size(), pr.default_clock_mhz), "default");
  sol.policy = short_low;
  auto pf = applied_policy(pr, sol, 0.05);
  ASSERT_TRUE(pf.ok()) << pf.error().message();
  EXPECT_GT(pf->packs[j].issue_at_ns, pf->packs[j + 1].issue_at_ns) << "as planned, the lowering lands after the raise";
  std::vector<int> fixed = clocks_in_issue_order(pr, short_low);
  EXPECT_EQ(fixed[ops[j]], high);
  fixed[ops[j]] = low;
  EXPECT_EQ(fixed, clocks) << "only that pack's clock moves";
  // A run of low packs that lasts longer than the spread keeps its clocks, and its changes go in order.
  std::fill(clocks.begin(), clocks.end(), high);
  size_t first = 0;
  while (first < ops.size() && p.packs[ops[first]].begin_ns - p.packs[ops[0]].begin_ns < spread) ++first;
  size_t last = first;
  while (last + 1 < ops.size() && p.packs[ops[last + 1]].begin_ns - p.packs[ops[first]].begin_ns < spread * 5 / 4) ++last;
  ASSERT_LT(last + 1, ops.size()) << "a step long enough for a run of 1.25 spreads after the first";
  for (size_t i = first; i <= last; ++i) clocks[ops[i]] = low;
  const Plan long_low = predict(pr, clocks, "long");
  EXPECT_EQ(clocks_in_issue_order(pr, long_low), clocks);
  sol.policy = long_low;
  pf = applied_policy(pr, sol, 0.05);
  ASSERT_TRUE(pf.ok()) << pf.error().message();
  // In pack order around the step: the first packs' changes are issued in the step before (at the end of
  // the step's times), so the times rise but once, where they wrap around.
  size_t descents = 0;
  for (size_t i = 0; i < pf->packs.size(); ++i) {
    descents += pf->packs[(i + 1) % pf->packs.size()].issue_at_ns < pf->packs[i].issue_at_ns;
  }
  EXPECT_LE(descents, 1u);
  // What optimize() returns issues in order.
  auto solved = optimize(pr, {});
  ASSERT_TRUE(solved.ok()) << solved.error().message();
  EXPECT_EQ(clocks_in_issue_order(pr, solved->policy), solved->policy.pack_clock_mhz);
  for (const Plan& b : solved->baselines) EXPECT_EQ(clocks_in_issue_order(pr, b), b.pack_clock_mhz) << b.name;
}

// HTA's negative_queue_length_values_check rank 0 (A100): a loop whose GPU runs behind its host. The
// step's first pack (the input copies and small kernels on streams 25 and 27) begins 156 ms before the
// step, in the period before: in the loop's steady state it runs a period later, beside the step's middle
// packs. Its clock change, a lowering issued late, came after the next pack's (a raise issued early) in
// time while the pass looked at the packs in their listed order, where that pack comes first: its low clock
// held through the next pack (the plans measured up to 5.2 % less energy than priced). Now such a pack
// takes its place in the order the GPU meets the packs, for the issue times and for what each pack owns.
TEST(Optimize, APackThatBeginsAPeriodEarlierTakesItsPlaceAmongTheOthers) {
  EMO_REQUIRE_SHARED(path, "traces/hta/tests/data/negative_queue_length_values_check/rank0.json.gz");
  test::ProfiledStep s;
  s.w = test::workload_of_files({path});
  ASSERT_EQ(s.w.graph.queued_ops.size(), 1u);
  s.profile = *device::builtin_profile("h100");
  auto p = pack::make_packs(s.w, analysis::analyze(s.w), s.profile, {});
  ASSERT_TRUE(p.ok()) << p.error().what;
  s.packing = std::move(*p);
  auto runs = backends::profile_plan(test::target("emulated:h100@5"), s.w, s.packing);
  ASSERT_TRUE(runs.ok()) << runs.error().what;
  auto m = pack::fit_pack_models(s.w, s.packing, *runs, s.profile);
  ASSERT_TRUE(m.ok()) << m.error().what;
  s.models = std::move(*m);
  // A GPU whose switching latency spreads 4 ms more than the H100's (2 × (p99 − median): 27.8 ms), so that
  // the next pack, 23.9 ms after this one, begins within the spread.
  s.models.profile.switch_latency_p99_ms.value += 2.0;
  const pack::Packing& pk = s.packing;
  Problem pr = s.problem();
  // The packs with ops in the order the GPU meets them: a pack that begins before the step, a period later.
  auto at = [&](size_t k) { return pk.packs[k].begin_ns + (pk.packs[k].begin_ns < 0 ? pk.step_ns : 0); };
  std::vector<size_t> ops, early;
  for (size_t k = 0; k < pk.packs.size(); ++k) {
    if (pk.packs[k].first_op > pk.packs[k].last_op) continue;
    ops.push_back(k);
    if (pk.packs[k].begin_ns < 0) early.push_back(k);
  }
  ASSERT_EQ(early.size(), 1u);
  ASSERT_EQ(early[0], ops[0]) << "the step's first pack";
  std::stable_sort(ops.begin(), ops.end(), [&](size_t a, size_t b) { return at(a) < at(b); });
  const size_t w = size_t(std::find(ops.begin(), ops.end(), early[0]) - ops.begin());
  ASSERT_TRUE(w > 0 && w + 1 < ops.size()) << "it runs among the step's other packs";
  const size_t before = ops[w - 1], after = ops[w + 1];
  // Lowered there (late) and raised at the next pack (early), its change would come after the raise.
  const int high = s.profile.max_clock_mhz(), low = s.profile.min_clock_mhz();
  const device::DeviceProfile& gpu = s.models.profile;
  const int64_t spread = 2 * int64_t((gpu.switch_latency_p99_ms.value - gpu.switch_latency_median_ms.value) * 1e6);
  ASSERT_LT(at(after) - at(early[0]), spread) << "the next pack begins within the spread";
  std::vector<int> clocks(pk.packs.size(), high);
  clocks[early[0]] = low;
  std::vector<int> fixed = clocks_in_issue_order(pr, predict(pr, clocks, "early_low"));
  EXPECT_EQ(fixed[early[0]], fixed[before]) << "the clock of the pack the GPU meets before it";
  EXPECT_EQ(fixed[early[0]], high);
  fixed[early[0]] = low;
  EXPECT_EQ(fixed, clocks) << "only that pack's clock moves";
  // What optimize() returns issues its changes in the order the GPU meets the packs: the times rise
  // but once, where they wrap around the step.
  auto solved = optimize(pr, {});
  ASSERT_TRUE(solved.ok()) << solved.error().message();
  std::vector<const Plan*> plans{&solved->policy};
  for (const Plan& b : solved->baselines) plans.push_back(&b);
  for (const Plan* plan : plans) {
    Solution one;
    one.default_plan = solved->default_plan;
    one.policy = *plan;
    auto pf = applied_policy(pr, one, 0.05);
    ASSERT_TRUE(pf.ok()) << pf.error().message();
    std::vector<int64_t> issue(pk.packs.size(), 0);  // per pack with ops (the file lists them in pack order)
    for (size_t k = 0, i = 0; k < pk.packs.size(); ++k) {
      if (pk.packs[k].first_op <= pk.packs[k].last_op) issue[k] = pf->packs[i++].issue_at_ns;
    }
    std::vector<int64_t> changes;  // the issue times of the changes, in the order the GPU meets their packs
    for (size_t i = 0; i < ops.size(); ++i) {
      const size_t prev = ops[(i + ops.size() - 1) % ops.size()];
      if (plan->pack_clock_mhz[ops[i]] != plan->pack_clock_mhz[prev]) changes.push_back(issue[ops[i]]);
    }
    size_t descents = 0;
    for (size_t i = 0; changes.size() >= 2 && i < changes.size(); ++i) descents += changes[(i + 1) % changes.size()] < changes[i];
    EXPECT_LE(descents, 1u) << plan->name << ": " << ::testing::PrintToString(changes);
  }
}

// The clock to profile after the first plan (--refine-profile): the median of the plan's pack clocks
// weighted by busy time (idle packs weigh nothing), and only where it lies more than 3 % of f_max from
// every profiled clock.
TEST(Optimize, ClockToRefineIsTheBusyWeightedMedianAwayFromTheProfiledClocks) {
  pack::Packing p;
  auto pk = [](int64_t busy) {
    pack::Pack k;
    k.busy_ns = busy;
    return k;
  };
  p.packs = {pk(100), pk(300), pk(0), pk(250), pk(100)};
  Plan plan;
  // Busy-weighted: 1100 MHz holds 100 of 750 ns, 1300 MHz 550; the median (375 ns) falls in 1300. The
  // idle pack's 500 MHz weighs nothing.
  plan.pack_clock_mhz = {1100, 1300, 500, 1300, 1500};
  const std::vector<int> profiled = {990, 1485, 1980};
  EXPECT_EQ(clock_to_refine(p, plan, profiled, 1980), 1300);
  // 1300 is 185 MHz from 1485: more than 3 % of 1980 (59.4 MHz). A profiled clock 50 MHz away is near
  // enough; 60 MHz away is not.
  EXPECT_EQ(clock_to_refine(p, plan, {990, 1250, 1980}, 1980), 0);
  EXPECT_EQ(clock_to_refine(p, plan, {990, 1240, 1980}, 1980), 1300);
  // One long pack at 1100 MHz (700 of 1350 ns) moves the median there, though most packs run at 1300.
  p.packs[0].busy_ns = 700;
  EXPECT_EQ(clock_to_refine(p, plan, profiled, 1980), 1100);
  // Nothing busy, nothing profiled, or a plan shorter than the packing: no refinement, no overrun.
  for (auto& k : p.packs) k.busy_ns = 0;
  EXPECT_EQ(clock_to_refine(p, plan, profiled, 1980), 0);
  p.packs[1].busy_ns = 10;
  EXPECT_EQ(clock_to_refine(p, plan, {}, 1980), 0);
  plan.pack_clock_mhz.resize(1);
  EXPECT_EQ(clock_to_refine(p, plan, profiled, 1980), 0);  // pack 1 is not in the plan
}

// Every plan the session prices — the policy, then each baseline — gets its clock profiled where it runs
// away from the profiled clocks and from the clocks already chosen.
TEST(Optimize, ClocksToRefineCoverThePolicyAndEachBaseline) {
  pack::Packing p;
  for (int64_t busy : {100, 300, 200}) {
    pack::Pack k;
    k.busy_ns = busy;
    p.packs.push_back(k);
  }
  auto plan = [](std::string name, std::vector<int> clocks) {
    Plan pl;
    pl.name = std::move(name);
    pl.pack_clock_mhz = std::move(clocks);
    return pl;
  };
  Solution s;
  s.policy = plan("policy", {1000, 1000, 1000});  // a profiled clock: nothing to add for it
  s.baselines = {plan("static_clock", {1100, 1100, 1100}), plan("slack_only", {1300, 1300, 1120}),
                 plan("per_phase", {1310, 1310, 1310})};
  const std::vector<int> profiled = {990, 1485, 1980};
  // static_clock's 1100 MHz; slack_only's median 1300 (300 of 600 ns, ascending 1120 then 1300); per_phase's
  // 1310 is within 3 % of f_max (59.4 MHz) of 1300, chosen before it.
  EXPECT_EQ(clocks_to_refine(p, s, profiled, 1980), (std::vector<RefineClock>{{"static_clock", 1100}, {"slack_only", 1300}}));
  s.policy = plan("policy", {1200, 1200, 1200});  // the policy's comes first
  EXPECT_EQ(clocks_to_refine(p, s, profiled, 1980),
            (std::vector<RefineClock>{{"policy", 1200}, {"static_clock", 1100}, {"slack_only", 1300}}));
  EXPECT_TRUE(clocks_to_refine(p, s, {1100, 1200, 1300}, 1980).empty());
  s.baselines.clear();
  EXPECT_EQ(clocks_to_refine(p, s, profiled, 1980), (std::vector<RefineClock>{{"policy", 1200}}));
}

TEST(Optimize, ImpossibleSlowdownIsAnError) {
  auto s = setup(1, 3, 3);
  OptimizeOptions o;
  o.max_slowdown = -0.1;
  EXPECT_FALSE(optimize(s->problem(), o).ok());
  o.max_slowdown = std::nan("");  // compares false both ways: must not pass as a target
  EXPECT_FALSE(optimize(s->problem(), o).ok());
  o.max_slowdown = 0.05;
  o.reserve = 1.0;  // nothing left to plan with
  EXPECT_FALSE(optimize(s->problem(), o).ok());
  o.reserve = -0.1;
  EXPECT_FALSE(optimize(s->problem(), o).ok());
}

}  // namespace
}  // namespace emo::optimize
