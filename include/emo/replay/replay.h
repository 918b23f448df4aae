// Discrete-event what-if replay over the dependency graph. Each thread and
// stream is a serial resource whose order is the program order recorded in the
// trace, so replay is one sweep over the points in topological order:
//   t(p) = max over in-edges e of t(src e) + lat e,   t(end n) also ≥ t(start n) + dur n.
// Points with no predecessor keep their measured time. No I/O, and nothing is
// allocated per event once a Replayer exists.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "emo/graph/graph.h"

namespace emo::replay {

struct Timeline {
  std::vector<int64_t> t_ns;     // time of every point (start 2n, end 2n+1)
  int64_t begin_ns = 0;          // earliest point
  int64_t end_ns = 0;            // latest point
  graph::PointId last_point = 0; // the point that ends the step (of several at the latest time, the lowest)
  int64_t makespan_ns() const { return end_ns - begin_ns; }
  int64_t start(graph::NodeId n) const { return t_ns[graph::start_point(n)]; }
  int64_t end(graph::NodeId n) const { return t_ns[graph::end_point(n)]; }
};

struct CriticalPath {
  std::vector<graph::NodeId> nodes;  // in time order
  int64_t length_ns = 0;
  // Time on the path by category: gpu_compute, communication, gpu_memory, cpu,
  // launch_overhead, sync_wait, idle.
  struct Part {
    std::string category;
    int64_t ns = 0;
    bool operator==(const Part&) const = default;
  };
  std::vector<Part> breakdown;
  // The path piece by piece, in time order: a node's own duration, or the
  // latency of a dependency edge between two nodes.
  struct Segment {
    graph::NodeId node = graph::kNoId;  // the node whose duration this is, or the edge's destination
    graph::NodeId from = graph::kNoId;  // edge segments: the edge's source node
    bool is_edge = false;
    graph::EdgeKind edge = graph::EdgeKind::kThread;
    int64_t start_ns = 0;
    int64_t ns = 0;
    bool operator==(const Segment&) const = default;
  };
  std::vector<Segment> segments;
  bool operator==(const CriticalPath&) const = default;
};

class Replayer {
 public:
  explicit Replayer(const graph::Graph& g);
  // Replays with the graph's own durations (`dur_ns` empty) or with an overlay
  // of one duration per node.
  void run(const std::vector<int64_t>& dur_ns, Timeline& out) const;
  void run(Timeline& out) const { run({}, out); }
  // Replays with durations that depend on when a node starts (a GPU whose clock changes over time):
  // `dur_at(node, start_ns)` is called once per node, in topological order of its start.
  void run_dynamic(const std::function<int64_t(graph::NodeId, int64_t)>& dur_at, Timeline& out) const;
  // Slack of every node: how much longer it may run before the makespan grows
  // (for the nodes of a thread that only waits, a huge number: they do not bound it).
  void slack(const std::vector<int64_t>& dur_ns, const Timeline& tl, std::vector<int64_t>& slack_ns) const;
  CriticalPath critical_path(const std::vector<int64_t>& dur_ns, const Timeline& tl) const;

  const graph::Graph& graph() const { return g_; }

 private:
  int64_t dur(const std::vector<int64_t>& dur_ns, graph::NodeId n) const {
    return dur_ns.empty() ? g_.dur_ns[n] : dur_ns[n];
  }
  const graph::Graph& g_;
};

// Replays again after some nodes' durations changed, from a replay of the same graph: only the points
// whose time can move are evaluated, in topological order, following the out-edges of those that did
// move. The result is run()'s, bit for bit (the same formula at every point, and the same lowest point
// of those that end the step). Worth it when a change stays local (a pack off the critical
// path, whose delay a collective absorbs); update() falls back to a full sweep when many nodes change.
class Rereplayer {
 public:
  explicit Rereplayer(const graph::Graph& g);  // each point's place in the topological order
  // `tl` is the replay with `old_dur`; on return it is the replay with `new_dur` (one per node each).
  // Not safe for two threads on the same `tl`; the Rereplayer itself is shared read-only.
  void update(const std::vector<int64_t>& old_dur, const std::vector<int64_t>& new_dur, Timeline& tl) const;

 private:
  const graph::Graph& g_;
  std::vector<uint32_t> pos_;  // point -> index in g.topo
};

}  // namespace emo::replay
