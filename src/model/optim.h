// Small derivative-free minimiser for the model fits: Nelder–Mead on a handful of parameters.
// The time model has a max() in it, so its least-squares surface has kinks where the unit switches
// between compute- and memory-bound; a simplex search copes with those where Gauss–Newton stalls.
#pragma once

#include <functional>
#include <vector>

namespace emo::model::detail {

struct Minimum {
  std::vector<double> x;
  double value = 0;
};

// Minimises fn from x0 with initial simplex steps `step` (one per coordinate).
Minimum nelder_mead(const std::function<double(const std::vector<double>&)>& fn, std::vector<double> x0,
                    const std::vector<double>& step, int max_evals = 4000, double rel_tol = 1e-13);

}  // namespace emo::model::detail
