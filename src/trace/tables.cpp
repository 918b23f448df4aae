// Table clean-up shared by the reader and select_step: dropping events (and
// the lanes and collectives left without events), re-basing times to the
// earliest event, the canonical event order, and the ProfilerStep list.
#include <algorithm>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "detail.h"

#if EMO_TRACE_MAP_BUFFERS
#include <sys/mman.h>
#endif

namespace emo::trace::detail {

void compact(RankTrace& t, const std::vector<uint8_t>& keep) {
  std::vector<uint32_t> lane_map(t.lanes.size(), kNoIndex);
  std::vector<uint32_t> coll_map(t.collectives.size(), kNoIndex);
  size_t out = 0;
  for (size_t i = 0; i < t.events.size(); ++i) {
    if (!keep[i]) continue;
    const Event& e = t.events[i];
    if (e.lane < lane_map.size()) lane_map[e.lane] = 0;
    if (e.collective < coll_map.size()) coll_map[e.collective] = 0;
    t.events[out++] = e;
  }
  t.events.resize(out);
  // Survivors keep their relative order, so a canonical lane order stays canonical.
  uint32_t next = 0;
  for (size_t l = 0; l < t.lanes.size(); ++l) {
    if (lane_map[l] == kNoIndex) continue;
    lane_map[l] = next;
    t.lanes[next++] = t.lanes[l];
  }
  t.lanes.resize(next);
  next = 0;
  for (size_t c = 0; c < t.collectives.size(); ++c) {
    if (coll_map[c] == kNoIndex) continue;
    coll_map[c] = next;
    t.collectives[next++] = t.collectives[c];
  }
  t.collectives.resize(next);
  for (Event& e : t.events) {
    if (e.lane < lane_map.size()) e.lane = lane_map[e.lane];
    if (e.collective < coll_map.size()) e.collective = coll_map[e.collective];
  }
}

void rebase(RankTrace& t) {
  if (t.events.empty()) return;
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const Event& e : t.events) first = std::min(first, e.ts_ns);
  if (first == 0) return;
  t.origin_ns += first;
  for (Event& e : t.events) e.ts_ns -= first;
  for (Step& s : t.steps) s.ts_ns -= first;
  if (t.window) t.window->ts_ns -= first;
  for (PriorGpuBusy& b : t.prior_gpu_busy) {
    b.begin_ns -= first;
    b.end_ns -= first;
  }
}

void sort_events(RankTrace& t) {
  // Sorting small keys and gathering once is much faster than moving 80-byte
  // events around; the index tie-break makes it stable.
  struct Key {
    int64_t ts;
    int64_t neg_dur;
    uint32_t lane;
    uint32_t index;
  };
  const size_t n = t.events.size();
  std::vector<Key> keys(n);
  bool sorted = true;
  for (size_t i = 0; i < n; ++i) {
    const Event& e = t.events[i];
    keys[i] = Key{e.ts_ns, -e.dur_ns, e.lane, static_cast<uint32_t>(i)};
    if (i > 0) {
      const Key& a = keys[i - 1];
      const Key& b = keys[i];
      if (std::tie(a.ts, a.neg_dur, a.lane) > std::tie(b.ts, b.neg_dur, b.lane)) sorted = false;
    }
  }
  if (sorted) return;
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return std::tie(a.ts, a.neg_dur, a.lane, a.index) < std::tie(b.ts, b.neg_dur, b.lane, b.index);
  });
  std::vector<Event> out;
  out.reserve(n);
  advise_huge_pages(out.data(), n * sizeof(Event));
  for (const Key& k : keys) out.push_back(t.events[k.index]);
  t.events.swap(out);
}

void rebuild_steps(RankTrace& t) {
  t.steps.clear();
  constexpr int64_t kUnknown = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> step_of(t.strings.size(), kUnknown);  // per name, computed once
  std::unordered_set<int64_t> seen;
  for (const Event& e : t.events) {
    if (!(e.kind == EventKind::kUserAnnotation || e.kind == EventKind::kCpuOp ||
          e.kind == EventKind::kOtherCpu)) {
      continue;
    }
    int64_t& n = step_of[e.name];
    if (n == kUnknown) n = profiler_step_number(t.strings.view(e.name));
    if (n < 0) continue;
    // A step annotated twice (e.g. on two threads) counts once: the earliest.
    if (!seen.insert(n).second) continue;
    t.steps.push_back(Step{n, e.ts_ns, e.dur_ns});
  }
}

void attach_annotated_sizes(RankTrace& t) {
  // Annotations per CPU lane in start order (events are sorted), and launches by correlation.
  std::unordered_map<uint32_t, std::vector<uint32_t>> annotations;
  std::unordered_map<int64_t, uint32_t> launch_of;
  bool wanted = false;
  for (uint32_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (is_gpu_lane_kind(e.kind)) {
      wanted |= e.kind == EventKind::kKernel && e.collective < t.collectives.size() &&
                t.collectives[e.collective].in_nelems == kNone;
    } else if (e.collective < t.collectives.size()) {
      annotations[e.lane].push_back(i);
    } else if ((e.kind == EventKind::kRuntime || e.kind == EventKind::kDriver) && e.correlation != kNone) {
      launch_of.emplace(e.correlation, i);
    }
  }
  for (Event& k : t.events) {
    if (!wanted || k.kind != EventKind::kKernel || k.collective >= t.collectives.size()) continue;
    CollectiveArgs& c = t.collectives[k.collective];
    if (c.in_nelems != kNone || k.correlation == kNone) continue;
    auto l = launch_of.find(k.correlation);
    if (l == launch_of.end()) continue;
    const Event& launch = t.events[l->second];
    auto a = annotations.find(launch.lane);
    if (a == annotations.end()) continue;
    // The innermost annotation that holds the launch: the latest one starting at or before it.
    const std::vector<uint32_t>& on_lane = a->second;
    auto it = std::upper_bound(on_lane.begin(), on_lane.end(), launch.ts_ns,
                               [&](int64_t ts, uint32_t i) { return ts < t.events[i].ts_ns; });
    while (it != on_lane.begin()) {
      const Event& ann = t.events[*--it];
      if (ann.ts_ns + ann.dur_ns < launch.ts_ns + launch.dur_ns) continue;
      const CollectiveArgs& from = t.collectives[ann.collective];
      c.in_nelems = from.in_nelems;
      if (c.dtype == kEmptyStr) c.dtype = from.dtype;
      break;
    }
  }
  for (Event& e : t.events) {
    if (!is_gpu_lane_kind(e.kind)) e.collective = kNoIndex;
  }
  compact(t, std::vector<uint8_t>(t.events.size(), 1));  // drops the annotations' args
}

int64_t elements_of_input_dims(std::string_view dims) {
  int depth = 0, tensors = 0;
  int64_t total = 0, product = 1, number = -1;
  for (char ch : dims) {
    if (ch == '[') {
      if (++depth > 2) return kNone;
      if (depth == 2) product = 1, number = -1;
    } else if (ch == ']' || ch == ',') {
      if (number >= 0 && (depth != 2 || __builtin_mul_overflow(product, number, &product))) return kNone;
      number = -1;
      if (ch == ']' && depth-- == 2) {
        if (__builtin_add_overflow(total, product, &total)) return kNone;
        ++tensors;
      }
    } else if (ch >= '0' && ch <= '9') {
      if (number < 0) number = 0;
      if (__builtin_mul_overflow(number, int64_t{10}, &number) || __builtin_add_overflow(number, ch - '0', &number))
        return kNone;
    } else if (ch != ' ' && ch != '\n' && ch != '\t' && ch != '\r') {
      return kNone;  // a negative or symbolic dimension
    }
  }
  return depth == 0 && tensors > 0 ? total : kNone;
}

std::string_view first_string_of(std::string_view list) {
  for (size_t open = list.find('"'); open != std::string_view::npos; open = list.find('"', open + 1)) {
    const size_t close = list.find('"', open + 1);
    if (close == std::string_view::npos) return {};
    if (close > open + 1) return list.substr(open + 1, close - open - 1);
    open = close;
  }
  return {};
}

void advise_huge_pages(const void* p, size_t bytes) {
#if EMO_TRACE_MAP_BUFFERS
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) / kHuge * kHuge;
  const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) / kHuge * kHuge;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace emo::trace::detail
