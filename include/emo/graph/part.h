// One process's part of a step's graph, built from its own shard of the rank files (DESIGN.md §9,
// docs/mpi.md): the processes of a run each read a contiguous part of the ranks (process p's ranks before
// process p + 1's) and build the graph of those ranks only; what crosses ranks is exchanged, never the
// traces or the whole graph:
// - the node and lane counts of every process (each part's ids in the whole graph: the counts before);
// - the ranks' earliest clock origin (one timeline for all);
// - one record per communication kernel, gathered at process 0 and matched there
//   (graph::match_collectives); each process gets back its ranks' clock offsets and, for its kernels, the
//   collective they joined; a collective is a node of its first member's process;
// - rank 0's first start (ranks no collective aligned start with it);
// - the upper median of every binding gap per edge kind (dist::upper_medians): the inherent latencies;
// - the latency of each edge between two processes' points (the process of its destination decides it);
// - each rank's loop checks and the build's counts, reduced.
// The part equals the slice of build_graph()'s graph of all the ranks that holds these ranks, node for
// node and edge for edge, the same inherent latencies and the same BuildStats on every process.
#pragma once

#include <cstdint>
#include <vector>

#include "emo/base/result.h"
#include "emo/dist/dist.h"
#include "emo/graph/graph.h"

namespace emo::graph {

// An edge between a point of this part and a point of another process's.
struct RemoteEdge {
  PointId local = 0;      // this part's point (an id of GraphPart::graph)
  PointId other = 0;      // the other process's point (an id of the whole graph)
  int32_t process = 0;    // the process that owns `other`
  bool into_local = true; // other -> local (else local -> other)
  EdgeKind kind = EdgeKind::kCollective;
  int64_t lat_ns = 0;
};

struct GraphPart {
  // This process's ranks' nodes, then the collectives whose first member is one of them; the edges among
  // them (CSR and a topological order of its own points). Rank indexes are this part's (0 its first
  // rank); inherent latencies, gpu_tail_loop and stats are the whole step's; queued_ops this part's.
  Graph graph;
  int process = 0;
  int processes = 1;
  size_t first_rank = 0;     // its ranks are [first_rank, first_rank + graph.num_ranks()) of the step's
  size_t total_ranks = 0;
  size_t total_nodes = 0;    // nodes of the whole graph
  size_t lane_base = 0;      // its lanes' first id in the whole graph (lanes are numbered by rank)
  size_t total_lanes = 0;
  std::vector<NodeId> global;       // per node of `graph`, its id in the whole graph
  std::vector<RemoteEdge> remote;   // its edges to and from other processes' points
  bool queued_loop = false;         // whether any process has queued ops (the step is a loop's period)
};

// Builds this process's part: every process of `comm` calls it with its own ranks' traces (already
// windowed to one step), process p's ranks following process p - 1's. An Error on every process where any
// process fails (the first failing process's message), or where a process sends nothing for
// dist::timeout_s(). A process may hold no rank.
Result<GraphPart> build_part(const std::vector<trace::RankTrace>& ranks, dist::Comm& comm,
                             const BuildOptions& options = {});

}  // namespace emo::graph
