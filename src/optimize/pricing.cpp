// Pricing a plan: the per-op tables of prepare(), a pack's cost at a clock, the clock-switch energy and
// the full replay of a plan (predict_prepared, and the public predict). Shared by the optimizer, the
// MILP oracle and the policy file (internal.h).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>

#include "emo/dist/dist.h"
#include "emo/optimize/optimize.h"
#include "emo/replay/distributed.h"
#include "internal.h"

namespace emo::optimize {

using graph::NodeId;

namespace detail {

namespace {

std::pair<double, double> pack_cost_uncached(const Problem& pr, const Prepared& x, uint32_t k, double f) {
  const pack::PackCost c = pack::predict_pack(*pr.packing, *pr.models, pack::PackIndex(k), f);
  const double gap_s = k < x.gap_after_ns.size() ? double(x.gap_after_ns[k]) * 1e-9 : 0.0;
  return {c.busy_ns * 1e-9, c.energy_j + gap_s * pr.models->idle_power_w(pr.packing->packs[k].rank, f)};
}

// Per GPU op: its pack, its atom's signature and its position in the atom; per pack: its non-idle atoms
// and the idle inside it at the reference clock.
void map_ops(const pack::Packing& p, Prepared& x) {
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
        x.op_pack[at.rank.index()][i] = k;
        x.op_sig[at.rank.index()][i] = at.signature.value();
        x.op_pos[at.rank.index()][i] = i - at.first;
      }
    }
    x.pack_idle_ns[k] = (pk.end_ns - pk.begin_ns) - pk.busy_ns;  // negative where its atoms overlap
  }
}

// The problem's clocks, or every supported clock from 0.45·f_max (pack::kLowestCandidateFrac) up to the
// default; ascending.
std::vector<int> candidate_clocks(const Problem& pr) {
  std::vector<int> clocks;
  const auto& prof = pr.models->profile;
  if (!pr.clocks_mhz.empty()) {
    clocks = pr.clocks_mhz;
  } else {
    for (int c : prof.sm_clocks.mhz) {
      if (c >= pack::kLowestCandidateFrac * prof.max_clock_mhz() && c <= pr.default_clock_mhz) clocks.push_back(c);
    }
  }
  std::sort(clocks.begin(), clocks.end());
  return clocks;
}

// From the default clocks' replay: where each pack's first op starts, and the time each pack owns after
// its span. Each pack owns the GPU's time from its start to the next pack's start (the last one: on to
// the step's end and from the next step's start to the first pack): its span and the gap after it, which
// runs at the pack's clock. Where a pack's last op overlaps the next pack (another stream), the gap is
// negative: the overlap is busy in both packs, and the owned times still add up to the step.
void owned_gaps(const Problem& pr, Prepared& x, const replay::Timeline& tl0) {
  const pack::Packing& p = *pr.packing;
  x.begin0 = tl0.begin_ns;
  x.first_start0.assign(p.packs.size(), 0);
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    const pack::Pack& pk = p.packs[k];
    if (pk.first_op > pk.last_op) continue;
    x.first_start0[k] = tl0.start(p.gpus[pk.rank.index()].ops[pk.first_op]);
  }
  x.gap_after_ns.assign(p.packs.size(), 0);
  x.next_pack.assign(p.packs.size(), graph::kNoId);
  x.next_wraps.assign(p.packs.size(), 0);
  const int64_t span0 = tl0.makespan_ns();
  auto begin = [&](uint32_t k) { return p.packs[k].begin_ns + (begins_a_period_later(p, k) ? span0 : 0); };
  for (const std::vector<uint32_t>& packs : packs_in_time_order(p)) {
    for (size_t i = 0; i < packs.size(); ++i) {
      const uint32_t k = packs[i];
      const bool last = i + 1 == packs.size();
      const uint32_t nx = packs[last ? 0 : i + 1];
      x.next_pack[k] = nx;
      x.next_wraps[k] = last;
      // What the pack owns (to the next one's begin) less its span.
      x.gap_after_ns[k] = (begin(nx) + (last ? span0 : 0) - begin(k)) - (p.packs[k].end_ns - p.packs[k].begin_ns);
    }
  }
}

// The tables at the candidate clocks: clock index by MHz, op time ratios, pack costs.
void fill_tables(const Problem& pr, Prepared& x) {
  const pack::Packing& p = *pr.packing;
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
        x.op_ratio[(x.sig_row[sg] + pos) * C + c] = pr.models->op_time_ratio(pack::SignatureIndex(uint32_t(sg)), pos, x.clocks[c]);
    }
  }
  x.cost.resize(p.packs.size() * C);
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    for (size_t c = 0; c < C; ++c) {
      x.cost[k * C + c] = pack_cost_uncached(pr, x, k, x.clocks[c]);
    }
  }
}

// Each GPU op's duration in `clocks`' plan: its default duration times its ratio at its pack's clock.
void scale_durations(const Problem& pr, const Prepared& x, const std::vector<int>& clocks,
                     std::vector<int64_t>& dur) {
  const pack::Packing& p = *pr.packing;
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
                               : pr.models->op_time_ratio(pack::SignatureIndex(x.op_sig[gi][i]), x.op_pos[gi][i], clocks[k]);
      dur[n] = std::llround(double(dur[n]) * r);
    }
  }
}

// Where pack k starts in a replay: it moves with its first op.
int64_t begin_in(const pack::Packing& p, const Prepared& x, const replay::Timeline& tl, uint32_t k) {
  const pack::Pack& pk = p.packs[k];
  if (pk.first_op > pk.last_op) return pk.begin_ns;
  return pk.begin_ns + (tl.start(p.gpus[pk.rank.index()].ops[pk.first_op]) - x.first_start0[k]);
}

}  // namespace

std::vector<std::vector<uint32_t>> packs_in_time_order(const pack::Packing& p) {
  std::vector<std::vector<uint32_t>> out(p.gpus.size()), later(p.gpus.size());
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    (begins_a_period_later(p, k) ? later : out)[p.packs[k].rank.index()].push_back(k);
  }
  for (size_t gi = 0; gi < out.size(); ++gi) {
    for (uint32_t k : later[gi]) {
      const int64_t at = p.packs[k].begin_ns + p.step_ns;
      auto it = std::find_if(out[gi].begin(), out[gi].end(), [&](uint32_t j) { return p.packs[j].begin_ns > at; });
      out[gi].insert(it, k);
    }
  }
  return out;
}

namespace {

// Adds to `e` (per GPU) each pack's energy at its clock, with the idle after it until the next pack (the
// clock stays set); `covered_s` gets the time each GPU's packs own.
void add_pack_energy(const Problem& pr, const Prepared& x, const std::vector<int>& clocks,
                     const replay::Timeline& tl, int64_t time_ns, std::vector<double>& e, std::vector<double>& covered_s) {
  const pack::Packing& p = *pr.packing;
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    auto [busy_s, ek] = pack_cost(pr, x, k, clocks[k]);
    double idle_s = double(x.pack_idle_ns[k]) * 1e-9;
    double gap_s = double(x.gap_after_ns[k]) * 1e-9;
    const pack::Pack& pk = p.packs[k];
    if (pr.idle_from_replay && pk.first_op <= pk.last_op) {
      // What the pack's busy time does not fill of the time it owns (to the next pack's start) is idle.
      auto begin = [&](uint32_t q) { return begin_in(p, x, tl, q) + (begins_a_period_later(p, q) ? time_ns : 0); };
      const uint32_t nx = x.next_pack[k];
      // The last pack: into the next step.
      const int64_t owned_ns = begin(nx) + (x.next_wraps[k] ? time_ns : 0) - begin(k);
      const double idle_now = double(owned_ns) * 1e-9 - busy_s;
      ek += (idle_now - idle_s - gap_s) * pr.models->idle_power_w(pk.rank, clocks[k]);
      idle_s = idle_now;
      gap_s = 0;
    }
    e[pk.rank.index()] += ek;
    covered_s[pk.rank.index()] += busy_s + idle_s + gap_s;
  }
}

// Step energy of each GPU in a plan replayed to `tl`: its packs, what is left of the step (a GPU without
// packs) idling at the default clock, and its clock changes. The step's is their sum in GPU order (so that
// processes holding some GPUs each add up to the same).
std::vector<double> gpu_energy(const Problem& pr, const Prepared& x, const std::vector<int>& clocks,
                               const replay::Timeline& tl, int64_t time_ns) {
  const pack::Packing& p = *pr.packing;
  std::vector<double> covered_s(p.gpus.size(), 0);
  std::vector<double> e(p.gpus.size(), 0.0);
  add_pack_energy(pr, x, clocks, tl, time_ns, e, covered_s);
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    const double rest = std::max(0.0, double(time_ns) * 1e-9 - covered_s[gi]);
    e[gi] += rest * pr.models->idle_power_w(graph::RankIndex(uint32_t(gi)), pr.default_clock_mhz);
  }
  // Clock changes are issued so that the higher of the two clocks covers the latency's spread
  // (p99 − median; see switch_energy_j), from each GPU's pack to the next and from its last to its first.
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    const uint32_t nx = x.next_pack[k];
    if (nx != graph::kNoId && clocks[nx] != clocks[k])
      e[p.packs[k].rank.index()] += switch_energy_j(pr, x, k, nx, clocks[k], clocks[nx]);
  }
  return e;
}

double plan_energy(const Problem& pr, const Prepared& x, const std::vector<int>& clocks, const replay::Timeline& tl,
                   int64_t time_ns) {
  double e = 0;
  for (double eg : gpu_energy(pr, x, clocks, tl, time_ns)) e += eg;
  return e;
}

}  // namespace

Prepared prepare(const Problem& pr, bool tables) {
  Prepared x;
  x.rereplay = std::make_shared<const replay::Rereplayer>(pr.workload->graph);
  x.replays = std::make_shared<ReplayCache>();
  map_ops(*pr.packing, x);
  x.clocks = candidate_clocks(pr);
  x.held.assign(pr.packing->packs.size(), 0);
  for (pack::PackIndex k : pack::packs_held_at_default(*pr.packing, *pr.models)) x.held[k.index()] = 1;
  replay::Timeline tl0;
  replay::Replayer(pr.workload->graph).run(tl0);
  owned_gaps(pr, x, tl0);
  if (!tables || x.clocks.empty() || x.clocks.front() < 0) return x;
  fill_tables(pr, x);
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

std::pair<double, double> span_cost(const Problem& pr, const Prepared& x, uint32_t k, double f) {
  const auto [busy_s, e] = pack_cost(pr, x, k, f);
  const double gap_s = double(x.gap_after_ns[k]) * 1e-9;
  const double idle_s = double(x.pack_idle_ns[k]) * 1e-9;
  return {busy_s + idle_s, e - gap_s * pr.models->idle_power_w(pr.packing->packs[k].rank, f)};
}

double switch_energy_j(const Problem& pr, const Prepared& x, uint32_t j, uint32_t k, int from, int to) {
  if (from == to) return 0;
  const double w = switch_spread_s(pr);
  if (w <= 0) return 0;
  const pack::Packing& p = *pr.packing;
  const graph::RankIndex gpu = p.packs[k].rank;
  auto span_s = [&](uint32_t q) { return double(std::max<int64_t>(0, p.packs[q].end_ns - p.packs[q].begin_ns)) * 1e-9; };
  auto gap_s = [&](uint32_t q) { return double(std::max<int64_t>(0, x.gap_after_ns[q])) * 1e-9; };
  // At most half of what a pack owns is exposed at each end, so that a short pack between two higher
  // neighbours pays for its owned time once (packs of the default length, a switching latency, own more
  // than twice the spread: there the cap never binds).
  auto exposed_s = [&](uint32_t q) {
    return std::min(w, 0.5 * double(std::max<int64_t>(0, (p.packs[q].end_ns - p.packs[q].begin_ns) + x.gap_after_ns[q])) * 1e-9);
  };
  const double idle_diff = std::abs(pr.models->idle_power_w(gpu, from) - pr.models->idle_power_w(gpu, to));
  // `window_s` of pack q's span run at clock `at` where the plan has `planned`: that part of the pack's
  // work, done at `at`, against the same work at `planned`. The work is what the window holds at `at`
  // (a raised clock gets through more of it in the window), so the energy is that share of the span's
  // energy at each clock, not the window's length at each clock's power; the time the work takes less
  // at `at` is idle at k's clock (a slip costs no time in the plan's replay: the step keeps its length).
  const double idle_to_w = pr.models->idle_power_w(gpu, to);
  auto slipped_work_j = [&](uint32_t q, double window_s, double at, double planned) {
    const auto [span_at, e_at] = span_cost(pr, x, q, at);
    if (window_s <= 0 || span_at <= 0) return 0.0;
    const double share = std::min(1.0, window_s / span_at);
    const auto [span_planned, e_planned] = span_cost(pr, x, q, planned);
    return share * ((e_at - e_planned) + (span_planned - span_at) * idle_to_w);
  };
  if (to > from) {
    // Raised early: the end of what pack j owns, its gap and then its span, runs at k's higher clock.
    const double len = exposed_s(j);
    const double in_gap = std::min(len, gap_s(j));
    const double in_span = std::min(len - in_gap, span_s(j));
    return in_gap * idle_diff + std::max(0.0, slipped_work_j(j, in_span, to, from));
  }
  // Lowered late: the start of pack k, its span and then its gap, keeps j's higher clock.
  const double len = exposed_s(k);
  const double in_span = std::min(len, span_s(k));
  const double in_gap = std::min(len - in_span, gap_s(k));
  return std::max(0.0, slipped_work_j(k, in_span, from, to)) + in_gap * idle_diff;
}

Plan predict_prepared(const Problem& pr, const Prepared& x, std::vector<int> clocks, std::string name,
                      replay::Timeline* tl_out, std::vector<int64_t>* dur_out) {
  const graph::Graph& g = pr.workload->graph;
  for (size_t k = 0; k < clocks.size() && k < x.held.size(); ++k) {
    if (x.held[k]) clocks[k] = pr.default_clock_mhz;
  }
  // A recent replay of this problem (its buffers too: a replay of a big step would otherwise map and
  // fault in megabytes each time), replayed forward to this plan only where it moves.
  std::unique_ptr<ReplayState> st;
  if (x.replays) {
    std::lock_guard<std::mutex> lock(x.replays->m);
    if (!x.replays->idle.empty()) {
      st = std::move(x.replays->idle.back());
      x.replays->idle.pop_back();
    }
  }
  if (!st) st = std::make_unique<ReplayState>();
  std::vector<int64_t>& dur = st->scratch;
  dur.assign(g.dur_ns.begin(), g.dur_ns.end());
  scale_durations(pr, x, clocks, dur);
  if (x.rereplay && st->valid) {
    x.rereplay->update(st->dur, dur, st->tl);
  } else {
    replay::Replayer(g).run(dur, st->tl);
    st->valid = x.rereplay != nullptr;
  }
  st->dur.swap(dur);
  const replay::Timeline& tl = st->tl;
  if (dur_out) *dur_out = st->dur;
  Plan plan;
  plan.name = std::move(name);
  plan.time_ns = tl.makespan_ns();
  plan.energy_j = plan_energy(pr, x, clocks, tl, plan.time_ns);
  plan.pack_clock_mhz = std::move(clocks);
  if (tl_out) *tl_out = tl;
  if (x.replays) {
    std::lock_guard<std::mutex> lock(x.replays->m);
    x.replays->idle.push_back(std::move(st));
  }
  return plan;
}

}  // namespace detail

Plan predict(const Problem& problem, std::vector<int> pack_clock_mhz, std::string name) {
  detail::Prepared x = detail::prepare(problem);
  return detail::predict_prepared(problem, x, std::move(pack_clock_mhz), std::move(name));
}

namespace detail {

replay::Timeline timeline_of(const replay::ShardTimeline& st) {
  replay::Timeline tl;
  tl.t_ns = st.t_ns;
  tl.begin_ns = st.begin_ns;
  tl.end_ns = st.end_ns;
  tl.last_point = st.last_point;
  return tl;
}

namespace {
// PartPricer's messages: whether every process's problem fits its part; every GPU's energy (or whether a
// process's clocks do not fit its packs).
constexpr int kTagPricerStatus = 47, kTagPlanEnergy = 49;
}  // namespace

PartPricer::PartPricer(const Problem& problem, const graph::GraphPart& part, dist::Comm& comm, bool tables)
    : pr_(problem), part_(part), comm_(comm), shard_(replay::make_shard(part)) {
  const pack::Packing& p = *pr_.packing;
  if (p.gpus.size() != part.graph.num_ranks() || pr_.models->gpus.size() != p.gpus.size()) {
    status_ = make_error("plan", fmt::format("process {}'s packs or models are not its part's GPUs", comm.rank()));
  }
  status_ = dist::first_error(comm, kTagPricerStatus, status_);
  if (!status_.ok()) return;
  map_ops(p, x_);
  x_.clocks = candidate_clocks(pr_);
  x_.held.assign(p.packs.size(), 0);
  for (pack::PackIndex k : pack::packs_held_at_default(p, *pr_.models)) x_.held[k.index()] = 1;
  // What the packs own: from the graph's replay (the default clocks' before the models scale it), as
  // prepare() takes it.
  replay::ShardTimeline st0;
  status_ = replay::run_distributed(shard_, {}, comm, st0);
  if (!status_.ok()) return;
  owned_gaps(pr_, x_, timeline_of(st0));
  if (tables && !x_.clocks.empty() && x_.clocks.front() >= 0) fill_tables(pr_, x_);
}

Result<Plan> PartPricer::price(std::vector<int> clocks, std::string name, replay::ShardTimeline* tl_out,
                               std::vector<int64_t>* dur_out) {
  std::vector<std::vector<int>> one{std::move(clocks)};
  std::vector<replay::ShardTimeline> tls;
  std::vector<std::vector<int64_t>> durs;
  auto plans = price_all(one, name, &tls, &durs);
  if (!plans) return plans.error();
  if (tl_out) {
    *tl_out = std::move(tls.front());
    tl_out->order = order_;
    tl_out->order_of = order_of_;
  }
  if (dur_out) *dur_out = std::move(durs.front());
  return std::move(plans->front());
}

Result<std::vector<Plan>> PartPricer::price_all(std::vector<std::vector<int>>& plans, const std::string& name,
                                                std::vector<replay::ShardTimeline>* tls_out,
                                                std::vector<std::vector<int64_t>>* durs_out) {
  EMO_RETURN_IF_ERROR(status_);
  const pack::Packing& p = *pr_.packing;
  // Clocks that do not fit this process's packs: their replay runs the recorded durations (every process
  // stays in step) and the energy exchange below carries the error, not its GPUs' energy.
  std::optional<size_t> unfit;
  std::vector<std::vector<int64_t>> durs(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    std::vector<int>& clocks = plans[i];
    durs[i].assign(part_.graph.dur_ns.begin(), part_.graph.dur_ns.end());
    if (clocks.size() != p.packs.size()) {
      if (!unfit) unfit = clocks.size();
      continue;
    }
    for (size_t k = 0; k < clocks.size(); ++k) {
      if (x_.held[k]) clocks[k] = pr_.default_clock_mhz;
    }
    scale_durations(pr_, x_, clocks, durs[i]);
  }
  std::vector<replay::ShardTimeline> tls;
  EMO_RETURN_IF_ERROR(replay::run_distributed_batch(shard_, durs, comm_, order_, order_of_, tls));
  // Every plan's GPUs' energy, added up in rank order (as plan_energy() of the whole step does), to every
  // process; or the first process's clocks that did not fit: [1, its clocks, its packs].
  std::vector<int64_t> mine{0};
  if (unfit) {
    mine = {1, int64_t(*unfit), int64_t(p.packs.size())};
  } else {
    for (size_t i = 0; i < plans.size(); ++i) {
      replay::Timeline tl;
      tl.t_ns = std::move(tls[i].t_ns);
      tl.begin_ns = tls[i].begin_ns;
      tl.end_ns = tls[i].end_ns;
      tl.last_point = tls[i].last_point;
      for (double e : gpu_energy(pr_, x_, plans[i], tl, tls[i].makespan_ns())) mine.push_back(std::bit_cast<int64_t>(e));
      tls[i].t_ns = std::move(tl.t_ns);
    }
  }
  const size_t n = plans.size();
  auto sums = dist::all_combine(comm_, kTagPlanEnergy, mine, [n](const std::vector<std::vector<int64_t>>& parts) {
    std::vector<double> energy(n, 0.0);
    for (size_t q = 0; q < parts.size(); ++q) {
      const std::vector<int64_t>& v = parts[q];
      if (v.empty() || v[0] != 0 || (v.size() - 1) % std::max<size_t>(1, n) != 0) {
        std::vector<int64_t> bad{1, int64_t(q)};
        if (v.size() == 3 && v[0] == 1) bad.insert(bad.end(), v.begin() + 1, v.end());
        return bad;
      }
      const size_t gpus = n == 0 ? 0 : (v.size() - 1) / n;
      for (size_t i = 0; i < n; ++i) {
        for (size_t g = 0; g < gpus; ++g) energy[i] += std::bit_cast<double>(v[1 + i * gpus + g]);
      }
    }
    std::vector<int64_t> out{0};
    for (double e : energy) out.push_back(std::bit_cast<int64_t>(e));
    return out;
  });
  if (!sums) return make_error("plan", "the GPUs' energy: " + sums.error().message());
  if (sums->size() == 4 && (*sums)[0] == 1) {
    return make_error("plan", fmt::format("{} clock(s) for the {} pack(s) of process {}'s GPUs", (*sums)[2], (*sums)[3],
                                          (*sums)[1]));
  }
  if (sums->size() != n + 1 || (*sums)[0] != 0) return make_error("plan", "the GPUs' energy came back cut short");
  std::vector<Plan> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].name = name;
    out[i].time_ns = tls[i].makespan_ns();
    out[i].energy_j = std::bit_cast<double>((*sums)[1 + i]);
    out[i].pack_clock_mhz = std::move(plans[i]);
  }
  if (tls_out) *tls_out = std::move(tls);
  if (durs_out) *durs_out = std::move(durs);
  return out;
}

}  // namespace detail

Result<Plan> predict_part(const Problem& pr, const graph::GraphPart& part, std::vector<int> clocks, dist::Comm& comm,
                          std::string name) {
  detail::PartPricer pricer(pr, part, comm);
  return pricer.price(std::move(clocks), std::move(name));
}

}  // namespace emo::optimize
