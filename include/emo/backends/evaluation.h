// Evaluation on the emulated GPU: plans measured as a runtime would run them (the optimizer's
// `PlanMeter`), and the pack models' fidelity against the emulated GPU's per-pack truth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/backends/target.h"
#include "emo/base/result.h"
#include "emo/optimize/check.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"

namespace emo::backends {

// Plans run on an emulated Target for one workload: each run starts at `default_clock_mhz` and the
// steps after the first start at the clock the last pack left (steady state); the first step is left
// out of the measurement. Step times and counter energy only, as on hardware.
class EmulatedMeter final : public optimize::PlanMeter {
 public:
  // Errors when `on` is not an emulated device.
  static Result<EmulatedMeter> make(const Target& on, const analysis::Workload& w, int default_clock_mhz);
  const std::string& device_name() const override { return target_->spec_text(); }
  Result<optimize::Measured> measure(const std::vector<optimize::AppliedPack>& packs, const std::vector<int>& clocks,
                                     const std::vector<int64_t>& issue_at_ns, int steps, const std::string& name,
                                     uint64_t seed = kEvaluationSeed) const override;
  static constexpr uint64_t kEvaluationSeed = 424242;  // not the check's (optimize::CheckOptions::seed)

 private:
  EmulatedMeter(const Target& on, const analysis::Workload& w, int default_clock_mhz)
      : target_(&on), workload_(&w), default_clock_mhz_(default_clock_mhz) {}
  const Target* target_;
  const analysis::Workload* workload_;
  int default_clock_mhz_;
};

// ---- fidelity of the pack models at a clock, against the emulated GPU's truth ----
struct PackFidelityRow {
  pack::PackIndex pack;  // Packing::packs[pack]
  int rank_id = 0;       // the rank number in the job (Graph::rank_id)
  std::string first_name;
  double predicted_busy_ns = 0;  // the models predict a real number
  int64_t true_busy_ns = 0;
  double predicted_energy_j = 0, true_energy_j = 0;  // the pack's window: busy and the idle inside
};
struct PackFidelity {
  int clock_mhz = 0;
  std::vector<PackFidelityRow> packs;  // packs with GPU work
  int64_t predicted_step_ns = 0;
  double true_step_ns = 0;  // mean over the run's steps
  double predicted_step_j = 0, true_step_j = 0;  // all GPUs
};
// Runs the step locked at `clock_mhz` on the emulated GPU and compares per pack and for the whole step.
// The truth per pack is the exact energy over the pack's window (an ideal counter only an emulator has).
Result<PackFidelity> pack_fidelity(const Target& on, const analysis::Workload& w, const pack::Packing& packing,
                                   const pack::PackModels& models, int clock_mhz);

}  // namespace emo::backends
