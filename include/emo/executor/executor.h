// An independent executor of a step: the ranks' traces (one step each) run as
// a program in a discrete-event simulation of CPU threads, CUDA streams,
// events, synchronizations and collectives. It shares only the trace reader
// with the rest of EMO (nothing of graph/ or replay/), so that its timing can
// judge theirs. The rules are in docs/replay.md, "An independent executor".
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emo/base/result.h"
#include "emo/trace/trace.h"

namespace emo::executor {

// Kernel classes by name keyword (ASCII case ignored). A class selects every GPU
// op (kernel, memcpy, memset) whose name contains one of its keywords, except
// ops whose name starts with "nccl"; classes may overlap.
//   gemm:        gemm, cutlass, xmma, matmul
//   elementwise: elementwise
//   reduce:      reduce
//   attention:   attention, flash, fmha
//   copy:        copy, memcpy
enum class KernelClass : uint8_t { kGemm, kElementwise, kReduce, kAttention, kCopy };
inline constexpr int kKernelClasses = 5;
const char* to_string(KernelClass c);
std::optional<KernelClass> kernel_class_from_string(std::string_view s);
// The keywords of a class, lower case.
const std::vector<std::string_view>& keywords_of(KernelClass c);
bool in_class(KernelClass c, std::string_view name);

// Scales of GPU durations. An op's factor is the product of every factor that
// selects it. A collective kernel matched across ranks scales its transfer
// (its duration less its wait for the last peer); an unmatched one (a single
// rank of a multi-rank job) scales whole.
struct Scenario {
  std::array<double, kKernelClasses> class_factor{1, 1, 1, 1, 1};
  int32_t stream = -1;         // a stream id (args.stream), on every rank and device; -1: none
  double stream_factor = 1.0;
  double collective_factor = 1.0;  // NCCL kernels (collective metadata or an nccl* name)
};

// "gemm=1.5", "stream:7=2", "collective=2" into `s`; an Error on a bad spec.
Status parse_scale(std::string_view spec, Scenario& s);

struct GpuOpTime {
  uint32_t event = 0;   // index into the rank's RankTrace::events
  int64_t start_ns = 0;  // executed, in the rank's own trace time
  int64_t end_ns = 0;
};

struct RankExecution {
  std::string path;
  int rank = -1;
  // Extent of the rank's step (CPU events and GPU ops) in its own trace time.
  int64_t measured_begin_ns = 0, measured_end_ns = 0;
  int64_t begin_ns = 0, end_ns = 0;  // executed
  std::vector<GpuOpTime> gpu_ops;    // every GPU op of the step, in event order
  int64_t measured_span_ns() const { return measured_end_ns - measured_begin_ns; }
  int64_t span_ns() const { return end_ns - begin_ns; }
};

struct ExecutionStats {
  int64_t threads = 0, runtime_calls = 0, gpu_ops = 0;
  int64_t gpu_ops_without_launch = 0;      // no launching call in the step: start at their measured time
  int64_t launch_contradicted = 0;         // op started > 2 µs before its call: started at its measured time
  int64_t blocking_calls = 0;              // calls that waited for GPU work in the trace
  int64_t cross_stream_from_records = 0;   // cuda_sync Stream Wait Event records
  int64_t cross_stream_from_calls = 0;     // cudaEventRecord / cudaStreamWaitEvent paired on a thread
  int64_t cross_stream_inferred = 0;       // a wait with no record in the trace: source from the timeline
  int64_t collectives_matched = 0;
  int64_t collective_kernels_unmatched = 0;
  int64_t waits_ignored = 0;               // waited op measured to end after the call returned
  // Per rank: the typical latencies the rules use (ns).
  std::vector<int64_t> launch_latency_ns, queue_gap_ns, wake_ns;
};

struct Execution {
  std::vector<RankExecution> ranks;
  // The whole job on one clock (ranks aligned by their collectives' ends).
  int64_t measured_span_ns = 0;
  int64_t span_ns = 0;
  ExecutionStats stats;
  double error_pct() const {
    return measured_span_ns > 0
               ? 100.0 * static_cast<double>(span_ns - measured_span_ns) / static_cast<double>(measured_span_ns)
               : 0.0;
  }
};

// Executes the step the traces hold (each already restricted to one step, e.g.
// by trace::select_step). An Error when there is nothing to execute or the
// program cannot finish (a wait that never ends).
Result<Execution> execute(const std::vector<trace::RankTrace>& ranks, const Scenario& scenario = {});

// Reads the files (one per rank), restricts each to `step` (nullopt: the last
// complete ProfilerStep, else the profiler window) and orders them by rank.
Result<std::vector<trace::RankTrace>> load_step(const std::vector<std::string>& paths,
                                                std::optional<int64_t> step = std::nullopt);

}  // namespace emo::executor
