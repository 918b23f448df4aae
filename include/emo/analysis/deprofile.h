// The profiler's own cost on the host, taken out of a step (docs/replay.md, "The profiler's cost").
//
// torch.profiler slows the host: every recorded operator and runtime call costs time, so the traced
// step can be far slower than the job's (+60 % on an H200 training step) and shows GPU slack that the
// job does not have. Where the trace carries the job's untraced step periods (`emo_untraced_step_us`,
// written by emo.torch.capture and EnergyOptimizer), the host time that explains the difference is
// found by replay: every host node (CPU op self time, runtime and driver calls, annotations, Python
// frames, the gaps between them; not waits) scaled by one factor, the largest at which the replayed
// step is no longer than the untraced one. The step at that factor is written back as Kineto traces,
// GPU ops at their replayed times and every other event through its lane's time warp: a trace of the
// job as it runs without the profiler, for every other command to read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/base/result.h"

namespace emo::analysis {

// The workload of the step without the profiler's cost where the profiler slowed it by more than
// kProfilerSlowdownDoubtPct against the untraced steps the traces carry (LoadOptions::deprofile), else
// `w` as it is. The new workload's ranks keep their files' paths.
Result<Workload> without_profiler_cost(Workload w, const LoadOptions& options);

// The factor on host time that replays the step at the job's untraced step: `untraced_ns` where given
// (the user's own figure, e.g. from the job's log), else the traces' emo_untraced_step_us. Errors: no
// untraced step known; the traced step is not slower than the untraced one.
Result<ProfilerCost> estimate_profiler_cost(const Workload& w, std::optional<int64_t> untraced_ns = std::nullopt);

// Whether node `n` is host time the profiler inflates (its category as `whatif --scale cat:` sees it:
// cpu_op, user_annotation, python_function, cuda_runtime, cuda_driver, cpu_gap).
bool is_host_time(const Workload& w, graph::NodeId n);
bool is_host_time(const graph::Graph& g, graph::NodeId n);

// The step replayed with every host node's duration x `host_scale`, in ns.
int64_t replay_with_host_scale(const Workload& w, double host_scale);

// Each rank's step replayed with host time x `host_scale`, as a Kineto trace (JSON text, in the
// workload's rank order). `cost` (optional) is recorded in the file under "emo_deprofiled".
std::vector<std::string> traces_with_host_scale(const Workload& w, double host_scale, const ProfilerCost* cost);

// What `emo deprofile` does and says.
struct Deprofiled {
  std::optional<ProfilerCost> cost;  // absent where the factor was given
  double host_scale = 1.0;
  int64_t replayed_ns = 0;              // the step at host_scale
  std::vector<std::string> files;       // written, one per rank (DIR/<name>.json)
  std::vector<std::string> warnings;    // e.g. a slowdown the host's time does not explain
};
// Writes the step with host time x `host_scale` (nullopt: the factor estimate_profiler_cost finds for
// `untraced_ns`, or for the traces' untraced steps where that is nullopt too) into
// the folder `out_dir`, one <name>.json per rank (the input's file name without .json/.json.gz; _rank<R>
// added where two share one), replacing the folder only once complete (AtomicDir).
Result<Deprofiled> deprofile(const Workload& w, const std::string& out_dir, std::optional<double> host_scale,
                             std::optional<int64_t> untraced_ns = std::nullopt);

}  // namespace emo::analysis
