// Replay and what-if on tiny traces whose right answer is worked out by hand
// in each test's comment. Times in the comments are µs.
#include <gtest/gtest.h>

#include <algorithm>

#include "emo/analysis/analysis.h"
#include "emo/replay/replay.h"
#include "synth_workload.h"
#include "test_util.h"
#include "trace_json.h"

namespace emo {
namespace {

using test::TraceJson;

analysis::Workload load(const std::vector<std::string>& jsons) { return test::workload_of(jsons); }

double predict(const analysis::Workload& w, const std::vector<std::string>& scales) {
  return test::predicted_span_us(w, scales);
}

int64_t slack_us_of(const analysis::Workload& w, const analysis::Analysis& a, const std::string& name) {
  for (graph::NodeId n = 0; n < w.graph.num_nodes(); ++n) {
    if (graph::is_gpu(w.graph.kind[n]) && w.graph.strings.view(w.graph.name[n]) == name) {
      return a.slack_ns[n] / 1000;
    }
  }
  ADD_FAILURE() << "no GPU op named " << name;
  return -1;
}

// One stream, the CPU runs ahead: launches at 0, 10, 20; kernels queue back to back
// K1 [10,110] K2 [111,211] K3 [212,312]. Launch latency on an empty queue is 10.
std::string queued_stream() {
  return TraceJson()
      .launch("K1", 7, 0, 10, 100, 1)
      .launch("K2", 7, 10, 111, 100, 2)
      .launch("K3", 7, 20, 212, 100, 3)
      .str();
}

TEST(Replay, UnmodifiedGraphReproducesTheTrace) {
  auto w = load({queued_stream()});
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.measured_span_ns, 312'000);
  EXPECT_EQ(a.replayed_span_ns, 312'000);
  EXPECT_DOUBLE_EQ(a.replay_error_pct, 0.0);
}

// test::slow_first_launch(): a 600 µs launch call whose kernel K2 starts 5 µs after it returns.
TEST(Replay, ASlowLaunchIsHostTimeItsKernelWaitsFor) {
  auto w = load({test::slow_first_launch()});
  EXPECT_EQ(analysis::analyze(w).replayed_span_ns, 927'000);
  // Host x0.5: calls [0,2.5] [10,310] [315,317.5] [320,322.5]; K2 follows its call's end: 310 + 5 ->
  // [315,415]; K3 [416,516] and K4 [517,617] behind it. With K2 tied to its call's start by the measured
  // 605, it would start at 615 and the step end at 917: the 600 of host time would not move.
  EXPECT_DOUBLE_EQ(predict(w, {"cat:host=0.5"}), 617);
  // Host x2: calls [0,10] [40,1240] [1260,1270] [1280,1290]; K2 [1245,1345], K3 [1346,1446], K4 [1447,1547].
  EXPECT_DOUBLE_EQ(predict(w, {"cat:host=2"}), 1547);
  // The GPU's own what-ifs see the same step: K2 x0.5 -> [625,675], K3 [676,776], K4 [777,877].
  EXPECT_DOUBLE_EQ(predict(w, {"^K2$=0.5"}), 877);
}

TEST(Replay, SlowerKernelPushesTheQueueBehindIt) {
  auto w = load({queued_stream()});
  // K2 x2: K2 [111,311], K3 [312,412].
  EXPECT_DOUBLE_EQ(predict(w, {"^K2$=2"}), 412);
}

TEST(Replay, FasterKernelPullsTheQueueButNotPastTheLaunches) {
  auto w = load({queued_stream()});
  // K1 x0.5: K1 [10,60]; K2 = max(60+1, launch 10 + 10) = 61 -> [61,161]; K3 [162,262].
  EXPECT_DOUBLE_EQ(predict(w, {"^K1$=0.5"}), 262);
  // All x0.01 (1 µs each): the launches bind: K1 [10,11], K2 [20,21], K3 [30,31].
  EXPECT_DOUBLE_EQ(predict(w, {"^K=0.01"}), 31);
}

TEST(Replay, QueuedKernelsAreCriticalAndTheLastLaunchIsNot) {
  auto w = load({queued_stream()});
  auto a = analysis::analyze(w);
  EXPECT_EQ(slack_us_of(w, a, "K1"), 0);
  EXPECT_EQ(slack_us_of(w, a, "K3"), 0);
  int64_t gpu = 0;
  for (const auto& p : a.critical_path.breakdown) {
    if (p.category == "gpu_compute") gpu = p.ns;
  }
  EXPECT_EQ(gpu, 300'000);  // the three kernels; the rest is the first launch and its latency
  EXPECT_EQ(a.critical_path.length_ns, 312'000);
}

// Stream 7 runs A [10,210]; stream 20's B waits for A through an event:
// cudaEventRecord (corr 2) after A's launch, cudaStreamWaitEvent (corr 3), then B
// launched at 12, starting 1 µs after A ends: B [211,261].
std::string cross_stream(bool with_sync_events) {
  TraceJson t;
  t.launch("A", 7, 0, 10, 200, 1)
      .runtime("cudaEventRecord", 6, 2, 2)
      .runtime("cudaStreamWaitEvent", 9, 2, 3)
      .launch("B", 20, 12, 211, 50, 4);
  if (with_sync_events) t.sync_event("Stream Wait Event", 20, 10, 3, 7, 2);
  return t.str();
}

TEST(Replay, CrossStreamWaitMovesWithTheRecordedStream) {
  for (bool sync_events : {true, false}) {
    SCOPED_TRACE(sync_events ? "from cuda_sync events" : "from paired runtime calls");
    auto w = load({cross_stream(sync_events)});
    auto a = analysis::analyze(w);
    EXPECT_EQ(a.replayed_span_ns, 261'000);
    // A x0.5: A [10,110], B [111,161].
    EXPECT_DOUBLE_EQ(predict(w, {"^A$=0.5"}), 161);
    // A x2: A [10,410], B [411,461].
    EXPECT_DOUBLE_EQ(predict(w, {"^A$=2"}), 461);
    // B is at the end of the step; A is critical through the wait.
    EXPECT_EQ(slack_us_of(w, a, "A"), 0);
  }
}

TEST(Replay, WithoutTheEventWaitStreamsAreIndependent) {
  // Same timeline, no record/wait: B only follows its launch, so A can grow until
  // it ends the step, and halving A does not move B.
  auto w = load({TraceJson().launch("A", 7, 0, 10, 200, 1).launch("B", 20, 12, 211, 50, 4).str()});
  EXPECT_DOUBLE_EQ(predict(w, {"^A$=0.5"}), 261);
}

// The CPU launches K [10,110], then blocks in cudaStreamSynchronize [6,113]
// (woken 3 µs after K ends), then runs `post` [113,163].
std::string stream_sync(bool with_sync_event) {
  TraceJson t;
  t.launch("K", 7, 0, 10, 100, 1).runtime("cudaStreamSynchronize", 6, 107, 2).cpu("post", 113, 50);
  if (with_sync_event) t.sync_event("Stream Sync", 7, 110, 2);
  return t.str();
}

TEST(Replay, StreamSyncMakesTheCpuWaitForTheGpu) {
  for (bool ev : {true, false}) {
    SCOPED_TRACE(ev ? "with Stream Sync event" : "from the runtime call alone");
    auto w = load({stream_sync(ev)});
    EXPECT_EQ(analysis::analyze(w).replayed_span_ns, 163'000);
    // K x0.5: K [10,60]; the sync returns at 63; post [63,113].
    EXPECT_DOUBLE_EQ(predict(w, {"^K$=0.5"}), 113);
    // K x2: K [10,210]; sync returns 213; post ends 263.
    EXPECT_DOUBLE_EQ(predict(w, {"^K$=2"}), 263);
    // CPU work after the sync adds directly.
    EXPECT_DOUBLE_EQ(predict(w, {"cat:cpu_op=2"}), 213);
  }
}

// CPU-bound: prep [0,100], launch K1 [100,105] -> K1 [110,120]; prep2 [105,305];
// launch K2 [305,310] -> K2 [315,325]. The GPU idles; K1 has 195 µs of slack.
std::string cpu_bound() {
  return TraceJson()
      .cpu("prep", 0, 100)
      .launch("K1", 7, 100, 110, 10, 1)
      .cpu("prep2", 105, 200)
      .launch("K2", 7, 305, 315, 10, 2)
      .str();
}

TEST(Replay, CpuBoundStepHidesKernelSlowdowns) {
  auto w = load({cpu_bound()});
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, 325'000);
  EXPECT_EQ(slack_us_of(w, a, "K1"), 195);
  EXPECT_EQ(slack_us_of(w, a, "K2"), 0);
  EXPECT_DOUBLE_EQ(predict(w, {"^K1$=1.5"}), 325);
  // Halving the CPU work: prep [0,50], launch [50,55], prep2 [55,155], launch [155,160], K2 [165,175].
  EXPECT_DOUBLE_EQ(predict(w, {"cat:cpu_op=0.5"}), 175);
}

TEST(Replay, UnexplainedCpuTimeIsKeptAsAGap) {
  // Nothing is recorded on the thread between 105 and 305: that time is still CPU work.
  auto w = load({TraceJson().cpu("prep", 0, 100).launch("K1", 7, 100, 110, 10, 1).launch("K2", 7, 305, 315, 10, 2).str()});
  EXPECT_EQ(analysis::analyze(w).replayed_span_ns, 325'000);
  // Without the gap K2 is launched at 105 but still queues behind K1: [120,130].
  EXPECT_DOUBLE_EQ(predict(w, {"cat:cpu_gap=0"}), 130);
}

// Two ranks, one allreduce (same process group and Seq). Rank 0 computes P [10,100]
// then arrives at the collective at 101; rank 1 computes Q [10,300], arrives at 301.
// Both collective kernels end at 360: transfer = 360 - 301 = 59 µs.
std::vector<std::string> two_rank_collective() {
  const std::string nccl = R"("Collective name":"allreduce","Process Group Name":"0","Seq":0,"Group size":2)";
  return {TraceJson(0, 2)
              .launch("P", 7, 0, 10, 90, 1)
              .launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 7, 5, 101, 259, 2, 1, nccl)
              .str(),
          TraceJson(1, 2)
              .launch("Q", 7, 0, 10, 290, 1)
              .launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 7, 5, 301, 59, 2, 1, nccl)
              .str()};
}

TEST(Replay, CollectiveWaitsForTheSlowestRank) {
  auto w = load(two_rank_collective());
  ASSERT_EQ(w.graph.stats.collectives_matched, 1);
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, 360'000);
  // The fast rank's compute can grow until it is the last to arrive: 300 - 100 = 200.
  EXPECT_EQ(slack_us_of(w, a, "P"), 200);
  EXPECT_EQ(slack_us_of(w, a, "Q"), 0);
  EXPECT_DOUBLE_EQ(predict(w, {"^P$=2"}), 360);  // still waits for rank 1
  // Q x0.5: Q [10,155], rank 1 arrives at 156; transfer [156,215]; both end at 215.
  EXPECT_DOUBLE_EQ(predict(w, {"^Q$=0.5"}), 215);
  // A faster network: the transfer halves, 59 -> 29.5, on both ranks at once.
  EXPECT_DOUBLE_EQ(predict(w, {"^nccl=0.5"}), 330.5);
  bool comm = false;
  for (const auto& p : a.critical_path.breakdown) comm |= p.category == "communication" && p.ns == 59'000;
  EXPECT_TRUE(comm) << "the transfer, not the wait, is communication on the critical path";
}

TEST(Replay, CollectivesStayWholeWhenOnlyOneRankIsGiven) {
  auto w = load({two_rank_collective()[0]});
  EXPECT_EQ(w.graph.stats.collectives_matched, 0);
  EXPECT_EQ(w.graph.stats.collectives_unmatched, 1);
  EXPECT_EQ(analysis::analyze(w).replayed_span_ns, 360'000);
}

TEST(Replay, RankClocksAreAlignedByTheirCollectives) {
  auto jsons = two_rank_collective();
  // Rank 1's clock runs 5 ms ahead: every timestamp is shifted.
  std::string shifted = TraceJson(1, 2)
                            .launch("Q", 7, 5000, 5010, 290, 1)
                            .launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 7, 5005, 5301, 59, 2, 1,
                                    R"("Collective name":"allreduce","Process Group Name":"0","Seq":0)")
                            .str();
  // Same base for both files: the shift is in the timestamps themselves.
  auto w = load({jsons[0], shifted});
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, 360'000);
  EXPECT_EQ(a.measured_span_ns, 360'000);
}

TEST(Graph, OneGraphLaunchCoversAllItsKernels) {
  // cudaGraphLaunch [0,10] (corr 1) runs G1 [15,65], G2 [66,116], G3 [117,167], all with corr 1.
  auto w = load({TraceJson()
                     .runtime("cudaGraphLaunch", 0, 10, 1)
                     .kernel("G1", 7, 15, 50, 1)
                     .kernel("G2", 7, 66, 50, 1)
                     .kernel("G3", 7, 117, 50, 1)
                     .str()});
  int launches = 0;
  for (const auto& e : w.graph.edges) launches += e.kind == graph::EdgeKind::kLaunch;
  EXPECT_EQ(launches, 3);
  EXPECT_EQ(w.graph.stats.gpu_ops_without_launch, 0);
  EXPECT_EQ(analysis::analyze(w).replayed_span_ns, 167'000);
  // G1 x2: G1 [15,115], G2 [116,166], G3 [167,217].
  EXPECT_DOUBLE_EQ(predict(w, {"^G1$=2"}), 217);
}

TEST(Graph, KernelsWithoutLaunchAreCountedAndStillReplayed) {
  auto w = load({TraceJson().launch("K1", 7, 0, 10, 100, 1).kernel("orphan", 7, 111, 50, 99).str()});
  EXPECT_EQ(w.graph.stats.gpu_ops_without_launch, 1);
  EXPECT_EQ(analysis::analyze(w).replayed_span_ns, 161'000);
}

TEST(Graph, ContradictoryDependenciesFormingACycleAreAnError) {
  // The sync [9,12] waits for K [10,11], but K's launch call sits after the sync
  // on the same thread: launch -> K -> sync -> launch.
  std::string json = TraceJson()
                         .runtime("cudaStreamSynchronize", 9, 3, 5)
                         .raw(R"({"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"tid":7,"ts":11,"dur":1,"args":{"cuda_sync_kind":"Stream Sync","stream":7,"correlation":5,"device":0}})")
                         .runtime("cudaLaunchKernel", 12, 0.5, 3)
                         .kernel("K", 7, 10, 1, 3)
                         .str();
  auto t = trace::parse_trace(json, "cycle.json");
  ASSERT_TRUE(t.ok());
  std::vector<trace::RankTrace> ranks;
  ranks.push_back(std::move(t).value());
  auto w = analysis::assemble(std::move(ranks), {});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().what.find("dependency cycle"), std::string::npos) << w.error().what;
}

TEST(WhatIf, SelectorsThatMatchNothingOrAreMalformedAreErrors) {
  auto w = load({queued_stream()});
  EXPECT_FALSE(analysis::what_if(w, {*analysis::parse_scale("nomatch=2")}).ok());
  EXPECT_FALSE(analysis::what_if(w, {*analysis::parse_scale("stream:x=2")}).ok());
  EXPECT_FALSE(analysis::what_if(w, {*analysis::parse_scale("([=2")}).ok());
  EXPECT_FALSE(analysis::parse_scale("K1").ok());
  EXPECT_FALSE(analysis::parse_scale("K1=-1").ok());
  EXPECT_FALSE(analysis::parse_scale("K1=abc").ok());
  // Scaled durations must fit in 64-bit nanoseconds (1e308 used to wrap round to a shorter step).
  EXPECT_FALSE(analysis::parse_scale("K1=1e308").ok());
  EXPECT_FALSE(analysis::parse_scale("K1=1000001").ok());
  ASSERT_TRUE(analysis::parse_scale("K1=1e6").ok());
  EXPECT_DOUBLE_EQ(predict(w, {"stream:7=1e6"}), 10 + 300 * 1e6 + 2);
  EXPECT_DOUBLE_EQ(predict(w, {"stream:7=2"}), 10 + 600 + 2);
}

}  // namespace
}  // namespace emo

namespace emo {
namespace {

// Every point's in-edges in the reverse order.
void reverse_in_edges(graph::Graph& g) {
  for (size_t p = 0; p + 1 < g.in_offsets.size(); ++p) {
    std::reverse(g.in_edges.begin() + g.in_offsets[p], g.in_edges.begin() + g.in_offsets[p + 1]);
  }
}

// Points of the path bound by two dependencies or more at once (ties), where the walk had to choose.
size_t tied_points(const graph::Graph& g, const replay::Timeline& tl, const replay::CriticalPath& cp) {
  size_t tied = 0;
  for (const auto& s : cp.segments) {
    if (!s.is_edge) continue;
    const graph::PointId p = s.start_ns + s.ns == tl.end(s.node) ? graph::end_point(s.node) : graph::start_point(s.node);
    size_t binding = 0;
    for (uint32_t k = g.in_offsets[p]; k < g.in_offsets[p + 1]; ++k) {
      const graph::Edge& e = g.edges[g.in_edges[k]];
      binding += tl.t_ns[e.src] + e.lat_ns == tl.t_ns[p];
    }
    tied += binding > 1;
  }
  return tied;
}

// The critical path does not depend on the order the builder made the edges in (a graph built by several
// processes, each of its own ranks, makes them in another): of several dependencies that bind a point at
// once, the walk takes one by kind and source point.
TEST(CriticalPath, TheWalkDoesNotDependOnTheOrderOfTheEdges) {
  size_t tied = 0;
  for (synth::Workload wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    const graph::Graph g = std::move(test::synth_workload(wl, 4, 2, 1).graph);
    graph::Graph reversed = std::move(test::synth_workload(wl, 4, 2, 1).graph);
    reverse_in_edges(reversed);
    replay::Replayer r(g), rr(reversed);
    replay::Timeline tl, tl_reversed;
    r.run(tl);
    rr.run(tl_reversed);
    ASSERT_EQ(tl.t_ns, tl_reversed.t_ns);
    const replay::CriticalPath cp = r.critical_path({}, tl);
    EXPECT_GT(cp.nodes.size(), 10u);
    EXPECT_TRUE(cp == rr.critical_path({}, tl_reversed)) << "family " << int(wl);
    tied += tied_points(g, tl, cp);
  }
  EXPECT_GT(tied, 0u) << "no point of these paths had a choice: the test would not see the order matter";
}

}  // namespace
}  // namespace emo
