// The runtime inside a job: two calls per step on the job's thread, everything else on a controller
// thread. `step_begin()` anchors the step on the GPU — a host function enqueued on the job's CUDA
// stream (cuLaunchHostFunc from libcuda.so.1, loaded at run time), which runs when the GPU reaches it —
// or, without a stream, at the CPU time of the call. The controller thread, woken by each anchor,
// reads the energy counter, feeds the monitor (step times between anchors, the safety fallback),
// and issues the step's clock changes at their `issue_at_us` from the anchor, one call at a time,
// skipping redundant and superseded ones (emo/runtime/control.h). The job's thread never waits for
// NVML. `stop()` (or the destructor) resets the clock; a failed reset is an error, never swallowed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "emo/base/result.h"
#include "emo/runtime/clock_control.h"
#include "emo/runtime/control.h"

namespace emo::runtime {

// cuLaunchHostFunc's shape: (CUstream, void (*)(void*), void*) -> CUresult (0 = success).
using LaunchHostFunc = int (*)(void* stream, void (*fn)(void*), void* data);
// libcuda.so.1's cuLaunchHostFunc (the one already loaded in a CUDA process, else loaded now).
struct CudaLaunch {
  LaunchHostFunc fn = nullptr;
};
Result<CudaLaunch> cuda_launch_host_func();

struct RuntimeOptions {
  Program program;
  size_t rank = 0;                    // which of program.ranks this process's GPU runs
  ClockControl* clock = nullptr;      // required unless dry_run
  std::function<Result<double>()> energy_j;  // the GPU's energy counter (J); optional
  double energy_update_ms = 100;      // the counter's update period: blocks span 25 of them
  double counter_poll_ms = 2;         // the meter thread reads the counter this often (updates found by change),
                                      // or 10 times a read's own time apart when reads are slower than 0.2 ms
  PhaseOptions phases{0, false, 2, 10};   // block_steps 0: from the policy's predicted step time
  bool dry_run = false;               // decide and record every change, call nothing
  // Anchor on the GPU: host functions enqueued on `stream` with `launch` (cuda_launch_host_func()
  // for a real job). Without `launch` the CPU time of step_begin() is the anchor.
  LaunchHostFunc launch = nullptr;
  void* stream = nullptr;
  bool log_to_stderr = true;          // fallbacks and failed calls said on stderr as they happen
};

// One decided change, as the controller made it (or, dry run, would have).
struct IssueRecord {
  int step = 0;
  uint32_t pack = 0;
  int clock_mhz = 0;
  int64_t anchor_ns = 0;    // the step's anchor (steady clock)
  int64_t due_ns = 0;       // anchor + issue_at
  int64_t at_ns = 0;        // when the call was made
  int64_t returned_ns = 0;  // when it returned
  bool ok = true;
};

struct RuntimeReport {
  MeasuredReport measured;
  std::vector<Fallback> fallbacks;
  std::vector<IssueRecord> issues;  // the first kKeptIssues calls
  static constexpr size_t kKeptIssues = 4096;
  int64_t calls = 0;                  // all of them
  std::vector<StepRecord> steps;      // the last Monitor::kKeptSteps steps
  int64_t steps_seen = 0;
  int64_t skipped_redundant = 0, skipped_superseded = 0;
  std::vector<Error> errors;  // failed clock calls or energy reads (the policy is dropped after one)
  int block_steps = 0;
  // CLOCK_REALTIME − the steady clock of every *_ns above, sampled at start: adding it puts anchors
  // and calls on the clock of a Kineto trace's baseTimeNanoseconds (to compare with its kernels).
  int64_t realtime_minus_steady_ns = 0;
};

class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> start(RuntimeOptions options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The job's thread: mark the start of a step (enqueues the anchor; returns at once) and its end.
  void step_begin();
  void step_end();
  // Stops the controller (after the changes already due), resets the clock, returns the report.
  // A failed reset is the error.
  Result<RuntimeReport> stop();
  // The report so far (the job still running; thread-safe).
  RuntimeReport snapshot() const;

  struct Impl;

 private:
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The report as JSON (the same keys as `emo apply`'s `measured`, plus the issue log when asked).
nlohmann::json runtime_report_json(const RuntimeReport& r, bool with_issues);

}  // namespace emo::runtime
