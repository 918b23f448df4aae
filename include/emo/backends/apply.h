// `emo apply` on the emulated GPU: the step's program runs for N steps while the runtime's own core
// (emo/runtime/control.h) applies the policy online, in virtual time — each step anchored when the
// GPU reaches it (plus a host-callback delay drawn as on hardware), each change issued from that
// anchor by a controller that makes one NVML call at a time (call latency drawn as on hardware), the
// clock in effect one switching latency later (the emulated GPU's draw), step times measured at the
// anchors, energy from the counter's log over windows of steps, and the policy dropped for the default
// clock when its measured slowdown runs over the bound.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "emo/analysis/analysis.h"
#include "emo/backends/target.h"
#include "emo/base/result.h"
#include "emo/optimize/optimize.h"
#include "emo/runtime/control.h"

namespace emo::emulator {
class EmulatedGpu;
}

namespace emo::backends {

struct ApplyOptions {
  int steps = 200;          // steps of the run (emulator::kMaxRunSteps at most); 0: 24 blocks (fewer where
                            // they would not fit)
  bool verify = false;      // alternate blocks at the default clock and under the policy
  int block_steps = 0;      // steps per block; 0: enough for 25 energy-counter updates (at least 4)
  uint64_t seed = 1;        // the run's draws (jitter, latencies, anchors)
  // Hardware-like latencies, lognormal (median, p99). The host callback that anchors a step runs tens
  // of µs after the GPU reaches it; an NVML clock call takes ≈4–5 ms alone and 10–20 ms inside a busy
  // application (ANCHORS.md: "Switching latency", zeus#29).
  double anchor_delay_median_us = 30, anchor_delay_p99_us = 300;
  double call_median_ms = 5, call_p99_ms = 20;
  double counter_poll_ms = 2;  // how often the runtime reads the energy counter (an NVML read is cheap)
};

struct ApplyResult {
  runtime::MeasuredReport measured;
  std::vector<runtime::Fallback> fallbacks;
  int block_steps = 0;
  int steps = 0;
  int64_t calls = 0;            // clock calls the controllers made
  int64_t skipped_redundant = 0, skipped_superseded = 0;
  int64_t changes_landed = 0;   // changes that took effect on the emulated GPUs
  double mean_late_us = 0, p99_late_us = 0;  // how late calls were issued against their due time
  double mean_anchor_delay_us = 0;
};

Result<ApplyResult> apply_emulated(const Target& on, const analysis::Workload& w, const optimize::PolicyFile& policy,
                                   const ApplyOptions& options);
// The run itself, phases decided (apply_emulated checks the options and picks them).
Result<ApplyResult> apply_run(const emulator::EmulatedGpu& gpu, const analysis::Workload& w, const runtime::Program& program,
                              runtime::PhaseOptions phases, const ApplyOptions& options);

nlohmann::json apply_json(const ApplyResult& r);

}  // namespace emo::backends
