// An independent executor of a step: the ranks' traces (one step each) run as
// a program in a discrete-event simulation of CPU threads, CUDA streams,
// events, synchronizations and collectives. It shares only the trace reader
// with the rest of EMO (nothing of graph/ or replay/), so that its timing can
// judge theirs. The rules are in docs/replay.md, "An independent executor".
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
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
  // Every CPU thread's own time: the work between its runtime calls and after the last, and each call's
  // time less its wait for the GPU. Latencies (a launch's, a wake-up's) keep their measured size.
  double cpu_factor = 1.0;
};

// "gemm=1.5", "stream:7=2", "collective=2", "cpu=0.5" into `s`; an Error on a bad spec.
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
  // Kineto's fwdbwd flows between two threads (forward op -> the backward op the autograd engine ran
  // for it on its own thread): the backward thread's work after the op's start waits for the forward
  // op's end; where the forward thread recorded nothing while the backward run went on, its next call
  // waits for that run (thread_waits).
  int64_t thread_flows = 0, thread_waits = 0;
  // Of thread_flows, links inferred without flows: runs of the autograd engine's thread (its
  // evaluate_function events) while a launching thread recorded nothing.
  int64_t thread_links_inferred = 0;
  // CPU threads that recorded Python frames alone (no operator, annotation or runtime call) and
  // exchange no flow with another: executed, but not in the step's span (they can delay neither the
  // GPU nor another thread: a progress-bar monitor, a queue thread).
  int64_t threads_outside_span = 0;
  // Per rank: the typical latencies the rules use (ns).
  std::vector<int64_t> launch_latency_ns, queue_gap_ns, wake_ns;
};

struct Execution {
  std::vector<RankExecution> ranks;
  // The whole job on one clock (ranks aligned by their collectives' ends): the step's span, or where the
  // step holds GPU ops queued behind an earlier step's work (the GPU behind its host) or its GPU tail runs
  // free into the next step's host time (pipelined both), the loop's period — the longer of the host's
  // span and the time from the first queued op starting to the end, or each stream's span (as
  // graph::Graph::measured_span_ns and the replay).
  int64_t measured_span_ns = 0;
  int64_t span_ns = 0;
  bool pipelined = false;
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

// A step compiled once and executed many times, each GPU op's duration given by
// the caller when the op starts (the emulated GPU: its duration at the clock then
// in effect). Construction does all of execute() but the simulation; run() is
// execute()'s simulation with the durations from the callback; CPU work keeps its
// measured time. Times are on the job's clock from its measured begin (origin_ns):
// the run's ns 0 is the first measured event of the step on any rank. The traces
// must outlive the program.
class Program {
 public:
  // Errors as execute(): nothing to execute.
  static Result<Program> compile(const std::vector<trace::RankTrace>& ranks, const Scenario& scenario = {});
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  struct GpuOp {
    uint32_t rank = 0;
    uint32_t event = 0;      // index into the rank's RankTrace::events
    int32_t collective = -1;  // matched collective (index into collectives()), -1: none
    // The scenario's duration; a matched collective's member: its transfer (the
    // duration less its measured wait for the last peer), which starts once the
    // last member arrived.
    int64_t dur_ns = 0;
  };
  const std::vector<GpuOp>& gpu_ops() const;
  // Matched collectives: their members (indices into gpu_ops()), one per rank.
  const std::vector<std::vector<uint32_t>>& collectives() const;

  // A CPU thread's runtime calls (nested calls folded in) as the program has them.
  struct Call {
    uint32_t rank = 0;
    uint32_t lane = 0;  // the thread's lane in the rank's trace
    int64_t measured_start_ns = 0, measured_end_ns = 0;  // run clock (see to_run)
  };
  const std::vector<Call>& calls() const;
  struct Thread {
    uint32_t rank = 0, lane = 0;
    int64_t measured_begin_ns = 0, measured_end_ns = 0;  // run clock
  };
  const std::vector<Thread>& threads() const;
  // A time of rank `rank`'s own trace on the run clock (the job clock less origin).
  int64_t to_run(uint32_t rank, int64_t trace_ns) const;

  // Duration (ns) of GPU op `op` (index into gpu_ops()) starting `start_ns` on
  // the run clock; for a matched collective, of its transfer from the last
  // arrival. Called once per op and run, in start order.
  using DurationFn = std::function<int64_t(uint32_t op, int64_t start_ns)>;
  // An Error when the program cannot finish (a wait that never ends).
  Status run(const DurationFn& dur);
  // The last run's times on the run clock: each GPU op's start and end (a
  // collective member starts at its arrival), each call's start and return,
  // each thread's begin and end, and the run's end (its last thread in the
  // step's span, or op).
  int64_t op_start(uint32_t op) const;
  int64_t op_end(uint32_t op) const;
  int64_t call_start(uint32_t call) const;
  int64_t call_end(uint32_t call) const;
  int64_t thread_begin(uint32_t thread) const;  // its measured begin, or where another thread woke it
  int64_t thread_end(uint32_t thread) const;
  int64_t end_ns() const;
  // The last run's step span as the loop runs it: end_ns(), or where the step holds GPU ops queued behind
  // an earlier step's work (the GPU behind its host), the longer of the host's span and the time from the
  // first of them starting to the end, and where its GPU tail runs free into the next step's host time, the
  // longer of the host's span and each stream's span: the loop's period.
  int64_t period_ns() const;
  // Whether the step is a loop's whose steps overlap (either case above; period_ns is then not end_ns).
  bool pipelined() const;

  struct Impl;

 private:
  explicit Program(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads the files (one per rank), restricts each to `step` (nullopt: the last
// complete ProfilerStep, else the profiler window) and orders them by rank.
Result<std::vector<trace::RankTrace>> load_step(const std::vector<std::string>& paths,
                                                std::optional<int64_t> step = std::nullopt);

}  // namespace emo::executor
