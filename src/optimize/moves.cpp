// The search moves that improve the DP's plan by replay: one pack at a time (polish), two packs at once
// (small cases), runs of packs moved to one clock or shifted along their GPU (blocks), and kick and
// repair over every neighbour move. Each accepts only verified plans that save energy (Search::beats_best).
#include <algorithm>

#include "emo/optimize/optimize.h"
#include "internal.h"

namespace emo::optimize::detail {

namespace {

// Of many candidate clocks (81 on an H100), 12 spread over the range and the plan's own clocks with
// their two neighbours on either side.
std::vector<int> neighbour_clocks(const std::vector<int>& base, const std::vector<int>& all_clocks) {
  const size_t nc = all_clocks.size();
  std::vector<char> keep(nc, nc <= 12);
  for (size_t j = 0; j < 12 && nc > 12; ++j) keep[(j * (nc - 1) + 5) / 11] = 1;
  for (size_t i = 0; i < nc; ++i) {
    if (std::find(base.begin(), base.end(), all_clocks[i]) == base.end()) continue;
    for (size_t d = i >= 2 ? i - 2 : 0; d <= i + 2 && d < nc; ++d) keep[d] = 1;
  }
  std::vector<int> clocks;
  for (size_t i = 0; i < nc; ++i) {
    if (keep[i]) clocks.push_back(all_clocks[i]);
  }
  return clocks;
}

// Adds the plans with a run of 1 … m−1 consecutive packs of GPU `ks` (wrapping from its last to its
// first) at one of `clocks`, where that changes `base`.
void add_run_moves(const std::vector<int>& base, const std::vector<uint32_t>& ks, const std::vector<int>& clocks,
                   std::vector<std::vector<int>>& out) {
  const size_t m = ks.size();
  const size_t longest = m <= 1 ? m : m - 1;
  for (size_t len = 1; len <= longest; ++len) {
    for (size_t i = 0; i < m; ++i) {
      for (int c : clocks) {
        std::vector<int> t = base;
        bool changed = false;
        for (size_t j = 0; j < len; ++j) {
          int& v = t[ks[(i + j) % m]];
          changed = changed || v != c;
          v = c;
        }
        if (changed) out.push_back(std::move(t));
      }
    }
  }
}

// Adds the plans with a run of equal clocks of GPU `ks` moved elsewhere on it with any length, what it
// leaves taking the clock before it.
void add_shift_moves(const std::vector<int>& base, const std::vector<uint32_t>& ks, std::vector<std::vector<int>>& out) {
  const size_t m = ks.size();
  for (size_t i = 0; i < m; ++i) {
    const int a = base[ks[i]], before = base[ks[(i + m - 1) % m]];
    if (a == before) continue;
    size_t len = 1;
    while (len < m && base[ks[(i + len) % m]] == a) ++len;
    for (size_t shift = 1; shift < m; ++shift) {
      for (size_t len2 = 1; len2 < m; ++len2) {
        std::vector<int> t = base;
        for (size_t j = 0; j < len; ++j) t[ks[(i + j) % m]] = before;
        for (size_t j = 0; j < len2; ++j) t[ks[(i + shift + j) % m]] = a;
        if (t != base) out.push_back(std::move(t));
      }
    }
  }
}

// Every plan one move away from `base`: one pack at another clock; a run of 2 … m−1 consecutive packs of
// a GPU (wrapping from its last to its first) at one clock; a run of equal clocks moved elsewhere on its
// GPU with any length, what it leaves taking the clock before it. Plans equal to `base` and
// repeats are left out.
std::vector<std::vector<int>> neighbour_moves(const std::vector<int>& base,
                                              const std::vector<std::vector<uint32_t>>& gpu_packs,
                                              const std::vector<int>& all_clocks) {
  const std::vector<int> clocks = neighbour_clocks(base, all_clocks);
  std::vector<std::vector<int>> out;
  for (const auto& ks : gpu_packs) {
    add_run_moves(base, ks, clocks, out);
    add_shift_moves(base, ks, out);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Accepts, in order, every checked plan that beats the best; returns whether one did.
bool accept_in_order(Search& c, std::vector<Plan> plans) {
  bool improved = false;
  for (Plan& pl : plans) {
    if (c.beats_best(pl)) {
      c.best = std::move(pl);
      improved = true;
    }
  }
  return improved;
}

// ---- polish ----

// The trials of pack k at every other clock, while the polish has replays left.
std::vector<std::vector<int>> single_pack_trials(Search& c, uint32_t k) {
  std::vector<std::vector<int>> trials;
  for (int f : c.x.clocks) {
    if (f == c.best.pack_clock_mhz[k] || c.polish_left-- <= 0) continue;
    trials.push_back(c.best.pack_clock_mhz);
    trials.back()[k] = f;
  }
  return trials;
}

// One round of the pair polish: every two packs at every two clocks; returns whether one was accepted.
bool pair_round(Search& c) {
  bool improved = false;
  for (uint32_t k1 = 0; k1 < c.P; ++k1) {
    for (uint32_t k2 = k1 + 1; k2 < c.P; ++k2) {
      for (int c1 : c.x.clocks) {
        for (int c2 : c.x.clocks) {
          if (c1 == c.best.pack_clock_mhz[k1] && c2 == c.best.pack_clock_mhz[k2]) continue;
          std::vector<int> trial = c.best.pack_clock_mhz;
          trial[k1] = c1;
          trial[k2] = c2;
          Plan pl = c.replay(std::move(trial), "policy");
          if (c.beats_best(pl)) {
            c.best = pl;
            improved = true;
          }
        }
      }
    }
  }
  return improved;
}

// ---- blocks ----

// The trials of the run of `len` packs of GPU `ks` from its i-th at each clock (where that changes the
// best), while the block moves have replays left.
std::vector<std::vector<int>> block_trials(Search& c, const std::vector<uint32_t>& ks, size_t len, size_t i) {
  const size_t m = ks.size();
  std::vector<std::vector<int>> trials;
  for (int f : c.x.clocks) {
    std::vector<int> trial = c.best.pack_clock_mhz;
    bool changed = false;
    for (size_t j = 0; j < len; ++j) {
      int& t = trial[ks[(i + j) % m]];
      changed = changed || t != f;
      t = f;
    }
    if (!changed || c.block_left-- <= 0) continue;
    trials.push_back(std::move(trial));
  }
  return trials;
}

// Every run of 2 … m−1 consecutive packs of a GPU at one clock; returns whether one was accepted.
bool block_round(Search& c) {
  bool improved = false;
  for (const auto& ks : c.gpu_packs) {
    const size_t m = ks.size();
    for (size_t len = 2; len < m && c.block_left > 0; ++len) {
      for (size_t i = 0; i < m && c.block_left > 0; ++i) {
        // As in the polish: these trials differ from `best` only inside the block.
        std::vector<std::vector<int>> trials = block_trials(c, ks, len, i);
        if (accept_in_order(c, c.check_all(trials, "policy"))) improved = true;
      }
    }
  }
  return improved;
}

// The run of equal clocks that starts at the i-th pack of GPU `ks` (where the clock changes), shifted by
// 1 … m−1 packs with about its length, what was under it taking the clock before it; returns whether a
// shift was accepted.
bool shift_run(Search& c, const std::vector<uint32_t>& ks, size_t i) {
  const size_t m = ks.size();
  const int a = c.best.pack_clock_mhz[ks[i]], before = c.best.pack_clock_mhz[ks[(i + m - 1) % m]];
  if (a == before) return false;  // runs start where the clock changes
  size_t len = 1;
  while (len < m && c.best.pack_clock_mhz[ks[(i + len) % m]] == a) ++len;
  bool improved = false;
  for (size_t shift = 1; shift < m && c.block_left > 0; ++shift) {
    for (size_t len2 : {len - 1, len, len + 1}) {
      if (len2 == 0 || len2 >= m || c.block_left-- <= 0) continue;
      std::vector<int> trial = c.best.pack_clock_mhz;
      for (size_t j = 0; j < len; ++j) trial[ks[(i + j) % m]] = before;
      for (size_t j = 0; j < len2; ++j) trial[ks[(i + shift + j) % m]] = a;
      if (trial == c.best.pack_clock_mhz) continue;
      Plan pl = c.replay(std::move(trial), "policy");
      if (c.beats_best(pl)) {
        c.best = pl;
        improved = true;
      }
    }
  }
  return improved;
}

// Every run of equal clocks shifted elsewhere on its GPU: where a slower stretch pays depends on the
// other GPUs. Returns whether a shift was accepted.
bool shift_round(Search& c) {
  bool improved = false;
  for (const auto& ks : c.gpu_packs) {
    for (size_t i = 0; i < ks.size() && c.block_left > 0; ++i) {
      if (shift_run(c, ks, i)) improved = true;
    }
  }
  return improved;
}

// ---- kick and repair ----

// The kicks among the checked neighbours `p1` of the best plan: the `kicks_saving` that save the most
// energy per ns they overshoot the target, then the `kicks_shortening` that shorten the step the most
// per joule they cost. `direct` gets a neighbour that meets the target and beats the best (the cheapest),
// if any.
std::vector<size_t> pick_kicks(const Search& c, const std::vector<Plan>& p1, const Plan*& direct) {
  const double over0 = double(c.s.plan_target_ns);
  const Plan& best = c.best;
  std::vector<std::pair<double, size_t>> saving, shortening;
  direct = nullptr;  // one move that pays (one the polish does not try, or after it ran out)
  for (size_t i = 0; i < p1.size(); ++i) {
    const Plan& pl = p1[i];
    if (pl.feasible && pl.energy_j < (direct ? direct->energy_j : best.energy_j * (1 - 1e-9))) direct = &pl;
    if (!pl.feasible && pl.energy_j < best.energy_j) {
      saving.push_back({-(best.energy_j - pl.energy_j) / std::max(1.0, double(pl.time_ns) - over0), i});
    } else if (pl.feasible && pl.time_ns < best.time_ns && pl.energy_j > best.energy_j) {
      shortening.push_back({-double(best.time_ns - pl.time_ns) / (pl.energy_j - best.energy_j), i});
    }
  }
  std::sort(saving.begin(), saving.end());
  std::sort(shortening.begin(), shortening.end());
  std::vector<size_t> kicks;
  for (size_t i = 0; i < saving.size() && i < size_t(c.opt.kicks_saving); ++i) kicks.push_back(saving[i].second);
  for (size_t i = 0; i < shortening.size() && i < size_t(c.opt.kicks_shortening); ++i) kicks.push_back(shortening[i].second);
  return kicks;
}

enum class Repair { kFound, kNone, kOutOfReplays };

// Every move from the kicked plan, replayed; the cheapest that meets the target and beats the best is
// accepted and polished again.
Repair repair(Search& c, const Plan& kicked, int& kick_left) {
  std::vector<std::vector<int>> n2 = neighbour_moves(kicked.pack_clock_mhz, c.gpu_packs, c.x.clocks);
  if (int(n2.size()) > kick_left) return Repair::kOutOfReplays;
  kick_left -= int(n2.size());
  const Plan* found = nullptr;
  std::vector<Plan> p2 = c.check_all(n2, "policy");
  for (const Plan& pl : p2) {
    if (pl.feasible && pl.energy_j < (found ? found->energy_j : c.best.energy_j * (1 - 1e-9))) found = &pl;
  }
  if (!found) return Repair::kNone;
  c.best = *found;
  polish_single(c);
  polish_blocks(c);
  return Repair::kFound;
}

// One round of kick and repair from the best plan; returns whether it improved the best (then another
// round follows).
bool kick_round(Search& c, int& kick_left) {
  std::vector<std::vector<int>> n1 = neighbour_moves(c.best.pack_clock_mhz, c.gpu_packs, c.x.clocks);
  if (int(n1.size()) > kick_left) return false;
  kick_left -= int(n1.size());
  std::vector<Plan> p1 = c.check_all(n1, "policy");
  const Plan* direct = nullptr;
  const std::vector<size_t> kicks = pick_kicks(c, p1, direct);
  if (direct) {
    c.best = *direct;
    return true;
  }
  for (size_t ki : kicks) {
    const Repair r = repair(c, p1[ki], kick_left);
    if (r == Repair::kOutOfReplays) break;
    if (r == Repair::kFound) return true;
  }
  return false;
}

}  // namespace

// Polish by replay: one pack at a time, any clock that lowers the energy and keeps the target (closes
// most of what the DP's slack approximation leaves; bounded by c.polish_left).
void polish_single(Search& c) {
  bool improved = true;
  while (improved && c.polish_left > 0) {
    improved = false;
    for (uint32_t k = 0; k < c.P && c.polish_left > 0; ++k) {
      // The trials of pack k differ from `best` in pack k only, so they do not depend on which of them
      // is accepted: replay them together, accept in clock order.
      std::vector<std::vector<int>> trials = single_pack_trials(c, k);
      if (accept_in_order(c, c.check_all(trials, "policy"))) improved = true;
    }
  }
}

// Small cases: also two packs at once (one faster, one slower trades time between them).
void polish_pairs(Search& c) {
  const double C = double(c.x.clocks.size());
  const double pair_replays = double(c.P) * double(c.P - 1) / 2 * C * C;
  if (!(c.P <= 12 && pair_replays <= 20000)) return;
  bool improved = true;
  for (int pass = 0; improved && pass < 3; ++pass) improved = pair_round(c);
}

// Blocks: a run of consecutive packs of one GPU (wrapping from its last pack to its first) moved to one
// clock together. Clock switches make a single slower pack cost more than it saves where a slower run of
// packs pays. Then runs shifted (shift_round); after a round that improved, the polish again.
void polish_blocks(Search& c) {
  bool improved = true;
  while (improved && c.block_left > 0) {
    improved = block_round(c);
    if (shift_round(c)) improved = true;
    if (improved) polish_single(c);
  }
}

// Kick and repair: a trade between GPUs — one GPU's run made slower while another's is moved or made
// faster — is two moves, each of which alone breaks the target or costs more. Every move of
// neighbour_moves() is replayed from the converged plan; from each kick (pick_kicks) in turn every move is
// replayed again, and the cheapest plan that meets the target and beats the best is kept and polished
// again. Bounded by `kick_replays` (and `kick_point_visits` replayed points).
void kick_and_repair(Search& c) {
  if (c.opt.kick_replays <= 0) return;
  int kick_left = int(std::min<double>(c.opt.kick_replays, c.opt.kick_point_visits / c.points));
  while (kick_round(c, kick_left)) {
  }
}

}  // namespace emo::optimize::detail
