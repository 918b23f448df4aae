// Device specs as users write them: "nvml:0" (a real GPU through NVML), "emulated:h100" (the
// emulated GPU with the built-in h100 profile; any built-in name or a profile JSON file), or a bare
// profile name/file where only the profile is needed (pack, optimize).
#pragma once

#include <memory>
#include <string>

#include "emo/base/result.h"
#include "emo/device/device.h"
#include "emo/device/profile.h"

namespace emo::backends {

struct DeviceSpec {
  enum class Kind { kProfile, kEmulated, kNvml } kind = Kind::kProfile;
  std::string profile;  // built-in name or profile file (kProfile, kEmulated)
  int index = 0;        // kNvml
  uint64_t seed = 1;    // kEmulated: "emulated:h100@7" draws GPU number 7
};

// Parses "nvml:N", "emulated:NAME[@SEED]" or "NAME"; bad forms -> Error with a note listing them.
Result<DeviceSpec> parse_device_spec(const std::string& text);

// The device profile a spec stands for (NVML: opens the GPU and matches its product name).
Result<device::DeviceProfile> profile_of(const std::string& text);

// Opens a measurable device: NVML or emulated (a bare profile name is an error: nothing to measure).
Result<std::unique_ptr<device::Device>> open_device(const std::string& text);

}  // namespace emo::backends

#include "emo/optimize/optimize.h"
#include "emo/pack/fit.h"

namespace emo::backends {

// Runs the packing's profiling plan on a device: the step at each plan clock, `plan_steps` times, one
// traced step and the energy log per rank. Emulated devices only; on hardware record the traces at the
// plan's clocks (see docs/optimize.md) — NVML gives an Error saying so.
Result<std::vector<pack::ProfiledRun>> profile_plan(const std::string& device_spec, const analysis::Workload& w,
                                                    const pack::Packing& packing);

// ---- profiling runs on disk (docs/profiling.md) ----
// A folder of profiling runs, one subfolder per locked clock, named "<MHz>mhz", each holding for every
// rank R of the step "rank<R>.json" (or .json.gz; a Kineto trace with at least one complete step) and
// "rank<R>.energy.csv" (the GPU's cumulative energy counter during the run at that clock: an optional
// "# ..." comment line, the header "t_ns,energy_mj", rows of absolute trace-clock ns and counter mJ).
// Hardware captures write this layout; `emo profile` writes it from the emulated GPU.
Result<std::vector<pack::ProfiledRun>> read_profiled_dir(const std::string& dir, const analysis::Workload& w);
// Runs the profiling plan on an emulated device and writes the folder (built aside, renamed when complete).
Status write_profiled_dir(const std::string& device_spec, const analysis::Workload& w, const pack::Packing& packing,
                          const std::string& dir);
// The energy log format above, parsed; errors name the file and line.
Result<std::vector<device::EnergySample>> parse_energy_log(std::string_view text, const std::string& name);

// ---- fidelity of the pack models at a clock, against the emulated GPU's truth ----
struct PackFidelityRow {
  uint32_t pack = 0;
  int rank = 0;
  std::string first_name;
  double predicted_busy_s = 0, true_busy_s = 0;
  double predicted_energy_j = 0, true_energy_j = 0;  // the pack's window: busy and the idle inside
};
struct PackFidelity {
  int clock_mhz = 0;
  std::vector<PackFidelityRow> packs;  // packs with GPU work
  double predicted_step_s = 0, true_step_s = 0;
  double predicted_step_j = 0, true_step_j = 0;  // all GPUs
};
// Runs the step locked at `clock_mhz` on the emulated GPU and compares per pack and for the whole step.
// The truth per pack is the exact energy over the pack's window (an ideal counter only an emulator has).
Result<PackFidelity> pack_fidelity(const std::string& device_spec, const analysis::Workload& w,
                                   const pack::Packing& packing, const pack::PackModels& models, int clock_mhz);
std::string pack_fidelity_csv(const PackFidelity& f);

// True behaviour of a set of per-pack clocks on the emulated GPU (averaged over `steps` steps).
struct Measured {
  std::string name;
  double time_us = 0;    // mean step time
  double energy_j = 0;   // energy per step, all GPUs, busy and idle
  std::vector<double> step_us;  // each step's time, the first (warm-up) left out unless it is the only one
};
// `packs` from read_policy; `clocks` one per pack (the policy's or a baseline's; empty = default clock);
// `issue_at_ns` one per pack (empty = the packs' own).
// `seed` draws the run's jitter and switching latencies (the GPU itself is the spec's).
Result<Measured> run_on_emulator(const std::string& device_spec, const analysis::Workload& w,
                                 const std::vector<optimize::AppliedPack>& packs, const std::vector<int>& clocks,
                                 const std::vector<int64_t>& issue_at_ns, int default_clock_mhz, int steps,
                                 const std::string& name, uint64_t seed = 424242);

// ---- the policy checked on the device before it is handed out ----
// The models err per pack; a plan that slows exactly the packs whose slowdown they under-predict can
// run over the target although each pack is predicted well on average. So the policy is run on the
// profiling device for a few steps, beside the default clocks. If its measured slowdown eats more than
// half of the reserve (over max_slowdown·(1 − reserve/2)), the plan target is lowered by the measured
// excess and the optimizer runs again, at most `rounds` times; if no round passes, the default clocks
// are the policy. Then each baseline of the first solve that the models price below the kept plan is
// checked the same way, cheapest first, and the first that passes becomes the policy (the baselines
// themselves stay as solved at the user's reserve). Only step times measured on the device are read,
// as on hardware.
// A plan passes when its mean slowdown over the measured steps keeps half of the reserve (within
// max_slowdown·(1 − reserve/2)) and the mean + 2 standard errors is within max_slowdown. Where the
// steps vary (many clock changes whose latencies land differently from step to step) and the mean
// passes but the bound does not, the plan is run again for `max_steps`.
struct CheckOptions {
  int steps = 3;        // steps per check run (the first is a warm-up)
  int max_steps = 9;    // ... and per run again when the steps vary too much to decide
  int rounds = 3;       // re-solves at most
  uint64_t seed = 1717; // not the evaluation's seed
};
struct CheckRound {
  std::string plan;           // where the plan checked came from: "dp", a baseline's name, "default"
  double reserve = 0;         // the reserve this round's plan was made with
  double predicted_pct = 0;   // the plan's slowdown in the models' replay
  double measured_pct = 0;    // ... and on the device: the mean over the measured steps
  double bound_pct = 0;       // measured_pct + 2 standard errors of it (steps vary)
  int steps = 0;              // steps measured (warm-up left out)
  bool accepted = false;      // measured_pct within max_slowdown·(1 − reserve/2), bound_pct within max_slowdown
  double predicted_energy_j = 0;  // the plan's step energy in the models' replay
  double measured_energy_j = 0;   // ... and on the device (mean over the measured steps)
};
// One check run's steps against the default clocks' mean step time: the mean slowdown (%), and the
// mean + 2 standard errors of it (the sample standard deviation over √steps; the mean alone for one step).
struct StepSlowdown {
  double mean_pct = 0;
  double bound_pct = 0;
  int steps = 0;
};
StepSlowdown step_slowdown(const std::vector<double>& step_us, double default_us);
struct Checked {
  optimize::Solution solution;
  std::vector<CheckRound> rounds;
  bool fell_back = false;  // nothing passed: the default clocks are the policy
  // The default clocks' step energy, predicted and as the check measured it.
  double default_predicted_j = 0, default_measured_j = 0;
};
// Past this gap between the predicted and the measured step energy (%, at the default clocks or at the
// clocks of the plan handed out) the predicted saving does not hold: the run says so (a warning).
inline constexpr double kEnergyDoubtPct = 3.0;
// |predicted / measured − 1| in %, 0 where nothing was measured.
double energy_gap_pct(double predicted_j, double measured_j);
// The largest of those over the default clocks and the plan handed out (the accepted round's).
double energy_gap_pct(const Checked& c);
// The doubt the check leaves, as `warning:` texts (without the prefix): empty when the gap is within
// kEnergyDoubtPct.
std::vector<std::string> check_warnings(const Checked& c);
// {"rounds": [{"plan", "reserve", "predicted_pct", "measured_pct", "bound_pct", "steps", "accepted",
//  "predicted_energy_j", "measured_energy_j"}...], "fell_back": bool,
//  "default": {"predicted_energy_j", "measured_energy_j"}, "energy_gap_pct"}
nlohmann::json check_json(const Checked& c);
Result<Checked> optimize_checked(const optimize::Problem& problem, const optimize::OptimizeOptions& options,
                                 const std::string& device_spec, const CheckOptions& check = {});

}  // namespace emo::backends
