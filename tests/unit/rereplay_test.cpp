// The incremental replay (replay::Rereplayer) against a full sweep: after any change of durations,
// chained over many changes, every point's time, the step's begin, end and end point are the same.
#include <gtest/gtest.h>

#include <random>

#include "emo/analysis/analysis.h"
#include "emo/replay/replay.h"
#include "synth_workload.h"
#include "test_util.h"

namespace emo::test {
namespace {

void expect_same(const replay::Timeline& a, const replay::Timeline& b, const std::string& what) {
  ASSERT_EQ(a.t_ns.size(), b.t_ns.size()) << what;
  size_t differ = 0;
  for (size_t i = 0; i < a.t_ns.size(); ++i) differ += a.t_ns[i] != b.t_ns[i];
  EXPECT_EQ(differ, 0u) << what;
  EXPECT_EQ(a.begin_ns, b.begin_ns) << what;
  EXPECT_EQ(a.end_ns, b.end_ns) << what;
  EXPECT_EQ(a.last_point, b.last_point) << what;
}

void chain_of_changes(const graph::Graph& g, uint64_t seed, const std::string& name) {
  replay::Replayer full(g);
  replay::Rereplayer inc(g);
  std::vector<int64_t> dur = g.dur_ns;
  replay::Timeline tl, want;
  full.run(dur, tl);
  std::mt19937_64 rng(seed);
  std::vector<graph::NodeId> gpu;
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.kind[n] == graph::NodeKind::kKernel || g.kind[n] == graph::NodeKind::kCommKernel) gpu.push_back(n);
  }
  ASSERT_FALSE(gpu.empty());
  for (int round = 0; round < 60; ++round) {
    std::vector<int64_t> next = dur;
    // One node, a run of a few, or many (the sweep fallback); slower, faster, to zero, back to the trace's.
    const size_t count = round % 10 == 9 ? gpu.size() / 2 : 1 + rng() % 6;
    const size_t from = rng() % gpu.size();
    for (size_t i = 0; i < count; ++i) {
      const graph::NodeId n = gpu[(from + i) % gpu.size()];
      switch (rng() % 4) {
        case 0: next[n] = next[n] * 3 / 2 + 1000; break;
        case 1: next[n] = next[n] / 2; break;
        case 2: next[n] = 0; break;
        default: next[n] = g.dur_ns[n]; break;
      }
    }
    inc.update(dur, next, tl);
    full.run(next, want);
    expect_same(tl, want, name + " round " + std::to_string(round));
    dur = std::move(next);
  }
}

TEST(Rereplay, EqualsAFullReplayAfterEveryChange) {
  chain_of_changes(synth_workload(synth::Workload::kTrainDP, 4, 4, 3).graph, 1, "train-dp");
  chain_of_changes(synth_workload(synth::Workload::kTrainPP, 4, 4, 5).graph, 2, "train-pp");
  chain_of_changes(synth_workload(synth::Workload::kTrainTP, 2, 4, 7).graph, 3, "train-tp");
}

TEST(Rereplay, RealMultiRankStep) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  auto w = analysis::load(files_in(dir), {});
  ASSERT_TRUE(w.ok());
  chain_of_changes(w->graph, 4, "dlrm");
}

}  // namespace
}  // namespace emo::test
