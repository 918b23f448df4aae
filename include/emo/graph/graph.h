// The dependency graph of one step across ranks (DESIGN.md §2).
// Every node has two time points, start (2n) and end (2n+1); every edge joins
// two points with a latency, so "kernel starts ≥ launch start + 6 µs",
// "collective transfer starts when the last rank's kernel has started" and
// "cudaStreamSynchronize returns ≥ 3 µs after the kernel it waits on ends" are
// all the same thing. The end of node n is also bound by start(n) + dur(n).
// Built once by build_graph(), immutable afterwards; a what-if is a duration
// vector given to the replay, never a copy of the graph.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "emo/base/ids.h"
#include "emo/base/result.h"
#include "emo/base/strings.h"
#include "emo/trace/trace.h"

namespace emo::graph {

using NodeId = uint32_t;
// A rank's position in the step (0 .. ranks − 1): what per-rank vectors are indexed by. Its rank
// number in the job is Graph::rank_id(i).
using RankIndex = StrongId<struct RankIndexTag>;
using PointId = uint32_t;
inline constexpr uint32_t kNoId = 0xffffffffu;

inline PointId start_point(NodeId n) { return 2 * n; }
inline PointId end_point(NodeId n) { return 2 * n + 1; }
inline NodeId node_of(PointId p) { return p / 2; }
inline bool is_end(PointId p) { return (p & 1u) != 0; }

enum class NodeKind : uint8_t {
  kCpuOp,       // self time of a cpu_op / user_annotation / python_function on a thread
  kCpuGap,      // time on a thread that no event explains (real CPU work, kept)
  kRuntime,     // a CUDA runtime/driver call that does not block (launch, record, ...)
  kSyncCall,    // a CPU node that blocks on the GPU: a synchronize call, a blocking memcpy, the
                // last query of a host polling loop, a childless range the host spins in

  kKernel,      // GPU kernel (compute)
  kCommKernel,  // GPU communication kernel (emo/base/comm_kernels.h), this rank's part
  kMemcpy,      // GPU memcpy
  kMemset,      // GPU memset
  kCollective,  // logical transfer of one collective matched across ranks
  kCpuWait,     // self time of a blocked-wait frame (threading wait, queue get, sleep, ...) or
                // of a frame inside one: the thread waits, it does no CPU work
};
const char* to_string(NodeKind k);
inline bool is_gpu(NodeKind k) {
  return k == NodeKind::kKernel || k == NodeKind::kCommKernel || k == NodeKind::kMemcpy ||
         k == NodeKind::kMemset;
}

enum class EdgeKind : uint8_t {
  kThread,       // thread program order
  kLaunch,       // runtime/driver call -> its GPU op (by correlation)
  kStream,       // stream order
  kCrossStream,  // event record on stream A -> stream wait on stream B
  kSync,         // GPU op end -> blocking CPU call end
  kCollective,   // rank's collective kernel <-> logical collective
  kCrossThread,  // one CPU thread -> another: a forward op -> its backward op on the autograd engine's
                 // thread (Kineto's fwdbwd flows), and that thread's last op -> the thread that waited
                 // for it (the training loop blocked in backward())
};
inline constexpr int kEdgeKinds = 7;
const char* to_string(EdgeKind k);

struct Edge {
  PointId src = 0;
  PointId dst = 0;
  int64_t lat_ns = 0;  // inherent latency of this dependency
  EdgeKind kind = EdgeKind::kThread;
};

// One serial resource of one rank: a CPU thread or a GPU stream.
struct Lane {
  uint32_t rank = 0;
  bool gpu = false;
  int64_t pid = -1;
  int64_t tid = -1;
  int32_t device = -1;
  int32_t stream = -1;
};

struct BuildOptions {
  // Split each matched collective kernel into wait-for-peers + transfer.
  bool split_collectives = true;
};

// What the builder did that a user should know (counts, one example each).
struct BuildStats {
  int64_t gpu_ops_without_launch = 0;
  int64_t edges_dropped_inconsistent = 0;  // dependency contradicted by the trace's own times
  int64_t collectives_matched = 0;
  int64_t collectives_unmatched = 0;
  // Collectives whose matched kernels disagree (more ranks than their group size, or a different kind
  // of collective): files of different jobs, or process groups named alike. One example.
  int64_t collectives_inconsistent = 0;
  std::string collectives_inconsistent_example;
  // Groups of ranks joined by matched collectives (0: not counted, one rank or collectives not split);
  // with more than one, the shortest and longest group's measured span, and the groups (up to four).
  int64_t rank_groups = 0;
  int64_t rank_group_span_min_ns = 0;
  int64_t rank_group_span_max_ns = 0;
  std::string rank_groups_example;
  int64_t cross_stream_from_sync_events = 0;
  int64_t cross_stream_from_runtime_pairs = 0;
  int64_t cross_stream_inferred = 0;  // waits whose event record was missing from the trace
  // Threads that only wait (they launch no GPU work and hold no ProfilerStep):
  // replayed, but left out of the step's span and critical path.
  int64_t waiting_threads = 0;
  int64_t waiting_thread_nodes = 0;
  int64_t waiting_thread_span_ns = 0;   // how much they stretched the measured span
  std::string waiting_thread_example;   // the first: its thread and its longest event
  // Blocked-wait frames on threads that do work: their self time is a wait (kCpuWait).
  int64_t wait_frames = 0;
  int64_t wait_frame_ns = 0;
  std::string wait_frame_example;
  // Host polling loops turned into GPU -> CPU waits: runs of event/stream queries,
  // and childless annotated ranges ending just after a GPU op ends.
  int64_t poll_query_loops = 0;
  int64_t poll_ranges = 0;
  int64_t poll_wait_ns = 0;             // measured time of those loops up to the op's end
  std::string poll_example;
  // Dependencies between CPU threads from fwdbwd flows (EdgeKind::kCrossThread): forward -> backward
  // edges, and waits of a thread that sat blocked while another ran its backward ops.
  int64_t thread_flow_edges = 0;
  int64_t thread_waits = 0;
  int64_t thread_wait_ns = 0;          // measured time of those waits up to the other thread's end
  int64_t thread_waits_without_flows = 0;  // of them, on a rank without fwdbwd flows (add_engine_waits)
  std::string thread_wait_example;
  // GPU ops that started kQueuedWaitMinNs or more after what bound them in the step while their GPU ran work
  // launched before it (trace::RankTrace::prior_gpu_busy: an earlier step's, on a GPU that runs behind its
  // host; Graph::queued_ops). queued_wait_ns: the longest such wait; queued_wait_example names its op.
  int64_t queued_waits = 0;
  int64_t queued_wait_ns = 0;
  std::string queued_wait_example;
  // The step's GPU work ran past its host by this much (the longest over the ranks) where the step is a
  // loop's whose GPU tail runs free into the next step's host time (Graph::gpu_tail_loop); else 0.
  int64_t gpu_tail_ns = 0;
  std::vector<std::string> notes;
  bool operator==(const BuildStats&) const = default;
};
using trace::kQueuedWaitMinNs;

struct Graph {
  // ---- nodes (struct of arrays, indexed by NodeId) ----
  std::vector<NodeKind> kind;
  std::vector<uint32_t> lane;      // index into lanes; kNoId for kCollective
  std::vector<uint32_t> rank;      // index into rank_paths
  std::vector<uint32_t> event;     // index into that rank's trace events; kNoId if none
  std::vector<StrId> name;         // interned in `strings`
  std::vector<int64_t> dur_ns;     // base duration (the replay's default)
  std::vector<int64_t> meas_start_ns;  // measured, on the common (rank-aligned) timeline
  std::vector<int64_t> meas_end_ns;
  // 1 for the nodes of a thread that only waits (BuildStats::waiting_threads):
  // replayed like any node, but they neither start nor end the step, so they
  // are never on its critical path and never bound another node's slack.
  std::vector<uint8_t> on_waiting_thread;
  // GPU ops that waited on an earlier step's work still queued on their GPU (BuildStats::queued_waits):
  // the GPU runs behind its host, and the step is the loop's period,
  // max(host span, step end - the first of them starting), not the host's start to the step's end.
  std::vector<NodeId> queued_ops;
  // The step's GPU work runs past its host into the next step's host time, as the step before's ran into
  // this one without holding it (trace::runs_free_gpu_tail, every rank with GPU work): a loop that never
  // waits on its GPU and keeps up with its host. The step is then the loop's period, the longer of the
  // host's span and each GPU stream's span (its first op's start to its last op's end: the next step's
  // first op there starts a period after this one's), not the host's start to the GPU's end.
  bool gpu_tail_loop = false;
  // Whether the step is timed as a loop's period (queued_ops or gpu_tail_loop), not from its first point to
  // its last.
  bool loop_period() const { return !queued_ops.empty() || gpu_tail_loop; }
  bool counts_for_span(NodeId n) const { return n >= on_waiting_thread.size() || on_waiting_thread[n] == 0; }

  // ---- edges, and in-edges of each point in CSR form ----
  std::vector<Edge> edges;
  std::vector<uint32_t> in_offsets;  // size points+1
  std::vector<uint32_t> in_edges;    // edge ids, grouped by dst point
  std::vector<uint32_t> out_offsets; // size points+1
  std::vector<uint32_t> out_edges;   // edge ids, grouped by src point
  std::vector<PointId> topo;         // all points in a topological order

  // Inherent latency of each EdgeKind (median of the gaps of edges of that kind
  // that bound their point): launch latency on an empty queue, kernel-to-kernel gap, ...
  int64_t inherent_lat_ns[kEdgeKinds] = {0, 0, 0, 0, 0, 0, 0};

  std::vector<Lane> lanes;
  std::vector<std::string> rank_paths;  // input file of each rank
  std::vector<int> rank_ids;            // rank number of each input
  std::vector<int64_t> rank_offset_ns;  // clock offset removed from each rank
  std::vector<int64_t> step_of_rank;    // ProfilerStep used (-1: whole trace)
  StringTable strings;
  BuildStats stats;

  size_t num_ranks() const { return rank_paths.size(); }
  // The rank number of the rank at `r` (distributedInfo.rank, or its position where the traces have none).
  int rank_id(RankIndex r) const { return r.index() < rank_ids.size() ? rank_ids[r.index()] : int(r.value()); }
  size_t num_nodes() const { return kind.size(); }
  size_t num_points() const { return 2 * kind.size(); }
  // The measured step: the hull of the nodes that count for the span (all but
  // those of threads that only wait).
  int64_t measured_begin_ns() const;
  int64_t measured_end_ns() const;
  // The measured step as the replay reproduces it: the hull (measured_end_ns - measured_begin_ns), or the
  // loop's period where the step holds GPU ops queued behind an earlier step's work (queued_ops): the
  // longer of the host's span and the time from the first of them starting to the step's end.
  int64_t measured_span_ns() const;
};

// The window of a loop's period (Graph::loop_period) from each point's time (`time(point)`: measured or
// replayed), given the step's last end point `last` at `end`: queued ops, [end - max(host span, end - the
// first of them starting), end]; a free GPU tail, the host's [first start, last end] where the host's span
// is the longer, else the longest stream's [first start, last end]. `last` becomes the point that ends it.
struct LoopWindow {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  PointId last = 0;
};
template <class TimeOf>
LoopWindow loop_window(const Graph& g, TimeOf&& time, int64_t end, PointId last) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  int64_t h0 = kMax, h1 = kMin;
  PointId h_last = last;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (is_gpu(g.kind[n]) || g.kind[n] == NodeKind::kCollective || !g.counts_for_span(n)) continue;
    h0 = std::min(h0, time(start_point(n)));
    if (time(end_point(n)) > h1) h1 = time(end_point(n)), h_last = end_point(n);
  }
  const int64_t host = h1 > h0 ? h1 - h0 : 0;
  if (!g.queued_ops.empty()) {
    int64_t anchor = kMax;
    for (NodeId n : g.queued_ops) anchor = std::min(anchor, time(start_point(n)));
    return {end - std::max(host, end - anchor), end, last};
  }
  // Each stream's first start and last end (lanes of GPU ops).
  std::vector<int64_t> s0(g.lanes.size(), kMax), s1(g.lanes.size(), kMin);
  std::vector<PointId> s_last(g.lanes.size(), 0);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!is_gpu(g.kind[n]) || !g.counts_for_span(n) || g.lane[n] >= g.lanes.size()) continue;
    const uint32_t l = g.lane[n];
    s0[l] = std::min(s0[l], time(start_point(n)));
    if (time(end_point(n)) > s1[l]) s1[l] = time(end_point(n)), s_last[l] = end_point(n);
  }
  LoopWindow w{h0 == kMax ? end : h0, h1 == kMin ? end : h1, h_last};
  for (size_t l = 0; l < s0.size(); ++l) {
    if (s1[l] != kMin && s1[l] - s0[l] > w.end_ns - w.begin_ns) w = {s0[l], s1[l], s_last[l]};
  }
  return w;
}

// Builds the graph of the given ranks' traces (already windowed to one step).
// Fails on a dependency cycle (names the nodes) or on an empty step.
Result<Graph> build_graph(const std::vector<trace::RankTrace>& ranks, const BuildOptions& options = {});

}  // namespace emo::graph
