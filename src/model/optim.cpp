// Nelder–Mead with the standard coefficients (reflect 1, expand 2, contract 0.5, shrink 0.5).
#include "optim.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace emo::model::detail {

Minimum nelder_mead(const std::function<double(const std::vector<double>&)>& fn, std::vector<double> x0,
                    const std::vector<double>& step, int max_evals, double rel_tol) {
  const size_t n = x0.size();
  std::vector<std::vector<double>> pts(n + 1, x0);
  for (size_t i = 0; i < n; ++i) pts[i + 1][i] += step[i];
  std::vector<double> val(n + 1);
  int evals = 0;
  auto eval = [&](const std::vector<double>& x) {
    ++evals;
    double v = fn(x);
    return std::isfinite(v) ? v : 1e300;
  };
  for (size_t i = 0; i <= n; ++i) val[i] = eval(pts[i]);
  std::vector<size_t> order(n + 1);
  std::vector<double> c(n), xr(n), xe(n), xc(n);
  while (evals < max_evals) {
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return val[a] < val[b]; });
    size_t best = order[0], worst = order[n], second = order[n - 1];
    if (std::abs(val[worst] - val[best]) <= rel_tol * (std::abs(val[best]) + 1e-300)) break;
    std::fill(c.begin(), c.end(), 0.0);
    for (size_t k = 0; k < n; ++k) {
      for (size_t j = 0; j < n; ++j) c[j] += pts[order[k]][j] / static_cast<double>(n);
    }
    for (size_t j = 0; j < n; ++j) xr[j] = c[j] + (c[j] - pts[worst][j]);
    double fr = eval(xr);
    if (fr < val[best]) {
      for (size_t j = 0; j < n; ++j) xe[j] = c[j] + 2.0 * (c[j] - pts[worst][j]);
      double fe = eval(xe);
      if (fe < fr) {
        pts[worst] = xe;
        val[worst] = fe;
      } else {
        pts[worst] = xr;
        val[worst] = fr;
      }
    } else if (fr < val[second]) {
      pts[worst] = xr;
      val[worst] = fr;
    } else {
      for (size_t j = 0; j < n; ++j) xc[j] = c[j] + 0.5 * (pts[worst][j] - c[j]);
      double fc = eval(xc);
      if (fc < val[worst]) {
        pts[worst] = xc;
        val[worst] = fc;
      } else {
        for (size_t k = 1; k <= n; ++k) {
          size_t i = order[k];
          for (size_t j = 0; j < n; ++j) pts[i][j] = pts[best][j] + 0.5 * (pts[i][j] - pts[best][j]);
          val[i] = eval(pts[i]);
        }
      }
    }
  }
  size_t best = static_cast<size_t>(std::min_element(val.begin(), val.end()) - val.begin());
  return Minimum{pts[best], val[best]};
}

}  // namespace emo::model::detail
