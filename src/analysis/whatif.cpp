// What-if: scale the durations of selected nodes and replay.
// `flash_fwd.*=1.5` slows every kernel whose name matches the regex by 1.5x;
// `stream:20=0.5` halves the ops on stream 20; `cat:cpu_op=0` removes CPU op
// self time; `cat:host=0.5` halves every CPU node's own time (waits aside). A
// matched collective kernel scales its transfer, not its wait.
#include <charconv>
#include <cmath>
#include <optional>
#include <regex>
#include <unordered_map>

#include "emo/analysis/analysis.h"
#include "emo/analysis/deprofile.h"
#include "emo/dist/dist.h"
#include "emo/replay/distributed.h"
#include "internal.h"

namespace emo::analysis {

using graph::NodeId;
using graph::NodeKind;

Result<Scale> parse_scale(const std::string& text) {
  auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return make_error("--scale " + text, "expected SELECTOR=FACTOR",
                      "e.g. --scale 'gemm=1.2', --scale stream:7=0.5, --scale cat:cpu_op=2");
  }
  Scale s;
  s.selector = text.substr(0, eq);
  std::string f = text.substr(eq + 1);
  char* end = nullptr;
  s.factor = std::strtod(f.c_str(), &end);
  if (end == f.c_str() || *end != '\0' || !std::isfinite(s.factor) || s.factor < 0) {
    return make_error("--scale " + text, "factor '" + f + "' is not a number >= 0");
  }
  // Durations are whole nanoseconds; a larger factor could take a step past what they hold.
  if (s.factor > kMaxScaleFactor) {
    return make_error("--scale " + text, "factor '" + f + "' is over " + std::to_string(int64_t(kMaxScaleFactor)));
  }
  return s;
}

namespace {

// Which nodes of `g` (the graph of `ranks`) a scale selects; an Error for a selector that is malformed.
Result<std::vector<char>> select_nodes(const graph::Graph& g, const std::vector<trace::RankTrace>& ranks, const Scale& s) {
  {
    std::vector<char> hit(g.num_nodes(), 0);
    if (s.selector.rfind("stream:", 0) == 0) {
      int stream = 0;
      const char* b = s.selector.data() + 7;
      const char* e = s.selector.data() + s.selector.size();
      auto [p, ec] = std::from_chars(b, e, stream);
      if (ec != std::errc() || p != e) {
        return make_error("--scale " + s.selector, "expected stream:N with N a stream id");
      }
      for (NodeId n = 0; n < g.num_nodes(); ++n) {
        hit[n] = g.lane[n] != graph::kNoId && g.lanes[g.lane[n]].gpu && g.lanes[g.lane[n]].stream == stream;
      }
    } else if (s.selector.rfind("cat:", 0) == 0) {
      std::string cat = s.selector.substr(4);
      if (cat == "host") {  // every CPU node's own time, as deprofile scales it (waits aside)
        for (NodeId n = 0; n < g.num_nodes(); ++n) hit[n] = is_host_time(g, n);
      } else {
        for (NodeId n = 0; n < g.num_nodes(); ++n) {
          if (g.kind[n] != NodeKind::kCollective) hit[n] = node_category(g, ranks, n) == cat;
        }
      }
    } else {
      std::regex re;
      try {
        re = std::regex(s.selector, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error& e) {
        return make_error("--scale " + s.selector, std::string("not a valid regex: ") + e.what());
      }
      std::unordered_map<StrId, bool> cache;
      for (NodeId n = 0; n < g.num_nodes(); ++n) {
        if (!graph::is_gpu(g.kind[n])) continue;
        auto it = cache.find(g.name[n]);
        if (it == cache.end()) {
          std::string name(g.strings.view(g.name[n]));
          it = cache.emplace(g.name[n], std::regex_search(name, re)).first;
        }
        hit[n] = it->second;
      }
    }
    return hit;
  }
}

Error matches_nothing(const Scale& s) {
  return make_error("--scale " + s.selector, "matches no node of the step",
                    "kernel names are matched as a regex; see `emo analyze --kernels-csv` for names");
}

// A collective kernel's transfer lives on its logical collective node: per node of `g`, that node (kNoId: none
// here, or the node is no collective kernel).
std::vector<NodeId> collectives_of(const graph::Graph& g) {
  std::vector<NodeId> collective_of(g.num_nodes(), graph::kNoId);
  for (const auto& e : g.edges) {
    if (e.kind == graph::EdgeKind::kCollective && !graph::is_end(e.src)) {
      collective_of[graph::node_of(e.src)] = graph::node_of(e.dst);
    }
  }
  return collective_of;
}

// The scales' matches of every process, then the collectives' scales that go to another process's node
// (the whole graph's id and the scale's index).
constexpr int kTagMatched = 17, kTagRemoteScales = 18;

}  // namespace

Result<WhatIf> what_if(const Workload& w, const std::vector<Scale>& scales, const TopologyQuestion* topology) {
  const graph::Graph& g = w.graph;
  std::vector<int64_t> dur;
  WhatIf out;
  if (topology) {
    auto t = topology_durations(w, topology->asked, topology->recorded ? &*topology->recorded : nullptr);
    if (!t) return t.error();
    dur = std::move(t->dur_ns);
    out.topology = std::move(t->report);
  } else {
    dur = g.dur_ns;
  }
  const std::vector<NodeId> collective_of = collectives_of(g);
  std::vector<double> factor(g.num_nodes(), 1.0);
  for (const Scale& s : scales) {
    auto hit = select_nodes(g, w.ranks, s);
    if (!hit) return hit.error();
    int64_t matched = 0;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      if (!(*hit)[n]) continue;
      ++matched;
      NodeId target = collective_of[n] != graph::kNoId ? collective_of[n] : n;
      factor[target] = s.factor;  // the last matching --scale wins
    }
    if (matched == 0) return matches_nothing(s);
    out.matched.push_back(matched);
  }
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (factor[n] != 1.0) dur[n] = std::llround(static_cast<double>(dur[n]) * factor[n]);
  }
  replay::Replayer rp(g);
  replay::Timeline base, pred;
  rp.run(base);
  rp.run(dur, pred);
  out.baseline_span_ns = base.makespan_ns();
  out.predicted_span_ns = pred.makespan_ns();
  return out;
}

}  // namespace emo::analysis

namespace emo::analysis {

Result<WhatIf> what_if_part(const WorkloadPart& w, const std::vector<Scale>& scales, dist::Comm& comm,
                            const TopologyQuestion* topology) {
  const graph::GraphPart& part = w.part;
  const graph::Graph& g = part.graph;
  // The collectives' transfers on the topology first (its errors come before the scales'), as in one process.
  WhatIf out;
  std::vector<int64_t> dur;
  if (topology) {
    auto t = detail::topology_durations_part(w, topology->asked, topology->recorded ? &*topology->recorded : nullptr, comm);
    if (!t) return t.error();
    dur = std::move(t->dur_ns);
    out.topology = std::move(t->report);
  } else {
    dur = g.dur_ns;
  }
  // Each node's last scale (its index; -1: none), a collective kernel's on its collective, here or elsewhere.
  const std::vector<NodeId> collective_of = collectives_of(g);
  std::unordered_map<NodeId, NodeId> remote_collective;
  for (const graph::RemoteEdge& e : part.remote) {
    if (e.kind == graph::EdgeKind::kCollective && !e.into_local && !graph::is_end(e.local)) {
      remote_collective[graph::node_of(e.local)] = graph::node_of(e.other);
    }
  }
  // The scales in order, up to the first malformed selector (the same on every process); then the first
  // of them that matches nothing anywhere is the error, else the malformed one, as in one process.
  std::vector<int64_t> last(g.num_nodes(), -1), matched, sent;
  std::optional<Error> malformed;
  for (size_t k = 0; k < scales.size(); ++k) {
    auto hit = select_nodes(g, w.ranks, scales[k]);
    if (!hit) {
      malformed = hit.error();
      break;
    }
    matched.push_back(0);
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      if (!(*hit)[n]) continue;
      ++matched[k];
      if (auto it = remote_collective.find(n); it != remote_collective.end()) {
        sent.insert(sent.end(), {int64_t(it->second), int64_t(k)});
      } else {
        last[collective_of[n] != graph::kNoId ? collective_of[n] : n] = int64_t(k);
      }
    }
  }
  auto sums = dist::all_combine(comm, kTagMatched, matched, [](const std::vector<std::vector<int64_t>>& parts) {
    std::vector<int64_t> total(parts.empty() ? 0 : parts[0].size(), 0);
    for (const auto& p : parts) {
      for (size_t k = 0; k < total.size() && k < p.size(); ++k) total[k] += p[k];
    }
    return total;
  });
  if (!sums) return sums.error();
  if (sums->size() != matched.size()) return make_error("", "the scales' matches arrived cut short");
  for (size_t k = 0; k < sums->size(); ++k) {
    if ((*sums)[k] == 0) return matches_nothing(scales[k]);
  }
  if (malformed) return *malformed;
  out.matched = *sums;
  auto all = dist::all_gather(comm, kTagRemoteScales, dist::to_bytes(sent));
  if (!all) return all.error();
  std::unordered_map<NodeId, NodeId> local_of;
  for (NodeId n = 0; n < part.global.size(); ++n) local_of.emplace(part.global[n], n);
  for (size_t q = 0; q < all->size(); ++q) {
    auto v = dist::from_bytes((*all)[q], int(q));
    if (!v) return v.error();
    for (size_t i = 0; i + 1 < v->size(); i += 2) {
      auto it = local_of.find(NodeId((*v)[i]));
      if (it != local_of.end()) last[it->second] = std::max(last[it->second], (*v)[i + 1]);
    }
  }
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (last[n] >= 0 && scales[size_t(last[n])].factor != 1.0) {
      dur[n] = std::llround(static_cast<double>(dur[n]) * scales[size_t(last[n])].factor);
    }
  }
  const replay::Shard shard = replay::make_shard(part);
  replay::ShardTimeline base, pred;
  EMO_RETURN_IF_ERROR(replay::run_distributed(shard, {}, comm, base));
  EMO_RETURN_IF_ERROR(replay::run_distributed(shard, dur, comm, pred));
  out.baseline_span_ns = base.makespan_ns();
  out.predicted_span_ns = pred.makespan_ns();
  return out;
}

}  // namespace emo::analysis
