// Writing a RankTrace's events back as Kineto JSON (the modern layout the reader reads): what the
// emulated GPU "records" and what `emo deprofile` writes share it.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>
#include <string_view>

#include "emo/trace/trace.h"

namespace emo::trace {

// A monotone piecewise-linear map of one lane's time, from anchors (from, to): sorted, each `to` raised
// to the running maximum so the map never goes back; before the first and after the last anchor it
// shifts by that anchor's offset.
struct TimeWarp {
  std::vector<std::pair<int64_t, int64_t>> a;  // (from, to)
  void finish() {
    std::sort(a.begin(), a.end());
    int64_t run = std::numeric_limits<int64_t>::min();
    for (auto& p : a) p.second = run = std::max(run, p.second);
  }
  int64_t operator()(int64_t x) const {
    if (a.empty()) return x;
    auto it = std::upper_bound(a.begin(), a.end(), std::make_pair(x, std::numeric_limits<int64_t>::max()));
    if (it == a.begin()) return x + (a.front().second - a.front().first);
    const auto& lo = *(it - 1);
    if (it == a.end()) return x + (lo.second - lo.first);
    const auto& hi = *it;
    if (hi.first == lo.first) return lo.second;
    const double frac = double(x - lo.first) / double(hi.first - lo.first);
    return lo.second + int64_t(std::llround(frac * double(hi.second - lo.second)));
  }
};

// `s` as the inside of a JSON string.
void append_json_escaped(fmt::memory_buffer& b, std::string_view s);

// Kineto's category of an event kind ("cpu_op", "cuda_runtime", "kernel", ...).
const char* kineto_category(EventKind k);

// Added to ids so that several copies of a step in one file stay distinct (0: as read).
struct IdOffsets {
  int64_t correlation = 0;
  int64_t external_id = 0;
  int64_t seq = 0;
};

// Event `i` of `t` as one complete event ("ph": "X") at [ts_ns, te_ns) (written in µs with 3
// decimals, as Kineto does), named `name`: its category, thread or stream, and the args the reader
// reads (correlation, External id, device and stream, the cuda_sync fields, the collective's metadata).
void append_kineto_event(fmt::memory_buffer& b, const RankTrace& t, size_t i, int64_t ts_ns, int64_t te_ns,
                         std::string_view name, const IdOffsets& off = {});

}  // namespace emo::trace
