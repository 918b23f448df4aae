// The runtime's core (emo/runtime/control.h): the controller's timing (one call at a time, redundant
// and superseded changes skipped), the phases, and the monitor's windows, report and fallback.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "emo/runtime/control.h"

namespace emo::runtime {
namespace {

constexpr int64_t kMs = 1000000;

TEST(RuntimeController, IssuesAtTheAnchorPlusOffsetAndSkipsRedundantChanges) {
  Controller c(1980);
  const std::vector<Change> changes{{0, 1980, 0}, {10 * kMs, 1200, 1}, {50 * kMs, 1200, 2}, {80 * kMs, 1500, 3}};
  auto issued = c.plan_step(1000 * kMs, changes, [](int) { return 5 * kMs; });
  ASSERT_EQ(issued.size(), 2u);
  EXPECT_EQ(issued[0].at_ns, 1010 * kMs);
  EXPECT_EQ(issued[0].clock_mhz, 1200);
  EXPECT_EQ(issued[1].at_ns, 1080 * kMs);
  EXPECT_EQ(issued[1].pack, 3u);
  EXPECT_EQ(c.skipped_redundant(), 2);  // 1980 at the start, the second 1200
  EXPECT_EQ(c.requested_mhz(), 1500);
  // The next step starts at 1500: a change to 1500 is redundant across steps too.
  auto next = c.plan_step(1200 * kMs, {{0, 1500, 3}}, [](int) { return 5 * kMs; });
  EXPECT_TRUE(next.empty());
}

TEST(RuntimeController, OneCallAtATimeMakesLaterChangesLateOrSupersedesThem) {
  Controller c(1980);
  // Calls take 20 ms: the change due at +5 ms waits for the first call; the one at +8 ms is
  // superseded by the one due at +12 ms (which itself can only go at +20 ms).
  const std::vector<Change> changes{{0, 1200, 0}, {8 * kMs, 1400, 1}, {12 * kMs, 1000, 2}};
  auto issued = c.plan_step(0, changes, [](int) { return 20 * kMs; });
  ASSERT_EQ(issued.size(), 2u);
  EXPECT_EQ(issued[0].clock_mhz, 1200);
  EXPECT_EQ(issued[1].clock_mhz, 1000);
  EXPECT_EQ(issued[1].at_ns, 20 * kMs);
  EXPECT_EQ(issued[1].late_ns, 8 * kMs);
  EXPECT_EQ(c.skipped_superseded(), 1);
  EXPECT_EQ(c.busy_until_ns(), 40 * kMs);
}

TEST(RuntimePhases, ReferenceBlocksThenPolicyOrAlternating) {
  PhaseOptions o{4, false, 2, 0};
  EXPECT_EQ(planned_mode(o, 0), Mode::kDefault);
  EXPECT_EQ(planned_mode(o, 7), Mode::kDefault);
  EXPECT_EQ(planned_mode(o, 8), Mode::kPolicy);
  EXPECT_EQ(planned_mode(o, 100), Mode::kPolicy);
  // A reference block in every 10 after the first two: blocks 11, 21, ...
  o.reference_every = 10;
  EXPECT_EQ(planned_mode(o, 4 * 10), Mode::kPolicy);
  EXPECT_EQ(planned_mode(o, 4 * 11), Mode::kDefault);
  EXPECT_EQ(planned_mode(o, 4 * 11 + 3), Mode::kDefault);
  EXPECT_EQ(planned_mode(o, 4 * 12), Mode::kPolicy);
  EXPECT_EQ(planned_mode(o, 4 * 21), Mode::kDefault);
  o.verify = true;
  EXPECT_EQ(planned_mode(o, 3), Mode::kDefault);
  EXPECT_EQ(planned_mode(o, 4), Mode::kPolicy);
  EXPECT_EQ(planned_mode(o, 8), Mode::kDefault);
  EXPECT_EQ(auto_block_steps(100 * kMs, 500.0 * kMs), 5);
  EXPECT_EQ(auto_block_steps(10 * kMs, 500.0 * kMs), 50);
  EXPECT_EQ(auto_block_steps(1000 * kMs, 500.0 * kMs), 4);
  EXPECT_EQ(auto_block_steps(1e3, 500.0 * kMs), 200);
}

// Feeds a monitor steps of `default_ms` / `policy_ms` and `default_j` / `policy_j` per step, as the
// controller would (mode from the monitor), and returns it.
Monitor feed(double bound, PhaseOptions ph, int steps, double default_ms, double policy_ms, double default_j,
             double policy_j, std::vector<Fallback>* fired = nullptr) {
  Monitor m(bound, ph);
  int64_t t = 0;
  double e = 1000;
  for (int k = 0; k <= steps; ++k) {
    m.anchor(k, t, e);
    if (auto f = m.check(k); f && fired) fired->push_back(*f);
    const bool policy = m.mode_of(k) == Mode::kPolicy;
    // A little noise (not the same in every block) so that standard errors are not zero.
    static constexpr double kWobble[5] = {0.001, -0.001, 0.0, 0.0005, -0.0005};
    const double wobble = kWobble[k % 5];
    t += int64_t((policy ? policy_ms : default_ms) * (1 + wobble) * 1e6);
    e += policy ? policy_j : default_j;
  }
  return m;
}

TEST(RuntimeMonitor, MeasuresTimeAndEnergyOverWindowsLeavingTransitionsOut) {
  const Monitor m = feed(0.05, PhaseOptions{4, false, 2, 0}, 40, 100, 104, 10, 8);
  const MeasuredReport r = m.report();
  // Blocks 0 and 1 at default, blocks 2..9 the policy; the first step of each block is its transition.
  EXPECT_EQ(r.default_side.steps, 2 * 3);
  EXPECT_EQ(r.policy_side.steps, 8 * 3);
  EXPECT_NEAR(r.default_side.time_us, 100e3, 100);
  EXPECT_NEAR(r.slowdown_pct, 4.0, 0.1);
  EXPECT_NEAR(r.default_side.energy_j, 10, 1e-9);
  EXPECT_NEAR(r.policy_side.energy_j, 8, 1e-9);
  EXPECT_NEAR(r.saving_pct, 20, 1e-6);
  ASSERT_EQ(r.slowdown_ci_pct.size(), 2u);
  EXPECT_LT(r.slowdown_ci_pct[0], r.slowdown_pct);
  EXPECT_GT(r.slowdown_ci_pct[1], r.slowdown_pct);
  EXPECT_TRUE(m.fallbacks().empty());
}

TEST(RuntimeMonitor, APolicyOverItsBoundIsDroppedForTheDefaultClockAndStaysDropped) {
  std::vector<Fallback> fired;
  const Monitor m = feed(0.05, PhaseOptions{4, false, 2, 0}, 60, 100, 108, 10, 8, &fired);
  ASSERT_EQ(fired.size(), 1u);
  // Two policy blocks (steps 8..15) must close first: the check fires at step 16.
  EXPECT_EQ(fired[0].step, 16);
  EXPECT_NEAR(fired[0].slowdown_pct, 8, 0.2);
  for (int k = 16; k <= 60; ++k) EXPECT_EQ(m.mode_of(k), Mode::kDefault) << k;
  EXPECT_EQ(m.report().policy_side.steps, 6);
}

TEST(RuntimeMonitor, NoiseNearTheBoundCountsAgainstThePolicy) {
  // 4.9 % measured, but with policy blocks this noisy (∓2 % from block to block, the low one first, so
  // that the mean itself never passes 5 %) mean + 2 SE is over 5 %: dropped, once 30 policy steps in 4
  // blocks or more are measured (the tenth policy block).
  Monitor m(0.05, PhaseOptions{4, false, 2, 0});
  int64_t t = 0;
  bool fired = false;
  int fired_at = -1;
  for (int k = 0; k <= 80 && !fired; ++k) {
    m.anchor(k, t, std::nullopt);
    fired = m.check(k).has_value();
    if (fired) fired_at = k;
    const bool policy = m.mode_of(k) == Mode::kPolicy;
    t += int64_t((policy ? 104.9 * ((k / 4) % 2 == 0 ? 0.98 : 1.02) : 100) * 1e6);
  }
  EXPECT_TRUE(fired);
  EXPECT_EQ(fired_at, 8 + 10 * 4);
}

// Feeds a monitor a real job's step times (µs, one per line after # comments) and returns it.
Monitor feed_series(const std::string& file, double bound, PhaseOptions ph, std::vector<Fallback>* fired) {
  std::ifstream in(std::string(EMO_TEST_DATA_DIR) + "/runtime/" + file);
  EXPECT_TRUE(in.good()) << file;
  Monitor m(bound, ph);
  std::string line;
  int64_t t = 0;
  int k = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    m.anchor(k, t, std::nullopt);
    if (auto f = m.check(k)) fired->push_back(*f);
    ++k;
    t += int64_t(std::stod(line) * 1e3);
  }
  m.anchor(k, t, std::nullopt);
  if (auto f = m.check(k)) fired->push_back(*f);
  EXPECT_GT(k, 900) << file;
  return m;
}

TEST(RuntimeMonitor, ARealJobWhoseTwoSidesRanAtOneClockIsNotDroppedAndItsIntervalHoldsZero) {
  // Two A/A runs of a transformer step on an H200 (tests/data/runtime): "policy" and default blocks ran
  // at the same clock, but the job's step time drifted (12.0 -> 13.3 ms over 8 s, block means ±0.4–0.7
  // ms, consecutive steps correlated at 0.6). Compared step by step, one run measured +5.65 % and was
  // dropped at step 556, the other -3.7 % with an interval of [-5.1, -2.3] %; block against
  // neighbouring blocks, neither is dropped and both intervals hold 0.
  for (const char* file : {"h200_aa_steps_meter.txt", "h200_aa_steps.txt"}) {
    SCOPED_TRACE(file);
    std::vector<Fallback> fired;
    const Monitor m = feed_series(file, 0.05, PhaseOptions{139, true, 2, 0}, &fired);
    EXPECT_TRUE(fired.empty()) << fired.front().reason;
    const MeasuredReport r = m.report();
    ASSERT_EQ(r.slowdown_ci_pct.size(), 2u);
    EXPECT_LT(r.slowdown_ci_pct[0], 0.0);
    EXPECT_GT(r.slowdown_ci_pct[1], 0.0);
    EXPECT_LT(std::abs(r.slowdown_pct), 5.0);
  }
}

TEST(RuntimeMonitor, ADriftingJobIsComparedBlockAgainstNeighbouringBlocks) {
  // The job slows 1 % a block whatever the clock, the policy costs 2 %: each policy block against the
  // mean of the default blocks on either side measures 2 %, where pooled steps would mix in the drift.
  Monitor m(0.05, PhaseOptions{10, true, 2, 0});
  int64_t t = 0;
  double e = 0;
  for (int k = 0; k <= 200; ++k) {
    m.anchor(k, t, e);
    ASSERT_FALSE(m.check(k).has_value()) << k;
    const bool policy = m.mode_of(k) == Mode::kPolicy;
    const double drift = 1 + 0.01 * (k / 10) + ((k % 3) - 1) * 1e-4;
    t += int64_t((policy ? 102 : 100) * drift * 1e6);
    e += (policy ? 9.0 : 10.0) * drift;  // J per step: the policy saves 10 %, the drift costs the same
  }
  const MeasuredReport r = m.report();
  EXPECT_NEAR(r.slowdown_pct, 2.0, 0.1);
  EXPECT_NEAR(r.saving_pct, 10.0, 0.1);
  ASSERT_EQ(r.slowdown_ci_pct.size(), 2u);
  EXPECT_GT(r.slowdown_ci_pct[0], 1.5);
  EXPECT_LT(r.slowdown_ci_pct[1], 2.5);
}

TEST(RuntimeMonitor, VerifyAlternatesAndGivesIntervalsForBoth) {
  const Monitor m = feed(0.05, PhaseOptions{4, true, 2, 0}, 80, 100, 103, 10, 9);
  const MeasuredReport r = m.report();
  EXPECT_EQ(r.default_side.steps, 10 * 3);
  EXPECT_EQ(r.policy_side.steps, 10 * 3);
  EXPECT_NEAR(r.saving_pct, 10, 1e-6);
  EXPECT_EQ(r.default_side.energy_windows, 10);
  ASSERT_EQ(r.saving_ci_pct.size(), 2u);
}

TEST(RuntimeMonitor, InterpolatesTheCounterBetweenItsUpdatesInsteadOfTheLastValueRead) {
  // 100 W default, 80 W policy; the counter moves every 20 ms and is polled every 2 ms, as the
  // controller thread does; steps are 30 ms, so the last value read at an anchor is up to 20 ms
  // (up to 2 J) stale.
  Monitor m(0.05, PhaseOptions{4, true, 2, 0});
  m.expect_gpus(1);
  double e = 0, shown = 0;
  int64_t t = 0;
  for (int k = 0; k <= 40; ++k) {
    m.anchor(k, t, shown);
    const double watts = m.mode_of(k) == Mode::kPolicy ? 80 : 100;
    for (int ms = 0; ms < 30; ++ms) {
      if (t % (20 * kMs) == 0) shown = e;          // the counter moves
      if (t % (2 * kMs) == 0) m.counter(0, t, shown);  // the poll
      t += kMs;
      e += watts / 1e3;
    }
  }
  const MeasuredReport r = m.report();
  EXPECT_NEAR(r.default_side.energy_j, 3.0, 0.03);
  EXPECT_NEAR(r.policy_side.energy_j, 2.4, 0.03);
  EXPECT_NEAR(r.saving_pct, 20, 0.5);
  EXPECT_EQ(r.default_side.energy_windows, 5);
}

TEST(RuntimeProgram, GroupsThePolicysPacksPerRankInIssueOrder) {
  optimize::PolicyFile p;
  p.default_clock_mhz = 1980;
  p.max_slowdown = 0.05;
  p.packs = {{graph::RankIndex(1), 0, 3, 1200, 9000}, {graph::RankIndex(0), 0, 2, 1400, 500},
             {graph::RankIndex(1), 4, 9, 1600, 100}};
  p.predicted = {{"policy", {{"time_us", 120.5}}}};
  const Program g = program_of(p, 2);
  ASSERT_EQ(g.ranks.size(), 2u);
  ASSERT_EQ(g.ranks[1].size(), 2u);
  EXPECT_EQ(g.ranks[1][0].clock_mhz, 1600);
  EXPECT_EQ(g.ranks[1][0].pack, 2u);
  EXPECT_EQ(g.ranks[1][1].issue_at_ns, 9000);
  EXPECT_EQ(g.ranks[0][0].clock_mhz, 1400);
  EXPECT_DOUBLE_EQ(g.predicted_step_ns, 120500);
}

}  // namespace
}  // namespace emo::runtime
