// google-benchmark: the whole time–energy frontier of an 8-stage 1F1B pipeline (model fit, DAG, every
// deadline's optimal plan, each plan checked and evaluated), on generated stage profiles shaped like
// Perseus' A100 one (38 clocks 1410..855 MHz, 1 ms units) and A40 one (60 clocks 1740..855 MHz,
// 0.1 ms units), for 12, 24, 48 and 96 microbatches.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "emo/pipeline/pipeline.h"

namespace {

// time = t_max·max(1, f_knee/f)^α, power = P_max·(s + (1 − s)·(f/f_max)^k), with values chosen so that
// the Pareto candidates span what Perseus' profiles span (A100: forward 50..61 ms, backward 92..113 ms;
// A40: 112..125 ms and 277..309 ms); the last stage 7.7 % slower (it holds the output layer).
emo::pipeline::StageProfile make_profile(bool a40) {
  const int f_max = a40 ? 1740 : 1410;
  const double fwd_s = a40 ? 0.1125 : 0.0502, bwd_s = a40 ? 0.2771 : 0.0930;
  const double knee = a40 ? 1400 : 1410, alpha = a40 ? 0.7 : 0.85, p_max = a40 ? 300 : 475;
  const double static_share = a40 ? 0.5 : 0.55, k = a40 ? 2.5 : 3;
  emo::pipeline::StageProfile p;
  p.stages = 8;
  p.samples.resize(8);
  for (int s = 0; s < 8; ++s) {
    double scale = s == 7 ? 1.077 : 1.0;
    for (int inst = 0; inst < 2; ++inst) {
      for (int f = f_max; f >= 855; f -= 15) {
        double r = double(f) / f_max;
        double t = (inst ? bwd_s : fwd_s) * scale * std::pow(std::max(1.0, knee / f), alpha);
        double e = p_max * (static_share + (1 - static_share) * std::pow(r, k)) * t;
        p.samples[size_t(s)][size_t(inst)].push_back({f, t, e});
      }
    }
  }
  return p;
}

void BM_Frontier(benchmark::State& state) {
  bool a40 = state.range(0) != 0;
  int microbatches = int(state.range(1));
  auto profile = make_profile(a40);
  size_t points = 0, phases = 0, nodes = 0;
  for (auto _ : state) {
    auto model = emo::pipeline::build_model(profile, 0, a40 ? 0.0001 : 0.001, a40 ? 70.38 : 83.64);
    auto dag = emo::pipeline::build_1f1b(8, microbatches);
    if (!model || !dag) std::abort();
    auto frontier = emo::pipeline::solve_frontier(*model, *dag);
    if (!frontier) std::abort();
    points = frontier->points.size();
    phases = frontier->stats.phases;
    nodes = dag->num_nodes();
    benchmark::DoNotOptimize(frontier->points.data());
  }
  state.counters["nodes"] = double(nodes);
  state.counters["points"] = double(points);
  state.counters["phases"] = double(phases);
}
BENCHMARK(BM_Frontier)
    ->ArgNames({"a40", "microbatches"})
    ->ArgsProduct({{0, 1}, {12, 24, 48, 96}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
