// What `emo analyze` reports of a step (its JSON, its text, its doubts), from the facts of one piece of the
// step: the whole step in one process, or each process's part under MPI (report_part), whose facts are
// gathered at process 0 and joined there. Every figure is a sum, a count, an extreme or a list in the
// ranks' order, so the joined facts are the whole step's and the reports the same bytes.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "emo/analysis/analysis.h"
#include "emo/base/stats.h"
#include "emo/trace/runtime_calls.h"
#include "internal.h"

namespace emo::trace {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ImportStat, what, count, example, is_error)
}  // namespace emo::trace

namespace emo::analysis {

using graph::NodeId;
using graph::NodeKind;
using detail::Intervals;
using detail::merged_intervals;

namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::min();

// The step as one process holds it: its ranks, their part of the graph, where they sit in the whole step.
struct Piece {
  const graph::Graph& g;
  const std::vector<trace::RankTrace>& ranks;
  const std::vector<int64_t>& steps;
  size_t total_ranks = 0;
  bool queued_loop = false;                     // whether any piece has queued ops
  int64_t remote_in_edges = 0;                  // edges into this piece from another's points
  const std::vector<NodeId>* global = nullptr;  // per node of g, its id in the whole graph (null: the same)
  std::unordered_map<NodeId, NodeId> local_of;  // whole graph's id -> g's, where `global` is set

  Piece(const graph::Graph& graph, const std::vector<trace::RankTrace>& r, const std::vector<int64_t>& s)
      : g(graph), ranks(r), steps(s), total_ranks(r.size()), queued_loop(!graph.queued_ops.empty()) {}
  void set_global(const std::vector<NodeId>& ids) {
    global = &ids;
    local_of.reserve(ids.size());
    for (NodeId n = 0; n < ids.size(); ++n) local_of.emplace(ids[n], n);
  }
  NodeId id(NodeId n) const { return global ? (*global)[n] : n; }
  // This piece's node of the whole graph's node `n`, if it holds it.
  std::optional<NodeId> local(NodeId n) const {
    if (!global) return n < g.num_nodes() ? std::optional<NodeId>(n) : std::nullopt;
    auto it = local_of.find(n);
    return it == local_of.end() ? std::nullopt : std::optional<NodeId>(it->second);
  }
  bool many_ranks() const { return total_ranks > 1; }
  std::string rank_words(uint32_t r) const {
    return many_ranks() ? fmt::format("rank {} ", g.rank_id(graph::RankIndex(r))) : std::string();
  }
};

// A doubt's figures over a piece: sums, the largest rank's sum, and the example of the largest (the first
// in the step's order among equals; `largest` kNone where there is none).
struct Doubt {
  std::array<int64_t, 3> sum{};
  int64_t rank_max = 0;
  int64_t largest = kNone;
  std::string example;
  void join(const Doubt& o) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += o.sum[i];
    rank_max = std::max(rank_max, o.rank_max);
    if (o.largest > largest) largest = o.largest, example = o.example;
  }
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Doubt, sum, rank_max, largest, example)

struct RankFacts {
  int64_t id = 0;
  std::string file, device;
  int64_t step = -1, events = 0, offset_ns = 0, origin_ns = 0, world_size = 0;
  std::vector<trace::ImportStat> rows;
  int64_t errors = 0, outside = 0;
  std::string outside_example;
  std::string slowed;  // the profiler's slowdown of this rank's step past the doubt, said; empty: none
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankFacts, id, file, device, step, events, offset_ns, origin_ns, world_size, rows,
                                   errors, outside, outside_example, slowed)

// A GPU op or collective on the critical path.
struct PathOp {
  NodeId id = 0;
  std::string name;
  int kind = 0;
  int64_t rank = 0, start_ns = 0, dur_ns = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PathOp, id, name, kind, rank, start_ns, dur_ns)

// A node of the critical path's segments (its CSV).
struct PathNode {
  NodeId id = 0;
  std::string name;
  int kind = 0;
  int64_t rank = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PathNode, id, name, kind, rank)

struct KernelFacts {
  std::string name;
  int64_t rank = 0, stream = 0, start_ns = 0, dur_ns = 0, slack_ns = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KernelFacts, name, rank, stream, start_ns, dur_ns, slack_ns)

struct Facts {
  int64_t events = 0, nodes = 0, edges = 0;
  std::vector<RankFacts> ranks;
  int64_t begin_ns = std::numeric_limits<int64_t>::max(), end_ns = kNone;  // measured, of the nodes in the span
  std::vector<PathOp> path_ops;
  int64_t gpu_ops = 0, no_slack = 0;
  std::array<int64_t, 6> buckets{};  // slack: 0, <10µs, <100µs, <1ms, <10ms, more
  std::vector<KernelFacts> kernels;
  std::vector<PathNode> path_nodes;
  Doubt lost, unrecorded, late, one_time, earlier;

  void join(Facts&& o) {
    events += o.events;
    nodes += o.nodes;
    edges += o.edges;
    for (auto& r : o.ranks) ranks.push_back(std::move(r));
    begin_ns = std::min(begin_ns, o.begin_ns);
    end_ns = std::max(end_ns, o.end_ns);
    for (auto& p : o.path_ops) path_ops.push_back(std::move(p));
    gpu_ops += o.gpu_ops;
    no_slack += o.no_slack;
    for (size_t i = 0; i < buckets.size(); ++i) buckets[i] += o.buckets[i];
    for (auto& k : o.kernels) kernels.push_back(std::move(k));
    for (auto& n : o.path_nodes) path_nodes.push_back(std::move(n));
    lost.join(o.lost);
    unrecorded.join(o.unrecorded);
    late.join(o.late);
    one_time.join(o.one_time);
    earlier.join(o.earlier);
  }
  int64_t begin() const { return end_ns == kNone ? 0 : begin_ns; }
  int64_t end() const { return end_ns == kNone ? 0 : end_ns; }
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Facts, events, nodes, edges, ranks, begin_ns, end_ns, path_ops, gpu_ops, no_slack,
                                   buckets, kernels, path_nodes, lost, unrecorded, late, one_time, earlier)

// ---- the doubts over a piece (docs/replay.md, "When emo doubts a step") ----

Doubt lost_launches(const Piece& p) {
  Doubt out;  // sum: launches, lost
  for (const trace::RankTrace& t : p.ranks) {
    std::set<int64_t> done;
    for (const trace::Event& e : t.events)
      if (trace::is_gpu_op(e.kind) && e.correlation != trace::kNone) done.insert(e.correlation);
    for (const trace::Event& e : t.events) {
      if ((e.kind != trace::EventKind::kRuntime && e.kind != trace::EventKind::kDriver) || e.correlation == trace::kNone)
        continue;
      const trace::RuntimeCall call = trace::classify_runtime_call(t.strings.view(e.name));
      if (!trace::launches_gpu_work(call) || call == trace::RuntimeCall::kMemset) continue;
      ++out.sum[0];
      if (done.count(e.correlation) != 0) continue;
      if (out.sum[1]++ == 0) {
        out.largest = 0;  // the first one
        out.example = fmt::format("{} (correlation {})", t.strings.view(e.name), e.correlation);
      }
    }
  }
  return out;
}

Doubt unrecorded_waits(const Piece& p) {
  Doubt out;  // sum: calls, wait
  const graph::Graph& g = p.g;
  std::vector<int64_t> per_rank(g.rank_paths.size(), 0);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    // The builder makes a blocking call that waited for GPU ops a kSyncCall and leaves it its time after
    // the last of them ended (its whole time where they had all ended before it began). A call whose ops
    // the trace shows ending after it returned (clocks apart) waited for none of them: not counted.
    if (g.kind[n] != NodeKind::kSyncCall) continue;
    const trace::RuntimeCall call = trace::classify_runtime_call(g.strings.view(g.name[n]));
    if (call != trace::RuntimeCall::kDeviceSync && call != trace::RuntimeCall::kStreamSync &&
        call != trace::RuntimeCall::kEventSync)
      continue;
    const int64_t own = g.dur_ns[n];
    if (own < kUnrecordedWaitMinNs) continue;
    ++out.sum[0];
    out.sum[1] += own;
    const uint32_t r = g.rank[n];
    if (r < per_rank.size()) per_rank[r] += own;
    if (own > out.largest) {
      out.largest = own;
      const uint32_t lane = g.lane[n];
      out.example = fmt::format("{} on {}thread {}, {:.3f} ms of its {:.3f} ms after the last GPU op it could wait for ended",
                                g.strings.view(g.name[n]), p.rank_words(r), lane < g.lanes.size() ? g.lanes[lane].tid : 0,
                                double(own) / 1e6, double(g.meas_end_ns[n] - g.meas_start_ns[n]) / 1e6);
    }
  }
  for (int64_t v : per_rank) out.rank_max = std::max(out.rank_max, v);
  return out;
}

Doubt late_gpu_starts(const Piece& p, const Analysis& a) {
  Doubt out;  // sum: ops, wait
  const graph::Graph& g = p.g;
  // Each GPU's ops in the step as measured, merged into busy intervals; built for the GPUs a long launch
  // segment of the path lands on.
  std::map<std::pair<uint32_t, int32_t>, Intervals> busy;
  auto busy_of = [&](uint32_t rank, int32_t device) -> const Intervals& {
    auto [it, fresh] = busy.try_emplace({rank, device});
    if (!fresh) return it->second;
    Intervals iv;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      if (!graph::is_gpu(g.kind[n])) continue;
      const graph::Lane& l = g.lanes[g.lane[n]];
      if (l.rank == rank && l.device == device) iv.emplace_back(g.meas_start_ns[n], g.meas_end_ns[n]);
    }
    it->second = merged_intervals(std::move(iv));
    return it->second;
  };
  for (const replay::CriticalPath::Segment& s : a.critical_path.segments) {
    if (!s.is_edge || s.edge != graph::EdgeKind::kLaunch || s.ns < kUnrecordedWaitMinNs) continue;
    const std::optional<NodeId> node = p.local(s.node);  // the op; its launch call is of its rank
    if (!node || !graph::is_gpu(g.kind[*node])) continue;
    // Queued behind an earlier step's work (Graph::queued_ops): the step is taken as the loop's period.
    if (std::find(g.queued_ops.begin(), g.queued_ops.end(), *node) != g.queued_ops.end()) continue;
    const graph::Lane& lane = g.lanes[g.lane[*node]];
    // The window the op waited in, as measured: from the launch call's return (the call's own time is the
    // host's: a slow first launch, one_time_calls) to the op's start.
    const int64_t end = g.meas_start_ns[*node];
    int64_t begin = end - s.ns;
    const std::optional<NodeId> from = p.local(s.from);
    if (from) begin = std::max(begin, std::min(end, g.meas_end_ns[*from]));
    int64_t idle = end - begin;
    for (const auto& [b, e] : busy_of(lane.rank, lane.device)) {
      if (b >= end) break;
      if (e > begin) idle -= std::min(e, end) - std::max(b, begin);
    }
    if (idle < kUnrecordedWaitMinNs) continue;
    ++out.sum[0];
    out.sum[1] += idle;
    if (idle > out.largest) {
      out.largest = idle;
      out.example = fmt::format("{} launched by {} on {}stream {}, {:.3f} ms after its launch, its GPU idle in the step for "
                                "{:.3f} ms of it",
                                g.strings.view(g.name[*node]), from ? g.strings.view(g.name[*from]) : "its call",
                                p.rank_words(lane.rank), lane.stream, double(s.ns) / 1e6, double(idle) / 1e6);
    }
  }
  return out;
}

Doubt one_time_calls(const Piece& p) {
  Doubt out;  // sum: calls, time
  const graph::Graph& g = p.g;
  const size_t ranks = g.rank_paths.size();
  // Each rank's GPU ops in the step as measured (every device of the rank), merged into busy intervals.
  std::vector<Intervals> busy(ranks);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (graph::is_gpu(g.kind[n]) && g.rank[n] < ranks) busy[g.rank[n]].emplace_back(g.meas_start_ns[n], g.meas_end_ns[n]);
  }
  for (Intervals& iv : busy) iv = merged_intervals(std::move(iv));
  std::vector<int64_t> per_rank(ranks, 0);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.kind[n] != NodeKind::kRuntime || g.rank[n] >= ranks) continue;
    const int64_t b = g.meas_start_ns[n], e = g.meas_end_ns[n];
    if (e - b < kOneTimeCallMinNs) continue;
    switch (trace::classify_runtime_call(g.strings.view(g.name[n]))) {
      case trace::RuntimeCall::kMemcpy:
      case trace::RuntimeCall::kDeviceSync:
      case trace::RuntimeCall::kStreamSync:
      case trace::RuntimeCall::kEventSync: continue;  // they wait on the GPU by design
      default: break;
    }
    const auto& iv = busy[g.rank[n]];
    int64_t idle = e - b;
    // Merged intervals: their ends are in order too. From the first that ends after b.
    auto it = std::lower_bound(iv.begin(), iv.end(), b, [](const std::pair<int64_t, int64_t>& x, int64_t v) { return x.second <= v; });
    for (; it != iv.end() && it->first < e; ++it) idle -= std::min(it->second, e) - std::max(it->first, b);
    if (idle < kOneTimeCallMinNs) continue;
    ++out.sum[0];
    out.sum[1] += idle;
    per_rank[g.rank[n]] += idle;
    if (idle > out.largest) {
      out.largest = idle;
      // The operator the call ran in: the innermost CPU op of its thread that holds it.
      std::string inside;
      const trace::RankTrace& t = p.ranks[g.rank[n]];
      if (g.event[n] < t.events.size()) {
        const trace::Event& ce = t.events[g.event[n]];
        int64_t best = std::numeric_limits<int64_t>::max();
        for (const trace::Event& pe : t.events) {
          if (pe.ts_ns > ce.ts_ns) break;
          if (pe.lane != ce.lane || pe.kind != trace::EventKind::kCpuOp || pe.ts_ns + pe.dur_ns < ce.ts_ns + ce.dur_ns ||
              pe.dur_ns >= best)
            continue;
          best = pe.dur_ns;
          inside = fmt::format(" inside {}", t.name_of(pe));
        }
      }
      const uint32_t lane = g.lane[n];
      out.example = fmt::format("{}{} on {}thread {}, {:.3f} ms", g.strings.view(g.name[n]), inside,
                                p.rank_words(g.rank[n]), lane < g.lanes.size() ? g.lanes[lane].tid : 0,
                                double(e - b) / 1e6);
    }
  }
  for (int64_t v : per_rank) out.rank_max = std::max(out.rank_max, v);
  return out;
}

Doubt earlier_launches(const Piece& p) {
  Doubt out;  // sum: ops, their time, every GPU op's time
  const graph::Graph& g = p.g;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    const int64_t dur = g.meas_end_ns[n] - g.meas_start_ns[n];
    out.sum[2] += dur;
    const graph::PointId pt = graph::start_point(n);
    bool launched = false;
    for (uint32_t k = g.in_offsets[pt]; k < g.in_offsets[pt + 1] && !launched; ++k) {
      launched = g.edges[g.in_edges[k]].kind == graph::EdgeKind::kLaunch;
    }
    // An op without a correlation id cannot be traced to any call: not counted as launched before.
    if (launched || g.rank[n] >= p.ranks.size()) continue;
    const trace::RankTrace& t = p.ranks[g.rank[n]];
    if (g.event[n] >= t.events.size() || t.events[g.event[n]].correlation == trace::kNone) continue;
    ++out.sum[0];
    out.sum[1] += dur;
    if (dur > out.largest) {
      out.largest = dur;
      const graph::Lane& lane = g.lanes[g.lane[n]];
      out.example = fmt::format("{} on {}stream {}, {:.3f} ms", g.strings.view(g.name[n]), p.rank_words(lane.rank),
                                lane.stream, double(dur) / 1e6);
    }
  }
  return out;
}

// The profiler's own cost on one rank: its step under the profiler against the job's steps without it
// (emo.torch.capture times a few before it records), said where past kProfilerSlowdownDoubtPct.
std::string profiler_slowdown(const trace::RankTrace& t, int64_t step) {
  if (t.untraced_step_ns.empty() || step < 0) return {};
  const auto st = std::find_if(t.steps.begin(), t.steps.end(), [&](const trace::Step& x) { return x.number == step; });
  if (st == t.steps.end() || st->dur_ns <= 0) return {};
  const double untraced = median(std::vector<double>(t.untraced_step_ns.begin(), t.untraced_step_ns.end()));
  const double pct = 100.0 * (double(st->dur_ns) / untraced - 1.0);
  if (!(pct > kProfilerSlowdownDoubtPct)) return {};
  return fmt::format("{}{:.3f} ms under the profiler, {:.3f} ms without it (the median of {} steps emo.torch.capture "
                     "timed, emo_untraced_step_us): {:+.0f} %",
                     t.path.empty() ? "" : t.path + ": ", double(st->dur_ns) / 1e6, untraced / 1e6,
                     t.untraced_step_ns.size(), pct);
}

// ---- the facts of a piece ----

std::vector<RankFacts> rank_facts(const Piece& p) {
  std::vector<RankFacts> out;
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const trace::RankTrace& t = p.ranks[r];
    RankFacts rf;
    rf.id = p.g.rank_ids[r];
    rf.file = t.path;
    rf.device = t.device_name;
    rf.step = r < p.steps.size() ? p.steps[r] : -1;
    rf.events = static_cast<int64_t>(t.events.size());
    rf.offset_ns = p.g.rank_offset_ns[r];
    rf.origin_ns = t.origin_ns;
    rf.world_size = t.world_size;
    rf.rows = t.stats.rows;
    rf.errors = t.stats.error_count();
    rf.outside = t.stats.outside_profiler_window;
    rf.outside_example = t.stats.outside_profiler_window_example;
    rf.slowed = profiler_slowdown(t, rf.step);
    out.push_back(std::move(rf));
  }
  return out;
}

// The GPU ops and collectives of the critical path that this piece holds, each once.
std::vector<PathOp> path_ops_of(const Piece& p, const Analysis& a) {
  const graph::Graph& g = p.g;
  std::vector<PathOp> out;
  std::set<NodeId> seen;
  for (NodeId id : a.critical_path.nodes) {
    const std::optional<NodeId> n = p.local(id);
    if (!n || !(graph::is_gpu(g.kind[*n]) || g.kind[*n] == NodeKind::kCollective) || !seen.insert(id).second) continue;
    out.push_back({id, std::string(g.strings.view(g.name[*n])), int(g.kind[*n]), g.rank_ids[g.rank[*n]],
                   g.meas_start_ns[*n], g.dur_ns[*n]});
  }
  return out;
}

// What a report reads beyond the step's counts: every kernel (--per-kernel, the kernels' CSV), the doubts
// (the warnings), the nodes of the path's segments (its CSV).
struct Need {
  bool kernels = false;
  bool doubts = false;
  bool path_nodes = false;
};

Facts facts_of(const Piece& p, const Analysis& a, Need need) {
  const graph::Graph& g = p.g;
  Facts f;
  for (const auto& t : p.ranks) f.events += static_cast<int64_t>(t.events.size());
  f.nodes = g.num_nodes();
  f.edges = static_cast<int64_t>(g.edges.size()) + p.remote_in_edges;
  f.ranks = rank_facts(p);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!g.counts_for_span(n)) continue;
    f.begin_ns = std::min(f.begin_ns, g.meas_start_ns[n]);
    f.end_ns = std::max(f.end_ns, g.meas_end_ns[n]);
  }
  f.path_ops = path_ops_of(p, a);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    ++f.gpu_ops;
    const int64_t s = a.slack_ns[n];
    f.no_slack += s == 0;
    ++f.buckets[s == 0 ? 0 : s < 10'000 ? 1 : s < 100'000 ? 2 : s < 1'000'000 ? 3 : s < 10'000'000 ? 4 : 5];
    if (need.kernels) {
      f.kernels.push_back({std::string(g.strings.view(g.name[n])), g.rank_ids[g.rank[n]], g.lanes[g.lane[n]].stream,
                           g.meas_start_ns[n], g.meas_end_ns[n] - g.meas_start_ns[n], s});
    }
  }
  if (need.path_nodes) {
    std::set<NodeId> seen;
    for (const replay::CriticalPath::Segment& seg : a.critical_path.segments) {
      for (NodeId id : {seg.node, seg.from}) {
        const std::optional<NodeId> n = id == graph::kNoId ? std::nullopt : p.local(id);
        if (!n || !seen.insert(id).second) continue;
        f.path_nodes.push_back({id, std::string(g.strings.view(g.name[*n])), int(g.kind[*n]), g.rank_ids[g.rank[*n]]});
      }
    }
  }
  if (need.doubts) {
    f.lost = lost_launches(p);
    f.unrecorded = unrecorded_waits(p);
    f.late = late_gpu_starts(p, a);
    f.one_time = one_time_calls(p);
    f.earlier = earlier_launches(p);
  }
  return f;
}

Piece piece_of(const Workload& w) { return Piece(w.graph, w.ranks, w.steps); }

// ---- the reports, from the facts of the whole step ----

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }
double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

// GPU ops on the path, each once, by id.
std::map<NodeId, const PathOp*> path_ops_by_id(const Facts& f) {
  std::map<NodeId, const PathOp*> by_id;
  for (const PathOp& o : f.path_ops) by_id.emplace(o.id, &o);
  return by_id;
}

int64_t gpu_ops_on_path(const std::vector<PathOp>& ops) {
  int64_t n = 0;
  for (const PathOp& o : ops) n += graph::is_gpu(NodeKind(o.kind));
  return n;
}

nlohmann::json json_of(const Facts& f, const graph::BuildStats& bs, const Analysis& a, bool per_kernel) {
  const int64_t begin = f.begin();
  using nlohmann::json;
  json j;
  j["events"] = f.events;
  j["nodes"] = f.nodes;
  j["edges"] = f.edges;
  json ranks = json::array();
  for (const RankFacts& r : f.ranks) {
    ranks.push_back({{"rank", r.id},
                     {"file", r.file},
                     {"device", r.device},
                     {"step", r.step},
                     {"events", r.events},
                     {"clock_offset_us", round3(us(r.offset_ns))}});
  }
  j["ranks"] = ranks;
  j["measured_span_us"] = round3(us(a.measured_span_ns));
  j["replayed_span_us"] = round3(us(a.replayed_span_ns));
  j["replay_error_pct"] = std::round(a.replay_error_pct * 1e4) / 1e4;
  json breakdown = json::object();
  for (const auto& part : a.critical_path.breakdown) breakdown[part.category] = round3(us(part.ns));
  // GPU ops on the path: all of them for ordinary steps; the longest kMaxPathOps
  // for huge ones (the full path is in --critical-path-csv).
  constexpr size_t kMaxPathOps = 1000;
  const auto by_id = path_ops_by_id(f);
  std::vector<const PathOp*> on_path;
  for (NodeId n : a.critical_path.nodes) {
    if (auto it = by_id.find(n); it != by_id.end()) on_path.push_back(it->second);
  }
  const size_t path_ops = on_path.size();
  if (on_path.size() > kMaxPathOps) {
    std::stable_sort(on_path.begin(), on_path.end(), [](const PathOp* x, const PathOp* y) { return x->dur_ns > y->dur_ns; });
    on_path.resize(kMaxPathOps);
    std::sort(on_path.begin(), on_path.end(), [](const PathOp* x, const PathOp* y) { return x->id < y->id; });
  }
  json path = json::array();
  for (const PathOp* o : on_path) {
    path.push_back({{"name", o->name},
                    {"kind", graph::to_string(NodeKind(o->kind))},
                    {"rank", o->rank},
                    {"start_us", round3(us(o->start_ns - begin))},
                    {"dur_us", round3(us(o->dur_ns))}});
  }
  j["critical_path"] = {{"length_us", round3(us(a.critical_path.length_ns))},
                        {"breakdown", breakdown},
                        {"nodes", a.critical_path.nodes.size()},
                        {"gpu_ops_total", path_ops},
                        {"gpu_ops_on_path", gpu_ops_on_path(f.path_ops)},
                        {"gpu_ops", path}};
  json gpus = json::array();
  for (const auto& u : a.gpus) {
    gpus.push_back({{"rank", u.rank < f.ranks.size() ? f.ranks[u.rank].id : int64_t(u.rank)},
                    {"device", u.device},
                    {"ops", u.ops},
                    {"busy_us", round3(us(u.busy_ns))},
                    {"idle_us", round3(us(u.idle_ns))}});
  }
  j["gpus"] = gpus;
  // gpu_ops_on_critical_path is the historical name of the zero-slack count
  // (kept for readers of older output); gpu_ops_with_no_slack says what it is.
  // The ops on the extracted path are critical_path.gpu_ops_on_path.
  const auto& b = f.buckets;
  j["slack"] = {{"gpu_ops", f.gpu_ops},
                {"gpu_ops_on_critical_path", f.no_slack},
                {"gpu_ops_with_no_slack", f.no_slack},
                {"histogram", {{"0", b[0]}, {"<10us", b[1]}, {"<100us", b[2]}, {"<1ms", b[3]}, {"<10ms", b[4]}, {">=10ms", b[5]}}}};
  json stats = json::array();
  int64_t outside_window = 0;
  for (const RankFacts& r : f.ranks) {
    outside_window += r.outside;
    for (const auto& row : r.rows) {
      stats.push_back({{"rank", r.id}, {"what", row.what}, {"count", row.count}, {"example", row.example}, {"error", row.is_error}});
    }
  }
  j["import_stats"] = {{"events", stats},
                       {"gpu_ops_without_launch", bs.gpu_ops_without_launch},
                       {"edges_dropped_inconsistent", bs.edges_dropped_inconsistent},
                       {"collectives_matched", bs.collectives_matched},
                       {"collective_kernels_unmatched", bs.collectives_unmatched},
                       {"collectives_inconsistent", bs.collectives_inconsistent},
                       {"collectives_inconsistent_example", bs.collectives_inconsistent_example},
                       {"rank_groups", bs.rank_groups},
                       {"rank_groups_example", bs.rank_groups_example},
                       {"cross_stream_edges_from_sync_events", bs.cross_stream_from_sync_events},
                       {"cross_stream_edges_from_runtime_pairs", bs.cross_stream_from_runtime_pairs},
                       {"cross_stream_edges_inferred", bs.cross_stream_inferred},
                       {"outside_profiler_window", outside_window},
                       // Host waits (docs/replay.md): threads that only wait, left out of the
                       // step's span and critical path; blocked-wait frames on working threads;
                       // host polling loops made GPU -> CPU waits.
                       {"waiting_threads", bs.waiting_threads},
                       {"waiting_thread_nodes", bs.waiting_thread_nodes},
                       {"waiting_thread_span_us", round3(us(bs.waiting_thread_span_ns))},
                       {"waiting_thread_example", bs.waiting_thread_example},
                       {"wait_frames", bs.wait_frames},
                       {"wait_frame_us", round3(us(bs.wait_frame_ns))},
                       {"wait_frame_example", bs.wait_frame_example},
                       {"poll_query_loops", bs.poll_query_loops},
                       {"poll_ranges", bs.poll_ranges},
                       {"poll_wait_us", round3(us(bs.poll_wait_ns))},
                       {"poll_example", bs.poll_example},
                       {"thread_flow_edges", bs.thread_flow_edges},
                       {"thread_waits", bs.thread_waits},
                       {"thread_wait_us", round3(us(bs.thread_wait_ns))},
                       {"thread_wait_example", bs.thread_wait_example},
                       // GPU ops that waited on an earlier step's queued GPU work (measured_span_us is
                       // then the loop's period; docs/replay.md).
                       {"queued_waits", bs.queued_waits},
                       {"queued_wait_us", round3(us(bs.queued_wait_ns))},
                       {"queued_wait_example", bs.queued_wait_example},
                       // The step's GPU work ran this long past its host, into the next step's host time,
                       // as the step before's ran into it without holding it: measured_span_us is then the
                       // loop's period (0 where the step is no such loop; docs/replay.md).
                       {"gpu_tail_us", round3(us(bs.gpu_tail_ns))},
                       {"notes", bs.notes}};
  if (per_kernel) {
    json ks = json::array();
    for (const KernelFacts& k : f.kernels) {
      ks.push_back({{"name", k.name},
                    {"rank", k.rank},
                    {"stream", k.stream},
                    {"start_us", round3(us(k.start_ns - begin))},
                    {"dur_us", round3(us(k.dur_ns))},
                    {"slack_us", round3(us(k.slack_ns))}});
    }
    j["kernels"] = ks;
  }
  return j;
}

// `queued_loop`: the step waited on queued ops (Graph::queued_ops of any piece).
std::string text_of(const Facts& f, const graph::BuildStats& bs, bool queued_loop, bool gpu_tail_loop,
                    const Analysis& a) {
  std::string s;
  s += fmt::format("{} rank(s), {} events, {} nodes, {} edges\n", f.ranks.size(), f.events, f.nodes, f.edges);
  const std::string queued =
      !(queued_loop || gpu_tail_loop)
          ? std::string()
          : fmt::format(" (the loop's period: {}; from the host's start to the GPU's end, {:.3f} ms)",
                        !queued_loop ? "its GPU tail runs into the next step's host time" : "its GPU runs behind its host",
                        us(f.end() - f.begin()) / 1000);
  s += fmt::format("step span: measured {:.3f} ms{}, replayed {:.3f} ms (error {:+.3f} %)\n",
                   us(a.measured_span_ns) / 1000, queued, us(a.replayed_span_ns) / 1000, a.replay_error_pct);
  s += "critical path:";
  for (const auto& part : a.critical_path.breakdown) {
    if (part.ns > 0) {
      s += fmt::format(" {} {:.1f}%", part.category,
                       100.0 * static_cast<double>(part.ns) / static_cast<double>(std::max<int64_t>(1, a.critical_path.length_ns)));
    }
  }
  s += "\n";
  for (const auto& u : a.gpus) {
    s += fmt::format("rank {} gpu {}: {} ops, busy {:.3f} ms, idle {:.3f} ms\n",
                     u.rank < f.ranks.size() ? f.ranks[u.rank].id : int64_t(u.rank), u.device, u.ops,
                     us(u.busy_ns) / 1000, us(u.idle_ns) / 1000);
  }
  // Two different counts: the ops the extracted path runs through, and the ops
  // that cannot grow without moving the step's end (a superset: an op that
  // ends exactly when a blocking CPU call returns has no slack, but the path
  // goes through the CPU call).
  s += fmt::format("GPU ops on the critical path: {} of {}\n", gpu_ops_on_path(f.path_ops), f.gpu_ops);
  s += fmt::format("GPU ops with no slack: {} of {}\n", f.no_slack, f.gpu_ops);
  if (bs.gpu_ops_without_launch > 0) {
    s += fmt::format("note: {} GPU ops have no launch call in the step\n", bs.gpu_ops_without_launch);
  }
  // A trace without ProfilerStep (a vLLM capture, a profiler started by hand) is taken whole: say so, as the
  // JSON's ranks[].step = -1 does.
  int whole = 0;
  std::string whole_first;
  for (const RankFacts& r : f.ranks) {
    if (r.step >= 0) continue;
    if (whole++ == 0) whole_first = r.file;
  }
  if (whole > 0) {
    s += fmt::format("note: no ProfilerStep in {}{}: the step is the profiler's whole window\n", whole_first,
                     whole > 1 ? fmt::format(" and {} more rank file(s)", whole - 1) : std::string());
  }
  if (bs.waiting_threads > 0) {
    s += fmt::format(
        "note: {} thread(s) that launch no GPU work (only wait) left out of the step's span and critical path"
        "{}; e.g. {} (waiting_threads in import_stats of --json)\n",
        bs.waiting_threads,
        bs.waiting_thread_span_ns > 0 ? fmt::format(", {:.3f} ms of span", us(bs.waiting_thread_span_ns) / 1000) : "",
        bs.waiting_thread_example);
  }
  if (bs.wait_frames > 0) {
    s += fmt::format("note: {} blocked-wait frame(s) on working threads, {:.3f} ms, counted as waits, not CPU work; "
                     "e.g. {}\n",
                     bs.wait_frames, us(bs.wait_frame_ns) / 1000, bs.wait_frame_example);
  }
  if (bs.poll_query_loops + bs.poll_ranges > 0) {
    s += fmt::format("note: {} host polling loop(s) ({} of event/stream queries, {} annotated ranges) wait on the GPU "
                     "op they poll, {:.3f} ms; e.g. {}\n",
                     bs.poll_query_loops + bs.poll_ranges, bs.poll_query_loops, bs.poll_ranges,
                     us(bs.poll_wait_ns) / 1000, bs.poll_example);
  }
  if (bs.thread_flow_edges + bs.thread_waits > 0) {
    s += fmt::format("note: {} forward -> backward dependencies across threads (fwdbwd flows){}\n", bs.thread_flow_edges,
                     bs.thread_waits > 0 ? fmt::format("; {} thread(s) wait for the autograd thread, {:.3f} ms; e.g. {}",
                                                       bs.thread_waits, us(bs.thread_wait_ns) / 1000, bs.thread_wait_example)
                                         : std::string());
  }
  if (bs.queued_waits > 0) {
    s += fmt::format("note: {} GPU op(s) of the step waited for work launched before it (an earlier step's, still "
                     "queued on a GPU that runs behind its host), e.g. {}: the step is the loop's period, the longer "
                     "of its host's span and the time from the first of them starting to its end (queued_waits in "
                     "import_stats of --json)\n",
                     bs.queued_waits, bs.queued_wait_example);
  }
  if (gpu_tail_loop) {
    s += fmt::format("note: the step's GPU work runs {:.3f} ms past its host, into the next step's host time, as the "
                     "step before's ran into this one without holding its host or its GPU ops: a loop that never "
                     "waits on its GPU, whose step is the loop's period, the longer of its host's span and each GPU "
                     "stream's span (gpu_tail_us in import_stats of --json)\n",
                     us(bs.gpu_tail_ns) / 1000);
  }
  if (bs.edges_dropped_inconsistent > 0) {
    s += fmt::format(
        "note: {} dependencies were left out: the trace's own times contradict them (e.g. a kernel that "
        "starts before its launch; see import_stats in --json)\n",
        bs.edges_dropped_inconsistent);
  }
  return s;
}

std::string csv_quote(std::string_view text) {
  std::string q = "\"";
  for (char c : text) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + '"';
}

std::string kernels_csv_of(const Facts& f) {
  std::string s = "rank,stream,name,start_us,dur_us,slack_us,critical\n";
  const int64_t begin = f.begin();
  for (const KernelFacts& k : f.kernels) {
    s += fmt::format("{},{},{},{:.3f},{:.3f},{:.3f},{}\n", k.rank, k.stream, csv_quote(k.name), us(k.start_ns - begin),
                     us(k.dur_ns), us(k.slack_ns), k.slack_ns == 0 ? 1 : 0);
  }
  return s;
}

std::string critical_path_csv_of(const Facts& f, const Analysis& a) {
  std::map<NodeId, const PathNode*> by_id;
  for (const PathNode& n : f.path_nodes) by_id.emplace(n.id, &n);
  const PathNode unknown;
  const auto node = [&](NodeId id) -> const PathNode& {
    auto it = by_id.find(id);
    return it == by_id.end() ? unknown : *it->second;
  };
  std::string s = "segment,kind,rank,name,start_us,dur_us\n";
  const int64_t begin = f.begin();
  for (const auto& seg : a.critical_path.segments) {
    const PathNode& n = node(seg.is_edge ? seg.from : seg.node);
    std::string name = n.name;
    if (seg.is_edge) name += " -> " + node(seg.node).name;
    s += fmt::format("{},{},{},{},{:.3f},{:.3f}\n", seg.is_edge ? "edge" : "node",
                     seg.is_edge ? graph::to_string(seg.edge) : graph::to_string(NodeKind(n.kind)), n.rank,
                     csv_quote(name), us(seg.start_ns - begin), us(seg.ns));
  }
  return s;
}

std::vector<std::string> import_warnings_of(const std::vector<RankFacts>& ranks) {
  std::vector<std::string> out;
  int64_t bad = 0;
  for (const RankFacts& r : ranks) bad += r.errors;
  if (bad > 0) out.push_back(fmt::format("{} malformed events skipped (see import_stats in --json)", bad));
  for (const RankFacts& r : ranks) {
    if (r.outside <= 0) continue;
    std::string example = r.outside_example;
    if (example.rfind("name: ", 0) == 0) example = example.substr(6);
    out.push_back(fmt::format(
        "{}{} events outside the profiler window (or crossing its edge) dropped: the trace has no ProfilerStep, so the step is the "
        "profiler's window (its 'Trace' span){} (outside_profiler_window in import_stats of --json)",
        r.file.empty() ? "" : r.file + ": ", r.outside, example.empty() ? "" : "; e.g. " + example));
  }
  return out;
}

LostLaunches lost_of(const Doubt& d) { return {d.sum[0], d.sum[1], d.example}; }
UnrecordedWaits unrecorded_of(const Doubt& d, const Analysis& a) {
  UnrecordedWaits out{d.sum[0], d.sum[1], 0, d.example};
  if (a.measured_span_ns > 0) out.pct = 100.0 * double(d.rank_max) / double(a.measured_span_ns);
  return out;
}
LateGpuStarts late_of(const Doubt& d, const Analysis& a) {
  LateGpuStarts out{d.sum[0], d.sum[1], 0, d.example};
  if (a.measured_span_ns > 0) out.pct = 100.0 * double(out.wait_ns) / double(a.measured_span_ns);
  return out;
}
OneTimeCalls one_time_of(const Doubt& d, const Analysis& a) {
  OneTimeCalls out{d.sum[0], d.sum[1], 0, d.example};
  if (a.measured_span_ns > 0) out.pct = 100.0 * double(d.rank_max) / double(a.measured_span_ns);
  return out;
}
EarlierLaunches earlier_of(const Doubt& d) { return {d.sum[0], d.sum[1], d.sum[2], d.example}; }

std::vector<std::string> warnings_of(const Facts& f, const graph::BuildStats& bs, const Analysis& a,
                                     const std::optional<ProfilerCost>& deprofiled) {
  std::vector<std::string> out = import_warnings_of(f.ranks);
  if (deprofiled) {
    const ProfilerCost& c = *deprofiled;
    out.push_back(fmt::format(
        "the profiler's cost was taken out of the step (--deprofile): host time x{:.4f}, {:.3f} ms traced -> {:.3f} ms "
        "(the job's untraced steps: {:.3f} ms){}; what follows is for the step as the job runs it, on a model of that "
        "cost with one factor for all host time (docs/replay.md, \"The profiler's cost\")",
        c.host_scale, static_cast<double>(c.traced_ns) / 1e6, static_cast<double>(c.replayed_ns) / 1e6,
        static_cast<double>(c.untraced_ns) / 1e6,
        c.explained ? "" : ", and even with no host time the step is longer than the untraced one"));
  }
  if (f.ranks.empty()) return out;
  const RankFacts& first = f.ranks.front();
  if (first.world_size > static_cast<int64_t>(f.ranks.size())) {
    out.push_back(fmt::format("{} of the {} ranks of the run (distributedInfo.world_size) given: the step is "
                              "modelled from these ranks alone, their collectives' waits as recorded",
                              f.ranks.size(), first.world_size));
  }
  // Ranks of one run record the same iteration at about the same time: a different ProfilerStep, or
  // captures far apart (kCaptureGapDoubtS), say the files may come from different runs.
  for (const RankFacts& r : f.ranks) {
    if (r.step < 0 || first.step < 0 || r.step == first.step) continue;
    out.push_back(fmt::format("{} is ProfilerStep#{}, {} ProfilerStep#{}: the ranks' steps are not one iteration "
                              "(give --step N for the one they share)",
                              r.file, r.step, first.file, first.step));
    break;
  }
  for (const RankFacts& r : f.ranks) {
    const double apart_s = std::abs(double(r.origin_ns - first.origin_ns)) * 1e-9;
    if (r.origin_ns == 0 || first.origin_ns == 0 || !(apart_s > kCaptureGapDoubtS)) continue;
    out.push_back(fmt::format("{} was captured {:.0f} s from {} (more than {:g} s): traces of one run's step are "
                              "recorded together",
                              r.file, apart_s, first.file, kCaptureGapDoubtS));
    break;
  }
  for (const RankFacts& r : f.ranks) {
    if (r.device.empty() || first.device.empty() || r.device == first.device) continue;
    out.push_back(fmt::format("{} ran on {}, {} on {}: traces of one run come from one kind of GPU", r.file, r.device,
                              first.file, first.device));
    break;
  }
  if (bs.collectives_inconsistent > 0) {
    out.push_back(fmt::format("{} collective(s) matched across ranks disagree, e.g. {}: the files may come from "
                              "different jobs, or their process groups share names; the waits at those collectives "
                              "are doubtful (collectives_inconsistent in import_stats of --json)",
                              bs.collectives_inconsistent, bs.collectives_inconsistent_example));
  }
  if (bs.rank_groups > 1 &&
      double(bs.rank_group_span_min_ns) < (1.0 - kRankGroupSpanDoubtPct / 100) * double(bs.rank_group_span_max_ns)) {
    out.push_back(fmt::format("the ranks form {} groups that share no collective, with steps of different lengths "
                              "({}): separate jobs (or collectives that were not matched); a GPU's slack against "
                              "the longest group's step is not real: give each job's files on their own",
                              bs.rank_groups, bs.rank_groups_example));
  }
  const LostLaunches ll = lost_of(f.lost);
  if (ll.lost > 0 && ll.pct() >= kLostLaunchDoubtPct) {
    out.push_back(fmt::format("{} of the step's {} launch calls have no GPU activity in the trace (at least {:g} %), "
                              "e.g. {}: the GPU work they started is missing from the step",
                              ll.lost, ll.launches, kLostLaunchDoubtPct, ll.example));
  }
  const UnrecordedWaits uw = unrecorded_of(f.unrecorded, a);
  if (uw.calls > 0 && uw.pct >= kUnrecordedWaitDoubtPct) {
    out.push_back(fmt::format("synchronize calls blocked {:.3f} ms ({:.0f} % of the step on the rank with the most) "
                              "after the GPU work the trace shows had ended, e.g. {}: the GPU ran work the trace does "
                              "not record (a graph whose kernels the profiler left out, another process), which the "
                              "step takes for host time and GPU idle",
                              double(uw.wait_ns) / 1e6, uw.pct, uw.example));
  }
  const LateGpuStarts ls = late_of(f.late, a);
  if (ls.ops > 0 && ls.pct >= kUnrecordedWaitDoubtPct) {
    out.push_back(fmt::format("{} GPU op(s) on the critical path started {:.3f} ms ({:.0f} % of the step) after their "
                              "launch while their GPU ran nothing of the step, e.g. {}: the GPU was busy with work the "
                              "step does not show (kernels the profiler left out, an earlier step's queued work, another "
                              "process) or the op waited on a dependency the trace does not record; the step takes that "
                              "time for a fixed launch delay that no clock moves, so slack and savings on this step are "
                              "doubtful",
                              ls.ops, double(ls.wait_ns) / 1e6, ls.pct, ls.example));
  }
  const OneTimeCalls ot = one_time_of(f.one_time, a);
  if (ot.calls > 0 && ot.pct >= kUnrecordedWaitDoubtPct) {
    out.push_back(fmt::format("{} runtime call(s) that do not wait on the GPU kept the host {:.3f} ms ({:.0f} % of the "
                              "step on the rank with the most) while its GPU ran nothing, e.g. {}: a first call's "
                              "one-time cost (CUDA loading a kernel's module, cuDNN or cuBLAS setting up, a context or "
                              "allocation made), which the job's later steps do not pay; this step is not the job's "
                              "steady state, so its host time and the GPU's slack are doubtful: record a later step "
                              "(torch.profiler's schedule with wait and warmup steps)",
                              ot.calls, double(ot.ns) / 1e6, ot.pct, ot.example));
  }
  const EarlierLaunches el = earlier_of(f.earlier);
  if (el.ops > 0 && el.pct() >= kEarlierLaunchDoubtPct) {
    out.push_back(fmt::format("{} GPU op(s), {:.3f} ms of the step's {:.3f} ms of GPU op time ({:.0f} %), have no launch "
                              "call in the step, e.g. {}: launched before it (an earlier step's work still queued when "
                              "it began), they are counted in this step's GPU time and energy, so per-step figures can "
                              "exceed the job's by up to that share",
                              el.ops, double(el.ns) / 1e6, double(el.gpu_ns) / 1e6, el.pct(), el.example));
  }
  // The profiler's own cost: a step that took longer under the profiler than the same job's steps without
  // it ran a slower host than the job does.
  int slowed = 0;
  std::string slowed_first;
  for (const RankFacts& r : f.ranks) {
    if (r.slowed.empty()) continue;
    if (slowed++ == 0) slowed_first = r.slowed;
  }
  if (slowed > 0) {
    out.push_back(fmt::format("the profiler slowed the step on {} of {} ranks by more than {:g} % ({}): the host ran "
                              "slower in this trace than in the job, so GPU slack the trace shows may be the "
                              "profiler's own and a policy made from it can slow the job past its bound; take the "
                              "profiler's cost out first (--deprofile, or emo deprofile TRACE -o DIR), and measure the "
                              "policy in the job (emo apply --verify, or the runtime's verify phase)",
                              slowed, f.ranks.size(), kProfilerSlowdownDoubtPct, slowed_first));
  }
  if (std::abs(a.replay_error_pct) > kReplayDoubtPct) {
    out.push_back(fmt::format("the replay of the step takes {:+.1f} % the time the trace measured (more than "
                              "{:g} % off): what emo predicts rests on a replay that does not reproduce the step",
                              a.replay_error_pct, kReplayDoubtPct));
  }
  return out;
}

// The facts of every process's part, at process 0 (CBOR: every integer as it is).
constexpr int kTagFacts = 13;

}  // namespace

// ---- one process: the whole step ----

int64_t gpu_ops_on_path(const Workload& w, const Analysis& a) { return gpu_ops_on_path(path_ops_of(piece_of(w), a)); }

std::vector<std::string> import_warnings(const Workload& w) {
  return import_warnings_of(rank_facts(piece_of(w)));
}

LostLaunches lost_launches(const Workload& w) { return lost_of(lost_launches(piece_of(w))); }
UnrecordedWaits unrecorded_waits(const Workload& w, const Analysis& a) {
  return unrecorded_of(unrecorded_waits(piece_of(w)), a);
}
LateGpuStarts late_gpu_starts(const Workload& w, const Analysis& a) { return late_of(late_gpu_starts(piece_of(w), a), a); }
OneTimeCalls one_time_calls(const Workload& w, const Analysis& a) { return one_time_of(one_time_calls(piece_of(w)), a); }
EarlierLaunches earlier_launches(const Workload& w) { return earlier_of(earlier_launches(piece_of(w))); }

std::vector<std::string> step_warnings(const Workload& w, const Analysis& a) {
  return warnings_of(facts_of(piece_of(w), a, {.doubts = true}), w.graph.stats, a, w.deprofiled);
}

nlohmann::json to_json(const Workload& w, const Analysis& a, bool per_kernel) {
  return json_of(facts_of(piece_of(w), a, {.kernels = per_kernel}), w.graph.stats, a, per_kernel);
}

std::string to_text(const Workload& w, const Analysis& a) {
  return text_of(facts_of(piece_of(w), a, {}), w.graph.stats, !w.graph.queued_ops.empty(), w.graph.gpu_tail_loop, a);
}

std::string kernels_csv(const Workload& w, const Analysis& a) {
  return kernels_csv_of(facts_of(piece_of(w), a, {.kernels = true}));
}

std::string critical_path_csv(const Workload& w, const Analysis& a) {
  return critical_path_csv_of(facts_of(piece_of(w), a, {.path_nodes = true}), a);
}

// ---- the processes of a run: each its part ----

Result<StepReport> report_part(const WorkloadPart& w, const Analysis& a, const ReportAsk& ask, dist::Comm& comm) {
  const bool per_kernel = ask.per_kernel;
  const graph::GraphPart& part = w.part;
  Piece p(part.graph, w.ranks, w.steps);
  p.total_ranks = part.total_ranks;
  p.queued_loop = part.queued_loop;
  for (const graph::RemoteEdge& e : part.remote) p.remote_in_edges += e.into_local;
  p.set_global(part.global);
  Facts mine = facts_of(p, a, {.kernels = per_kernel || ask.kernels_csv, .doubts = true, .path_nodes = ask.critical_path_csv});
  StepReport out;
  if (!comm.is_root()) {
    const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(nlohmann::json(mine));
    EMO_RETURN_IF_ERROR(comm.send(dist::kRoot, kTagFacts, std::string(bytes.begin(), bytes.end())));
    EMO_RETURN_IF_ERROR(comm.flush(dist::timeout_s()));
    return out;
  }
  for (int q = 1; q < comm.size(); ++q) {
    auto m = comm.recv(q, kTagFacts, dist::timeout_s());
    if (!m) return make_error("", fmt::format("the report's facts of process {}: {}", q, m.error().message()));
    Facts theirs;
    try {
      theirs = nlohmann::json::from_cbor(*m).get<Facts>();
    } catch (const nlohmann::json::exception& e) {
      return make_error("", fmt::format("the report's facts of process {} are corrupt ({})", q, e.what()),
                        "run the same emo binary on every process");
    }
    mine.join(std::move(theirs));
  }
  const graph::BuildStats& bs = part.graph.stats;
  out.json = json_of(mine, bs, a, per_kernel);
  out.text = text_of(mine, bs, part.queued_loop, part.graph.gpu_tail_loop, a);
  out.warnings = warnings_of(mine, bs, a, w.deprofiled);
  if (ask.kernels_csv) out.kernels_csv = kernels_csv_of(mine);
  if (ask.critical_path_csv) out.critical_path_csv = critical_path_csv_of(mine, a);
  return out;
}

}  // namespace emo::analysis
