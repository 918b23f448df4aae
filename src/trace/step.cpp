// select_step: restricts one rank's tables to a single ProfilerStep, the unit
// EMO optimizes. CPU work is taken by time (inside the step's span on any
// thread); GPU work by cause (launched from inside the step), because a GPU
// lags its CPU: a kernel launched late in step 1 may run during step 2.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <tuple>
#include <unordered_map>
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

// Which events belong to the span [s0, s1]: see select_step.
struct Selection {
  std::vector<uint8_t> keep;
  int64_t kept = 0;
  int64_t cut = 0;  // CPU events crossing an edge of the span
  static constexpr size_t kNoEvent = static_cast<size_t>(-1);
  size_t first_cut = kNoEvent;
  size_t first_outside = kNoEvent;  // the first other event not kept
  std::vector<PriorGpuBusy> prior;  // see RankTrace::prior_gpu_busy
};

// `annotations_in_span`: GPU annotations inside the span itself are kept too
// (the profiler window: any annotation it recorded belongs to it), not only
// those inside the kept GPU work's extent (a step: another step's annotation
// may lie inside this step's span).
Selection select_span(const RankTrace& t, int64_t s0, int64_t s1, bool annotations_in_span) {
  const size_t n = t.events.size();
  Selection sel;
  std::vector<uint8_t>& keep = sel.keep;
  keep.assign(n, 0);

  // CPU side: events fully inside the span, on any thread. Those that only
  // overlap it (an enclosing "[param|cuda]" range, a thread op that straddles
  // the boundary) are dropped and counted.
  std::unordered_set<int64_t> kept_corr;
  std::unordered_map<int64_t, int64_t> all_launch_corr;  // correlation -> its earliest call's start
  for (size_t i = 0; i < n; ++i) {
    const Event& e = t.events[i];
    if (!is_cpu_side(e.kind)) continue;
    const bool runtime = e.kind == EventKind::kRuntime || e.kind == EventKind::kDriver;
    if (runtime && e.correlation != kNone) {
      auto [it, fresh] = all_launch_corr.try_emplace(e.correlation, e.ts_ns);
      if (!fresh) it->second = std::min(it->second, e.ts_ns);
    }
    const int64_t end = e.ts_ns + e.dur_ns;
    if (e.ts_ns >= s0 && end <= s1) {
      keep[i] = 1;
      if (runtime && e.correlation != kNone) kept_corr.insert(e.correlation);
    } else if (e.ts_ns < s1 && end > s0) {
      if (sel.cut++ == 0) sel.first_cut = i;
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
    } else if (is_gpu_op(e.kind) && e.ts_ns + e.dur_ns > s0 &&
               all_launch_corr.find(e.correlation)->second < s0) {
      const int32_t stream = e.stream >= 0 || e.lane >= t.lanes.size() ? e.stream : t.lanes[e.lane].stream;
      sel.prior.push_back(PriorGpuBusy{e.device, stream, std::max(e.ts_ns, s0), e.ts_ns + e.dur_ns});
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
  } else if (annotations_in_span) {
    g0 = std::min(g0, s0);
    g1 = std::max(g1, s1);
  }
  for (size_t i = 0; i < n; ++i) {
    const Event& e = t.events[i];
    if (e.kind == EventKind::kGpuAnnotation && e.ts_ns >= g0 && e.ts_ns + e.dur_ns <= g1) keep[i] = 1;
  }

  for (size_t i = 0; i < n; ++i) {
    sel.kept += keep[i];
    if (!keep[i] && i != sel.first_cut && sel.first_outside == Selection::kNoEvent) {
      const Event& e = t.events[i];
      const bool crossing = is_cpu_side(e.kind) && e.ts_ns < s1 && e.ts_ns + e.dur_ns > s0;
      if (!crossing) sel.first_outside = i;
    }
  }
  return sel;
}

// Spans of one device and stream that overlap or lie closer than kPriorBusyMergeNs joined: by device, stream,
// then time.
std::vector<PriorGpuBusy> merged(std::vector<PriorGpuBusy> v) {
  std::sort(v.begin(), v.end(), [](const PriorGpuBusy& a, const PriorGpuBusy& b) {
    return std::tie(a.device, a.stream, a.begin_ns, a.end_ns) < std::tie(b.device, b.stream, b.begin_ns, b.end_ns);
  });
  std::vector<PriorGpuBusy> out;
  for (const PriorGpuBusy& b : v) {
    if (!out.empty() && out.back().device == b.device && out.back().stream == b.stream &&
        b.begin_ns <= out.back().end_ns + kPriorBusyMergeNs) {
      out.back().end_ns = std::max(out.back().end_ns, b.end_ns);
    } else {
      out.push_back(b);
    }
  }
  return out;
}

void apply(RankTrace& t, const Selection& sel) {
  t.prior_gpu_busy = merged(sel.prior);
  detail::compact(t, sel.keep);
  detail::rebase(t);
  detail::rebuild_steps(t);
  t.stats.events_kept = static_cast<int64_t>(t.events.size());
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// "cudaLaunchKernel (thread 2), 60.000 ms after the window ends": an example
// of an event the profiler window dropped.
std::string describe(const RankTrace& t, size_t i, int64_t s0, int64_t s1) {
  const Event& e = t.events[i];
  std::string s = "name: " + std::string(t.name_of(e));
  if (e.lane < t.lanes.size()) {
    const Lane& l = t.lanes[e.lane];
    s += l.gpu ? " (stream " + std::to_string(l.stream) + ")" : " (thread " + std::to_string(l.tid) + ")";
  }
  char buf[96];
  const int64_t end = e.ts_ns + e.dur_ns;
  if (e.ts_ns >= s1) {
    std::snprintf(buf, sizeof buf, ", %.3f ms after the window ends", ms(e.ts_ns - s1));
  } else if (end <= s0) {
    std::snprintf(buf, sizeof buf, ", %.3f ms before the window starts", ms(s0 - end));
  } else if (e.ts_ns < s0) {
    std::snprintf(buf, sizeof buf, ", starts %.3f ms before the window", ms(s0 - e.ts_ns));
  } else if (end > s1) {
    std::snprintf(buf, sizeof buf, ", ends %.3f ms after the window", ms(end - s1));
  } else {
    std::snprintf(buf, sizeof buf, ", inside the window but launched outside it");
  }
  return s + buf;
}

// A trace without ProfilerStep: its step is the profiler's window. Kineto
// records from the profiler's start to its stop, but a background thread may
// flush a few runtime calls after the stop (tens of ms later): kept, they would
// stretch the step. The same rule as a step applies, with the window as span.
void restrict_to_window(RankTrace& t) {
  const int64_t s0 = t.window->ts_ns, s1 = t.window->ts_ns + t.window->dur_ns;
  Selection sel = select_span(t, s0, s1, /*annotations_in_span=*/true);
  const int64_t n = static_cast<int64_t>(t.events.size());
  if (sel.kept == n) return;  // the usual case: everything was recorded inside the window
  if (sel.kept == 0) {
    // A window that holds nothing is not the recording's (e.g. a span from
    // another profiler's clock): the trace is taken whole.
    t.stats.rows.push_back(ImportStat{"profiler window holds no events (ignored: the whole trace is the step)", 1,
                                      describe(t, 0, s0, s1), false});
    return;
  }
  const int64_t outside = n - sel.kept - sel.cut;
  const std::string outside_example =
      sel.first_outside < t.events.size() ? describe(t, sel.first_outside, s0, s1) : std::string();
  const std::string cut_example = sel.first_cut < t.events.size() ? describe(t, sel.first_cut, s0, s1) : std::string();
  if (sel.cut > 0) {
    t.stats.rows.push_back(ImportStat{"CPU events crossing the profiler window's edge dropped", sel.cut, cut_example,
                                      false});
  }
  if (outside > 0) {
    t.stats.rows.push_back(ImportStat{"events outside the profiler window dropped", outside, outside_example, false});
  }
  t.stats.outside_profiler_window = n - sel.kept;
  t.stats.outside_profiler_window_example = outside > 0 ? outside_example : cut_example;
  apply(t, sel);
}

}  // namespace

Result<int64_t> select_step(RankTrace& t, std::optional<int64_t> step) {
  if (t.steps.empty()) {
    if (step.has_value()) {
      return make_error(t.path, "no ProfilerStep#" + std::to_string(*step) + " in the trace",
                        "the trace has no ProfilerStep annotations; leave out the step to use "
                        "the whole trace");
    }
    if (t.window) restrict_to_window(t);
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
  const int64_t n = static_cast<int64_t>(t.events.size());
  Selection sel = select_span(t, s0, s1, /*annotations_in_span=*/false);
  const std::string label = "ProfilerStep#" + std::to_string(chosen.number);
  if (sel.cut > 0) {
    t.stats.rows.push_back(ImportStat{"CPU events crossing the " + label + " boundary dropped", sel.cut,
                                      "name: " + std::string(t.name_of(t.events[sel.first_cut])), false});
  }
  const int64_t outside = n - sel.kept - sel.cut;
  if (outside > 0) {
    t.stats.rows.push_back(ImportStat{"events outside " + label + " dropped", outside, "", false});
  }
  apply(t, sel);
  return chosen.number;
}

bool waited_on_prior_work(const std::vector<PriorGpuBusy>& busy, int32_t device, int32_t stream, int64_t from_ns,
                          int64_t start_ns) {
  const int64_t wait = start_ns - from_ns;
  if (wait < kQueuedWaitMinNs) return false;
  const int64_t near = std::max(kPriorStreamGapNs, wait / 20);
  std::vector<std::pair<int64_t, int64_t>> pieces;  // the stream's earlier work within the wait
  for (const PriorGpuBusy& b : busy) {
    if (b.device != device || b.stream != stream) continue;
    if (b.end_ns <= start_ns + near && start_ns - b.end_ns <= near) return true;
    const int64_t lo = std::max(b.begin_ns, from_ns), hi = std::min(b.end_ns, start_ns);
    if (hi > lo) pieces.emplace_back(lo, hi);
  }
  std::sort(pieces.begin(), pieces.end());
  int64_t covered = 0, reach = from_ns;
  for (const auto& [lo, hi] : pieces) {
    if (hi <= reach) continue;
    covered += hi - std::max(lo, reach);
    reach = hi;
  }
  return 10 * covered >= 9 * wait;
}

bool runs_free_gpu_tail(const RankTrace& t, int64_t host_begin_ns, int64_t host_end_ns, int64_t gpu_end_ns) {
  if (gpu_end_ns - host_end_ns < kQueuedWaitMinNs) return false;
  std::vector<int64_t> ends;  // where the step before's work that ran into the step ended
  for (const PriorGpuBusy& b : t.prior_gpu_busy) {
    if (b.end_ns - host_begin_ns >= kQueuedWaitMinNs) ends.push_back(b.end_ns);
  }
  if (ends.empty()) return false;
  std::sort(ends.begin(), ends.end());
  std::unordered_map<int64_t, int64_t> call_end;  // launch calls by correlation
  for (const Event& e : t.events) {
    if (e.kind != EventKind::kRuntime && e.kind != EventKind::kDriver && e.kind != EventKind::kCudaSync) continue;
    const int64_t end = e.ts_ns + e.dur_ns;
    if (e.kind != EventKind::kCudaSync && e.correlation != kNone) call_end.emplace(e.correlation, end);
    // The first of the ends at or after end - gap: a call that ended as that work ended, having begun before.
    auto it = std::lower_bound(ends.begin(), ends.end(), end - kPriorStreamGapNs);
    for (; it != ends.end() && *it <= end + kPriorStreamGapNs; ++it) {
      if (e.ts_ns + kPriorStreamGapNs <= *it) return false;  // the host waited on the step before's work
    }
  }
  // Every GPU op of the step started as what the trace shows bound it allowed: within kQueuedWaitMinNs of
  // its launch call's end or of its stream's op before, or as some GPU op of its device ended (an event
  // wait). An op that waited longer on nothing the trace shows (unrecorded work, a dependency the profiler
  // missed) leaves the loop's timing unexplained.
  std::vector<const Event*> ops;
  for (const Event& e : t.events) {
    if (is_gpu_op(e.kind)) ops.push_back(&e);
  }
  std::sort(ops.begin(), ops.end(), [](const Event* a, const Event* b) {
    return std::tie(a->device, a->stream, a->ts_ns) < std::tie(b->device, b->stream, b->ts_ns);
  });
  std::vector<std::pair<int32_t, int64_t>> op_ends;  // (device, end), sorted
  for (const Event* e : ops) op_ends.emplace_back(e->device, e->ts_ns + e->dur_ns);
  for (const PriorGpuBusy& b : t.prior_gpu_busy) op_ends.emplace_back(b.device, b.end_ns);
  std::sort(op_ends.begin(), op_ends.end());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Event& e = *ops[i];
    int64_t from = std::numeric_limits<int64_t>::min();
    if (auto c = call_end.find(e.correlation); e.correlation != kNone && c != call_end.end()) from = c->second;
    if (i > 0 && ops[i - 1]->device == e.device && ops[i - 1]->stream == e.stream)
      from = std::max(from, ops[i - 1]->ts_ns + ops[i - 1]->dur_ns);
    if (from == std::numeric_limits<int64_t>::min() || e.ts_ns - from < kQueuedWaitMinNs) continue;
    auto it = std::upper_bound(op_ends.begin(), op_ends.end(), std::make_pair(e.device, e.ts_ns));
    if (it == op_ends.begin()) return false;
    --it;
    if (it->first != e.device || e.ts_ns - it->second > kPriorStreamGapNs) return false;
  }
  return true;
}

}  // namespace emo::trace
