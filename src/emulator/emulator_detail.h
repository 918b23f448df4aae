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

// One op of a run as the energy integral needs it: 16 bytes, for a run holds every op of every step of
// every rank until its energy is integrated (a third of a 1,024-rank optimize's memory was these).
struct OpSpan {
  int64_t begin = 0;
  uint32_t dur = 0;  // ns; an op longer than 4.29 s is held as consecutive spans (add_span)
  uint32_t truth = 0;
  int64_t end() const { return begin + int64_t(dur); }
};
static_assert(sizeof(OpSpan) == 16);

inline void add_span(std::vector<OpSpan>& spans, int64_t begin, int64_t end, uint32_t truth) {
  constexpr int64_t kMax = std::numeric_limits<uint32_t>::max();
  for (; end - begin > kMax; begin += kMax) spans.push_back({begin, uint32_t(kMax), truth});
  spans.push_back({begin, uint32_t(end - begin), truth});
}

// Cumulative energy of one GPU as breakpoints (power is constant between them).
struct EnergyIntegral {
  std::vector<int64_t> t;
  std::vector<double> e_j;
  double total_j = 0;
  int64_t busy_ns = 0;
  double at(int64_t when) const;  // energy from 0 to `when`, J
};

// Busy power of the ops running together: static power once, the largest op's dynamic power in full
// and a quarter of the others' (they share the SMs), capped at the board's limit; idle power in gaps.
EnergyIntegral integrate_energy(const TruthMemo& truths, std::vector<OpSpan> ops, const std::vector<int64_t>& clock_t,
                                const std::vector<double>& clock_f, int64_t end);

// One traced step: the program's times in that run (run clock, see executor::Program) and where the
// step started in the emulated run.
struct TracedStep {
  int64_t start_ns = 0;
  std::vector<int64_t> op_start, op_end, call_start, call_end, thread_end;
  static TracedStep of(const executor::Program& p, int64_t start_ns);
};

// The traced steps of rank `rank` as a Kineto trace: GPU ops at their executed times, CPU events
// through a monotone warp of their thread's time (the thread's calls give measured -> executed anchors).
std::string write_kineto(const std::vector<trace::RankTrace>& ranks, uint32_t rank, const executor::Program& program,
                         const std::vector<TracedStep>& steps, const device::DeviceProfile& profile);

}  // namespace emo::emulator::detail
