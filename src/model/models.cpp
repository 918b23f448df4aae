// Time, power and energy models of a unit vs SM clock, and their fits from a few profiled clocks.
// Three points cannot pin down every parameter of every unit, so the device profile supplies what
// they cannot: the V(f) shape, the memory knee and its exponent, the stalled-SM power share. The
// time fit prefers the simplest explanation (a tiny pull of every time term toward 0), so a unit
// that looks compute-bound at all its points gets no invented memory plateau.
#include "emo/model/models.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "optim.h"

namespace emo::model {

namespace {

// Weight of the "simplest explanation" pull, relative to a squared relative error: 1e-6 decides
// between fits that are equally exact and never outweighs a real misfit (0.1 % error = 1e-6).
constexpr double kPrior = 1e-6;

// Power at or above this share of the limit means the GPU is throttling to it; its average then sits
// just under the limit (Perseus A40 profile: 290..298 W under a 300 W limit).
constexpr double kCappedShare = 0.95;
constexpr double kCapLevel = 0.98;
// A measured power this far above the profile's limit shows the board's limit is higher.
constexpr double kAboveLimit = 1.02;

Status check_points(std::span<const Point> points, bool need_energy) {
  if (points.size() < 2)
    return make_error("", "a fit needs at least 2 profiled clocks, got " + std::to_string(points.size()));
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    std::string at = "point " + std::to_string(i) + " (" + std::to_string(static_cast<int>(std::lround(p.clock_mhz))) + " MHz)";
    if (!(p.clock_mhz > 0) || !std::isfinite(p.clock_mhz)) return make_error(at, "clock must be > 0");
    if (!(p.time_s > 0) || !std::isfinite(p.time_s)) return make_error(at, "time must be > 0");
    if (need_energy && (!(p.energy_j > 0) || !std::isfinite(p.energy_j))) return make_error(at, "energy must be > 0");
    for (size_t j = 0; j < i; ++j) {
      if (std::abs(points[j].clock_mhz - p.clock_mhz) < 0.5) return make_error(at, "clock profiled twice");
    }
  }
  return {};
}

TimeModel time_base(const device::DeviceProfile& profile) {
  TimeModel t;
  t.ref_mhz = profile.max_clock_mhz();
  t.mem_knee_mhz = profile.time.mem_knee_frac.value * t.ref_mhz;
  t.mem_gamma = profile.time.mem_gamma.value;
  return t;
}

// Relative least squares over log-parameters (keeps T_c, T_m, T_o >= 0), from several starts: a
// compute-bound, a memory-bound and mixed guesses, so the max() kink cannot trap the search.
TimeModel fit_time_impl(std::span<const Point> points, const TimeModel& base) {
  double t_top = 0, f_top = 0, t_max = 0;
  for (const Point& p : points) {
    if (p.clock_mhz > f_top) f_top = p.clock_mhz, t_top = p.time_s;
    t_max = std::max(t_max, p.time_s);
  }
  const double lo = std::log(t_top * 1e-9), hi = std::log(t_max * 100.0);
  auto unpack = [&](const std::vector<double>& x) {
    TimeModel m = base;
    m.compute_s = std::exp(std::clamp(x[0], lo, hi));
    m.memory_s = std::exp(std::clamp(x[1], lo, hi));
    m.overhead_s = std::exp(std::clamp(x[2], lo, hi));
    return m;
  };
  auto objective = [&](const std::vector<double>& x) {
    TimeModel m = unpack(x);
    double e = 0;
    for (const Point& p : points) {
      double r = (m.time_s(p.clock_mhz) - p.time_s) / p.time_s;
      e += r * r;
    }
    double out = 0;  // keep the search inside the bounds it is clamped to
    for (double v : x) out += v < lo ? lo - v : (v > hi ? v - hi : 0.0);
    return e + kPrior * (m.compute_s + m.memory_s + m.overhead_s) / t_top + out;
  };
  const double starts[][3] = {{0.95, 0.01, 0.03}, {0.5, 0.9, 0.05}, {0.01, 0.95, 0.03}, {0.8, 0.8, 0.1}, {0.7, 0.3, 0.2}};
  detail::Minimum best;
  best.value = INFINITY;
  for (const auto& s : starts) {
    std::vector<double> x0 = {std::log(s[0] * t_top), std::log(s[1] * t_top), std::log(s[2] * t_top)};
    auto m = detail::nelder_mead(objective, x0, {0.5, 0.5, 0.5});
    m = detail::nelder_mead(objective, m.x, {0.1, 0.1, 0.1});
    if (m.value < best.value) best = m;
  }
  TimeModel m = unpack(best.x);
  // Terms the data did not need are noise-level: make them exactly 0 so reports read cleanly.
  for (double* v : {&m.compute_s, &m.memory_s, &m.overhead_s}) {
    if (*v < 1e-6 * t_top) *v = 0;
  }
  return m;
}

PowerModel power_base(const device::DeviceProfile& profile) {
  PowerModel p;
  p.ref_mhz = profile.max_clock_mhz();
  p.clock_frac = profile.power.clock_frac.value;
  p.mem_w = profile.power.mem_w.value;
  p.v_knee_mhz = profile.voltage.knee_mhz.value;
  p.v_floor_rel = profile.voltage.floor_rel.value;
  p.const_w = profile.power.const_w.value;
  p.dynamic_w = profile.power.dynamic_w.value;
  return p;
}

// P = const_w + dynamic_w·b(f) + m(f), linear in (const_w, dynamic_w): weighted least squares on
// relative errors, both kept >= 0. Example: two points (b, P - m) = (0.4, 224), (1.0, 460) give
// dynamic_w = (460-224)/0.6 = 393 W, const_w = 460 - 393 = 67 W.
PowerModel fit_power_impl(std::span<const Point> points, const TimeModel& time, const PowerModel& base) {
  PowerModel pm = base;
  PowerModel unit = base;
  unit.const_w = 0;
  unit.dynamic_w = 1;
  unit.mem_w = 0;
  double s00 = 0, s01 = 0, s11 = 0, b0 = 0, b1 = 0;
  for (const Point& p : points) {
    double watts = p.energy_j / p.time_s;
    double b = unit.power_w(p.clock_mhz, time);
    double m = base.mem_w * time.memory_share(p.clock_mhz);
    double r0 = 1.0 / watts, r1 = b / watts, y = 1.0 - m / watts;
    s00 += r0 * r0, s01 += r0 * r1, s11 += r1 * r1, b0 += r0 * y, b1 += r1 * y;
  }
  double det = s00 * s11 - s01 * s01;
  if (points.size() >= 2 && std::abs(det) > 1e-12 * s00 * s11) {
    pm.const_w = (b0 * s11 - b1 * s01) / det;
    pm.dynamic_w = (s00 * b1 - s01 * b0) / det;
  } else {  // one point (or all at one voltage and share): keep the profile's P_const
    pm.const_w = base.const_w;
    pm.dynamic_w = (b1 - s01 * pm.const_w) / s11;
  }
  if (pm.const_w < 0) {
    pm.const_w = 0;
    pm.dynamic_w = b1 / s11;
  }
  if (pm.dynamic_w < 0) {
    pm.dynamic_w = 0;
    pm.const_w = b0 / s00;
  }
  return pm;
}

// The clock at which the unit's power equals cap_w (power rises with the clock), by bisection.
double capped_clock(const UnitModel& u, double clock_mhz) {
  if (u.cap_w <= 0 || u.power.power_w(clock_mhz, u.time) <= u.cap_w) return clock_mhz;
  double lo = 0.1 * u.time.ref_mhz, hi = clock_mhz;
  if (u.power.power_w(lo, u.time) > u.cap_w) return lo;
  for (int i = 0; i < 60; ++i) {
    double mid = 0.5 * (lo + hi);
    (u.power.power_w(mid, u.time) > u.cap_w ? hi : lo) = mid;
  }
  return lo;
}

}  // namespace

double TimeModel::compute_time_s(double f) const { return compute_s * ref_mhz / f; }

double TimeModel::memory_time_s(double f) const {
  if (f >= mem_knee_mhz || memory_s == 0) return memory_s;
  return memory_s * std::pow(mem_knee_mhz / f, mem_gamma);
}

double TimeModel::time_s(double f) const { return std::max(compute_time_s(f), memory_time_s(f)) + overhead_s; }

double TimeModel::compute_share(double f) const {
  double c = compute_time_s(f), m = memory_time_s(f);
  double top = std::max(c, m);
  return top > 0 ? c / top : 1.0;
}

double TimeModel::memory_share(double f) const {
  double c = compute_time_s(f), m = memory_time_s(f);
  double top = std::max(c, m);
  return top > 0 ? m / top : 0.0;
}

double PowerModel::voltage_rel(double f) const {
  if (f <= v_knee_mhz || ref_mhz <= v_knee_mhz) return v_floor_rel;
  return v_floor_rel + (1.0 - v_floor_rel) * (f - v_knee_mhz) / (ref_mhz - v_knee_mhz);
}

double PowerModel::power_w(double f, const TimeModel& time) const {
  double v = voltage_rel(f);
  const double activity =
      fixed_activity >= 0 ? fixed_activity : clock_frac + (1.0 - clock_frac) * time.compute_share(f);
  return const_w + memory_w(f, time) + v * v * (f / ref_mhz) * dynamic_w * activity;
}

double PowerModel::memory_w(double f, const TimeModel& time) const {
  return mem_w * (fixed_activity >= 0 ? fixed_activity : time.memory_share(f));
}

Result<TimeModel> fit_time_model(std::span<const Point> points, const device::DeviceProfile& profile) {
  EMO_RETURN_IF_ERROR(check_points(points, false));
  return fit_time_impl(points, time_base(profile));
}

Result<PowerModel> fit_power_model(std::span<const Point> points, const TimeModel& time,
                                   const device::DeviceProfile& profile) {
  EMO_RETURN_IF_ERROR(check_points(points, true));
  return fit_power_impl(points, time, power_base(profile));
}

Result<UnitModel> fit_unit_model(std::span<const Point> points, const device::DeviceProfile& profile) {
  EMO_RETURN_IF_ERROR(check_points(points, true));
  const double limit = profile.tdp_w.value;
  bool in_force = limit > 0;
  for (const Point& p : points) {
    if (p.energy_j / p.time_s > kAboveLimit * limit) in_force = false;
  }
  std::vector<Point> free, capped;
  for (const Point& p : points) {
    bool at_cap = in_force && p.energy_j / p.time_s >= kCappedShare * limit;
    (at_cap ? capped : free).push_back(p);
  }
  if (free.size() < 2) {  // too few unthrottled points to separate the cap from the curve
    free.assign(points.begin(), points.end());
    capped.clear();
  }
  UnitModel u;
  u.cap_w = in_force ? kCapLevel * limit : 0.0;
  if (!capped.empty()) {
    double sum = 0;
    for (const Point& p : capped) sum += p.energy_j / p.time_s;
    u.cap_w = sum / static_cast<double>(capped.size());
  }
  const TimeModel tbase = time_base(profile);
  const PowerModel pbase = power_base(profile);
  u.time = fit_time_impl(free, tbase);
  u.power = fit_power_impl(free, u.time, pbase);
  // A throttled point's time belongs to the clock where the fitted power meets the cap; refit the
  // time with it there, then the power with the new shares, a few rounds (converges in 2-3).
  for (int round = 0; round < 4 && !capped.empty(); ++round) {
    std::vector<Point> tpts = free;
    for (const Point& c : capped) {
      Point q = c;
      q.clock_mhz = capped_clock(u, c.clock_mhz);
      bool clash = false;
      for (const Point& p : tpts) clash = clash || std::abs(p.clock_mhz - q.clock_mhz) < 1.0;
      if (!clash) tpts.push_back(q);
    }
    u.time = fit_time_impl(tpts, tbase);
    u.power = fit_power_impl(free, u.time, pbase);
  }
  return u;
}

Prediction predict(const UnitModel& u, double clock_mhz) {
  Prediction p;
  p.clock_mhz = clock_mhz;
  p.effective_clock_mhz = u.throttle_mhz > 0 ? std::min(clock_mhz, u.throttle_mhz) : capped_clock(u, clock_mhz);
  p.capped = p.effective_clock_mhz < clock_mhz;
  p.time_s = u.time.time_s(p.effective_clock_mhz);
  p.power_w = u.power.power_w(p.effective_clock_mhz, u.time);
  if (u.cap_w > 0) p.power_w = std::min(p.power_w, u.cap_w);
  p.energy_j = p.power_w * p.time_s;
  return p;
}

UnitModel prior_unit_model(const device::DeviceProfile& profile, double time_at_max_s, double compute_share) {
  UnitModel u;
  u.time = time_base(profile);
  u.power = power_base(profile);
  double s = std::clamp(compute_share, 0.0, 1.0);
  // 3 % of a unit's time does not scale with the clock (assumed; the Perseus units fit 1..13 %).
  u.time.overhead_s = 0.03 * time_at_max_s;
  double clocked = time_at_max_s - u.time.overhead_s;
  // The bottleneck side takes the clocked time; the other is in proportion s : (1 - s).
  if (s >= 0.5) {
    u.time.compute_s = clocked;
    u.time.memory_s = clocked * (1.0 - s) / s;
  } else {
    u.time.memory_s = clocked;
    u.time.compute_s = clocked * s / (1.0 - s);
  }
  u.cap_w = profile.tdp_w.value * kCapLevel;
  return u;
}

}  // namespace emo::model
