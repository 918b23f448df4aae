// Dependencies between CPU threads (docs/replay.md, "Threads that wake threads"): Kineto's fwdbwd
// flows link a forward op to the backward op the autograd engine ran for it on its own thread. Tiny
// traces whose answer is worked out by hand in each test's comment, and the real H200 training step.
// Times are µs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "emo/analysis/analysis.h"
#include "emo/executor/executor.h"
#include "emo/trace/trace.h"
#include "test_util.h"
#include "trace_json.h"

namespace emo {
namespace {

using test::TraceJson;

std::string flow(const char* ph, int id, double ts, int tid) {
  return fmt::format(R"({{"ph":"{}","id":{},"pid":100,"tid":{},"ts":{},"cat":"fwdbwd","name":"fwdbwd"{}}})", ph, id,
                     tid, ts, ph[0] == 'f' ? R"(,"bp":"e")" : "");
}

// The loop thread (tid 1) runs aten::mean [100,120] (the forward op of flow 1) and then calls
// backward(): nothing is recorded on it until `optimizer` [400,420], which launches K3 ([405,410] ->
// K3 [412,418]). The engine's thread (tid 2) runs MeanBackward0 [150,390] (flow 1's backward op), which
// launches K2 ([160,165] -> K2 [170,220]). The step is [100,420].
std::string backward_step() {
  return TraceJson()
      .cpu("aten::mean", 100, 20)
      .cpu("optimizer", 400, 20)
      .launch("K3", 7, 405, 412, 6, 3)
      .cpu("MeanBackward0", 150, 240, 2)
      .launch("K2", 7, 160, 170, 50, 2, 2)
      .raw(flow("s", 1, 100, 1))
      .raw(flow("f", 1, 150, 2))
      .str();
}

const trace::Event* named(const trace::RankTrace& t, std::string_view name) {
  for (const trace::Event& e : t.events) {
    if (t.name_of(e) == name) return &e;
  }
  return nullptr;
}

int64_t stat(const trace::RankTrace& t, std::string_view prefix) {
  for (const auto& row : t.stats.rows) {
    if (row.what.rfind(prefix, 0) == 0) return row.count;
  }
  return 0;
}

TEST(ThreadFlows, TheReaderBindsEachFlowToTheOpsItStandsOn) {
  auto t = trace::parse_trace(backward_step(), "r.json");
  ASSERT_TRUE(t.ok()) << t.error().message();
  const trace::Event* fwd = named(*t, "aten::mean");
  const trace::Event* bwd = named(*t, "MeanBackward0");
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(fwd->flow_out, 1u);
  EXPECT_EQ(fwd->flow_in, 0u);
  EXPECT_EQ(bwd->flow_in, 1u);
  EXPECT_EQ(bwd->flow_out, 0u);
  EXPECT_EQ(stat(*t, "fwdbwd flows read"), 1);
  // Used, so not among the skipped flow events.
  EXPECT_EQ(stat(*t, "flow events (ph 's') skipped"), 0);
  // A trace of an MPI run hands them on.
  auto back = trace::from_wire(trace::to_wire(*t));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(named(*back, "MeanBackward0")->flow_in, 1u);
}

TEST(ThreadFlows, FlowsThatCannotBeBoundAreCountedNotUsed) {
  const std::string json = TraceJson()
                               .cpu("aten::mean", 100, 20)
                               .cpu("aten::sum", 200, 20)
                               .cpu("MeanBackward0", 150, 40, 2)
                               // 2: its backward end names no op; 3: backward before forward;
                               // 4: no 'f'; 5: no id at all
                               .raw(flow("s", 2, 100, 1))
                               .raw(flow("f", 2, 170, 2))
                               .raw(flow("s", 3, 200, 1))
                               .raw(flow("f", 3, 150, 2))
                               .raw(flow("s", 4, 100, 1))
                               .raw(R"({"ph":"f","pid":100,"tid":2,"ts":150,"cat":"fwdbwd","name":"fwdbwd"})")
                               .str();
  auto t = trace::parse_trace(json, "r.json");
  ASSERT_TRUE(t.ok()) << t.error().message();
  for (const trace::Event& e : t->events) {
    EXPECT_EQ(e.flow_out, 0u) << t->name_of(e);
    EXPECT_EQ(e.flow_in, 0u) << t->name_of(e);
  }
  EXPECT_EQ(stat(*t, "fwdbwd flows read"), 0);
  EXPECT_EQ(stat(*t, "fwdbwd flows not used"), 2);
  EXPECT_EQ(stat(*t, "fwdbwd flow ends without their other end"), 1);
  EXPECT_EQ(stat(*t, "fwdbwd flow events without a usable id"), 1);
}

TEST(ThreadFlows, BackwardFollowsItsForwardOpAndTheLoopWaitsForBackward) {
  const analysis::Workload w = test::workload_of({backward_step()});
  const graph::Graph& g = w.graph;
  EXPECT_EQ(g.stats.thread_flow_edges, 1);
  EXPECT_EQ(g.stats.thread_waits, 1);
  // The loop thread's gap [120,400] held the engine's whole run, to 390.
  EXPECT_EQ(g.stats.thread_wait_ns, 270'000);
  int cross = 0;
  for (const graph::Edge& e : g.edges) cross += e.kind == graph::EdgeKind::kCrossThread;
  EXPECT_EQ(cross, 2);
  const analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(a.measured_span_ns, 320'000);
  EXPECT_EQ(a.replayed_span_ns, 320'000);
  // The path runs back from `optimizer` through the engine's thread to aten::mean.
  bool through_engine = false;
  for (graph::NodeId n : a.critical_path.nodes) through_engine |= g.lanes[g.lane[n]].tid == 2;
  EXPECT_TRUE(through_engine);

  // Every cpu_op's own time removed (runtime calls and the gap's tail stay):
  // aten::mean [100,100]; MeanBackward0 starts 30 after it (its measured wake-up, 150 - 120) at 130,
  // its launch [130,135] -> K2 at 140 (10 after the call starts, as measured) to 190; the engine ends
  // at 135; the loop's wait ends 10 after it (400 - 390) at 145; `optimizer`'s launch [145,150] -> K3
  // after K2, [190,196]. The step: [100,196].
  EXPECT_DOUBLE_EQ(test::predicted_span_us(w, {"cat:cpu_op=0"}), 96);
  // Without the flows, and with an op no engine runs (a backward function's name would be known:
  // AutogradEngineFramesAreKnownByName), the engine's thread starts where it was recorded (150) and the
  // loop sits in its 280 µs gap whatever backward does: the same what-if gives 293 (the launch at
  // 100+280, K3 7 after it, to 393).
  std::string no_flows = backward_step();
  for (const auto& [from, to] : {std::pair<std::string, std::string>{R"("cat":"fwdbwd")", R"("cat":"other")"},
                                 std::pair<std::string, std::string>{"MeanBackward0", "aten::mean_helper"}}) {
    for (size_t p = no_flows.find(from); p != std::string::npos; p = no_flows.find(from)) no_flows.replace(p, from.size(), to);
  }
  const analysis::Workload w0 = test::workload_of({no_flows});
  EXPECT_EQ(w0.graph.stats.thread_flow_edges, 0);
  EXPECT_DOUBLE_EQ(test::predicted_span_us(w0, {"cat:cpu_op=0"}), 293);

  // Said in the JSON and the text.
  auto j = analysis::to_json(w, a, false);
  EXPECT_EQ(j["import_stats"]["thread_flow_edges"], 1);
  EXPECT_EQ(j["import_stats"]["thread_waits"], 1);
  EXPECT_NE(j["import_stats"]["thread_wait_example"].get<std::string>().find("waits for thread 2"), std::string::npos);
  EXPECT_NE(analysis::to_text(w, a).find("forward -> backward"), std::string::npos);
}

// A loop thread that records work while backward runs did not wait for it: no wait is made, the flow
// edge alone stands.
TEST(ThreadFlows, ALoopThatWorksDuringBackwardIsNotMadeToWait) {
  const std::string json = TraceJson()
                               .cpu("aten::mean", 100, 20)
                               .cpu("prefetch", 200, 50)
                               .cpu("optimizer", 400, 20)
                               .cpu("MeanBackward0", 150, 240, 2)
                               .launch("K2", 7, 160, 170, 50, 2, 2)
                               .raw(flow("s", 1, 100, 1))
                               .raw(flow("f", 1, 150, 2))
                               .str();
  const analysis::Workload w = test::workload_of({json});
  EXPECT_EQ(w.graph.stats.thread_flow_edges, 1);
  EXPECT_EQ(w.graph.stats.thread_waits, 0);
  const analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, a.measured_span_ns);
}


// A trace without fwdbwd flows (an older PyTorch, or recorded without them): the loop thread (tid 1)
// sits in `## backward ##` [130,400] while the engine's thread (tid 2), known by its evaluate_function
// frame [150,390] (or, recorded by a PyTorch before 1.10, by the backward function's own name), runs
// backward and launches K2. The loop waits for it as with flows; renamed to no engine's frame, nothing
// changes. The independent executor finds the same by its own rule.
std::string flowless_step(const std::string& frame) {
  return TraceJson()
      .cpu("aten::mean", 100, 20)
      .cpu("## backward ##", 130, 270, 1, "user_annotation")
      .cpu("optimizer", 400, 20)
      .launch("K3", 7, 405, 412, 6, 3)
      .cpu(frame, 150, 240, 2)
      .launch("K2", 7, 160, 170, 50, 2, 2)
      .str();
}

TEST(ThreadFlows, WithoutFlowsTheEngineThreadIsKnownByItsFramesAndTheLoopWaitsForIt) {
  const analysis::Workload w = test::workload_of({flowless_step("autograd::engine::evaluate_function: MeanBackward0")});
  EXPECT_EQ(w.graph.stats.thread_waits, 1);
  EXPECT_EQ(w.graph.stats.thread_waits_without_flows, 1);
  const analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, a.measured_span_ns);
  // PyTorch 1.8-1.9 record the backward function alone, without the engine's frame (Kineto's ResNet50
  // samples): the same wait.
  for (const char* old_name : {"MeanBackward", "MeanBackward0"}) {
    const analysis::Workload older = test::workload_of({flowless_step(old_name)});
    EXPECT_EQ(older.graph.stats.thread_waits_without_flows, 1) << old_name;
    EXPECT_EQ(analysis::analyze(older).replayed_span_ns, a.measured_span_ns) << old_name;
  }
  const analysis::Workload plain = test::workload_of({flowless_step("aten::mean_backward_helper")});
  EXPECT_EQ(plain.graph.stats.thread_waits, 0);
  // The host's own time halved: with the wait the loop resumes when backward ends; without it the loop
  // keeps `## backward ##` as work of its own (halved) and the engine stays where it was recorded.
  const double with_wait = test::predicted_span_us(w, {"cat:host=0.5"});
  const double without = test::predicted_span_us(plain, {"cat:host=0.5"});
  EXPECT_NE(with_wait, without);
  // The executor, by its own rule, gives the same step within 3 % (it counts the 10 µs between the
  // engine's end and the loop's resume as host time, the replay as a fixed wake-up: 175.5 against 180.5).
  executor::Scenario host;
  host.cpu_factor = 0.5;
  auto ex = executor::execute(w.ranks, host);
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  EXPECT_EQ(ex->stats.thread_links_inferred, 1);
  EXPECT_NEAR(double(ex->span_ns) / 1000.0, with_wait, 0.03 * with_wait);
  auto ex_plain = executor::execute(plain.ranks, host);
  ASSERT_TRUE(ex_plain.ok());
  EXPECT_EQ(ex_plain->stats.thread_links_inferred, 0);
  EXPECT_NEAR(double(ex_plain->span_ns) / 1000.0, without, 0.03 * without);
}

// Kineto's ResNet50 sample in ../shared (PyTorch 1.9, no fwdbwd flows, no evaluate_function frames): the
// loop thread's step sits in backward() for 36 ms while the engine's thread runs it. Before the engine was
// known by its backward functions, the critical path began at NllLossBackward and took the 112 ms of
// data loading and forward before it for idle (59.9 % of the path).
TEST(ThreadFlows, AnOlderPyTorchsBackwardThreadIsFoundByItsFunctions) {
  EMO_REQUIRE_SHARED(path, "traces/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz");
  const analysis::Workload w = test::workload_of_files({path});
  ASSERT_FALSE(w.ranks.empty());
  EXPECT_EQ(w.graph.stats.thread_waits_without_flows, 1);
  const analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, a.measured_span_ns);
  int64_t idle = 0, cpu = 0;
  for (const auto& part : a.critical_path.breakdown) {
    if (part.category == "idle") idle = part.ns;
    if (part.category == "cpu") cpu = part.ns;
  }
  EXPECT_LT(double(idle), 0.02 * double(a.critical_path.length_ns));
  EXPECT_GT(double(cpu), 0.5 * double(a.critical_path.length_ns));
}

TEST(ThreadFlows, AutogradEngineFramesAreKnownByName) {
  for (const char* yes : {"autograd::engine::evaluate_function: AddmmBackward0", "autograd::engine::evaluate_function",
                          "NllLossBackward", "CudnnConvolutionBackward", "AddmmBackward0", "MulBackward12",
                          "torch::autograd::AccumulateGrad", "_Backward"}) {
    EXPECT_TRUE(trace::is_autograd_engine_frame(yes)) << yes;
  }
  for (const char* no : {"aten::mean", "Backward", "Backward0", "## backward ##", "aten::convolution_backward",
                         "Optimizer.step#SGD.step", "torch::autograd::AccumulateGradX", "0Backward", "My Backward",
                         "NllLossBackwardx", ""}) {
    EXPECT_FALSE(trace::is_autograd_engine_frame(no)) << no;
  }
}

}  // namespace
}  // namespace emo
