// When a policy's clock changes are issued (optimize::applied_policy): a change that lowers the clock is
// issued late (2·median − p99 switching latency ahead of its pack), one that raises it early (p99 ahead).
// A short pack that lowers the clock between two that raise it would then have its change issued after
// the next pack's: changes take effect in the order issued, so the short pack's clock would hold through
// the next pack (on the Kineto ResNet-50 sample's slack-only plan, emulated:a100@5, the step measured 4 %
// less energy than the plan's prediction). Issue times never go back within a GPU's step.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "emo/optimize/optimize.h"
#include "synth_workload.h"

namespace emo {
namespace {

TEST(IssueTimes, AShortPackThatLowersTheClockIsNeverIssuedAfterTheNextPack) {
  auto s = test::profiled_step(synth::Workload::kTrainDP, 1, 4, 1, 11);
  const optimize::Problem pr = s->problem();
  const pack::Packing& p = s->packing;
  const int64_t spread = int64_t((s->profile.switch_latency_p99_ms.value -
                                  std::max(0.0, 2 * s->profile.switch_latency_median_ms.value -
                                                    s->profile.switch_latency_p99_ms.value)) * 1e6);
  // The shortest pack with GPU work that has such packs before and after it.
  std::vector<size_t> busy;
  for (size_t k = 0; k < p.packs.size(); ++k) {
    if (p.packs[k].first_op <= p.packs[k].last_op) busy.push_back(k);
  }
  ASSERT_GE(busy.size(), 3u);
  size_t pick = 1;
  for (size_t i = 1; i + 1 < busy.size(); ++i) {
    const auto len = [&](size_t j) { return p.packs[busy[j]].end_ns - p.packs[busy[j]].begin_ns; };
    if (len(i) < len(pick)) pick = i;
  }
  ASSERT_LT(p.packs[busy[pick]].end_ns - p.packs[busy[pick]].begin_ns, spread)
      << "the step needs a pack shorter than the latencies' spread for the case";
  // Every pack at the highest clock but that one, at the lowest.
  std::vector<int> clocks(p.packs.size(), s->profile.max_clock_mhz());
  clocks[busy[pick]] = s->profile.min_clock_mhz();
  optimize::Solution sol;
  sol.default_plan = optimize::predict(pr, std::vector<int>(p.packs.size(), pr.default_clock_mhz), "default");
  sol.policy = optimize::predict(pr, clocks, "policy");
  auto pf = optimize::applied_policy(pr, sol, 0.05);
  ASSERT_TRUE(pf.ok()) << pf.error().message();
  ASSERT_EQ(pf->packs.size(), busy.size());
  const optimize::AppliedPack& low = pf->packs[pick];
  const optimize::AppliedPack& next = pf->packs[pick + 1];
  EXPECT_EQ(low.clock_mhz, s->profile.min_clock_mhz());
  EXPECT_EQ(next.clock_mhz, s->profile.max_clock_mhz());
  EXPECT_GE(next.issue_at_ns, low.issue_at_ns);
  // Issued together, in pack order: the next pack's clock is the one that holds after both.
  EXPECT_EQ(next.issue_at_ns, low.issue_at_ns);
}

}  // namespace
}  // namespace emo
