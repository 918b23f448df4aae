// CUDA and HIP runtime/driver calls (docs/replay.md "AMD (ROCm/HIP) runtime calls"): the name table
// (emo/trace/runtime_calls.h), hand-built HIP traces whose edges are known, and the ROCm traces of
// ../shared (tracelens MI300 / MI210 and the inference captures, HTA's MI250): every GPU op is linked
// to a launching call by correlation, device/stream/event syncs become GPU -> CPU edges, and the
// unmodified replay reproduces the step within 1 %.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/trace/runtime_calls.h"
#include "test_util.h"
#include "trace_json.h"

namespace emo {
namespace {

using test::TraceJson;
using trace::RuntimeCall;

void expect_call(const std::string& name, RuntimeCall want) {
  EXPECT_EQ(std::string(to_string(trace::classify_runtime_call(name))), to_string(want)) << name;
}

TEST(RuntimeCalls, HipCallsMeanWhatTheirCudaCounterpartsMean) {
  struct Row {
    const char* cuda;
    const char* hip;
    RuntimeCall kind;
  };
  const Row rows[] = {
      {"cudaLaunchKernel", "hipLaunchKernel", RuntimeCall::kLaunchKernel},
      {"cudaLaunchKernelExC", "hipExtLaunchKernel", RuntimeCall::kLaunchKernel},
      {"cuLaunchKernel", "hipModuleLaunchKernel", RuntimeCall::kLaunchKernel},
      {"cuLaunchKernelEx", "hipExtModuleLaunchKernel", RuntimeCall::kLaunchKernel},
      {"cudaLaunchCooperativeKernel", "hipLaunchCooperativeKernel", RuntimeCall::kLaunchKernel},
      {"cudaGraphLaunch", "hipGraphLaunch", RuntimeCall::kGraphLaunch},
      {"cudaMemcpyAsync", "hipMemcpyAsync", RuntimeCall::kMemcpyAsync},
      {"cudaMemcpy2DAsync", "hipMemcpy2DAsync", RuntimeCall::kMemcpyAsync},
      {"cudaMemcpy", "hipMemcpy", RuntimeCall::kMemcpy},
      {"cudaMemcpyPeer", "hipMemcpyWithStream", RuntimeCall::kMemcpy},
      {"cudaMemsetAsync", "hipMemsetAsync", RuntimeCall::kMemset},
      {"cudaMemset", "hipMemsetD32", RuntimeCall::kMemset},
      {"cudaDeviceSynchronize", "hipDeviceSynchronize", RuntimeCall::kDeviceSync},
      {"cudaStreamSynchronize", "hipStreamSynchronize", RuntimeCall::kStreamSync},
      {"cudaEventSynchronize", "hipEventSynchronize", RuntimeCall::kEventSync},
      {"cudaEventQuery", "hipEventQuery", RuntimeCall::kQuery},
      {"cudaStreamQuery", "hipStreamQuery", RuntimeCall::kQuery},
      {"cudaEventRecord", "hipEventRecord", RuntimeCall::kEventRecord},
      {"cudaEventRecordWithFlags", "hipEventRecordWithFlags", RuntimeCall::kEventRecord},
      {"cudaStreamWaitEvent", "hipStreamWaitEvent", RuntimeCall::kStreamWaitEvent},
      {"cudaLaunchHostFunc", "hipLaunchHostFunc", RuntimeCall::kHostFunc},
  };
  for (const Row& r : rows) {
    expect_call(r.cuda, r.kind);
    expect_call(r.hip, r.kind);
  }
}

TEST(RuntimeCalls, DriverVersionedAndPerThreadSpellings) {
  expect_call("cuCtxSynchronize", RuntimeCall::kDeviceSync);
  expect_call("cudaThreadSynchronize", RuntimeCall::kDeviceSync);
  expect_call("cuStreamSynchronize", RuntimeCall::kStreamSync);
  expect_call("cuEventSynchronize", RuntimeCall::kEventSync);
  expect_call("cuMemcpyHtoDAsync_v2", RuntimeCall::kMemcpyAsync);
  expect_call("cuMemcpyDtoH_v2", RuntimeCall::kMemcpy);
  expect_call("cudaMemcpyAsync_ptsz", RuntimeCall::kMemcpyAsync);
  expect_call("cuMemsetD32Async", RuntimeCall::kMemset);
  expect_call("cudaLaunchKernel_ptsz", RuntimeCall::kLaunchKernel);
  expect_call("cuGraphLaunch", RuntimeCall::kGraphLaunch);
  expect_call("cuEventRecord", RuntimeCall::kEventRecord);
  expect_call("cuStreamWaitEvent", RuntimeCall::kStreamWaitEvent);
  expect_call("HIPLAUNCHKERNEL", RuntimeCall::kLaunchKernel);  // case does not matter
}

TEST(RuntimeCalls, PlainCallsAreOnlyCpuTime) {
  for (const char* name :
       {"hipMalloc", "hipFree", "hipHostMalloc", "hipGetDevicePropertiesR0600", "hipDeviceGetAttribute",
        "hipStreamIsCapturing", "hipStreamGetCaptureInfo_v2", "hipStreamBeginCapture", "hipStreamEndCapture",
        "hipGraphInstantiateWithFlags", "hipGraphGetNodes", "hipGraphDestroy", "hipPointerGetAttribute",
        "hipEventDestroy", "hipDriverGetVersion", "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
        "cudaFuncSetAttribute", "cudaPeekAtLastError", "cudaStreamGetPriority", "cudaEventElapsedTime",
        "INVALID", "", "cu", "hip", "cuda"}) {
    expect_call(name, RuntimeCall::kOther);
    EXPECT_FALSE(trace::launches_gpu_work(trace::classify_runtime_call(name))) << name;
  }
  // A very long name does not overrun anything.
  expect_call("hip" + std::string(10000, 'x') + "Launch", RuntimeCall::kOther);
}

TEST(RuntimeCalls, LaunchingCallsAreExactlyTheOnesPuttingWorkOnAStream) {
  for (const char* name : {"hipLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel",
                           "hipGraphLaunch", "hipMemcpyAsync", "hipMemcpyWithStream", "hipMemsetAsync"}) {
    EXPECT_TRUE(trace::launches_gpu_work(trace::classify_runtime_call(name))) << name;
  }
  for (const char* name : {"hipLaunchHostFunc", "hipDeviceSynchronize", "hipEventRecord", "hipStreamWaitEvent"}) {
    EXPECT_FALSE(trace::launches_gpu_work(trace::classify_runtime_call(name))) << name;
  }
}

int count_edges(const graph::Graph& g, graph::EdgeKind kind, graph::NodeId dst) {
  int n = 0;
  for (const auto& e : g.edges) n += e.kind == kind && graph::node_of(e.dst) == dst;
  return n;
}

graph::NodeId node_named(const graph::Graph& g, const std::string& name) {
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.strings.view(g.name[n]) == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  return 0;
}

double predict_us(const analysis::Workload& w, const std::string& scale) {
  auto r = analysis::what_if(w, {*analysis::parse_scale(scale)});
  EXPECT_TRUE(r.ok());
  return r.ok() ? static_cast<double>(r->predicted_span_ns) / 1000.0 : -1;
}

// hipExtModuleLaunchKernel [0,5] runs K [10,110]; hipDeviceSynchronize [20,115] waits for it and
// wakes 5 µs after K ends.
TEST(RuntimeCalls, HipDeviceSynchronizeWaitsForTheGpu) {
  auto w = test::workload_of({TraceJson()
                                  .runtime("hipExtModuleLaunchKernel", 0, 5, 1)
                                  .kernel("K", 7, 10, 100, 1)
                                  .runtime("hipDeviceSynchronize", 20, 95, 2)
                                  .cpu("after", 116, 10)
                                  .str()});
  const graph::NodeId sync = node_named(w.graph, "hipDeviceSynchronize");
  EXPECT_EQ(w.graph.kind[sync], graph::NodeKind::kSyncCall);
  EXPECT_EQ(count_edges(w.graph, graph::EdgeKind::kSync, sync), 1);
  EXPECT_EQ(count_edges(w.graph, graph::EdgeKind::kLaunch, node_named(w.graph, "K")), 1);
  EXPECT_EQ(analysis::analyze(w).replayed_span_ns, 126'000);
  // K x2 ends at 210: the sync returns at 215 and "after" runs [216,226].
  EXPECT_DOUBLE_EQ(predict_us(w, "^K$=2"), 226);
}

// hipStreamSynchronize and hipEventSynchronize wait for the last op that ended before they returned.
TEST(RuntimeCalls, HipStreamAndEventSynchronizeWaitForTheGpu) {
  for (const char* call : {"hipStreamSynchronize", "hipEventSynchronize"}) {
    SCOPED_TRACE(call);
    auto w = test::workload_of({TraceJson()
                                    .runtime("hipLaunchKernel", 0, 5, 1)
                                    .kernel("K", 7, 10, 100, 1)
                                    .runtime(call, 20, 95, 2)
                                    .cpu("after", 116, 10)
                                    .str()});
    const graph::NodeId sync = node_named(w.graph, call);
    EXPECT_EQ(w.graph.kind[sync], graph::NodeKind::kSyncCall);
    EXPECT_EQ(count_edges(w.graph, graph::EdgeKind::kSync, sync), 1);
    EXPECT_DOUBLE_EQ(predict_us(w, "^K$=2"), 226);
    // K x0.5 ends at 60: the sync returns at 65 and "after" runs [66,76].
    EXPECT_DOUBLE_EQ(predict_us(w, "^K$=0.5"), 76);
  }
}

// hipMemcpyWithStream is a blocking copy: it returns after its copy ends.
TEST(RuntimeCalls, HipMemcpyWithStreamBlocksUntilItsCopyEnds) {
  auto w = test::workload_of(
      {TraceJson()
           .runtime("hipMemcpyWithStream", 0, 60, 1)
           .raw(R"J({"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Host -> Device)","pid":0,"tid":7,"ts":10,"dur":45,"args":{"device":0,"stream":7,"correlation":1}})J")
           .cpu("after", 61, 10)
           .str()});
  const graph::NodeId call = node_named(w.graph, "hipMemcpyWithStream");
  EXPECT_EQ(w.graph.kind[call], graph::NodeKind::kSyncCall);
  EXPECT_EQ(count_edges(w.graph, graph::EdgeKind::kSync, call), 1);
  EXPECT_EQ(analysis::analyze(w).replayed_span_ns, 71'000);
}

// hipEventRecord after K1 on stream 7, hipStreamWaitEvent, then K2 on stream 8 waits for K1.
TEST(RuntimeCalls, HipEventRecordAndStreamWaitEventOrderTwoStreams) {
  auto w = test::workload_of({TraceJson()
                                  .runtime("hipLaunchKernel", 0, 5, 1)
                                  .kernel("K1", 7, 10, 100, 1)
                                  .runtime("hipEventRecord", 6, 2, 2)
                                  .runtime("hipStreamWaitEvent", 9, 2, 3)
                                  .runtime("hipLaunchKernel", 12, 5, 4)
                                  .kernel("K2", 8, 111, 50, 4)
                                  .str()});
  EXPECT_EQ(w.graph.stats.cross_stream_from_runtime_pairs, 1);
  EXPECT_EQ(count_edges(w.graph, graph::EdgeKind::kCrossStream, node_named(w.graph, "K2")), 1);
  EXPECT_EQ(analysis::analyze(w).replayed_span_ns, 161'000);
  // K1 x2 ends at 210: K2 follows at 211.
  EXPECT_DOUBLE_EQ(predict_us(w, "^K1$=2"), 261);
}

// ---- the ROCm traces of ../shared ----

struct AmdCheck {
  int launches = 0;      // launching calls with GPU ops in the step
  int sync_calls = 0;    // device/stream/event syncs that waited for GPU work
};

// Checks one trace; returns what it counted.
AmdCheck check_amd_trace(const std::string& path) {
  AmdCheck out;
  auto w = analysis::load({path}, {});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
  if (!w.ok()) return out;
  const graph::Graph& g = w->graph;
  const trace::RankTrace& t = w->ranks[0];
  // Launching call of each GPU op, by its kLaunch edge.
  std::vector<graph::NodeId> launcher(g.num_nodes(), graph::kNoId);
  std::set<graph::NodeId> launchers;
  for (const auto& e : g.edges) {
    if (e.kind != graph::EdgeKind::kLaunch) continue;
    launcher[graph::node_of(e.dst)] = graph::node_of(e.src);
    launchers.insert(graph::node_of(e.src));
  }
  std::set<int64_t> runtime_corr;
  for (const auto& e : t.events) {
    const bool call = e.kind == trace::EventKind::kRuntime || e.kind == trace::EventKind::kDriver;
    if (call && e.correlation != trace::kNone) runtime_corr.insert(e.correlation);
  }
  int gpu_ops = 0;
  bool hip = false;
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.event[n] == graph::kNoId || g.event[n] >= t.events.size()) continue;
    const trace::Event& ev = t.events[g.event[n]];
    if (graph::is_gpu(g.kind[n])) {
      ++gpu_ops;
      // Every GPU op whose call is in the trace is linked to it, and that call is a launching one.
      if (runtime_corr.count(ev.correlation) == 0) continue;
      EXPECT_NE(launcher[n], graph::kNoId) << g.strings.view(g.name[n]);
      if (launcher[n] == graph::kNoId) continue;
      const graph::NodeId l = launcher[n];
      EXPECT_EQ(t.events[g.event[l]].correlation, ev.correlation);
      const std::string_view call = g.strings.view(g.name[l]);
      hip |= call.starts_with("hip");
      EXPECT_TRUE(trace::launches_gpu_work(trace::classify_runtime_call(call))) << call;
    } else if (ev.kind == trace::EventKind::kRuntime) {
      const std::string_view call = g.strings.view(g.name[n]);
      const RuntimeCall rc = trace::classify_runtime_call(call);
      if (launchers.count(n)) ++out.launches;
      // A call that is not a launch never has GPU ops.
      if (!trace::launches_gpu_work(rc)) {
        EXPECT_EQ(launchers.count(n), 0u) << call;
      }
      if (rc == RuntimeCall::kDeviceSync || rc == RuntimeCall::kStreamSync || rc == RuntimeCall::kEventSync) {
        // It waited for GPU work when some op launched before it ended before it returned.
        bool waited = false;
        for (graph::NodeId k = 0; k < g.num_nodes(); ++k) {
          if (!graph::is_gpu(g.kind[k]) || g.event[k] >= t.events.size()) continue;
          waited |= t.events[g.event[k]].correlation < ev.correlation && g.meas_end_ns[k] <= g.meas_end_ns[n] &&
                    g.meas_end_ns[k] > g.meas_start_ns[n];
        }
        if (waited) {
          EXPECT_EQ(g.kind[n], graph::NodeKind::kSyncCall) << call;
          EXPECT_GE(count_edges(g, graph::EdgeKind::kSync, n), 1) << call;
          ++out.sync_calls;
        }
      }
    }
  }
  EXPECT_GT(gpu_ops, 0);
  EXPECT_TRUE(hip) << "not a ROCm trace";
  auto a = analysis::analyze(*w);
  EXPECT_LE(std::abs(a.replay_error_pct), 1.0);
  return out;
}

TEST(RuntimeCalls, RocmTracesLinkEveryLaunchAndSync) {
  const char* files[] = {
      "traces/tracelens/tests/traces/mi300/resnet_act_checkpoint.json.gz",
      "traces/tracelens/tests/traces/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz",
      "traces/tracelens/tests/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz",
      "traces/hta/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
      // ROCm inference captures (hipModuleLaunchKernel, hipEventSynchronize, graph capture calls).
      "traces/tracelens/tests/traces/inference/vllm_decode_full/capture_traces/"
      "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz",
      "traces/tracelens/tests/traces/inference/sglang_decode/capture_traces/bs_32_rank0.json.gz",
  };
  EMO_REQUIRE_SHARED(root, "traces/tracelens/tests/traces/mi300");
  int launches = 0, syncs = 0;
  for (const char* f : files) {
    SCOPED_TRACE(f);
    EMO_REQUIRE_SHARED(path, f);
    AmdCheck c = check_amd_trace(path);
    EXPECT_GT(c.launches, 0);
    launches += c.launches;
    syncs += c.sync_calls;
  }
  EXPECT_GT(launches, 100);
  // hipDeviceSynchronize at the end of a step waits for the GPU on these traces.
  EXPECT_GE(syncs, 1);
}

}  // namespace
}  // namespace emo
