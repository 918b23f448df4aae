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
// The inverse: "train-dp" / "infer-decode".
const char* workload_name(Workload w);

// Checks the ranges (ranks >= 1, layers >= 1, ...); the error names the option.
Status validate(const Options& options);

// Layers actually generated: options.layers, raised as needed for min_events.
int resolve_layers(const Options& options);

// Entries of traceEvents in each rank's file for these options (all ranks have the same count).
int64_t count_events(const Options& options);

// What write_traces produced, per rank.
struct FileInfo {
  std::string path;
  int rank = 0;
  int layers = 0;      // layers generated (after min_events)
  int64_t events = 0;  // entries of traceEvents
  int64_t bytes = 0;
};

// One rank's trace as JSON text (all ranks are simulated together, so it is the
// same text write_traces puts in that rank's file). Empty for invalid options or rank.
std::string render_trace(const Options& options, int rank);

// Writes one file per rank into `dir` (created if needed), named
// "<workload>_rank<R>.json"; fills `files` with their paths.
Status write_traces(const Options& options, const std::string& dir, std::vector<std::string>* files);
// Same, with each file's event count and size.
Status write_traces(const Options& options, const std::string& dir, std::vector<FileInfo>* files);

}  // namespace emo::synth
