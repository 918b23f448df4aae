// Table clean-up shared by the reader and select_step: dropping events (and
// the lanes and collectives left without events), re-basing times to the
// earliest event, the canonical event order, and the ProfilerStep list.
#include <algorithm>
#include <limits>
#include <tuple>
#include <unordered_set>

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
