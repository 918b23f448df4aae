// Tests of select_step: which events belong to a ProfilerStep (CPU by time,
// GPU by the launch that caused it), the default "last complete step", the
// errors for unknown steps, and the re-based times.
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "emo/trace/trace.h"
#include "test_util.h"

namespace emo::trace {
namespace {

std::string ev(const std::string& cat, const std::string& name, int tid, double ts, double dur,
               const std::string& args = "{}") {
  return R"({"ph":"X","cat":")" + cat + R"(","name":")" + name + R"(","pid":1,"tid":)" + std::to_string(tid) +
         R"(,"ts":)" + std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) + R"(,"args":)" + args + "}";
}
std::string gpu(const std::string& cat, const std::string& name, double ts, double dur, long corr) {
  return R"({"ph":"X","cat":")" + cat + R"(","name":")" + name + R"(","pid":0,"tid":7,"ts":)" +
         std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) +
         R"(,"args":{"device":0,"stream":7,"correlation":)" + std::to_string(corr) + "}}";
}
std::string launch(const std::string& name, double ts, long corr) {
  return ev("cuda_runtime", name, 1, ts, 5, R"({"correlation":)" + std::to_string(corr) + "}");
}

// Two steps on thread 1 (times in µs):
//   [param|cuda] 990..1250 encloses everything (crosses both step boundaries)
//   ProfilerStep#1 1000..1100: op1, launch k1 (corr 1, runs 1090..1130) and
//     k2 (corr 2, launched at 1080, runs 1135..1150: after the step ends)
//   ProfilerStep#2 1100..1200: op2, launch k3 (corr 3), cudaDeviceSynchronize (corr 4)
//   thread 2: bwd 1095..1105 crosses the boundary; bwd2 1150..1160 is inside step 2
//   a memset with no launching call in the trace (corr 99) starts at 1060
std::vector<std::string> two_steps() {
  return {
      ev("user_annotation", "[param|cuda]", 1, 990, 260),
      ev("user_annotation", "ProfilerStep#1", 1, 1000, 100),
      ev("cpu_op", "op1", 1, 1010, 20),
      launch("cudaLaunchKernel", 1020, 1),
      launch("cudaLaunchKernel", 1080, 2),
      gpu("gpu_memset", "Memset (Device)", 1060, 1, 99),
      gpu("kernel", "k1", 1090, 40, 1),
      gpu("kernel", "k2", 1135, 15, 2),
      R"({"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#1","pid":0,"tid":7,"ts":1090,"dur":60})",
      ev("user_annotation", "ProfilerStep#2", 1, 1100, 100),
      ev("cpu_op", "op2", 1, 1110, 30),
      launch("cudaLaunchKernel", 1120, 3),
      gpu("kernel", "k3", 1150, 20, 3),
      launch("cudaDeviceSynchronize", 1180, 4),
      R"({"ph":"X","cat":"cuda_sync","name":"Context Sync","pid":0,"tid":-1,"ts":1190,"dur":1,"args":{"cuda_sync_kind":"Context Sync","stream":-1,"device":0,"correlation":4}})",
      R"({"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#2","pid":0,"tid":7,"ts":1150,"dur":20})",
      ev("cpu_op", "bwd", 2, 1095, 10),
      ev("cpu_op", "bwd2", 2, 1150, 10),
  };
}

std::string trace_of(const std::vector<std::string>& events) {
  std::string s = R"({"traceEvents":[)";
  for (size_t i = 0; i < events.size(); ++i) s += (i ? ",\n" : "\n") + events[i];
  return s + "]}";
}

RankTrace parse(const std::vector<std::string>& events) {
  Result<RankTrace> r = parse_trace(trace_of(events), "steps.json");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
  return r.ok() ? std::move(r).value() : RankTrace{};
}

std::multiset<std::string> names(const RankTrace& t) {
  std::multiset<std::string> s;
  for (const Event& e : t.events) s.insert(std::string(t.name_of(e)) + "/" + to_string(e.kind));
  return s;
}

TEST(TraceStep, KernelLaunchedInStepStaysInItEvenWhenItRunsAfter) {
  RankTrace t = parse(two_steps());
  const int64_t origin_before = t.origin_ns;
  EXPECT_EQ(origin_before, 990 * 1000);
  Result<int64_t> r = select_step(t, 1);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, 1);
  EXPECT_EQ(names(t), (std::multiset<std::string>{
                          "ProfilerStep#1/user_annotation", "op1/cpu_op", "cudaLaunchKernel/cuda_runtime",
                          "cudaLaunchKernel/cuda_runtime", "Memset (Device)/gpu_memset", "k1/kernel",
                          "k2/kernel", "ProfilerStep#1/gpu_user_annotation"}));
  // Times start at the step: origin moved by 10 µs, the step is at 0.
  EXPECT_EQ(t.origin_ns, origin_before + 10 * 1000);
  EXPECT_EQ(t.events.front().ts_ns, 0);
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps[0].number, 1);
  EXPECT_EQ(t.steps[0].ts_ns, 0);
  EXPECT_EQ(t.steps[0].dur_ns, 100 * 1000);
  EXPECT_EQ(t.stats.events_kept, 8);
  // The enclosing range and the op straddling the boundary are counted.
  bool counted = false;
  for (const ImportStat& row : t.stats.rows) {
    if (row.what == "CPU events crossing the ProfilerStep#1 boundary dropped") {
      counted = true;
      EXPECT_EQ(row.count, 2);
      EXPECT_FALSE(row.is_error);
    }
  }
  EXPECT_TRUE(counted);
  // Every event's lane and collective index is still valid.
  for (const Event& e : t.events) ASSERT_LT(e.lane, t.lanes.size());
}

TEST(TraceStep, SecondStepTakesItsOwnLaunchesAndOtherThreads) {
  RankTrace t = parse(two_steps());
  Result<int64_t> r = select_step(t, 2);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(names(t), (std::multiset<std::string>{
                          "ProfilerStep#2/user_annotation", "op2/cpu_op", "cudaLaunchKernel/cuda_runtime",
                          "k3/kernel", "cudaDeviceSynchronize/cuda_runtime", "Context Sync/cuda_sync",
                          "ProfilerStep#2/gpu_user_annotation", "bwd2/cpu_op"}));
  EXPECT_EQ(t.origin_ns, 1100 * 1000);
}

TEST(TraceStep, DefaultIsTheLastCompleteStep) {
  RankTrace all_complete = parse(two_steps());
  Result<int64_t> r = select_step(all_complete, std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);

  // Step 3's launch never reached the GPU in the trace: step 2 is the last complete one.
  std::vector<std::string> events = two_steps();
  events.push_back(ev("user_annotation", "ProfilerStep#3", 1, 1200, 100));
  events.push_back(launch("cudaLaunchKernel", 1210, 5));
  RankTrace cut = parse(events);
  ASSERT_EQ(cut.steps.size(), 3u);
  Result<int64_t> c = select_step(cut, std::nullopt);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, 2);
}

TEST(TraceStep, UnknownStepIsAnErrorListingTheAvailableOnes) {
  RankTrace t = parse(two_steps());
  const size_t before = t.events.size();
  Result<int64_t> r = select_step(t, 7);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().where, "steps.json");
  EXPECT_EQ(r.error().what, "no ProfilerStep#7 in the trace");
  EXPECT_EQ(r.error().note, "available steps: 1, 2");
  EXPECT_EQ(t.events.size(), before);  // untouched on error
}

TEST(TraceStep, TraceWithoutStepsIsKeptWhole) {
  RankTrace t =
      parse({ev("cpu_op", "a", 1, 10, 5), launch("cudaLaunchKernel", 11, 1), gpu("kernel", "k", 20, 5, 1)});
  const size_t before = t.events.size();
  Result<int64_t> r = select_step(t, std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, -1);
  EXPECT_EQ(t.events.size(), before);
  Result<int64_t> asked = select_step(t, 3);
  ASSERT_FALSE(asked.ok());
  EXPECT_EQ(asked.error().what, "no ProfilerStep#3 in the trace");
}

TEST(TraceStepRealData, HtaRank0DefaultStepKeepsLaunchedKernels) {
  EMO_REQUIRE_SHARED(path, "traces/hta/tests/data/negative_queue_length_values_check/rank0.json.gz");
  Result<RankTrace> r = read_trace(path);
  ASSERT_TRUE(r.ok()) << r.error().message();
  RankTrace& t = *r;
  Result<int64_t> s = select_step(t, std::nullopt);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(*s, 554);  // every step's launches are matched: the last one
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps[0].ts_ns, 0);
  std::unordered_set<int64_t> runtime_corr;
  int kernels = 0;
  for (const Event& e : t.events) {
    if (is_cpu_side(e.kind)) {
      EXPECT_GE(e.ts_ns, 0);
      EXPECT_LE(e.ts_ns + e.dur_ns, t.steps[0].dur_ns);
    }
    if ((e.kind == EventKind::kRuntime || e.kind == EventKind::kDriver) && e.correlation != kNone) {
      runtime_corr.insert(e.correlation);
    }
  }
  for (const Event& e : t.events) {
    if (e.kind != EventKind::kKernel) continue;
    ++kernels;
    EXPECT_EQ(runtime_corr.count(e.correlation), 1u) << t.name_of(e);
  }
  EXPECT_GT(kernels, 1000);
}

}  // namespace
}  // namespace emo::trace
