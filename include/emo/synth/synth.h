// Synthetic Kineto traces of realistic workloads, deterministic by seed: the
// built-in example and the benchmark input. Output is the modern Kineto
// spelling (cat kernel / cuda_runtime / ac2g flows / cuda_sync events,
// ProfilerStep#N annotations, distributedInfo, NCCL metadata on collectives).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emo/base/result.h"

namespace emo::synth {

enum class Workload {
  kTrainDP,      // transformer training step, data-parallel: fwd, bwd, allreduce on a
                 // second stream overlapping bwd (event record/wait), optimizer
  kInferDecode,  // LLM inference: prefill then a decode loop of small kernels, CPU-launch-bound
};

struct Options {
  Workload workload = Workload::kTrainDP;
  int ranks = 2;           // one file per rank
  int layers = 4;          // transformer layers
  int steps = 3;           // ProfilerStep#N iterations per file
  int decode_tokens = 16;  // kInferDecode: decode iterations per step
  uint64_t seed = 1;
  // When > 0, layers are raised until each file has at least this many events
  // (the benchmark's ≥ 1 M-event input).
  int64_t min_events = 0;
};

// Parses "train-dp" / "infer-decode" (the CLI's WORKLOAD argument).
Result<Workload> parse_workload(const std::string& name);

// One rank's trace as JSON text.
std::string render_trace(const Options& options, int rank);

// Writes one file per rank into `dir` (created if needed), named
// "<workload>_rank<R>.json"; fills `files` with their paths.
Status write_traces(const Options& options, const std::string& dir, std::vector<std::string>* files);

}  // namespace emo::synth
