// An exact oracle for the optimizer: the same problem as optimize() (one clock per pack, minimum
// predicted step energy subject to the replayed makespan ≤ (1+δ)·T_default) written as a mixed-integer
// linear program and solved to proven optimality with GLPK. Replay is a longest-path sweep over the
// step's DAG of points, so it is linear once the clocks are fixed: a binary x[k,c] per pack and
// candidate clock, a time variable per point where a max is taken, t(dst) ≥ t(src) + lat per edge,
// t(end) ≥ t(start) + Σ_c x[k,c]·d(n,c) per GPU op (d exactly the rounded duration predict() uses),
// a makespan variable M ≤ target, and as objective exactly predict()'s energy: packs at their clocks,
// each GPU's uncovered time idling at the default clock (max(0, M − covered) modelled), and the clock-
// switch energy between consecutive packs of a GPU (wrap included) through transition variables.
// Meant for cases up to ~30 packs and a small clock set, where exhaustive() cannot enumerate.
#pragma once

#include <cstdint>

#include "emo/base/result.h"
#include "emo/optimize/optimize.h"

namespace emo::optimize {

struct MilpStats {
  double objective_j = 0;  // the MILP's optimum (equals the returned plan's replayed energy)
  int64_t nodes = 0;       // branch-and-bound subproblems
  int rows = 0, cols = 0, binaries = 0;
  double solve_ms = 0;
  bool default_plan = false;  // the all-default plan won (the default clock is not a candidate)
};

struct MilpOptions {
  double time_limit_s = 60;      // wall-clock limit for GLPK's search
  int64_t node_limit = 1000000;  // branch-and-bound subproblems (the root counts as one)
  MilpStats* stats = nullptr;    // filled when set
};

// The exact optimum over plans with every pack at a candidate clock (Problem::clocks_mhz, or the
// default set), and the all-default plan, as exhaustive() searches; the returned plan is the MILP's,
// verified by a full replay (its energy and the MILP's objective agree to 1e-6 relative).
// It models idle inside packs as measured (Problem::idle_from_replay must be false: compare the DP on the
// same problem). Errors: idle_from_replay set, max_slowdown < 0, no packs or clocks, a graph with negative
// latencies or durations, GLPK
// stopping at the time or node limit (or failing) before optimality is proven, a replay that disagrees.
Result<Plan> milp_oracle(const Problem& problem, double max_slowdown, const MilpOptions& options = {});

}  // namespace emo::optimize
