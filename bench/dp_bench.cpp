// Solve time of the optimizer's DP vs the number of packs and clocks (issue goal: 10 000 packs × 81
// clocks in ≤ 1 s). Options are random but shaped like real ones: energy falls and time cost rises as
// the clock drops, a pack's slack makes its first few options free. Figures: docs/optimize.md.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "emo/optimize/optimize.h"

namespace {

std::vector<std::vector<emo::optimize::Option>> make_packs(int packs, int clocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::vector<emo::optimize::Option>> out(static_cast<size_t>(packs));
  for (auto& opts : out) {
    const double t = 1e6 * (0.5 + u(rng));        // busy ns at the max clock
    const double slack = u(rng) < 0.5 ? 0 : t * 0.3 * u(rng);
    const double e = 0.3 * (0.5 + u(rng));
    const double compute = u(rng);
    for (int c = 0; c < clocks; ++c) {
      const double f = 1.0 - 0.55 * c / double(clocks);  // relative clock, falling
      const double time = t * (compute / f + (1 - compute));
      const double energy = e * (0.4 + 0.6 * f * f) * time / t;
      opts.push_back({int64_t(std::max(0.0, time - t - slack)), energy});
    }
  }
  return out;
}

void BM_SolveDp(benchmark::State& state) {
  const int packs = int(state.range(0)), clocks = int(state.range(1));
  auto p = make_packs(packs, clocks, 7);
  const int64_t budget = int64_t(packs) * 50000;  // ~5 % of the total busy time
  for (auto _ : state) {
    auto ch = emo::optimize::solve_dp(p, budget, 512);
    benchmark::DoNotOptimize(ch.data());
  }
  state.counters["packs"] = packs;
  state.counters["clocks"] = clocks;
}
BENCHMARK(BM_SolveDp)->Args({100, 81})->Args({1000, 81})->Args({10000, 81})->Args({10000, 20})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
