// The synthetic workloads as programs for the lockstep simulator: the
// operator sequence PyTorch would run (names, nesting, kernels and their H100
// durations), written once and executed on every rank together; train-pp's
// stages each run their own 1F1B schedule, interleaved at the communications.
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
  int layers = 4;  // train-pp: per stage; dataloader: bottleneck blocks
  int steps = 3;
  int decode_tokens = 16;
  int microbatches = 8;
  int first_step = 1;  // number of the first ProfilerStep#N
};

// Each ends with every step closed; the caller writes headers before and calls Sim::finish after.
void run_train_dp(Sim& sim, Catalog& cat, const ProgramShape& shape);
void run_train_pp(Sim& sim, Catalog& cat, const ProgramShape& shape);  // needs pipeline_groups()
void run_train_tp(Sim& sim, Catalog& cat, const ProgramShape& shape);
void run_infer_decode(Sim& sim, Catalog& cat, const ProgramShape& shape);
void run_dataloader(Sim& sim, Catalog& cat, const ProgramShape& shape);

// train-pp's process groups beside the default one: one per pair of
// neighbouring stages (group s+1 joins stages s and s+1), "1" "pp_p2p_0_1", ...
std::vector<GroupDef> pipeline_groups(int stages);

}  // namespace emo::synth::detail
