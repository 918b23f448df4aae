// The replay shared by processes (replay::run_distributed, slack_distributed) over dist::local_world, one
// thread per process: each process's times, the step's span and every node's slack must be one process's
// Replayer's, bit for bit, at any number of processes, with what-ifs that move the step and with a loop's
// period; a process that never answers ends the run with an error, not a hang.
#include <gtest/gtest.h>

#include <array>

#include <cstdlib>
#include <set>
#include <thread>

#include "emo/analysis/analysis.h"
#include "emo/dist/dist.h"
#include "emo/replay/distributed.h"
#include "emo/replay/replay.h"
#include "emo/synth/synth.h"
#include "synth_workload.h"
#include "test_util.h"

namespace emo {
namespace {

graph::Graph synth_graph(synth::Workload wl, int ranks) {
  return std::move(test::synth_workload(wl, ranks, 2, 1).graph);
}

struct Shared {
  std::vector<int64_t> t_ns, slack_ns;  // global, gathered from the processes
  std::vector<replay::CriticalPath> paths;  // each process's
  replay::ShardTimeline span;           // process 0's span
  bool same_span_everywhere = true;
  int64_t messages = 0, waits = 0;
  std::vector<Status> statuses;
};

// The replay of `g` with durations `dur` (global; empty: the graph's) shared by `size` processes.
Shared distributed(const graph::Graph& g, const std::vector<int64_t>& dur, int size,
                   std::vector<int32_t> owner = {}) {
  if (owner.empty()) owner = replay::owners(g, size);
  auto comms = dist::local_world(size);
  std::vector<replay::Shard> shards;
  for (int p = 0; p < size; ++p) shards.push_back(replay::make_shard(g, owner, p, size));
  std::vector<replay::ShardTimeline> tls(static_cast<size_t>(size));
  std::vector<std::vector<int64_t>> slacks(static_cast<size_t>(size));
  Shared out;
  out.statuses.resize(size_t(size));
  out.paths.resize(size_t(size));
  std::vector<std::thread> threads;
  for (int p = 0; p < size; ++p) {
    threads.emplace_back([&, p] {
      const replay::Shard& s = shards[size_t(p)];
      std::vector<int64_t> local;
      if (!dur.empty()) {
        for (graph::NodeId n : s.nodes) local.push_back(dur[n]);
      }
      // The first run on the shard goes in dataflow order and keeps it; the second (the what-if) and the
      // slack go through that order.
      Status st = replay::run_distributed(s, {}, *comms[size_t(p)], tls[size_t(p)]);
      if (st.ok() && tls[size_t(p)].order.size() != s.num_points()) st = make_error("", "no order kept");
      if (st.ok()) st = replay::run_distributed(s, local, *comms[size_t(p)], tls[size_t(p)]);
      if (st.ok()) st = replay::slack_distributed(s, local, tls[size_t(p)], *comms[size_t(p)], slacks[size_t(p)]);
      if (st.ok()) {
        auto path = replay::critical_path_distributed(s, local, tls[size_t(p)], *comms[size_t(p)]);
        if (path) out.paths[size_t(p)] = std::move(*path);
        else st = path.error();
      }
      out.statuses[size_t(p)] = st;
    });
  }
  for (auto& t : threads) t.join();
  out.t_ns.assign(g.num_points(), -1);
  out.slack_ns.assign(g.num_nodes(), -1);
  for (int p = 0; p < size; ++p) {
    const replay::Shard& s = shards[size_t(p)];
    const auto& tl = tls[size_t(p)];
    if (!out.statuses[size_t(p)].ok()) continue;
    for (uint32_t lp = 0; lp < s.num_points(); ++lp) out.t_ns[s.global_point(lp)] = tl.t_ns[lp];
    for (uint32_t i = 0; i < s.num_nodes(); ++i) out.slack_ns[s.nodes[i]] = slacks[size_t(p)][i];
    out.same_span_everywhere &= tl.begin_ns == tls[0].begin_ns && tl.end_ns == tls[0].end_ns &&
                                tl.last_point == tls[0].last_point;
    out.messages += tl.messages_sent;
    out.waits += tl.waits;
  }
  out.span = tls[0];
  return out;
}

// Every process's answer against one process's Replayer.
// Returns how many processes hold the nodes of the critical path.
size_t expect_same_as_one_process(const graph::Graph& g, const std::vector<int64_t>& dur, int size,
                                  const std::string& what, const std::vector<int32_t>& owner = {}) {
  replay::Replayer r(g);
  replay::Timeline tl;
  r.run(dur, tl);
  std::vector<int64_t> slack;
  r.slack(dur, tl, slack);
  const Shared d = distributed(g, dur, size, owner);
  for (int p = 0; p < size; ++p) {
    if (!d.statuses[size_t(p)].ok()) {
      ADD_FAILURE() << what << ", P = " << size << ", process " << p << ": " << d.statuses[size_t(p)].error().message();
      return 0;
    }
  }
  EXPECT_EQ(d.t_ns, tl.t_ns) << what << ", P = " << size;
  EXPECT_EQ(d.span.begin_ns, tl.begin_ns) << what << ", P = " << size;
  EXPECT_EQ(d.span.end_ns, tl.end_ns) << what << ", P = " << size;
  EXPECT_EQ(d.span.last_point, tl.last_point) << what << ", P = " << size;
  EXPECT_TRUE(d.same_span_everywhere) << what << ", P = " << size;
  EXPECT_EQ(d.slack_ns, slack) << what << ", P = " << size;
  const replay::CriticalPath path = r.critical_path(dur, tl);
  EXPECT_GT(path.segments.size(), 1u) << what;
  // The processes that hold the path's nodes: from 2, its walk went from process to process.
  const std::vector<int32_t> own = owner.empty() ? replay::owners(g, size) : owner;
  std::set<int32_t> holders;
  for (graph::NodeId n : path.nodes) holders.insert(own[n]);
  for (int p = 0; p < size; ++p) {
    EXPECT_TRUE(d.paths[size_t(p)] == path) << what << ", P = " << size << ", process " << p << ": a path of "
                                            << d.paths[size_t(p)].nodes.size() << " nodes, "
                                            << d.paths[size_t(p)].segments.size() << " segments; one process's "
                                            << path.nodes.size() << ", " << path.segments.size();
  }
  if (size > 1 && (g.num_ranks() > 1 || !owner.empty())) {
    EXPECT_GT(d.messages, 0) << what << ", P = " << size << ": the ranks' collectives cross processes";
  }
  return holders.size();
}

// Every GPU op of rank `rank` `factor` times as long: a straggler that moves the step through collectives.
std::vector<int64_t> straggler(const graph::Graph& g, uint32_t rank, double factor) {
  std::vector<int64_t> dur = g.dur_ns;
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (graph::is_gpu(g.kind[n]) && g.rank[n] == rank) dur[n] = int64_t(double(dur[n]) * factor);
  }
  return dur;
}

TEST(DistributedReplay, EveryProcessCountGivesOneProcessTimesSpanAndSlack) {
  const std::pair<synth::Workload, const char*> families[] = {{synth::Workload::kTrainDP, "train-dp"},
                                                              {synth::Workload::kTrainPP, "train-pp"},
                                                              {synth::Workload::kTrainTP, "train-tp"}};
  for (const auto& [wl, name] : families) {
    const graph::Graph g = synth_graph(wl, 4);
    ASSERT_GT(g.num_nodes(), 0u) << name;
    ASSERT_GT(g.stats.collectives_matched, 0) << name;
    const auto slow = straggler(g, 1, 1.5);
    // The what-if moves the step: comparing it is not comparing the measured times again.
    replay::Replayer r(g);
    replay::Timeline base, moved;
    r.run(base);
    r.run(slow, moved);
    ASSERT_GT(moved.makespan_ns(), base.makespan_ns()) << name;
    size_t holders = 0;
    for (int size : {1, 2, 3, 4, 8}) {
      holders = std::max(holders, expect_same_as_one_process(g, {}, size, name));
      holders = std::max(holders, expect_same_as_one_process(g, slow, size, std::string(name) + " with rank 1 slower"));
    }
    EXPECT_GT(holders, 1u) << name << ": the critical path's walk never went from one process to another";
  }
}

// Several plans replayed side by side in one sweep (run_distributed_batch): each plan's times and span are
// its own run's (one process's Replayer), the first batch in dataflow order (kept), the next in that order,
// with fewer messages than the plans' own runs.
TEST(DistributedReplay, PlansSideBySideAreEachOnesOwnRun) {
  for (auto wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    const graph::Graph g = synth_graph(wl, 4);
    const std::vector<std::vector<int64_t>> plans{g.dur_ns, straggler(g, 1, 1.5), straggler(g, 2, 0.7),
                                                  straggler(g, 0, 1.2)};
    replay::Replayer r(g);
    std::vector<replay::Timeline> want(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) r.run(plans[i], want[i]);
    ASSERT_NE(want[1].t_ns, want[0].t_ns);
    for (int size : {1, 2, 3}) {
      const std::string at = std::string(synth::workload_name(wl)) + ", P = " + std::to_string(size);
      const std::vector<int32_t> owner = replay::owners(g, size);
      auto comms = dist::local_world(size);
      std::vector<replay::Shard> shards;
      for (int p = 0; p < size; ++p) shards.push_back(replay::make_shard(g, owner, p, size));
      // Per process and round (dataflow, then ordered): each plan's timeline.
      std::vector<std::array<std::vector<replay::ShardTimeline>, 2>> got(static_cast<size_t>(size));
      std::vector<Status> st(static_cast<size_t>(size));
      std::vector<int64_t> batch_messages(static_cast<size_t>(size)), own_messages(static_cast<size_t>(size));
      std::vector<std::thread> threads;
      for (int p = 0; p < size; ++p) {
        threads.emplace_back([&, p] {
          const replay::Shard& s = shards[size_t(p)];
          std::vector<std::vector<int64_t>> local(plans.size());
          for (size_t i = 0; i < plans.size(); ++i) {
            for (graph::NodeId n : s.nodes) local[i].push_back(plans[i][n]);
          }
          std::vector<uint32_t> order;
          uint64_t order_of = 0;
          Status& me = st[size_t(p)];
          me = replay::run_distributed_batch(s, local, *comms[size_t(p)], order, order_of, got[size_t(p)][0]);
          if (me.ok() && order.size() != s.num_points()) me = make_error("", "no order kept");
          if (me.ok()) me = replay::run_distributed_batch(s, local, *comms[size_t(p)], order, order_of, got[size_t(p)][1]);
          if (!me.ok()) return;
          batch_messages[size_t(p)] = got[size_t(p)][1].front().messages_sent;
          for (const auto& d : local) {
            replay::ShardTimeline one;
            one.order = order;
            one.order_of = order_of;
            if (me.ok()) me = replay::run_distributed(s, d, *comms[size_t(p)], one);
            own_messages[size_t(p)] += one.messages_sent;
          }
        });
      }
      for (auto& t : threads) t.join();
      int64_t batch_sent = 0, own_sent = 0;
      for (int p = 0; p < size; ++p) {
        ASSERT_TRUE(st[size_t(p)].ok()) << at << ", process " << p << ": " << st[size_t(p)].error().message();
        batch_sent += batch_messages[size_t(p)];
        own_sent += own_messages[size_t(p)];
      }
      for (int round = 0; round < 2; ++round) {
        for (size_t i = 0; i < plans.size(); ++i) {
          std::vector<int64_t> t(g.num_points(), -1);
          for (int p = 0; p < size; ++p) {
            const replay::Shard& s = shards[size_t(p)];
            const replay::ShardTimeline& tl = got[size_t(p)][size_t(round)].at(i);
            ASSERT_EQ(tl.t_ns.size(), s.num_points()) << at;
            for (uint32_t lp = 0; lp < s.num_points(); ++lp) t[s.global_point(lp)] = tl.t_ns[lp];
            EXPECT_EQ(tl.begin_ns, want[i].begin_ns) << at << ", plan " << i << ", process " << p;
            EXPECT_EQ(tl.end_ns, want[i].end_ns) << at << ", plan " << i << ", process " << p;
            EXPECT_EQ(tl.last_point, want[i].last_point) << at << ", plan " << i << ", process " << p;
          }
          EXPECT_EQ(t, want[i].t_ns) << at << ", round " << round << ", plan " << i;
        }
      }
      if (size > 1) {
        EXPECT_LT(batch_sent, own_sent) << at;
      }
    }
  }
}

TEST(DistributedReplay, ALoopsPeriodIsOneProcesss) {
  const graph::Graph g = synth_graph(synth::Workload::kTrainDP, 4);
  ASSERT_GT(g.num_nodes(), 0u);
  // The same graph timed as a loop whose GPU tail runs free, and as one whose first GPU op of each rank
  // waited on the step before's work: the period's window and the slack's bounds come from every process.
  graph::Graph tail = synth_graph(synth::Workload::kTrainDP, 4);
  tail.gpu_tail_loop = true;
  graph::Graph queued = synth_graph(synth::Workload::kTrainDP, 4);
  ASSERT_EQ(tail.num_nodes(), g.num_nodes());
  ASSERT_EQ(queued.num_nodes(), g.num_nodes());
  std::vector<uint8_t> seen(g.num_ranks(), 0);
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (graph::is_gpu(g.kind[n]) && !seen[g.rank[n]]) seen[g.rank[n]] = 1, queued.queued_ops.push_back(n);
  }
  ASSERT_EQ(queued.queued_ops.size(), g.num_ranks());
  const auto slow = straggler(g, 2, 2.0);
  for (int size : {1, 2, 4}) {
    expect_same_as_one_process(tail, {}, size, "free GPU tail");
    expect_same_as_one_process(tail, slow, size, "free GPU tail, rank 2 slower");
    expect_same_as_one_process(queued, {}, size, "queued ops");
    expect_same_as_one_process(queued, slow, size, "queued ops, rank 2 slower");
  }
}

// Nodes dealt to processes at random: any partition is a shard's, a GPU stream's ops among several processes.
std::vector<int32_t> random_owners(const graph::Graph& g, int size, uint32_t seed) {
  std::vector<int32_t> owner(g.num_nodes());
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& o : owner) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    o = int32_t(x % uint64_t(size));
  }
  return owner;
}

// Every GPU op `factor` times as long (the host unchanged): the GPU's streams outlast the host.
std::vector<int64_t> slower_gpu(const graph::Graph& g, double factor) {
  std::vector<int64_t> dur = g.dur_ns;
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (graph::is_gpu(g.kind[n])) dur[n] = int64_t(double(dur[n]) * factor);
  }
  return dur;
}

TEST(DistributedReplay, AnyPartitionOfTheNodesGivesOneProcesss) {
  const graph::Graph g = synth_graph(synth::Workload::kTrainPP, 4);
  ASSERT_GT(g.num_nodes(), 0u);
  for (uint32_t seed : {1u, 2u}) {
    for (int size : {2, 5}) {
      const auto owner = random_owners(g, size, seed);
      expect_same_as_one_process(g, {}, size, "train-pp dealt at random", owner);
      expect_same_as_one_process(g, straggler(g, 3, 1.7), size, "train-pp dealt at random, rank 3 slower", owner);
    }
  }
}

// Real loops timed by their period, one rank each, dealt at random among processes: the queued copy of
// HTA's negative_queue rank 0 (the period from its first queued op) and the Kineto ResNet-50 sample whose
// GPU runs 11 ms past its host (the longest stream's span), with the GPU 3× slower (its streams then outlast the host).
TEST(DistributedReplay, RealLoopsPeriodsDealtAtRandomAreOneProcesss) {
  EMO_REQUIRE_SHARED(queued, "traces/hta/tests/data/negative_queue_length_values_check/rank0.json.gz");
  EMO_REQUIRE_SHARED(tail, "traces/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz");
  for (const std::string& path : {queued, tail}) {
    auto w = analysis::load({path}, {});
    ASSERT_TRUE(w.ok()) << w.error().message();
    const graph::Graph& g = w->graph;
    ASSERT_TRUE(g.loop_period()) << path;
    for (int size : {2, 4}) {
      const auto owner = random_owners(g, size, uint32_t(size));
      expect_same_as_one_process(g, {}, size, path, owner);
      expect_same_as_one_process(g, slower_gpu(g, 3.0), size, path + ", GPU 3x slower", owner);
      expect_same_as_one_process(g, slower_gpu(g, 0.5), size, path + ", GPU 2x faster", owner);
    }
  }
}

TEST(DistributedReplay, TheEightRankDlrmStepIsOneProcesss) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  auto files = analysis::expand_trace_paths({dir});
  ASSERT_TRUE(files.ok()) << files.error().message();
  auto w = analysis::load(*files, {});
  ASSERT_TRUE(w.ok()) << w.error().message();
  ASSERT_EQ(w->graph.num_ranks(), 8u);
  const auto slow = straggler(w->graph, 5, 1.3);
  for (int size : {2, 3, 8}) {
    expect_same_as_one_process(w->graph, {}, size, "dlrm");
    expect_same_as_one_process(w->graph, slow, size, "dlrm, rank 5 slower");
  }
}

TEST(DistributedReplay, AProcessThatNeverAnswersEndsTheRunWithAnError) {
  const graph::Graph g = synth_graph(synth::Workload::kTrainDP, 2);
  ASSERT_GT(g.num_nodes(), 0u);
  const auto owner = replay::owners(g, 2);
  auto comms = dist::local_world(2);
  const replay::Shard s0 = replay::make_shard(g, owner, 0, 2);
  ASSERT_FALSE(s0.forward.imports.empty()) << "process 0 reads process 1's times";
  setenv("EMO_MPI_TIMEOUT_S", "0.3", 1);
  replay::ShardTimeline tl;
  Status st = replay::run_distributed(s0, {}, *comms[0], tl);  // process 1 never runs
  unsetenv("EMO_MPI_TIMEOUT_S");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("no process sent anything for 0.3 s; process 0 waits for the times of process 1"),
            std::string::npos)
      << st.error().message();
  // A shard run on the wrong process, or with durations of another shard, is refused at once.
  Status wrong = replay::run_distributed(s0, {}, *comms[1], tl);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message().find("process 0 of 2 run on process 1"), std::string::npos);
  Status short_dur = replay::run_distributed(s0, {1, 2, 3}, *comms[0], tl);
  ASSERT_FALSE(short_dur.ok());
  EXPECT_NE(short_dur.error().message().find("3 durations"), std::string::npos);
}

}  // namespace
}  // namespace emo
