// Each process builds the graph of its own ranks (graph::build_part) over dist::local_world, one thread per
// process: every part must be the slice of build_graph()'s whole graph that holds its ranks (nodes, lanes,
// edges with their latencies, the inherent latencies, the step's stats and loop checks), at any number of
// processes, a process with no rank included; and the shards made of the parts must replay as one
// process's Replayer does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "emo/analysis/analysis.h"
#include "emo/dist/dist.h"
#include "emo/graph/part.h"
#include "emo/replay/distributed.h"
#include "emo/replay/replay.h"
#include "emo/synth/synth.h"
#include "synth_workload.h"
#include "test_util.h"

namespace emo {
namespace {

using graph::GraphPart;
using graph::NodeId;
using graph::PointId;

struct Built {
  std::vector<GraphPart> parts;
  std::vector<Status> statuses;
};

// The parts of `ranks` built by `size` processes, each given its dist::shard of the ranks (moved to it,
// and back to `ranks` after).
Built build_parts(std::vector<trace::RankTrace>& ranks, int size, const graph::BuildOptions& options = {}) {
  auto comms = dist::local_world(size);
  std::vector<std::vector<trace::RankTrace>> slices(static_cast<size_t>(size));
  for (int p = 0; p < size; ++p) {
    const auto [b, e] = dist::shard(ranks.size(), p, size);
    for (size_t r = b; r < e; ++r) slices[size_t(p)].push_back(std::move(ranks[r]));
  }
  struct Restore {
    std::vector<trace::RankTrace>& ranks;
    std::vector<std::vector<trace::RankTrace>>& slices;
    ~Restore() {
      size_t r = 0;
      for (auto& slice : slices) {
        for (auto& t : slice) ranks[r++] = std::move(t);
      }
    }
  } restore{ranks, slices};
  Built out;
  out.parts.resize(size_t(size));
  out.statuses.resize(size_t(size));
  std::vector<std::thread> threads;
  for (int p = 0; p < size; ++p) {
    threads.emplace_back([&, p] {
      auto part = graph::build_part(slices[size_t(p)], *comms[size_t(p)], options);
      if (!part) {
        out.statuses[size_t(p)] = part.error();
        return;
      }
      out.parts[size_t(p)] = std::move(*part);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

using EdgeKey = std::tuple<PointId, PointId, int, int64_t>;  // src, dst, kind, latency (whole graph's ids)

PointId global_point(const GraphPart& part, PointId local) {
  return 2 * part.global[graph::node_of(local)] + (local & 1u);
}

// Every part against the whole graph `g`: its nodes, lanes and ranks the slice's, and the edges of all parts
// (each once: at its destination's part) the whole graph's, latencies included.
void expect_slices_of(const graph::Graph& g, const Built& b, const std::string& what) {
  const size_t P = b.parts.size();
  for (size_t p = 0; p < P; ++p) {
    ASSERT_TRUE(b.statuses[p].ok()) << what << ", P = " << P << ", process " << p << ": "
                                    << b.statuses[p].error().message();
  }
  std::vector<int> seen(g.num_nodes(), 0);
  std::vector<EdgeKey> edges, into, out_of;
  for (size_t p = 0; p < P; ++p) {
    const GraphPart& part = b.parts[p];
    const graph::Graph& pg = part.graph;
    const std::string at = what + ", P = " + std::to_string(P) + ", process " + std::to_string(p);
    ASSERT_EQ(part.total_nodes, g.num_nodes()) << at;
    ASSERT_EQ(part.total_lanes, g.lanes.size()) << at;
    ASSERT_EQ(part.total_ranks, g.num_ranks()) << at;
    ASSERT_EQ(part.global.size(), pg.num_nodes()) << at;
    for (NodeId i = 0; i < pg.num_nodes(); ++i) {
      const NodeId n = part.global[i];
      ASSERT_LT(n, g.num_nodes()) << at;
      ++seen[n];
      EXPECT_EQ(pg.kind[i], g.kind[n]) << at << ", node " << n;
      EXPECT_EQ(part.first_rank + pg.rank[i], g.rank[n]) << at << ", node " << n;
      EXPECT_EQ(pg.lane[i] == graph::kNoId ? graph::kNoId : uint32_t(part.lane_base + pg.lane[i]), g.lane[n]) << at;
      EXPECT_EQ(pg.event[i], g.event[n]) << at << ", node " << n;
      EXPECT_EQ(pg.strings.view(pg.name[i]), g.strings.view(g.name[n])) << at << ", node " << n;
      EXPECT_EQ(pg.dur_ns[i], g.dur_ns[n]) << at << ", node " << n;
      EXPECT_EQ(pg.meas_start_ns[i], g.meas_start_ns[n]) << at << ", node " << n;
      EXPECT_EQ(pg.meas_end_ns[i], g.meas_end_ns[n]) << at << ", node " << n;
      EXPECT_EQ(pg.on_waiting_thread[i], g.on_waiting_thread[n]) << at << ", node " << n;
    }
    for (size_t l = 0; l < pg.lanes.size(); ++l) {
      const graph::Lane& a = pg.lanes[l];
      const graph::Lane& w = g.lanes[part.lane_base + l];
      EXPECT_EQ(std::make_tuple(part.first_rank + a.rank, a.gpu, a.pid, a.tid, a.device, a.stream),
                std::make_tuple(size_t(w.rank), w.gpu, w.pid, w.tid, w.device, w.stream))
          << at << ", lane " << l;
    }
    for (size_t r = 0; r < pg.num_ranks(); ++r) {
      EXPECT_EQ(pg.rank_ids[r], g.rank_ids[part.first_rank + r]) << at;
      EXPECT_EQ(pg.rank_paths[r], g.rank_paths[part.first_rank + r]) << at;
      EXPECT_EQ(pg.rank_offset_ns[r], g.rank_offset_ns[part.first_rank + r]) << at << ", rank " << r;
      EXPECT_EQ(pg.step_of_rank[r], g.step_of_rank[part.first_rank + r]) << at;
    }
    EXPECT_TRUE(std::equal(pg.inherent_lat_ns, pg.inherent_lat_ns + graph::kEdgeKinds, g.inherent_lat_ns)) << at;
    EXPECT_TRUE(pg.stats == g.stats) << at << ": the step's counts differ";
    EXPECT_EQ(pg.gpu_tail_loop, g.gpu_tail_loop) << at;
    EXPECT_EQ(part.queued_loop, !g.queued_ops.empty()) << at;
    std::vector<NodeId> queued, expected;
    for (NodeId i : pg.queued_ops) queued.push_back(part.global[i]);
    for (NodeId n : g.queued_ops) {
      if (std::find(part.global.begin(), part.global.end(), n) != part.global.end()) expected.push_back(n);
    }
    std::sort(queued.begin(), queued.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(queued, expected) << at;
    for (const graph::Edge& e : pg.edges) {
      edges.emplace_back(global_point(part, e.src), global_point(part, e.dst), int(e.kind), e.lat_ns);
    }
    for (const graph::RemoteEdge& r : part.remote) {
      EXPECT_NE(r.process, int32_t(p)) << at;
      if (r.into_local) {
        into.emplace_back(r.other, global_point(part, r.local), int(r.kind), r.lat_ns);
      } else {
        out_of.emplace_back(global_point(part, r.local), r.other, int(r.kind), r.lat_ns);
      }
    }
  }
  for (NodeId n = 0; n < g.num_nodes(); ++n) ASSERT_EQ(seen[n], 1) << what << ": node " << n << " in " << seen[n] << " parts";
  std::sort(into.begin(), into.end());
  std::sort(out_of.begin(), out_of.end());
  EXPECT_EQ(into, out_of) << what << ", P = " << P << ": both ends of an edge between processes agree";
  // Every edge of the whole graph between two parts' nodes is one between processes, in both parts.
  std::vector<size_t> part_of(g.num_nodes(), 0);
  for (size_t p = 0; p < P; ++p) {
    for (NodeId n : b.parts[p].global) part_of[n] = p;
  }
  size_t crossing = 0;
  for (const graph::Edge& e : g.edges) crossing += part_of[graph::node_of(e.src)] != part_of[graph::node_of(e.dst)];
  EXPECT_EQ(into.size(), crossing) << what << ", P = " << P;
  edges.insert(edges.end(), into.begin(), into.end());
  std::vector<EdgeKey> whole;
  for (const graph::Edge& e : g.edges) whole.emplace_back(e.src, e.dst, int(e.kind), e.lat_ns);
  std::sort(edges.begin(), edges.end());
  std::sort(whole.begin(), whole.end());
  EXPECT_EQ(edges, whole) << what << ", P = " << P;
}

// The shards made of the parts, replayed over the processes, against one process's Replayer on `g`.
void expect_replay_of_parts(const graph::Graph& g, const Built& b, const std::string& what) {
  const int P = int(b.parts.size());
  replay::Replayer r(g);
  replay::Timeline tl;
  r.run(tl);
  std::vector<int64_t> slack;
  r.slack({}, tl, slack);
  auto comms = dist::local_world(P);
  std::vector<replay::Shard> shards;
  for (const GraphPart& part : b.parts) shards.push_back(replay::make_shard(part));
  std::vector<replay::ShardTimeline> tls(static_cast<size_t>(P));
  std::vector<std::vector<int64_t>> slacks(static_cast<size_t>(P));
  std::vector<replay::CriticalPath> paths(static_cast<size_t>(P));
  std::vector<Status> st(static_cast<size_t>(P));
  std::vector<std::thread> threads;
  for (int p = 0; p < P; ++p) {
    threads.emplace_back([&, p] {
      st[size_t(p)] = replay::run_distributed(shards[size_t(p)], {}, *comms[size_t(p)], tls[size_t(p)]);
      // The slack twice in a row: through the run's order, then in dataflow order (the order dropped).
      if (st[size_t(p)].ok()) {
        st[size_t(p)] = replay::slack_distributed(shards[size_t(p)], {}, tls[size_t(p)], *comms[size_t(p)],
                                                  slacks[size_t(p)]);
      }
      if (st[size_t(p)].ok()) {
        tls[size_t(p)].order.clear();
        std::vector<int64_t> again;
        st[size_t(p)] = replay::slack_distributed(shards[size_t(p)], {}, tls[size_t(p)], *comms[size_t(p)], again);
        if (st[size_t(p)].ok() && again != slacks[size_t(p)]) st[size_t(p)] = make_error("", "the slacks differ");
      }
      if (st[size_t(p)].ok()) {
        auto path = replay::critical_path_distributed(shards[size_t(p)], {}, tls[size_t(p)], *comms[size_t(p)]);
        if (path) paths[size_t(p)] = std::move(*path);
        else st[size_t(p)] = path.error();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> t_ns(g.num_points(), -1), s_ns(g.num_nodes(), -1);
  for (int p = 0; p < P; ++p) {
    ASSERT_TRUE(st[size_t(p)].ok()) << what << ", P = " << P << ": " << st[size_t(p)].error().message();
    const replay::Shard& s = shards[size_t(p)];
    for (uint32_t lp = 0; lp < s.num_points(); ++lp) t_ns[s.global_point(lp)] = tls[size_t(p)].t_ns[lp];
    for (uint32_t i = 0; i < s.num_nodes(); ++i) s_ns[s.nodes[i]] = slacks[size_t(p)][i];
    EXPECT_EQ(tls[size_t(p)].begin_ns, tl.begin_ns) << what << ", P = " << P;
    EXPECT_EQ(tls[size_t(p)].end_ns, tl.end_ns) << what << ", P = " << P;
    EXPECT_EQ(tls[size_t(p)].last_point, tl.last_point) << what << ", P = " << P;
    EXPECT_TRUE(paths[size_t(p)] == r.critical_path({}, tl))
        << what << ", P = " << P << ", process " << p << ": the critical path differs from one process's";
  }
  EXPECT_EQ(t_ns, tl.t_ns) << what << ", P = " << P;
  EXPECT_EQ(s_ns, slack) << what << ", P = " << P;
}

// analysis::analyze_part over the parts against analyze() of the whole step: spans, replay error, critical
// path and GPUs on every process, each part's slack its slice of the whole's.
void expect_analysis_of_parts(const analysis::Workload& w, const Built& b, const std::string& what) {
  const int P = int(b.parts.size());
  const analysis::Analysis whole = analysis::analyze(w);
  auto comms = dist::local_world(P);
  std::vector<Result<analysis::Analysis>> got(size_t(P), make_error("", "not run"));
  std::vector<std::thread> threads;
  for (int p = 0; p < P; ++p) {
    threads.emplace_back([&, p] { got[size_t(p)] = analysis::analyze_part(b.parts[size_t(p)], *comms[size_t(p)]); });
  }
  for (auto& t : threads) t.join();
  for (int p = 0; p < P; ++p) {
    ASSERT_TRUE(got[size_t(p)].ok()) << what << ", P = " << P << ": " << got[size_t(p)].error().message();
    const analysis::Analysis& a = *got[size_t(p)];
    EXPECT_EQ(a.measured_span_ns, whole.measured_span_ns) << what << ", P = " << P;
    EXPECT_EQ(a.replayed_span_ns, whole.replayed_span_ns) << what << ", P = " << P;
    EXPECT_EQ(a.replay_error_pct, whole.replay_error_pct) << what << ", P = " << P;
    EXPECT_TRUE(a.critical_path == whole.critical_path) << what << ", P = " << P << ": the critical path differs";
    EXPECT_TRUE(a.gpus == whole.gpus) << what << ", P = " << P << ": " << a.gpus.size() << " GPUs, the whole step's "
                                      << whole.gpus.size();
    const GraphPart& part = b.parts[size_t(p)];
    ASSERT_EQ(a.slack_ns.size(), part.global.size()) << what;
    for (size_t i = 0; i < part.global.size(); ++i) {
      ASSERT_EQ(a.slack_ns[i], whole.slack_ns[part.global[i]]) << what << ", P = " << P << ", node " << part.global[i];
    }
  }
}

void expect_parts_of(analysis::Workload& w, const std::string& what, std::initializer_list<int> sizes) {
  for (int size : sizes) {
    const Built b = build_parts(w.ranks, size);
    expect_slices_of(w.graph, b, what);
    if (::testing::Test::HasFailure()) return;
    expect_replay_of_parts(w.graph, b, what);
    expect_analysis_of_parts(w, b, what);
  }
}

TEST(GraphPart, OneProcesssPartIsTheWholeGraph) {
  auto w = test::synth_workload(synth::Workload::kTrainTP, 2, 2, 3);
  const Built b = build_parts(w.ranks, 1);
  ASSERT_TRUE(b.statuses[0].ok()) << b.statuses[0].error().message();
  const graph::Graph& pg = b.parts[0].graph;
  EXPECT_TRUE(b.parts[0].remote.empty());
  ASSERT_EQ(pg.edges.size(), w.graph.edges.size());
  for (size_t i = 0; i < pg.edges.size(); ++i) {
    const graph::Edge &a = pg.edges[i], &e = w.graph.edges[i];
    ASSERT_EQ(std::make_tuple(a.src, a.dst, int(a.kind), a.lat_ns), std::make_tuple(e.src, e.dst, int(e.kind), e.lat_ns))
        << "edge " << i;
  }
  EXPECT_EQ(pg.topo, w.graph.topo);
  EXPECT_EQ(pg.in_edges, w.graph.in_edges);
  expect_slices_of(w.graph, b, "train-tp");
}

TEST(GraphPart, EveryProcessCountBuildsTheSlicesOfTheWholeGraph) {
  const std::pair<synth::Workload, const char*> families[] = {{synth::Workload::kTrainDP, "train-dp"},
                                                              {synth::Workload::kTrainPP, "train-pp"},
                                                              {synth::Workload::kTrainTP, "train-tp"}};
  for (const auto& [wl, name] : families) {
    auto w = test::synth_workload(wl, 4, 2, 1);
    ASSERT_GT(w.graph.stats.collectives_matched, 0) << name;
    ASSERT_GT(w.graph.num_ranks(), 1u);
    // P = 5: the last process holds no rank.
    expect_parts_of(w, name, {1, 2, 3, 4, 5});
  }
}

TEST(GraphPart, CollectivesKeptWholeAlignRanksAtTheirFirstEvent) {
  auto w = test::synth_workload(synth::Workload::kTrainDP, 3, 2, 2);
  graph::BuildOptions whole_kernels;
  whole_kernels.split_collectives = false;
  auto g = graph::build_graph(w.ranks, whole_kernels);
  ASSERT_TRUE(g.ok()) << g.error().message();
  ASSERT_EQ(g->stats.collectives_matched, 0);
  for (int size : {2, 3}) {
    const Built b = build_parts(w.ranks, size, whole_kernels);
    expect_slices_of(*g, b, "train-dp, collectives whole");
  }
}

// Two jobs of two ranks each in one step (ranks 2 and 3's collectives in a process group of their own, their
// clock 3 ms later): ranks 2 and 3 share no collective with rank 0, so they start with it, and their
// collectives, owned by rank 2's process, move with rank 2; two groups of ranks are counted.
TEST(GraphPart, RanksAlignedWithoutRankZeroMoveTheirCollectives) {
  auto w = test::synth_workload(synth::Workload::kTrainDP, 4, 2, 4);
  for (size_t r = 2; r < 4; ++r) {
    trace::RankTrace& t = w.ranks[r];
    const StrId other = t.strings.intern("the other job");
    for (trace::CollectiveArgs& c : t.collectives) c.process_group = other;
    t.origin_ns += 3'000'000;
  }
  auto g = graph::build_graph(w.ranks);
  ASSERT_TRUE(g.ok()) << g.error().message();
  ASSERT_EQ(g->stats.rank_groups, 2);
  ASSERT_NE(g->rank_offset_ns[2], 0) << "rank 2 aligned at its first event";
  ASSERT_EQ(g->stats.notes.size(), 1u);
  for (int size : {2, 3, 4}) {
    const Built b = build_parts(w.ranks, size);
    expect_slices_of(*g, b, "two jobs");
    if (HasFailure()) return;
    expect_replay_of_parts(*g, b, "two jobs");
  }
}

TEST(GraphPart, TheEightRankDlrmStepIsSliced) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  auto files = analysis::expand_trace_paths({dir});
  ASSERT_TRUE(files.ok()) << files.error().message();
  auto w = test::workload_of_files(*files);
  ASSERT_EQ(w.graph.num_ranks(), 8u);
  expect_parts_of(w, "dlrm", {2, 3, 8});
}

// One rank each: the loop checks (queued ops, a free GPU tail) reduced with a process that holds no rank.
TEST(GraphPart, RealLoopsKeepTheirPeriodWithAnEmptyProcess) {
  EMO_REQUIRE_SHARED(queued, "traces/hta/tests/data/negative_queue_length_values_check/rank0.json.gz");
  EMO_REQUIRE_SHARED(tail, "traces/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz");
  for (const std::string& path : {queued, tail}) {
    auto w = test::workload_of_files({path});
    ASSERT_TRUE(w.graph.loop_period()) << path;
    expect_parts_of(w, path, {1, 2});
  }
}

TEST(GraphPart, FailuresEndEveryProcess) {
  // No rank anywhere: every process says so.
  std::vector<trace::RankTrace> no_ranks;
  const Built none = build_parts(no_ranks, 2);
  for (const Status& s : none.statuses) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().what, "no trace given");
  }
  // A process that never builds: the other's wait is bounded.
  auto w = test::synth_workload(synth::Workload::kTrainDP, 2, 1, 1);
  std::vector<trace::RankTrace> first;
  first.push_back(std::move(w.ranks[0]));
  auto comms = dist::local_world(2);
  setenv("EMO_MPI_TIMEOUT_S", "0.3", 1);
  auto part = graph::build_part(first, *comms[0]);
  unsetenv("EMO_MPI_TIMEOUT_S");
  ASSERT_FALSE(part.ok());
  EXPECT_NE(part.error().message().find("process 1 sent nothing for 0.3 s"), std::string::npos)
      << part.error().message();
}

}  // namespace
}  // namespace emo
