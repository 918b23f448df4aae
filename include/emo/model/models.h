// Latency and energy of one unit of GPU work (a pack, a pipeline stage, a kernel) versus the SM clock,
// fitted from a few profiled clocks with the device profile's priors filling in what 3 points cannot
// pin down. Time is a roofline in frequency with a below-knee memory penalty, power is static plus
// V(f)²·f-scaled dynamic power, energy = power × time, and a power cap lowers the clock that is
// actually in effect. The forms and the fitting are described in docs/models.md.
#pragma once

#include <span>
#include <vector>

#include "emo/base/result.h"
#include "emo/device/profile.h"

namespace emo::model {

// One profiled clock of a unit: its time and energy there.
struct Point {
  double clock_mhz = 0;
  double time_s = 0;
  double energy_j = 0;
};

// T(f) = max(T_c·f_ref/f, T_m·g(f)) + T_o, g(f) = (f_knee/f)^gamma below the memory knee, else 1.
// Example (f_ref 1410, T_c 1.0 s, T_m 0.9 s, T_o 0.05 s, knee 1011, gamma 1.81): T(1410) = max(1.0,
// 0.9) + 0.05 = 1.05 s; T(705) = max(2.0, 0.9·(1011/705)^1.81 = 1.73) + 0.05 = 2.05 s.
struct TimeModel {
  double compute_s = 0;   // T_c: SM-bound time at f_ref (scales as 1/f)
  double memory_s = 0;    // T_m: memory-bound time above the memory knee (flat)
  double overhead_s = 0;  // T_o: clock-independent time (launch gaps, host work)
  double ref_mhz = 0;     // f_ref: the device's max clock
  double mem_knee_mhz = 0;
  double mem_gamma = 1;

  double compute_time_s(double clock_mhz) const;
  double memory_time_s(double clock_mhz) const;
  double time_s(double clock_mhz) const;
  // Share of the clock-dependent time each side is the bottleneck: u_c = compute / max(compute,
  // memory), u_m = memory / max(...). Both are 1 at the roofline's ridge.
  double compute_share(double clock_mhz) const;
  double memory_share(double clock_mhz) const;
};

// P(f) = P_const + mem_w·u_m(f) + V(f)²·(f/f_ref)·dynamic_w·(clock_frac + (1-clock_frac)·u_c(f)),
// V relative to V(f_ref). Example (A100 profile, P_const 70 W, dynamic 390 W, clock_frac 0.3, a
// compute-bound unit, mem_w·u_m = 0): P(855) = 70 + 0.824²·0.606·390 = 230 W; P(1410) = 70 + 390 = 460 W.
struct PowerModel {
  double const_w = 0;    // fitted per unit
  double dynamic_w = 0;  // fitted per unit
  double clock_frac = 0.3;
  double mem_w = 0;
  double ref_mhz = 0;
  double v_knee_mhz = 0;
  double v_floor_rel = 1;
  // >= 0: the unit's SM and memory activity are this fixed share instead of following its time
  // model's roofline (communication kernels: a few SMs copy and spin on flags whatever the clock, and
  // their measured time, which includes waiting for peers, says nothing of compute or memory share).
  double fixed_activity = -1;

  double voltage_rel(double clock_mhz) const;
  double power_w(double clock_mhz, const TimeModel& time) const;
  // The memory term of power_w: mem_w·u_m(f) (or mem_w·fixed_activity).
  double memory_w(double clock_mhz, const TimeModel& time) const;
};

// The SM and memory activity of a communication (collective, send/recv) kernel relative to a fully
// busy kernel, as an assumed prior: NCCL runs one CTA per channel, 8–32 channels on GPUs of 80–132 SMs
// (12–40 % of the SMs), and moves data at link speed, a fraction of HBM bandwidth. 0.25 is the middle.
inline constexpr double kCommunicationActivity = 0.25;

// Kernels that run at once (a collective on one stream beside compute on another) share one GPU: its
// static power is drawn once, and its SMs and memory are shared, so the two draw less than each alone
// added up. Assumed: the larger dynamic power in full, and this share of the smaller one.
// pack::predict_pack and the per-GPU energy fit price an overlap the same way (docs/models.md).
inline constexpr double kConcurrentShare = 0.5;

// A fitted unit. cap_w > 0: the GPU's power limit was in force; a clock whose power would exceed
// it runs at the lower clock where the power equals cap_w (the GPU throttles to stay under it).
// throttle_mhz > 0: the clock where the unit was seen to throttle (its measured times stop shortening
// there, pack::fit_pack_models); any clock above it runs at it, drawing cap_w, and `power` is scaled so
// that power_w(throttle_mhz) = cap_w. The clock in effect is then min(f, throttle_mhz), not the one
// the power curve would give.
struct UnitModel {
  TimeModel time;
  PowerModel power;
  double cap_w = 0;
  double throttle_mhz = 0;
};

struct Prediction {
  double clock_mhz = 0;            // the clock asked for
  double effective_clock_mhz = 0;  // the clock in effect (lower when power-capped)
  double time_s = 0;
  double power_w = 0;
  double energy_j = 0;
  bool capped = false;
};

// Least-squares fits (relative errors) with the profile's priors. At least 2 points with distinct
// clocks, positive times and energies; otherwise an Error.
Result<TimeModel> fit_time_model(std::span<const Point> points, const device::DeviceProfile& profile);
Result<PowerModel> fit_power_model(std::span<const Point> points, const TimeModel& time,
                                   const device::DeviceProfile& profile);
// Both, plus the power cap: points whose power sits at the profile's limit are treated as throttled
// (their time belongs to a lower effective clock). A power above the limit means the board's limit
// is higher than the profile's: no cap is then modelled.
Result<UnitModel> fit_unit_model(std::span<const Point> points, const device::DeviceProfile& profile);

Prediction predict(const UnitModel& model, double clock_mhz);

// Without profiling: the device profile's predictors for a unit that takes `time_at_max_s` at the max
// clock and whose clock-dependent part is `compute_share` SM-bound (1 = compute-bound, 0 = memory-bound).
UnitModel prior_unit_model(const device::DeviceProfile& profile, double time_at_max_s, double compute_share);

}  // namespace emo::model
