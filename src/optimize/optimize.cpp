// The optimizer: pack options from the models, the per-GPU DP, the budget search verified by replay,
// the baselines and the exhaustive oracle. See emo/optimize/optimize.h.
#include "emo/optimize/optimize.h"

#include "internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "emo/base/parallel.h"

namespace emo::optimize {

using graph::NodeId;

namespace detail {


namespace {

std::pair<double, double> pack_cost_uncached(const Problem& pr, const Prepared& x, uint32_t k, double f) {
  const pack::PackCost c = pack::predict_pack(*pr.packing, *pr.models, k, f);
  const double gap_s = k < x.gap_after_ns.size() ? double(x.gap_after_ns[k]) * 1e-9 : 0.0;
  return {c.busy_s, c.energy_j + gap_s * pr.models->idle_power_w(pr.packing->packs[k].gpu, f)};
}

}  // namespace

Prepared prepare(const Problem& pr, bool tables) {
  const pack::Packing& p = *pr.packing;
  Prepared x;
  x.op_pack.resize(p.gpus.size());
  x.op_sig.resize(p.gpus.size());
  x.op_pos.resize(p.gpus.size());
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    x.op_pack[gi].assign(p.gpus[gi].ops.size(), 0);
    x.op_sig[gi].assign(p.gpus[gi].ops.size(), 0);
    x.op_pos[gi].assign(p.gpus[gi].ops.size(), 0);
  }
  x.pack_atoms.resize(p.packs.size());
  x.pack_idle_ns.resize(p.packs.size());
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    const pack::Pack& pk = p.packs[k];
    for (uint32_t a = pk.first_atom; a <= pk.last_atom; ++a) {
      const pack::Atom& at = p.atoms[a];
      if (at.first > at.last) continue;
      x.pack_atoms[k].push_back(a);
      for (uint32_t i = at.first; i <= at.last; ++i) {
        x.op_pack[at.gpu][i] = k;
        x.op_sig[at.gpu][i] = at.signature;
        x.op_pos[at.gpu][i] = i - at.first;
      }
    }
    x.pack_idle_ns[k] = (pk.end_ns - pk.begin_ns) - pk.busy_ns;  // negative where its atoms overlap
  }
  const auto& prof = pr.models->profile;
  if (!pr.clocks_mhz.empty()) {
    x.clocks = pr.clocks_mhz;
  } else {
    for (int c : prof.sm_clocks.mhz) {
      if (c >= 0.45 * prof.max_clock_mhz() && c <= pr.default_clock_mhz) x.clocks.push_back(c);
    }
  }
  std::sort(x.clocks.begin(), x.clocks.end());
  {
    replay::Timeline tl0;
    replay::Replayer(pr.workload->graph).run(tl0);
    x.begin0 = tl0.begin_ns;
    x.first_start0.assign(p.packs.size(), 0);
    for (uint32_t k = 0; k < p.packs.size(); ++k) {
      const pack::Pack& pk = p.packs[k];
      if (pk.first_op > pk.last_op) continue;
      x.first_start0[k] = tl0.start(p.gpus[pk.gpu].ops[pk.first_op]);
    }
    // Each pack owns the GPU's time from its start to the next pack's start (the last one: on to the
    // step's end and from the next step's start to the first pack): its span and the gap after it, which
    // runs at the pack's clock. Where a pack's last op overlaps the next pack (another stream), the gap
    // is negative: the overlap is busy in both packs, and the owned times still add up to the step.
    x.gap_after_ns.assign(p.packs.size(), 0);
    x.next_pack.assign(p.packs.size(), graph::kNoId);
    std::vector<uint32_t> first(p.gpus.size(), graph::kNoId), last(p.gpus.size(), graph::kNoId);
    for (uint32_t k = 0; k < p.packs.size(); ++k) {
      const uint32_t gi = p.packs[k].gpu;
      if (first[gi] == graph::kNoId) first[gi] = k;
      if (last[gi] != graph::kNoId) {
        x.next_pack[last[gi]] = k;
        x.gap_after_ns[last[gi]] = p.packs[k].begin_ns - p.packs[last[gi]].end_ns;
      }
      last[gi] = k;
    }
    const int64_t span0 = tl0.makespan_ns();
    for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
      if (last[gi] == graph::kNoId) continue;
      x.next_pack[last[gi]] = first[gi];
      x.gap_after_ns[last[gi]] = (span0 - p.packs[last[gi]].end_ns) + p.packs[first[gi]].begin_ns;
    }
  }
  if (!tables || x.clocks.empty() || x.clocks.front() < 0) return x;
  const size_t C = x.clocks.size();
  x.clock_index.assign(size_t(x.clocks.back()) + 1, -1);
  for (size_t c = 0; c < C; ++c) x.clock_index[size_t(x.clocks[c])] = int(c);
  std::vector<uint32_t> positions(pr.models->signatures.size(), 0);
  for (size_t gi = 0; gi < x.op_sig.size(); ++gi) {
    for (size_t i = 0; i < x.op_sig[gi].size(); ++i) {
      uint32_t& n = positions[x.op_sig[gi][i]];
      n = std::max(n, x.op_pos[gi][i] + 1);
    }
  }
  x.sig_row.assign(positions.size(), 0);
  size_t rows = 0;
  for (size_t sg = 0; sg < positions.size(); ++sg) x.sig_row[sg] = rows, rows += positions[sg];
  x.op_ratio.assign(rows * C, 1.0);
  for (size_t sg = 0; sg < positions.size(); ++sg) {
    for (uint32_t pos = 0; pos < positions[sg]; ++pos) {
      for (size_t c = 0; c < C; ++c)
        x.op_ratio[(x.sig_row[sg] + pos) * C + c] = pr.models->op_time_ratio(uint32_t(sg), pos, x.clocks[c]);
    }
  }
  x.cost.resize(p.packs.size() * C);
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    for (size_t c = 0; c < C; ++c) {
      x.cost[k * C + c] = pack_cost_uncached(pr, x, k, x.clocks[c]);
    }
  }
  return x;
}

// Busy time and energy of one pack at clock f (its idle inside included, at f).
std::pair<double, double> pack_cost(const Problem& pr, const Prepared& x, uint32_t k, double f) {
  const int mhz = int(f);
  if (double(mhz) == f && !x.cost.empty()) {
    if (const int c = x.index_of(mhz); c >= 0) return x.cost[k * x.clocks.size() + size_t(c)];
  }
  return pack_cost_uncached(pr, x, k, f);
}

double switch_spread_s(const Problem& pr) {
  const auto& prof = pr.models->profile;
  return std::max(0.0, prof.switch_latency_p99_ms.value - prof.switch_latency_median_ms.value) * 1e-3;
}

double span_power_w(const Problem& pr, const Prepared& x, uint32_t k, double f) {
  const auto [busy_s, e] = pack_cost(pr, x, k, f);
  const double gap_s = double(x.gap_after_ns[k]) * 1e-9;
  const double idle_s = double(x.pack_idle_ns[k]) * 1e-9;
  const double e_span = e - gap_s * pr.models->idle_power_w(pr.packing->packs[k].gpu, f);
  return busy_s + idle_s > 0 ? e_span / (busy_s + idle_s) : pr.models->idle_power_w(pr.packing->packs[k].gpu, f);
}

double switch_energy_j(const Problem& pr, const Prepared& x, uint32_t j, uint32_t k, int from, int to) {
  if (from == to) return 0;
  const double w = switch_spread_s(pr);
  if (w <= 0) return 0;
  const pack::Packing& p = *pr.packing;
  const uint32_t gpu = p.packs[k].gpu;
  auto span_s = [&](uint32_t q) { return double(std::max<int64_t>(0, p.packs[q].end_ns - p.packs[q].begin_ns)) * 1e-9; };
  auto gap_s = [&](uint32_t q) { return double(std::max<int64_t>(0, x.gap_after_ns[q])) * 1e-9; };
  // At most half of what a pack owns is exposed at each end, so that a short pack between two higher
  // neighbours pays for its owned time once (packs of the default length, a switching latency, own more
  // than twice the spread: there the cap never binds).
  auto exposed_s = [&](uint32_t q) {
    return std::min(w, 0.5 * double(std::max<int64_t>(0, (p.packs[q].end_ns - p.packs[q].begin_ns) + x.gap_after_ns[q])) * 1e-9);
  };
  const double idle_diff = std::abs(pr.models->idle_power_w(gpu, from) - pr.models->idle_power_w(gpu, to));
  if (to > from) {
    // Raised early: the end of what pack j owns, its gap and then its span, runs at k's higher clock.
    const double len = exposed_s(j);
    const double in_gap = std::min(len, gap_s(j));
    const double in_span = std::min(len - in_gap, span_s(j));
    const double d = span_power_w(pr, x, j, to) - span_power_w(pr, x, j, from);
    return in_gap * idle_diff + in_span * std::max(0.0, d);
  }
  // Lowered late: the start of pack k, its span and then its gap, keeps j's higher clock.
  const double len = exposed_s(k);
  const double in_span = std::min(len, span_s(k));
  const double in_gap = std::min(len - in_span, gap_s(k));
  const double d = span_power_w(pr, x, k, from) - span_power_w(pr, x, k, to);
  return in_span * std::max(0.0, d) + in_gap * idle_diff;
}

Plan predict_prepared(const Problem& pr, const Prepared& x, std::vector<int> clocks, std::string name,
                      replay::Timeline* tl_out, std::vector<int64_t>* dur_out) {
  const graph::Graph& g = pr.workload->graph;
  const pack::Packing& p = *pr.packing;
  const pack::PackModels& m = *pr.models;
  // Buffers reused by the replays of one thread (a replay of a big step would otherwise map and fault in
  // megabytes each time).
  thread_local std::vector<int64_t> dur_buf;
  thread_local replay::Timeline tl_buf;
  std::vector<int64_t> dur_own;
  std::vector<int64_t>& dur = dur_out ? dur_own : dur_buf;
  dur.assign(g.dur_ns.begin(), g.dur_ns.end());
  const size_t C = x.clocks.size();
  std::vector<int> pack_ci;  // clock index of each pack in the tables, −1 where it has none
  if (!x.op_ratio.empty()) {
    pack_ci.resize(clocks.size());
    for (size_t k = 0; k < clocks.size(); ++k) pack_ci[k] = x.index_of(clocks[k]);
  }
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    const auto& ops = p.gpus[gi].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const NodeId n = ops[i];
      if (dur[n] <= 0) continue;
      const uint32_t k = x.op_pack[gi][i];
      const int ci = pack_ci.empty() ? -1 : pack_ci[k];
      const double r = ci >= 0 ? x.op_ratio[(x.sig_row[x.op_sig[gi][i]] + x.op_pos[gi][i]) * C + size_t(ci)]
                               : m.op_time_ratio(x.op_sig[gi][i], x.op_pos[gi][i], clocks[k]);
      dur[n] = std::llround(double(dur[n]) * r);
    }
  }
  replay::Replayer rp(g);
  replay::Timeline tl_own;
  replay::Timeline& tl = tl_out ? tl_own : tl_buf;
  rp.run(dur, tl);
  Plan plan;
  plan.name = std::move(name);
  plan.time_ns = tl.makespan_ns();
  // Energy: each pack at its clock, with the idle after it until the next pack (the clock stays set);
  // what is left of the step (a GPU without packs) idles at the default clock.
  std::vector<double> covered_s(p.gpus.size(), 0);
  double e = 0;
  // Where each pack starts in this replay: it moves with its first op.
  auto begin_now = [&](uint32_t k) {
    const pack::Pack& pk = p.packs[k];
    if (pk.first_op > pk.last_op) return pk.begin_ns;
    return pk.begin_ns + (tl.start(p.gpus[pk.gpu].ops[pk.first_op]) - x.first_start0[k]);
  };
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    auto [busy_s, ek] = pack_cost(pr, x, k, clocks[k]);
    double idle_s = double(x.pack_idle_ns[k]) * 1e-9;
    double gap_s = double(x.gap_after_ns[k]) * 1e-9;
    const pack::Pack& pk = p.packs[k];
    if (pr.idle_from_replay && pk.first_op <= pk.last_op) {
      // What the pack's busy time does not fill of the time it owns (to the next pack's start) is idle.
      const int64_t b = begin_now(k);
      const uint32_t nx = x.next_pack[k];
      const int64_t nb = begin_now(nx);
      const int64_t owned_ns = nx > k ? nb - b : (plan.time_ns - b) + nb;  // the last pack: into the next step
      const double idle_now = double(owned_ns) * 1e-9 - busy_s;
      ek += (idle_now - idle_s - gap_s) * m.idle_power_w(pk.gpu, clocks[k]);
      idle_s = idle_now;
      gap_s = 0;
    }
    e += ek;
    covered_s[pk.gpu] += busy_s + idle_s + gap_s;
  }
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    const double rest = std::max(0.0, double(plan.time_ns) * 1e-9 - covered_s[gi]);
    e += rest * m.idle_power_w(uint32_t(gi), pr.default_clock_mhz);
  }
  // Clock changes are issued so that the higher of the two clocks covers the latency's spread
  // (p99 − median; see switch_energy_j), from each GPU's pack to the next and from its last to its first.
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    const uint32_t nx = x.next_pack[k];
    if (nx != graph::kNoId && clocks[nx] != clocks[k]) e += switch_energy_j(pr, x, k, nx, clocks[k], clocks[nx]);
  }
  plan.energy_j = e;
  plan.pack_clock_mhz = std::move(clocks);
  if (tl_out) *tl_out = std::move(tl_own);
  if (dur_out) *dur_out = std::move(dur_own);
  return plan;
}

}  // namespace detail

using namespace detail;

Plan predict(const Problem& problem, std::vector<int> pack_clock_mhz, std::string name) {
  Prepared x = prepare(problem);
  return predict_prepared(problem, x, std::move(pack_clock_mhz), std::move(name));
}

std::vector<int> solve_dp(const std::vector<std::vector<Option>>& packs, int64_t budget_ns, int buckets) {
  const int K = std::max(1, buckets);
  const double unit = budget_ns > 0 ? double(budget_ns) / K : 1.0;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> dp(size_t(K) + 1, 0.0), nx(size_t(K) + 1);
  std::vector<std::vector<uint16_t>> choice(packs.size(), std::vector<uint16_t>(size_t(K) + 1, 0));
  std::vector<std::pair<int, size_t>> opts;  // (bucket cost, option index), Pareto-pruned
  for (size_t p = 0; p < packs.size(); ++p) {
    opts.clear();
    for (size_t o = 0; o < packs[p].size(); ++o) {
      const int64_t c = packs[p][o].cost_ns;
      const int b = c <= 0 ? 0 : (budget_ns <= 0 ? K + 1 : int(std::ceil(double(c) / unit - 1e-9)));
      if (b <= K) opts.emplace_back(b, o);
    }
    std::sort(opts.begin(), opts.end(), [&](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : packs[p][a.second].energy_j < packs[p][b.second].energy_j;
    });
    size_t kept = 0;
    double best = inf;
    for (const auto& o : opts) {
      if (packs[p][o.second].energy_j < best) {
        best = packs[p][o.second].energy_j;
        opts[kept++] = o;
      }
    }
    opts.resize(kept);
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

// Every plan one move away from `base`: one pack at another clock; a run of 2 … m−1 consecutive packs of
// a GPU (wrapping from its last to its first) at one clock; a run of equal clocks moved elsewhere on its
// GPU with any length, what it leaves taking the clock before it. Plans equal to `base` and
// repeats are left out.
std::vector<std::vector<int>> neighbour_moves(const std::vector<int>& base,
                                              const std::vector<std::vector<uint32_t>>& gpu_packs,
                                              const std::vector<int>& all_clocks) {
  // Of many candidate clocks (81 on an H100), 12 spread over the range and the plan's own clocks with
  // their two neighbours on either side.
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
  std::vector<std::vector<int>> out;
  for (size_t gi = 0; gi < gpu_packs.size(); ++gi) {
    const auto& ks = gpu_packs[gi];
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
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The DP of one GPU's packs with the clock-switch energy between consecutive packs: state (budget
// bucket, option of the previous pack). `sw_v[i]` (i ≥ 1) is pack i's switching energy curve: switching
// between options a and b before pack i costs |sw_v[i][a] − sw_v[i][b]| (busy power rising with the
// clock makes the higher-minus-lower power difference an L1 distance), so the minimum over the previous
// option is a distance transform, O(options) per bucket. The wrap from the last pack to the first is left
// to the replay and the polish. Every pack has the same number of options.
std::vector<int> solve_dp_switching(const std::vector<std::vector<Option>>& packs,
                                    const std::vector<std::vector<double>>& sw_v, int64_t budget_ns, int buckets) {
  const size_t m = packs.size();
  if (m == 0) return {};
  const size_t C = packs[0].size();
  const int K = std::max(1, buckets);
  const size_t K1 = size_t(K) + 1;
  const double unit = budget_ns > 0 ? double(budget_ns) / K : 1.0;
  const double inf = std::numeric_limits<double>::infinity();
  auto bucket = [&](int64_t c) { return c <= 0 ? 0 : (budget_ns <= 0 ? K + 1 : int(std::ceil(double(c) / unit - 1e-9))); };
  std::vector<double> dp(K1 * C, inf), nx(K1 * C), tr(K1 * C);
  std::vector<uint16_t> arg(K1 * C);
  std::vector<uint16_t> choice(m * K1 * C, 0);  // previous option
  for (size_t o = 0; o < C; ++o) {
    const int b = bucket(packs[0][o].cost_ns);
    for (int k = b; k <= K; ++k) dp[size_t(k) * C + o] = packs[0][o].energy_j;
  }
  // Options sorted by the switching curve, for the transform.
  std::vector<uint16_t> order(C);
  for (size_t i = 1; i < m; ++i) {
    const auto& v = sw_v[i];
    for (size_t o = 0; o < C; ++o) order[o] = uint16_t(o);
    std::sort(order.begin(), order.end(), [&](uint16_t a, uint16_t b) { return v[a] < v[b]; });
    std::vector<int> b(C);
    for (size_t o = 0; o < C; ++o) b[o] = bucket(packs[i][o].cost_ns);
    std::fill(nx.begin(), nx.end(), inf);
    // tr over the previous budget kk: min_a dp[kk][a] + |v[a] − v[o]| (dp is "at most kk buckets", so
    // non-increasing in kk and so is tr); then nx[k][o] = tr[k − b_o][o] + e_o.
    for (size_t kk = 0; kk < K1; ++kk) {
      const double* d = &dp[kk * C];
      double* t = &tr[kk * C];
      uint16_t* a = &arg[kk * C];
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
    for (size_t o = 0; o < C; ++o) {
      if (b[o] > K) continue;
      for (size_t k = size_t(b[o]); k < K1; ++k) {
        const size_t kk = k - size_t(b[o]);
        nx[k * C + o] = tr[kk * C + o] + packs[i][o].energy_j;
        choice[(i * K1 + k) * C + o] = arg[kk * C + o];
      }
    }
    std::swap(dp, nx);
  }
  // Walk back from the full budget.
  std::vector<int> out(m, 0);
  size_t o = 0;
  for (size_t c = 1; c < C; ++c) {
    if (dp[size_t(K) * C + c] < dp[size_t(K) * C + o]) o = c;
  }
  size_t k = size_t(K);
  for (size_t i = m; i-- > 0;) {
    out[i] = int(o);
    if (i == 0) break;
    const size_t prev = choice[(i * K1 + k) * C + o];
    k -= std::min(k, size_t(bucket(packs[i][o].cost_ns)));
    o = prev;
  }
  return out;
}

}  // namespace

Result<Solution> optimize(const Problem& pr, const OptimizeOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!(opt.max_slowdown >= 0)) return make_error("--max-slowdown", "must be a number >= 0");
  if (!(opt.reserve >= 0 && opt.reserve < 1)) return make_error("--reserve", "must be in [0, 1)");
  const pack::Packing& p = *pr.packing;
  if (p.packs.empty()) return make_error("optimize", "no packs to optimize");
  Prepared x = prepare(pr, true);
  if (x.clocks.empty()) return make_error("optimize", "no candidate clocks");
  Solution s;
  const size_t P = p.packs.size();
  replay::Timeline tl0;
  std::vector<int64_t> dur0;
  s.default_plan = predict_prepared(pr, x, std::vector<int>(P, pr.default_clock_mhz), "default", &tl0, &dur0);
  s.replays = 1;
  s.target_ns = int64_t(std::floor(double(s.default_plan.time_ns) * (1 + opt.max_slowdown)));
  s.plan_target_ns =
      int64_t(std::floor(double(s.default_plan.time_ns) * (1 + opt.max_slowdown * (1 - opt.reserve))));
  s.default_plan.feasible = true;
  auto check = [&](Plan pl) {
    pl.feasible = pl.time_ns <= s.plan_target_ns;
    ++s.replays;
    return pl;
  };
  // Replays of trial plans that do not depend on each other, in order. On a big step (a replay takes
  // milliseconds there) they run on worker threads; the caller then accepts them in order, so the
  // result is the same with any number of threads.
  const bool parallel = pr.workload->graph.num_points() >= opt.parallel_min_points;
  const int threads = opt.threads > 0 ? opt.threads : worker_threads();
  auto check_all = [&](std::vector<std::vector<int>>& trials, const char* name) {
    std::vector<Plan> out(trials.size());
    auto one = [&](size_t i) { out[i] = predict_prepared(pr, x, std::move(trials[i]), name); };
    if (parallel || double(trials.size()) * double(pr.workload->graph.num_points()) >= double(opt.parallel_min_points) * 16) {
      parallel_for(trials.size(), one, threads);
    } else {
      for (size_t i = 0; i < trials.size(); ++i) one(i);
    }
    for (Plan& pl : out) pl = check(std::move(pl));
    return out;
  };

  // Pack slack at the default clock: the least slack of its ops.
  replay::Replayer rp(pr.workload->graph);
  std::vector<int64_t> slack;
  rp.slack(dur0, tl0, slack);
  std::vector<int64_t> pack_slack(P, std::numeric_limits<int64_t>::max());
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    for (size_t i = 0; i < p.gpus[gi].ops.size(); ++i) {
      const uint32_t k = x.op_pack[gi][i];
      pack_slack[k] = std::min(pack_slack[k], slack[p.gpus[gi].ops[i]]);
    }
  }
  for (auto& v : pack_slack) v = v == std::numeric_limits<int64_t>::max() ? 0 : v;

  // Options per pack and clock: (time beyond slack, energy + the idle energy every GPU spends while
  // the step is that much longer).
  double idle_all_w = 0;
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) idle_all_w += pr.models->idle_power_w(uint32_t(gi), pr.default_clock_mhz);
  std::vector<std::vector<Option>> options(P);
  std::vector<std::vector<double>> pack_e(P), pack_t(P);
  for (uint32_t k = 0; k < P; ++k) {
    auto [t_ref, e_ref] = pack_cost(pr, x, k, pr.default_clock_mhz);
    (void)e_ref;
    for (int c : x.clocks) {
      auto [t, e] = pack_cost(pr, x, k, c);
      const int64_t ext = int64_t((t - t_ref) * 1e9);
      const int64_t cost = std::max<int64_t>(0, ext - pack_slack[k]);
      options[k].push_back({cost, e + idle_all_w * double(cost) * 1e-9});
      pack_e[k].push_back(e);
      pack_t[k].push_back(t);
    }
  }
  // Per GPU DP with budget B; search B so that the replayed plan meets the target.
  std::vector<std::vector<uint32_t>> gpu_packs(p.gpus.size());
  for (uint32_t k = 0; k < P; ++k) gpu_packs[p.packs[k].gpu].push_back(k);
  // Clock-switch energy curves (see solve_dp_switching): the DP counts switches where its table fits.
  const double spread_s =
      std::max(0.0, pr.models->profile.switch_latency_p99_ms.value - pr.models->profile.switch_latency_median_ms.value) * 1e-3;
  std::vector<std::vector<double>> sw_v(P, std::vector<double>(x.clocks.size(), 0.0));
  for (uint32_t k = 0; k < P; ++k) {
    if (x.pack_atoms[k].empty()) continue;
    const double window_s =
        std::min(spread_s, double(std::max<int64_t>(0, p.packs[k].end_ns - p.packs[k].begin_ns)) * 1e-9);
    for (size_t c = 0; c < x.clocks.size(); ++c) sw_v[k][c] = window_s * span_power_w(pr, x, k, x.clocks[c]);
  }
  auto solve_gpu = [&](size_t gi, int64_t budget) {
    const auto& ks = gpu_packs[gi];
    std::vector<std::vector<Option>> sub;
    std::vector<std::vector<double>> sub_v;
    for (uint32_t k : ks) sub.push_back(options[k]), sub_v.push_back(sw_v[k]);
    const double table = double(ks.size()) * double(std::max(1, opt.budget_buckets) + 1) * double(x.clocks.size());
    return spread_s > 0 && table <= 2e7 ? solve_dp_switching(sub, sub_v, budget, opt.budget_buckets)
                                        : solve_dp(sub, budget, opt.budget_buckets);
  };
  // Per GPU, the DP's choice at a budget (a share of the step's `full` budget).
  std::vector<std::vector<int>> gpu_choice(p.gpus.size());
  auto clocks_of_choice = [&] {
    std::vector<int> clocks(P, pr.default_clock_mhz);
    for (size_t gi = 0; gi < gpu_packs.size(); ++gi) {
      for (size_t j = 0; j < gpu_packs[gi].size(); ++j) clocks[gpu_packs[gi][j]] = x.clocks[size_t(gpu_choice[gi][j])];
    }
    return clocks;
  };
  auto assemble = [&] { return check(predict_prepared(pr, x, clocks_of_choice(), "policy")); };
  auto plan_for = [&](int64_t budget) {
    for (size_t gi = 0; gi < gpu_packs.size(); ++gi) gpu_choice[gi] = solve_gpu(gi, budget);
    return assemble();
  };
  const int64_t full = s.plan_target_ns - s.default_plan.time_ns;
  Plan best = s.default_plan;
  best.name = "policy";
  double lo = 0, hi = 1.0;
  Plan at_hi = plan_for(full);
  if (at_hi.feasible) {
    best = at_hi;
    lo = 1.0;
    hi = 2.0;  // slack estimates are conservative: try more budget
  }
  for (int round = 0; round < opt.search_rounds; ++round) {
    const double mid = (lo + hi) / 2;
    Plan pl = plan_for(int64_t(double(full) * mid));
    if (pl.feasible) {
      if (pl.energy_j < best.energy_j) best = pl;
      lo = mid;
    } else {
      hi = mid;
    }
  }
  // Several GPUs: one budget for all overcommits where their delays add up along the step (a pipeline)
  // and undercommits where they overlap; search each GPU's share with the others fixed.
  if (gpu_packs.size() >= 2 && P <= 4096 && full > 0) {
    std::vector<double> share(gpu_packs.size(), lo);
    for (size_t gi = 0; gi < gpu_packs.size(); ++gi) gpu_choice[gi] = solve_gpu(gi, int64_t(double(full) * lo));
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t gi = 0; gi < gpu_packs.size(); ++gi) {
        const std::vector<int> keep = gpu_choice[gi];
        double best_share = share[gi];
        std::vector<int> best_choice = keep;
        std::vector<double> fs;
        for (double f : {0.0, 0.125, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0}) {
          if (f != share[gi]) fs.push_back(f);
        }
        std::vector<std::vector<int>> choices(fs.size()), trials(fs.size());
        auto solve_share = [&](size_t j) { choices[j] = solve_gpu(gi, int64_t(double(full) * fs[j])); };
        if (parallel) {
          parallel_for(fs.size(), solve_share, threads);
        } else {
          for (size_t j = 0; j < fs.size(); ++j) solve_share(j);
        }
        for (size_t j = 0; j < fs.size(); ++j) {
          gpu_choice[gi] = choices[j];
          trials[j] = clocks_of_choice();
        }
        std::vector<Plan> plans = check_all(trials, "policy");
        for (size_t j = 0; j < fs.size(); ++j) {
          if (plans[j].feasible && plans[j].energy_j < best.energy_j * (1 - 1e-9)) {
            best = plans[j];
            best_share = fs[j];
            best_choice = choices[j];
          }
        }
        share[gi] = best_share;
        gpu_choice[gi] = best_choice;
      }
    }
  }
  // Polish by replay: one pack at a time, any clock that lowers the energy and keeps the target
  // (closes most of what the DP's slack approximation leaves; bounded by `polish_replays`, and on large
  // graphs by work: at most `polish_point_visits` replayed points in all, but never under 200 replays).
  const double points = std::max<double>(1, double(pr.workload->graph.num_points()));
  int polish_left = int(std::min<double>(opt.polish_replays, std::max(200.0, opt.polish_point_visits / points)));
  auto polish_single = [&] {
    bool any = false, improved = true;
    while (improved && polish_left > 0) {
      improved = false;
      for (uint32_t k = 0; k < P && polish_left > 0; ++k) {
        // The trials of pack k differ from `best` in pack k only, so they do not depend on which of them
        // is accepted: replay them together, accept in clock order.
        std::vector<std::vector<int>> trials;
        for (int c : x.clocks) {
          if (c == best.pack_clock_mhz[k] || polish_left-- <= 0) continue;
          trials.push_back(best.pack_clock_mhz);
          trials.back()[k] = c;
        }
        for (Plan& pl : check_all(trials, "policy")) {
          if (pl.feasible && pl.energy_j < best.energy_j * (1 - 1e-9)) {
            best = std::move(pl);
            improved = any = true;
          }
        }
      }
    }
    return any;
  };
  polish_single();
  // Small cases: also two packs at once (one faster, one slower trades time between them).
  const double pair_replays = double(P) * double(P - 1) / 2 * double(x.clocks.size()) * double(x.clocks.size());
  if (P <= 12 && pair_replays <= 20000) {
    bool improved = true;
    for (int pass = 0; improved && pass < 3; ++pass) {
      improved = false;
      for (uint32_t k1 = 0; k1 < P; ++k1) {
        for (uint32_t k2 = k1 + 1; k2 < P; ++k2) {
          for (int c1 : x.clocks) {
            for (int c2 : x.clocks) {
              if (c1 == best.pack_clock_mhz[k1] && c2 == best.pack_clock_mhz[k2]) continue;
              std::vector<int> trial = best.pack_clock_mhz;
              trial[k1] = c1;
              trial[k2] = c2;
              Plan pl = check(predict_prepared(pr, x, std::move(trial), "policy"));
              if (pl.feasible && pl.energy_j < best.energy_j * (1 - 1e-9)) {
                best = pl;
                improved = true;
              }
            }
          }
        }
      }
    }
  }
  // Blocks: a run of consecutive packs of one GPU (wrapping from its last pack to its first) moved to
  // one clock together. Clock switches make a single slower pack cost more than it saves where a slower
  // run of packs pays; cases of up to 64 packs, bounded by `block_replays`.
  int left = int(std::min<double>(opt.block_replays, std::max(100.0, opt.block_point_visits / points)));
  auto polish_blocks = [&] {
    bool improved = true;
    while (improved && left > 0) {
      improved = false;
      for (const auto& ks : gpu_packs) {
        const size_t m = ks.size();
        for (size_t len = 2; len < m && left > 0; ++len) {
          for (size_t i = 0; i < m && left > 0; ++i) {
            // As in the polish: these trials differ from `best` only inside the block.
            std::vector<std::vector<int>> trials;
            for (int c : x.clocks) {
              std::vector<int> trial = best.pack_clock_mhz;
              bool changed = false;
              for (size_t j = 0; j < len; ++j) {
                int& t = trial[ks[(i + j) % m]];
                changed = changed || t != c;
                t = c;
              }
              if (!changed || left-- <= 0) continue;
              trials.push_back(std::move(trial));
            }
            for (Plan& pl : check_all(trials, "policy")) {
              if (pl.feasible && pl.energy_j < best.energy_j * (1 - 1e-9)) {
                best = std::move(pl);
                improved = true;
              }
            }
          }
        }
      }
      // Shift a run of equal clocks (of about the same length) elsewhere on its GPU, what was under it
      // taking the clock before it: where a slower stretch pays depends on the other GPUs.
      for (const auto& ks : gpu_packs) {
        const size_t m = ks.size();
        for (size_t i = 0; i < m && left > 0; ++i) {
          const int a = best.pack_clock_mhz[ks[i]], before = best.pack_clock_mhz[ks[(i + m - 1) % m]];
          if (a == before) continue;  // runs start where the clock changes
          size_t len = 1;
          while (len < m && best.pack_clock_mhz[ks[(i + len) % m]] == a) ++len;
          for (size_t shift = 1; shift < m && left > 0; ++shift) {
            for (size_t len2 : {len - 1, len, len + 1}) {
              if (len2 == 0 || len2 >= m || left-- <= 0) continue;
              std::vector<int> trial = best.pack_clock_mhz;
              for (size_t j = 0; j < len; ++j) trial[ks[(i + j) % m]] = before;
              for (size_t j = 0; j < len2; ++j) trial[ks[(i + shift + j) % m]] = a;
              if (trial == best.pack_clock_mhz) continue;
              Plan pl = check(predict_prepared(pr, x, std::move(trial), "policy"));
              if (pl.feasible && pl.energy_j < best.energy_j * (1 - 1e-9)) {
                best = pl;
                improved = true;
              }
            }
          }
        }
      }
      if (improved) polish_single();
    }
  };
  if (P <= 64) polish_blocks();
  // Kick and repair (cases of up to 64 packs): a trade between GPUs — one GPU's run made slower while
  // another's is moved or made faster — is two moves, each of which alone breaks the target or costs
  // more. Every move of neighbour_moves() is replayed from the converged plan; the `kicks_saving` that
  // save the most energy per ns they overshoot the target and the `kicks_shortening` that shorten the
  // step the most per joule they cost are the kicks. From each kick in turn every move is replayed
  // again, and the cheapest plan that meets the target and beats the best is kept and polished again.
  // Bounded by `kick_replays` (and `kick_point_visits` replayed points).
  if (P <= 64 && opt.kick_replays > 0) {
    int kick_left = int(std::min<double>(opt.kick_replays, opt.kick_point_visits / points));
    bool improved = true;
    while (improved) {
      improved = false;
      std::vector<std::vector<int>> n1 = neighbour_moves(best.pack_clock_mhz, gpu_packs, x.clocks);
      if (int(n1.size()) > kick_left) break;
      kick_left -= int(n1.size());
      std::vector<Plan> p1 = check_all(n1, "policy");
      const double over0 = double(s.plan_target_ns);
      std::vector<std::pair<double, size_t>> saving, shortening;
      const Plan* direct = nullptr;  // one move that pays (one the polish does not try, or after it ran out)
      for (size_t i = 0; i < p1.size(); ++i) {
        const Plan& pl = p1[i];
        if (pl.feasible && pl.energy_j < (direct ? direct->energy_j : best.energy_j * (1 - 1e-9))) direct = &pl;
        if (!pl.feasible && pl.energy_j < best.energy_j) {
          saving.push_back({-(best.energy_j - pl.energy_j) / std::max(1.0, double(pl.time_ns) - over0), i});
        } else if (pl.feasible && pl.time_ns < best.time_ns && pl.energy_j > best.energy_j) {
          shortening.push_back({-double(best.time_ns - pl.time_ns) / (pl.energy_j - best.energy_j), i});
        }
      }
      if (direct) {
        best = *direct;
        improved = true;
        continue;
      }
      std::sort(saving.begin(), saving.end());
      std::sort(shortening.begin(), shortening.end());
      std::vector<size_t> kicks;
      for (size_t i = 0; i < saving.size() && i < size_t(opt.kicks_saving); ++i) kicks.push_back(saving[i].second);
      for (size_t i = 0; i < shortening.size() && i < size_t(opt.kicks_shortening); ++i) kicks.push_back(shortening[i].second);
      for (size_t ki : kicks) {
        std::vector<std::vector<int>> n2 = neighbour_moves(p1[ki].pack_clock_mhz, gpu_packs, x.clocks);
        if (int(n2.size()) > kick_left) break;
        kick_left -= int(n2.size());
        const Plan* found = nullptr;
        std::vector<Plan> p2 = check_all(n2, "policy");
        for (const Plan& pl : p2) {
          if (pl.feasible && pl.energy_j < (found ? found->energy_j : best.energy_j * (1 - 1e-9))) found = &pl;
        }
        if (found) {
          best = *found;
          improved = true;
          polish_single();
          polish_blocks();
          break;
        }
      }
    }
  }
  s.policy = best;

  // ---- baselines ----
  // Best single static clock for the whole step.
  Plan stat = s.default_plan;
  stat.name = "static_clock";
  {
    std::vector<std::vector<int>> trials;
    for (int c : x.clocks) trials.emplace_back(P, c);
    for (Plan& pl : check_all(trials, "static_clock")) {
      if (pl.feasible && pl.energy_j < stat.energy_j) stat = std::move(pl);
    }
  }
  s.baselines.push_back(stat);
  // Slack-only lowering (EnvPipe's idea): each pack at its lowest-energy clock, then raise the clocks of
  // packs on the critical path one step at a time until the target holds.
  {
    std::vector<size_t> idx(P);
    for (uint32_t k = 0; k < P; ++k) {
      idx[k] = size_t(std::min_element(pack_e[k].begin(), pack_e[k].end()) - pack_e[k].begin());
    }
    Plan pl;
    const size_t top = x.clocks.size() - 1;
    for (size_t it = 0; it <= x.clocks.size() + 1; ++it) {
      std::vector<int> clocks(P);
      for (uint32_t k = 0; k < P; ++k) clocks[k] = x.clocks[idx[k]];
      replay::Timeline tl;
      std::vector<int64_t> dur;
      pl = check(predict_prepared(pr, x, clocks, "slack_only", &tl, &dur));
      if (pl.feasible) break;
      std::vector<int64_t> sl;
      rp.slack(dur, tl, sl);
      bool raised = false;
      std::vector<char> crit(P, 0);
      for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
        for (size_t i = 0; i < p.gpus[gi].ops.size(); ++i) {
          if (sl[p.gpus[gi].ops[i]] <= 1000) crit[x.op_pack[gi][i]] = 1;
        }
      }
      for (uint32_t k = 0; k < P; ++k) {
        if (crit[k] && idx[k] < top) {
          ++idx[k];
          raised = true;
        }
      }
      if (!raised) {  // nothing critical left to raise: raise everything
        for (uint32_t k = 0; k < P; ++k) idx[k] = std::min(top, idx[k] + 1);
      }
    }
    if (!pl.feasible) pl = s.default_plan, pl.name = "slack_only";
    s.baselines.push_back(pl);
  }
  // Per-phase clocks: forward / backward / optimizer / communication, by coordinate descent.
  {
    const graph::Graph& g = pr.workload->graph;
    auto phase_of_name = [](std::string_view nm) {
      std::string s2(nm);
      std::transform(s2.begin(), s2.end(), s2.begin(), [](unsigned char c) { return char(std::tolower(c)); });
      auto has = [&](const char* k) { return s2.find(k) != std::string::npos; };
      if (has("nccl")) return 3;
      if (has("adam") || has("sgd") || has("optim") || has("multi_tensor") || has("foreach")) return 2;
      if (has("backward") || has("bwd") || has("grad") || has("dgrad") || has("wgrad")) return 1;
      return 0;
    };
    std::vector<int> phase(P, 0);
    for (uint32_t k = 0; k < P; ++k) {
      double w[4] = {0, 0, 0, 0};
      const pack::Pack& pk = p.packs[k];
      const auto& ops = p.gpus[pk.gpu].ops;
      for (uint32_t i = pk.first_op; i <= pk.last_op && pk.first_op <= pk.last_op; ++i) {
        w[phase_of_name(g.strings.view(g.name[ops[i]]))] += double(g.dur_ns[ops[i]]);
      }
      phase[k] = int(std::max_element(w, w + 4) - w);
    }
    int phase_clock[4] = {pr.default_clock_mhz, pr.default_clock_mhz, pr.default_clock_mhz, pr.default_clock_mhz};
    auto build = [&](const int* pc) {
      std::vector<int> clocks(P);
      for (uint32_t k = 0; k < P; ++k) clocks[k] = pc[phase[k]];
      return clocks;
    };
    Plan bestp = s.default_plan;
    bestp.name = "per_phase";
    for (int pass = 0; pass < 2; ++pass) {
      for (int ph = 0; ph < 4; ++ph) {
        if (std::find(phase.begin(), phase.end(), ph) == phase.end()) continue;
        // The trials of one phase differ only in that phase's clock: replay them together.
        std::vector<int> tried;
        std::vector<std::vector<int>> trials;
        for (size_t ci = 0; ci < x.clocks.size(); ci += std::max<size_t>(1, x.clocks.size() / 16)) {
          int trial[4] = {phase_clock[0], phase_clock[1], phase_clock[2], phase_clock[3]};
          trial[ph] = x.clocks[ci];
          tried.push_back(trial[ph]);
          trials.push_back(build(trial));
        }
        std::vector<Plan> plans = check_all(trials, "per_phase");
        for (size_t j = 0; j < plans.size(); ++j) {
          if (plans[j].feasible && plans[j].energy_j < bestp.energy_j) {
            bestp = std::move(plans[j]);
            phase_clock[ph] = tried[j];
          }
        }
      }
    }
    s.baselines.push_back(bestp);
  }
  // The policy is the best verified plan: a baseline that the switching costs favour wins over the DP's.
  for (const Plan& b : s.baselines) {
    if (b.feasible && b.energy_j < s.policy.energy_j) {
      s.policy = b;
      s.policy_from = b.name;
    }
  }
  s.policy.name = "policy";
  s.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

Result<Plan> exhaustive(const Problem& pr, double max_slowdown, int64_t max_combinations) {
  Prepared x = prepare(pr);
  const size_t P = pr.packing->packs.size();
  double combos = std::pow(double(x.clocks.size()), double(P));
  if (combos > double(max_combinations))
    return make_error("exhaustive", fmt::format("{} packs × {} clocks is too many combinations", P, x.clocks.size()));
  Plan def = predict_prepared(pr, x, std::vector<int>(P, pr.default_clock_mhz), "default");
  const int64_t target = int64_t(std::floor(double(def.time_ns) * (1 + max_slowdown)));
  Plan best = def;
  best.feasible = true;
  std::vector<size_t> idx(P, 0);
  while (true) {
    std::vector<int> clocks(P);
    for (size_t k = 0; k < P; ++k) clocks[k] = x.clocks[idx[k]];
    Plan pl = predict_prepared(pr, x, clocks, "exhaustive");
    if (pl.time_ns <= target && pl.energy_j < best.energy_j) {
      best = pl;
      best.feasible = true;
    }
    size_t k = 0;
    while (k < P && ++idx[k] == x.clocks.size()) idx[k++] = 0;
    if (k == P) break;
  }
  best.name = "exhaustive";
  return best;
}

}  // namespace emo::optimize
