// The independent executor on tiny traces whose right answer is worked out by
// hand in each test's comment (times in µs), and on one real trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "emo/executor/executor.h"
#include "test_util.h"
#include "trace_json.h"

namespace emo {
namespace {

using test::ranks_of;
using test::TraceJson;

executor::Scenario scenario(const std::vector<std::string>& specs) {
  executor::Scenario s;
  for (const auto& spec : specs) {
    auto st = executor::parse_scale(spec, s);
    EXPECT_TRUE(st.ok()) << spec;
  }
  return s;
}

// Executed step span (µs) under the given scales.
double span_us(const std::vector<std::string>& jsons, const std::vector<std::string>& specs = {}) {
  auto ex = executor::execute(ranks_of(jsons), scenario(specs));
  EXPECT_TRUE(ex.ok()) << (ex.ok() ? "" : ex.error().message());
  return ex.ok() ? static_cast<double>(ex->span_ns) / 1000.0 : -1;
}

// One stream, the CPU runs ahead: launches (5 µs each) at 0, 10, 20; kernels queue
// back to back: K1 [10,110], gemm K2 [111,211], K3 [212,312]. Empty-queue launch
// latency 10, queue gap 1.
std::string queued_stream() {
  return TraceJson()
      .launch("K1", 7, 0, 10, 100, 1)
      .launch("sm90_xmma_GEMM_K2", 7, 10, 111, 100, 2)
      .launch("K3", 7, 20, 212, 100, 3)
      .str();
}

TEST(Executor, QueuedStreamReproducesAndFollowsItsKernels) {
  auto ex = executor::execute(ranks_of({queued_stream()}));
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->measured_span_ns, 312'000);
  EXPECT_EQ(ex->span_ns, 312'000);
  ASSERT_EQ(ex->ranks.size(), 1u);
  ASSERT_EQ(ex->ranks[0].gpu_ops.size(), 3u);
  EXPECT_EQ(ex->ranks[0].gpu_ops[1].start_ns, 111'000);
  EXPECT_EQ(ex->stats.launch_latency_ns[0], 10'000);
  EXPECT_EQ(ex->stats.queue_gap_ns[0], 1'000);
  // The whole stream x2: K1 [10,210], K2 = max(10+10, 210+1) -> [211,411], K3 [412,612].
  EXPECT_DOUBLE_EQ(span_us({queued_stream()}, {"stream:7=2"}), 612);
  // x0.01 (1 µs each): the launches bind: K1 [10,11], K2 [20,21], K3 [30,31].
  EXPECT_DOUBLE_EQ(span_us({queued_stream()}, {"stream:7=0.01"}), 31);
  // Another stream id matches nothing: unchanged.
  EXPECT_DOUBLE_EQ(span_us({queued_stream()}, {"stream:8=2"}), 312);
}

TEST(Executor, ScaledKernelClassMovesTheStepByItsQueue) {
  // gemm x2 (the class ignores case): K2 [111,311], K3 = max(20+10, 311+1) -> [312,412].
  EXPECT_DOUBLE_EQ(span_us({queued_stream()}, {"gemm=2"}), 412);
  // gemm x0.5: K2 [111,161], K3 = max(30, 162) -> [162,262].
  EXPECT_DOUBLE_EQ(span_us({queued_stream()}, {"gemm=0.5"}), 262);
  // No elementwise kernel here: nothing moves.
  EXPECT_DOUBLE_EQ(span_us({queued_stream()}, {"elementwise=3"}), 312);
}

// Launch-bound: prep [0,100], launch [100,105] -> gemm K1 [110,120]; prep2 [105,305];
// launch [305,310] -> K2 [315,325]. The GPU waits for the CPU.
// test::slow_first_launch(): a 600 µs launch call whose kernel K2 starts 5 µs after it returns.
TEST(Executor, ASlowLaunchIsHostTimeItsKernelWaitsFor) {
  EXPECT_DOUBLE_EQ(span_us({test::slow_first_launch()}), 927);
  // Host x0.5: calls [0,2.5] [10,310] [315,317.5] [320,322.5]; K2 at its call's end + 5: [315,415];
  // K3 [416,516], K4 [517,617]. Tied to its call's start by the measured 605, K2 would start at 615 and
  // the step end at 917.
  EXPECT_DOUBLE_EQ(span_us({test::slow_first_launch()}, {"cpu=0.5"}), 617);
  // Host x2: calls [0,10] [40,1240] [1260,1270] [1280,1290]; K2 [1245,1345], K3 [1346,1446], K4 [1447,1547].
  EXPECT_DOUBLE_EQ(span_us({test::slow_first_launch()}, {"cpu=2"}), 1547);
}

std::string launch_bound() {
  return TraceJson()
      .cpu("prep", 0, 100)
      .launch("gemm_K1", 7, 100, 110, 10, 1)
      .cpu("prep2", 105, 200)
      .launch("K2", 7, 305, 315, 10, 2)
      .str();
}

TEST(Executor, LaunchBoundStepHidesKernelSlowdowns) {
  EXPECT_DOUBLE_EQ(span_us({launch_bound()}), 325);
  // K1 x3 = 30 µs still ends long before K2's launch.
  EXPECT_DOUBLE_EQ(span_us({launch_bound()}, {"gemm=3"}), 325);
  // Every kernel x3: K1 [110,140]; K2 = max(305+10, 140) -> [315,345].
  EXPECT_DOUBLE_EQ(span_us({launch_bound()}, {"stream:7=3"}), 345);
}

// Stream 7 runs A [10,210]; stream 20's B waits for A through an event:
// cudaEventRecord [6,8] after A's launch, cudaStreamWaitEvent [9,11], then B
// launched at 12, starting 1 µs after A ends: B [211,261].
std::string cross_stream(bool with_sync_events) {
  TraceJson t;
  t.launch("gemm_A", 7, 0, 10, 200, 1)
      .runtime("cudaEventRecord", 6, 2, 2)
      .runtime("cudaStreamWaitEvent", 9, 2, 3)
      .launch("B", 20, 12, 211, 50, 4);
  if (with_sync_events) t.sync_event("Stream Wait Event", 20, 10, 3, 7, 2);
  return t.str();
}

TEST(Executor, CrossStreamEventWaitMovesWithTheRecordedStream) {
  for (bool sync_events : {true, false}) {
    SCOPED_TRACE(sync_events ? "from cuda_sync records" : "from paired runtime calls");
    auto ex = executor::execute(ranks_of({cross_stream(sync_events)}));
    ASSERT_TRUE(ex.ok());
    EXPECT_EQ(ex->span_ns, 261'000);
    EXPECT_EQ(sync_events ? ex->stats.cross_stream_from_records : ex->stats.cross_stream_from_calls, 1);
    // A x0.5: A [10,110], B [111,161].
    EXPECT_DOUBLE_EQ(span_us({cross_stream(sync_events)}, {"gemm=0.5"}), 161);
    // A x2: A [10,410], B [411,461].
    EXPECT_DOUBLE_EQ(span_us({cross_stream(sync_events)}, {"gemm=2"}), 461);
  }
  // Without the record and wait, B only follows its launch: halving A moves nothing.
  std::string free = TraceJson().launch("gemm_A", 7, 0, 10, 200, 1).launch("B", 20, 12, 211, 50, 4).str();
  EXPECT_DOUBLE_EQ(span_us({free}, {"gemm=0.5"}), 261);
}

// The CPU launches K [10,110], blocks in cudaStreamSynchronize [6,113] (woken 3 µs
// after K ends), then runs `post` [113,163].
std::string stream_sync(bool with_sync_event) {
  TraceJson t;
  t.launch("elementwise_K", 7, 0, 10, 100, 1).runtime("cudaStreamSynchronize", 6, 107, 2).cpu("post", 113, 50);
  if (with_sync_event) t.sync_event("Stream Sync", 7, 110, 2);
  return t.str();
}

TEST(Executor, StreamSyncMakesTheCpuWaitForTheGpu) {
  for (bool ev : {true, false}) {
    SCOPED_TRACE(ev ? "with a Stream Sync record" : "from the runtime call alone");
    auto ex = executor::execute(ranks_of({stream_sync(ev)}));
    ASSERT_TRUE(ex.ok());
    EXPECT_EQ(ex->span_ns, 163'000);
    EXPECT_EQ(ex->stats.blocking_calls, 1);
    // K x0.5: K [10,60]; the sync returns at 63; post [63,113].
    EXPECT_DOUBLE_EQ(span_us({stream_sync(ev)}, {"elementwise=0.5"}), 113);
    // K x2: K [10,210]; the sync returns at 213; post ends at 263.
    EXPECT_DOUBLE_EQ(span_us({stream_sync(ev)}, {"elementwise=2"}), 263);
  }
}

TEST(Executor, DeviceSyncWaitsForEveryStream) {
  // K1 [10,110] on stream 7, K2 [12,212] on stream 20; cudaDeviceSynchronize [10,214]
  // returns 2 µs after the last one; post [214,234].
  std::string t = TraceJson()
                      .launch("K1", 7, 0, 10, 100, 1)
                      .launch("gemm_K2", 20, 5, 12, 200, 2)
                      .runtime("cudaDeviceSynchronize", 10, 204, 3)
                      .cpu("post", 214, 20)
                      .str();
  EXPECT_DOUBLE_EQ(span_us({t}), 234);
  // K2 x0.25: K2 [12,62]; K1 ends last at 110; the sync returns 112; post ends at 132.
  EXPECT_DOUBLE_EQ(span_us({t}, {"gemm=0.25"}), 132);
}

// Two ranks, one allreduce (same process group and Seq). Rank 0 computes P [10,100]
// and arrives at the collective at 101; rank 1 computes Q [10,300] and arrives at
// 301. Both collective kernels end at 360: transfer = 360 - 301 = 59.
std::vector<std::string> two_rank_collective(double rank1_shift = 0) {
  const std::string nccl = R"("Collective name":"allreduce","Process Group Name":"0","Seq":0,"Group size":2)";
  return {TraceJson(0, 2)
              .launch("elementwise_P", 7, 0, 10, 90, 1)
              .launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 7, 5, 101, 259, 2, 1, nccl)
              .str(),
          TraceJson(1, 2)
              .launch("gemm_Q", 7, rank1_shift + 0, rank1_shift + 10, 290, 1)
              .launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 7, rank1_shift + 5, rank1_shift + 301, 59, 2, 1,
                      nccl)
              .str()};
}

TEST(Executor, CollectiveWaitsForTheSlowRank) {
  auto ex = executor::execute(ranks_of(two_rank_collective()));
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->stats.collectives_matched, 1);
  EXPECT_EQ(ex->span_ns, 360'000);
  EXPECT_EQ(ex->measured_span_ns, 360'000);
  // The fast rank's compute can double and still wait for rank 1.
  EXPECT_DOUBLE_EQ(span_us(two_rank_collective(), {"elementwise=2"}), 360);
  // Q x0.5: Q [10,155], rank 1 arrives at 156; transfer [156,215]: both ranks end at 215.
  auto fast = executor::execute(ranks_of(two_rank_collective()), scenario({"gemm=0.5"}));
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->span_ns, 215'000);
  ASSERT_EQ(fast->ranks.size(), 2u);
  ASSERT_EQ(fast->ranks[0].gpu_ops.size(), 2u);
  EXPECT_EQ(fast->ranks[0].gpu_ops[1].start_ns, 101'000);  // rank 0 arrived as before ...
  EXPECT_EQ(fast->ranks[0].gpu_ops[1].end_ns, 215'000);    // ... and ends with the transfer
  // Q x2: rank 1 arrives at 591; the slow rank delays the fast one to 650.
  auto slow = executor::execute(ranks_of(two_rank_collective()), scenario({"gemm=2"}));
  ASSERT_TRUE(slow.ok());
  EXPECT_EQ(slow->ranks[0].end_ns, 650'000);
  // The transfer x0.5 (59 -> 29.5) on both ranks at once.
  EXPECT_DOUBLE_EQ(span_us(two_rank_collective(), {"collective=0.5"}), 330.5);
  // Rank 1's clock 5 ms ahead: the same step once the collectives align the ranks.
  EXPECT_DOUBLE_EQ(span_us(two_rank_collective(5000)), 360);
  EXPECT_DOUBLE_EQ(span_us(two_rank_collective(5000), {"gemm=0.5"}), 215);
}

TEST(Executor, OneRankOfACollectiveScalesItsKernelWhole) {
  auto ex = executor::execute(ranks_of({two_rank_collective()[0]}), scenario({"collective=2"}));
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->stats.collectives_matched, 0);
  EXPECT_EQ(ex->stats.collective_kernels_unmatched, 1);
  // The kernel [101,360] x2 -> [101,619].
  EXPECT_EQ(ex->span_ns, 619'000);
}

// Two threads launch onto stream 7. Thread 1: gemm_K0 [10,110], cudaStreamSynchronize [20,113]
// (woken 3 µs after K0), gemm_K1 launched at 115 [125,185], cudaStreamSynchronize [121,188], then
// 212 µs of CPU work to 400. Thread 2 works [0,190] and launches K2 [200,210], after K1 on the
// stream. Scale 1 reproduces 400. gemm=3: K0 [10,310], the first sync returns at 313, K1 is launched
// at 315 and runs [325,505]; thread 2 launched K2 at 190 already, so K2 is the last op launched on
// the stream when the second sync runs (321). The trace shows that sync returning before K2 ended:
// it waited for K1, the last op before K2 that ended by then, and returns at 508; the CPU work ends
// at 720. (Waiting for nothing would have let the CPU run on at 388 and end at 600.)
TEST(Executor, ASyncWaitsForTheLastOpThatEndedBeforeItReturned) {
  std::string t = TraceJson()
                      .launch("gemm_K0", 7, 0, 10, 100, 1)
                      .runtime("cudaStreamSynchronize", 20, 93, 2)
                      .launch("gemm_K1", 7, 115, 125, 60, 3)
                      .runtime("cudaStreamSynchronize", 121, 67, 4)
                      .cpu("post", 188, 212)
                      .cpu("work2", 0, 190, 2)
                      .launch("K2", 7, 190, 200, 10, 5, 2)
                      .str();
  EXPECT_DOUBLE_EQ(span_us({t}), 400);
  auto ex = executor::execute(ranks_of({t}), scenario({"gemm=3"}));
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->span_ns, 720'000);
  EXPECT_EQ(ex->stats.waits_ignored, 0);
}

// Two threads launch onto stream 7, where the trace runs A, D, C. Thread 1 launches gemm A [10,110],
// waits for it (cudaStreamSynchronize [6,112]), records an event on stream 7 [113,115] that stream 20
// waits on [116,118], launches B on stream 20 [129,179], waits for stream 20 [125,181], then launches D
// [192,202]. Thread 2 launches C [203,303] at 190. With A x3 thread 1 reaches its record at 313, after
// thread 2 launched C (at 190, as measured): the trace shows C launched after the record, so the record
// captures A, not C. Were it to capture C, B would wait on C, C on D (the stream's order), D's launch on
// B (thread 1's sync): a circle, and the run would not finish.
std::string record_raced_by_another_thread(bool with_sync_events) {
  TraceJson t;
  t.launch("gemm_A", 7, 0, 10, 100, 1)
      .runtime("cudaStreamSynchronize", 6, 106, 2)
      .runtime("cudaEventRecord", 113, 2, 3)
      .runtime("cudaStreamWaitEvent", 116, 2, 4)
      .launch("B", 20, 119, 129, 50, 5)
      .runtime("cudaStreamSynchronize", 125, 56, 6)
      .launch("D", 7, 182, 192, 10, 7)
      .cpu("other", 180, 10, 2)
      .launch("C", 7, 190, 203, 100, 8, 2);
  if (with_sync_events) {
    t.sync_event("Stream Sync", 7, 111, 2).sync_event("Stream Wait Event", 20, 117, 4, 7, 3);
    t.sync_event("Stream Sync", 20, 180, 6);
  }
  return t.str();
}

TEST(Executor, AnEventRecordDoesNotCaptureAnotherThreadsLaterLaunch) {
  for (bool sync_events : {true, false}) {
    SCOPED_TRACE(sync_events ? "from cuda_sync records" : "from paired runtime calls");
    const std::string t = record_raced_by_another_thread(sync_events);
    EXPECT_DOUBLE_EQ(span_us({t}), 303);
    auto ex = executor::execute(ranks_of({t}), scenario({"gemm=3"}));
    ASSERT_TRUE(ex.ok()) << ex.error().message();
    std::map<std::string, std::pair<int64_t, int64_t>> at;  // kernel -> executed [start, end]
    const auto ranks = ranks_of({t});
    for (const auto& g : ex->ranks[0].gpu_ops) {
      at[std::string(ranks[0].name_of(ranks[0].events[g.event]))] = {g.start_ns, g.end_ns};
    }
    ASSERT_EQ(at.size(), 4u);
    EXPECT_GE(at["B"].first, at["gemm_A"].second);  // B still waits on A through the event
    EXPECT_LT(at["B"].second, at["C"].first);       // but not on C
    EXPECT_GE(at["D"].first, at["B"].second);       // D after thread 1's sync on B
    EXPECT_GE(at["C"].first, at["D"].second);       // C after D on stream 7
    EXPECT_EQ(ex->span_ns, at["C"].second - ex->ranks[0].begin_ns);  // C ends the step
  }
}

// A program compiled once runs as often as asked, each time with the durations its callback gives:
// the scenario's durations reproduce execute(), run after run; a callback that doubles the gemm
// kernels gives the gemm=2 scenario; a collective's callback gives its transfer, from the last arrival.
TEST(Executor, ProgramRunsWithDurationsFromItsCallback) {
  for (const auto& jsons : std::vector<std::vector<std::string>>{
           {queued_stream()}, {cross_stream(true)}, {stream_sync(false)}, two_rank_collective(5000)}) {
    const auto ranks = ranks_of(jsons);
    auto ex = executor::execute(ranks);
    ASSERT_TRUE(ex.ok());
    auto p = executor::Program::compile(ranks);
    ASSERT_TRUE(p.ok()) << p.error().message();
    const auto& ops = p->gpu_ops();
    for (int rep = 0; rep < 2; ++rep) {
      ASSERT_TRUE(p->run([&](uint32_t i, int64_t) { return ops[i].dur_ns; }).ok());
      EXPECT_EQ(p->end_ns(), ex->span_ns);
      for (uint32_t i = 0; i < ops.size(); ++i) {
        const auto& r = ex->ranks[ops[i].rank];
        auto it = std::find_if(r.gpu_ops.begin(), r.gpu_ops.end(),
                               [&](const executor::GpuOpTime& g) { return g.event == ops[i].event; });
        ASSERT_NE(it, r.gpu_ops.end());
        EXPECT_EQ(p->op_start(i), p->to_run(ops[i].rank, it->start_ns)) << i;
        EXPECT_EQ(p->op_end(i), p->to_run(ops[i].rank, it->end_ns)) << i;
      }
    }
    auto doubled = executor::execute(ranks, scenario({"gemm=2"}));
    ASSERT_TRUE(doubled.ok());
    ASSERT_TRUE(p->run([&](uint32_t i, int64_t) {
                   const auto& t = ranks[ops[i].rank];
                   const bool gemm = executor::in_class(executor::KernelClass::kGemm, t.name_of(t.events[ops[i].event]));
                   return gemm ? 2 * ops[i].dur_ns : ops[i].dur_ns;
                 }).ok());
    EXPECT_EQ(p->end_ns(), doubled->span_ns);
  }
  // The collective: one group of both ranks' kernels, its transfer (59 µs) called from the last
  // arrival (301); at 3x the step ends at 301 + 177.
  const auto ranks = ranks_of(two_rank_collective());
  auto p = executor::Program::compile(ranks);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->collectives().size(), 1u);
  ASSERT_EQ(p->collectives()[0].size(), 2u);
  std::vector<int64_t> called_at;
  ASSERT_TRUE(p->run([&](uint32_t i, int64_t t) {
                 if (p->gpu_ops()[i].collective < 0) return p->gpu_ops()[i].dur_ns;
                 EXPECT_EQ(p->gpu_ops()[i].dur_ns, 59'000);
                 called_at.push_back(t);
                 return 3 * p->gpu_ops()[i].dur_ns;
               }).ok());
  EXPECT_EQ(called_at, (std::vector<int64_t>{301'000, 301'000}));
  EXPECT_EQ(p->end_ns(), 478'000);
  // The CPU side: each call's measured and executed times on the run clock.
  ASSERT_FALSE(p->calls().empty());
  EXPECT_EQ(p->call_start(0), p->calls()[0].measured_start_ns);
}

TEST(Executor, KernelClassesFollowTheirKeywords) {
  using executor::KernelClass;
  EXPECT_TRUE(executor::in_class(KernelClass::kGemm, "sm90_xmma_gemm_bf16bf16"));
  EXPECT_TRUE(executor::in_class(KernelClass::kGemm, "Cutlass_Kernel"));
  EXPECT_TRUE(executor::in_class(KernelClass::kAttention, "pytorch_flash::flash_fwd_kernel"));
  EXPECT_TRUE(executor::in_class(KernelClass::kCopy, "Memcpy HtoD (Pageable -> Device)"));
  EXPECT_TRUE(executor::in_class(KernelClass::kReduce, "void at::native::reduce_kernel<512>"));
  EXPECT_FALSE(executor::in_class(KernelClass::kReduce, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"));
  EXPECT_FALSE(executor::in_class(KernelClass::kElementwise, "sm90_xmma_gemm_bf16bf16"));
}

TEST(Executor, BadInputIsAnError) {
  EXPECT_FALSE(executor::execute({}).ok());
  // Nothing to execute: a GPU annotation only.
  auto annotation = ranks_of({TraceJson()
                                  .raw(R"({"ph":"X","cat":"gpu_user_annotation","name":"a","pid":0,"tid":7,"ts":0,"dur":1,"args":{"device":0,"stream":7}})")
                                  .str()});
  ASSERT_EQ(annotation.size(), 1u);
  EXPECT_FALSE(executor::execute(annotation).ok());
  // Events whose lane index is out of range are skipped, not followed.
  auto broken = ranks_of({queued_stream()});
  for (auto& e : broken[0].events) e.lane = 1000;
  EXPECT_FALSE(executor::execute(broken).ok());
  executor::Scenario s;
  EXPECT_FALSE(executor::parse_scale("gemm", s).ok());
  EXPECT_FALSE(executor::parse_scale("gemm=-1", s).ok());
  EXPECT_FALSE(executor::parse_scale("gemm=abc", s).ok());
  EXPECT_FALSE(executor::parse_scale("tensor=2", s).ok());
  EXPECT_FALSE(executor::parse_scale("stream:x=2", s).ok());
  EXPECT_FALSE(executor::parse_scale("gemm=1e308", s).ok());
  ASSERT_TRUE(executor::parse_scale("stream:7=2", s).ok());
  EXPECT_FALSE(executor::parse_scale("stream:8=2", s).ok());  // one stream only
  EXPECT_FALSE(executor::load_step({"/nonexistent/trace.json"}).ok());
  // A stream wait whose source op is on the waiting stream itself is ignored, not a hang.
  std::string self = TraceJson()
                         .launch("A", 7, 0, 10, 50, 1)
                         .runtime("cudaEventRecord", 6, 1, 2)
                         .runtime("cudaStreamWaitEvent", 8, 1, 3)
                         .launch("B", 7, 9, 61, 10, 4)
                         .str();
  EXPECT_DOUBLE_EQ(span_us({self}), 71);
}

std::string flow_event(const char* ph, int id, double ts, int tid) {
  return fmt::format(R"({{"ph":"{}","id":{},"pid":100,"tid":{},"ts":{},"cat":"fwdbwd","name":"fwdbwd"{}}})", ph, id,
                     tid, ts, ph[0] == 'f' ? R"(,"bp":"e")" : "");
}

// Backward on the autograd engine's thread. The loop thread (tid 1) runs aten::mean [100,120] (the
// forward op of flow 1), then sits in backward() until `optimizer` [400,420], whose launch [405,410]
// -> K3 [412,418]. The engine's thread (tid 2) runs MeanBackward0 [150,390] (flow 1's backward op),
// whose launch [160,165] -> K2 [170,220]. Launch latency: median of 10 and 7 = 10; no queue gap.
std::string backward_step(bool flows) {
  TraceJson t;
  t.cpu("aten::mean", 100, 20)
      .cpu("optimizer", 400, 20)
      .launch("K3", 7, 405, 412, 6, 3)
      .cpu(flows ? "MeanBackward0" : "aten::mean_helper", 150, 240, 2)
      .launch("K2", 7, 160, 170, 50, 2, 2);
  if (flows) t.raw(flow_event("s", 1, 100, 1)).raw(flow_event("f", 1, 150, 2));
  return t.str();
}

TEST(Executor, BackwardOnTheEngineThreadFollowsTheForwardThreadAndTheLoopWaitsForIt) {
  auto ex = executor::execute(ranks_of({backward_step(true)}));
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  EXPECT_EQ(ex->stats.thread_flows, 1);
  EXPECT_EQ(ex->stats.thread_waits, 1);
  EXPECT_EQ(ex->span_ns, 320'000);  // as measured
  // The host's own time x0.5. The engine is woken by aten::mean's end, now at 110 (100 + 20/2), after
  // its measured wake-up (150 - 120 = 30) at 140; its launch 5/2 later at 145 -> K2 [155,205]; the
  // call ends at 147.5 and the thread at 147.5 + 225/2 = 260. The loop thread's own time would reach
  // its launch at 100 + 305/2 = 252.5, but it waits for the engine's launch to end (147.5) plus the
  // measured 240 between them, halved: 267.5 -> K3 [274.5,280.5] (its launch latency, 7, binds). The
  // step: [100,280.5].
  EXPECT_DOUBLE_EQ(span_us({backward_step(true)}, {"cpu=0.5"}), 180.5);
  // All of it is the host's: x2 doubles it.
  EXPECT_DOUBLE_EQ(span_us({backward_step(true)}, {"cpu=2"}), 640);
  // Without the flows, on a thread that runs no backward function (a name no engine frame has), the
  // engine starts where it was recorded (150 + 5/2 -> K2 [165,215], the thread
  // to 270) and the loop thread launches at 252.5 whatever backward does (K3 [259.5,265.5]): [100,270].
  auto plain = executor::execute(ranks_of({backward_step(false)}), scenario({"cpu=0.5"}));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->stats.thread_flows, 0);
  EXPECT_EQ(plain->span_ns, 170'000);
}

// A thread of Python frames alone (a progress bar's monitor) that outlasts the step: executed, but it
// holds the step open neither as measured nor as executed. With an operator on it, it does.
TEST(Executor, AThreadOfPythonFramesAloneIsNotInTheStepsSpan) {
  auto queued = [] {
    TraceJson t;
    t.launch("K1", 7, 0, 10, 100, 1).launch("sm90_xmma_GEMM_K2", 7, 10, 111, 100, 2).launch("K3", 7, 20, 212, 100, 3);
    return t;
  };
  const std::string monitor = queued().cpu("threading.py(324): wait", 0, 900, 3, "python_function").str();
  auto ex = executor::execute(ranks_of({monitor}), scenario({"cpu=0.5"}));
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  EXPECT_EQ(ex->stats.threads_outside_span, 1);
  EXPECT_EQ(ex->measured_span_ns, 312'000);
  // The launches at 0, 5, 10 (5/2 each, the gaps halved); the kernels stay queued back to back.
  EXPECT_EQ(ex->span_ns, 312'000);
  const std::string worker = queued().cpu("aten::copy_", 0, 900, 3).str();
  auto w = executor::execute(ranks_of({worker}), scenario({"cpu=0.5"}));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->stats.threads_outside_span, 0);
  EXPECT_EQ(w->measured_span_ns, 900'000);
  EXPECT_EQ(w->span_ns, 450'000);
  executor::Scenario s;
  ASSERT_TRUE(executor::parse_scale("cpu=0.25", s).ok());
  EXPECT_DOUBLE_EQ(s.cpu_factor, 0.25);
  EXPECT_FALSE(executor::parse_scale("cpu=x", s).ok());
}

TEST(Executor, ReproducesARealTraceWithinOnePercent) {
  EMO_REQUIRE_SHARED(path, "traces/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz");
  auto ranks = executor::load_step({path});
  ASSERT_TRUE(ranks.ok()) << ranks.error().message();
  auto ex = executor::execute(*ranks);
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  EXPECT_GT(ex->stats.gpu_ops, 1000);
  EXPECT_GT(ex->measured_span_ns, 0);
  EXPECT_LE(std::abs(ex->error_pct()), 1.0) << "measured " << ex->measured_span_ns << " executed " << ex->span_ns;
  // Every GPU op ran, and none before the step began.
  for (const auto& op : ex->ranks[0].gpu_ops) {
    ASSERT_GE(op.end_ns, op.start_ns);
    ASSERT_GE(op.start_ns, ex->ranks[0].begin_ns);
  }
}

TEST(Executor, ReproducesTheEightRankDlrmStep) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  auto ranks = executor::load_step(test::files_in(dir));
  ASSERT_TRUE(ranks.ok()) << ranks.error().message();
  auto ex = executor::execute(*ranks);
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  EXPECT_EQ(ex->ranks.size(), 8u);
  EXPECT_GT(ex->stats.collectives_matched, 0);
  EXPECT_LE(std::abs(ex->error_pct()), 1.0);
}

}  // namespace
}  // namespace emo
