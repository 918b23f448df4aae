// Pieces of the emulator shared by its source files: power integration and the Kineto writer.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "emo/device/profile.h"
#include "emo/executor/executor.h"
#include "emo/trace/trace.h"
#include "truth.h"

namespace emo::emulator::detail {

// The emulated traces' baseTimeNanoseconds (2025-01-01T00:00:00Z); run time 0 is this instant.
inline constexpr int64_t kTraceOriginOffsetNs = 1735689600000000000;

// The power integral of one emulated GPU, swept as the run goes: op starts and ends and clock changes in
// time order, with constant power between consecutive events. Busy power of the ops running together:
// static power once, the largest op's dynamic power in full and a quarter of the others' (they share the
// SMs), capped at the board's limit; idle power in gaps. The energy at given times (step bounds, counter
// readings, probes) is answered as the sweep passes them, so a run holds neither its every op nor a
// run-long table of energy breakpoints (at 1,024 ranks those were a third of an optimize's memory).
class EnergySweep {
 public:
  // `clock_at`/`clock_mhz`: the GPU's clock line (entry 0: the clock at the start), which may grow as the
  // run goes; entries are in time order.
  EnergySweep(const TruthMemo& truths, const std::vector<int64_t>& clock_at, const std::vector<double>& clock_mhz)
      : truths_(&truths), clock_t_(&clock_at), clock_f_(&clock_mhz) {}
  void add_op(int64_t begin, int64_t end, uint32_t truth);
  // The energy from 0 to `when` (J), in answer(slot) once the sweep has passed it (or finish ran).
  // Ask before the sweep passes `when`: at the latest before the advance() whose `safe` is above it.
  size_t ask(int64_t when);
  // Sweeps every event before `safe`. The caller promises that no op or clock change added later comes
  // before `safe`.
  void advance(int64_t safe) { sweep(safe, 0, false); }
  // Sweeps the rest (events after `end` are taken at `end`) and the idle tail to `end`.
  void finish(int64_t end) { sweep(0, end, true); }
  double answer(size_t slot) const { return answers_[slot]; }
  double total_j() const { return e_; }
  int64_t busy_ns() const { return busy_ns_; }

 private:
  struct Event {
    int64_t t;
    uint64_t idx;  // op: its order of adding; clock change: its entry in the clock line
    uint32_t truth;
    uint8_t type;  // 0 = op end, 1 = clock change, 2 = op start
  };
  void sweep(int64_t safe, int64_t end, bool final);
  void recompute();
  void point(int64_t t, double e);  // a breakpoint of the integral: answers the questions before it

  const TruthMemo* truths_;
  const std::vector<int64_t>* clock_t_;
  const std::vector<double>* clock_f_;
  std::vector<Event> pending_;
  size_t next_clock_ = 1;
  uint64_t ops_ = 0;
  bool started_ = false;
  double f_ = 0, power_ = 0, e_ = 0;
  int64_t now_ = 0, busy_since_ = -1, busy_ns_ = 0;
  int64_t last_t_ = 0;  // the last breakpoint (the integral starts at (0, 0))
  double last_e_ = 0;
  std::vector<std::pair<uint32_t, uint64_t>> running_;  // (truth, op index), in order of starting
  std::vector<std::pair<int64_t, size_t>> questions_;   // (when, slot): answered before next_question_
  size_t next_question_ = 0;
  std::vector<double> answers_;
};

// One traced step: the program's times in that run (run clock, see executor::Program) and where the
// step started in the emulated run.
struct TracedStep {
  int64_t start_ns = 0;
  std::vector<int64_t> op_start, op_end, call_start, call_end, thread_begin, thread_end;
  static TracedStep of(const executor::Program& p, int64_t start_ns);
};

// The traced steps of rank `rank` as a Kineto trace: GPU ops at their executed times, CPU events
// through a monotone warp of their thread's time (the thread's calls give measured -> executed anchors).
std::string write_kineto(const std::vector<trace::RankTrace>& ranks, uint32_t rank, const executor::Program& program,
                         const std::vector<TracedStep>& steps, const device::DeviceProfile& profile);

}  // namespace emo::emulator::detail
