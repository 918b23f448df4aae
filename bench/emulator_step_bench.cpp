// google-benchmark: the cost of timing one emulated step, the way the emulated GPU did it before
// (replay::Replayer::run_dynamic over the step's graph) against the way it does now
// (executor::Program::run over the step's program), both with a duration callback that scales every
// GPU op, on the same generated steps. The emulated GPU calls this once per step it runs.
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/executor/executor.h"
#include "emo/synth/synth.h"

namespace {

// kind 0: train-dp, 2 ranks (collectives, event waits); 1: infer-decode, 1 rank (small steps).
emo::analysis::Workload make_workload(int kind, int layers) {
  emo::synth::Options o;
  o.workload = kind == 0 ? emo::synth::Workload::kTrainDP : emo::synth::Workload::kInferDecode;
  o.ranks = kind == 0 ? 2 : 1;
  o.layers = layers;
  o.steps = 2;
  std::vector<emo::trace::RankTrace> ranks;
  for (int r = 0; r < o.ranks; ++r) {
    auto t = emo::trace::parse_trace(emo::synth::render_trace(o, r), "bench" + std::to_string(r) + ".json");
    if (!t.ok()) std::abort();
    ranks.push_back(std::move(t).value());
  }
  auto w = emo::analysis::assemble(std::move(ranks), {});
  if (!w.ok()) std::abort();
  return std::move(w).value();
}

int64_t slowed(int64_t ns) { return static_cast<int64_t>(std::llround(static_cast<double>(ns) * 1.25)); }

void BM_ReplayStep(benchmark::State& state) {
  auto w = make_workload(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const emo::graph::Graph& g = w.graph;
  emo::replay::Replayer rp(g);
  emo::replay::Timeline tl;
  auto dur = [&](emo::graph::NodeId n, int64_t) {
    return emo::graph::is_gpu(g.kind[n]) || g.kind[n] == emo::graph::NodeKind::kCollective ? slowed(g.dur_ns[n])
                                                                                          : g.dur_ns[n];
  };
  for (auto _ : state) {
    rp.run_dynamic(dur, tl);
    benchmark::DoNotOptimize(tl.end_ns);
  }
  state.counters["events"] = static_cast<double>(w.events);
}

void BM_ExecutorStep(benchmark::State& state) {
  auto w = make_workload(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  auto p = emo::executor::Program::compile(w.ranks);
  if (!p.ok()) std::abort();
  const auto& ops = p->gpu_ops();
  const emo::executor::Program::DurationFn dur = [&](uint32_t i, int64_t) { return slowed(ops[i].dur_ns); };
  for (auto _ : state) {
    if (!p->run(dur).ok()) std::abort();
    benchmark::DoNotOptimize(p->end_ns());
  }
  state.counters["events"] = static_cast<double>(w.events);
}

// (kind, layers): a 2-rank training step of 8 and 64 layers, a decode step of 2 layers.
BENCHMARK(BM_ReplayStep)->Args({0, 8})->Args({0, 64})->Args({1, 2})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ExecutorStep)->Args({0, 8})->Args({0, 64})->Args({1, 2})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
