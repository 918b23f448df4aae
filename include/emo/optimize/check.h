// Plans measured on a device, and the policy checked there before it is handed out. The optimizer
// sees a device only through `PlanMeter` ("run this plan for a few steps, tell me the step times and
// the energy"): the emulated GPU (backends::EmulatedMeter) and, on hardware, a runtime that applies the
// clocks implement it, so the check never sees the emulator's truth, only what hardware gives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/base/result.h"
#include "emo/optimize/optimize.h"

namespace emo::optimize {

// What a device measured of a plan run for some steps.
struct Measured {
  std::string name;
  std::vector<int64_t> step_ns;  // each step's time, the first (warm-up) left out unless it is the only one
  double energy_j = 0;           // energy per step over the same steps, all GPUs, busy and idle
  double mean_step_ns() const;
};

// Runs per-pack clocks on a device. `packs` are the policy's (read_policy / applied_policy);
// `clocks` one per pack (empty = the default clock everywhere); `issue_at_ns` one per pack (empty = the
// packs' own); `seed` draws the run's jitter and switching latencies where the device has such a thing.
class PlanMeter {
 public:
  virtual ~PlanMeter() = default;
  virtual const std::string& device_name() const = 0;  // as the user named the device
  virtual Result<Measured> measure(const std::vector<AppliedPack>& packs, const std::vector<int>& clocks,
                                   const std::vector<int64_t>& issue_at_ns, int steps, const std::string& name,
                                   uint64_t seed) const = 0;
};

// ---- the policy checked on the device before it is handed out ----
// The models err per pack; a plan that slows exactly the packs whose slowdown they under-predict can
// run over the target although each pack is predicted well on average. So the policy is run on the
// profiling device for a few steps, beside the default clocks. If its measured slowdown eats more than
// half of the reserve (over max_slowdown·(1 − reserve/2)), the plan target is lowered by the measured
// excess and the optimizer runs again, at most `rounds` times; if no round passes, the default clocks
// are the policy. Then every baseline of the first solve is checked the same way (cheapest in the
// models first; one with the kept plan's or the default's clocks is not run again), and the policy is
// the plan of least measured energy among those that pass — so no baseline that passes the same check
// measures below the policy (the baselines themselves stay as solved at the user's reserve); a kept plan
// that measures no less energy than the default clocks gives way to them. Only step
// times and energies measured on the device are read, as on hardware.
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
StepSlowdown step_slowdown(const std::vector<int64_t>& step_ns, double default_mean_ns);
struct Checked {
  Solution solution;
  std::vector<CheckRound> rounds;  // empty when nothing was checked
  bool fell_back = false;          // nothing passed: the default clocks are the policy
  // The kept plan passed on time but measured no less energy than the default clocks, and no baseline
  // that passed measured less: the default clocks are the policy.
  bool energy_fell_back = false;
  // The default clocks' step energy, predicted and as the check measured it.
  double default_predicted_j = 0, default_measured_j = 0;
};
// Past this gap between the predicted and the measured step energy (%, at the default clocks or at the
// clocks of the plan handed out) the predicted saving does not hold: the run says so (a warning).
inline constexpr double kEnergyDoubtPct = 3.0;
// The mean slowdown (%) the check lets a plan have: max_slowdown less half the reserve. Every plan the
// check measures — the optimizer's and each baseline's — is held to it, and the measured margin over
// the best baseline compares at it (report::measured_margin).
inline double check_accept_pct(double max_slowdown, double reserve) { return 100 * max_slowdown * (1 - reserve / 2); }
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
// Optimizes, then checks the policy on `meter` as above. `solved`: this problem's solution under these
// options already found (the session's first solve where it profiled nothing more), checked instead of
// solving again.
Result<Checked> optimize_checked(const Problem& problem, const OptimizeOptions& options, const PlanMeter& meter,
                                 const CheckOptions& check = {}, const Solution* solved = nullptr);

}  // namespace emo::optimize
