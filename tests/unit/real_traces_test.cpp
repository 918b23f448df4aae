// Every real Kineto trace in ../shared/traces: the replay of the unmodified
// graph reproduces the measured step within 1 %, and files that are not Chrome
// traces fail with a clear error rather than a crash. Skipped when ../shared is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "emo/analysis/analysis.h"
#include "test_util.h"

namespace emo {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> trace_files(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    std::string p = e.path().string();
    bool json = p.size() > 5 && (p.ends_with(".json") || p.ends_with(".json.gz"));
    if (json) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Files under traces/ that are not Kineto traces (execution traces, Chakra graphs).
bool not_a_trace(const std::string& p) {
  return p.find("_et.json") != std::string::npos || p.find("dlrm_pytorch_et") != std::string::npos ||
         p.find("/chakra/") != std::string::npos || p.find("_et_") != std::string::npos;
}

TEST(RealTraces, ReplayReproducesEveryTraceWithGpuWorkWithinOnePercent) {
  EMO_REQUIRE_SHARED(root, "traces");
  int checked = 0;
  for (const std::string& p : trace_files(root)) {
    if (not_a_trace(p)) continue;
    SCOPED_TRACE(p);
    auto w = analysis::load({p}, {});
    if (!w.ok()) {
      ADD_FAILURE() << "a Kineto trace failed to load: " << w.error().message();
      continue;
    }
    bool gpu = false;
    for (auto k : w->graph.kind) gpu |= graph::is_gpu(k);
    if (!gpu) continue;
    auto a = analysis::analyze(*w);
    EXPECT_LE(std::abs(a.replay_error_pct), 1.0) << "measured " << a.measured_span_ns << " replayed "
                                                << a.replayed_span_ns;
    // The critical path accounts for the whole replayed span.
    int64_t sum = 0;
    for (const auto& part : a.critical_path.breakdown) sum += part.ns;
    EXPECT_EQ(sum, a.replayed_span_ns);
    ++checked;
  }
  EXPECT_GE(checked, 30) << "fewer real traces with GPU work than expected";
}

TEST(RealTraces, NonTraceJsonFilesAreCleanErrors) {
  EMO_REQUIRE_SHARED(root, "traces");
  int checked = 0;
  for (const std::string& p : trace_files(root)) {
    if (!not_a_trace(p)) continue;
    SCOPED_TRACE(p);
    auto w = analysis::load({p}, {});
    if (!w.ok()) {
      EXPECT_FALSE(w.error().what.empty());
      ++checked;
    }
  }
  EXPECT_GE(checked, 1);
}

TEST(RealTraces, EightRankDlrmStepMatchesCollectivesAcrossRanks) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  const std::vector<std::string> files = test::files_in(dir);
  ASSERT_EQ(files.size(), 8u);
  auto w = analysis::load(files, {});
  ASSERT_TRUE(w.ok()) << w.error().message();
  ASSERT_EQ(w->ranks.size(), 8u);
  for (size_t r = 0; r < 8; ++r) EXPECT_EQ(w->ranks[r].rank, static_cast<int>(r));
  EXPECT_GT(w->graph.stats.collectives_matched, 0);
  EXPECT_EQ(w->graph.stats.collectives_unmatched, 0);
  auto a = analysis::analyze(*w);
  EXPECT_LE(std::abs(a.replay_error_pct), 1.0);
  // Slowing every collective transfer must lengthen the step; slowing nothing keeps it.
  auto slower = analysis::what_if(*w, {*analysis::parse_scale("cat:nccl=3")});
  ASSERT_TRUE(slower.ok()) << slower.error().message();
  EXPECT_GT(slower->predicted_span_ns, slower->baseline_span_ns);
}

TEST(RealTraces, HtaSimpleAddCriticalPathAgreesWhereTheTimelineDecides) {
  // HTA's expected overlay marks 22 GPU ops critical. The 15 that gate a later CPU
  // wait are on our path too; see docs/replay.md for the 7 others (they finished
  // before the CPU reached its next sync, so they have slack).
  EMO_REQUIRE_SHARED(p, "traces/hta/tests/data/critical_path/end_to_end/simple_add/input/trace.json.gz");
  auto w = analysis::load({p}, {});
  ASSERT_TRUE(w.ok());
  auto a = analysis::analyze(*w);
  int gpu_on_path = 0;
  for (auto n : a.critical_path.nodes) gpu_on_path += graph::is_gpu(w->graph.kind[n]);
  EXPECT_EQ(gpu_on_path, 15);
  // The last sgemm ended long before cudaDeviceSynchronize was called: it has slack.
  int64_t last_sgemm_slack = -1;
  for (graph::NodeId n = 0; n < w->graph.num_nodes(); ++n) {
    if (w->graph.strings.view(w->graph.name[n]) == "ampere_sgemm_32x32_sliced1x4_tn") last_sgemm_slack = a.slack_ns[n];
  }
  EXPECT_GT(last_sgemm_slack, 200'000);
}

}  // namespace
}  // namespace emo
