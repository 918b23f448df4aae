// Pieces of the emulator shared by its source files: power integration and the Kineto writer.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/replay/replay.h"
#include "truth.h"

namespace emo::emulator::detail {

// The emulated traces' baseTimeNanoseconds (2025-01-01T00:00:00Z); run time 0 is this instant.
inline constexpr int64_t kTraceOriginOffsetNs = 1735689600000000000;

struct OpSpan {
  int64_t begin = 0, end = 0;
  uint32_t truth = 0;
};

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
EnergyIntegral integrate_energy(const GpuTruth& gpu, const std::vector<KernelTruth>& truths,
                                std::vector<OpSpan> ops, const std::vector<int64_t>& clock_t,
                                const std::vector<double>& clock_f, int64_t end);

std::string write_kineto(const analysis::Workload& w, uint32_t rank,
                         const std::vector<std::pair<int64_t, replay::Timeline>>& steps, int64_t g0,
                         const device::DeviceProfile& profile);

}  // namespace emo::emulator::detail
