// `emo analyze` and `emo whatif` as a library: load traces (one per rank),
// build the graph, replay it, and summarize the critical path, slack and
// per-GPU busy/idle time. The CLI only parses flags and prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/analysis/topology.h"
#include "emo/base/result.h"
#include "emo/dist/dist.h"
#include "emo/graph/graph.h"
#include "emo/graph/part.h"
#include "emo/replay/replay.h"
#include "emo/trace/trace.h"

namespace emo::replay {
struct ShardTimeline;  // emo/replay/distributed.h
}  // namespace emo::replay

namespace emo::analysis {

struct LoadOptions {
  std::optional<int64_t> step;  // ProfilerStep number; nullopt = last complete step
  // A CPU-only trace's operators stand in for the kernels of a GPU job (trace::cpu_ops_as_kernels).
  bool cpu_ops_as_kernels = false;
  // Where the profiler slowed the step past the doubt (kProfilerSlowdownDoubtPct) against the job's
  // untraced steps the traces carry, take its cost on the host out (emo/analysis/deprofile.h) and work
  // on the step as the job runs it (Workload::deprofiled says so).
  bool deprofile = false;
  graph::BuildOptions build;
};

// The profiler's cost on the host, as estimate_profiler_cost (emo/analysis/deprofile.h) finds it.
struct ProfilerCost {
  int64_t traced_ns = 0;      // the step as the trace measured it
  int64_t untraced_ns = 0;    // the job's untraced step: the median over ranks of each rank's median
  double host_scale = 1.0;    // host time x this replays the step at untraced_ns (0 to 1)
  int64_t replayed_ns = 0;    // the step replayed at host_scale
  int64_t host0_ns = 0;       // the step replayed with no host time at all
  // false: even without host time the step is longer than the untraced one (host_scale 0): the host's
  // time does not explain the whole difference.
  bool explained = true;
};

// The traces of one step and its graph.
struct Workload {
  std::vector<trace::RankTrace> ranks;  // ordered by rank
  std::vector<int64_t> steps;           // step used per rank (-1: whole trace)
  int64_t events = 0;                   // events kept across ranks
  graph::Graph graph;
  // Set where LoadOptions::deprofile took the profiler's cost out: the step is the one the job runs
  // (ranks and graph are of the step written back at cost.host_scale).
  std::optional<ProfilerCost> deprofiled;
};

// The trace files `paths` names: a folder stands for the files in it (not its subfolders) whose names
// end in .json or .json.gz, hidden ones left out, in byte order of their names (one file per rank, as
// torch.profiler's tensorboard_trace_handler writes them; HTA's trace_dir); other paths, "-" included,
// are kept as given. Error: a folder that holds no such file, or one that cannot be listed.
Result<std::vector<std::string>> expand_trace_paths(const std::vector<std::string>& paths);

// Reads every file, orders them by rank (distributedInfo.rank, else file
// order), selects the step and builds the graph.
Result<Workload> load(const std::vector<std::string>& paths, const LoadOptions& options);
// The same over the processes of a run (emo/dist/dist.h): each reads its shard of `paths` and restricts
// it to the step; process 0 receives the others' tables and returns the workload — the same, errors
// included, as load() in one process. On the others it serves the shard (serve_shard) and returns an
// Error whose what is kShardHandedOver.
Result<Workload> load(const std::vector<std::string>& paths, const LoadOptions& options, dist::Comm& comm);
inline constexpr std::string_view kShardHandedOver = "this process handed its shard of the rank files to process 0";
// What a process other than 0 does in load(): reads its shard and sends it to process 0, one message per
// file (an error is sent as such, for process 0 to say). Process 0 must call load() with the same paths.
Status serve_shard(const std::vector<std::string>& paths, const LoadOptions& options, dist::Comm& comm);
// Whether load() on process 0 of a run of several received the others' shards (else, once it has failed
// without, the others may wait on their sends: the run must be aborted).
bool shards_collected();
// On process 0 that failed before load(): receives the others' shards and drops them, so that none is
// left waiting on its sends (an Error where one does not come in time: the run must be aborted then).
Status drain_shards(const std::vector<std::string>& paths, dist::Comm& comm);
// The same from traces already read (tests, other front ends).
Result<Workload> assemble(std::vector<trace::RankTrace> ranks, const LoadOptions& options);

// One process's part of the step in a run of several (DESIGN.md §9, docs/mpi.md): the ranks it builds, a
// contiguous part of them in rank order, and the part of the step's graph it built of them.
struct WorkloadPart {
  std::vector<trace::RankTrace> ranks;  // this process's ranks, in rank order
  std::vector<int64_t> steps;           // the step used per rank of `ranks` (-1: whole trace)
  int64_t events = 0;                   // events kept across every process's ranks
  graph::GraphPart part;
  std::optional<ProfilerCost> deprofiled;  // as Workload::deprofiled (LoadOptions::deprofile)
};
// load() without the step assembled anywhere: every process of `comm` calls it with the same paths; each
// reads its shard of the files (process 0's split by bytes), every process learns every file's header (its
// rank, world size, step, events, or its error), so that each says the error one process would (the first
// file that cannot be read, then the checks across ranks, then a step a rank lacks); then each takes a
// contiguous part of the ranks in rank order of about equal events (a trace another process read is
// moved to it) and builds its part of the graph (graph::build_part). With options.deprofile, the profiler's
// cost is found as one process finds it (each rank's untraced steps gathered, the replays shared), and
// each process writes back and rebuilds its own ranks. Process 0 checks the paths (and `before`, what it checked first:
// the outputs) and where it fails, says so to the others, which stop at once with an Error of their own.
// `rank_bounds` (P + 1 positions in rank order, the same on every process): the ranks each process builds,
// where another step's parts already fixed them (a profiling run of the step read as the step was: each
// process its own GPUs); an Error on every process where they do not fit the files (another rank count).
Result<WorkloadPart> load_part(const std::vector<std::string>& paths, const LoadOptions& options, dist::Comm& comm,
                               const Status& before = {}, const std::vector<size_t>* rank_bounds = nullptr);

struct GpuUsage {
  uint32_t rank = 0;
  int32_t device = 0;
  int64_t ops = 0;
  int64_t busy_ns = 0;  // union of GPU op intervals
  int64_t idle_ns = 0;  // step span minus busy
  bool operator==(const GpuUsage&) const = default;
};

struct Analysis {
  int64_t measured_span_ns = 0;
  int64_t replayed_span_ns = 0;
  double replay_error_pct = 0;
  replay::CriticalPath critical_path;
  std::vector<int64_t> slack_ns;  // per node
  std::vector<GpuUsage> gpus;
};
Analysis analyze(const Workload& w);
// analyze() over the processes of a run, each with the part of the step's graph it built of its own ranks
// (graph::build_part; every process of the run calls it): the step's spans, critical path (global node ids)
// and GPUs (global rank indexes) on every process, slack_ns for the part's nodes (its local ids). The
// replay is shared (emo/replay/distributed.h): no process holds the whole graph.
// With `replayed`, the shared replay's timeline of the part too (its points' times, the step's begin and end:
// what pack::make_packs_part packs from).
Result<Analysis> analyze_part(const graph::GraphPart& part, dist::Comm& comm, replay::ShardTimeline* replayed = nullptr);

// GPU ops (kernels, collective kernels, memcpys, memsets) on the extracted
// critical path, each counted once. Not the same as the ops with no slack:
// those are all ops on any binding chain, ties included.
int64_t gpu_ops_on_path(const Workload& w, const Analysis& a);

// What `emo analyze` warns about the import, one text per line without the
// `warning: ` prefix: malformed events skipped, events outside the profiler's
// window dropped (traces without ProfilerStep). Empty when there is nothing.
std::vector<std::string> import_warnings(const Workload& w);

// Doubt thresholds (docs/replay.md, "When emo doubts a step"): a replay further than this from the
// measured step, and launch calls without GPU activity from this share of all launches, are warned about.
inline constexpr double kReplayDoubtPct = 5.0;
inline constexpr double kLostLaunchDoubtPct = 1.0;
// ... and rank files whose captures start further apart than this (seconds).
inline constexpr double kCaptureGapDoubtS = 600.0;
// A step that took this much longer under the profiler than the job's steps without it (the file's
// emo_untraced_step_us, which emo.torch.capture writes).
inline constexpr double kProfilerSlowdownDoubtPct = 10.0;
// Groups of ranks that share no collective (separate jobs) whose steps differ by more than this.
inline constexpr double kRankGroupSpanDoubtPct = 5.0;

// Launch calls of the step (kernels and copies; memsets left out, CUPTI often records none) and those
// whose GPU op is not in the trace: the profiler lost it, it ran past the recording, or the event was
// dropped as malformed (a negative duration). `example`: the first lost one.
struct LostLaunches {
  int64_t launches = 0, lost = 0;
  std::string example;
  double pct() const { return launches > 0 ? 100.0 * double(lost) / double(launches) : 0.0; }
};
LostLaunches lost_launches(const Workload& w);

// Synchronize calls (device, stream, event) that went on blocking after every GPU op they could wait for
// had ended: the GPU was busy with work the trace does not show (a graph whose kernels the profiler did
// not record, another process). Each such call's own time past kUnrecordedWaitMinNs counts (a wake-up
// takes µs); `pct` is the largest rank's sum against the step's measured span.
inline constexpr int64_t kUnrecordedWaitMinNs = 200'000;
inline constexpr double kUnrecordedWaitDoubtPct = 5.0;
struct UnrecordedWaits {
  int64_t calls = 0, wait_ns = 0;  // over every rank
  double pct = 0;                  // the largest rank's share of the step (%)
  std::string example;             // the longest: call, rank, thread, how long after the last GPU op
};
UnrecordedWaits unrecorded_waits(const Workload& w, const Analysis& a);

// GPU ops on the critical path that started long after their launch call with nothing of the step
// running on their GPU meanwhile: the launch edge binds them, and the gap is time the GPU spent on work
// the step does not show (kernels the profiler left out, an earlier step's queued work, another
// process) or a dependency the trace does not record (an event wait without sync events). The replay
// keeps such a gap as a fixed launch delay that no clock moves. Each such launch segment of the path
// counts the part of it, from kUnrecordedWaitMinNs, during which no op of the step ran on the op's GPU;
// `pct` is their sum against the step's measured span (the path's segments never overlap).
struct LateGpuStarts {
  int64_t ops = 0, wait_ns = 0;
  double pct = 0;
  std::string example;  // the longest: op, launch call, rank, stream, the GPU's idle time before it
};
LateGpuStarts late_gpu_starts(const Workload& w, const Analysis& a);

// Runtime calls that do not wait on the GPU (launches, copies put on a stream, allocations, ...) yet kept
// the host kOneTimeCallMinNs or more while no GPU op of the step ran on their rank: a first call's one-time
// cost (CUDA loading a kernel's module on its first launch, cuDNN or cuBLAS setting up, a context or a large
// allocation made), which the job's later steps do not pay. A launch that blocks on a full launch queue
// blocks while the GPU runs: not counted. Each call counts its time with the GPU idle; `pct` is the largest
// rank's sum against the step's measured span.
inline constexpr int64_t kOneTimeCallMinNs = 10'000'000;
struct OneTimeCalls {
  int64_t calls = 0, ns = 0;  // over every rank
  double pct = 0;             // the largest rank's share of the step (%)
  std::string example;        // the longest: call, the operator it ran in, rank, thread
};
OneTimeCalls one_time_calls(const Workload& w, const Analysis& a);

// GPU ops of the step that no launch call of the step started (launched before it: an earlier step's
// work still queued when it began). They are counted in the step's GPU time and energy, so per-step
// figures can exceed the job's by up to their share; said from kEarlierLaunchDoubtPct of the step's
// GPU op time (the sum of its GPU ops' measured durations).
inline constexpr double kEarlierLaunchDoubtPct = 5.0;
struct EarlierLaunches {
  int64_t ops = 0, ns = 0, gpu_ns = 0;
  std::string example;  // the longest
  double pct() const { return gpu_ns > 0 ? 100.0 * double(ns) / double(gpu_ns) : 0.0; }
};
EarlierLaunches earlier_launches(const Workload& w);

// import_warnings() and the doubts about the step itself: fewer rank files than the run's world_size,
// ranks whose steps are different ProfilerSteps or were captured far apart (kCaptureGapDoubtS), ranks
// recorded on different GPUs, collectives whose matched kernels disagree (BuildStats::
// collectives_inconsistent), groups of ranks that share no collective with steps of different lengths
// (kRankGroupSpanDoubtPct), launch calls whose GPU op is not in the trace (kLostLaunchDoubtPct), synchronize
// calls that waited on GPU work the trace does not show (kUnrecordedWaitDoubtPct), GPU ops on the critical
// path that started long after their launch on an idle GPU (late_gpu_starts, the same threshold), runtime
// calls that kept the host with the GPU idle (one_time_calls, the same share), GPU ops
// launched before the step (kEarlierLaunchDoubtPct of its GPU time), a step the
// profiler slowed against the job's untraced steps (kProfilerSlowdownDoubtPct), a replay away from the
// measured step (kReplayDoubtPct).
std::vector<std::string> step_warnings(const Workload& w, const Analysis& a);

// A trace recorded on another GPU model than `profile_name` ("h100", from --device): its model
// number (V100, MI250, T4, ...) is not the profile's. Nothing where the trace names no model.
std::vector<std::string> device_warnings(const std::vector<trace::RankTrace>& ranks, const std::string& profile_name);
inline std::vector<std::string> device_warnings(const Workload& w, const std::string& profile_name) {
  return device_warnings(w.ranks, profile_name);
}
// device_warnings() over the processes of a run, each with its part's ranks: the first rank's warning in
// rank order, on process 0 (nothing on the others). Every process of the run calls it.
Result<std::vector<std::string>> device_warnings_part(const WorkloadPart& w, const std::string& profile_name,
                                                      dist::Comm& comm);

// JSON of DESIGN.md §6 for `analyze`; `per_kernel` adds the `kernels` list.
nlohmann::json to_json(const Workload& w, const Analysis& a, bool per_kernel);
// The summary `emo analyze` prints; its warnings are import_warnings(), printed
// apart (stderr), not in this text.
std::string to_text(const Workload& w, const Analysis& a);
// What `emo analyze` says of the step, from the parts of a run (load_part, analyze_part): on process 0,
// to_json(), to_text(), step_warnings() and, where asked, kernels_csv() and critical_path_csv() of the whole
// step, the same bytes (each process's facts are gathered there: its ranks, its path ops and path nodes,
// its slack counts, its kernels, its doubts); empty on the others.
struct ReportAsk {
  bool per_kernel = false;         // the JSON's `kernels`
  bool kernels_csv = false;        // kernels_csv()
  bool critical_path_csv = false;  // critical_path_csv()
};
struct StepReport {
  nlohmann::json json;
  std::string text;
  std::vector<std::string> warnings;
  std::string kernels_csv, critical_path_csv;  // where asked
};
Result<StepReport> report_part(const WorkloadPart& w, const Analysis& a, const ReportAsk& ask, dist::Comm& comm);
// CSV: one row per GPU op (rank, stream, name, start_us, dur_us, slack_us, critical).
std::string kernels_csv(const Workload& w, const Analysis& a);

// CSV: the critical path piece by piece (what, kind, rank, name, start_us, dur_us, category).
std::string critical_path_csv(const Workload& w, const Analysis& a);

// ---- what-if ----
// SELECTOR=FACTOR where SELECTOR is a kernel-name regex, `stream:N` or `cat:NAME`.
struct Scale {
  std::string selector;
  double factor = 1.0;
};
inline constexpr double kMaxScaleFactor = 1e6;
// "SELECTOR=FACTOR", FACTOR a number from 0 to kMaxScaleFactor.
Result<Scale> parse_scale(const std::string& text);

struct WhatIf {
  int64_t baseline_span_ns = 0;
  int64_t predicted_span_ns = 0;
  std::vector<int64_t> matched;  // nodes matched per scale
  std::optional<TopologyReport> topology;  // with a topology
};
// A topology to ask about (`whatif --topology`), and optionally the one the trace was recorded on.
struct TopologyQuestion {
  Topology asked;
  std::optional<Topology> recorded;
};
// Fails when a selector is malformed or matches nothing. With `topology`, the matched collectives'
// transfers take their times on it first (topology_durations), then the scales apply.
Result<WhatIf> what_if(const Workload& w, const std::vector<Scale>& scales,
                       const TopologyQuestion* topology = nullptr);

// what_if() over the processes of a run, each with its part of the step (load_part; every process calls it
// with the same scales): each selects among its own nodes, a collective kernel's scale goes to the process
// that holds its collective, the matches are summed, and both replays are shared (emo/replay/distributed.h).
// With `topology` (the same on every process), each collective's transfer is modeled by the process that
// holds it (its members' ranks sent to it) and process 0 joins the report. The same WhatIf as what_if() of
// the whole step on process 0 (on the others, the topology's report holds only their own collectives).
Result<WhatIf> what_if_part(const WorkloadPart& w, const std::vector<Scale>& scales, dist::Comm& comm,
                            const TopologyQuestion* topology = nullptr);

// Category of a node as `cat:NAME` sees it: kernel, gpu_memcpy, gpu_memset,
// nccl, cpu_op, user_annotation, python_function, cuda_runtime, cuda_driver, cpu_gap.
std::string node_category(const Workload& w, graph::NodeId n);
// The same for a node of `g`, the graph of `ranks` (a process's part: its ranks).
std::string node_category(const graph::Graph& g, const std::vector<trace::RankTrace>& ranks, graph::NodeId n);

}  // namespace emo::analysis
