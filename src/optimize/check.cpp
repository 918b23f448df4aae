// The policy checked on the device before it is handed out; see emo/optimize/check.h.
#include "emo/optimize/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace emo::optimize {

double Measured::mean_step_ns() const {
  double t = 0;
  for (int64_t v : step_ns) t += double(v);
  return step_ns.empty() ? 0 : t / double(step_ns.size());
}

StepSlowdown step_slowdown(const std::vector<int64_t>& step_ns, double default_mean_ns) {
  StepSlowdown out;
  const size_t n = step_ns.size();
  if (n == 0 || !(default_mean_ns > 0)) return out;
  // In µs, as the figures are shown.
  const double default_us = default_mean_ns / 1e3;
  double mean = 0;
  for (int64_t v : step_ns) mean += double(v) / 1e3;
  mean /= double(n);
  double var = 0;
  for (int64_t v : step_ns) var += (double(v) / 1e3 - mean) * (double(v) / 1e3 - mean);
  var = n > 1 ? var / double(n - 1) : 0;
  out.steps = int(n);
  out.mean_pct = 100 * (mean / default_us - 1);
  out.bound_pct = out.mean_pct + 100 * 2 * std::sqrt(var / double(n)) / default_us;
  return out;
}

double energy_gap_pct(double predicted_j, double measured_j) {
  return measured_j > 0 ? 100 * std::abs(predicted_j / measured_j - 1) : 0.0;
}

double energy_gap_pct(const Checked& c) {
  double worst = energy_gap_pct(c.default_predicted_j, c.default_measured_j);
  for (const CheckRound& r : c.rounds) {
    if (r.accepted) worst = std::max(worst, energy_gap_pct(r.predicted_energy_j, r.measured_energy_j));
  }
  return worst;
}

std::vector<std::string> check_warnings(const Checked& c) {
  const double g = energy_gap_pct(c);
  if (!(g > kEnergyDoubtPct)) return {};
  return {fmt::format("the check measured a step energy {:.1f} % away from the models' prediction (more than {:g} %): "
                      "the predicted saving may not hold; `emo evaluate` or `emo run` measures it",
                      g, kEnergyDoubtPct)};
}

nlohmann::json check_json(const Checked& c) {
  nlohmann::json rounds = nlohmann::json::array();
  for (const CheckRound& r : c.rounds) {
    rounds.push_back({{"plan", r.plan}, {"reserve", r.reserve}, {"predicted_pct", r.predicted_pct}, {"measured_pct", r.measured_pct},
                      {"bound_pct", r.bound_pct}, {"steps", r.steps}, {"accepted", r.accepted},
                      {"predicted_energy_j", r.predicted_energy_j}, {"measured_energy_j", r.measured_energy_j}});
  }
  return {{"rounds", rounds},
          {"fell_back", c.fell_back},
          {"energy_fell_back", c.energy_fell_back},
          {"default", {{"predicted_energy_j", c.default_predicted_j}, {"measured_energy_j", c.default_measured_j}}},
          {"energy_gap_pct", energy_gap_pct(c)}};
}

Result<Checked> optimize_checked(const Problem& pr, const OptimizeOptions& options,
                                 const PlanMeter& meter, const CheckOptions& check, const Solution* solved) {
  if (check.steps < 2) return make_error("check", "at least 2 steps per check run are needed (the first is a warm-up)");
  if (check.max_steps < check.steps) return make_error("check", "max_steps must be at least steps");
  Checked out;
  if (solved) {
    out.solution = *solved;
  } else {
    auto sol = optimize(pr, options);
    if (!sol) return sol.error();
    out.solution = std::move(*sol);
  }
  const double delta = options.max_slowdown;
  if (delta <= 0) return out;  // the default clocks: nothing to check
  auto pf = applied_policy(pr, out.solution, delta);
  if (!pf) return pf.error();
  const std::vector<AppliedPack> packs = pf->packs;  // the same packs in every solution
  auto def = meter.measure(packs, {}, {}, check.steps, "default", check.seed);
  if (!def) return def.error();
  out.default_predicted_j = out.solution.default_plan.energy_j;
  out.default_measured_j = def->energy_j;
  // The mean must keep half of the reserve; mean + 2 standard errors must stay within the target.
  const double accept_pct = check_accept_pct(delta, options.reserve), bound_limit_pct = 100 * delta;
  // Check runs of per-pack clocks issued at the given times: the mean slowdown over the measured steps
  // and its upper bound; run again with more steps when only the spread stands between it and the limit.
  auto measure = [&](CheckRound& r, const std::vector<int>& clocks, const std::vector<int64_t>& issues) -> Status {
    for (int steps : {check.steps, check.max_steps}) {
      auto m = meter.measure(packs, clocks, issues, steps, "check", check.seed);
      if (!m) return m.error();
      const StepSlowdown sl = step_slowdown(m->step_ns, def->mean_step_ns());
      r.steps = sl.steps;
      r.measured_pct = sl.mean_pct;
      r.measured_energy_j = m->energy_j;
      r.bound_pct = sl.bound_pct;
      r.accepted = r.measured_pct <= accept_pct && r.bound_pct <= bound_limit_pct;
      if (r.accepted || r.measured_pct > accept_pct || steps == check.max_steps) break;
    }
    return {};
  };
  // The baselines stay those of the first solve: each is what its method reaches at the user's reserve.
  const std::vector<Plan> baselines = out.solution.baselines;
  const PolicyFile first = *pf;
  OptimizeOptions o = options;
  for (int round = 0;; ++round) {
    const Solution& s = out.solution;
    std::vector<int> clocks;
    for (const auto& ap : pf->packs) clocks.push_back(ap.clock_mhz);
    CheckRound r;
    r.plan = s.policy_from;
    r.reserve = o.reserve;
    r.predicted_pct = 100 * (double(s.policy.time_ns) / double(s.default_plan.time_ns) - 1);
    r.predicted_energy_j = s.policy.energy_j;
    if (Status st = measure(r, clocks, {}); !st) return st.error();
    out.rounds.push_back(r);
    if (r.accepted) break;
    // Aim the next plan's true slowdown where this one's plan target was: lower the target by the excess
    // (of the mean over the check's limit, or of the bound over the target).
    const double planned = double(s.plan_target_ns) / double(s.default_plan.time_ns) - 1;
    const double excess = std::max(r.measured_pct - accept_pct, r.bound_pct - bound_limit_pct) / 100;
    const double next = planned - excess - delta * options.reserve / 2;
    if (round >= check.rounds || next <= 0) {
      out.fell_back = true;  // no round passed: the default clocks, unless a baseline passes below
      out.solution.policy = out.solution.default_plan;
      out.solution.policy_from = "default";
      break;
    }
    o.reserve = std::min(0.99, 1 - next / delta);
    auto again = optimize(pr, o);
    if (!again) return again.error();
    out.solution = std::move(*again);
    pf = applied_policy(pr, out.solution, delta);
    if (!pf) return pf.error();
  }
  out.solution.baselines = baselines;
  // Every baseline of the first solve that meets the plan target is checked the same way (cheapest in
  // the models first), and the policy is the plan of least measured energy among those that pass: the
  // kept plan (the default clocks where none passed) or a baseline. So the check cannot hand out a plan
  // that a baseline passing the same check beats on the device.
  double kept_j = out.fell_back ? def->energy_j : out.rounds.back().measured_energy_j;
  // A plan that passes on time but measures more energy than the default clocks saves nothing: the
  // default clocks are kept instead (and the baselines compared with them).
  if (!out.fell_back && !(kept_j < def->energy_j)) {
    out.energy_fell_back = true;
    out.solution.policy = out.solution.default_plan;
    out.solution.policy_from = "default";
    kept_j = def->energy_j;
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < baselines.size(); ++i) {
    if (baselines[i].feasible) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return baselines[a].energy_j < baselines[b].energy_j; });
  for (size_t i : order) {
    const Plan& b = baselines[i];
    const PolicyFile::Baseline* stored = nullptr;
    for (const auto& fb : first.baselines) {
      if (fb.name == b.name) stored = &fb;
    }
    // Nothing to measure: no stored issue times, or the clocks of the default or of the kept plan.
    if (!stored || b.pack_clock_mhz == out.solution.default_plan.pack_clock_mhz ||
        b.pack_clock_mhz == out.solution.policy.pack_clock_mhz) {
      continue;
    }
    CheckRound r;
    r.plan = b.name;
    r.reserve = options.reserve;
    r.predicted_pct = 100 * (double(b.time_ns) / double(out.solution.default_plan.time_ns) - 1);
    r.predicted_energy_j = b.energy_j;
    if (Status st = measure(r, stored->clocks_mhz, stored->issue_at_ns); !st) return st.error();
    out.rounds.push_back(r);
    if (r.accepted && r.measured_energy_j < kept_j) {
      kept_j = r.measured_energy_j;
      out.solution.policy = b;
      out.solution.policy_from = b.name;
      out.fell_back = false;
      out.energy_fell_back = false;
    }
  }
  out.solution.policy.name = "policy";
  return out;
}

}  // namespace emo::optimize
