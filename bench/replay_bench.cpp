// google-benchmark: what-if replay speed on a generated training step, and the
// cost of one replay relative to building the graph (both on the same input).
#include <benchmark/benchmark.h>

#include "emo/analysis/analysis.h"
#include "emo/synth/synth.h"

namespace {

emo::analysis::Workload make_workload(int layers) {
  emo::synth::Options o;
  o.workload = emo::synth::Workload::kTrainDP;
  o.ranks = 1;
  o.layers = layers;
  o.steps = 1;
  std::vector<emo::trace::RankTrace> ranks;
  auto t = emo::trace::parse_trace(emo::synth::render_trace(o, 0), "bench.json");
  if (!t.ok()) std::abort();
  ranks.push_back(std::move(t).value());
  auto w = emo::analysis::assemble(std::move(ranks), {});
  if (!w.ok()) std::abort();
  return std::move(w).value();
}

void BM_Replay(benchmark::State& state) {
  auto w = make_workload(static_cast<int>(state.range(0)));
  emo::replay::Replayer rp(w.graph);
  emo::replay::Timeline tl;
  for (auto _ : state) {
    rp.run(tl);
    benchmark::DoNotOptimize(tl.end_ns);
  }
  state.counters["nodes"] = static_cast<double>(w.graph.num_nodes());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(w.graph.num_nodes()));
}
BENCHMARK(BM_Replay)->Arg(8)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_Slack(benchmark::State& state) {
  auto w = make_workload(static_cast<int>(state.range(0)));
  emo::replay::Replayer rp(w.graph);
  emo::replay::Timeline tl;
  rp.run(tl);
  std::vector<int64_t> slack;
  for (auto _ : state) {
    rp.slack({}, tl, slack);
    benchmark::DoNotOptimize(slack.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(w.graph.num_nodes()));
}
BENCHMARK(BM_Slack)->Arg(8)->Arg(64)->Unit(benchmark::kMicrosecond);

// A plan one kernel's duration away from the last one: a full sweep (range 1 = 0) against the
// incremental replay from the last timeline (range 1 = 1). The kernel alternates between two durations,
// so every iteration moves the same points.
void BM_ReplayOneChange(benchmark::State& state) {
  auto w = make_workload(static_cast<int>(state.range(0)));
  const emo::graph::Graph& g = w.graph;
  emo::graph::NodeId k = 0;
  for (emo::graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.kind[n] == emo::graph::NodeKind::kKernel) k = n;  // the last kernel: a late change
  }
  std::vector<int64_t> a = g.dur_ns, b = g.dur_ns;
  b[k] = b[k] * 2 + 1000;
  emo::replay::Replayer full(g);
  emo::replay::Rereplayer inc(g);
  emo::replay::Timeline tl;
  full.run(a, tl);
  bool at_b = false;
  for (auto _ : state) {
    const std::vector<int64_t>& from = at_b ? b : a;
    const std::vector<int64_t>& to = at_b ? a : b;
    if (state.range(1) == 0) {
      full.run(to, tl);
    } else {
      inc.update(from, to, tl);
    }
    at_b = !at_b;
    benchmark::DoNotOptimize(tl.end_ns);
  }
  state.counters["nodes"] = static_cast<double>(g.num_nodes());
}
BENCHMARK(BM_ReplayOneChange)->Args({64, 0})->Args({64, 1})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
