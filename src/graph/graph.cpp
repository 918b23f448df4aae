// Small Graph helpers: names of kinds, measured span.
#include <algorithm>
#include <limits>

#include "emo/graph/graph.h"

namespace emo::graph {

const char* to_string(NodeKind k) {
  switch (k) {
    case NodeKind::kCpuOp: return "cpu_op";
    case NodeKind::kCpuGap: return "cpu_gap";
    case NodeKind::kRuntime: return "runtime";
    case NodeKind::kSyncCall: return "sync_call";
    case NodeKind::kKernel: return "kernel";
    case NodeKind::kCommKernel: return "comm_kernel";
    case NodeKind::kMemcpy: return "memcpy";
    case NodeKind::kMemset: return "memset";
    case NodeKind::kCollective: return "collective";
    case NodeKind::kCpuWait: return "cpu_wait";
  }
  return "?";
}

const char* to_string(EdgeKind k) {
  switch (k) {
    case EdgeKind::kThread: return "thread";
    case EdgeKind::kLaunch: return "launch";
    case EdgeKind::kStream: return "stream";
    case EdgeKind::kCrossStream: return "cross_stream";
    case EdgeKind::kSync: return "sync";
    case EdgeKind::kCollective: return "collective";
    case EdgeKind::kCrossThread: return "cross_thread";
  }
  return "?";
}

int64_t Graph::measured_begin_ns() const {
  int64_t v = std::numeric_limits<int64_t>::max();
  for (NodeId n = 0; n < meas_start_ns.size(); ++n) {
    if (counts_for_span(n)) v = std::min(v, meas_start_ns[n]);
  }
  return v == std::numeric_limits<int64_t>::max() ? 0 : v;
}

int64_t Graph::measured_end_ns() const {
  int64_t v = std::numeric_limits<int64_t>::min();
  for (NodeId n = 0; n < meas_end_ns.size(); ++n) {
    if (counts_for_span(n)) v = std::max(v, meas_end_ns[n]);
  }
  return v == std::numeric_limits<int64_t>::min() ? 0 : v;
}

int64_t Graph::measured_span_ns() const {
  const int64_t end = measured_end_ns(), begin = measured_begin_ns();
  if (!loop_period()) return end - begin;
  const LoopWindow w = loop_window(
      *this, [&](PointId p) { return is_end(p) ? meas_end_ns[node_of(p)] : meas_start_ns[node_of(p)]; }, end, 0);
  return w.end_ns - w.begin_ns;
}

}  // namespace emo::graph
