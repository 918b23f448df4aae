// The two synthetic workloads as programs for the lockstep simulator: the
// operator sequence PyTorch would run (names, nesting, kernels and their H100
// durations), written once and executed on every rank together.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "simulator.h"

namespace emo::synth::detail {

struct Catalog {
  std::vector<KernelDef> kernels;
  NameTable names;
  std::vector<std::string> args;  // record_shapes argument texts referenced by cpu ops
  std::unordered_map<uint64_t, int> shape_ids;  // hash of an input list -> index in args
};

Catalog make_catalog();

struct ProgramShape {
  int layers = 4;
  int steps = 3;
  int decode_tokens = 16;
  int first_step = 1;  // number of the first ProfilerStep#N
};

// Both end with every step closed; the caller writes headers before and calls Sim::finish after.
void run_train_dp(Sim& sim, Catalog& cat, const ProgramShape& shape);
void run_infer_decode(Sim& sim, Catalog& cat, const ProgramShape& shape);

}  // namespace emo::synth::detail
