// The emulated GPU: runs a workload's step — its program, as the independent executor
// (emo/executor/executor.h) runs it — under an SM-clock schedule and gives back what a run on hardware
// would — a Kineto trace of the profiled steps at those clocks and an energy-counter
// log — plus the energy the counter measured over the run. Per-kernel truth (how each kernel's time
// and power respond to the clock) stays inside the emulator library; model/, pack/ and optimize/ do not
// link it. Also a `device::Device` (microbenchmarks, clock locks, energy counter) in virtual time, for
// `emo calibrate --device emulated:NAME`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "emo/base/result.h"
#include "emo/device/device.h"
#include "emo/device/profile.h"
#include "emo/trace/trace.h"

namespace emo::emulator {

// One clock change: issued `issue_ns` after the step's start (a timer in the runtime), in effect after
// the device's switching latency (median/p99 of the profile, drawn per change).
struct ClockChange {
  int64_t issue_ns = 0;
  int clock_mhz = 0;
};

// Per rank (index into the run's ranks): the clock at the very start of the run and the changes issued in every
// step. Empty `ranks` = every GPU at `initial_mhz` throughout; initial_mhz 0 = the device's default.
struct ClockSchedule {
  int initial_mhz = 0;
  std::vector<std::vector<ClockChange>> ranks;
  // Online instead (a runtime in virtual time): called as each step starts with its index and start
  // (ns from the run's start); fills per rank the changes made from then on, `issue_ns` from the
  // run's start. `ranks` is then ignored.
  std::function<void(int step, int64_t step_start_ns, std::vector<std::vector<ClockChange>>& out)> online;
  static ClockSchedule locked(int clock_mhz) { return ClockSchedule{clock_mhz, {}, {}}; }
};

inline constexpr int kMaxRunSteps = 1000;  // steps a user asks for (evaluate, apply), at most
// A run's own bound: steps × the step's GPU ops and runtime calls (the executor's program; no more than
// the step's graph nodes, which bound the packing's profiling plans). Short steps (µs decode steps, a
// few ops) run as many steps as 2 s of energy-counter window need; long ones are bounded by their size.
inline constexpr int64_t kMaxRunNodeSteps = 200'000'000;
inline constexpr int kMaxEmulatedSteps = 10'000'000;

struct RankRun;

struct RunOptions {
  int steps = 1;           // the step is run this many times back to back (see kMaxRunNodeSteps)
  int trace_steps = 1;     // the last `trace_steps` steps are written to the Kineto trace (0: none)
  double jitter = 0.004;   // run-to-run variation of each GPU op's duration (relative σ)
  uint64_t seed = 1;       // run seed (jitter, switching latencies, counter phase)
  bool energy_log = true;  // keep the counter samples
  // Evaluation only (hardware has no such thing): the exact cumulative energy of each GPU every
  // `probe_period_ns` (0 = none), for per-pack energy truth in fidelity reports.
  int64_t probe_period_ns = 0;
  // When set: called with each rank's run as soon as its trace is written (its energy, busy time and probes
  // are already in), so that the caller can parse or store the text and free it before the next rank's is
  // written; an error stops the run and is returned.
  std::function<Status(RankRun&)> take_trace;
};

using device::EnergySample;

struct RankRun {
  int rank = 0;
  std::string trace_json;             // Kineto trace of the traced steps (empty if trace_steps 0)
  std::vector<EnergySample> energy;   // counter log over the whole run
  double energy_j = 0;                // counter delta from the run's start to its end
  int64_t gpu_busy_ns = 0;            // union of GPU op time over the run
  int clock_changes = 0;              // changes that took effect
  // RunOptions::probe_period_ns > 0: exact energy (J) from the run's start to probe_origin_ns + k·period,
  // k = 0, 1, ...; probe_origin_ns is on the trace's clock (baseTimeNanoseconds + ts).
  std::vector<double> probe_j;
  int64_t probe_origin_ns = 0;
  int64_t probe_period_ns = 0;
  // Exact energy from the run's start to an absolute trace-clock time (linear between probes).
  double probe_energy_at(int64_t t_ns) const;
};

struct RunResult {
  std::vector<int64_t> step_ns;  // makespan of each step
  int64_t begin_ns = 0;          // run window: ns from the run's start (the first step's begin)
  int64_t end_ns = 0;
  double energy_j = 0;           // all GPUs, whole run (busy and idle)
  std::vector<double> step_energy_j;  // all GPUs, each step (from its start to the next step's)
  std::vector<RankRun> ranks;
  // The run's time 0 on the trace clock: energy samples and traces are at trace_origin_ns + ns.
  int64_t trace_origin_ns = 0;
  double mean_step_ns() const;
  double energy_per_step_j() const { return step_ns.empty() ? 0 : energy_j / double(step_ns.size()); }
};

class EmulatedGpu {
 public:
  // `seed` draws this GPU's constants and every kernel's truth (same seed, same GPU). `host_scale`
  // multiplies every CPU thread's own time in the steps it runs (executor::Scenario::cpu_factor): the
  // job as its host runs it, where the trace's host ran slower (the profiler's cost) or faster.
  EmulatedGpu(device::DeviceProfile profile, uint64_t seed, double host_scale = 1.0);
  ~EmulatedGpu();
  EmulatedGpu(EmulatedGpu&&) noexcept;
  EmulatedGpu& operator=(EmulatedGpu&&) noexcept;

  const device::DeviceProfile& profile() const { return profile_; }
  uint64_t seed() const { return seed_; }
  double host_scale() const { return host_scale_; }
  double energy_update_ms() const;

  // `ranks`: the step's traces, one per rank, each restricted to the step (analysis::Workload::ranks).
  // Errors: clocks the device does not support, schedules for ranks the workload does not have, a
  // step the executor cannot run.
  Result<RunResult> run(const std::vector<trace::RankTrace>& ranks, const ClockSchedule& schedule,
                        const RunOptions& options = {}) const;

  struct Impl;

 private:
  device::DeviceProfile profile_;
  uint64_t seed_ = 0;
  double host_scale_ = 1.0;
  std::unique_ptr<Impl> impl_;
};

// "emulated:h100" style device for microbenchmarks (calibration), in virtual time.
Result<std::unique_ptr<device::Device>> open_emulated_device(const std::string& profile_name, uint64_t seed = 1);
std::unique_ptr<device::Device> open_emulated_device(device::DeviceProfile profile, uint64_t seed);

// The energy log as CSV: "t_ns,energy_mj" rows after a "# emo-energy-log/1 ..." comment line.
std::string energy_log_csv(const RankRun& run, const std::string& device);

}  // namespace emo::emulator
