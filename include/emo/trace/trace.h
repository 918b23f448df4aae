// Normalized event tables of one rank's Kineto (PyTorch profiler) trace.
// Both spellings are read into the same tables: modern Kineto (cat `kernel`,
// `cuda_runtime`, flow `ac2g`, fractional µs, `baseTimeNanoseconds`) and the
// 2021-era one (cat `Kernel`, `Runtime`, flow cat `async`, tid "stream 7",
// lower-case `external id`). Times are int64 nanoseconds from the trace origin.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emo/base/result.h"
#include "emo/base/strings.h"

namespace emo::trace {

inline constexpr int64_t kNone = -1;
inline constexpr uint32_t kNoIndex = 0xffffffffu;

enum class EventKind : uint8_t {
  kCpuOp,           // cpu_op, Operator
  kUserAnnotation,  // user_annotation (ProfilerStep#N, record_function ranges)
  kPythonFunction,  // python_function
  kRuntime,         // cuda_runtime, Runtime (CUDA runtime API call on a CPU thread)
  kDriver,          // cuda_driver (driver API call on a CPU thread, e.g. cuLaunchKernel)
  kKernel,          // kernel, Kernel
  kMemcpy,          // gpu_memcpy, Memcpy
  kMemset,          // gpu_memset, Memset
  kCudaSync,        // cuda_sync: GPU-side record of a sync (Event Sync, Stream Wait Event, ...)
  kGpuAnnotation,   // gpu_user_annotation (a span on a GPU lane, not GPU work itself)
  kOtherCpu,        // any other complete event on a CPU thread
};

inline bool is_gpu_op(EventKind k) {
  return k == EventKind::kKernel || k == EventKind::kMemcpy || k == EventKind::kMemset;
}
inline bool is_cpu_side(EventKind k) {
  return k == EventKind::kCpuOp || k == EventKind::kUserAnnotation ||
         k == EventKind::kPythonFunction || k == EventKind::kRuntime ||
         k == EventKind::kDriver || k == EventKind::kOtherCpu;
}
const char* to_string(EventKind k);

// A frame the autograd engine runs on its thread: `autograd::engine::evaluate_function: XBackward0` (PyTorch
// 1.10 on), or, in older traces that record no such frame, the backward function itself (`NllLossBackward`,
// `CudnnConvolutionBackward`, `AddmmBackward0`: a name ending in Backward and an optional number) and
// `torch::autograd::AccumulateGrad`. The graph and the executor find the engine's thread by them.
bool is_autograd_engine_frame(std::string_view name);

// cuda_sync kinds (args.cuda_sync_kind / the event name).
enum class SyncKind : uint8_t { kNotSync, kEventSync, kStreamWaitEvent, kStreamSync, kContextSync, kOther };

// A lane is one serial resource: a CPU thread (pid, tid) or a GPU stream (device, stream).
struct Lane {
  bool gpu = false;
  int64_t pid = kNone;     // CPU: process id; GPU: device id as written in pid
  int64_t tid = kNone;     // CPU: thread id; GPU: tid as written (stream, or stream + 1e6 for syncs)
  int32_t device = -1;     // GPU only
  int32_t stream = -1;     // GPU only: args.stream (preferred over tid)
  StrId name = kEmptyStr;  // thread_name metadata when present
};

// NCCL metadata copied by the profiler onto the collective kernel (and the
// record_param_comms CPU op): "Collective name", "Process Group Name"/"Ranks", "Seq", ...
struct CollectiveArgs {
  StrId collective = kEmptyStr;   // e.g. "allreduce", "all_to_all"
  StrId process_group = kEmptyStr;  // "Process Group Name", else "Process Group Ranks", else empty
  int64_t seq = kNone;            // "Seq" when present
  int32_t group_size = -1;        // "Group size"
  int64_t in_nelems = kNone;      // "In msg nelems"
  int64_t out_nelems = kNone;     // "Out msg nelems"
  StrId dtype = kEmptyStr;        // "dtype"
  // False for a communication kernel of another library than NCCL/RCCL (DeepEP, NVSHMEM, c10d, ...)
  // whose event carries no collective metadata: nothing says which peer kernels are the same
  // collective, so it is kept whole (never matched across ranks).
  bool matchable = true;
};

// One complete ('X') event.
struct Event {
  int64_t ts_ns = 0;   // start, from the trace origin
  int64_t dur_ns = 0;  // >= 0
  StrId name = kEmptyStr;
  EventKind kind = EventKind::kOtherCpu;
  SyncKind sync = SyncKind::kNotSync;  // kCudaSync events only
  uint32_t lane = kNoIndex;         // index into RankTrace::lanes
  // Kineto's fwdbwd flows (a forward op -> the backward op the autograd engine ran for it, usually on
  // another thread), numbered from 1 per trace: this op is the forward end of flow `flow_out` / the
  // backward end of flow `flow_in`; 0: none.
  uint32_t flow_out = 0;
  int64_t correlation = kNone;      // args.correlation (runtime call <-> GPU op)
  int64_t external_id = kNone;      // args "External id" / "external id"
  int32_t device = -1;              // GPU events: args.device
  int32_t stream = -1;              // GPU events: args.stream
  int32_t wait_on_stream = -1;      // cuda_sync: args.wait_on_stream
  uint32_t flow_in = 0;             // see flow_out
  int64_t wait_on_event_record_corr = kNone;  // cuda_sync: args.wait_on_cuda_event_record_corr_id
  uint32_t collective = kNoIndex;   // index into RankTrace::collectives (communication kernels)
};

// One counted kind of malformed or skipped event, with the first example.
struct ImportStat {
  std::string what;     // e.g. "event without ts", "kernel without args.stream"
  int64_t count = 0;
  std::string example;  // first offending event (truncated JSON) or its index
  bool is_error = true; // false: informational (e.g. "flow events skipped")
};

struct ImportStats {
  std::vector<ImportStat> rows;
  int64_t events_total = 0;  // entries of traceEvents seen
  int64_t events_kept = 0;   // complete events stored in RankTrace::events
  // Events select_step dropped because they lie outside the profiler's window
  // (traces without ProfilerStep only): wholly outside it, or crossing its edge.
  int64_t outside_profiler_window = 0;
  std::string outside_profiler_window_example;  // the first one: name, lane, where
  void add(std::string_view what, std::string_view example, bool is_error = true);
  int64_t error_count() const;
};

// ProfilerStep#N span on a CPU thread.
struct Step {
  int64_t number = -1;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
};

// The profiler's window: the span of the trace's "Trace" events (Kineto writes
// one, named "PyTorch Profiler (0)", cat "Trace", from start to stop of the
// recording; activity profilers may add their own, e.g. "__cupti_profiler__").
// With several, their hull.
struct ProfilerWindow {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
};

// A GPU stream's time, inside the selected step, taken by ops launched before it (select_step drops them):
// an earlier step's work still queued when the step began, on a GPU that runs behind its host. One merged
// span per device, stream and run of such ops (gaps under kPriorBusyMergeNs joined), in trace time.
struct PriorGpuBusy {
  int32_t device = -1;
  int32_t stream = -1;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};
inline constexpr int64_t kPriorBusyMergeNs = 100'000;
// The shortest wait of a GPU op on an earlier step's queued work that counts (graph::Graph::queued_ops).
inline constexpr int64_t kQueuedWaitMinNs = 200'000;
// How close to a stream's earlier-step work's end an op of the step that starts then follows it: this, or
// 5 % of the op's wait where that is longer (a loop's steps differ by that much: waited_on_prior_work).
inline constexpr int64_t kPriorStreamGapNs = 20'000;
// Whether a GPU op of the step on (device, stream), bound in the step at from_ns and started at start_ns
// (trace time), waited on work launched before the step (`busy`, RankTrace::prior_gpu_busy): it waited
// kQueuedWaitMinNs or more, and its stream's earlier work either ended as it started (within
// kPriorStreamGapNs or 5 % of the wait, either side: clocks and rounding) or ran for 90 % or more of the
// wait: the stream held it. Another stream's earlier work does not hold it (a GPU runs its streams side by
// side).
bool waited_on_prior_work(const std::vector<PriorGpuBusy>& busy, int32_t device, int32_t stream, int64_t from_ns,
                          int64_t start_ns);

struct RankTrace;
// Whether a step whose host runs from host_begin_ns to host_end_ns and whose GPU work ends at gpu_end_ns
// (trace time; `t` after select_step) is a loop's step whose GPU tail runs free into the next step's host
// time: its GPU work ends kQueuedWaitMinNs or more after its host's, and the step before's did the same to
// it (earlier-step work ran kQueuedWaitMinNs or more into the step, prior_gpu_busy) without holding its host
// (no runtime call or sync record of the step ended as that work ended, within kPriorStreamGapNs, having
// begun before), and every GPU op of the step started within kQueuedWaitMinNs of its launch call's end or
// its stream's op before, or as a GPU op of its device ended (an op that waited longer on nothing the trace
// shows leaves the loop's timing unexplained). The caller checks that no GPU op of the step was queued
// behind the step before's work (waited_on_prior_work).
// A loop that never waits on its GPU and keeps up with its host: its step is the loop's period, the longer
// of its host's span and each stream's span, not its host's start to its GPU's end.
bool runs_free_gpu_tail(const RankTrace& t, int64_t host_begin_ns, int64_t host_end_ns, int64_t gpu_end_ns);

struct RankTrace {
  std::string path;          // as given by the user (for messages)
  int rank = -1;             // distributedInfo.rank; -1 when absent
  int world_size = -1;       // distributedInfo.world_size; -1 when absent
  int64_t origin_ns = 0;     // absolute time (ns) of ts_ns == 0: baseTimeNanoseconds + first ts
  std::string device_name;   // deviceProperties[0].name when present
  // The job's steps timed without the profiler, when the file says (the top-level
  // "emo_untraced_step_us" that emo.torch.capture adds: each a step's period, in µs).
  std::vector<int64_t> untraced_step_ns;
  StringTable strings;
  std::vector<Lane> lanes;
  std::vector<Event> events;  // sorted by (ts_ns asc, dur_ns desc, lane): parents before children
  std::vector<CollectiveArgs> collectives;
  std::vector<Step> steps;    // sorted by ts
  std::optional<ProfilerWindow> window;  // absent: the trace has no Trace span
  // After select_step: the GPUs' time in the step taken by ops launched before it (by device, then time).
  std::vector<PriorGpuBusy> prior_gpu_busy;
  ImportStats stats;

  std::string_view name_of(const Event& e) const { return strings.view(e.name); }
};

struct ReadOptions {
  // Keep python_function events (they are CPU-side nesting only; off saves memory).
  bool keep_python_functions = true;
};

// Reads a .json or .json.gz file. Fatal only when the file is unreadable, not
// JSON, or has no traceEvents array; bad events are counted in `stats`.
Result<RankTrace> read_trace(const std::string& path, const ReadOptions& options = {});
// Same, from a buffer already in memory (tests and the fuzzer). `name` is used in messages.
Result<RankTrace> parse_trace(std::string_view json, const std::string& name,
                              const ReadOptions& options = {});

// A trace as bytes and back (the same emo binary on both ends): how the processes of an MPI run hand
// the traces they read to the one that assembles the step (emo/dist/dist.h). from_wire checks the
// framing and every table index, so a cut or corrupt message is an Error, never a bad trace.
std::string to_wire(const RankTrace& t);
Result<RankTrace> from_wire(std::string_view bytes);

// Restricts `t` to one ProfilerStep: CPU events inside the step span, GPU ops
// launched (by correlation) from inside it, and sync records inside it. The GPU ops
// launched before the step that ran into it are dropped but their time on each GPU
// is kept in prior_gpu_busy.
// `step` = the ProfilerStep number; nullopt = the last complete step. A trace
// with no ProfilerStep is restricted the same way to its profiler window (the
// Trace span), which drops stray events a background thread recorded after the
// profiler stopped; the events dropped are counted in
// stats.outside_profiler_window. A trace with neither is left whole. Returns
// the step number used (-1: no step, the profiler window or the whole trace).
Result<int64_t> select_step(RankTrace& t, std::optional<int64_t> step);

// A trace of a CPU-only run (torch on a laptop or a CI machine) turned into the trace of a GPU job whose
// kernels mirror its CPU operators: every leaf cpu_op of at least kStandInMinOpNs launches (a
// cudaLaunchKernel at its start, kStandInLaunchNs long) a kernel of the same name on GPU 0 stream 7 that
// runs for the rest of the operator's time, and each ProfilerStep ends with a cudaDeviceSynchronize after
// its last such operator. The GPU side is then what an emulated GPU runs: a way to try EMO's whole loop
// (and test it) where there is no GPU, not a measure of the run's own GPU energy. An Error when the trace
// has GPU operations already or no operator. Returns the number of kernels added.
inline constexpr int64_t kStandInMinOpNs = 2000;
inline constexpr int64_t kStandInLaunchNs = 4000;
Result<int> cpu_ops_as_kernels(RankTrace& t);

}  // namespace emo::trace
