// The profiler's cost taken out of a step (emo/analysis/deprofile.h, docs/replay.md "The profiler's
// cost"): on the real H200 steps whose untraced periods the capture recorded, and on tiny traces whose
// answer is worked out by hand. Times are µs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/analysis/deprofile.h"
#include "emo/backends/target.h"
#include "emo/emulator/emulator.h"
#include "emo/executor/executor.h"
#include "emo/replay/replay.h"
#include "test_util.h"
#include "trace_json.h"

namespace emo::analysis {
namespace {

std::string data_path(const std::string& name) { return std::string(EMO_TEST_DATA_DIR) + "/traces/" + name; }

std::string launch_step(const std::string& untraced);

Workload load_file(const std::string& path) {
  auto w = load({path}, LoadOptions{});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
  return w.ok() ? std::move(*w) : Workload{};
}

Workload load_text(const std::string& json) {
  auto t = trace::parse_trace(json, "deprofiled.json");
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message());
  std::vector<trace::RankTrace> ranks;
  ranks.push_back(std::move(*t));
  auto w = assemble(std::move(ranks), LoadOptions{});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
  return w.ok() ? std::move(*w) : Workload{};
}

// GPU ops of a step, in stream order: (name, duration).
std::vector<std::pair<std::string, int64_t>> gpu_ops(const Workload& w) {
  std::vector<std::pair<std::string, int64_t>> out;
  const graph::Graph& g = w.graph;
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (graph::is_gpu(g.kind[n])) out.emplace_back(std::string(g.strings.view(g.name[n])), g.meas_end_ns[n] - g.meas_start_ns[n]);
  }
  return out;
}

int64_t median_untraced(const Workload& w) {
  std::vector<int64_t> u = w.ranks[0].untraced_step_ns;
  std::sort(u.begin(), u.end());
  return u[u.size() / 2];
}

void check_real(const std::string& file) {
  SCOPED_TRACE(file);
  const Workload w = load_file(data_path(file));
  ASSERT_EQ(w.ranks.size(), 1u);
  ASSERT_FALSE(w.ranks[0].untraced_step_ns.empty());
  const Analysis before = analyze(w);
  ASSERT_FALSE(step_warnings(w, before).empty());  // the profiler's slowdown is doubted
  auto c = estimate_profiler_cost(w);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->untraced_ns, median_untraced(w));
  EXPECT_NEAR(double(c->traced_ns), double(before.measured_span_ns), 2000.0);
  EXPECT_TRUE(c->explained);
  EXPECT_GT(c->host_scale, 0.0);
  EXPECT_LT(c->host_scale, 1.0);
  EXPECT_LE(c->replayed_ns, c->untraced_ns);
  EXPECT_GT(double(c->replayed_ns), 0.995 * double(c->untraced_ns));
  EXPECT_LT(c->host0_ns, c->untraced_ns);

  // The independent executor, the host's own time at the same factor (its own rules for threads,
  // calls and flows, nothing of the replay's): the job's untraced step within 1.5 %, where the replay
  // is fitted to it.
  executor::Scenario host;
  host.cpu_factor = c->host_scale;
  auto ex = executor::execute(w.ranks, host);
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  EXPECT_NEAR(double(ex->span_ns) / double(c->untraced_ns), 1.0, 0.015);

  // Written back and read again: the step the job runs, its GPU ops as recorded.
  const std::vector<std::string> texts = traces_with_host_scale(w, c->host_scale, &*c);
  ASSERT_EQ(texts.size(), 1u);
  const Workload d = load_text(texts[0]);
  const Analysis after = analyze(d);
  EXPECT_NEAR(double(after.measured_span_ns), double(c->replayed_ns), 2000.0);
  EXPECT_LT(std::abs(after.replay_error_pct), 0.1);
  EXPECT_TRUE(step_warnings(d, after).empty()) << step_warnings(d, after)[0];
  EXPECT_EQ(d.ranks[0].events.size(), w.ranks[0].events.size());
  EXPECT_EQ(d.ranks[0].untraced_step_ns, w.ranks[0].untraced_step_ns);
  EXPECT_EQ(d.ranks[0].device_name, w.ranks[0].device_name);
  EXPECT_EQ(d.graph.stats.thread_flow_edges, w.graph.stats.thread_flow_edges);
  const auto ops0 = gpu_ops(w), ops1 = gpu_ops(d);
  ASSERT_EQ(ops0.size(), ops1.size());
  for (size_t i = 0; i < ops0.size(); ++i) {
    EXPECT_EQ(ops0[i].first, ops1[i].first);
    EXPECT_NEAR(double(ops0[i].second), double(ops1[i].second), 1.0) << ops0[i].first;
  }
  // The GPU is as busy as it was, in a shorter step: its idle time is what the profiler added.
  ASSERT_EQ(after.gpus.size(), 1u);
  EXPECT_NEAR(double(after.gpus[0].busy_ns), double(before.gpus[0].busy_ns), 1000.0);
  EXPECT_LT(after.gpus[0].idle_ns, before.gpus[0].idle_ns);
}

TEST(Deprofile, TheH200TrainingStepBecomesTheJobsStep) { check_real("h200_transformer_train.json.gz"); }

// Backward runs on the autograd engine's thread in the training step: the executor at the factor gives
// the job's step through the fwdbwd flows, or, in a trace without them, through the engine's
// evaluate_function frames. With neither, the engine's run stays where it was recorded and the step is
// more than 20 % longer than the job's.
TEST(Deprofile, TheExecutorReachesTheJobsTrainingStepOnlyThroughTheEnginesLinks) {
  const Workload w = load_file(data_path("h200_transformer_train.json.gz"));
  auto c = estimate_profiler_cost(w);
  ASSERT_TRUE(c.ok()) << c.error().message();
  executor::Scenario host;
  host.cpu_factor = c->host_scale;
  auto with = executor::execute(w.ranks, host);
  ASSERT_TRUE(with.ok());
  EXPECT_GT(with->stats.thread_flows, 100);
  EXPECT_EQ(with->stats.thread_links_inferred, 0);
  EXPECT_EQ(with->stats.thread_waits, 1);
  EXPECT_LT(double(with->span_ns), 1.015 * double(c->untraced_ns));
  std::vector<trace::RankTrace> bare;
  for (const trace::RankTrace& t : w.ranks) bare.push_back(trace::from_wire(trace::to_wire(t)).value());
  for (trace::RankTrace& t : bare) {
    for (trace::Event& e : t.events) e.flow_out = e.flow_in = 0;
  }
  auto frames = executor::execute(bare, host);
  ASSERT_TRUE(frames.ok());
  EXPECT_GT(frames->stats.thread_links_inferred, 0);
  EXPECT_NEAR(double(frames->span_ns) / double(c->untraced_ns), 1.0, 0.02);
  // The engine's frames (evaluate_function, and the backward functions inside them) renamed to an
  // operator's name: nothing links the threads.
  for (trace::RankTrace& t : bare) {
    StrId other = kEmptyStr;
    for (const trace::Event& e : t.events) {
      if (t.strings.view(e.name).rfind("aten::", 0) == 0) other = e.name;
    }
    ASSERT_NE(other, kEmptyStr);
    for (trace::Event& e : t.events) {
      if (trace::is_autograd_engine_frame(t.strings.view(e.name))) e.name = other;
    }
  }
  auto without = executor::execute(bare, host);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->stats.thread_flows, 0);
  EXPECT_GT(double(without->span_ns), 1.2 * double(c->untraced_ns));
}

// The emulated GPU in the job as it runs ("emulated:h200@1:host=F", F the factor): the traced step at
// the default clock takes the job's untraced step, by the executor's rules alone; at F = 1 the traced one.
TEST(Deprofile, TheEmulatedGpuAtTheHostFactorRunsTheJobsStep) {
  const Workload w = load_file(data_path("h200_transformer_train.json.gz"));
  auto c = estimate_profiler_cost(w);
  ASSERT_TRUE(c.ok()) << c.error().message();
  auto job = backends::Target::open(fmt::format("emulated:h200@1:host={:.4f}", c->host_scale));
  ASSERT_TRUE(job.ok()) << job.error().message();
  auto traced = backends::Target::open("emulated:h200@1");
  ASSERT_TRUE(traced.ok());
  const int fmax = job->profile().max_clock_mhz();
  emulator::RunOptions o;
  o.steps = 3;
  o.trace_steps = 0;
  auto gpu = job->emulated_gpu("", "");
  ASSERT_TRUE(gpu.ok());
  EXPECT_DOUBLE_EQ((*gpu)->host_scale(), std::floor(c->host_scale * 1e4) / 1e4);
  auto run = (*gpu)->run(w.ranks, emulator::ClockSchedule::locked(fmax), o);
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_NEAR(run->mean_step_ns() / double(c->untraced_ns), 1.0, 0.02);
  auto as_traced = (*traced->emulated_gpu("", ""))->run(w.ranks, emulator::ClockSchedule::locked(fmax), o);
  ASSERT_TRUE(as_traced.ok());
  EXPECT_NEAR(as_traced->mean_step_ns() / double(c->traced_ns), 1.0, 0.02);
  EXPECT_FALSE(backends::Target::open("emulated:h200@1:host=-0.5").ok());
}

// `emo whatif --scale cat:host=X` scales what deprofile scales.
TEST(Deprofile, TheHostSelectorOfWhatIfIsDeprofilesHostTime) {
  const Workload w = load_file(data_path("h200_transformer_train.json.gz"));
  for (double x : {0.0, 0.494, 2.0}) {
    SCOPED_TRACE(x);
    EXPECT_DOUBLE_EQ(test::predicted_span_us(w, {fmt::format("cat:host={}", x)}),
                     double(replay_with_host_scale(w, x)) / 1000.0);
  }
  // It is more than any one category: CPU op self time alone at 0 leaves the runtime calls and gaps.
  EXPECT_LT(test::predicted_span_us(w, {"cat:host=0"}), test::predicted_span_us(w, {"cat:cpu_op=0"}) - 100.0);
}

TEST(Deprofile, TheH200InferenceStepBecomesTheJobsStep) { check_real("h200_transformer_infer.json.gz"); }

// --deprofile (LoadOptions::deprofile): every command works on the step the job runs, and says so; a
// step without untraced times, or one the profiler did not slow past the doubt, is left as it is.
TEST(Deprofile, TheLoadOptionGivesTheJobsStepAndSaysSo) {
  LoadOptions o;
  o.deprofile = true;
  auto w = load({data_path("h200_transformer_train.json.gz")}, o);
  ASSERT_TRUE(w.ok()) << w.error().message();
  ASSERT_TRUE(w->deprofiled.has_value());
  EXPECT_NEAR(w->deprofiled->host_scale, 0.494, 0.01);
  EXPECT_EQ(w->ranks[0].path, data_path("h200_transformer_train.json.gz"));
  const Analysis a = analyze(*w);
  EXPECT_NEAR(double(a.measured_span_ns), double(w->deprofiled->untraced_ns), 0.005 * double(w->deprofiled->untraced_ns));
  const auto said = step_warnings(*w, a);
  ASSERT_EQ(said.size(), 1u);  // what was done, and no doubt of the profiler's slowdown any more
  EXPECT_NE(said[0].find("the profiler's cost was taken out of the step"), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("x0.49"), std::string::npos) << said[0];

  // A step the profiler did not slow, or slowed within the doubt, is left as it is; past it, taken out.
  auto with_option = [](const std::string& untraced) {
    auto t = trace::parse_trace(launch_step(untraced), "step.json");
    EXPECT_TRUE(t.ok());
    std::vector<trace::RankTrace> ranks;
    ranks.push_back(std::move(*t));
    LoadOptions lo;
    lo.deprofile = true;
    auto out = assemble(std::move(ranks), lo);
    EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message());
    return out.ok() ? std::move(*out) : Workload{};
  };
  EXPECT_FALSE(with_option("80, 85").deprofiled.has_value());
  EXPECT_FALSE(with_option("75").deprofiled.has_value());  // 80 against 75: +6.7 %
  const Workload far = with_option("65");                   // +23 %
  ASSERT_TRUE(far.deprofiled.has_value());
  EXPECT_NEAR(double(analyze(far).measured_span_ns), 65'000.0, 100.0);
}

// At x1 the step is written back as its replay has it (which is the recorded step within the replay's
// error, -0.001 % here): the writer loses nothing the reader reads.
TEST(Deprofile, AtOneTheStepIsWrittenBackAsItsReplay) {
  const Workload w = load_file(data_path("h200_transformer_train.json.gz"));
  const Workload d = load_text(traces_with_host_scale(w, 1.0, nullptr)[0]);
  const Analysis a = analyze(w), b = analyze(d);
  EXPECT_NEAR(double(b.measured_span_ns), double(a.replayed_span_ns), 2.0);
  ASSERT_EQ(d.graph.num_nodes(), w.graph.num_nodes());
  EXPECT_EQ(d.graph.edges.size(), w.graph.edges.size());
  replay::Replayer r(w.graph);
  replay::Timeline tl;
  r.run(tl);
  for (graph::NodeId n = 0; n < w.graph.num_nodes(); ++n) {
    ASSERT_NEAR(double(d.graph.meas_start_ns[n] - d.graph.measured_begin_ns()), double(tl.start(n) - tl.begin_ns), 2.0)
        << n;
    ASSERT_NEAR(double(d.graph.meas_end_ns[n] - d.graph.measured_begin_ns()), double(tl.end(n) - tl.begin_ns), 2.0) << n;
  }
}

// One thread: cudaLaunchKernel [100,105] -> K1 [110,130], a gap [105,130], CPU op `prep` [130,145], a gap
// [145,150], cudaLaunchKernel [150,155] -> K2 [160,180] (10 after its call starts, as K1). The step is
// [100,180], 80 µs. With host time x a the second call starts at 100 + 50a, K2 at max(110 + 50a, 130)
// (it follows K1 on the stream), and the step is max(50, 30 + 50a) µs: 80 at a = 1, 50 at a = 0.
std::string launch_step_json() {
  return test::TraceJson().launch("K1", 7, 100, 110, 20, 1).cpu("prep", 130, 15).launch("K2", 7, 150, 160, 20, 2).str();
}

std::string launch_step(const std::string& untraced) {
  return launch_step_json().insert(1, "\"emo_untraced_step_us\": [" + untraced + "], ");
}

TEST(Deprofile, AStepTheHostCannotExplainIsSaidAndOneTheProfilerDidNotSlowIsRefused) {
  // The job's steps took 40 µs: even with no host time the step takes 50 (K1 and K2 back to back).
  const Workload w = load_text(launch_step("40, 40, 40"));
  auto c = estimate_profiler_cost(w);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->traced_ns, 80'000);
  EXPECT_EQ(c->host0_ns, 50'000);
  EXPECT_FALSE(c->explained);
  EXPECT_EQ(c->host_scale, 0.0);
  // 65 µs: 30 + 50a = 65 at a = 0.7.
  const Workload w65 = load_text(launch_step("65"));
  auto c65 = estimate_profiler_cost(w65);
  ASSERT_TRUE(c65.ok()) << c65.error().message();
  EXPECT_TRUE(c65->explained);
  EXPECT_NEAR(c65->host_scale, 0.7, 2e-4);
  EXPECT_LE(c65->replayed_ns, 65'000);
  EXPECT_GE(c65->replayed_ns, 64'980);
  EXPECT_EQ(replay_with_host_scale(w65, c65->host_scale), c65->replayed_ns);
  // The job's step time given: it wins over the trace's (65 against 40 here), as for a trace without.
  auto given = estimate_profiler_cost(w, 65'000);
  ASSERT_TRUE(given.ok()) << given.error().message();
  EXPECT_EQ(given->untraced_ns, 65'000);
  EXPECT_NEAR(given->host_scale, 0.7, 2e-4);
  // Untraced no faster than traced: nothing to take out.
  auto none = estimate_profiler_cost(load_text(launch_step("80, 90")));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("the profiler did not slow this step"), std::string::npos);
  // No untraced steps at all.
  auto missing = estimate_profiler_cost(load_text(test::TraceJson().launch("K1", 7, 100, 110, 20, 1).str()));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("does not say how long the job's steps take"), std::string::npos);
  auto missing_given = estimate_profiler_cost(load_text(launch_step_json()), 65'000);
  ASSERT_TRUE(missing_given.ok()) << missing_given.error().message();
  EXPECT_NEAR(missing_given->host_scale, 0.7, 2e-4);
}

}  // namespace
}  // namespace emo::analysis
