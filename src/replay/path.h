// The critical path's walk, shared by one process's Replayer and the replay shared by processes: the
// categories of its breakdown, which of several binding dependencies it follows, and what each step of
// the walk (backward, from the step's end) adds to the path.
#pragma once

#include <cstdint>

#include "emo/replay/replay.h"

namespace emo::replay::detail {

// The breakdown's categories, in this order; a node or a dependency adds to one of them.
enum Category : uint8_t { kGpuCompute, kCommunication, kGpuMemory, kCpu, kLaunchOverhead, kSyncWait, kIdle };
inline constexpr int kCategoryCount = 7;
inline constexpr const char* kCategories[kCategoryCount] = {"gpu_compute",     "communication", "gpu_memory", "cpu",
                                                            "launch_overhead", "sync_wait",     "idle"};

inline Category node_category(graph::NodeKind k) {
  using graph::NodeKind;
  switch (k) {
    case NodeKind::kKernel: return kGpuCompute;
    case NodeKind::kCommKernel:
    case NodeKind::kCollective: return kCommunication;
    case NodeKind::kMemcpy:
    case NodeKind::kMemset: return kGpuMemory;
    case NodeKind::kCpuOp:
    case NodeKind::kCpuGap:
    case NodeKind::kRuntime:
    case NodeKind::kSyncCall: return kCpu;
    case NodeKind::kCpuWait: return kSyncWait;  // blocked, not working
  }
  return kCpu;
}

inline Category edge_category(graph::EdgeKind k) {
  using graph::EdgeKind;
  switch (k) {
    case EdgeKind::kLaunch: return kLaunchOverhead;
    case EdgeKind::kSync: return kSyncWait;
    case EdgeKind::kCollective: return kCommunication;
    case EdgeKind::kThread:
    case EdgeKind::kCrossThread: return kCpu;
    case EdgeKind::kStream:
    case EdgeKind::kCrossStream: return kIdle;
  }
  return kIdle;
}

// Of several dependencies that bind a point, the path follows the one of the first kind in this order
// (program order, then the GPU's own order, then what made the GPU wait for the host, ...), and of those
// the one from the lowest point (global id): a choice that does not depend on the order the edges were
// made in (a graph built in parts makes them in another order than the whole graph's builder).
inline int bind_rank(graph::EdgeKind k) {
  using graph::EdgeKind;
  switch (k) {
    case EdgeKind::kThread: return 0;
    case EdgeKind::kStream: return 1;
    case EdgeKind::kLaunch: return 2;
    case EdgeKind::kCrossStream: return 3;
    case EdgeKind::kSync: return 4;
    case EdgeKind::kCrossThread: return 5;
    case EdgeKind::kCollective: return 6;
  }
  return 7;
}
inline bool binds_before(graph::PointId a, graph::EdgeKind ka, graph::PointId b, graph::EdgeKind kb) {
  return bind_rank(ka) < bind_rank(kb) || (ka == kb && a < b);
}

// The path as the walk finds it, from its end backward (reversed at the end).
struct PathWalk {
  CriticalPath cp;
  graph::NodeId last_node = graph::kNoId;
  int64_t breakdown[kCategoryCount] = {0, 0, 0, 0, 0, 0, 0};

  // Node `n` (global) ran from `start` to `start + ns` on the path.
  void node(graph::NodeId n, graph::NodeKind kind, int64_t start, int64_t ns) {
    enter(n);
    breakdown[node_category(kind)] += ns;
    cp.segments.push_back({n, graph::kNoId, false, graph::EdgeKind::kThread, start, ns});
  }
  // Point `p` of node `n` is bound by a dependency of `kind` from node `from` at `src_t`, `gap` before it.
  // Only the latency this kind of dependency inherently has is overhead; the rest of a binding gap is time
  // nothing in the trace explains (idle). Between CPU points (thread order, one thread waking another) the
  // whole gap is host time.
  void edge(graph::PointId p, graph::NodeId n, graph::NodeId from, graph::EdgeKind kind, int64_t src_t, int64_t gap,
            int64_t inherent_lat) {
    if (graph::is_end(p)) enter(n);
    const int64_t inherent = gap < inherent_lat ? gap : inherent_lat;
    const bool host = kind == graph::EdgeKind::kThread || kind == graph::EdgeKind::kCrossThread;
    breakdown[edge_category(kind)] += host ? gap : inherent;
    if (!host) breakdown[kIdle] += gap - inherent;
    if (gap > 0) cp.segments.push_back({n, from, true, kind, src_t, gap});
  }
  // The path begins at an anchored start `idle_before` after the step's begin.
  void anchor(int64_t idle_before) { breakdown[kIdle] += idle_before; }

 private:
  void enter(graph::NodeId n) {
    if (n != last_node) cp.nodes.push_back(n);
    last_node = n;
  }
};

// The breakdown as CriticalPath holds it.
inline std::vector<CriticalPath::Part> breakdown_parts(const int64_t (&breakdown)[kCategoryCount]) {
  std::vector<CriticalPath::Part> parts;
  for (int c = 0; c < kCategoryCount; ++c) parts.push_back({kCategories[c], breakdown[c]});
  return parts;
}

}  // namespace emo::replay::detail
