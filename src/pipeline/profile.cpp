// Stage profiles and the per-instruction options built from them, the way lowtime builds them:
// Pareto filter on (time, energy), quantize time (Python's floor division), keep one option per
// quantized time (the most energy, i.e. the one closest to its rounded-down time), subtract the
// blocking power over the quantized time, fit a·exp(b·t)+c.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "../model/csv.h"
#include "emo/pipeline/pipeline.h"

namespace emo::pipeline {

namespace {

using model::detail::CsvTable;
using model::detail::number_at;
using model::detail::read_csv;

// A duration of more time units than this is an error: the frontier solver sums durations along paths
// of up to 16 M nodes in 64-bit integers (10^5 s per microbatch at lowtime's 0.1 ms is far beyond
// any real profile).
constexpr double kMaxUnits = 1e9;
// The highest clock a stage profile row may name, MHz (far above any GPU's).
constexpr double kMaxClockMhz = 1e5;

// Python's float `a // b` (CPython float_floor_div): the quantization lowtime applies. It differs from
// std::floor(a / b) when a / b rounds up to an integer, e.g. 0.058 // 0.001 == 57.0 in Python.
double py_floor_div(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return 0;
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

// For a fixed b, a and c of y ≈ a·exp(b·(x − x0)) + c are a linear least-squares problem.
struct LinearFit {
  double a = 0, c = 0, sse = std::numeric_limits<double>::infinity();
};

LinearFit solve_ac(std::span<const double> x, std::span<const double> y, double b, double x0) {
  double n = double(x.size()), se = 0, sy = 0, see = 0, sey = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double e = std::exp(b * (x[i] - x0));
    se += e, sy += y[i], see += e * e, sey += e * y[i];
  }
  double det = n * see - se * se;
  LinearFit f;
  if (!std::isfinite(det) || std::abs(det) < 1e-300) return f;
  f.a = (n * sey - se * sy) / det;
  f.c = (sy - f.a * se) / n;
  f.sse = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double r = f.a * std::exp(b * (x[i] - x0)) + f.c - y[i];
    f.sse += r * r;
  }
  if (!std::isfinite(f.sse)) f.sse = std::numeric_limits<double>::infinity();
  return f;
}

}  // namespace

std::string_view instruction_name(Instruction instruction) {
  return instruction == Instruction::kForward ? "forward" : "backward";
}

Result<StageProfile> load_stage_profile(const std::string& path) {
  auto t = read_csv(path);
  if (!t) return t.error();
  const char* note = "a stage profile (lowtime's input) has columns stage,instruction,frequency,time,energy";
  const char* names[5] = {"stage", "instruction", "frequency", "time", "energy"};
  int cols[5];
  for (int i = 0; i < 5; ++i) {
    cols[i] = t->column(names[i]);
    if (cols[i] < 0) return make_error(path, std::string("missing column '") + names[i] + "'", note);
  }
  StageProfile p;
  p.path = path;
  // The row of each (stage, instruction, MHz): a second row for one is an error naming both lines
  // (which of two measurements to fit is not for the loader to guess).
  std::map<std::tuple<size_t, int, int>, size_t> first_row;
  for (size_t r = 0; r < t->rows.size(); ++r) {
    double v[4];
    for (int i = 0; i < 4; ++i) {
      int c = cols[i == 0 ? 0 : i + 1];
      auto x = number_at(*t, r, c);
      if (!x) return x.error();
      v[i] = *x;
    }
    double stage = v[0], clock = v[1], time = v[2], energy = v[3];
    if (stage < 0 || stage != std::floor(stage) || stage > 1e6)
      return make_error(t->where(r),
                        "column 'stage': must be a whole number >= 0, got " + t->rows[r][size_t(cols[0])]);
    const std::string& inst = t->rows[r][size_t(cols[1])];
    Instruction in;
    if (inst == "forward") {
      in = Instruction::kForward;
    } else if (inst == "backward") {
      in = Instruction::kBackward;
    } else {
      return make_error(t->where(r),
                        "column 'instruction': expected forward or backward, got '" + inst + "'");
    }
    const char* bad = !(clock > 0) ? "frequency" : !(time > 0) ? "time" : !(energy > 0) ? "energy" : nullptr;
    if (bad) {
      int c = t->column(bad);
      return make_error(t->where(r),
                        std::string("column '") + bad + "': must be > 0, got " + t->rows[r][size_t(c)]);
    }
    // A clock is a whole number of MHz (it used to be rounded, so 1410.4 and 1410 were one clock).
    if (clock != std::floor(clock) || clock > kMaxClockMhz)
      return make_error(t->where(r), fmt::format("column 'frequency': must be a whole number of MHz from 1 to "
                                                 "{:g}, got {}",
                                                 kMaxClockMhz, t->rows[r][size_t(cols[2])]));
    size_t s = size_t(stage);
    const int mhz = int(clock);
    auto [it, fresh] = first_row.emplace(std::tuple{s, int(in), mhz}, r);
    if (!fresh)
      return make_error(t->where(r),
                        fmt::format("stage {} {} at {} MHz is also on line {}", s, instruction_name(in), mhz,
                                    t->lines[it->second]),
                        "a stage profile has one row per stage, instruction and frequency");
    if (s >= p.samples.size()) p.samples.resize(s + 1);
    p.samples[s][size_t(in)].push_back(ClockSample{mhz, time, energy});
  }
  if (p.samples.empty()) return make_error(path, "no data rows (only the header line)", note);
  p.stages = int(p.samples.size());
  p.rows = t->rows.size();
  return p;
}

double ExpCost::operator()(double t) const { return a * std::exp(b * (t - t0)) + c; }
double ExpCost::a_unshifted() const { return a * std::exp(-b * t0); }

Result<ExpCost> fit_exponential(std::span<const double> x, std::span<const double> y) {
  if (x.empty() || x.size() != y.size())
    return make_error("", "exponential fit: need as many x as y, and at least one");
  ExpCost best;
  double lo = *std::min_element(x.begin(), x.end()), hi = *std::max_element(x.begin(), x.end());
  best.t0 = lo;
  if (x.size() == 1 || hi == lo) {
    double mean = 0;
    for (double v : y) mean += v;
    best.c = mean / double(y.size());
    return best;
  }
  double span = hi - lo;
  // Coarse search over the curvature k = b·span from -60 to -1e-9 (log-spaced), then golden-section
  // refinement around the best. Why only b < 0: scipy's curve_fit, started from lowtime's first guess
  // (b < 0), ends at the least-squares minimum over b < 0 on every published profile (where that
  // minimum is the straight-line limit, at a b of about -1e-8); an unrestricted fit would sometimes
  // pick a concave curve that the published frontiers do not use. Two points: every k fits exactly;
  // take a gentle decay.
  double best_k = -1, best_sse = std::numeric_limits<double>::infinity();
  LinearFit bf;
  auto eval = [&](double k) { return solve_ac(x, y, k / span, lo); };
  const double k_min = 1e-9, k_max = 60;
  const int kSteps = 120;
  const double step = std::pow(k_max / k_min, 1.0 / kSteps);
  if (x.size() == 2) {
    bf = eval(best_k);
  } else {
    for (int i = 0; i <= kSteps; ++i) {
      double k = -k_min * std::pow(step, double(i));
      LinearFit f = eval(k);
      if (f.sse < best_sse) best_sse = f.sse, best_k = k, bf = f;
    }
    // Bracket [best·step, best/step] (both negative), clamped to the searched range.
    double a = std::max(best_k * step, -k_max), b = std::min(best_k / step, -k_min);
    const double g = (std::sqrt(5.0) - 1) / 2;
    double x1 = b - g * (b - a), x2 = a + g * (b - a);
    double f1 = eval(x1).sse, f2 = eval(x2).sse;
    for (int it = 0; it < 300 && (b - a) > 1e-12 * std::abs(best_k); ++it) {
      if (f1 < f2) {
        b = x2, x2 = x1, f2 = f1, x1 = b - g * (b - a), f1 = eval(x1).sse;
      } else {
        a = x1, x1 = x2, f1 = f2, x2 = a + g * (b - a), f2 = eval(x2).sse;
      }
    }
    double k = (a + b) / 2;
    LinearFit f = eval(k);
    if (f.sse <= best_sse) best_k = k, bf = f;
  }
  best.a = bf.a, best.b = best_k / span, best.c = bf.c;
  return best;
}

size_t InstructionModel::candidate_for(int64_t units) const {
  // candidates are slowest first (units descending): the first with units <= `units`.
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].units <= units) return i;
  }
  return candidates.size() - 1;
}

Result<PipelineModel> build_model(const StageProfile& profile, int stages, double unit_s,
                                  double blocking_power_w) {
  if (!(unit_s > 0) || !std::isfinite(unit_s)) return make_error("--unit-time", "must be > 0 seconds");
  if (!(blocking_power_w >= 0) || !std::isfinite(blocking_power_w))
    return make_error("--blocking-power", "must be >= 0 W",
                      "Perseus uses 83.64 W for A100 and 70.38 W for A40");
  if (stages <= 0) stages = profile.stages;
  if (stages > profile.stages)
    return make_error(
        profile.path,
        "has stages 0.." + std::to_string(profile.stages - 1) + ", not " + std::to_string(stages),
        "--stages defaults to the stages in the profile");
  PipelineModel m;
  m.stages = stages;
  m.unit_s = unit_s;
  m.blocking_power_w = blocking_power_w;
  for (int s = 0; s < stages; ++s) {
    for (int i = 0; i < 2; ++i) {
      Instruction in = Instruction(i);
      const auto& samples = profile.samples[size_t(s)][size_t(i)];
      if (samples.empty())
        return make_error(profile.path,
                          "no " + std::string(instruction_name(in)) + " rows for stage " + std::to_string(s),
                          "every stage 0..stages-1 needs forward and backward rows");
      InstructionModel im;
      im.stage = s;
      im.instruction = in;
      im.samples = samples.size();
      // 1. Pareto: drop a sample when another is strictly faster and strictly cheaper.
      std::vector<ClockSample> sorted(samples.begin(), samples.end());
      std::stable_sort(sorted.begin(), sorted.end(),
                       [](const ClockSample& a, const ClockSample& b) { return a.time_s > b.time_s; });
      std::vector<Candidate> pareto;
      std::vector<bool> keep(sorted.size(), true);
      for (size_t k = 0; k < sorted.size(); ++k) {
        for (const auto& o : sorted) {
          if (o.time_s < sorted[k].time_s && o.energy_j < sorted[k].energy_j) keep[k] = false;
        }
      }
      for (size_t k = 0; k < sorted.size(); ++k) {
        if (!keep[k]) continue;
        Candidate c;
        c.clock_mhz = sorted[k].clock_mhz;
        c.time_s = sorted[k].time_s;
        c.energy_j = sorted[k].energy_j;
        const double units = py_floor_div(c.time_s, unit_s);
        if (!(units <= kMaxUnits))
          return make_error(profile.path,
                            fmt::format("stage {} {} at {} MHz takes {:g} s, more than {:g} time units of {:g} s",
                                        s, instruction_name(in), c.clock_mhz, c.time_s, kMaxUnits, unit_s),
                            "check the profile's time column (seconds), or use a coarser --unit-time");
        // Shorter than one unit it would take no time at all (a frontier of 0 s plans): the unit is
        // too coarse for the profile.
        if (units < 1)
          return make_error("--unit-time",
                            fmt::format("{:g} s is longer than stage {} {} at {} MHz takes in {} ({:g} s)", unit_s,
                                        s, instruction_name(in), c.clock_mhz, profile.path, c.time_s),
                            "every instruction must last one time unit or more: use a finer --unit-time "
                            "(lowtime uses 1 ms, or 0.1 ms for the A40 files)");
        c.units = int64_t(units);
        pareto.push_back(c);
      }
      // 2. One candidate per quantized time: the one with the most energy (stable, as Python's sort).
      std::stable_sort(pareto.begin(), pareto.end(),
                       [](const Candidate& a, const Candidate& b) { return a.energy_j > b.energy_j; });
      std::map<int64_t, bool> seen;
      for (const auto& c : pareto) {
        if (seen.emplace(c.units, true).second) im.candidates.push_back(c);
      }
      std::stable_sort(im.candidates.begin(), im.candidates.end(),
                       [](const Candidate& a, const Candidate& b) { return a.units > b.units; });
      // 3. Effective cost: energy minus the blocking power over the quantized time.
      std::vector<double> xs, ys;
      for (auto& c : im.candidates) {
        c.cost_j = c.energy_j - blocking_power_w * double(c.units) * unit_s;
        xs.push_back(double(c.units));
        ys.push_back(c.cost_j);
      }
      auto fit = fit_exponential(xs, ys);
      if (!fit)
        return make_error(profile.path, "stage " + std::to_string(s) + " " +
                                            std::string(instruction_name(in)) + ": " + fit.error().what);
      im.cost = *fit;
      double sse = 0;
      for (size_t k = 0; k < xs.size(); ++k) sse += (im.cost(xs[k]) - ys[k]) * (im.cost(xs[k]) - ys[k]);
      im.fit_rmse_j = std::sqrt(sse / double(xs.size()));
      m.instructions.push_back(std::move(im));
    }
  }
  return m;
}

}  // namespace emo::pipeline
