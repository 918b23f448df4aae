// The optimizer's DP (optimize(), reserve 0) against the exact optimum of the same models (the GLPK
// MILP oracle, milp_oracle()) on small synthetic cases: workload families × sizes × seeds × δ, a small
// clock set. Prints one row per case and the gap distribution. Figures: docs/optimize.md, "DP against
// the exact optimum".
//   dp_oracle_gap [--quick] [--only WORKLOAD]
// EMO_GAP_DEBUG=1 prints both plans of every case over 1 %; EMO_GAP_SUBSETS=1 also replays every mix of
// the runs where they differ (which halves of a trade are feasible alone).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/backends/profiling.h"
#include "emo/device/profile.h"
#include "emo/optimize/milp.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"
#include "emo/synth/synth.h"

namespace {

using namespace emo;

struct Case {
  synth::Workload kind;
  int ranks, layers;
  double min_pack_ms;
  uint64_t seed;
};

struct Setup {
  analysis::Workload w;
  device::DeviceProfile profile;
  pack::Packing packing;
  pack::PackModels models;
};

std::unique_ptr<Setup> build(const Case& cs, std::string& err) {
  synth::Options o;
  o.workload = cs.kind;
  o.ranks = cs.ranks;
  o.layers = cs.layers;
  o.steps = 2;
  o.seed = cs.seed;
  o.microbatches = 4;
  o.decode_tokens = 8;
  std::vector<trace::RankTrace> traces;
  for (int r = 0; r < cs.ranks; ++r) {
    auto t = trace::parse_trace(synth::render_trace(o, r), "rank" + std::to_string(r));
    if (!t.ok()) return err = t.error().what, nullptr;
    traces.push_back(std::move(*t));
  }
  auto s = std::make_unique<Setup>();
  auto w = analysis::assemble(std::move(traces), {});
  if (!w.ok()) return err = w.error().what, nullptr;
  s->w = std::move(*w);
  s->profile = *device::builtin_profile("h100");
  pack::PackOptions po;
  po.min_pack_ns = int64_t(cs.min_pack_ms * 1e6);
  auto p = pack::make_packs(s->w, analysis::analyze(s->w), s->profile, po);
  if (!p.ok()) return err = p.error().what, nullptr;
  s->packing = std::move(*p);
  static const auto h100 = backends::Target::open("emulated:h100");  // opened once for every case
  if (!h100.ok()) return err = h100.error().what, nullptr;
  auto runs = backends::profile_plan(*h100, s->w, s->packing);
  if (!runs.ok()) return err = runs.error().what, nullptr;
  auto m = pack::fit_pack_models(s->w, s->packing, *runs, s->profile);
  if (!m.ok()) return err = m.error().what, nullptr;
  s->models = std::move(*m);
  return s;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double i = q * double(v.size() - 1);
  const size_t a = size_t(i), b = std::min(v.size() - 1, a + 1);
  return v[a] + (v[b] - v[a]) * (i - double(a));
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;  // --only WORKLOAD: one family
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
  }
  std::vector<Case> cases;
  for (uint64_t seed : {1, 2, 3}) {
    cases.push_back({synth::Workload::kTrainDP, 1, 8, 2.0, seed});
    cases.push_back({synth::Workload::kTrainDP, 2, 6, 2.0, seed});
    cases.push_back({synth::Workload::kTrainPP, 2, 2, 2.0, seed});
    cases.push_back({synth::Workload::kTrainTP, 2, 4, 2.0, seed});
    cases.push_back({synth::Workload::kInferDecode, 1, 4, 1.0, seed});
    if (quick) break;
  }
  const std::vector<std::vector<int>> clock_sets = {{1200, 1410, 1605, 1800, 1980},
                                                    {1110, 1215, 1320, 1425, 1530, 1635, 1740, 1860, 1980}};
  const std::vector<double> deltas = {0.01, 0.02, 0.05, 0.10};
  std::vector<double> gaps;
  std::vector<size_t> pack_counts;
  double dp_ms_sum = 0, milp_ms_sum = 0, milp_ms_max = 0;
  int errors = 0;
  fmt::print("| workload | ranks | layers | seed | packs | clocks | δ | DP J | MILP J | gap % | MILP nodes | MILP ms |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Case& cs : cases) {
    if (!only.empty() && only != synth::workload_name(cs.kind)) continue;
    std::string err;
    auto s = build(cs, err);
    if (!s) {
      fmt::print("{} seed {}: {}\n", synth::workload_name(cs.kind), cs.seed, err);
      ++errors;
      continue;
    }
    for (const auto& clocks : clock_sets) {
      if ((quick || cs.seed != 1) && clocks.size() > 5) continue;  // nine clocks: seed 1 only
      optimize::Problem pr;
      pr.workload = &s->w;
      pr.packing = &s->packing;
      pr.models = &s->models;
      pr.default_clock_mhz = int(s->profile.default_clock_mhz.value);
      pr.clocks_mhz = clocks;
      pr.idle_from_replay = false;  // the MILP's model of idle inside packs (milp.h)
      for (double d : deltas) {
        optimize::OptimizeOptions o;
        o.max_slowdown = d;
        o.reserve = 0;
        auto sol = optimize::optimize(pr, o);
        optimize::MilpStats st;
        optimize::MilpOptions mo;
        mo.time_limit_s = 120;
        mo.stats = &st;
        auto ex = optimize::milp_oracle(pr, d, mo);
        if (!sol.ok() || !ex.ok()) {
          fmt::print("| {} | {} | {} | {} | {} | {} | {:.0f}% | error: {} |\n", synth::workload_name(cs.kind), cs.ranks,
                     cs.layers, cs.seed, s->packing.packs.size(), clocks.size(), 100 * d,
                     !sol.ok() ? sol.error().what : ex.error().what);
          ++errors;
          continue;
        }
        const double gap = sol->policy.energy_j / ex->energy_j - 1;
        gaps.push_back(gap);
        pack_counts.push_back(s->packing.packs.size());
        dp_ms_sum += sol->solve_ms;
        milp_ms_sum += st.solve_ms;
        milp_ms_max = std::max(milp_ms_max, st.solve_ms);
        fmt::print("| {} | {} | {} | {} | {} | {} | {:.0f}% | {:.4f} | {:.4f} | {:.3f} | {} | {:.0f} |\n",
                   synth::workload_name(cs.kind), cs.ranks, cs.layers, cs.seed, s->packing.packs.size(), clocks.size(),
                   100 * d, sol->policy.energy_j, ex->energy_j, 100 * gap, st.nodes, st.solve_ms);
        if (std::getenv("EMO_GAP_DEBUG") && gap > 0.01) {
          fmt::print("  dp ({}): {}\n  milp: {}\n  gpus: ", sol->policy_from, fmt::join(sol->policy.pack_clock_mhz, " "),
                     fmt::join(ex->pack_clock_mhz, " "));
          for (const auto& pk : s->packing.packs) fmt::print("{}{} ", pk.rank.index(), pk.slack == pack::SlackClass::kCritical ? "c" : "s");
          fmt::print("\n  dp time {} milp time {} target {}\n", sol->policy.time_ns, ex->time_ns, sol->plan_target_ns);
          if (std::getenv("EMO_GAP_SUBSETS")) {
            std::vector<std::vector<int>> groups;  // maximal runs of packs (per GPU) where the plans differ
            const auto& a = sol->policy.pack_clock_mhz;
            const auto& b = ex->pack_clock_mhz;
            for (size_t k = 0; k < a.size(); ++k) {
              if (a[k] == b[k]) continue;
              if (!groups.empty() && groups.back().back() == int(k) - 1 && s->packing.packs[k].rank.index() == s->packing.packs[k - 1].rank.index() && b[k] == b[k-1])
                groups.back().push_back(int(k));
              else
                groups.push_back({int(k)});
            }
            for (unsigned m = 0; m < (1u << groups.size()); ++m) {
              std::vector<int> t = a;
              for (size_t g = 0; g < groups.size(); ++g) if (m >> g & 1) for (int k : groups[g]) t[size_t(k)] = b[size_t(k)];
              auto pl = optimize::predict(pr, t);
              fmt::print("  subset {:0{}b}: time {} energy {:.4f} {}\n", m, groups.size(), pl.time_ns, pl.energy_j, pl.time_ns <= sol->plan_target_ns ? "ok" : "OVER");
            }
          }
        }
        std::fflush(stdout);
      }
    }
  }
  if (gaps.empty()) return 1;
  const auto [pmin, pmax] = std::minmax_element(pack_counts.begin(), pack_counts.end());
  const size_t over = size_t(std::count_if(gaps.begin(), gaps.end(), [](double g) { return g > 0.01; }));
  const size_t zero = size_t(std::count_if(gaps.begin(), gaps.end(), [](double g) { return g < 1e-9; }));
  fmt::print("\ncases {} ({} errors), packs {}–{}; gap %: min {:.3f}, median {:.3f}, p90 {:.3f}, max {:.3f}; "
             "optimal {}; over 1 %: {}\n",
             gaps.size(), errors, *pmin, *pmax, 100 * quantile(gaps, 0), 100 * quantile(gaps, 0.5),
             100 * quantile(gaps, 0.9), 100 * quantile(gaps, 1), zero, over);
  fmt::print("mean solve: DP (optimize) {:.1f} ms, MILP {:.1f} ms (max {:.0f} ms)\n", dp_ms_sum / double(gaps.size()),
             milp_ms_sum / double(gaps.size()), milp_ms_max);
  const double min_gap = *std::min_element(gaps.begin(), gaps.end());
  return errors == 0 && min_gap >= -1e-9 ? 0 : 1;
}
