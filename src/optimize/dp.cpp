// The DP: its inputs (per pack and clock, the time beyond the pack's slack and the energy; the
// clock-switch energy curves), the per-GPU dynamic program over (pack, budget bucket) with and without
// switching costs, and the search of the budget — and then of each GPU's share of it — so that the
// plan's full replay meets the target. See emo/optimize/optimize.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "emo/base/parallel.h"
#include "emo/optimize/optimize.h"
#include "internal.h"

namespace emo::optimize {

using namespace detail;

namespace {

// The budget bucket of an option's cost: 0 for none, past `K` where there is no budget.
int bucket_of(int64_t c, int64_t budget_ns, int K, double unit) {
  return c <= 0 ? 0 : (budget_ns <= 0 ? K + 1 : int(std::ceil(double(c) / unit - 1e-9)));
}

// One pack's options that fit the budget as (bucket cost, option index), Pareto-pruned: ascending cost,
// each cheaper in energy than every option before it.
void pareto_options(const std::vector<Option>& pk, int64_t budget_ns, int K, double unit,
                    std::vector<std::pair<int, size_t>>& opts) {
  opts.clear();
  for (size_t o = 0; o < pk.size(); ++o) {
    const int b = bucket_of(pk[o].cost_ns, budget_ns, K, unit);
    if (b <= K) opts.emplace_back(b, o);
  }
  std::sort(opts.begin(), opts.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : pk[a.second].energy_j < pk[b.second].energy_j;
  });
  size_t kept = 0;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& o : opts) {
    if (pk[o.second].energy_j < best) {
      best = pk[o.second].energy_j;
      opts[kept++] = o;
    }
  }
  opts.resize(kept);
}

}  // namespace

std::vector<int> solve_dp(const std::vector<std::vector<Option>>& packs, int64_t budget_ns, int buckets) {
  const int K = std::max(1, buckets);
  const double unit = budget_ns > 0 ? double(budget_ns) / K : 1.0;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> dp(size_t(K) + 1, 0.0), nx(size_t(K) + 1);
  std::vector<std::vector<uint16_t>> choice(packs.size(), std::vector<uint16_t>(size_t(K) + 1, 0));
  std::vector<std::pair<int, size_t>> opts;  // (bucket cost, option index), Pareto-pruned
  for (size_t p = 0; p < packs.size(); ++p) {
    pareto_options(packs[p], budget_ns, K, unit, opts);
    for (int k = 0; k <= K; ++k) {
      double v = inf;
      uint16_t ch = 0;
      for (const auto& [b, o] : opts) {
        if (b > k) break;
        const double c = dp[size_t(k - b)] + packs[p][o].energy_j;
        if (c < v) {
          v = c;
          ch = uint16_t(o);
        }
      }
      nx[size_t(k)] = v;
      choice[p][size_t(k)] = ch;
    }
    std::swap(dp, nx);
  }
  // Walk back from the full budget.
  std::vector<int> out(packs.size(), 0);
  int k = K;
  for (size_t p = packs.size(); p-- > 0;) {
    const uint16_t o = choice[p][size_t(k)];
    out[p] = o;
    const int64_t c = packs[p][o].cost_ns;
    const int b = c <= 0 ? 0 : int(std::ceil(double(c) / unit - 1e-9));
    k -= std::min(k, b);
  }
  return out;
}

namespace {

// One budget row of the switching DP's distance transform: t[o] = min_a d[a] + |v[a] − v[o]| and a[o]
// the a that attains it, in two sweeps over the options sorted by v (`order`).
void distance_transform(const double* d, const std::vector<double>& v, const std::vector<uint16_t>& order, double* t,
                        uint16_t* a) {
  const size_t C = order.size();
  for (size_t j = 0; j < C; ++j) {
    const uint16_t o = order[j];
    t[o] = d[o];
    a[o] = o;
    if (j > 0) {
      const uint16_t q = order[j - 1];
      const double via = t[q] + (v[o] - v[q]);
      if (via < t[o]) t[o] = via, a[o] = a[q];
    }
  }
  for (size_t j = C - 1; j-- > 0;) {
    const uint16_t o = order[j], q = order[j + 1];
    const double via = t[q] + (v[q] - v[o]);
    if (via < t[o]) t[o] = via, a[o] = a[q];
  }
}

// The DP of one GPU's packs with the clock-switch energy between consecutive packs: state (budget
// bucket, option of the previous pack). `sw_v[i]` (i ≥ 1) is pack i's switching energy curve: switching
// between options a and b before pack i costs |sw_v[i][a] − sw_v[i][b]| (busy power rising with the
// clock makes the higher-minus-lower power difference an L1 distance), so the minimum over the previous
// option is a distance transform, O(options) per bucket. The wrap from the last pack to the first is left
// to the replay and the polish. Every pack has the same number of options.
class SwitchingDp {
 public:
  SwitchingDp(const std::vector<std::vector<Option>>& packs, int64_t budget_ns, int buckets)
      : packs_(packs), m_(packs.size()), C_(packs[0].size()), K_(std::max(1, buckets)), K1_(size_t(K_) + 1),
        budget_ns_(budget_ns), unit_(budget_ns > 0 ? double(budget_ns) / K_ : 1.0) {}

  std::vector<int> solve(const std::vector<std::vector<double>>& sw_v) {
    const double inf = std::numeric_limits<double>::infinity();
    dp_.assign(K1_ * C_, inf);
    nx_.resize(K1_ * C_);
    tr_.resize(K1_ * C_);
    arg_.resize(K1_ * C_);
    choice_.assign(m_ * K1_ * C_, 0);  // previous option
    for (size_t o = 0; o < C_; ++o) {
      const int b = bucket(packs_[0][o].cost_ns);
      for (int k = b; k <= K_; ++k) dp_[size_t(k) * C_ + o] = packs_[0][o].energy_j;
    }
    for (size_t i = 1; i < m_; ++i) step(i, sw_v[i]);
    return walk_back();
  }

 private:
  int bucket(int64_t c) const { return bucket_of(c, budget_ns_, K_, unit_); }

  // Pack i after pack i − 1: tr over the previous budget kk is min_a dp[kk][a] + |v[a] − v[o]| (dp is
  // "at most kk buckets", so non-increasing in kk and so is tr); then nx[k][o] = tr[k − b_o][o] + e_o.
  void step(size_t i, const std::vector<double>& v) {
    std::vector<uint16_t> order(C_);  // options sorted by the switching curve, for the transform
    for (size_t o = 0; o < C_; ++o) order[o] = uint16_t(o);
    std::sort(order.begin(), order.end(), [&](uint16_t a, uint16_t b) { return v[a] < v[b]; });
    std::vector<int> b(C_);
    for (size_t o = 0; o < C_; ++o) b[o] = bucket(packs_[i][o].cost_ns);
    std::fill(nx_.begin(), nx_.end(), std::numeric_limits<double>::infinity());
    for (size_t kk = 0; kk < K1_; ++kk) distance_transform(&dp_[kk * C_], v, order, &tr_[kk * C_], &arg_[kk * C_]);
    for (size_t o = 0; o < C_; ++o) {
      if (b[o] > K_) continue;
      for (size_t k = size_t(b[o]); k < K1_; ++k) {
        const size_t kk = k - size_t(b[o]);
        nx_[k * C_ + o] = tr_[kk * C_ + o] + packs_[i][o].energy_j;
        choice_[(i * K1_ + k) * C_ + o] = arg_[kk * C_ + o];
      }
    }
    std::swap(dp_, nx_);
  }

  // Walk back from the full budget.
  std::vector<int> walk_back() const {
    std::vector<int> out(m_, 0);
    size_t o = 0;
    for (size_t c = 1; c < C_; ++c) {
      if (dp_[size_t(K_) * C_ + c] < dp_[size_t(K_) * C_ + o]) o = c;
    }
    size_t k = size_t(K_);
    for (size_t i = m_; i-- > 0;) {
      out[i] = int(o);
      if (i == 0) break;
      const size_t prev = choice_[(i * K1_ + k) * C_ + o];
      k -= std::min(k, size_t(bucket(packs_[i][o].cost_ns)));
      o = prev;
    }
    return out;
  }

  const std::vector<std::vector<Option>>& packs_;
  const size_t m_, C_;
  const int K_;
  const size_t K1_;
  const int64_t budget_ns_;
  const double unit_;
  std::vector<double> dp_, nx_, tr_;
  std::vector<uint16_t> arg_;
  std::vector<uint16_t> choice_;
};

std::vector<int> solve_dp_switching(const std::vector<std::vector<Option>>& packs,
                                    const std::vector<std::vector<double>>& sw_v, int64_t budget_ns, int buckets) {
  if (packs.empty()) return {};
  return SwitchingDp(packs, budget_ns, buckets).solve(sw_v);
}

// ---- the DP's inputs ----

// Pack slack at the default clock: the least slack of its ops (0 for a pack without ops).
std::vector<int64_t> pack_slack_ns(const Problem& pr, const Prepared& x, const std::vector<int64_t>& dur0,
                                   const replay::Timeline& tl0) {
  std::vector<int64_t> slack;
  replay::Replayer(pr.workload->graph).slack(dur0, tl0, slack);
  return pack_slack_of(*pr.packing, x, slack);
}

}  // namespace

std::vector<int64_t> detail::pack_slack_of(const pack::Packing& p, const Prepared& x, const std::vector<int64_t>& slack) {
  std::vector<int64_t> pack_slack(p.packs.size(), std::numeric_limits<int64_t>::max());
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    for (size_t i = 0; i < p.gpus[gi].ops.size(); ++i) {
      const uint32_t k = x.op_pack[gi][i];
      pack_slack[k] = std::min(pack_slack[k], slack[p.gpus[gi].ops[i]]);
    }
  }
  for (auto& v : pack_slack) v = v == std::numeric_limits<int64_t>::max() ? 0 : v;
  return pack_slack;
}

namespace {

// Every GPU's idle power at the default clock, summed in GPU order.
double idle_all_w_of(const Problem& pr) {
  double idle_all_w = 0;
  for (size_t gi = 0; gi < pr.packing->gpus.size(); ++gi)
    idle_all_w += pr.models->idle_power_w(graph::RankIndex(uint32_t(gi)), pr.default_clock_mhz);
  return idle_all_w;
}

// Options per pack and clock: (time beyond slack, energy + the idle energy every GPU spends while the
// step is that much longer: `idle_all_w`, every GPU's idle power at the default clock).
std::vector<std::vector<Option>> pack_options(const Problem& pr, const Prepared& x,
                                              const std::vector<int64_t>& pack_slack, double idle_all_w) {
  const pack::Packing& p = *pr.packing;
  std::vector<std::vector<Option>> options(p.packs.size());
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    const double t_ref = pack_cost(pr, x, k, pr.default_clock_mhz).first;
    for (int c : x.clocks) {
      // A pack held at the default clock costs the same at every clock: the replay runs it at the default.
      auto [t, e] = pack_cost(pr, x, k, x.held[k] ? pr.default_clock_mhz : c);
      const int64_t ext = int64_t((t - t_ref) * 1e9);
      const int64_t cost = std::max<int64_t>(0, ext - pack_slack[k]);
      options[k].push_back({cost, e + idle_all_w * double(cost) * 1e-9});
    }
  }
  return options;
}

// Clock-switch energy curves (see solve_dp_switching): per pack with atoms and clock, the span power over
// the part of the latency's spread the pack covers. An upper estimate of what the replay's pricing
// (switch_energy_j) charges, the work the spread holds: it keeps the DP from scattering switches, and
// curves of that work (its share at the default clock's span) steered the DP of the built-in example to
// a plan that measured 16.1 % saved where these find one of 17.0 %.
std::vector<std::vector<double>> switch_curves(const Problem& pr, const Prepared& x, double spread_s) {
  const pack::Packing& p = *pr.packing;
  std::vector<std::vector<double>> sw_v(p.packs.size(), std::vector<double>(x.clocks.size(), 0.0));
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    if (x.pack_atoms[k].empty()) continue;
    const double window_s =
        std::min(spread_s, double(std::max<int64_t>(0, p.packs[k].end_ns - p.packs[k].begin_ns)) * 1e-9);
    for (size_t c = 0; c < x.clocks.size(); ++c) {
      const auto [span_s, e] = span_cost(pr, x, k, x.clocks[c]);
      sw_v[k][c] = span_s > 0 ? window_s * e / span_s : 0.0;
    }
  }
  return sw_v;
}

// ---- the budget search ----

// Per GPU DP with budget B; B searched so that the replayed plan meets the target.
class BudgetSearch {
 public:
  BudgetSearch(Search& c, const std::vector<int64_t>& pack_slack, double idle_all_w)
      : c_(c), options_(pack_options(c.pr, c.x, pack_slack, idle_all_w)),
        spread_s_(switch_spread_s(c.pr)), sw_v_(switch_curves(c.pr, c.x, spread_s_)),
        gpu_choice_(c.gpu_packs.size()), full_(c.s.plan_target_ns - c.s.default_plan.time_ns) {}

  void run() {
    const double lo = search_budget();
    // Several GPUs: one budget for all overcommits where their delays add up along the step (a
    // pipeline) and undercommits where they overlap; search each GPU's share with the others fixed.
    if (c_.gpus >= 2 && c_.packs <= 4096 && full_ > 0) search_shares(lo);
  }

 private:
  // The DP's choice (an option per pack) for GPU gi at a budget; it counts switches where its table fits.
  std::vector<int> solve_gpu(size_t gi, int64_t budget) const {
    const auto& ks = c_.gpu_packs[gi];
    std::vector<std::vector<Option>> sub;
    std::vector<std::vector<double>> sub_v;
    for (uint32_t k : ks) sub.push_back(options_[k]), sub_v.push_back(sw_v_[k]);
    const int buckets = c_.opt.budget_buckets;
    const double table = double(ks.size()) * double(std::max(1, buckets) + 1) * double(c_.x.clocks.size());
    return spread_s_ > 0 && table <= 2e7 ? solve_dp_switching(sub, sub_v, budget, buckets)
                                         : solve_dp(sub, budget, buckets);
  }

  // The plan of every GPU's current choice.
  std::vector<int> clocks_of_choice() const {
    std::vector<int> clocks(c_.P, c_.pr.default_clock_mhz);
    for (size_t gi = 0; gi < c_.gpu_packs.size(); ++gi) {
      const auto& ks = c_.gpu_packs[gi];
      for (size_t j = 0; j < ks.size(); ++j) clocks[ks[j]] = c_.x.clocks[size_t(gpu_choice_[gi][j])];
    }
    return clocks;
  }

  // Every GPU's DP at one budget, replayed.
  Plan plan_for(int64_t budget) {
    for (size_t gi = 0; gi < c_.gpu_packs.size(); ++gi) gpu_choice_[gi] = solve_gpu(gi, budget);
    return c_.replay(clocks_of_choice(), "policy");
  }

  // Bisection on the budget as a multiple of the full one; returns the largest multiple found feasible.
  double search_budget() {
    double lo = 0, hi = 1.0;
    Plan at_hi = plan_for(full_);
    if (at_hi.feasible) {
      c_.best = at_hi;
      lo = 1.0;
      hi = 2.0;  // slack estimates are conservative: try more budget
    }
    for (int round = 0; round < c_.opt.search_rounds; ++round) {
      const double mid = (lo + hi) / 2;
      Plan pl = plan_for(int64_t(double(full_) * mid));
      if (pl.feasible) {
        if (pl.energy_j < c_.best.energy_j) c_.best = pl;
        lo = mid;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  // Two passes over the GPUs, each GPU's share tried at several multiples with the others fixed. Past
  // OptimizeOptions::shares_per_gpu_max GPUs, the GPUs of one replica set (the same ops on each stream:
  // data-parallel ranks) share one share, searched together: each pass replays a plan per set and
  // multiple, not per GPU, so the search stops growing as GPUs × the replay of every GPU.
  void search_shares(double lo) {
    // Groups of the step's GPUs (over the parts: every process's, in the same order), then each group's
    // GPUs of this process's (local indexes).
    std::vector<std::vector<size_t>> groups;
    const auto& sets = c_.replica_sets;
    if (c_.gpus > c_.opt.shares_per_gpu_max && sets.size() == c_.gpus) {
      std::map<uint32_t, size_t> group_of;
      for (size_t gi = 0; gi < c_.gpus; ++gi) {
        auto [it, fresh] = group_of.try_emplace(sets[gi], groups.size());
        if (fresh) groups.emplace_back();
        groups[it->second].push_back(gi);
      }
    } else {
      for (size_t gi = 0; gi < c_.gpus; ++gi) groups.push_back({gi});
    }
    for (std::vector<size_t>& g : groups) {
      std::vector<size_t> mine;
      for (size_t gi : g) {
        if (gi >= c_.first_gpu && gi < c_.first_gpu + c_.gpu_packs.size()) mine.push_back(gi - c_.first_gpu);
      }
      g = std::move(mine);
    }
    std::vector<double> share(groups.size(), lo);
    for (size_t gi = 0; gi < c_.gpu_packs.size(); ++gi) gpu_choice_[gi] = solve_gpu(gi, int64_t(double(full_) * lo));
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t g = 0; g < groups.size(); ++g) search_share(groups[g], share[g]);
    }
  }

  // The share of the GPUs `gis` (this process's of the group; over the parts, none where it holds none
  // of them: it replays the group's trials with its own GPUs as they are): the DP at each other multiple
  // (in parallel on a big step), the plans replayed together and the best that saves energy kept.
  void search_share(const std::vector<size_t>& gis, double& share) {
    double best_share = share;
    std::vector<std::vector<int>> best_choice;
    for (size_t gi : gis) best_choice.push_back(gpu_choice_[gi]);
    std::vector<double> fs;
    for (double f : {0.0, 0.125, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0}) {
      if (f != share) fs.push_back(f);
    }
    // choices[j * gis.size() + m]: GPU gis[m]'s DP at multiple fs[j].
    std::vector<std::vector<int>> choices(fs.size() * gis.size()), trials(fs.size());
    auto solve_share = [&](size_t i) {
      choices[i] = solve_gpu(gis[i % gis.size()], int64_t(double(full_) * fs[i / gis.size()]));
    };
    if (c_.parallel) {
      parallel_for(choices.size(), solve_share, c_.threads);
    } else {
      for (size_t i = 0; i < choices.size(); ++i) solve_share(i);
    }
    for (size_t j = 0; j < fs.size(); ++j) {
      for (size_t m = 0; m < gis.size(); ++m) gpu_choice_[gis[m]] = choices[j * gis.size() + m];
      trials[j] = clocks_of_choice();
    }
    std::vector<Plan> plans = c_.check_all(trials, "policy");
    for (size_t j = 0; j < fs.size(); ++j) {
      if (c_.beats_best(plans[j])) {
        c_.best = plans[j];
        best_share = fs[j];
        for (size_t m = 0; m < gis.size(); ++m) best_choice[m] = choices[j * gis.size() + m];
      }
    }
    share = best_share;
    for (size_t m = 0; m < gis.size(); ++m) gpu_choice_[gis[m]] = std::move(best_choice[m]);
  }

  Search& c_;
  const std::vector<std::vector<Option>> options_;
  const double spread_s_;
  const std::vector<std::vector<double>> sw_v_;
  std::vector<std::vector<int>> gpu_choice_;  // per GPU, the DP's choice at a budget
  const int64_t full_;                        // the step's full budget: plan target less the default time
};

}  // namespace

namespace detail {

void dp_search(Search& c, const std::vector<int64_t>& dur0, const replay::Timeline& tl0) {
  BudgetSearch(c, pack_slack_ns(c.pr, c.x, dur0, tl0), idle_all_w_of(c.pr)).run();
}

void dp_search_part(Search& c, std::vector<int64_t> pack_slack, double idle_all_w) {
  BudgetSearch(c, pack_slack, idle_all_w).run();
}

}  // namespace detail

}  // namespace emo::optimize
