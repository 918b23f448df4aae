// The replay engine: earliest times forward, latest times backward, and the
// critical path as the chain of binding dependencies. Pure computation over
// the graph's arrays; the caller owns every output vector, so repeated what-ifs
// allocate nothing.
#include "emo/replay/replay.h"

#include "path.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace emo::replay {

using graph::Edge;
using graph::EdgeKind;
using graph::NodeId;
using graph::NodeKind;
using graph::PointId;

Replayer::Replayer(const graph::Graph& g) : g_(g) {}

namespace {
// A loop's period (Graph::loop_period): the window of the replayed times that times the step.
void period_window(const graph::Graph& g, const int64_t* t, int64_t& begin, int64_t& end, PointId& last) {
  const graph::LoopWindow w = graph::loop_window(g, [t](PointId p) { return t[p]; }, end, last);
  begin = w.begin_ns;
  end = w.end_ns;
  last = w.last;
}

template <class DurFn>
void sweep(const graph::Graph& g_, DurFn&& dur_of, Timeline& out) {
  const size_t points = g_.num_points();
  out.t_ns.resize(points);
  int64_t begin = std::numeric_limits<int64_t>::max();
  int64_t end = std::numeric_limits<int64_t>::min();
  PointId last = 0;
  const Edge* edges = g_.edges.data();
  const uint32_t* in_off = g_.in_offsets.data();
  const uint32_t* in_ids = g_.in_edges.data();
  int64_t* t = out.t_ns.data();
  for (PointId p : g_.topo) {
    const NodeId n = graph::node_of(p);
    int64_t v;
    if (graph::is_end(p)) {
      v = t[p - 1] + dur_of(n, t[p - 1]);
    } else {
      // A start with no predecessor keeps its measured time (the step's anchor).
      v = in_off[p] == in_off[p + 1] ? g_.meas_start_ns[n] : std::numeric_limits<int64_t>::min();
    }
    for (uint32_t k = in_off[p]; k < in_off[p + 1]; ++k) {
      const Edge& e = edges[in_ids[k]];
      v = std::max(v, t[e.src] + e.lat_ns);
    }
    t[p] = v;
    // A thread that only waits is replayed but neither starts nor ends the step.
    if (!g_.counts_for_span(n)) continue;
    if (!graph::is_end(p)) begin = std::min(begin, v);
    if (graph::is_end(p) && (v > end || (v == end && p < last))) {
      end = v;
      last = p;
    }
  }
  if (points == 0 || end == std::numeric_limits<int64_t>::min()) begin = end = 0;
  if (g_.loop_period() && points > 0) period_window(g_, t, begin, end, last);
  out.begin_ns = begin;
  out.end_ns = end;
  out.last_point = last;
}
// One point's time from its predecessors' (the sweep's formula).
inline int64_t point_time(const graph::Graph& g, const int64_t* t, PointId p, int64_t dur) {
  const NodeId n = graph::node_of(p);
  int64_t v;
  if (graph::is_end(p)) {
    v = t[p - 1] + dur;
  } else {
    v = g.in_offsets[p] == g.in_offsets[p + 1] ? g.meas_start_ns[n] : std::numeric_limits<int64_t>::min();
  }
  const Edge* edges = g.edges.data();
  for (uint32_t k = g.in_offsets[p]; k < g.in_offsets[p + 1]; ++k) {
    const Edge& e = edges[g.in_edges[k]];
    v = std::max(v, t[e.src] + e.lat_ns);
  }
  return v;
}

// begin, end and the point that ends the step, as the sweep finds them.
void span_of(const graph::Graph& g, Timeline& out) {
  int64_t begin = std::numeric_limits<int64_t>::max();
  int64_t end = std::numeric_limits<int64_t>::min();
  PointId last = 0;
  const int64_t* t = out.t_ns.data();
  for (PointId p : g.topo) {
    if (!g.counts_for_span(graph::node_of(p))) continue;
    if (!graph::is_end(p)) {
      begin = std::min(begin, t[p]);
    } else if (t[p] > end || (t[p] == end && p < last)) {
      end = t[p];
      last = p;
    }
  }
  if (g.num_points() == 0 || end == std::numeric_limits<int64_t>::min()) begin = end = 0;
  if (g.loop_period() && g.num_points() > 0) period_window(g, t, begin, end, last);
  out.begin_ns = begin;
  out.end_ns = end;
  out.last_point = last;
}

}  // namespace

void Replayer::run(const std::vector<int64_t>& dur_ns, Timeline& out) const {
  sweep(g_, [&](NodeId n, int64_t) { return dur(dur_ns, n); }, out);
}

void Replayer::run_dynamic(const std::function<int64_t(NodeId, int64_t)>& dur_at, Timeline& out) const {
  sweep(g_, dur_at, out);
}

namespace {
// The latest end each lane's GPU ops (then the host's nodes, then collectives) may have in a loop whose GPU
// tail runs free, without moving its period (tl's span): the lane's first start, or the host's, plus it.
std::vector<int64_t> tail_bounds(const graph::Graph& g, const Timeline& tl) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const size_t lanes = g.lanes.size();
  std::vector<int64_t> first(lanes + 1, kMax);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!g.counts_for_span(n) || g.kind[n] == NodeKind::kCollective) continue;
    const size_t k = graph::is_gpu(g.kind[n]) && g.lane[n] < lanes ? g.lane[n] : lanes;
    first[k] = std::min(first[k], tl.start(n));
  }
  const int64_t period = tl.makespan_ns();
  std::vector<int64_t> bound(lanes + 2, tl.end_ns);
  int64_t latest = tl.end_ns;
  for (size_t k = 0; k <= lanes; ++k) {
    if (first[k] != kMax) bound[k] = first[k] + period;
    latest = std::max(latest, bound[k]);
  }
  bound[lanes + 1] = latest;
  return bound;
}
}  // namespace

void Replayer::slack(const std::vector<int64_t>& dur_ns, const Timeline& tl,
                     std::vector<int64_t>& slack_ns) const {
  const size_t points = g_.num_points();
  // Latest time each point may occur without moving the step's end. The points
  // of a thread that only waits do not bound the step: nothing constrains them
  // but the edges out of them.
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 4;
  std::vector<int64_t> late(points, tl.end_ns);
  // A loop whose GPU tail runs free (Graph::gpu_tail_loop): the period holds while the host's span and
  // each stream's span stay within it, so the host may end by its start plus the period, and a stream's
  // ops by that stream's first start plus the period (the next step's first op there), not by the end.
  const bool tail = g_.gpu_tail_loop && g_.queued_ops.empty();
  std::vector<int64_t> bound;  // per lane (GPU streams), then one for the host and one for the rest
  if (tail) bound = tail_bounds(g_, tl);
  const auto bound_of = [&](graph::NodeId n) {
    if (!tail) return tl.end_ns;
    if (graph::is_gpu(g_.kind[n]) && g_.lane[n] < g_.lanes.size()) return bound[g_.lane[n]];
    return bound[g_.lanes.size() + (g_.kind[n] == NodeKind::kCollective ? 1 : 0)];
  };
  const Edge* edges = g_.edges.data();
  for (auto it = g_.topo.rbegin(); it != g_.topo.rend(); ++it) {
    const PointId p = *it;
    int64_t v = g_.counts_for_span(graph::node_of(p)) ? bound_of(graph::node_of(p)) : kUnbounded;
    for (uint32_t k = g_.out_offsets[p]; k < g_.out_offsets[p + 1]; ++k) {
      const Edge& e = edges[g_.out_edges[k]];
      v = std::min(v, late[e.dst] - e.lat_ns);
    }
    if (!graph::is_end(p)) v = std::min(v, late[p + 1] - dur(dur_ns, graph::node_of(p)));
    late[p] = v;
  }
  slack_ns.resize(g_.num_nodes());
  for (NodeId n = 0; n < g_.num_nodes(); ++n) {
    slack_ns[n] = std::max<int64_t>(0, late[graph::end_point(n)] - tl.end(n));
  }
}

CriticalPath Replayer::critical_path(const std::vector<int64_t>& dur_ns, const Timeline& tl) const {
  detail::PathWalk walk;
  if (g_.num_nodes() == 0) {
    walk.cp.breakdown = detail::breakdown_parts(walk.breakdown);
    return std::move(walk.cp);
  }
  const int64_t* t = tl.t_ns.data();
  PointId p = tl.last_point;
  // Walk back along binding dependencies. At an end point the node's own
  // duration is preferred, so the path goes through the work, not around it.
  while (true) {
    const NodeId n = graph::node_of(p);
    if (graph::is_end(p) && t[p - 1] + dur(dur_ns, n) == t[p]) {
      walk.node(n, g_.kind[n], t[p - 1], t[p] - t[p - 1]);
      p = p - 1;
      continue;
    }
    const Edge* binding = nullptr;
    for (uint32_t k = g_.in_offsets[p]; k < g_.in_offsets[p + 1]; ++k) {
      const Edge& e = g_.edges[g_.in_edges[k]];
      if (t[e.src] + e.lat_ns == t[p] && (!binding || detail::binds_before(e.src, e.kind, binding->src, binding->kind))) {
        binding = &e;
      }
    }
    if (!binding) break;  // an anchored start: the path begins here
    walk.edge(p, n, graph::node_of(binding->src), binding->kind, t[binding->src], t[p] - t[binding->src],
              g_.inherent_lat_ns[static_cast<int>(binding->kind)]);
    p = binding->src;
  }
  walk.anchor(t[p] - tl.begin_ns);  // before the path's first anchor
  CriticalPath cp = std::move(walk.cp);
  std::reverse(cp.nodes.begin(), cp.nodes.end());
  std::reverse(cp.segments.begin(), cp.segments.end());
  cp.breakdown = detail::breakdown_parts(walk.breakdown);
  cp.length_ns = tl.makespan_ns();
  return cp;
}

Rereplayer::Rereplayer(const graph::Graph& g) : g_(g), pos_(g.num_points()) {
  for (uint32_t i = 0; i < g.topo.size(); ++i) pos_[g.topo[i]] = i;
}

void Rereplayer::update(const std::vector<int64_t>& old_dur, const std::vector<int64_t>& new_dur,
                        Timeline& tl) const {
  const graph::Graph& g = g_;
  const size_t nodes = g.num_nodes();
  // Per thread, reused: the points to evaluate (a min-heap on topological place), which are queued, and
  // the points that moved with their old times.
  thread_local std::vector<uint32_t> heap;  // topological places
  thread_local std::vector<char> queued;
  thread_local std::vector<std::pair<PointId, int64_t>> moved;
  heap.clear();
  moved.clear();
  if (queued.size() < g.num_points()) queued.assign(g.num_points(), 0);
  size_t changed = 0;
  for (NodeId n = 0; n < nodes; ++n) {
    if (old_dur[n] == new_dur[n]) continue;
    ++changed;
    heap.push_back(pos_[graph::end_point(n)]);
    queued[graph::end_point(n)] = 1;
  }
  // Many changes reach most of the graph: one sweep is cheaper than the heap.
  if (changed * 8 > nodes) {
    for (uint32_t q : heap) queued[g.topo[q]] = 0;
    Replayer(g).run(new_dur, tl);
    return;
  }
  auto later = std::greater<uint32_t>();
  std::make_heap(heap.begin(), heap.end(), later);
  int64_t* t = tl.t_ns.data();
  auto push = [&](PointId q) {
    if (queued[q]) return;
    queued[q] = 1;
    heap.push_back(pos_[q]);
    std::push_heap(heap.begin(), heap.end(), later);
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const PointId p = g.topo[heap.back()];
    heap.pop_back();
    queued[p] = 0;
    const int64_t v = point_time(g, t, p, graph::is_end(p) ? new_dur[graph::node_of(p)] : 0);
    if (v == t[p]) continue;
    moved.emplace_back(p, t[p]);
    t[p] = v;
    if (!graph::is_end(p)) push(p + 1);
    for (uint32_t k = g.out_offsets[p]; k < g.out_offsets[p + 1]; ++k) push(g.edges[g.out_edges[k]].dst);
  }
  // The step's span from the moved points alone, unless a point that bounded it moved inward. Unmoved
  // points keep their times: the old end point stays the first at the old end unless a moved point
  // passes it (the new end is then a moved point's) or ties it with a lower point id.
  bool rescan = false;
  bool last_moved = false;
  int64_t best = std::numeric_limits<int64_t>::min();
  PointId best_p = 0;
  int64_t begin = tl.begin_ns;
  for (const auto& [p, was] : moved) {
    if (!g.counts_for_span(graph::node_of(p))) continue;
    const int64_t now = t[p];
    if (!graph::is_end(p)) {
      if (now < begin) begin = now;
      else if (was == tl.begin_ns) rescan = true;  // it may have been the only point at the begin
      continue;
    }
    last_moved |= p == tl.last_point;
    if (now > best || (now == best && p < best_p)) best = now, best_p = p;
  }
  if (best > tl.end_ns) {
    tl.end_ns = best;
    tl.last_point = best_p;
  } else if (last_moved) {
    rescan = true;  // the end point moved inward: the new end may be any point's
  } else if (best == tl.end_ns && best_p < tl.last_point) {
    tl.last_point = best_p;
  }
  tl.begin_ns = begin;
  // A loop's period is the longer of spans that the moved points alone do not tell.
  if (rescan || g.loop_period()) span_of(g, tl);
}

}  // namespace emo::replay
