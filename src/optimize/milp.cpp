// The MILP oracle (see emo/optimize/milp.h). The replay's DAG of points is first reduced exactly: a
// point whose time is one dependency's time plus a constant (one in-edge, or a fixed duration after a
// start fixed by one in-edge) is an alias of that point, and a point that depends only on fixed times is
// a constant; only points where a max is taken over several terms, or a GPU op's clock-dependent
// duration is added, get a time variable. Times are in ns from the step's first start.
#include "emo/optimize/milp.h"

#include <fmt/format.h>
#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "internal.h"

namespace emo::optimize {

using namespace detail;
using graph::NodeId;
using graph::PointId;

namespace {

using Terms = std::vector<std::pair<int, int64_t>>;  // (column or 0, offset ns)
using Row = std::vector<std::pair<int, double>>;     // (column, coefficient)

// A point's time: column `col` (0: none) plus `off` ns.
struct Rep {
  int col = 0;
  int64_t off = 0;
};

struct Lp {
  std::vector<double> cost, col_lb, col_ub;
  std::vector<int> col_type;
  std::vector<bool> binary;
  std::vector<int> row_type;
  std::vector<double> row_lb, row_ub;
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0.0};

  int add_col(int type, double lb, double ub, double c, bool bin = false) {
    col_type.push_back(type);
    col_lb.push_back(lb);
    col_ub.push_back(ub);
    cost.push_back(c);
    binary.push_back(bin);
    return int(cost.size());
  }
  void add_row(const Row& terms, int type, double lb, double ub = 0) {
    row_type.push_back(type);
    row_lb.push_back(lb);
    row_ub.push_back(ub);
    const int r = int(row_type.size());
    for (const auto& [c, v] : terms) {
      if (v == 0) continue;
      ia.push_back(r);
      ja.push_back(c);
      ar.push_back(v);
    }
  }
};

struct NodeLimit {
  int64_t limit = 0;
  int64_t count = 0;
  bool hit = false;
};

void on_tree(glp_tree* tree, void* info) {
  auto* nl = static_cast<NodeLimit*>(info);
  if (glp_ios_reason(tree) != GLP_IPREPRO) return;
  if (++nl->count > nl->limit) {
    nl->hit = true;
    glp_ios_terminate(tree);
  }
}

struct GlpProb {
  glp_prob* p = glp_create_prob();
  GlpProb() = default;
  GlpProb(const GlpProb&) = delete;
  GlpProb& operator=(const GlpProb&) = delete;
  ~GlpProb() { glp_delete_prob(p); }
};

// What the steps below share: the problem, its tables, the default plan and the target, the reduced
// times of the points, and the MILP being written.
struct Oracle {
  const Problem& pr;
  const pack::Packing& p;
  const graph::Graph& g;
  const pack::PackModels& m;
  Prepared x;
  size_t P = 0, C = 0, N = 0;  // packs, candidate clocks, nodes
  Plan def;                    // the all-default plan (it always meets the target)
  int64_t target = 0;          // the makespan bound (ns)
  int64_t begin = 0;           // the step's earliest anchored start (ns)
  // Clock-dependent durations: per GPU op with a positive duration, its pack and the duration per clock.
  std::vector<uint32_t> var_pack;
  std::vector<std::vector<int64_t>> var_dur;
  std::vector<std::pair<double, double>> cost_kc;  // per (pack, clock): busy s, energy J
  std::vector<Rep> rep;                            // per point: its time
  double m_lb = 0;                                 // the makespan's constant lower bound
  Terms sinks;                                     // the sinks' times that depend on columns
  int mcol = 0;                                    // the makespan column
  Lp lp;

  explicit Oracle(const Problem& problem)
      : pr(problem),
        p(*problem.packing),
        g(problem.workload->graph),
        m(*problem.models),
        x(prepare(problem)) {}
  // x[k,c]: columns 1 .. P·C.
  int xcol(size_t k, size_t c) const { return int(k * C + c + 1); }
};

// The checks that need nothing prepared.
Status check_problem(const Problem& pr, double max_slowdown) {
  if (max_slowdown < 0) return make_error("milp", "max_slowdown must not be negative");
  if (pr.idle_from_replay)
    return make_error("milp", "the MILP models idle inside packs as measured",
                      "set Problem::idle_from_replay = false (and compare the DP on that same problem)");
  if (pr.packing->packs.empty()) return make_error("milp", "no packs to optimize");
  return {};
}

// The sizes, the default plan and the makespan target.
Status set_target(Oracle& o, double max_slowdown) {
  if (o.x.clocks.empty()) return make_error("milp", "no candidate clocks");
  o.P = o.p.packs.size();
  o.C = o.x.clocks.size();
  o.def = predict_prepared(o.pr, o.x, std::vector<int>(o.P, o.pr.default_clock_mhz), "default");
  o.def.feasible = true;
  o.target = int64_t(std::floor(double(o.def.time_ns) * (1 + max_slowdown)));
  return {};
}

// With no negative latency or duration every point is at or after some anchored start, so the step
// begins at the earliest anchor whatever the clocks are.
Status find_begin(Oracle& o) {
  const graph::Graph& g = o.g;
  o.N = g.num_nodes();
  for (const graph::Edge& e : g.edges) {
    if (e.lat_ns < 0) return make_error("milp", "the graph has a negative latency");
  }
  for (NodeId n = 0; n < o.N; ++n) {
    if (g.dur_ns[n] < 0) return make_error("milp", "the graph has a negative duration");
  }
  o.begin = std::numeric_limits<int64_t>::max();
  for (NodeId n = 0; n < o.N; ++n) {
    const PointId s = graph::start_point(n);
    if (g.in_offsets[s] == g.in_offsets[s + 1]) o.begin = std::min(o.begin, g.meas_start_ns[n]);
  }
  if (o.N == 0 || o.begin == std::numeric_limits<int64_t>::max())
    return make_error("milp", "the step has no anchored start");
  return {};
}

// var_pack / var_dur: d exactly the rounded duration predict() uses.
void collect_durations(Oracle& o) {
  const graph::Graph& g = o.g;
  o.var_pack.assign(o.N, graph::kNoId);
  o.var_dur.assign(o.N, {});
  for (size_t gi = 0; gi < o.p.gpus.size(); ++gi) {
    const auto& ops = o.p.gpus[gi].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const NodeId n = ops[i];
      if (g.dur_ns[n] <= 0) continue;
      o.var_pack[n] = o.x.op_pack[gi][i];
      auto& d = o.var_dur[n];
      for (int c : o.x.clocks)
        d.push_back(
            std::llround(double(g.dur_ns[n]) * o.m.op_time_ratio(pack::SignatureIndex(o.x.op_sig[gi][i]), o.x.op_pos[gi][i], c)));
    }
  }
}

// The binaries x[k,c] (objective: the pack's energy at c) and one clock per pack.
void add_clock_choices(Oracle& o) {
  o.cost_kc.assign(o.P * o.C, {});
  for (uint32_t k = 0; k < o.P; ++k) {
    for (size_t c = 0; c < o.C; ++c) {
      o.cost_kc[k * o.C + c] = pack_cost(o.pr, o.x, k, o.x.clocks[c]);
      o.lp.add_col(GLP_DB, 0, 1, o.cost_kc[k * o.C + c].second, true);
    }
  }
  for (size_t k = 0; k < o.P; ++k) {
    Row t;
    for (size_t c = 0; c < o.C; ++c) t.emplace_back(o.xcol(k, c), 1.0);
    o.lp.add_row(t, GLP_FX, 1, 1);
  }
}

// The terms whose max is point pt's time (its start's anchor, its op's fixed duration, its in-edges);
// true when pt is the end of an op with a clock-dependent duration (that term is added as a row).
bool point_terms(const Oracle& o, PointId pt, Terms& terms) {
  const graph::Graph& g = o.g;
  const NodeId n = graph::node_of(pt);
  terms.clear();
  bool var_duration = false;
  if (graph::is_end(pt)) {
    if (o.var_pack[n] != graph::kNoId) {
      var_duration = true;
    } else {
      terms.emplace_back(o.rep[pt - 1].col, o.rep[pt - 1].off + g.dur_ns[n]);
    }
  } else if (g.in_offsets[pt] == g.in_offsets[pt + 1]) {
    terms.emplace_back(0, g.meas_start_ns[n] - o.begin);
  }
  for (uint32_t i = g.in_offsets[pt]; i < g.in_offsets[pt + 1]; ++i) {
    const graph::Edge& e = g.edges[g.in_edges[i]];
    terms.emplace_back(o.rep[e.src].col, o.rep[e.src].off + e.lat_ns);
  }
  return var_duration;
}

// Merge: the largest offset per column; constants into one.
void merge_terms(Terms& terms) {
  std::sort(terms.begin(), terms.end());
  size_t kept = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (kept > 0 && terms[kept - 1].first == terms[i].first) {
      terms[kept - 1].second = std::max(terms[kept - 1].second, terms[i].second);
    } else {
      terms[kept++] = terms[i];
    }
  }
  terms.resize(kept);
}

// t(end) ≥ t(start) + Σ_c x[k,c]·d(n,c) for the op ending at pt, whose time is column v.
void add_duration_row(Oracle& o, PointId pt, int v) {
  const NodeId n = graph::node_of(pt);
  const Rep s = o.rep[pt - 1];
  Row t{{v, 1.0}};
  if (s.col != 0) t.emplace_back(s.col, -1.0);
  for (size_t c = 0; c < o.C; ++c) t.emplace_back(o.xcol(o.var_pack[n], c), -double(o.var_dur[n][c]));
  o.lp.add_row(t, GLP_LO, double(s.off));
}

// A variable for pt's time: bounded below by the constant term (all times are ≥ 0 from the step's
// begin), one row per column term, and the duration row.
void add_time_column(Oracle& o, PointId pt, const Terms& terms, bool var_duration) {
  double lb = 0;
  for (const auto& [col, off] : terms) {
    if (col == 0) lb = std::max(lb, double(off));
  }
  const int v = o.lp.add_col(GLP_LO, lb, 0, 0);
  for (const auto& [col, off] : terms) {
    if (col != 0) o.lp.add_row({{v, 1.0}, {col, -1.0}}, GLP_LO, double(off));
  }
  if (var_duration) add_duration_row(o, pt, v);
  o.rep[pt] = {v, 0};
}

// Times, in topological order: an alias or a constant where one term remains, else a variable.
void add_times(Oracle& o) {
  o.rep.assign(o.g.num_points(), {});
  Terms terms;
  for (PointId pt : o.g.topo) {
    const bool var_duration = point_terms(o, pt, terms);
    merge_terms(terms);
    if (!var_duration && terms.size() == 1) {
      o.rep[pt] = {terms[0].first, terms[0].second};
      continue;
    }
    add_time_column(o, pt, terms, var_duration);
  }
}

// The sinks' end points (with non-negative latencies and durations they bound the makespan): the
// constant ones into m_lb, the others (sorted) into sinks.
void find_sinks(Oracle& o) {
  for (NodeId n = 0; n < o.N; ++n) {
    const PointId e = graph::end_point(n);
    if (o.g.out_offsets[e] != o.g.out_offsets[e + 1]) continue;
    if (o.rep[e].col == 0) {
      o.m_lb = std::max(o.m_lb, double(o.rep[e].off));
    } else {
      o.sinks.emplace_back(o.rep[e].col, o.rep[e].off);
    }
  }
  std::sort(o.sinks.begin(), o.sinks.end());
}

// Makespan: m_lb ≤ M ≤ target, M ≥ every sink (the largest offset per column).
void add_makespan(Oracle& o) {
  o.mcol = o.lp.add_col(GLP_DB, o.m_lb, double(o.target), 0);
  const Terms& sinks = o.sinks;
  for (size_t i = 0; i < sinks.size(); ++i) {
    if (i + 1 < sinks.size() && sinks[i + 1].first == sinks[i].first) continue;
    o.lp.add_row({{o.mcol, 1.0}, {sinks[i].first, -1.0}}, GLP_LO, double(sinks[i].second));
  }
}

// Idle at the default clock beyond the packs and the gaps after them: r_g ≥ M − covered_g(x), r_g ≥ 0 (ns).
void add_idle(Oracle& o) {
  for (size_t gi = 0; gi < o.p.gpus.size(); ++gi) {
    const double w = o.m.idle_power_w(graph::RankIndex(uint32_t(gi)), o.pr.default_clock_mhz);
    const int r = o.lp.add_col(GLP_LO, 0, 0, w * 1e-9);
    Row t{{r, 1.0}, {o.mcol, -1.0}};
    for (uint32_t k = 0; k < o.P; ++k) {
      if (o.p.packs[k].rank.index() != gi) continue;
      for (size_t c = 0; c < o.C; ++c) {
        t.emplace_back(o.xcol(k, c), o.cost_kc[k * o.C + c].first * 1e9 +
                                         double(o.x.pack_idle_ns[k] + o.x.gap_after_ns[k]));
      }
    }
    o.lp.add_row(t, GLP_LO, 0);
  }
}

// The switch energy from pack j at clock a to pack k at clock b, [a·C + b]; empty when none is positive.
std::vector<double> switch_weights(const Oracle& o, uint32_t j, uint32_t k) {
  const size_t C = o.C;
  std::vector<double> w(C * C, 0);
  bool any = false;
  for (size_t a = 0; a < C; ++a) {
    for (size_t b = 0; b < C; ++b) {
      if (a == b) continue;
      w[a * C + b] = switch_energy_j(o.pr, o.x, j, k, o.x.clocks[a], o.x.clocks[b]);
      any = any || w[a * C + b] > 0;
    }
  }
  if (!any) w.clear();
  return w;
}

// z[a,b] = x[j,a]·x[k,b] through Σ_b z[a,b] = x[j,a], Σ_a z[a,b] = x[k,b]; z priced at w.
void add_switch_pair(Oracle& o, uint32_t j, uint32_t k, const std::vector<double>& w) {
  const size_t C = o.C;
  const int z0 = int(o.lp.cost.size()) + 1;
  for (size_t a = 0; a < C; ++a) {
    for (size_t b = 0; b < C; ++b) o.lp.add_col(GLP_DB, 0, 1, w[a * C + b]);
  }
  for (size_t a = 0; a < C; ++a) {
    Row t{{o.xcol(j, a), -1.0}};
    for (size_t b = 0; b < C; ++b) t.emplace_back(z0 + int(a * C + b), 1.0);
    o.lp.add_row(t, GLP_FX, 0, 0);
  }
  for (size_t b = 0; b < C; ++b) {
    Row t{{o.xcol(k, b), -1.0}};
    for (size_t a = 0; a < C; ++a) t.emplace_back(z0 + int(a * C + b), 1.0);
    o.lp.add_row(t, GLP_FX, 0, 0);
  }
}

// Clock switches between consecutive packs of a GPU and from its last pack to its first.
void add_switches(Oracle& o) {
  const double spread_s =
      std::max(0.0, o.m.profile.switch_latency_p99_ms.value - o.m.profile.switch_latency_median_ms.value) *
      1e-3;
  if (spread_s <= 0) return;
  std::vector<std::vector<uint32_t>> gpu_packs(o.p.gpus.size());
  for (uint32_t k = 0; k < o.P; ++k) gpu_packs[o.p.packs[k].rank.index()].push_back(k);
  for (const auto& ks : gpu_packs) {
    if (ks.size() < 2) continue;
    for (size_t i = 0; i < ks.size(); ++i) {
      const uint32_t j = ks[i == 0 ? ks.size() - 1 : i - 1], k = ks[i];
      const std::vector<double> w = switch_weights(o, j, k);
      if (!w.empty()) add_switch_pair(o, j, k, w);
    }
  }
}

// The default plan as the answer (no plan over the candidate clocks beats or meets it).
Plan default_answer(const Oracle& o, MilpStats st, const MilpOptions& opt) {
  st.objective_j = o.def.energy_j;
  st.default_plan = true;
  if (opt.stats) *opt.stats = st;
  Plan plan = o.def;
  plan.name = "milp";
  return plan;
}

// Loads the LP into GLPK; returns the number of binaries.
int load_problem(glp_prob* prob, const Lp& lp) {
  glp_set_obj_dir(prob, GLP_MIN);
  const int ncols = int(lp.cost.size()), nrows = int(lp.row_type.size());
  glp_add_cols(prob, ncols);
  glp_add_rows(prob, nrows);
  int binaries = 0;
  for (int j = 1; j <= ncols; ++j) {
    const size_t i = size_t(j - 1);
    glp_set_col_bnds(prob, j, lp.col_type[i], lp.col_lb[i], lp.col_ub[i]);
    glp_set_obj_coef(prob, j, lp.cost[i]);
    if (lp.binary[i]) {
      glp_set_col_kind(prob, j, GLP_BV);
      ++binaries;
    }
  }
  for (int r = 1; r <= nrows; ++r) {
    const size_t i = size_t(r - 1);
    glp_set_row_bnds(prob, r, lp.row_type[i], lp.row_lb[i], lp.row_ub[i]);
  }
  glp_load_matrix(prob, int(lp.ar.size()) - 1, lp.ia.data(), lp.ja.data(), lp.ar.data());
  return binaries;
}

// Branch and bound to a zero gap, within the time limit and (through on_tree) the node limit.
int run_intopt(glp_prob* prob, const MilpOptions& opt, NodeLimit& nl) {
  nl.limit = opt.node_limit;
  glp_iocp io;
  glp_init_iocp(&io);
  io.msg_lev = GLP_MSG_OFF;
  io.presolve = GLP_ON;
  io.tm_lim = int(std::clamp(opt.time_limit_s * 1e3, 1.0, 2e9));
  io.mip_gap = 0;
  io.tol_int = 1e-9;
  io.tol_obj = 1e-9;
  io.cb_func = on_tree;
  io.cb_info = &nl;
  return glp_intopt(prob, &io);
}

// Each pack's clock: the candidate with the largest x[k,c] (the first on ties).
std::vector<int> read_clocks(const Oracle& o, glp_prob* prob) {
  std::vector<int> clocks(o.P);
  for (size_t k = 0; k < o.P; ++k) {
    size_t best = 0;
    for (size_t c = 1; c < o.C; ++c) {
      if (glp_mip_col_val(prob, o.xcol(k, c)) > glp_mip_col_val(prob, o.xcol(k, best))) best = c;
    }
    clocks[k] = o.x.clocks[best];
  }
  return clocks;
}

// The MILP's plan replayed: it must meet the target and its energy be the objective; the default plan
// wins where it is cheaper (only when the default clock is not a candidate).
Result<Plan> verify(const Oracle& o, std::vector<int> clocks, MilpStats& st, const MilpOptions& opt) {
  Plan plan = predict_prepared(o.pr, o.x, std::move(clocks), "milp");
  plan.feasible = plan.time_ns <= o.target;
  if (!plan.feasible)
    return make_error("milp", fmt::format("the MILP's plan replays to {} ns, over the target {} ns",
                                          plan.time_ns, o.target));
  if (std::abs(plan.energy_j - st.objective_j) > 1e-6 * std::abs(plan.energy_j))
    return make_error("milp",
                      fmt::format("the MILP's objective {:.9g} J and the replayed energy {:.9g} J disagree",
                                  st.objective_j, plan.energy_j));
  if (o.def.energy_j < plan.energy_j) {
    st.default_plan = true;
    plan = o.def;
    plan.name = "milp";
  }
  if (opt.stats) *opt.stats = st;
  return plan;
}

// Solves the MILP with GLPK and reads its plan back (solve_ms counts from t0, the call's start).
Result<Plan> solve(const Oracle& o, const MilpOptions& opt, std::chrono::steady_clock::time_point t0) {
  glp_term_out(GLP_OFF);
  GlpProb prob;
  const int binaries = load_problem(prob.p, o.lp);
  NodeLimit nl;
  const int ret = run_intopt(prob.p, opt, nl);
  const double solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  MilpStats st{0, nl.count, int(o.lp.row_type.size()), int(o.lp.cost.size()), binaries, solve_ms, false};
  if (opt.stats) *opt.stats = st;
  if (nl.hit)
    return make_error("milp",
                      fmt::format("node limit {} reached before optimality was proven", opt.node_limit));
  if (ret == GLP_ETMLIM)
    return make_error("milp",
                      fmt::format("time limit {} s reached before optimality was proven", opt.time_limit_s));
  // No plan over the candidate clocks meets the target: the default plan stays (as in exhaustive()).
  if (ret == GLP_ENOPFS || (ret == 0 && glp_mip_status(prob.p) == GLP_NOFEAS))
    return default_answer(o, st, opt);
  if (ret != 0) return make_error("milp", fmt::format("GLPK failed (glp_intopt returned {})", ret));
  if (glp_mip_status(prob.p) != GLP_OPT) return make_error("milp", "GLPK did not prove optimality");
  st.objective_j = glp_mip_obj_val(prob.p);
  return verify(o, read_clocks(o, prob.p), st, opt);
}

}  // namespace

Result<Plan> milp_oracle(const Problem& pr, double max_slowdown, const MilpOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  EMO_RETURN_IF_ERROR(check_problem(pr, max_slowdown));
  Oracle o(pr);
  EMO_RETURN_IF_ERROR(set_target(o, max_slowdown));
  EMO_RETURN_IF_ERROR(find_begin(o));
  collect_durations(o);
  add_clock_choices(o);
  add_times(o);
  find_sinks(o);
  // Nothing but the default meets the target (it always does).
  if (o.m_lb > double(o.target)) return default_answer(o, MilpStats{}, opt);
  add_makespan(o);
  add_idle(o);
  add_switches(o);
  return solve(o, opt, t0);
}

}  // namespace emo::optimize
