// `emo run` as a library: one end-to-end run on a small synthetic workload, then checks of every file
// of the report folder (numbers consistent, charts drawn, overlay reads back as the same step) and of
// the folder's replace-at-the-end behaviour.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "emo/analysis/analysis.h"
#include "emo/base/file_util.h"
#include "emo/graph/graph.h"
#include "emo/report/report.h"
#include "emo/trace/trace.h"
#include "test_util.h"

namespace emo {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

report::RunOptions small_options(const std::string& dir) {
  report::RunOptions o;
  o.out_dir = dir;
  o.example.workload = synth::Workload::kTrainDP;
  o.example.ranks = 2;
  o.example.layers = 2;
  o.eval_steps = 3;
  return o;
}

class ReportRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = test::temp_dir("report");
    dir_ = (fs::path(base_) / "rep").string();
    auto r = report::run(small_options(dir_));
    ASSERT_TRUE(r.ok()) << r.error().message();
    result_ = new report::RunResult(*r);
  }
  static void TearDownTestSuite() {
    delete result_;
    result_ = nullptr;
    std::error_code ec;
    fs::remove_all(base_, ec);
  }
  static int64_t gpu_ops(const std::string& text, const std::string& name) {
    auto t = trace::parse_trace(text, name);
    EXPECT_TRUE(t.ok());
    if (!t.ok()) return -1;
    std::vector<trace::RankTrace> ranks;
    ranks.push_back(std::move(*t));
    auto w = analysis::assemble(std::move(ranks), {});
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
    if (!w.ok()) return -1;
    int64_t n = 0;
    for (graph::NodeId i = 0; i < w->graph.num_nodes(); ++i) n += graph::is_gpu(w->graph.kind[i]) ? 1 : 0;
    return n;
  }
  static std::string base_, dir_;
  static report::RunResult* result_;
};
std::string ReportRun::base_, ReportRun::dir_;
report::RunResult* ReportRun::result_ = nullptr;

TEST_F(ReportRun, WritesEveryFileAndNoTemporaryOnes) {
  ASSERT_NE(result_, nullptr);
  for (const char* f : {"summary.json", "packs.csv", "results.csv", "policy.json", "report.html", "overlay.json",
                        "overlay_rank1.json", "input/train-dp_rank0.json"})
    EXPECT_TRUE(fs::exists(fs::path(dir_) / f)) << f;
  for (const auto& e : fs::recursive_directory_iterator(base_))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(ReportRun, SummaryNumbersAreConsistent) {
  ASSERT_NE(result_, nullptr);
  const auto j = nlohmann::json::parse(slurp(fs::path(dir_) / "summary.json"));
  const auto& s = j.at("summary");
  EXPECT_EQ(s.at("device"), "h100");
  EXPECT_DOUBLE_EQ(s.at("max_slowdown").get<double>(), 0.05);
  EXPECT_LE(s["predicted"]["policy"]["energy_j"].get<double>(), s["predicted"]["default"]["energy_j"].get<double>());
  EXPECT_GT(s["step_time_us"]["default"].get<double>(), 0);
  EXPECT_GT(s["energy_j"]["policy"].get<double>(), 0);
  EXPECT_TRUE(s["policy"].contains("slowdown_pct"));
  EXPECT_TRUE(s["policy"].contains("saving_pct"));
  EXPECT_FALSE(s["baselines"].empty());
  EXPECT_GT(s["packs"].get<int64_t>(), 0);
  EXPECT_GT(s["kernel_units"].get<int64_t>(), 0);
  EXPECT_LE(s["profiled_units"].get<int64_t>(), s["kernel_units"].get<int64_t>());
  EXPECT_TRUE(s["critical_path"].contains("breakdown"));
  for (const char* st : {"synth", "analyze", "pack", "profile", "fit", "optimize", "evaluate", "total"})
    EXPECT_TRUE(s["stage_ms"].contains(st)) << st;
  // results.csv: a header and one row per plan (default, policy, the baselines).
  const std::string csv = slurp(fs::path(dir_) / "results.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), int64_t(result_->plans.size()) + 1);
  EXPECT_EQ(result_->plans.size(), 2 + s["baselines"].size());
  EXPECT_EQ(result_->plans[0].name, "default");
  EXPECT_EQ(result_->plans[1].name, "policy");
}

TEST_F(ReportRun, HtmlHasFiveDrawnChartsAndNoNetwork) {
  ASSERT_NE(result_, nullptr);
  const std::string h = slurp(fs::path(dir_) / "report.html");
  EXPECT_EQ(h.find("http://"), std::string::npos);
  EXPECT_EQ(h.find("https://"), std::string::npos);
  EXPECT_EQ(h.find("<link"), std::string::npos);
  EXPECT_EQ(h.find("src="), std::string::npos);
  int charts = 0;
  for (size_t at = h.find("<svg"); at != std::string::npos; at = h.find("<svg", at + 1)) {
    const size_t end = h.find("</svg>", at);
    ASSERT_NE(end, std::string::npos);
    const std::string svg = h.substr(at, end - at);
    const bool drawn = svg.find("<rect") != std::string::npos || svg.find("<circle") != std::string::npos;
    EXPECT_TRUE(drawn) << svg.substr(0, 80);
    // Text is escaped: every '<' opens a tag.
    for (size_t k = svg.find('<'); k != std::string::npos; k = svg.find('<', k + 1))
      EXPECT_TRUE(std::isalpha(static_cast<unsigned char>(svg[k + 1])) || svg[k + 1] == '/') << svg.substr(k, 40);
    ++charts;
  }
  EXPECT_EQ(charts, 5);
  for (const char* id : {"chart-tradeoff", "chart-timeline", "chart-critical-path", "chart-slack", "chart-profiling"})
    EXPECT_NE(h.find(id), std::string::npos) << id;
  // Every plan is a point of the time-energy chart.
  size_t circles = 0;
  for (size_t at = h.find("<circle"); at != std::string::npos; at = h.find("<circle", at + 1)) ++circles;
  EXPECT_EQ(circles, result_->plans.size());
}

TEST_F(ReportRun, OverlayIsValidAndReadsBackAsTheSameStep) {
  ASSERT_NE(result_, nullptr);
  const std::string text = slurp(fs::path(dir_) / "overlay.json");
  const auto j = nlohmann::json::parse(text);
  int counters = 0, packs_b = 0, packs_e = 0;
  for (const auto& e : j.at("traceEvents")) {
    const std::string ph = e.value("ph", "");
    if (ph == "C" && e.value("name", "") == "SM clock (MHz)") ++counters;
    if (ph == "b" && e.value("cat", "") == "emo_pack") ++packs_b;
    if (ph == "e" && e.value("cat", "") == "emo_pack") ++packs_e;
  }
  EXPECT_GT(counters, 0);
  EXPECT_GT(packs_b, 0);
  EXPECT_EQ(packs_b, packs_e);
  // The clock stays set until the next change: the track moves where a pack starts (and once at the
  // step's start, to the clock the last pack left), never back to the default between packs.
  EXPECT_LE(counters, packs_b + 1);
  int last_pack_clock = 0, first_counter = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.value("ph", "") == "b" && e.value("cat", "") == "emo_pack") last_pack_clock = e["args"]["clock_mhz"].get<int>();
    if (e.value("ph", "") == "C" && first_counter == 0) first_counter = e["args"]["MHz"].get<int>();
  }
  if (counters == packs_b + 1) {
    EXPECT_EQ(first_counter, last_pack_clock);
  }
  const std::string input = slurp(fs::path(dir_) / "input" / "train-dp_rank0.json");
  const int64_t in_ops = gpu_ops(input, "input");
  EXPECT_GT(in_ops, 0);
  EXPECT_EQ(gpu_ops(text, "overlay"), in_ops);
}

TEST_F(ReportRun, OnlyAnEarlierReportIsReplacedAndOnlyAtTheEnd) {
  ASSERT_NE(result_, nullptr);
  const fs::path dir = fs::path(base_) / "again";
  fs::create_directories(dir);
  std::ofstream(dir / "old.txt") << "old";
  // Not one that emo wrote: refused before any work, and left as it was.
  report::RunOptions foreign = small_options(dir.string());
  foreign.traces = {(fs::path(dir_) / "input" / "train-dp_rank0.json").string(),
                    (fs::path(dir_) / "input" / "train-dp_rank1.json").string()};
  auto r0 = report::run(foreign);
  ASSERT_FALSE(r0.ok());
  EXPECT_NE(r0.error().what.find("did not write"), std::string::npos) << r0.error().what;
  EXPECT_TRUE(fs::exists(dir / "old.txt"));
  EXPECT_FALSE(fs::exists(dir / "summary.json"));
  // Nor a file in the folder's place.
  const fs::path file = fs::path(base_) / "a-file";
  std::ofstream(file) << "keep";
  auto rf = report::run(small_options(file.string()));
  ASSERT_FALSE(rf.ok());
  EXPECT_NE(rf.error().what.find("not a folder"), std::string::npos) << rf.error().what;
  EXPECT_TRUE(fs::is_regular_file(file));
  std::ofstream(dir / kFolderMark) << "as an earlier report leaves it";
  // A failing run leaves the old folder as it was, and nothing temporary beside it.
  report::RunOptions bad = small_options(dir.string());
  bad.traces = {(fs::path(base_) / "missing.json").string()};
  auto r = report::run(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(fs::exists(dir / "old.txt"));
  for (const auto& e : fs::directory_iterator(base_))
    EXPECT_EQ(e.path().filename().string().find("again."), std::string::npos) << e.path();
  // A good one replaces it whole.
  report::RunOptions good = small_options(dir.string());
  good.traces = {(fs::path(dir_) / "input" / "train-dp_rank0.json").string(),
                 (fs::path(dir_) / "input" / "train-dp_rank1.json").string()};
  auto r2 = report::run(good);
  ASSERT_TRUE(r2.ok()) << r2.error().message();
  EXPECT_FALSE(fs::exists(dir / "old.txt"));
  EXPECT_TRUE(fs::exists(dir / "summary.json"));
  EXPECT_FALSE(fs::exists(dir / "input"));
  EXPECT_TRUE(fs::exists(dir / kFolderMark));
  for (const auto& e : fs::directory_iterator(base_))
    EXPECT_EQ(e.path().filename().string().find("again."), std::string::npos) << e.path();
}

TEST(Report, BadSlowdownIsAnError) {
  report::RunOptions o;
  o.max_slowdown = 2;
  o.out_dir = test::temp_dir("report_bad") + "/rep";
  auto r = report::run(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().where, "--max-slowdown");
  EXPECT_FALSE(fs::exists(o.out_dir));
}

}  // namespace
}  // namespace emo
