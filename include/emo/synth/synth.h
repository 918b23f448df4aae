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

// docs/workloads.md describes each family: the structure it exercises, its options, sizes.
enum class Workload {
  kTrainDP,      // transformer training step, data-parallel: fwd, bwd, allreduce on a
                 // second stream overlapping bwd (event record/wait), optimizer
  kTrainPP,      // 1F1B pipeline-parallel training, one stage per rank: send/recv between
                 // neighbouring stages, bubbles where a stage waits for its neighbour
  kTrainTP,      // tensor-parallel transformer layers: an allreduce ends each attention
                 // and MLP block on the compute stream (communication on the critical path)
  kInferDecode,  // LLM inference: prefill then a decode loop of small kernels, CPU-launch-bound
  kDataloader,   // CPU-bound input pipeline: each step waits for the DataLoader, the GPU idles
};

struct Options {
  Workload workload = Workload::kTrainDP;
  int ranks = 2;           // one file per rank
  int layers = 4;          // transformer layers
  int steps = 3;           // ProfilerStep#N iterations per file
  int decode_tokens = 16;  // kInferDecode: decode iterations per step
  int microbatches = 8;    // kTrainPP: microbatches per step
  uint64_t seed = 1;
  // When > 0, the size is raised until each file has at least this many events
  // (the benchmark's ≥ 1 M-event input): layers, or steps for kDataloader.
  int64_t min_events = 0;
};

// Every workload, in the order --help lists them.
inline constexpr Workload kAllWorkloads[] = {Workload::kTrainDP, Workload::kTrainPP, Workload::kTrainTP,
                                             Workload::kInferDecode, Workload::kDataloader};

// Parses "train-dp", "train-pp", "train-tp", "infer-decode", "dataloader" (the CLI's WORKLOAD argument).
Result<Workload> parse_workload(const std::string& name);
// The inverse.
const char* workload_name(Workload w);
// One line on what the family exercises (for --help).
const char* workload_summary(Workload w);

// Checks the ranges (ranks >= 1, layers >= 1, ...); the error names the option.
Status validate(const Options& options);

// The options actually generated: `options` with layers (kDataloader: steps)
// raised as needed for min_events, and min_events cleared.
Options resolve(const Options& options);
// resolve(options).layers.
int resolve_layers(const Options& options);

// Entries of traceEvents in each rank's file for these options; where ranks
// differ (train-pp's stages), the smallest.
int64_t count_events(const Options& options);

// What write_traces produced, per rank.
struct FileInfo {
  std::string path;
  int rank = 0;
  int layers = 0;      // layers generated (after min_events)
  int steps = 0;       // steps generated (after min_events)
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
