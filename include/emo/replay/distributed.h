// The replay shared by the processes of a run (DESIGN.md §9, docs/mpi.md): each process owns the nodes of
// a contiguous part of the ranks (and the collectives whose first member is one of them: owners(); any
// partition of the nodes gives the same answer), computes each of its points as soon as every time it
// depends on is known (dataflow order), and exchanges with the other processes only the times that cross: a
// rank's arrival at a collective owned elsewhere, a collective's end read by its members. Conservative
// synchronization: a process that has nothing to compute sends what it has computed before it waits, so the
// earliest point not yet computed always has its times on their way to its process and the processes never
// wait on one another in a circle (the graph has no cycle). No process needs the whole graph's topological
// order, only its own part's dependencies.
//
// The answer is run()'s and slack()'s for the points each process owns, and run()'s span on every process,
// bit for bit (the same formula at every point; of the points at the step's end, the lowest, as
// Replayer::run() takes it). A shard is cut from the whole graph (make_shard(g, ...)) or made of the part a
// process built of its own ranks (make_shard(part)).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "emo/base/result.h"
#include "emo/dist/dist.h"
#include "emo/graph/graph.h"
#include "emo/graph/part.h"
#include "emo/replay/replay.h"

namespace emo::replay {

// The dependencies of one process's points in one direction (forward: in-edges; backward: out-edges),
// local points 0 .. 2·nodes − 1 (2i the start of node i, 2i + 1 its end), then the other processes'
// points it reads (2·nodes + j: imports[j]).
struct ShardSide {
  std::vector<uint32_t> dep_off;   // per local point, into dep / dep_lat (size points + 1)
  std::vector<uint32_t> dep;       // local point, or 2·nodes + j for import j
  std::vector<int64_t> dep_lat;    // the edge's latency
  std::vector<graph::EdgeKind> dep_kind;  // and its kind
  std::vector<uint8_t> reads_import;  // per local point: 1 where a dependency is another process's point
  std::vector<graph::PointId> imports;  // global ids, ascending
  std::vector<int32_t> import_from;     // the process that owns each
  std::vector<uint32_t> to_off;    // per local point, into to (size points + 1)
  std::vector<int32_t> to;         // the processes that read the point's time in this direction
  std::vector<uint32_t> next_off;  // the reverse of dep: per local point then per import (size points +
  std::vector<uint32_t> next;      // imports + 1), the local points that depend on it
};

// One process's part of a graph.
struct Shard {
  uint64_t id = 0;  // made by make_shard(), one per shard made (copies share it)
  int process = 0;
  int processes = 1;
  size_t graph_points = 0;              // points of the whole graph
  std::vector<graph::NodeId> nodes;     // global ids of the nodes it owns, ascending (local node i)
  ShardSide forward, backward;
  // Per local node: the graph's duration and measured start, whether it counts for the step's span, its
  // class for a loop's period (0 host, 1 GPU op, 2 collective), its lane (global) and whether it is queued.
  std::vector<int64_t> dur_ns, meas_start_ns;
  std::vector<uint8_t> counts, cls, queued;
  std::vector<uint32_t> lane;
  std::vector<graph::NodeKind> kind;
  size_t lanes = 0;                     // lanes of the whole graph
  int64_t inherent_lat_ns[graph::kEdgeKinds] = {0, 0, 0, 0, 0, 0, 0};  // the whole graph's (Graph's)
  bool queued_loop = false, gpu_tail_loop = false;

  size_t num_nodes() const { return nodes.size(); }
  size_t num_points() const { return 2 * nodes.size(); }
  graph::PointId global_point(uint32_t local) const { return 2 * nodes[local / 2] + (local & 1u); }
};

// The process of each node of `g` among `processes`: a rank's nodes go to the process whose part of the
// ranks (dist::shard over the ranks in graph order) holds it, a collective to its first member's.
std::vector<int32_t> owners(const graph::Graph& g, int processes);
// The part of `g` that process `process` owns.
Shard make_shard(const graph::Graph& g, const std::vector<int32_t>& owner, int process, int processes);
// The part a process built of its own ranks (graph::build_part): the same shard as make_shard() cuts from
// the whole graph for that process, without the whole graph.
Shard make_shard(const graph::GraphPart& part);

struct ShardTimeline {
  std::vector<int64_t> t_ns;            // per local point
  std::vector<int64_t> import_t_ns;     // per forward import (Shard::forward.imports): the times it read
  int64_t begin_ns = 0, end_ns = 0;     // the step's, the same on every process
  graph::PointId last_point = 0;        // global
  int64_t makespan_ns() const { return end_ns - begin_ns; }
  // What the exchange took: batches sent, and the times this process waited for another's.
  int64_t messages_sent = 0, waits = 0;
  // The order the first run on a shard computed its points in (dataflow), kept for the runs after it on
  // the same shard (and the slack, in reverse): every process's is its part of one topological order.
  std::vector<uint32_t> order;
  uint64_t order_of = 0;  // Shard::id of the shard it is the order of (0: none)
};

// Replayer::run() over the processes of `comm`, each with its own shard: `dur_ns` one per local node (empty:
// the graph's). Every process of the run calls it with its shard. An Error where another process sends
// nothing for dist::timeout_s(), or sends what is not such a run's.
Status run_distributed(const Shard& s, const std::vector<int64_t>& dur_ns, dist::Comm& comm, ShardTimeline& out);
// run_distributed() of several plans side by side (`durs`: each plan's durations per local node), one sweep
// and one exchange for all of them (each message carries every plan's time of a point): each plan's timeline
// the same as its own run's. `order`, `order_of`: the shard's order (ShardTimeline::order), used where it is
// this shard's, else found by this run and kept there. `out`: one timeline per plan, without the order (the
// first one's messages_sent and waits the batch's).
Status run_distributed_batch(const Shard& s, const std::vector<std::vector<int64_t>>& durs, dist::Comm& comm,
                             std::vector<uint32_t>& order, uint64_t& order_of, std::vector<ShardTimeline>& out);
// Replayer::slack() over the processes, from run_distributed()'s timeline with the same durations: the
// slack of each local node.
Status slack_distributed(const Shard& s, const std::vector<int64_t>& dur_ns, const ShardTimeline& tl,
                         dist::Comm& comm, std::vector<int64_t>& slack_ns);
// The step's span of times `t_ns` (one per local point: a replay's or the measured ones) as Replayer::run()
// finds it (a loop's period: graph::loop_window), over every process's points: [begin, end, last point].
Result<std::array<int64_t, 3>> span_distributed(const Shard& s, const std::vector<int64_t>& t_ns, dist::Comm& comm);
// Replayer::critical_path() over the processes, from run_distributed()'s timeline with the same durations:
// the whole path (global node ids), the same on every process. The walk back from the step's end goes from
// process to process, one message each time it crosses to another's point (then every process's piece is
// gathered): the path's length in messages, nothing of the graph.
Result<CriticalPath> critical_path_distributed(const Shard& s, const std::vector<int64_t>& dur_ns,
                                               const ShardTimeline& tl, dist::Comm& comm);

}  // namespace emo::replay
