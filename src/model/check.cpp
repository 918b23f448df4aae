// Model fidelity on measured data (DESIGN.md §5.2): fit each unit from a few clocks, predict the
// rest, and average the absolute percentage errors per unit, per clock and overall. Also the pooled
// calibration that produced the fitted numbers of the built-in profiles (see docs/models.md).
#include <algorithm>
#include <cmath>
#include <map>

#include "emo/base/stats.h"
#include "emo/model/datasets.h"
#include "optim.h"

namespace emo::model {

namespace {

struct Acc {
  double t = 0, e = 0;
  size_t n = 0;
  void add(double te, double ee) { t += te, e += ee, ++n; }
  Mape mape() const {
    Mape m;
    m.n = n;
    if (n) m.time_pct = 100.0 * t / double(n), m.energy_pct = 100.0 * e / double(n);
    return m;
  }
};

std::string list_clocks(const std::vector<int>& c) {
  std::string s;
  for (size_t i = 0; i < c.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(c[i]);
  }
  return s;
}

}  // namespace

Result<CheckReport> model_check(const Dataset& d, const device::DeviceProfile& profile, std::vector<int> fit_clocks) {
  CheckReport rep;
  rep.dataset = d.path;
  rep.format = d.format;
  rep.device = profile.name;
  if (fit_clocks.empty()) {
    auto a = auto_fit_clocks(d);
    if (!a) return a.error();
    fit_clocks = *a;
    rep.fit_clocks_auto = true;
  }
  std::sort(fit_clocks.begin(), fit_clocks.end());
  if (std::adjacent_find(fit_clocks.begin(), fit_clocks.end()) != fit_clocks.end())
    return make_error("--fit-clocks", "a clock is listed twice");
  if (fit_clocks.size() < 2) return make_error("--fit-clocks", "give at least 2 clocks (3 is the default)");
  // Every fit clock must occur somewhere; a unit without one of them is skipped.
  std::map<int, size_t> seen;
  for (const Unit& u : d.units) {
    for (const Point& p : u.samples) ++seen[static_cast<int>(std::lround(p.clock_mhz))];
  }
  for (int f : fit_clocks) {
    if (!seen.count(f)) {
      std::vector<int> all;
      for (auto [c, n] : seen) all.push_back(c);
      return make_error(d.path, "fit clock " + std::to_string(f) + " MHz is not in the data",
                        "clocks in the data (MHz): " + list_clocks(all));
    }
  }
  rep.fit_clocks = fit_clocks;
  const double lo = fit_clocks.front(), hi = fit_clocks.back();
  Acc all, inside, outside;
  std::map<int, Acc> per_clock;
  for (const Unit& u : d.units) {
    UnitCheck uc;
    uc.name = u.name;
    std::vector<Point> fit;
    for (int f : fit_clocks) {
      auto it = std::find_if(u.samples.begin(), u.samples.end(),
                             [&](const Point& p) { return std::lround(p.clock_mhz) == f; });
      if (it == u.samples.end()) {
        uc.skipped = "no sample at fit clock " + std::to_string(f) + " MHz";
        break;
      }
      fit.push_back(*it);
    }
    if (uc.skipped.empty()) {
      auto m = fit_unit_model(fit, profile);
      if (!m) {
        uc.skipped = m.error().message();
      } else {
        uc.model = *m;
        uc.fitted = true;
      }
    }
    if (!uc.fitted) {
      ++rep.units_skipped;
      rep.units.push_back(std::move(uc));
      continue;
    }
    ++rep.units_fitted;
    Acc unit_acc;
    for (const Point& p : u.samples) {
      int f = static_cast<int>(std::lround(p.clock_mhz));
      if (std::binary_search(fit_clocks.begin(), fit_clocks.end(), f)) continue;
      Prediction pr = predict(uc.model, p.clock_mhz);
      double te = std::abs(pr.time_s - p.time_s) / p.time_s;
      double ee = std::abs(pr.energy_j - p.energy_j) / p.energy_j;
      unit_acc.add(te, ee);
      all.add(te, ee);
      (f >= lo && f <= hi ? inside : outside).add(te, ee);
      per_clock[f].add(te, ee);
    }
    uc.mape = unit_acc.mape();
    rep.units.push_back(std::move(uc));
  }
  if (rep.units_fitted == 0) {
    std::string why = rep.units.empty() ? "no units" : rep.units.front().skipped;
    return make_error(d.path, "no unit could be fitted (" + why + ")", "pick --fit-clocks that every unit has");
  }
  rep.overall = all.mape();
  rep.within_fit = inside.mape();
  rep.outside_fit = outside.mape();
  for (const auto& [f, a] : per_clock) rep.clocks.push_back(ClockCheck{f, a.mape()});
  return rep;
}

// Two pooled searches, each over a grid (so the answer does not depend on a starting point) and then
// polished by Nelder–Mead. (1) The memory knee and exponent, every unit's time model refitted inside.
// (2) The V(f) knee and floor, every unit's (P_const, dynamic_w) refitted in closed form inside, with
// the time models of the profile's own memory priors: each stage is conditional on the profile's other
// values, so re-running it on a profile that already holds its result returns the same numbers.
// Power-capped points (>= 95 % of the limit) are left out.
Result<Calibration> calibrate(const Dataset& d, const device::DeviceProfile& profile, double min_clock_mhz) {
  const double limit = profile.tdp_w.value;
  std::vector<std::vector<Point>> units;
  size_t npts = 0;
  double max_watts = 0;
  for (const Unit& u : d.units) {
    for (const Point& p : u.samples) max_watts = std::max(max_watts, p.energy_j / p.time_s);
  }
  const bool cap_in_force = max_watts <= 1.02 * limit;
  for (const Unit& u : d.units) {
    std::vector<Point> pts;
    for (const Point& p : u.samples) {
      if (p.clock_mhz < min_clock_mhz) continue;
      if (cap_in_force && p.energy_j / p.time_s >= 0.95 * limit) continue;
      pts.push_back(p);
    }
    if (pts.size() >= 3) npts += pts.size(), units.push_back(std::move(pts));
  }
  if (units.empty()) return make_error(d.path, "no unit has 3 or more usable clocks to calibrate on");
  Calibration cal;
  cal.units = units.size();
  cal.points = npts;
  const double fmax = profile.max_clock_mhz();

  // (1) memory knee and exponent.
  device::DeviceProfile p = profile;
  auto time_ms = [&](double knee_frac, double gamma, std::vector<TimeModel>* out) {
    p.time.mem_knee_frac.value = knee_frac;
    p.time.mem_gamma.value = gamma;
    double s = 0;
    for (const auto& pts : units) {
      auto tm = fit_time_model(pts, p);
      if (!tm) return 1e9;
      for (const Point& q : pts) {
        double r = (tm->time_s(q.clock_mhz) - q.time_s) / q.time_s;
        s += r * r;
      }
      if (out) out->push_back(*tm);
    }
    return s / double(npts);
  };
  auto tobj = [&](const std::vector<double>& x) {
    if (x[0] < 0.4 || x[0] > 1.0 || x[1] < 0.5 || x[1] > 5.0) return 1e9;
    return time_ms(x[0], x[1], nullptr);
  };
  std::vector<double> tx = {0.7, 1.5};
  double tval = INFINITY;
  for (int i = 0; i <= 16; ++i) {
    for (int k = 0; k <= 12; ++k) {
      std::vector<double> x = {0.5 + 0.025 * i, 1.0 + 0.25 * k};
      double v = tobj(x);
      if (v < tval) tval = v, tx = x;
    }
  }
  auto tbest = detail::nelder_mead(tobj, tx, {0.0125, 0.125}, 60, 1e-8);
  cal.mem_knee_frac = tbest.x[0];
  cal.mem_gamma = tbest.x[1];
  cal.time_rms_pct = 100.0 * std::sqrt(tbest.value);

  // (2) V(f) knee and floor, on the profile's own memory priors.
  p = profile;
  std::vector<TimeModel> times;
  time_ms(profile.time.mem_knee_frac.value, profile.time.mem_gamma.value, &times);
  auto pobj = [&](const std::vector<double>& x) {
    if (x[0] < 0.2 * fmax || x[0] > fmax - 1 || x[1] < 0.3 || x[1] > 1.0) return 1e9;
    p.voltage.knee_mhz.value = x[0];
    p.voltage.floor_rel.value = x[1];
    double s = 0;
    for (size_t i = 0; i < units.size(); ++i) {
      auto pm = fit_power_model(units[i], times[i], p);
      if (!pm) return 1e9;
      for (const Point& q : units[i]) {
        double watts = q.energy_j / q.time_s;
        double r = (pm->power_w(q.clock_mhz, times[i]) - watts) / watts;
        s += r * r;
      }
    }
    return s / double(npts);
  };
  std::vector<double> px = {0.7 * fmax, 0.8};
  double pval = INFINITY;
  for (int i = 0; i <= 72; ++i) {
    for (int k = 0; k <= 30; ++k) {
      std::vector<double> x = {(0.25 + 0.01 * i) * fmax, 0.4 + 0.02 * k};
      double v = pobj(x);
      if (v < pval) pval = v, px = x;
    }
  }
  auto pbest = detail::nelder_mead(pobj, px, {0.005 * fmax, 0.01}, 400, 1e-10);
  cal.v_knee_mhz = pbest.x[0];
  cal.v_floor_rel = pbest.x[1];
  cal.power_rms_pct = 100.0 * std::sqrt(pobj(pbest.x));
  std::vector<double> cw, dw;
  for (size_t i = 0; i < units.size(); ++i) {
    auto pm = fit_power_model(units[i], times[i], p);
    if (pm) cw.push_back(pm->const_w), dw.push_back(pm->dynamic_w);
  }
  cal.const_w_median = median(cw);
  cal.dynamic_w_median = median(dw);
  return cal;
}

}  // namespace emo::model
