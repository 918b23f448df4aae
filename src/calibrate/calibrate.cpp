// Device calibration: microbenchmarks at several locked clocks, then a fit of the device profile.
//
// What each benchmark pins down (P = power, t = time per iteration, f = SM clock, φ = f/f_max):
//   FMA loop      compute-bound, t ∝ 1/f:     P = C + V(f)²·φ·(A + B)
//   stream copy   memory-bound, u_m = 1:      P = C + M + V(f)²·φ·A,  its time gives the memory knee
//   intensity X   in between: P = C + M·u_m + V(f)²·φ·(A + B·u_c), shares from a roofline fit of its time
//   GEMM          tensor cores, own activity: P = C + M·u_m + V(f)²·φ·(A + G·u_c)
//   idle          nothing launched: the idle power at the locked clock
// with C = const_w, M = mem_w, A + B = dynamic_w, A/(A+B) = clock_frac (the model of
// emo/model/models.h). For a fixed V(f) — knee and floor — the power is linear in (C, M, A, B, G),
// so the fit searches a grid of knees and floors and solves a small non-negative least squares at
// each; the voltage curve is the one whose best linear fit leaves the smallest relative error.
#include "emo/calibrate/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "emo/base/stats.h"

namespace emo::calibrate {

using device::BenchKind;
using device::BenchRun;
using device::BenchSpec;
using device::DeviceProfile;
using device::Sourced;

namespace {

// An FMA or GEMM run whose time·clock exceeds the median by this much ran below the locked clock.
constexpr double kThrottledShare = 1.03;
// A run drawing this share of the power limit is throttling to it, or about to.
constexpr double kCappedShare = 0.97;
// A memory knee is "seen" when the copy at the lowest calibrated clock is this much slower.
constexpr double kKneeVisible = 0.02;

double per_iteration_s(const Measurement& m) { return m.run.seconds_per_iteration(); }
double power_w(const Measurement& m) { return m.run.power_w(); }
bool busy(BenchKind k) { return k != BenchKind::kIdle; }

std::string fmt_pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %%", v);
  return buf;
}

std::string today_utc() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string series_name(const Measurement& m) {
  std::string s = device::to_string(m.kind);
  if (m.kind == BenchKind::kIntensity) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %g flop/B", m.flops_per_byte);
    s += buf;
  }
  return s;
}

// The runs of one benchmark (one intensity), by index into the measurements.
struct Series {
  BenchKind kind;
  double flops_per_byte;
  std::vector<size_t> idx;
};

std::vector<Series> group(const std::vector<Measurement>& ms) {
  std::vector<Series> out;
  for (size_t i = 0; i < ms.size(); ++i) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Series& s) {
      return s.kind == ms[i].kind && s.flops_per_byte == ms[i].flops_per_byte;
    });
    if (it == out.end()) {
      out.push_back(Series{ms[i].kind, ms[i].flops_per_byte, {}});
      it = out.end() - 1;
    }
    it->idx.push_back(i);
  }
  return out;
}

// ---- small least squares ------------------------------------------------------------------------

constexpr int kMaxCols = 5;
using Row = std::array<double, kMaxCols>;

// Solves the normal equations of the columns in `mask` (others fixed at 0) by Gaussian elimination
// with partial pivoting; false when they are singular.
bool solve_subset(const std::vector<Row>& rows, const std::vector<double>& y, int ncols, unsigned mask,
                  Row& x) {
  int idx[kMaxCols], n = 0;
  for (int c = 0; c < ncols; ++c) {
    if (mask & (1u << c)) idx[n++] = c;
  }
  double a[kMaxCols][kMaxCols + 1] = {};
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) a[i][j] += rows[r][idx[i]] * rows[r][idx[j]];
      a[i][n] += rows[r][idx[i]] * y[r];
    }
  }
  double scale = 0;
  for (int i = 0; i < n; ++i) scale = std::max(scale, std::abs(a[i][i]));
  for (int col = 0; col < n; ++col) {
    int piv = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[piv][col])) piv = r;
    }
    if (!(std::abs(a[piv][col]) > 1e-12 * scale)) return false;
    if (piv != col) {
      for (int j = 0; j <= n; ++j) std::swap(a[piv][j], a[col][j]);
    }
    for (int r = 0; r < n; ++r) {
      if (r == col) continue;
      double f = a[r][col] / a[col][col];
      for (int j = col; j <= n; ++j) a[r][j] -= f * a[col][j];
    }
  }
  x.fill(0);
  for (int i = 0; i < n; ++i) x[idx[i]] = a[i][n] / a[i][i];
  return true;
}

double sse(const std::vector<Row>& rows, const std::vector<double>& y, int ncols, const Row& x) {
  double e = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    double v = 0;
    for (int c = 0; c < ncols; ++c) v += rows[r][c] * x[c];
    e += (v - y[r]) * (v - y[r]);
  }
  return e;
}

// Least squares with every coefficient >= 0: the unconstrained solution when it is feasible, else
// the best feasible solution over all subsets of free columns (at most 2^5 = 32 small solves).
double nnls(const std::vector<Row>& rows, const std::vector<double>& y, int ncols, Row& best) {
  unsigned all = (1u << ncols) - 1;
  Row x;
  if (solve_subset(rows, y, ncols, all, x) &&
      std::all_of(x.begin(), x.begin() + ncols, [](double v) { return v >= 0; })) {
    best = x;
    return sse(rows, y, ncols, x);
  }
  double best_e = INFINITY;
  best.fill(0);
  for (unsigned mask = 1; mask < all; ++mask) {
    if (!solve_subset(rows, y, ncols, mask, x)) continue;
    if (!std::all_of(x.begin(), x.begin() + ncols, [](double v) { return v >= 0; })) continue;
    double e = sse(rows, y, ncols, x);
    if (e < best_e) best_e = e, best = x;
  }
  return best_e;
}

// ---- the memory knee from the stream copy ------------------------------------------------------

struct KneeFit {
  double knee_mhz = 0, gamma = 0, rms_pct = 0;
};

// ln t = a + γ·max(0, ln(knee/f)): linear in (a, γ) for a fixed knee; the knee by a 1 MHz search.
// Example: t = 1.0 s at 1980 and 1600 MHz, 1.2 s at 1200 MHz, knee 1300: γ = ln 1.2 / ln(1300/1200) = 2.28.
KneeFit fit_mem_knee(const std::vector<std::pair<double, double>>& pts, double lo_mhz, double hi_mhz) {
  KneeFit best;
  double best_e = INFINITY;
  for (double k = lo_mhz; k <= hi_mhz + 1e-9; k += 1.0) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0;
    for (auto [f, t] : pts) {
      double x = std::max(0.0, std::log(k / f)), yv = std::log(t);
      sx += x, sy += yv, sxx += x * x, sxy += x * yv, n += 1;
    }
    double det = n * sxx - sx * sx, g = 0, a = sy / n;
    if (det > 1e-18) {
      g = (n * sxy - sx * sy) / det;
      a = (sy - g * sx) / n;
      if (g < 0) g = 0, a = sy / n;
    }
    double e = 0;
    for (auto [f, t] : pts) {
      double r = std::exp(a + g * std::max(0.0, std::log(k / f))) / t - 1;
      e += r * r;
    }
    if (e < best_e - 1e-15) {
      best_e = e;
      best = KneeFit{k, g, 100 * std::sqrt(e / double(pts.size()))};
    }
  }
  return best;
}

// ---- the roofline of an intensity series ------------------------------------------------------

// t(x) = max(T_c/x, T_m·r(x)): x = f/f_max, r = the copy's time relative to its time at the top
// calibrated clock (the memory side's clock response, knee included), fitted on log times over a grid
// of T_c and T_m. A side counts as measured when leaving it out makes the fit worse by more than
// kSideVisible (rms of log time): noise alone lets a side graze one run and "fit" it. An unmeasured
// side is only bounded by the runs; the caller fills it in.
constexpr double kSideVisible = 0.01;

struct RooflinePoint {
  double x, r, t;
};
struct Roofline {
  double compute_s = 0, memory_s = 0;
  bool compute_seen = false, memory_seen = false;
  double compute_bound_s = 0, memory_bound_s = 0;  // the largest values the runs allow when not seen
};

Roofline fit_roofline(const std::vector<RooflinePoint>& pts) {
  const double n_pts = double(pts.size());
  double c_lo = INFINITY, c_hi = 0, m_lo = INFINITY, m_hi = 0, mean_lc = 0, mean_lm = 0;
  for (const auto& p : pts) {
    c_lo = std::min(c_lo, p.t * p.x), c_hi = std::max(c_hi, p.t * p.x);
    m_lo = std::min(m_lo, p.t / p.r), m_hi = std::max(m_hi, p.t / p.r);
    mean_lc += std::log(p.t * p.x) / n_pts, mean_lm += std::log(p.t / p.r) / n_pts;
  }
  auto rms = [&](double c, double m) {
    double e = 0;
    for (const auto& p : pts) {
      double d = std::log(std::max(c / p.x, m * p.r) / p.t);
      e += d * d;
    }
    return std::sqrt(e / n_pts);
  };
  double lc0 = std::log(c_lo) - 3, lc1 = std::log(c_hi) + 0.05, lm0 = std::log(m_lo) - 3,
         lm1 = std::log(m_hi) + 0.05;
  const int n = 240;
  double best = INFINITY, bc = 0, bm = 0;
  auto scan = [&](double c0, double c1, double m0, double m1) {
    for (int i = 0; i <= n; ++i) {
      double c = std::exp(c0 + (c1 - c0) * i / n);
      for (int j = 0; j <= n; ++j) {
        double m = std::exp(m0 + (m1 - m0) * j / n);
        double e = rms(c, m);
        if (e < best) best = e, bc = c, bm = m;
      }
    }
  };
  scan(lc0, lc1, lm0, lm1);
  double dc = 2 * (lc1 - lc0) / n, dm = 2 * (lm1 - lm0) / n;
  scan(std::log(bc) - dc, std::log(bc) + dc, std::log(bm) - dm, std::log(bm) + dm);

  // One side alone: the best T_m with no compute side, the best T_c with no memory side.
  const double m_only = std::exp(mean_lm), c_only = std::exp(mean_lc);
  const double rms_m_only = rms(0, m_only), rms_c_only = rms(c_only, 0);
  Roofline r;
  r.compute_seen = rms_m_only - best > kSideVisible;
  r.memory_seen = rms_c_only - best > kSideVisible;
  if (!r.compute_seen && !r.memory_seen) (rms_m_only <= rms_c_only ? r.memory_seen : r.compute_seen) = true;
  r.compute_s = r.memory_seen ? bc : c_only;
  r.memory_s = r.compute_seen ? bm : m_only;
  r.compute_bound_s = r.memory_bound_s = INFINITY;
  for (const auto& p : pts) {
    r.compute_bound_s = std::min(r.compute_bound_s, r.memory_s * p.r * p.x);
    r.memory_bound_s = std::min(r.memory_bound_s, r.compute_s / (p.x * p.r));
  }
  return r;
}

// ---- the power model -----------------------------------------------------------------------------

struct PowerPoint {
  size_t m;  // measurement index
  double f, u_c, u_m, watts;
  bool gemm;
};

struct PowerFit {
  double knee = 0, floor = 1, e = INFINITY;
  Row x{};  // C, M, A, B, G
};

void rows_for(const std::vector<PowerPoint>& pts, const device::VoltageCurve& v, double f_max, bool with_gemm,
              std::vector<Row>& rows, std::vector<double>& y) {
  rows.resize(pts.size());
  y.assign(pts.size(), 1.0);
  for (size_t i = 0; i < pts.size(); ++i) {
    const PowerPoint& p = pts[i];
    double vr = v.relative(p.f, f_max);
    double q = vr * vr * p.f / f_max;
    // Relative errors: every column divided by the measured power, the target becomes 1.
    double w = 1.0 / p.watts;
    rows[i] = Row{w, p.u_m * w, q * w, p.gemm ? 0.0 : q * p.u_c * w, p.gemm ? q * p.u_c * w : 0.0};
    if (!with_gemm) rows[i][4] = 0;
  }
}

PowerFit fit_power(const std::vector<PowerPoint>& pts, double f_min_table, double f_max) {
  bool with_gemm = std::any_of(pts.begin(), pts.end(), [](const PowerPoint& p) { return p.gemm; });
  int ncols = with_gemm ? 5 : 4;
  std::vector<Row> rows;
  std::vector<double> y;
  PowerFit best;
  auto try_at = [&](double knee, double floor) {
    device::VoltageCurve v;
    v.knee_mhz.value = knee;
    v.floor_rel.value = floor;
    rows_for(pts, v, f_max, with_gemm, rows, y);
    Row x;
    double e = nnls(rows, y, ncols, x);
    if (e < best.e - 1e-15) best = PowerFit{knee, floor, e, x};
  };
  // Coarse grid, then a finer one around the best point.
  double kstep = std::max(1.0, (f_max - f_min_table) / 300.0);
  for (double k = f_min_table; k <= f_max + 1e-9; k += kstep) {
    for (int i = 0; i <= 120; ++i) try_at(k, 0.40 + 0.005 * i);
  }
  double k0 = best.knee, fl0 = best.floor;
  for (double k = std::max(f_min_table, k0 - kstep); k <= std::min(f_max, k0 + kstep) + 1e-9; k += 1.0) {
    for (int i = -10; i <= 10; ++i) {
      double fl = fl0 + 0.0005 * i;
      if (fl > 0.0 && fl <= 1.0) try_at(k, fl);
    }
  }
  return best;
}

Sourced cal(double value, const std::string& provenance, const std::string& detail) {
  return Sourced{value, "calibrated: " + provenance + ": " + detail};
}

}  // namespace

std::vector<int> default_clocks(const std::vector<int>& supported_mhz, int count) {
  std::vector<int> table = supported_mhz;
  std::sort(table.begin(), table.end());
  table.erase(std::unique(table.begin(), table.end()), table.end());
  if (table.empty() || count <= 0) return {};
  if (count == 1) return {table.back()};
  double hi = table.back(), lo = std::max<double>(table.front(), 0.3 * hi);
  std::set<int> picked;
  for (int i = 0; i < count; ++i) {
    double target = lo + (hi - lo) * i / (count - 1);
    int best = table.front();
    for (int f : table) {
      if (std::abs(f - target) <= std::abs(best - target)) best = f;
    }
    picked.insert(best);
  }
  return {picked.begin(), picked.end()};
}

Result<CalibrationResult> fit_profile(const DeviceProfile& base, const std::vector<int>& supported_mhz,
                                      std::vector<Measurement> ms, const std::string& provenance) {
  CalibrationResult res;
  res.base_profile = base.name;
  std::vector<int> table = supported_mhz.empty() ? base.sm_clocks.mhz : supported_mhz;
  std::sort(table.begin(), table.end());
  table.erase(std::unique(table.begin(), table.end()), table.end());
  if (table.empty() || table.front() <= 0) return make_error("calibrate", "the device lists no SM clocks");
  const double f_max = table.back();

  // Check every run before using any.
  std::set<int> clocks;
  for (const Measurement& m : ms) {
    std::string at = series_name(m) + " at " + std::to_string(m.clock_mhz) + " MHz";
    if (m.clock_mhz <= 0 || m.clock_mhz > f_max)
      return make_error("calibrate",
                        at + ": clock outside the device's table (max " + std::to_string(table.back()) + ")");
    if (!(m.run.seconds > 0) || !std::isfinite(m.run.seconds))
      return make_error("calibrate", at + ": no run time");
    if (!(m.run.energy_j > 0) || !std::isfinite(m.run.energy_j))
      return make_error("calibrate", at + ": no energy measured",
                        "the energy counter did not advance: run each benchmark longer (--min-seconds)");
    if (busy(m.kind) && m.run.iterations <= 0) return make_error("calibrate", at + ": no iterations");
    clocks.insert(m.clock_mhz);
  }
  res.clocks_mhz.assign(clocks.begin(), clocks.end());
  auto series = group(ms);
  auto find_series = [&](BenchKind k) -> const Series* {
    for (const auto& s : series) {
      if (s.kind == k) return &s;
    }
    return nullptr;
  };
  const Series* fma = find_series(BenchKind::kFmaLoop);
  const Series* copy = find_series(BenchKind::kStreamCopy);
  if (!fma || !copy || fma->idx.size() < 3 || copy->idx.size() < 3)
    return make_error("calibrate", "the fit needs FMA-loop and stream-copy runs at 3 or more clocks",
                      "calibrate at 3 or more clocks (--clocks A,B,C)");

  // 1. Runs below their locked clock. A compute-bound run's time·clock is constant while the lock
  //    holds; a power cap or thermal slowdown lowers the clock and shows as a larger product.
  std::vector<bool> throttled(ms.size(), false);
  for (const Series& s : series) {
    if (s.kind != BenchKind::kFmaLoop && s.kind != BenchKind::kTensorGemm) continue;
    std::vector<double> tf;
    for (size_t i : s.idx) tf.push_back(per_iteration_s(ms[i]) * ms[i].clock_mhz);
    double med = median(tf);
    for (size_t j = 0; j < s.idx.size(); ++j) {
      if (tf[j] > kThrottledShare * med) {
        size_t i = s.idx[j];
        throttled[i] = true;
        ms[i].excluded = "ran " + fmt_pct(100 * (tf[j] / med - 1)) + " slower than 1/f: clock below the lock";
        res.warnings.push_back(series_name(ms[i]) + " at " + std::to_string(ms[i].clock_mhz) + " MHz " +
                               ms[i].excluded + " (power cap or thermal slowdown?); left out of the fit");
      }
    }
  }
  for (size_t i = 0; i < ms.size(); ++i) {
    if (busy(ms[i].kind) && !throttled[i] && power_w(ms[i]) >= kCappedShare * base.tdp_w.value) {
      throttled[i] = true;
      ms[i].excluded = "power at the limit";
      res.warnings.push_back(series_name(ms[i]) + " at " + std::to_string(ms[i].clock_mhz) + " MHz drew " +
                             std::to_string(static_cast<int>(power_w(ms[i]))) +
                             " W, at the power limit; left out of the fit");
    }
  }

  // FMA time vs c/f (c by least squares on relative errors).
  {
    double num = 0, den = 0;
    std::vector<std::pair<double, double>> pts;
    for (size_t i : fma->idx) {
      if (throttled[i]) continue;
      double t = per_iteration_s(ms[i]), inv = 1.0 / ms[i].clock_mhz;
      num += inv / t, den += inv * inv / (t * t);
      pts.emplace_back(ms[i].clock_mhz, t);
    }
    if (pts.size() < 2)
      return make_error("calibrate", "the FMA loop ran below its locked clock almost everywhere",
                        "lower the power draw (fewer clocks near the top) or check the GPU's cooling");
    double c = num / den, e = 0;
    for (auto [f, t] : pts) e += (c / f / t - 1) * (c / f / t - 1);
    res.fit.fma_time_rms_pct = 100 * std::sqrt(e / double(pts.size()));
  }

  // 2. The memory knee and exponent, from the stream copy's time.
  DeviceProfile prof = base;
  std::vector<std::pair<double, double>> copy_pts;
  for (size_t i : copy->idx) {
    if (!throttled[i]) copy_pts.emplace_back(ms[i].clock_mhz, per_iteration_s(ms[i]));
  }
  if (copy_pts.size() < 3) return make_error("calibrate", "fewer than 3 usable stream-copy runs");
  double cal_lo = res.clocks_mhz.front(), cal_hi = res.clocks_mhz.back();
  KneeFit knee = fit_mem_knee(copy_pts, table.front(), f_max);
  res.fit.copy_time_rms_pct = knee.rms_pct;
  double slowdown_at_lo = std::exp(knee.gamma * std::max(0.0, std::log(knee.knee_mhz / cal_lo))) - 1;
  if (slowdown_at_lo >= kKneeVisible && knee.gamma > 0) {
    res.fit.mem_knee_seen = true;
    prof.time.mem_knee_frac =
        cal(knee.knee_mhz / f_max, provenance,
            "stream-copy time vs clock at " + std::to_string(copy_pts.size()) + " clocks (knee " +
                std::to_string(static_cast<int>(std::lround(knee.knee_mhz))) + " MHz), time rms " +
                fmt_pct(knee.rms_pct));
    prof.time.mem_gamma = cal(knee.gamma, provenance, "stream-copy slowdown below the knee, same fit");
  } else {
    // Flat all the way down: the knee is at or below the lowest calibrated clock.
    prof.time.mem_knee_frac =
        cal(cal_lo / f_max, provenance,
            "stream-copy time flat down to the lowest calibrated clock (" +
                std::to_string(static_cast<int>(cal_lo)) + " MHz); the knee is at or below it");
    prof.time.mem_gamma.source +=
        " (kept: no slowdown below the knee was measured by emo calibrate on " + provenance + ")";
    res.warnings.push_back(
        "the stream copy did not slow down within the calibrated clocks: memory knee set to the "
        "lowest one, exponent kept from the " +
        base.name + " profile");
  }

  // 3. Compute and memory shares of every busy run. The FMA loop and the GEMM are compute-bound
  //    (u_c = 1), the copy memory-bound (u_m = 1); each intensity series gets a roofline fit of its
  //    own times (fit_roofline). Where its runs never leave one side of the roofline, the other side
  //    is not measured and comes from the sweep's physics: the kernel moves the copy's bytes (T_m =
  //    the copy's time) and its compute time grows with its flops (T_c = κ·X, κ from the series
  //    whose compute time was measured), kept within what the runs allow.
  std::map<int, double> copy_at;
  for (size_t i : copy->idx) {
    if (!throttled[i]) copy_at[ms[i].clock_mhz] = per_iteration_s(ms[i]);
  }
  const double copy_ref = copy_at.rbegin()->second;  // at the highest calibrated clock
  struct SweepFit {
    const Series* s;
    Roofline r;
    std::vector<RooflinePoint> pts;
    std::vector<size_t> idx;
  };
  std::vector<SweepFit> sweeps;
  std::vector<double> kappas;
  for (const Series& s : series) {
    if (s.kind != BenchKind::kIntensity) continue;
    SweepFit sf{&s, {}, {}, {}};
    for (size_t i : s.idx) {
      auto c = copy_at.find(ms[i].clock_mhz);
      if (throttled[i]) continue;
      if (c == copy_at.end()) {
        ms[i].excluded = "no stream-copy run at this clock";
        continue;
      }
      sf.pts.push_back({ms[i].clock_mhz / f_max, c->second / copy_ref, per_iteration_s(ms[i])});
      sf.idx.push_back(i);
    }
    if (sf.pts.empty()) continue;
    sf.r = fit_roofline(sf.pts);
    if (sf.r.compute_seen && s.flops_per_byte > 0) kappas.push_back(sf.r.compute_s / s.flops_per_byte);
    sweeps.push_back(std::move(sf));
  }
  const double kappa = median(kappas);
  if (!sweeps.empty() && kappas.empty())
    res.warnings.push_back(
        "no intensity run was compute-bound: the sweep's compute shares are taken as 0 (sweep "
        "higher flops per byte to constrain the stalled-SM share)");
  std::vector<PowerPoint> pts;
  for (SweepFit& sf : sweeps) {
    Roofline& r = sf.r;
    if (!r.compute_seen) r.compute_s = std::min(kappa * sf.s->flops_per_byte, r.compute_bound_s);
    if (!r.memory_seen) r.memory_s = std::min(copy_ref, r.memory_bound_s);
    for (size_t j = 0; j < sf.pts.size(); ++j) {
      const RooflinePoint& p = sf.pts[j];
      double tc = r.compute_s / p.x, tm = r.memory_s * p.r, mx = std::max(tc, tm);
      if (!(mx > 0)) continue;
      size_t i = sf.idx[j];
      pts.push_back(PowerPoint{i, double(ms[i].clock_mhz), tc / mx, tm / mx, power_w(ms[i]), false});
    }
  }
  for (const Series& s : series) {
    if (!busy(s.kind) || s.kind == BenchKind::kIntensity) continue;
    for (size_t i : s.idx) {
      if (throttled[i]) continue;
      bool mem = s.kind == BenchKind::kStreamCopy;
      pts.push_back(PowerPoint{i, double(ms[i].clock_mhz), mem ? 0.0 : 1.0, mem ? 1.0 : 0.0, power_w(ms[i]),
                               s.kind == BenchKind::kTensorGemm});
    }
  }

  // 4. V(f) and the power coefficients.
  PowerFit pf = fit_power(pts, table.front(), f_max);
  double C = pf.x[0], M = pf.x[1], A = pf.x[2], B = pf.x[3], G = pf.x[4];
  if (!(A + B > 0))
    return make_error("calibrate", "the FMA loop's power did not rise with the clock",
                      "check that the clock locks take effect (`nvidia-smi -q -d CLOCK` during a run)");
  device::VoltageCurve vfit;
  vfit.knee_mhz.value = pf.knee;
  vfit.floor_rel.value = pf.floor;
  double e2 = 0, emax = 0;
  for (const PowerPoint& p : pts) {
    double vr = vfit.relative(p.f, f_max), q = vr * vr * p.f / f_max;
    double fitted = C + M * p.u_m + q * (A + (p.gemm ? G : B) * p.u_c);
    Measurement& m = ms[p.m];
    m.in_power_fit = true;
    m.fitted_power_w = fitted;
    m.power_error_pct = 100 * (fitted - p.watts) / p.watts;
    e2 += m.power_error_pct * m.power_error_pct;
    emax = std::max(emax, std::abs(m.power_error_pct));
  }
  res.fit.power_points = static_cast<int>(pts.size());
  res.fit.power_rms_pct = std::sqrt(e2 / double(pts.size()));
  res.fit.power_max_pct = emax;
  res.fit.gemm_dynamic_w = G > 0 ? A + G : 0;
  res.fit.voltage_floor_seen = pf.knee > cal_lo && pf.knee < cal_hi && pf.floor < 1;

  std::string pfit = "power of " + std::to_string(pts.size()) + " benchmark runs at " +
                     std::to_string(clocks.size()) +
                     " clocks fitted to P = const + mem·u_m + V(f)²·f·dyn·(frac + (1-frac)·u_c), power rms " +
                     fmt_pct(res.fit.power_rms_pct);
  prof.voltage.knee_mhz =
      cal(std::round(pf.knee), provenance,
          "V(f) knee from FMA-loop power vs clock (P - P_const ∝ V(f)²·f) with the other runs; " + pfit);
  prof.voltage.floor_rel = cal(pf.floor, provenance, "V(f) floor relative to V(f_max), same fit");
  if (!res.fit.voltage_floor_seen) {
    res.warnings.push_back("no voltage knee within the calibrated clocks (" + std::to_string(int(cal_lo)) +
                           ".." + std::to_string(int(cal_hi)) +
                           " MHz): the fitted V(f) holds there, its knee is extrapolated");
  }
  prof.power.const_w = cal(C, provenance, "P_const of the same fit (" + pfit + ")");
  prof.power.dynamic_w = cal(A + B, provenance, "FMA-loop dynamic power at f_max of the same fit");
  prof.power.clock_frac =
      cal(A / (A + B), provenance,
          "stalled-SM share of dynamic power: stream-copy and intensity-sweep power vs clock, same fit");
  prof.power.mem_w =
      cal(M, provenance, "stream-copy power above the FMA loop's at equal SM activity, same fit");

  // 5. Idle power at the default clock (the nearest calibrated one).
  const Measurement* idle = nullptr;
  for (const Measurement& m : ms) {
    if (m.kind != BenchKind::kIdle) continue;
    if (!idle || std::abs(m.clock_mhz - base.default_clock_mhz.value) <
                     std::abs(idle->clock_mhz - base.default_clock_mhz.value))
      idle = &m;
  }
  if (idle) {
    prof.idle_power_w =
        cal(power_w(*idle), provenance,
            "idle benchmark (nothing launched) at " + std::to_string(idle->clock_mhz) + " MHz locked");
  } else {
    res.warnings.push_back("no idle run: idle power kept from the " + base.name + " profile");
  }

  // 6. The device's own clock table, the rest of the profile kept.
  prof.sm_clocks =
      device::ClockTable{table, "calibrated: " + provenance + ": the device's supported SM clocks"};
  if (prof.default_clock_mhz.value < table.front() || prof.default_clock_mhz.value > table.back())
    prof.default_clock_mhz = cal(table.back(), provenance, "the highest supported clock (EMO's default)");
  prof.voltage.knee_mhz.value =
      std::clamp(prof.voltage.knee_mhz.value, double(table.front()), double(table.back()));

  // The result must load back: the fit cannot produce a profile `--device FILE` rejects.
  auto back = device::profile_from_json(device::profile_to_json(prof), "calibrated profile");
  if (!back) return back.error();
  res.profile = std::move(prof);
  res.measurements = std::move(ms);
  return res;
}

Result<CalibrationResult> calibrate(device::Device& dev, const CalibrateOptions& opt) {
  const std::string where = dev.spec();
  auto supported = dev.supported_sm_clocks();
  if (!supported) return supported.error();
  std::vector<int> table = *supported;
  std::sort(table.begin(), table.end());
  std::vector<int> clocks;
  if (opt.clocks_mhz.empty()) {
    clocks = default_clocks(table, opt.num_clocks);
  } else {
    for (int f : opt.clocks_mhz) {
      if (!std::binary_search(table.begin(), table.end(), f)) {
        int near = table.empty() ? 0 : table.front();
        for (int g : table) {
          if (std::abs(g - f) < std::abs(near - f)) near = g;
        }
        return make_error(where, std::to_string(f) + " MHz is not a supported SM clock",
                          "the nearest supported clock is " + std::to_string(near) + " MHz");
      }
      clocks.push_back(f);
    }
    std::sort(clocks.begin(), clocks.end());
    clocks.erase(std::unique(clocks.begin(), clocks.end()), clocks.end());
  }
  if (clocks.size() < 3)
    return make_error(where,
                      "calibration needs 3 or more distinct clocks, got " + std::to_string(clocks.size()));
  if (!(opt.min_seconds > 0 && opt.min_seconds <= 3600))
    return make_error(where, "--min-seconds must be more than 0 and at most 3600");

  std::vector<BenchSpec> specs;
  specs.push_back({BenchKind::kFmaLoop, 0, opt.min_seconds});
  specs.push_back({BenchKind::kTensorGemm, 0, opt.min_seconds});
  for (double x : opt.intensities) specs.push_back({BenchKind::kIntensity, x, opt.min_seconds});
  specs.push_back({BenchKind::kStreamCopy, 0, opt.min_seconds});
  specs.push_back({BenchKind::kIdle, 0, opt.min_seconds});

  std::vector<Measurement> ms;
  {
    device::ClockGuard guard(dev);
    // From the top down: the hottest runs first, so later ones do not inherit a cold start.
    for (auto it = clocks.rbegin(); it != clocks.rend(); ++it) {
      EMO_RETURN_IF_ERROR(guard.lock(*it));
      for (const BenchSpec& s : specs) {
        auto run = dev.run_benchmark(s);
        if (!run) return run.error();  // the guard resets the clock on the way out
        Measurement m;
        m.clock_mhz = *it;
        m.kind = s.kind;
        m.flops_per_byte = s.flops_per_byte;
        m.run = *run;
        if (opt.progress) opt.progress(m);
        ms.push_back(m);
      }
    }
    // Reset explicitly, so that a failing reset is reported rather than swallowed by the destructor.
    EMO_RETURN_IF_ERROR(guard.reset());
  }
  std::string date = opt.date.empty() ? today_utc() : opt.date;
  auto fit = fit_profile(dev.profile(), table, std::move(ms), "emo calibrate on " + dev.spec() + ", " + date);
  if (!fit) {
    Error e = fit.error();
    e.where = where;
    return e;
  }
  fit->device_spec = dev.spec();
  fit->model_name = dev.model_name();
  fit->date = date;
  fit->profile.model = dev.model_name().empty() ? fit->profile.model : dev.model_name();
  return fit;
}

std::string to_json(const CalibrationResult& r, int indent) {
  using ojson = nlohmann::ordered_json;
  ojson j;
  j["schema"] = "emo-calibration/1";
  j["device"] = r.device_spec;
  j["model"] = r.model_name;
  j["base_profile"] = r.base_profile;
  j["date"] = r.date;
  j["clocks_mhz"] = r.clocks_mhz;
  j["measurements"] = ojson::array();
  for (const Measurement& m : r.measurements) {
    ojson jm;
    jm["clock_mhz"] = m.clock_mhz;
    jm["kind"] = device::to_string(m.kind);
    if (m.kind == BenchKind::kIntensity) jm["flops_per_byte"] = m.flops_per_byte;
    jm["seconds"] = m.run.seconds;
    jm["iterations"] = m.run.iterations;
    jm["energy_j"] = m.run.energy_j;
    jm["power_w"] = m.run.power_w();
    if (m.run.iterations > 0) jm["seconds_per_iteration"] = m.run.seconds_per_iteration();
    jm["in_power_fit"] = m.in_power_fit;
    if (m.in_power_fit) {
      jm["fitted_power_w"] = m.fitted_power_w;
      jm["power_error_pct"] = m.power_error_pct;
    }
    if (!m.excluded.empty()) jm["excluded"] = m.excluded;
    j["measurements"].push_back(std::move(jm));
  }
  j["fit"] =
      ojson{{"power_points", r.fit.power_points},         {"power_rms_pct", r.fit.power_rms_pct},
            {"power_max_pct", r.fit.power_max_pct},       {"copy_time_rms_pct", r.fit.copy_time_rms_pct},
            {"fma_time_rms_pct", r.fit.fma_time_rms_pct}, {"gemm_dynamic_w", r.fit.gemm_dynamic_w},
            {"mem_knee_seen", r.fit.mem_knee_seen},       {"voltage_floor_seen", r.fit.voltage_floor_seen}};
  j["warnings"] = r.warnings;
  j["profile"] = ojson::parse(device::profile_to_json(r.profile));
  return j.dump(indent);
}

std::string to_text(const CalibrationResult& r) {
  const auto& p = r.profile;
  std::string out =
      fmt::format("{} ({}): calibrated from the {} profile at {} clocks ({}..{} MHz), {} runs\n",
                  r.device_spec, r.model_name, r.base_profile, r.clocks_mhz.size(), r.clocks_mhz.front(),
                  r.clocks_mhz.back(), r.measurements.size());
  out += fmt::format("  V(f):   knee {:.0f} MHz, floor {:.3f} x V(f_max){}\n", p.voltage.knee_mhz.value,
                     p.voltage.floor_rel.value,
                     r.fit.voltage_floor_seen ? "" : " (knee outside the calibrated clocks)");
  out += fmt::format(
      "  power:  P_const {:.1f} W, dynamic {:.1f} W at f_max (tensor-core GEMM {:.1f} W), stalled-SM "
      "share {:.2f}, memory {:.1f} W   (rms {:.2f} %, max {:.2f} % over {} runs)\n",
      p.power.const_w.value, p.power.dynamic_w.value, r.fit.gemm_dynamic_w, p.power.clock_frac.value,
      p.power.mem_w.value, r.fit.power_rms_pct, r.fit.power_max_pct, r.fit.power_points);
  out += fmt::format("  memory: knee {:.3f} x f_max, exponent {:.2f}   (stream-copy time rms {:.2f} %)\n",
                     p.time.mem_knee_frac.value, p.time.mem_gamma.value, r.fit.copy_time_rms_pct);
  out += fmt::format("  idle:   {:.1f} W   FMA time vs 1/f rms {:.2f} %\n", p.idle_power_w.value,
                     r.fit.fma_time_rms_pct);
  return out;
}

}  // namespace emo::calibrate
