// Models that fail to fit are counted, warned about and held at the default clock: a signature whose
// time could not be fitted is not read as clock-insensitive (its clock lowered "for free").
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "emo/backends/profiling.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/fit.h"
#include "synth_workload.h"

namespace emo::pack {
namespace {

// Every plan's clock for the given packs is the default clock.
void expect_held(const optimize::Plan& pl, const std::vector<PackIndex>& held, int default_mhz) {
  for (PackIndex k : held) EXPECT_EQ(pl.pack_clock_mhz[k.index()], default_mhz) << pl.name << " pack " << k.value();
}

TEST(FitFailure, SignaturesWithoutTimeAtTwoClocksAreFlaggedAndTheirPacksHeld) {
  auto s = test::profiled_step(synth::Workload::kTrainDP, 1, 6, 2, 21);
  auto runs = backends::profile_plan(test::target("emulated:h100"), s->w, s->packing);
  ASSERT_TRUE(runs.ok());
  // Every GPU op took no time in every run but the first (the default clock's): no signature has two
  // clocks to fit from.
  for (size_t r = 1; r < runs->size(); ++r) {
    ASSERT_TRUE((*runs)[r].digest.has_value());  // what the fit reads of the run (its traces are freed)
    EXPECT_TRUE((*runs)[r].traces.empty());
    for (auto& rank_spans : (*runs)[r].digest->spans) {
      for (auto& [start, end] : rank_spans) end = start;
    }
  }
  auto m = fit_pack_models(s->w, s->packing, *runs, s->profile);
  ASSERT_TRUE(m.ok()) << m.error().what;
  size_t with_ops = 0, failed = 0;
  for (size_t sg = 0; sg < s->packing.signatures.size(); ++sg) {
    if (s->packing.signatures[sg].ops == 0) continue;
    ++with_ops;
    failed += m->signatures[sg].fit_failed ? 1 : 0;
    EXPECT_FALSE(m->signatures[sg].fitted);
  }
  ASSERT_GT(with_ops, 0u);
  EXPECT_EQ(failed, with_ops);
  const auto warnings = fit_warnings(s->packing, *m);
  // The failed signatures, and (their power priced by the prior alone) a fit that misses the runs.
  ASSERT_EQ(warnings.size(), std::abs(worst_energy_fit(*m).gap_pct) > kFitDoubtPct ? 2u : 1u);
  EXPECT_NE(warnings[0].find(fmt::format("{} of {} signatures", failed, with_ops)), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("held at the default clock"), std::string::npos);

  optimize::Problem pr = s->problem();
  pr.models = &*m;
  auto sol = optimize::optimize(pr, {});
  ASSERT_TRUE(sol.ok()) << sol.error().what;
  const std::vector<PackIndex> held = packs_held_at_default(s->packing, *m);
  size_t packs_with_ops = 0;
  for (const Pack& pk : s->packing.packs) packs_with_ops += pk.first_op <= pk.last_op ? 1 : 0;
  EXPECT_EQ(held.size(), packs_with_ops);
  expect_held(sol->policy, held, pr.default_clock_mhz);
  for (const optimize::Plan& b : sol->baselines) expect_held(b, held, pr.default_clock_mhz);
}

TEST(FitFailure, OnlyTheFailedSignaturesPacksAreHeld) {
  auto s = test::profiled_step(synth::Workload::kTrainDP, 1, 6, 2, 21);
  optimize::Problem pr = s->problem();
  auto free_sol = optimize::optimize(pr, {});
  ASSERT_TRUE(free_sol.ok());
  // The packs the free policy lowers: hold the first of them by failing its signatures.
  PackIndex lowered(0);
  bool any = false;
  for (uint32_t k = 0; k < s->packing.packs.size() && !any; ++k) {
    if (free_sol->policy.pack_clock_mhz[k] < pr.default_clock_mhz && s->packing.packs[k].first_op <= s->packing.packs[k].last_op) {
      lowered = PackIndex(k);
      any = true;
    }
  }
  ASSERT_TRUE(any) << "the free policy lowers no pack";
  PackModels m = s->models;
  EXPECT_TRUE(fit_warnings(s->packing, m).empty());
  const Pack& pk = s->packing.packs[lowered.index()];
  for (uint32_t a = pk.first_atom; a <= pk.last_atom; ++a) {
    const Atom& at = s->packing.atoms[a];
    if (at.first <= at.last) m.signatures[at.signature.index()].fit_failed = true;
  }
  const std::vector<PackIndex> held = packs_held_at_default(s->packing, m);
  ASSERT_FALSE(held.empty());
  EXPECT_TRUE(std::find(held.begin(), held.end(), lowered) != held.end());
  EXPECT_LT(held.size(), s->packing.packs.size());
  pr.models = &m;
  auto sol = optimize::optimize(pr, {});
  ASSERT_TRUE(sol.ok());
  expect_held(sol->policy, held, pr.default_clock_mhz);
  for (const optimize::Plan& b : sol->baselines) expect_held(b, held, pr.default_clock_mhz);
  // The other packs still move: some pack not held runs below the default.
  bool moved = false;
  for (uint32_t k = 0; k < s->packing.packs.size(); ++k) {
    if (std::find(held.begin(), held.end(), PackIndex(k)) == held.end())
      moved |= sol->policy.pack_clock_mhz[k] < pr.default_clock_mhz;
  }
  EXPECT_TRUE(moved);
  EXPECT_EQ(fit_warnings(s->packing, m).size(), 1u);
}


// A fit that does not give back a measured step energy says so, with the GPU and clock; within
// kFitDoubtPct it says nothing.
TEST(FitFailure, AFitThatMissesAMeasuredStepEnergyIsWarnedAbout) {
  auto s = test::profiled_step(synth::Workload::kTrainDP, 2, 6, 2, 21);
  PackModels m = s->models;
  const WorstFit w0 = worst_energy_fit(m);
  ASSERT_GE(w0.gpu, 0);
  EXPECT_LT(std::abs(w0.gap_pct), kFitDoubtPct);  // the emulated step's fit holds
  EXPECT_TRUE(fit_warnings(s->packing, m).empty());
  // GPU 1's second run measured 8 % more than its models give back.
  ASSERT_EQ(m.gpus.size(), 2u);
  ASSERT_GE(m.gpus[1].measured_j.size(), 2u);
  m.gpus[1].measured_j[1] = 1.08 * m.gpus[1].predicted_j[1];
  const WorstFit w = worst_energy_fit(m);
  EXPECT_EQ(w.gpu, 1);
  EXPECT_EQ(w.clock_mhz, m.gpus[1].clocks_mhz[1]);
  EXPECT_NEAR(w.gap_pct, 100 * (1 / 1.08 - 1), 1e-9);
  const auto warnings = fit_warnings(s->packing, m);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("GPU 1's step energy at the profiled " + std::to_string(w.clock_mhz) + " MHz -7.4 % off"),
            std::string::npos)
      << warnings[0];
}

}  // namespace
}  // namespace emo::pack
