// `emo analyze` counts two different things about GPU ops and must name each:
// the ops on the extracted critical path, and the ops with no slack (any op on
// a binding chain, ties included). Where binding chains tie they differ: the
// path follows one chain, slack is zero on all of them. Times in the
// comments are µs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "test_util.h"
#include "trace_json.h"

namespace emo {
namespace {

using test::TraceJson;

analysis::Workload load(const std::string& json) { return test::workload_of({json}); }

int64_t zero_slack(const analysis::Workload& w, const analysis::Analysis& a) {
  int64_t n = 0;
  for (graph::NodeId i = 0; i < w.graph.num_nodes(); ++i) n += graph::is_gpu(w.graph.kind[i]) && a.slack_ns[i] == 0;
  return n;
}

// Two streams tie: A (stream 7) runs 10..210, B (stream 13) 110..210; a
// cudaDeviceSynchronize (20..215) returns 5 µs after both end, then CPU work
// 220..1000. Growing either kernel delays the sync's return, so neither has
// slack; the extracted path goes through one of them (A, the first binding
// dependency), so 1 GPU op is on the critical path and 2 have no slack.
std::string tied_streams() {
  return TraceJson()
      .launch("A", 7, 0, 10, 200, 1)
      .launch("B", 13, 5, 110, 100, 2)
      .runtime("cudaDeviceSynchronize", 20, 195, 3)
      .cpu("aten::cpu_heavy", 220, 780)
      .str();
}

TEST(AnalysisCounts, PathOpsAndZeroSlackOpsDifferWhenStreamsTie) {
  analysis::Workload w = load(tied_streams());
  analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(a.replay_error_pct, 0.0);
  EXPECT_EQ(analysis::gpu_ops_on_path(w, a), 1);
  EXPECT_EQ(zero_slack(w, a), 2);

  const std::string text = analysis::to_text(w, a);
  EXPECT_NE(text.find("GPU ops on the critical path: 1 of 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU ops with no slack: 2 of 2\n"), std::string::npos) << text;

  nlohmann::json j = analysis::to_json(w, a, false);
  EXPECT_EQ(j["critical_path"]["gpu_ops_on_path"], 1);
  EXPECT_EQ(j["critical_path"]["gpu_ops_total"], 1);
  ASSERT_EQ(j["critical_path"]["gpu_ops"].size(), 1u);
  EXPECT_EQ(j["critical_path"]["gpu_ops"][0]["name"], "A");
  EXPECT_EQ(j["slack"]["gpu_ops"], 2);
  EXPECT_EQ(j["slack"]["gpu_ops_with_no_slack"], 2);
  EXPECT_EQ(j["slack"]["gpu_ops_on_critical_path"], 2) << "the old key keeps its old meaning";
}

TEST(AnalysisCounts, CpuBoundStepWithoutGpuOnThePath) {
  // Launch K at 0, K runs 10..60; the CPU goes on 10..900 without waiting:
  // the path is CPU only, K has 840 µs of slack. 0 of 1 on both counts.
  analysis::Workload w = load(TraceJson().launch("K", 7, 0, 10, 50, 1).cpu("aten::cpu_heavy", 10, 890).str());
  analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(analysis::gpu_ops_on_path(w, a), 0);
  EXPECT_EQ(zero_slack(w, a), 0);
  const std::string text = analysis::to_text(w, a);
  EXPECT_NE(text.find("GPU ops on the critical path: 0 of 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU ops with no slack: 0 of 1\n"), std::string::npos) << text;
}

TEST(AnalysisCounts, GpuBoundStepCountsEveryOpOnBoth) {
  // One stream, the CPU runs ahead: K1 10..110, K2 111..211, K3 212..312 queued
  // back to back; all three are on the path and none has slack.
  analysis::Workload w = load(TraceJson()
                                  .launch("K1", 7, 0, 10, 100, 1)
                                  .launch("K2", 7, 10, 111, 100, 2)
                                  .launch("K3", 7, 20, 212, 100, 3)
                                  .str());
  analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(analysis::gpu_ops_on_path(w, a), 3);
  EXPECT_EQ(zero_slack(w, a), 3);
  const std::string text = analysis::to_text(w, a);
  EXPECT_NE(text.find("GPU ops on the critical path: 3 of 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU ops with no slack: 3 of 3\n"), std::string::npos) << text;
  nlohmann::json j = analysis::to_json(w, a, false);
  EXPECT_EQ(j["critical_path"]["gpu_ops_on_path"], 3);
  EXPECT_EQ(j["slack"]["gpu_ops_with_no_slack"], 3);
}

TEST(AnalysisCounts, TextCarriesNoWarningLines) {
  // Import warnings are printed apart (stderr, by `emo analyze`), not in the text.
  analysis::Workload w = load(TraceJson()
                                  .launch("K", 7, 0, 10, 100, 1)
                                  .raw(R"({"ph":"X","cat":"kernel","name":"bad","pid":0,"tid":7,"dur":1})")
                                  .str());
  analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(analysis::to_text(w, a).find("warning:"), std::string::npos);
  std::vector<std::string> warnings = analysis::import_warnings(w);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "1 malformed events skipped (see import_stats in --json)");
}

}  // namespace
}  // namespace emo

namespace emo {
namespace {

// A folder among the trace paths stands for its .json and .json.gz files (not its subfolders, hidden
// files or other names), in byte order; files, "-" and missing paths pass as given; a folder with
// none of them is an Error naming it.
TEST(TracePaths, AFolderStandsForItsTraceFilesInByteOrder) {
  const std::string dir = test::temp_dir("trace_paths");
  for (const char* n : {"rank10.json", "rank2.json.gz", "rank1.pt.trace.json", ".hidden.json", "policy.csv",
                        "notes.json.txt"})
    test::write(dir, n, "{}");
  std::filesystem::create_directories(dir + "/sub.json");
  test::write(dir + "/sub.json", "rank3.json", "{}");
  auto got = analysis::expand_trace_paths({"-", dir, dir + "/policy.csv", "missing.json"});
  ASSERT_TRUE(got.ok()) << got.error().message();
  const std::vector<std::string> want = {"-", dir + "/rank1.pt.trace.json", dir + "/rank10.json", dir + "/rank2.json.gz",
                                         dir + "/policy.csv", "missing.json"};
  EXPECT_EQ(*got, want);
  auto slash = analysis::expand_trace_paths({dir + "/"});
  ASSERT_TRUE(slash.ok());
  EXPECT_EQ(slash->front(), dir + "/rank1.pt.trace.json");

  const std::string empty = dir + "/sub.json/inner";
  std::filesystem::create_directories(empty);
  test::write(empty, "readme.txt", "x");
  auto none = analysis::expand_trace_paths({dir + "/rank10.json", empty});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().where, empty);
  EXPECT_NE(none.error().what.find("no trace files in this folder"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace emo
