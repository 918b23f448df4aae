// Collectives matched across ranks (include/emo/graph/collectives.h).
#include "emo/graph/collectives.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

namespace emo::graph {

namespace {

// The kernels matched as one collective must be one: no more ranks than the group size they declare,
// one kind of collective (a send matches a recv). Kernels of ranks from different jobs, or of process
// groups named alike, fail this.
void check_members_agree(const std::vector<CommRecord>& records, const std::vector<int>& rank_ids,
                         const std::string& pg, const std::string& coll, int64_t k, const std::vector<uint32_t>& m,
                         CollectiveMatch& out) {
  auto kind_of = [&](uint32_t i) {
    std::string_view c = records[i].collective;
    return c == "send" || c == "recv" ? std::string_view("send/recv") : c;
  };
  const auto id_of = [&](uint32_t i) {
    const uint32_t r = records[i].rank;
    return r < rank_ids.size() ? rank_ids[r] : int(r);
  };
  int32_t declared = -1;
  std::string_view kind;
  uint32_t kind_rec = 0, other_kind = std::numeric_limits<uint32_t>::max();
  for (uint32_t i : m) {
    const int32_t size = records[i].group_size;
    if (size > 0) declared = declared < 0 ? size : std::min(declared, size);
    const std::string_view c = kind_of(i);
    if (c.empty()) continue;
    if (kind.empty()) {
      kind = c;
      kind_rec = i;
    } else if (c != kind && other_kind == std::numeric_limits<uint32_t>::max()) {
      other_kind = i;
    }
  }
  const bool too_many = declared > 0 && static_cast<int64_t>(m.size()) > declared;
  if (!too_many && other_kind == std::numeric_limits<uint32_t>::max()) return;
  ++out.inconsistent;
  if (!out.inconsistent_example.empty()) return;
  std::string which = coll == "#seq" ? fmt::format("process group '{}' seq {}", pg, k)
                                     : fmt::format("process group '{}' {} #{}", pg, coll, k);
  if (too_many) {
    out.inconsistent_example = fmt::format("{}: kernels of {} ranks, group size {}", which, m.size(), declared);
  } else {
    out.inconsistent_example = fmt::format("{}: {} on rank {}, {} on rank {}", which, kind, id_of(kind_rec),
                                           kind_of(other_kind), id_of(other_kind));
  }
}

}  // namespace

CollectiveMatch match_collectives(const std::vector<CommRecord>& records, size_t ranks,
                                  const std::vector<int>& rank_ids) {
  CollectiveMatch out;
  out.offsets.assign(ranks, 0);
  out.aligned.assign(ranks, 0);
  if (ranks < 2) {
    out.unmatched = static_cast<int64_t>(records.size());
    return out;
  }
  // Key: (process group, seq) when seq is known, else (process group, collective, k-th occurrence).
  std::map<std::tuple<std::string, std::string, int64_t>, std::vector<uint32_t>> groups;
  std::map<std::tuple<uint32_t, std::string, std::string>, int64_t> occurrence;
  for (uint32_t i = 0; i < records.size(); ++i) {
    const CommRecord& c = records[i];
    if (!c.matchable) {
      ++out.unmatched;
      continue;
    }
    if (c.seq != -1) {
      groups[{c.process_group, "#seq", c.seq}].push_back(i);
    } else {
      const int64_t k = occurrence[{c.rank, c.process_group, c.collective}]++;
      groups[{c.process_group, c.collective, k}].push_back(i);
    }
  }
  // Clock offsets: matched collectives end together on every rank.
  std::vector<std::vector<int64_t>> diffs(ranks);
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    const CommRecord* ref = nullptr;
    for (uint32_t i : members) {
      if (records[i].rank == 0) ref = &records[i];
    }
    if (!ref) continue;
    for (uint32_t i : members) {
      if (&records[i] != ref && records[i].rank < ranks) diffs[records[i].rank].push_back(records[i].end_ns - ref->end_ns);
    }
  }
  for (uint32_t r = 1; r < ranks; ++r) {
    if (diffs[r].empty()) continue;
    auto mid = diffs[r].begin() + static_cast<std::ptrdiff_t>(diffs[r].size() / 2);
    std::nth_element(diffs[r].begin(), mid, diffs[r].end());
    out.offsets[r] = *mid;
    out.aligned[r] = 1;
  }
  out.aligned[0] = 1;
  for (const auto& [key, members] : groups) {
    std::vector<uint32_t> m;
    std::vector<bool> seen(ranks, false);
    for (uint32_t i : members) {
      const uint32_t r = records[i].rank;
      if (r < ranks && !seen[r]) m.push_back(i);
      if (r < ranks) seen[r] = true;
    }
    if (m.size() < 2) {
      out.unmatched += static_cast<int64_t>(m.size());
      continue;
    }
    check_members_agree(records, rank_ids, std::get<0>(key), std::get<1>(key), std::get<2>(key), m, out);
    int64_t last_arrival = std::numeric_limits<int64_t>::min(), first_end = std::numeric_limits<int64_t>::max();
    for (uint32_t i : m) {
      const int64_t offset = out.offsets[records[i].rank];
      last_arrival = std::max(last_arrival, records[i].start_ns - offset);
      first_end = std::min(first_end, records[i].end_ns - offset);
    }
    if (first_end < last_arrival) {  // ranks' clocks disagree beyond repair
      out.unmatched += static_cast<int64_t>(m.size());
      continue;
    }
    out.collectives.push_back({std::move(m), last_arrival, first_end});
  }
  return out;
}

}  // namespace emo::graph
