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
  }
  return "?";
}

int64_t Graph::measured_begin_ns() const {
  if (meas_start_ns.empty()) return 0;
  return *std::min_element(meas_start_ns.begin(), meas_start_ns.end());
}

int64_t Graph::measured_end_ns() const {
  if (meas_end_ns.empty()) return 0;
  return *std::max_element(meas_end_ns.begin(), meas_end_ns.end());
}

}  // namespace emo::graph
