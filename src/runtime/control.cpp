// The runtime's core: program, controller timing, phases and the monitor. See emo/runtime/control.h.
#include "emo/runtime/control.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "policy_json.h"

namespace emo::runtime {

Program program_of(const optimize::PolicyFile& policy, size_t n_ranks) {
  Program p;
  p.default_clock_mhz = policy.default_clock_mhz;
  p.max_slowdown = policy.max_slowdown;
  if (policy.predicted.is_object()) {
    const auto it = policy.predicted.find("policy");
    if (it != policy.predicted.end() && it->is_object() && it->contains("time_us") && (*it)["time_us"].is_number())
      p.predicted_step_ns = (*it)["time_us"].get<double>() * 1e3;
  }
  p.ranks.assign(n_ranks, {});
  for (size_t k = 0; k < policy.packs.size(); ++k) {
    const optimize::AppliedPack& ap = policy.packs[k];
    if (ap.rank.index() >= n_ranks) continue;
    p.ranks[ap.rank.index()].push_back(Change{ap.issue_at_ns, ap.clock_mhz, uint32_t(k)});
  }
  for (auto& r : p.ranks) {
    std::stable_sort(r.begin(), r.end(), [](const Change& a, const Change& b) { return a.issue_at_ns < b.issue_at_ns; });
  }
  return p;
}

Result<Program> program_from_policy(const std::string& text, const std::string& where) {
  using nlohmann::json;
  auto parsed = detail::parse_policy_json(text, where);
  if (!parsed) return parsed.error();
  json j = std::move(*parsed);
  auto number = [&](const json& o, const char* key, double& out) -> Status {
    if (!o.contains(key) || !o[key].is_number()) return make_error(where, std::string("missing or not a number: ") + key);
    out = o[key].get<double>();
    return {};
  };
  Program p;
  double v = 0;
  EMO_RETURN_IF_ERROR(number(j, "default_clock_mhz", v));
  p.default_clock_mhz = int(v);
  EMO_RETURN_IF_ERROR(number(j, "max_slowdown", v));
  p.max_slowdown = v;
  if (p.default_clock_mhz <= 0 || !(p.max_slowdown > 0)) return make_error(where, "default_clock_mhz and max_slowdown must be positive");
  if (j.contains("predicted") && j["predicted"].is_object()) {
    const json& pr = j["predicted"];
    if (pr.contains("policy") && pr["policy"].is_object() && pr["policy"].contains("time_us") && pr["policy"]["time_us"].is_number())
      p.predicted_step_ns = pr["policy"]["time_us"].get<double>() * 1e3;
  }
  size_t n_ranks = 0;
  if (j.contains("ranks") && j["ranks"].is_array()) n_ranks = j["ranks"].size();
  if (!j.contains("packs") || !j["packs"].is_array()) return make_error(where, "no packs array");
  std::vector<std::pair<size_t, Change>> changes;
  for (size_t k = 0; k < j["packs"].size(); ++k) {
    const json& pk = j["packs"][k];
    const std::string at = where + ": packs[" + std::to_string(k) + "]";
    if (!pk.is_object()) return make_error(at, "not an object");
    double rank = 0, clock = 0, issue = 0;
    if (!pk.contains("rank") || !pk["rank"].is_number_integer() || pk["rank"].get<int64_t>() < 0)
      return make_error(at, "rank must be an integer, 0 or more");
    rank = double(pk["rank"].get<int64_t>());
    if (Status st = number(pk, "clock_mhz", clock); !st.ok()) return make_error(at, st.error().what);
    if (Status st = number(pk, "issue_at_us", issue); !st.ok()) return make_error(at, st.error().what);
    if (clock <= 0) return make_error(at, "clock_mhz must be positive");
    changes.emplace_back(size_t(rank), Change{int64_t(std::llround(issue * 1e3)), int(clock), uint32_t(k)});
    n_ranks = std::max(n_ranks, size_t(rank) + 1);
  }
  p.ranks.assign(n_ranks, {});
  for (const auto& [r, c] : changes) p.ranks[r].push_back(c);
  for (auto& r : p.ranks) {
    std::stable_sort(r.begin(), r.end(), [](const Change& a, const Change& b) { return a.issue_at_ns < b.issue_at_ns; });
  }
  return p;
}

// ---- controller ----

std::optional<Issue> Controller::decide(int64_t anchor_ns, const std::vector<Change>& changes, size_t i) {
  const Change& c = changes[i];
  if (c.clock_mhz == requested_) {
    ++redundant_;
    return std::nullopt;
  }
  const int64_t due = anchor_ns + c.issue_at_ns;
  const int64_t at = std::max(busy_until_, due);
  // Superseded: the next change that would really be made is due by the time this one could go.
  size_t j = i + 1;
  while (j < changes.size() && changes[j].clock_mhz == c.clock_mhz) ++j;
  if (j < changes.size() && anchor_ns + changes[j].issue_at_ns <= at) {
    ++superseded_;
    return std::nullopt;
  }
  return Issue{at, c.clock_mhz, c.pack, at - due};
}

void Controller::issued(const Issue& issue, int64_t returned_ns) {
  busy_until_ = std::max(returned_ns, issue.at_ns);
  requested_ = issue.clock_mhz;
}

std::vector<Issue> Controller::plan_step(int64_t anchor_ns, const std::vector<Change>& changes,
                                         const std::function<int64_t(int)>& call_ns) {
  std::vector<Issue> out;
  for (size_t i = 0; i < changes.size(); ++i) {
    auto is = decide(anchor_ns, changes, i);
    if (!is) continue;
    issued(*is, is->at_ns + call_ns(int(out.size())));
    out.push_back(*is);
  }
  return out;
}

// ---- phases ----

Mode planned_mode(const PhaseOptions& o, int step) {
  const int block = step / std::max(1, o.block_steps);
  if (o.verify) return block % 2 == 0 ? Mode::kDefault : Mode::kPolicy;
  if (block < o.reference_blocks) return Mode::kDefault;
  if (o.reference_every > 0 && (block - o.reference_blocks + 1) % o.reference_every == 0) return Mode::kDefault;
  return Mode::kPolicy;
}

int auto_block_steps(double step_ns, double min_window_ns) {
  if (!(step_ns > 0)) return 8;
  const double n = std::ceil(min_window_ns / step_ns);
  return int(std::clamp(n, 4.0, 200.0));
}

// ---- monitor ----

double Accumulator::se() const {
  if (n < 2) return 0;
  const double m = mean();
  const double var = std::max(0.0, (sumsq - double(n) * m * m) / double(n - 1));
  return std::sqrt(var / double(n));
}

PairedRatio paired_ratio(const std::deque<std::pair<Mode, double>>& blocks, bool both_sides) {
  PairedRatio out;
  Accumulator r;
  const size_t n = blocks.size();
  size_t next = 0;  // the first default block after i (n: none)
  std::optional<double> prev;
  for (size_t i = 0; i < n; ++i) {
    const auto& [mode, v] = blocks[i];
    if (mode == Mode::kDefault) {
      prev = v;
      continue;
    }
    if (next <= i) {
      next = i + 1;
      while (next < n && blocks[next].first != Mode::kDefault) ++next;
    }
    if (both_sides && (next >= n || !prev)) continue;
    double ref = 0;
    int refs = 0;
    if (prev && *prev > 0) ref += *prev, ++refs;
    if (next < n && blocks[next].second > 0) ref += blocks[next].second, ++refs;
    if (refs == 0 || !(v > 0)) continue;
    r.add(v / (ref / refs));
  }
  out.n = int(r.n);
  out.ratio = r.mean();
  out.se = r.se();
  return out;
}

Mode Monitor::mode_of(int step) const {
  if (fallback_from_ >= 0 && step >= fallback_from_) return Mode::kDefault;
  return planned_mode(phases_, step);
}

namespace {

// Energy at `t` from one counter's updates, linear between the updates around it; nullopt outside.
std::optional<double> interpolate(const std::deque<std::pair<int64_t, double>>& u, int64_t t) {
  auto it = std::upper_bound(u.begin(), u.end(), t, [](int64_t v, const std::pair<int64_t, double>& x) { return v < x.first; });
  if (it == u.begin() || it == u.end()) return std::nullopt;
  const auto& [t1, e1] = *it;
  const auto& [t0, e0] = *std::prev(it);
  return e0 + (e1 - e0) * double(t - t0) / double(t1 - t0);
}

// r = a / b with standard errors: r and SE(r) by the delta method.
std::pair<double, double> ratio(double a, double se_a, double b, double se_b) {
  if (!(b > 0) || !(a > 0)) return {0, 0};
  const double r = a / b;
  return {r, r * std::sqrt((se_a / a) * (se_a / a) + (se_b / b) * (se_b / b))};
}

size_t side_of(Mode m) { return m == Mode::kPolicy ? 1 : 0; }

}  // namespace

std::optional<double> Monitor::energy_at(int64_t t) const {
  double sum = 0;
  for (const auto& u : updates_) {
    const auto e = interpolate(u, t);
    if (!e) return std::nullopt;
    sum += *e;
  }
  return sum;
}

void Monitor::anchor(int step, int64_t anchor_ns, std::optional<double> energy_j) {
  StepRecord r;
  r.step = step;
  r.mode = mode_of(step);
  r.block = step / std::max(1, phases_.block_steps);
  r.anchor_ns = anchor_ns;
  r.energy_j = energy_j;
  if (have_last_) {
    // Close the step before: measured unless it was a transition (first of its block or after a change of mode).
    const int64_t t = anchor_ns - last_.anchor_ns;
    if (!steps_.empty()) steps_.back().time_ns = t;
    if (last_measured_ && t > 0) {
      sides_[side_of(last_.mode)].time_ns.add(double(t));
      if (!open_.active) open_ = Open{true, last_.mode, last_.anchor_ns, last_.energy_j, 0, 0};
      ++open_.steps;
      open_.time_ns += double(t);
    }
  }
  const bool measured = have_last_ && last_.mode == r.mode && last_.block == r.block;
  if (open_.active && !measured) {  // the block's measured steps end at this anchor
    pending_.push_back(Window{open_.mode, open_.a0, anchor_ns, open_.e0, energy_j, open_.steps});
    block_time_.emplace_back(open_.mode, open_.time_ns / double(open_.steps));
    if (block_time_.size() > kKeptBlocks) block_time_.pop_front();
    if (pending_.size() > kKeptSteps) pending_.pop_front();  // no energy is coming for them
    ++sides_[side_of(open_.mode)].blocks;
    if (open_.mode == Mode::kPolicy || phases_.verify) block_closed_ = true;  // verify: a default block completes a pair
    open_.active = false;
  }
  last_ = r;
  have_last_ = true;
  last_measured_ = measured;
  steps_.push_back(r);
  if (steps_.size() > kKeptSteps) steps_.pop_front();
  ++seen_;
  finalize_windows();
}

void Monitor::counter(size_t gpu, int64_t t_ns, double energy_j) {
  if (updates_.size() <= gpu) updates_.resize(gpu + 1);
  auto& u = updates_[gpu];
  if (!u.empty() && (energy_j == u.back().second || t_ns <= u.back().first)) return;
  u.emplace_back(t_ns, energy_j);
  finalize_windows();
}

void Monitor::finalize_windows() {
  while (!pending_.empty()) {
    const Window& w = pending_.front();
    std::optional<double> e0 = w.e0, e1 = w.e1;
    if (!updates_.empty()) {
      e0 = energy_at(w.a0);
      e1 = energy_at(w.a1);
    }
    if (!e0 || !e1) {
      // Waits for later updates, unless it started before some GPU's first update (never measurable).
      bool waiting = false, hopeless = false;
      for (const auto& u : updates_) {
        if (u.empty()) {
          waiting = true;
        } else if (u.front().first > w.a0) {
          hopeless = true;
        }
      }
      if (updates_.empty() || waiting || !hopeless) break;
    } else if (*e1 > *e0 && w.steps > 0) {
      Side& sd = sides_[side_of(w.mode)];
      const double e = *e1 - *e0;
      sd.window_j_per_step.add(e / w.steps);
      block_energy_.emplace_back(w.mode, e / w.steps);
      if (block_energy_.size() > kKeptBlocks) block_energy_.pop_front();
      sd.window_j += e;
      sd.window_steps += w.steps;
    }
    pending_.pop_front();
  }
  // Updates older than everything still needed go (one before it is kept for the interpolation).
  int64_t keep_from = have_last_ ? last_.anchor_ns : INT64_MIN;
  if (open_.active) keep_from = std::min(keep_from, open_.a0);
  if (!pending_.empty()) keep_from = std::min(keep_from, pending_.front().a0);
  for (auto& u : updates_) {
    while (u.size() > 2 && u[1].first <= keep_from) u.pop_front();
  }
}

std::optional<Fallback> Monitor::check(int next_step) {
  if (fallback_from_ >= 0 || !block_closed_) return std::nullopt;
  block_closed_ = false;
  const Side& d = sides_[0];
  const Side& p = sides_[1];
  if (d.blocks < 2 && phases_.verify) return std::nullopt;
  if (d.time_ns.n < 2 || p.time_ns.n < 2 || p.blocks < 2) return std::nullopt;
  const PairedRatio pr = paired_ratio(block_time_, phases_.verify);
  if (pr.n < 2) return std::nullopt;
  const double slow = pr.ratio - 1, se = pr.se;
  // Over the bound on the mean: dropped now. Within it, but not by 2 SE: dropped once there are
  // kMinPolicySteps measured policy steps in kMinPairs blocks (a few noisy first blocks, whose
  // standard error says little, do not drop a good policy).
  if (slow + 2 * se <= max_slowdown_) return std::nullopt;
  if (slow <= max_slowdown_ && (p.time_ns.n < kMinPolicySteps || pr.n < kMinPairs)) return std::nullopt;
  Fallback f;
  f.step = next_step;
  f.slowdown_pct = 100 * slow;
  f.slowdown_se_pct = 100 * se;
  char buf[160];
  std::snprintf(buf, sizeof buf, "measured slowdown %.2f %% + 2 SE (%.2f %%) is over the bound %.1f %%", 100 * slow,
                200 * se, 100 * max_slowdown_);
  f.reason = buf;
  fallback_from_ = next_step;
  fallbacks_.push_back(f);
  return f;
}

MeasuredReport Monitor::report() const {
  MeasuredReport m;
  auto fill = [](const Side& sd, MeasuredSide& out) {
    out.steps = int(sd.time_ns.n);
    out.time_us = sd.time_ns.mean() / 1e3;
    out.time_se_us = sd.time_ns.se() / 1e3;
    out.energy_windows = int(sd.window_j_per_step.n);
    if (sd.window_steps > 0) {
      out.energy_j = sd.window_j / double(sd.window_steps);
      out.energy_se_j = sd.window_j_per_step.se();
    }
  };
  fill(sides_[0], m.default_side);
  fill(sides_[1], m.policy_side);
  auto [tr, tse] = ratio(m.policy_side.time_us, m.policy_side.time_se_us, m.default_side.time_us,
                         m.default_side.time_se_us);
  // With two policy blocks or more beside default ones, the paired estimate (drift left out).
  if (const PairedRatio pr = paired_ratio(block_time_); pr.n >= 2) {
    tr = pr.ratio;
    tse = pr.se;
  }
  if (tr > 0) {
    m.slowdown_pct = 100 * (tr - 1);
    m.slowdown_se_pct = 100 * tse;
    if (m.policy_side.steps >= 2 && m.default_side.steps >= 2)
      m.slowdown_ci_pct = {m.slowdown_pct - 196 * tse, m.slowdown_pct + 196 * tse};
  }
  auto [er, ese] = ratio(m.policy_side.energy_j, m.policy_side.energy_se_j, m.default_side.energy_j,
                         m.default_side.energy_se_j);
  if (const PairedRatio pr = paired_ratio(block_energy_); pr.n >= 2) {
    er = pr.ratio;
    ese = pr.se;
  }
  if (er > 0) {
    m.saving_pct = 100 * (1 - er);
    m.saving_se_pct = 100 * ese;
    if (m.policy_side.energy_windows >= 2 && m.default_side.energy_windows >= 2)
      m.saving_ci_pct = {m.saving_pct - 196 * ese, m.saving_pct + 196 * ese};
  }
  return m;
}

nlohmann::json measured_json(const MeasuredReport& m) {
  using nlohmann::json;
  auto side_json = [](const MeasuredSide& s) {
    return json{{"steps", s.steps},         {"time_us", s.time_us},   {"time_se_us", s.time_se_us},
                {"energy_j", s.energy_j},   {"energy_se_j", s.energy_se_j}, {"energy_windows", s.energy_windows}};
  };
  json d = side_json(m.default_side);
  json p = side_json(m.policy_side);
  p["slowdown_pct"] = m.slowdown_pct;
  p["slowdown_se_pct"] = m.slowdown_se_pct;
  p["slowdown_ci_pct"] = m.slowdown_ci_pct;
  p["saving_pct"] = m.saving_pct;
  p["saving_se_pct"] = m.saving_se_pct;
  p["saving_ci_pct"] = m.saving_ci_pct;
  return json{{"default", d}, {"policy", p}};
}

}  // namespace emo::runtime
