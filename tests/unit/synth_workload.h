// A synthetic workload (emo synth) read back and assembled, for tests of the stages after analysis.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/synth/synth.h"

namespace emo::test {

inline analysis::Workload synth_workload(synth::Workload kind, int ranks, int layers, uint64_t seed) {
  synth::Options o;
  o.workload = kind;
  o.ranks = ranks;
  o.layers = layers;
  o.steps = 2;
  o.seed = seed;
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

}  // namespace emo::test
