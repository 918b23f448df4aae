// What-if: scale the durations of selected nodes and replay.
// `flash_fwd.*=1.5` slows every kernel whose name matches the regex by 1.5x;
// `stream:20=0.5` halves the ops on stream 20; `cat:cpu_op=0` removes CPU op
// self time; `cat:host=0.5` halves every CPU node's own time (waits aside). A
// matched collective kernel scales its transfer, not its wait.
#include <charconv>
#include <cmath>
#include <regex>
#include <unordered_map>

#include "emo/analysis/analysis.h"
#include "emo/analysis/deprofile.h"

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
  // A collective kernel's transfer lives on its logical collective node.
  std::vector<NodeId> collective_of(g.num_nodes(), graph::kNoId);
  for (const auto& e : g.edges) {
    if (e.kind == graph::EdgeKind::kCollective && !graph::is_end(e.src)) {
      collective_of[graph::node_of(e.src)] = graph::node_of(e.dst);
    }
  }
  std::vector<double> factor(g.num_nodes(), 1.0);
  for (const Scale& s : scales) {
    int64_t matched = 0;
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
        for (NodeId n = 0; n < g.num_nodes(); ++n) hit[n] = is_host_time(w, n);
      } else {
        for (NodeId n = 0; n < g.num_nodes(); ++n) {
          if (g.kind[n] != NodeKind::kCollective) hit[n] = node_category(w, n) == cat;
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
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      if (!hit[n]) continue;
      ++matched;
      NodeId target = collective_of[n] != graph::kNoId ? collective_of[n] : n;
      factor[target] = s.factor;  // the last matching --scale wins
    }
    if (matched == 0) {
      return make_error("--scale " + s.selector, "matches no node of the step",
                        "kernel names are matched as a regex; see `emo analyze --kernels-csv` for names");
    }
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
