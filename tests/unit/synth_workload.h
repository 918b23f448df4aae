// A synthetic workload (emo synth) read back and assembled, for tests of the stages after analysis;
// and the same step packed, profiled on the emulated GPU and fitted, for the optimizer's tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/backends/evaluation.h"
#include "emo/backends/profiling.h"
#include "emo/optimize/check.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"
#include "emo/synth/synth.h"
#include "test_util.h"

namespace emo::test {

inline analysis::Workload synth_workload(synth::Workload kind, int ranks, int layers, uint64_t seed,
                                         int microbatches = 0, int decode_tokens = 0) {
  synth::Options o;
  o.workload = kind;
  o.ranks = ranks;
  o.layers = layers;
  o.steps = 2;
  o.seed = seed;
  if (microbatches > 0) o.microbatches = microbatches;
  if (decode_tokens > 0) o.decode_tokens = decode_tokens;
  std::vector<trace::RankTrace> traces;
  for (int r = 0; r < ranks; ++r) {
    auto t = trace::parse_trace(synth::render_trace(o, r), "rank" + std::to_string(r));
    EXPECT_TRUE(t.ok());
    traces.push_back(std::move(*t));
  }
  auto w = analysis::assemble(std::move(traces), {});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().what);
  return std::move(*w);
}

// The step packed with a minimum pack length, profiled on the emulated H100 and fitted: what the
// optimizer's tests start from.
struct ProfiledStep {
  analysis::Workload w;
  device::DeviceProfile profile;
  pack::Packing packing;
  pack::PackModels models;
  optimize::Problem problem(std::vector<int> clocks = {}) const {
    optimize::Problem pr;
    pr.workload = &w;
    pr.packing = &packing;
    pr.models = &models;
    pr.default_clock_mhz = int(profile.default_clock_mhz.value);
    pr.clocks_mhz = std::move(clocks);
    return pr;
  }
};

inline std::unique_ptr<ProfiledStep> profiled_step(synth::Workload kind, int ranks, int layers, double min_pack_ms,
                                                   uint64_t seed, int microbatches = 0) {
  auto s = std::make_unique<ProfiledStep>();
  s->w = synth_workload(kind, ranks, layers, seed, microbatches);
  s->profile = *device::builtin_profile("h100");
  pack::PackOptions po;
  po.min_pack_ns = int64_t(min_pack_ms * 1e6);
  auto p = pack::make_packs(s->w, analysis::analyze(s->w), s->profile, po);
  EXPECT_TRUE(p.ok());
  s->packing = std::move(*p);
  auto runs = backends::profile_plan(test::target("emulated:h100"), s->w, s->packing);
  EXPECT_TRUE(runs.ok()) << (runs.ok() ? "" : runs.error().what);
  auto m = pack::fit_pack_models(s->w, s->packing, *runs, s->profile);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what);
  s->models = std::move(*m);
  return s;
}

}  // namespace emo::test
