// A CPU-only trace standing in for a GPU job (trace::cpu_ops_as_kernels): leaf operators become kernels
// of their own duration, launched at their start; each step ends waiting for the GPU; a trace with GPU
// work already is refused.
#include <gtest/gtest.h>

#include "emo/analysis/analysis.h"
#include "emo/trace/trace.h"

namespace emo::trace {
namespace {

// ProfilerStep#4 holding aten::linear (with aten::addmm inside) and aten::relu; a 1 µs op too short.
constexpr const char* kCpuTrace = R"({"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 10, "dur": 300},
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 20, "dur": 250},
  {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 400, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "aten::view", "pid": 1, "tid": 1, "ts": 600, "dur": 1}
]})";

TEST(StandIn, LeafOperatorsBecomeKernelsOfTheirDurationAndTheStepWaitsForThem) {
  auto t = parse_trace(kCpuTrace, "cpu.json");
  ASSERT_TRUE(t.ok()) << t.error().message();
  ASSERT_TRUE(select_step(*t, std::nullopt).ok());
  auto n = cpu_ops_as_kernels(*t);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(*n, 2);  // addmm and relu: linear has a child, view is too short
  std::vector<const Event*> kernels, launches, syncs;
  for (const Event& e : t->events) {
    if (e.kind == EventKind::kKernel) kernels.push_back(&e);
    if (e.kind == EventKind::kRuntime && t->name_of(e) == "cudaLaunchKernel") launches.push_back(&e);
    if (e.kind == EventKind::kRuntime && t->name_of(e) == "cudaDeviceSynchronize") syncs.push_back(&e);
  }
  ASSERT_EQ(kernels.size(), 2u);
  ASSERT_EQ(launches.size(), 2u);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(t->name_of(*kernels[0]), "aten::addmm");
  EXPECT_EQ(kernels[0]->ts_ns + kernels[0]->dur_ns, 270000);  // ends with its operator
  EXPECT_EQ(kernels[0]->correlation, launches[0]->correlation);
  EXPECT_EQ(launches[0]->ts_ns, 20000);
  EXPECT_EQ(syncs[0]->ts_ns, 500000);  // after relu, the last stand-in operator
  for (size_t i = 1; i < t->events.size(); ++i) EXPECT_LE(t->events[i - 1].ts_ns, t->events[i].ts_ns);
  // The graph sees one GPU with both kernels, and the step still replays as measured.
  std::vector<RankTrace> ranks;
  ranks.push_back(std::move(*t));
  analysis::LoadOptions lo;
  auto w = analysis::assemble(std::move(ranks), lo);
  ASSERT_TRUE(w.ok()) << w.error().message();
  const analysis::Analysis a = analysis::analyze(*w);
  ASSERT_EQ(a.gpus.size(), 1u);
  EXPECT_EQ(a.gpus[0].ops, 2);
  EXPECT_NEAR(a.replay_error_pct, 0.0, 0.5);
}

TEST(StandIn, ATraceWithGpuWorkOrNoOperatorIsRefused) {
  auto gpu = parse_trace(R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 50},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 40, "args": {"device": 0, "stream": 7, "correlation": 1}}]})",
                         "gpu.json");
  ASSERT_TRUE(gpu.ok());
  auto r = cpu_ops_as_kernels(*gpu);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("has GPU operations"), std::string::npos);
  auto empty = parse_trace(R"({"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "x", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]})", "e.json");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(cpu_ops_as_kernels(*empty).ok());
}

}  // namespace
}  // namespace emo::trace
