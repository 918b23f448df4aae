// Head-to-head with a published lowtime frontier: at each of their time points, our lowest energy
// among plans that finish by then. Example: ours {(2.818 s, 6212.6 J), (2.820 s, 6201.0 J)}, theirs
// (2.819 s, 6207.6 J) -> ours there is 6212.6 J (the 2.820 s plan is too slow), +0.08 %.
#include <algorithm>
#include <cmath>
#include <limits>

#include "../model/csv.h"
#include "emo/pipeline/pipeline.h"

namespace emo::pipeline {

Result<PublishedFrontier> load_published_frontier(const std::string& path) {
  auto t = model::detail::read_csv(path);
  if (!t) return t.error();
  const char* note = "a published lowtime frontier has columns time,energy (seconds, joules)";
  int ct = t->column("time"), ce = t->column("energy");
  if (ct < 0) return make_error(path, "missing column 'time'", note);
  if (ce < 0) return make_error(path, "missing column 'energy'", note);
  PublishedFrontier p;
  p.path = path;
  for (size_t r = 0; r < t->rows.size(); ++r) {
    auto ts = model::detail::number_at(*t, r, ct);
    if (!ts) return ts.error();
    auto e = model::detail::number_at(*t, r, ce);
    if (!e) return e.error();
    if (!(*ts > 0))
      return make_error(t->where(r), "column 'time': must be > 0, got " + t->rows[r][size_t(ct)]);
    p.time_s.push_back(*ts);
    p.energy_j.push_back(*e);
  }
  if (p.time_s.empty()) return make_error(path, "no data rows", note);
  return p;
}

double infer_unit_s(const PublishedFrontier& published) {
  std::vector<double> t = published.time_s;
  std::sort(t.begin(), t.end());
  double step = std::numeric_limits<double>::infinity();
  for (size_t i = 1; i < t.size(); ++i) {
    if (t[i] - t[i - 1] > 1e-12) step = std::min(step, t[i] - t[i - 1]);
  }
  if (!std::isfinite(step)) return 0.001;
  return std::pow(10.0, std::round(std::log10(step)));
}

Comparison compare(const Frontier& ours, const PublishedFrontier& published, double unit_s,
                   double tolerance) {
  Comparison c;
  c.points = published.time_s.size();
  c.tolerance = tolerance;
  // Our points are time ascending with energy descending, so "lowest energy at or before T" is the
  // last point at or before T.
  std::vector<int64_t> our_t;
  for (const auto& p : ours.points) our_t.push_back(p.time_units);
  // Their step function: sort their points by time, running minimum of energy.
  std::vector<size_t> order(c.points);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return published.time_s[a] < published.time_s[b]; });
  std::vector<double> their_step(c.points);
  double run = std::numeric_limits<double>::infinity();
  for (size_t i : order) their_step[i] = run = std::min(run, published.energy_j[i]);

  double sum = 0, sum_step = 0;
  bool first = true;
  for (size_t i = 0; i < c.points; ++i) {
    int64_t units = std::llround(published.time_s[i] / unit_s);
    auto it = std::upper_bound(our_t.begin(), our_t.end(), units);
    if (it == our_t.begin()) continue;  // faster than any plan of ours
    double e = ours.points[size_t(it - our_t.begin()) - 1].energy_j;
    double theirs = published.energy_j[i];
    double rel = (e - theirs) / theirs, rel_step = (e - their_step[i]) / their_step[i];
    ++c.covered;
    if (rel <= 0) ++c.ours_le;
    if (rel <= tolerance) ++c.ours_within;
    if (rel_step <= 0) ++c.ours_le_step;
    if (first || rel > c.max_rel_diff) c.max_rel_diff = rel, c.max_rel_diff_time_s = published.time_s[i];
    if (first || rel < c.min_rel_diff) c.min_rel_diff = rel;
    if (first || rel_step > c.max_rel_diff_step) c.max_rel_diff_step = rel_step;
    first = false;
    sum += rel;
    sum_step += rel_step;
  }
  if (!ours.points.empty()) {
    c.our_fastest_s = double(our_t.front()) * unit_s;
    c.their_fastest_s = published.time_s[order.front()];
    c.same_fastest = std::llround(c.their_fastest_s / unit_s) == our_t.front();
  }
  if (c.covered) {
    c.mean_rel_diff = sum / double(c.covered);
    c.mean_rel_diff_step = sum_step / double(c.covered);
  }
  return c;
}

}  // namespace emo::pipeline
