// select_step: restricts one rank's tables to a single ProfilerStep, the unit
// EMO optimizes. CPU work is taken by time (inside the step's span on any
// thread); GPU work by cause (launched from inside the step), because a GPU
// lags its CPU: a kernel launched late in step 1 may run during step 2.
#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>

#include "detail.h"

namespace emo::trace {

namespace {

std::string step_list(const RankTrace& t) {
  std::string s;
  for (const Step& st : t.steps) {
    if (!s.empty()) s += ", ";
    s += std::to_string(st.number);
  }
  return s;
}

// The last complete step: the last ProfilerStep whose launches reached the GPU
// in the trace. A launch is a runtime/driver call that starts GPU work
// (cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch, cudaMemcpyAsync, ...)
// fully inside the step; it reached the GPU when a kernel/memcpy/memset
// carries its correlation. Some launches never show a GPU record in any step
// (memsets CUPTI did not trace, launches inside CUDA-graph capture), so a step
// is complete when its unmatched fraction is within 1 % of the best step's.
// Example: steps 3..5 with 0 %, 0 % and 40 % unmatched (the profiler stopped
// before step 5's kernels were flushed) -> step 4. With one step, that step.
const Step& last_complete_step(const RankTrace& t) {
  std::unordered_set<int64_t> gpu_corr;
  for (const Event& e : t.events) {
    if (is_gpu_op(e.kind) && e.correlation != kNone) gpu_corr.insert(e.correlation);
  }
  std::vector<int8_t> launch_like(t.strings.size(), -1);  // per name, computed once
  std::vector<double> unmatched_frac;
  for (const Step& s : t.steps) {
    const int64_t s0 = s.ts_ns, s1 = s.ts_ns + s.dur_ns;
    auto first = std::lower_bound(t.events.begin(), t.events.end(), s0,
                                  [](const Event& e, int64_t ts) { return e.ts_ns < ts; });
    int64_t launches = 0, unmatched = 0;
    for (auto e = first; e != t.events.end() && e->ts_ns <= s1; ++e) {
      if (e->kind != EventKind::kRuntime && e->kind != EventKind::kDriver) continue;
      if (e->correlation == kNone || e->ts_ns + e->dur_ns > s1) continue;
      int8_t& l = launch_like[e->name];
      if (l < 0) l = detail::is_launch_like(t.strings.view(e->name)) ? 1 : 0;
      if (l == 0) continue;
      ++launches;
      if (gpu_corr.count(e->correlation) == 0) ++unmatched;
    }
    // A step that launched nothing, in a trace whose other steps did, is a stub
    // (e.g. the profiler stopped right after the step began): not complete.
    unmatched_frac.push_back(launches == 0 ? -1.0
                                           : static_cast<double>(unmatched) / static_cast<double>(launches));
  }
  const bool any_launches =
      std::any_of(unmatched_frac.begin(), unmatched_frac.end(), [](double f) { return f >= 0; });
  for (double& f : unmatched_frac) {
    if (f < 0) f = any_launches ? 2.0 : 0.0;
  }
  const double best = *std::min_element(unmatched_frac.begin(), unmatched_frac.end());
  for (size_t i = t.steps.size(); i-- > 0;) {
    if (unmatched_frac[i] <= best + 0.01) return t.steps[i];
  }
  return t.steps.back();
}

}  // namespace

Result<int64_t> select_step(RankTrace& t, std::optional<int64_t> step) {
  if (t.steps.empty()) {
    if (step.has_value()) {
      return make_error(t.path, "no ProfilerStep#" + std::to_string(*step) + " in the trace",
                        "the trace has no ProfilerStep annotations; leave out the step to use "
                        "the whole trace");
    }
    return int64_t{-1};
  }
  Step chosen;
  if (step.has_value()) {
    auto it = std::find_if(t.steps.begin(), t.steps.end(), [&](const Step& s) { return s.number == *step; });
    if (it == t.steps.end()) {
      return make_error(t.path, "no ProfilerStep#" + std::to_string(*step) + " in the trace",
                        "available steps: " + step_list(t));
    }
    chosen = *it;
  } else {
    chosen = last_complete_step(t);
  }
  const int64_t s0 = chosen.ts_ns, s1 = chosen.ts_ns + chosen.dur_ns;
  const size_t n = t.events.size();
  std::vector<uint8_t> keep(n, 0);

  // CPU side: events fully inside the step span, on any thread. Those that
  // only overlap it (an enclosing "[param|cuda]" range, a thread op that
  // straddles the boundary) are dropped and counted.
  std::unordered_set<int64_t> kept_corr, all_launch_corr;
  int64_t cut = 0;
  std::string cut_example;
  for (size_t i = 0; i < n; ++i) {
    const Event& e = t.events[i];
    if (!is_cpu_side(e.kind)) continue;
    const bool runtime = e.kind == EventKind::kRuntime || e.kind == EventKind::kDriver;
    if (runtime && e.correlation != kNone) all_launch_corr.insert(e.correlation);
    const int64_t end = e.ts_ns + e.dur_ns;
    if (e.ts_ns >= s0 && end <= s1) {
      keep[i] = 1;
      if (runtime && e.correlation != kNone) kept_corr.insert(e.correlation);
    } else if (e.ts_ns < s1 && end > s0) {
      if (cut++ == 0) cut_example = std::string(t.strings.view(e.name));
    }
  }

  // GPU side: ops and sync records whose launching call was kept, wherever
  // they ran; those with no launching call in the trace by their start.
  int64_t g0 = std::numeric_limits<int64_t>::max(), g1 = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < n; ++i) {
    const Event& e = t.events[i];
    if (!is_gpu_op(e.kind) && e.kind != EventKind::kCudaSync) continue;
    bool k = false;
    if (e.correlation != kNone && kept_corr.count(e.correlation) != 0) {
      k = true;
    } else if (e.correlation == kNone || all_launch_corr.count(e.correlation) == 0) {
      k = e.ts_ns >= s0 && e.ts_ns <= s1;
    }
    if (!k) continue;
    keep[i] = 1;
    if (is_gpu_op(e.kind)) {
      g0 = std::min(g0, e.ts_ns);
      g1 = std::max(g1, e.ts_ns + e.dur_ns);
    }
  }
  // GPU annotations (spans over GPU work): those inside the step's GPU
  // window, i.e. from its first kept GPU op's start to its last one's end.
  if (g0 > g1) {
    g0 = s0;
    g1 = s1;
  }
  for (size_t i = 0; i < n; ++i) {
    const Event& e = t.events[i];
    if (e.kind == EventKind::kGpuAnnotation && e.ts_ns >= g0 && e.ts_ns + e.dur_ns <= g1) keep[i] = 1;
  }

  int64_t kept = 0;
  for (uint8_t k : keep) kept += k;
  const std::string label = "ProfilerStep#" + std::to_string(chosen.number);
  if (cut > 0) {
    t.stats.rows.push_back(ImportStat{"CPU events crossing the " + label + " boundary dropped", cut,
                                      "name: " + cut_example, false});
  }
  const int64_t outside = static_cast<int64_t>(n) - kept - cut;
  if (outside > 0) {
    t.stats.rows.push_back(ImportStat{"events outside " + label + " dropped", outside, "", false});
  }
  detail::compact(t, keep);
  detail::rebase(t);
  detail::rebuild_steps(t);
  t.stats.events_kept = static_cast<int64_t>(t.events.size());
  return chosen.number;
}

}  // namespace emo::trace
