// CUDA Graphs on real traces (docs/replay.md "CUDA Graphs"): the ops of one cudaGraphLaunch all hang on
// that call by correlation, keep their recorded order on their stream, the first op keeps the launch's
// latency from the call (also when a what-if drains the queue it waited in), and a what-if that slows
// one op of a graph delays the ops after it.
// HTA's trace_diff/test (torch.compile with CUDA graphs: 12 launches of 339 or 502 ops) and
// negative_queue_length_values_check (70 launches of one or two ops) are the traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/replay/replay.h"
#include "emo/trace/runtime_calls.h"
#include "test_util.h"

namespace emo {
namespace {

using graph::EdgeKind;
using graph::NodeId;

struct GraphLaunch {
  NodeId call = graph::kNoId;
  std::vector<NodeId> ops;  // by measured start
  std::vector<int64_t> lat_ns;  // launch edge latency of each op
};

std::vector<GraphLaunch> graph_launches(const graph::Graph& g) {
  std::map<NodeId, GraphLaunch> by_call;
  for (const auto& e : g.edges) {
    if (e.kind != EdgeKind::kLaunch) continue;
    const NodeId call = graph::node_of(e.src);
    if (trace::classify_runtime_call(g.strings.view(g.name[call])) != trace::RuntimeCall::kGraphLaunch) continue;
    GraphLaunch& gl = by_call[call];
    gl.call = call;
    gl.ops.push_back(graph::node_of(e.dst));
    gl.lat_ns.push_back(e.lat_ns);
  }
  std::vector<GraphLaunch> out;
  for (auto& [call, gl] : by_call) {
    std::vector<size_t> order(gl.ops.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return g.meas_start_ns[gl.ops[a]] < g.meas_start_ns[gl.ops[b]]; });
    GraphLaunch sorted;
    sorted.call = call;
    for (size_t i : order) {
      sorted.ops.push_back(gl.ops[i]);
      sorted.lat_ns.push_back(gl.lat_ns[i]);
    }
    out.push_back(std::move(sorted));
  }
  return out;
}

bool has_edge(const graph::Graph& g, EdgeKind kind, graph::PointId src, graph::PointId dst) {
  for (uint32_t k = g.in_offsets[dst]; k < g.in_offsets[dst + 1]; ++k) {
    const graph::Edge& e = g.edges[g.in_edges[k]];
    if (e.kind == kind && e.src == src) return true;
  }
  return false;
}

// The op that ran on `op`'s stream right before it (kNoId if none), by the stream edge into its start.
NodeId stream_predecessor(const graph::Graph& g, NodeId op) {
  const graph::PointId p = graph::start_point(op);
  for (uint32_t k = g.in_offsets[p]; k < g.in_offsets[p + 1]; ++k) {
    const graph::Edge& e = g.edges[g.in_edges[k]];
    if (e.kind == EdgeKind::kStream) return graph::node_of(e.src);
  }
  return graph::kNoId;
}

void check_graph_trace(const std::string& path, int want_launches) {
  auto w = analysis::load({path}, {});
  ASSERT_TRUE(w.ok()) << w.error().message();
  const graph::Graph& g = w->graph;
  const std::vector<GraphLaunch> launches = graph_launches(g);
  ASSERT_GE(static_cast<int>(launches.size()), want_launches);
  replay::Replayer rp(g);
  replay::Timeline base;
  rp.run(base);
  int launch_bound = 0, queued = 0, slowed = 0;
  for (const GraphLaunch& gl : launches) {
    SCOPED_TRACE("graph launch at " + std::to_string(g.meas_start_ns[gl.call]) + " ns, " +
                 std::to_string(gl.ops.size()) + " ops");
    // All of its ops carry its correlation.
    const auto& t = w->ranks[g.rank[gl.call]];
    for (NodeId op : gl.ops) EXPECT_EQ(t.events[g.event[op]].correlation, t.events[g.event[gl.call]].correlation);
    // Recorded order on each stream: consecutive ops of the launch on one stream are chained
    // end -> start by a stream edge, with nothing in between.
    std::map<uint32_t, NodeId> last_on_lane;
    for (NodeId op : gl.ops) {
      auto it = last_on_lane.find(g.lane[op]);
      if (it != last_on_lane.end()) {
        EXPECT_TRUE(has_edge(g, EdgeKind::kStream, graph::end_point(it->second), graph::start_point(op)))
            << g.strings.view(g.name[op]);
        EXPECT_LE(g.meas_end_ns[it->second], g.meas_start_ns[op] + 2000);
      }
      last_on_lane[g.lane[op]] = op;
    }
    // The launch's latency. Where the launch edge is what held the first op (the stream was idle),
    // it keeps the whole measured gap from the call; where the op queued behind earlier work, it
    // keeps the latency of a launch onto an idle queue (the trace's launch latency), so that a
    // what-if that drains the queue still starts the graph no earlier than that after the call.
    const NodeId first = gl.ops.front();
    const int64_t gap = g.meas_start_ns[first] - g.meas_start_ns[gl.call];
    const int64_t lat = gl.lat_ns.front();
    EXPECT_EQ(base.start(first), g.meas_start_ns[first]);
    if (base.start(first) == base.start(gl.call) + lat) {
      EXPECT_EQ(lat, gap);
      ++launch_bound;
    } else {
      EXPECT_EQ(lat, std::min(gap, g.inherent_lat_ns[static_cast<int>(EdgeKind::kLaunch)]));
      EXPECT_GT(lat, 0);
      // Drain the queue: every op on the stream before the graph's first op takes no time.
      std::vector<int64_t> drained = g.dur_ns;
      for (NodeId p = stream_predecessor(g, first); p != graph::kNoId; p = stream_predecessor(g, p)) drained[p] = 0;
      replay::Timeline dt;
      rp.run(drained, dt);
      EXPECT_GE(dt.start(first), dt.start(gl.call) + lat);
      EXPECT_LE(dt.start(first), base.start(first));
      ++queued;
    }
    // A what-if: the middle op of the launch takes 1 ms longer; every later op of the launch on its
    // stream starts after it ends, later than before, and the ops before it do not move.
    if (gl.ops.size() < 2) continue;
    const size_t k = (gl.ops.size() - 1) / 2;
    const NodeId slow = gl.ops[k];
    std::vector<int64_t> dur = g.dur_ns;
    dur[slow] += 1'000'000;
    replay::Timeline tl;
    rp.run(dur, tl);
    for (size_t i = 0; i < gl.ops.size(); ++i) {
      const NodeId op = gl.ops[i];
      if (i < k) {
        EXPECT_EQ(tl.start(op), base.start(op));
      } else if (i > k && g.lane[op] == g.lane[slow]) {
        EXPECT_GE(tl.start(op), tl.end(slow));
        EXPECT_GT(tl.start(op), base.start(op));
      }
    }
    // The step takes longer; a loop whose GPU runs behind its host (queued_ops) takes its host's period
    // while its GPU's work still fits in it.
    if (g.queued_ops.empty()) {
      EXPECT_GT(tl.makespan_ns(), base.makespan_ns());
    } else {
      EXPECT_GE(tl.makespan_ns(), base.makespan_ns());
    }
    ++slowed;
  }
  EXPECT_EQ(launch_bound + queued, static_cast<int>(launches.size()));
  EXPECT_GT(slowed, 0);
  auto a = analysis::analyze(*w);
  EXPECT_LE(std::abs(a.replay_error_pct), 1.0);
}

TEST(CudaGraphs, TorchCompileGraphLaunchesKeepOrderAndLatency) {
  EMO_REQUIRE_SHARED(path, "traces/hta/tests/data/trace_diff/test/test.json.gz");
  check_graph_trace(path, 1);
}

TEST(CudaGraphs, SmallGraphLaunchesKeepOrderAndLatency) {
  EMO_REQUIRE_SHARED(path, "traces/hta/tests/data/negative_queue_length_values_check/rank0.json.gz");
  check_graph_trace(path, 1);
}

}  // namespace
}  // namespace emo
