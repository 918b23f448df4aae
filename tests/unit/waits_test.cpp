// Host waits (docs/replay.md, "Threads that only wait" and "Host polling is a
// GPU→CPU wait"): tiny traces whose right answer is worked out by hand in each
// test's comment, and the real traces where the patterns occur. Times are µs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "emo/analysis/analysis.h"
#include "emo/graph/waits.h"
#include "test_util.h"
#include "trace_json.h"

namespace emo {
namespace {

using test::TraceJson;

analysis::Workload load(const std::vector<std::string>& jsons) { return test::workload_of(jsons); }

double predict(const analysis::Workload& w, const std::vector<std::string>& scales) {
  return test::predicted_span_us(w, scales);
}

int64_t part_ns(const analysis::Analysis& a, const std::string& category) {
  for (const auto& p : a.critical_path.breakdown) {
    if (p.category == category) return p.ns;
  }
  ADD_FAILURE() << "no category " << category;
  return -1;
}

// Main thread (tid 1), from 100: launch K1 [100,105] -> K1 [110,310];
// cudaDeviceSynchronize [106,314] (wakes 4 after K1); post [314,334].
// Thread 2 only waits: `waiter` [0,600000] (600 ms), ending long after the work.
std::string idle_thread_step(const std::string& waiter, const std::string& cat = "python_function") {
  return TraceJson()
      .launch("K1", 7, 100, 110, 200, 1)
      .runtime("cudaDeviceSynchronize", 106, 208, 2)
      .cpu("post", 314, 20)
      .cpu(waiter, 0, 600000, 2, cat)
      .cpu("<built-in method acquire of _thread.lock object at 0x7f00>", 1, 599998, 2, "python_function")
      .str();
}

TEST(Waits, ThreadThatOnlyWaitsDoesNotEndTheStep) {
  auto w = load({idle_thread_step("threading.py(359): wait")});
  auto a = analysis::analyze(w);
  // The step is the main thread's work and the GPU's: [100,334].
  EXPECT_EQ(a.measured_span_ns, 234'000);
  EXPECT_EQ(a.replayed_span_ns, 234'000);
  EXPECT_EQ(w.graph.stats.waiting_threads, 1);
  EXPECT_EQ(w.graph.stats.waiting_thread_span_ns, 600'000'000 - 234'000);
  // The path runs through K1 and the sync, not through the waiting thread.
  EXPECT_EQ(part_ns(a, "gpu_compute"), 200'000);
  EXPECT_EQ(a.critical_path.length_ns, 234'000);
  for (graph::NodeId n : a.critical_path.nodes) {
    EXPECT_NE(w.graph.lanes[w.graph.lane[n]].tid, 2) << "a waiting thread's node is on the path";
  }
  // K1 x1.3: K1 [110,370], the sync returns at 374, post ends at 394.
  EXPECT_DOUBLE_EQ(predict(w, {"^K1$=1.3"}), 294);
  // K1 x0.5: K1 [110,210], the sync returns at 214, post ends at 234.
  EXPECT_DOUBLE_EQ(predict(w, {"^K1$=0.5"}), 134);
  // K1 is critical: it has no slack.
  for (graph::NodeId n = 0; n < w.graph.num_nodes(); ++n) {
    if (graph::is_gpu(w.graph.kind[n])) {
      EXPECT_EQ(a.slack_ns[n], 0);
    }
  }
  // Said in the JSON and the text.
  auto j = analysis::to_json(w, a, false);
  EXPECT_EQ(j["import_stats"]["waiting_threads"], 1);
  EXPECT_DOUBLE_EQ(j["import_stats"]["waiting_thread_span_us"].get<double>(), 599'766.0);
  EXPECT_NE(j["import_stats"]["waiting_thread_example"].get<std::string>().find("threading.py(359): wait"),
            std::string::npos);
  EXPECT_NE(analysis::to_text(w, a).find("only wait"), std::string::npos);
}

TEST(Waits, ANonLaunchingThreadIsLeftOutWhateverItsFramesAreCalled) {
  // The rule is by thread: one that launches no GPU work has no dependency into
  // the GPU work the trace can show, so CPU work there cannot hold the step back either.
  auto w = load({idle_thread_step("tokenizer_pool", "cpu_op")});
  auto a = analysis::analyze(w);
  EXPECT_EQ(w.graph.stats.waiting_threads, 1);
  EXPECT_EQ(a.measured_span_ns, 234'000);
  EXPECT_DOUBLE_EQ(predict(w, {"^K1$=1.3"}), 294);
}

TEST(Waits, WithoutGpuLaunchesEveryThreadCounts) {
  // A CPU-only trace: no thread launches GPU work, so no thread is left out.
  auto w = load({TraceJson().cpu("main_work", 0, 100).cpu("threading.py(359): wait", 0, 600, 2, "python_function").str()});
  auto a = analysis::analyze(w);
  EXPECT_EQ(w.graph.stats.waiting_threads, 0);
  EXPECT_EQ(a.measured_span_ns, 600'000);
  EXPECT_EQ(a.replayed_span_ns, 600'000);
}

TEST(Waits, TheProfilerStepThreadIsKeptEvenWhereItLaunchesNothing) {
  // The training loop's thread (ProfilerStep#3 [0,1000], its `## backward ##` [100,900])
  // launches nothing; the autograd thread (tid 5) launches K [210,260] from [200,205].
  // The loop is kept: the step is the ProfilerStep's span. A CPU thread that
  // only waits (tid 9) is left out.
  auto w = load({TraceJson()
                     .step(3, 0, 1000)
                     .cpu("## backward ##", 100, 800, 1, "user_annotation")
                     .cpu("autograd::engine::evaluate_function: MmBackward0", 150, 100, 5)
                     .launch("K", 7, 200, 210, 50, 1, 5)
                     .cpu("selectors.py(415): select", 10, 980, 9, "python_function")
                     .str()});
  auto a = analysis::analyze(w);
  EXPECT_EQ(w.graph.stats.waiting_threads, 1);
  EXPECT_EQ(a.measured_span_ns, 1'000'000);
  EXPECT_EQ(a.replayed_span_ns, 1'000'000);
}

TEST(Waits, WaitFrameOnTheMainThreadIsAWaitNotCpuWork) {
  // launch K [0,5] -> K [10,110]; the main thread then blocks in `queue.py(171): get`
  // [5,505] (a lock acquire [10,500] inside it); post [505,525]. The path is the
  // main thread: 25 µs of CPU work, 500 µs of waiting.
  auto w = load({TraceJson()
                     .launch("K", 7, 0, 10, 100, 1)
                     .cpu("queue.py(171): get", 5, 500, 1, "python_function")
                     .cpu("<built-in method acquire of _thread.lock object at 0x7f00>", 10, 490, 1, "python_function")
                     .cpu("post", 505, 20)
                     .str()});
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, 525'000);
  EXPECT_EQ(part_ns(a, "cpu"), 25'000);
  EXPECT_EQ(part_ns(a, "sync_wait"), 500'000);
  EXPECT_EQ(w.graph.stats.wait_frames, 1);  // the acquire is inside the get: one wait
  EXPECT_EQ(w.graph.stats.wait_frame_ns, 500'000);
  int waits = 0;
  for (graph::NodeId n = 0; n < w.graph.num_nodes(); ++n) waits += w.graph.kind[n] == graph::NodeKind::kCpuWait;
  EXPECT_EQ(waits, 3);  // get [5,10], acquire [10,500], get [500,505]
  // The wait is not CPU work: scaling CPU ops leaves it as it is.
  EXPECT_DOUBLE_EQ(predict(w, {"cat:cpu_op=2"}), 545);
}

// launch K [0,5] -> K [10,1010]; the thread polls its event: cudaEventQuery at 20, 220,
// ..., 1020 (2 µs each) with a sleep between; the last query ends at 1022, 12 µs after K
// ends; post [1022,1072].
std::string poll_loop(double last_query_at = 1020) {
  TraceJson t;
  t.launch("K", 7, 0, 10, 1000, 1).runtime("cudaEventRecord", 5, 2, 2);
  long corr = 3;
  double q = 20;
  for (; q < last_query_at; q += 200) {
    t.runtime("cudaEventQuery", q, 2, corr++);
    t.cpu("<built-in function sleep>", q + 2, 198, 1, "python_function");
  }
  t.runtime("cudaEventQuery", q, 2, corr++);
  t.cpu("post", q + 2, 50);
  return t.str();
}

TEST(Waits, PollingLoopEndsWhenTheKernelItPollsEnds) {
  auto w = load({poll_loop()});
  ASSERT_EQ(w.graph.stats.poll_query_loops, 1);
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, 1'072'000);
  EXPECT_NEAR(a.replay_error_pct, 0.0, 1e-9);
  // K x2: K [10,2010]; the loop ends 12 µs later, at 2022; post ends at 2072.
  EXPECT_DOUBLE_EQ(predict(w, {"^K$=2"}), 2072);
  // K x0.5: K [10,510]; the loop ends at 522; post ends at 572.
  EXPECT_DOUBLE_EQ(predict(w, {"^K$=0.5"}), 572);
  // The kernel is on the critical path, through the wait.
  EXPECT_EQ(part_ns(a, "gpu_compute"), 1'000'000);
  auto j = analysis::to_json(w, a, false);
  EXPECT_EQ(j["import_stats"]["poll_query_loops"], 1);
  EXPECT_NE(analysis::to_text(w, a).find("host polling loop"), std::string::npos);
}

TEST(Waits, QueriesThatDoNotEndWithTheKernelAreNotAWait) {
  // The same loop stopped at 420 (ends at 422), long before K ends at 1010: it did
  // not wait for K, so K runs on its own and post follows the queries.
  auto w = load({poll_loop(420)});
  EXPECT_EQ(w.graph.stats.poll_query_loops, 0);
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, 1'010'000);
  EXPECT_DOUBLE_EQ(predict(w, {"^K$=0.5"}), 510);
  // One query is a check, not a loop: a query ending 5 µs after K ends is left alone.
  auto one = load({TraceJson().launch("K", 7, 0, 10, 100, 1).runtime("cudaEventQuery", 113, 2, 2).cpu("post", 115, 20).str()});
  EXPECT_EQ(one.graph.stats.poll_query_loops, 0);
}

// DeepEP-style: launch `dispatch` [0,5] -> dispatch [10,20010] on stream 7; the host
// spins in an annotated range with nothing inside, [6,20015] (ends 5 µs after the
// kernel); post [20015,20065].
std::string spin_range(double range_end = 20015) {
  return TraceJson()
      .launch("dispatch", 7, 0, 10, 20000, 1)
      .cpu("deep_ep::wait_recv", 6, range_end - 6, 1, "user_annotation")
      .cpu("post", range_end, 50)
      .str();
}

TEST(Waits, AnnotatedSpinRangeEndsWhenTheKernelEnds) {
  auto w = load({spin_range()});
  ASSERT_EQ(w.graph.stats.poll_ranges, 1);
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, 20'065'000);
  // dispatch x0.5: [10,10010]; the range ends at 10015; post ends at 10065.
  EXPECT_DOUBLE_EQ(predict(w, {"^dispatch$=0.5"}), 10065);
  // dispatch x2: [10,40010]; the range ends at 40015; post at 40065.
  EXPECT_DOUBLE_EQ(predict(w, {"^dispatch$=2"}), 40065);
  // The step is GPU-bound: the kernel, not the spinning host, is on the path.
  EXPECT_EQ(part_ns(a, "gpu_compute"), 20'000'000);
  EXPECT_LT(part_ns(a, "cpu"), 100'000);
}

TEST(Waits, ARangeEndingLongAfterTheKernelIsCpuWork) {
  // The range ends 300 µs after the kernel: not a wait for it.
  auto w = load({spin_range(20310)});
  EXPECT_EQ(w.graph.stats.poll_ranges, 0);
  EXPECT_DOUBLE_EQ(predict(w, {"^dispatch$=0.5"}), 20360);
}

// DeepEP's normal-mode dispatch as DeepSeek's DualPipe trace records it (deepseek-ai/profile-data,
// train.json): inside the annotated range `dispatch(F)` [0, wake+5] the host launches the notify
// kernel and spins, with nothing recorded, until the kernel writes the token counts to host memory,
// 50 µs before the kernel ends; then it launches the dispatch kernel.
// stream 7: attn_bwd [10,19000] (launched [1,6]); notify [19001,20401] (launched [10,15]), queued
// behind it; spin [15,wake]; launch dispatch [wake,wake+5] -> dispatch [20402,24402].
const char* kNotify = "void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*, int)";
const char* kEpDispatch = "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*)";
std::string notify_spin(double wake = 20351, bool op_between = false) {
  TraceJson t;
  t.cpu("dispatch(F)", 0, wake + 5, 1, "user_annotation")
      .launch("attn_bwd", 7, 1, 10, 18990, 1)
      .launch(kNotify, 7, 10, 19001, 1400, 2)
      .launch(kEpDispatch, 7, wake, 20402, 4000, 3);
  if (op_between) t.cpu("aten::empty", 15, 5);
  return t.str();
}

TEST(Waits, SpinAfterTheNotifyLaunchEndsWhenTheKernelSignals) {
  auto w = load({notify_spin()});
  ASSERT_EQ(w.graph.stats.poll_ranges, 1);
  EXPECT_NE(w.graph.stats.poll_example.find("before it ends"), std::string::npos) << w.graph.stats.poll_example;
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, 24'402'000);
  EXPECT_NEAR(a.replay_error_pct, 0.0, 1e-9);
  // attn_bwd x0.5: [10,9505]; notify [9506,10906]; the host wakes 1350 after notify starts, at
  // 10856; dispatch is launched [10856,10861] and starts after notify, [10907,14907].
  EXPECT_DOUBLE_EQ(predict(w, {"^attn_bwd$=0.5"}), 14907);
  // attn_bwd x1.5: [10,28495]; notify [28496,29896]; wake 29846; dispatch [29897,33897].
  EXPECT_DOUBLE_EQ(predict(w, {"^attn_bwd$=1.5"}), 33897);
  // The path runs through the GPU work, not the 20 ms the host spun; the kernels are communication.
  EXPECT_GE(part_ns(a, "gpu_compute"), 18'990'000);
  EXPECT_GE(part_ns(a, "communication"), 4'000'000);
  EXPECT_LT(part_ns(a, "cpu"), 100'000);
}

TEST(Waits, SpinThatDoesNotFollowTheLaunchOrStartsWithTheKernelIsCpuWork) {
  // An op recorded between the launch and the stretch: the stretch is not the spin that follows
  // the launch, so it stays CPU time and the host does not move with the GPU.
  auto w = load({notify_spin(20351, true)});
  EXPECT_EQ(w.graph.stats.poll_ranges, 0);
  // attn_bwd x0.5: the host still launches dispatch at 20351; it starts 9 µs later (the launch
  // latency the trace shows) and ends at 24360.
  EXPECT_DOUBLE_EQ(predict(w, {"^attn_bwd$=0.5"}), 24360);
  // The stream was idle: the notify kernel starts 5 µs after its launch, so the host did not wait
  // for the GPU to reach it: [15,1415] is CPU time, not a wait on a kernel running [20,1420].
  auto idle = load({TraceJson()
                        .cpu("dispatch(F)", 0, 1420, 1, "user_annotation")
                        .launch(kNotify, 7, 10, 20, 1400, 2)
                        .launch(kEpDispatch, 7, 1415, 1421, 4000, 3)
                        .str()});
  EXPECT_EQ(idle.graph.stats.poll_ranges, 0);
}

TEST(Waits, VllmDecodeTqdmMonitorThreadIsLeftOut) {
  // A vLLM decode trace without ProfilerStep: the step is the profiler window, and
  // tqdm's monitor thread (tid 0, `threading.py ... wait` frames) began before the
  // main thread and runs to the window's end. It launches nothing: left out.
  EMO_REQUIRE_SHARED(p, "traces/tracelens/tests/traces/inference/vllm_decode_full/capture_traces/"
                        "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz");
  auto w = analysis::load({p}, {});
  ASSERT_TRUE(w.ok()) << w.error().message();
  const graph::Graph& g = w->graph;
  EXPECT_EQ(g.stats.waiting_threads, 1);
  int64_t all_begin = std::numeric_limits<int64_t>::max(), launching_begin = all_begin;
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    all_begin = std::min(all_begin, g.meas_start_ns[n]);
    if (g.on_waiting_thread[n]) {
      EXPECT_EQ(g.lanes[g.lane[n]].tid, 0);
    } else if (g.kind[n] == graph::NodeKind::kRuntime) {
      launching_begin = std::min(launching_begin, g.meas_start_ns[n]);  // a runtime call of a thread that counts
    }
  }
  // The step starts with the main thread's work, not with the monitor thread's frames.
  EXPECT_GT(g.measured_begin_ns(), all_begin + 50'000);
  EXPECT_GT(g.stats.waiting_thread_span_ns, 50'000);
  auto a = analysis::analyze(*w);
  EXPECT_LE(std::abs(a.replay_error_pct), 1.0);
  for (graph::NodeId n : a.critical_path.nodes) {
    EXPECT_FALSE(n < g.on_waiting_thread.size() && g.on_waiting_thread[n]) << "a waiting thread's node is on the path";
  }
  int64_t sum = 0;
  for (const auto& part : a.critical_path.breakdown) sum += part.ns;
  EXPECT_EQ(sum, a.replayed_span_ns);
  EXPECT_LE(g.measured_begin_ns(), launching_begin);
}

TEST(Waits, NamesOfBlockedWaitFrames) {
  for (const char* yes :
       {"threading.py(359): wait", "threading.py(1116): _wait_for_tstate_lock", "multiprocessing/connection.py(379): _recv",
        "/usr/lib/python3.10/multiprocessing/connection.py(414): _recv_bytes", "selectors.py(415): select",
        "queue.py(171): get", "multiprocessing/queues.py(113): get", "<built-in function sleep>",
        "<built-in method acquire of _thread.lock object at 0x7f6e>", "<built-in method poll of select.epoll object at 0x1>",
        "torch/utils/data/dataloader.py(1133): _try_get_data"}) {
    EXPECT_TRUE(graph::is_blocked_wait_frame(yes)) << yes;
  }
  for (const char* no : {"threading.py(1032): _bootstrap", "tqdm/_monitor.py(60): run", "threading.py(601): is_set",
                         "aten::wait", "queue.py(154): put", "mywait.py(3): helper", "wait", "", "threading.py(",
                         "connection.py(12)"}) {
    EXPECT_FALSE(graph::is_blocked_wait_frame(no)) << no;
  }
  EXPECT_TRUE(graph::is_gpu_query("cudaEventQuery"));
  EXPECT_TRUE(graph::is_gpu_query("hipEventQuery"));
  EXPECT_TRUE(graph::is_gpu_query("cudaStreamQuery"));
  EXPECT_FALSE(graph::is_gpu_query("cudaEventSynchronize"));
}

}  // namespace
}  // namespace emo
