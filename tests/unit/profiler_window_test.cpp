// The profiler window rule: a trace without ProfilerStep annotations is
// restricted to the profiler's own "Trace" span ("PyTorch Profiler (0)"), so
// runtime calls a background thread recorded after the profiler stopped do not
// stretch the step; the events dropped are counted (import_stats
// outside_profiler_window) and `emo analyze` warns. Traces with ProfilerStep
// are unchanged. Times in the comments are µs.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/trace/trace.h"
#include "trace_json.h"

namespace emo {
namespace {

using test::TraceJson;

// Kineto's window span, as torch.profiler writes it.
std::string trace_span(double ts, double dur, const std::string& name = "PyTorch Profiler (0)") {
  return fmt::format(
      R"({{"ph":"X","cat":"Trace","ts":{},"dur":{},"pid":"Spans","tid":"PyTorch Profiler","name":"{}","args":{{"Op count":0}}}})",
      ts, dur, name);
}

trace::RankTrace parse(const std::string& json, const std::string& name = "window.json") {
  auto t = trace::parse_trace(json, name);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message());
  return t.ok() ? std::move(t).value() : trace::RankTrace{};
}

analysis::Workload load(const std::string& json, const std::string& name = "window.json") {
  std::vector<trace::RankTrace> ranks;
  ranks.push_back(parse(json, name));
  auto w = analysis::assemble(std::move(ranks), {});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
  return w.ok() ? std::move(w).value() : analysis::Workload{};
}

std::multiset<std::string> names(const trace::RankTrace& t) {
  std::multiset<std::string> s;
  for (const auto& e : t.events) s.insert(std::string(t.name_of(e)));
  return s;
}

// The profiler window 0..1000 on thread 1: op 100..400 launching K1 (corr 1,
// runs 200..500) and K2 (corr 2, runs 500..800). A background thread (tid 9)
// records cudaLaunchKernel (corr 3) 60 ms after the window's end.
TraceJson window_work() {
  TraceJson t;
  t.raw(trace_span(0, 1000))
      .cpu("aten::mm", 100, 300)
      .launch("K1", 7, 110, 200, 300, 1)
      .launch("K2", 7, 150, 500, 300, 2);
  return t;
}
constexpr double kStray = 1000 + 60'000;  // 60 ms after the window

TEST(ProfilerWindow, ReadFromTheTraceSpanAndRebasedWithTheEvents) {
  // The span starts 10 µs before the first event (the reader puts ts 0 at the first event).
  trace::RankTrace t = parse(TraceJson().raw(trace_span(990, 300)).cpu("op", 1000, 100).str());
  ASSERT_TRUE(t.window.has_value());
  EXPECT_EQ(t.window->ts_ns, -10'000);
  EXPECT_EQ(t.window->dur_ns, 300'000);
  EXPECT_EQ(t.origin_ns, 1000 * 1000);
  // Without a Trace span there is no window.
  EXPECT_FALSE(parse(TraceJson().cpu("op", 1000, 100).str()).window.has_value());
}

TEST(ProfilerWindow, SeveralTraceSpansMakeTheirHull) {
  // The legacy spelling (pid "Traces") and a second activity profiler's span.
  trace::RankTrace t = parse(
      TraceJson()
          .raw(R"J({"ph":"X","cat":"Trace","ts":0,"dur":500,"pid":"Traces","tid":"PyTorch Profiler","name":"PyTorch Profiler (0)"})J")
          .raw(trace_span(300, 900, "__cupti_profiler__ (-1)"))
          .cpu("op", 0, 10)
          .str());
  ASSERT_TRUE(t.window.has_value());
  EXPECT_EQ(t.window->ts_ns, 0);
  EXPECT_EQ(t.window->dur_ns, 1'200'000);
}

TEST(ProfilerWindow, StrayRuntimeCallAfterTheWindowIsDroppedAndCounted) {
  const std::string json = window_work().runtime("cudaLaunchKernel", kStray, 5, 3, /*tid=*/9).str();
  analysis::Workload w = load(json);
  ASSERT_EQ(w.ranks.size(), 1u);
  const trace::RankTrace& t = w.ranks[0];
  EXPECT_EQ(w.steps[0], -1);
  EXPECT_EQ(t.stats.outside_profiler_window, 1);
  EXPECT_EQ(names(t).count("cudaLaunchKernel"), 2u) << "the window's own launches stay";
  for (const auto& e : t.events) EXPECT_NE(t.lanes[e.lane].tid, 9) << "the background thread's call is gone";

  // The step is the window's work: 100..800, not stretched to 61 ms.
  analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(a.measured_span_ns, 700'000);
  EXPECT_EQ(a.replayed_span_ns, 700'000);

  nlohmann::json j = analysis::to_json(w, a, false);
  EXPECT_EQ(j["import_stats"]["outside_profiler_window"], 1);
  bool row = false;
  for (const auto& r : j["import_stats"]["events"]) {
    if (r["what"] == "events outside the profiler window dropped") {
      row = true;
      EXPECT_EQ(r["count"], 1);
      EXPECT_EQ(r["error"], false);
      EXPECT_NE(r["example"].get<std::string>().find("cudaLaunchKernel (thread 9), 60.000 ms after the window ends"),
                std::string::npos)
          << r["example"];
    }
  }
  EXPECT_TRUE(row) << j["import_stats"].dump(1);

  std::vector<std::string> warnings = analysis::import_warnings(w);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("1 events outside the profiler window (or crossing its edge) dropped"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("window.json"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("60.000 ms after the window ends"), std::string::npos) << warnings[0];
}

TEST(ProfilerWindow, WithoutTheTraceSpanTheWholeTraceIsTheStep) {
  // The same trace without its window span: nothing to restrict to, and the
  // stray call stretches the step (the behavior the window rule fixes).
  TraceJson t;
  t.cpu("aten::mm", 100, 300).launch("K1", 7, 110, 200, 300, 1).launch("K2", 7, 150, 500, 300, 2);
  analysis::Workload w = load(t.runtime("cudaLaunchKernel", kStray, 5, 3, 9).str());
  EXPECT_EQ(w.ranks[0].stats.outside_profiler_window, 0);
  EXPECT_EQ(analysis::analyze(w).measured_span_ns, (kStray + 5 - 100) * 1000);
  EXPECT_TRUE(analysis::import_warnings(w).empty());
}

TEST(ProfilerWindow, StrayLaunchTakesItsKernelAlong) {
  // The stray call launched a kernel (corr 3) that ran after it: both dropped.
  const std::string json =
      window_work().launch("K3", 7, kStray, kStray + 10, 50, 3, /*tid=*/9).str();
  analysis::Workload w = load(json);
  EXPECT_EQ(w.ranks[0].stats.outside_profiler_window, 2);
  EXPECT_EQ(names(w.ranks[0]).count("K3"), 0u);
  EXPECT_EQ(analysis::analyze(w).measured_span_ns, 700'000);
}

TEST(ProfilerWindow, KernelLaunchedInsideRunningPastTheWindowStays) {
  // GPU work is taken by cause, as for a step: K3 launched at 900 runs 950..1100,
  // past the window's end at 1000; it belongs to the window's work.
  analysis::Workload w = load(window_work().launch("K3", 7, 900, 950, 150, 3).str());
  EXPECT_EQ(w.ranks[0].stats.outside_profiler_window, 0);
  EXPECT_EQ(names(w.ranks[0]).count("K3"), 1u);
  EXPECT_EQ(analysis::analyze(w).measured_span_ns, 1000'000);  // 100..1100
  EXPECT_TRUE(analysis::import_warnings(w).empty());
}

TEST(ProfilerWindow, GpuAnnotationInsideTheWindowStays) {
  // vLLM's CUDA-graph capture trace: a gpu_user_annotation that starts 1 ns
  // before its first GPU op, well inside the window, is the window's.
  const std::string json =
      window_work()
          .raw(R"J({"ph":"X","cat":"gpu_user_annotation","name":"capture","pid":0,"tid":7,"ts":199.999,"dur":300,"args":{}})J")
          .raw(R"J({"ph":"X","cat":"gpu_user_annotation","name":"late","pid":0,"tid":7,"ts":5000,"dur":10,"args":{}})J")
          .str();
  analysis::Workload w = load(json);
  EXPECT_EQ(names(w.ranks[0]).count("capture"), 1u);
  EXPECT_EQ(names(w.ranks[0]).count("late"), 0u) << "outside the window and its GPU work";
  EXPECT_EQ(w.ranks[0].stats.outside_profiler_window, 1);
}

TEST(ProfilerWindow, CpuEventCrossingTheEdgeIsDroppedAndCounted) {
  // A python frame that began before the profiler started (-50..600) and a
  // memset with no launch call that started before the window (-20): dropped,
  // like events crossing a ProfilerStep boundary.
  const std::string json =
      window_work()
          .cpu("train.py(12): loop", -50, 650, 1, "python_function")
          .raw(R"J({"ph":"X","cat":"gpu_memset","name":"Memset (Device)","pid":0,"tid":7,"ts":-20,"dur":1,"args":{"device":0,"stream":7,"correlation":99}})J")
          .str();
  analysis::Workload w = load(json);
  const trace::RankTrace& t = w.ranks[0];
  EXPECT_EQ(t.stats.outside_profiler_window, 2);
  EXPECT_EQ(names(t).count("train.py(12): loop"), 0u);
  EXPECT_EQ(names(t).count("Memset (Device)"), 0u);
  bool crossing = false, outside = false;
  for (const auto& r : t.stats.rows) {
    if (r.what == "CPU events crossing the profiler window's edge dropped") {
      crossing = true;
      EXPECT_EQ(r.count, 1);
      EXPECT_NE(r.example.find("starts 0.050 ms before the window"), std::string::npos) << r.example;
    }
    if (r.what == "events outside the profiler window dropped") {
      outside = true;
      EXPECT_EQ(r.count, 1);
      EXPECT_NE(r.example.find("Memset (Device) (stream 7), 0.019 ms before the window starts"), std::string::npos)
          << r.example;
    }
  }
  EXPECT_TRUE(crossing && outside);
  EXPECT_EQ(analysis::analyze(w).measured_span_ns, 700'000);
}

TEST(ProfilerWindow, WindowHoldingNothingIsIgnored) {
  // A Trace span nowhere near the events (another clock): the trace is taken whole.
  analysis::Workload w = load(TraceJson().raw(trace_span(-1e6, 10)).launch("K", 7, 0, 10, 100, 1).str());
  EXPECT_EQ(w.ranks[0].stats.outside_profiler_window, 0);
  EXPECT_EQ(w.ranks[0].events.size(), 2u);
  EXPECT_EQ(analysis::analyze(w).measured_span_ns, 110'000);
  bool row = false;
  for (const auto& r : w.ranks[0].stats.rows) row |= r.what.find("profiler window holds no events") == 0;
  EXPECT_TRUE(row);
}

TEST(ProfilerWindow, TraceWithProfilerStepIsUnchanged) {
  // ProfilerStep#1 100..900 inside the window, and the same stray call: the
  // step decides, with or without the Trace span, and the window counter stays 0.
  auto with_steps = [](bool span) {
    TraceJson t;
    if (span) t.raw(trace_span(0, 1000));
    t.step(1, 100, 800)
        .cpu("aten::mm", 150, 300)
        .launch("K1", 7, 160, 200, 300, 1)
        .launch("K2", 7, 200, 500, 300, 2)
        .runtime("cudaLaunchKernel", kStray, 5, 3, 9);
    return t.str();
  };
  analysis::Workload a = load(with_steps(true)), b = load(with_steps(false));
  EXPECT_EQ(a.steps[0], 1);
  EXPECT_EQ(b.steps[0], 1);
  EXPECT_EQ(a.ranks[0].stats.outside_profiler_window, 0);
  EXPECT_EQ(names(a.ranks[0]), names(b.ranks[0]));
  EXPECT_EQ(a.ranks[0].origin_ns, b.ranks[0].origin_ns);
  const analysis::Analysis aa = analysis::analyze(a), ab = analysis::analyze(b);
  EXPECT_EQ(aa.measured_span_ns, ab.measured_span_ns);
  EXPECT_EQ(aa.replayed_span_ns, ab.replayed_span_ns);
  nlohmann::json ja = analysis::to_json(a, aa, true), jb = analysis::to_json(b, ab, true);
  // The only difference: the Trace span itself is counted as skipped.
  ja["import_stats"].erase("events");
  jb["import_stats"].erase("events");
  EXPECT_EQ(ja, jb);
  bool step_row = false;
  for (const auto& r : a.ranks[0].stats.rows) {
    EXPECT_EQ(r.what.find("profiler window"), std::string::npos) << r.what;
    step_row |= r.what == "events outside ProfilerStep#1 dropped";
  }
  EXPECT_TRUE(step_row);
  EXPECT_TRUE(analysis::import_warnings(a).empty());
}

TEST(ProfilerWindow, ExplicitStepOnATraceWithoutStepsIsStillAnError) {
  auto t = trace::parse_trace(window_work().str(), "w.json");
  ASSERT_TRUE(t.ok());
  auto s = trace::select_step(*t, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("no ProfilerStep#3"), std::string::npos);
}

}  // namespace
}  // namespace emo
