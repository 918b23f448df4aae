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
  void add_row(const std::vector<std::pair<int, double>>& terms, int type, double lb, double ub = 0) {
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

}  // namespace

Result<Plan> milp_oracle(const Problem& pr, double max_slowdown, const MilpOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (max_slowdown < 0) return make_error("milp", "max_slowdown must not be negative");
  if (pr.idle_from_replay)
    return make_error("milp", "the MILP models idle inside packs as measured",
                      "set Problem::idle_from_replay = false (and compare the DP on that same problem)");
  const pack::Packing& p = *pr.packing;
  const graph::Graph& g = pr.workload->graph;
  const pack::PackModels& m = *pr.models;
  if (p.packs.empty()) return make_error("milp", "no packs to optimize");
  Prepared x = prepare(pr);
  if (x.clocks.empty()) return make_error("milp", "no candidate clocks");
  const size_t P = p.packs.size(), C = x.clocks.size();

  Plan def = predict_prepared(pr, x, std::vector<int>(P, pr.default_clock_mhz), "default");
  def.feasible = true;
  const int64_t target = int64_t(std::floor(double(def.time_ns) * (1 + max_slowdown)));

  // With no negative latency or duration every point is at or after some anchored start, so the step
  // begins at the earliest anchor whatever the clocks are.
  const size_t N = g.num_nodes();
  for (const graph::Edge& e : g.edges) {
    if (e.lat_ns < 0) return make_error("milp", "the graph has a negative latency");
  }
  for (NodeId n = 0; n < N; ++n) {
    if (g.dur_ns[n] < 0) return make_error("milp", "the graph has a negative duration");
  }
  int64_t begin = std::numeric_limits<int64_t>::max();
  for (NodeId n = 0; n < N; ++n) {
    const PointId s = graph::start_point(n);
    if (g.in_offsets[s] == g.in_offsets[s + 1]) begin = std::min(begin, g.meas_start_ns[n]);
  }
  if (N == 0 || begin == std::numeric_limits<int64_t>::max()) return make_error("milp", "the step has no anchored start");

  // Clock-dependent durations: per GPU op with a positive duration, its pack and the duration per clock.
  std::vector<uint32_t> var_pack(N, graph::kNoId);
  std::vector<std::vector<int64_t>> var_dur(N);
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    const auto& ops = p.gpus[gi].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const NodeId n = ops[i];
      if (g.dur_ns[n] <= 0) continue;
      var_pack[n] = x.op_pack[gi][i];
      auto& d = var_dur[n];
      for (int c : x.clocks) d.push_back(std::llround(double(g.dur_ns[n]) * m.op_time_ratio(x.op_sig[gi][i], x.op_pos[gi][i], c)));
    }
  }

  Lp lp;
  // x[k,c]: columns 1 .. P·C.
  std::vector<std::pair<double, double>> cost_kc(P * C);  // (busy s, energy J)
  for (uint32_t k = 0; k < P; ++k) {
    for (size_t c = 0; c < C; ++c) {
      cost_kc[k * C + c] = pack_cost(pr, x, k, x.clocks[c]);
      lp.add_col(GLP_DB, 0, 1, cost_kc[k * C + c].second, true);
    }
  }
  auto xcol = [&](size_t k, size_t c) { return int(k * C + c + 1); };
  for (size_t k = 0; k < P; ++k) {
    std::vector<std::pair<int, double>> t;
    for (size_t c = 0; c < C; ++c) t.emplace_back(xcol(k, c), 1.0);
    lp.add_row(t, GLP_FX, 1, 1);
  }

  // Times, in topological order.
  std::vector<Rep> rep(g.num_points());
  std::vector<std::pair<int, int64_t>> terms;  // (column or 0, offset)
  for (PointId pt : g.topo) {
    const NodeId n = graph::node_of(pt);
    terms.clear();
    bool var_duration = false;
    if (graph::is_end(pt)) {
      if (var_pack[n] != graph::kNoId) {
        var_duration = true;
      } else {
        terms.emplace_back(rep[pt - 1].col, rep[pt - 1].off + g.dur_ns[n]);
      }
    } else if (g.in_offsets[pt] == g.in_offsets[pt + 1]) {
      terms.emplace_back(0, g.meas_start_ns[n] - begin);
    }
    for (uint32_t i = g.in_offsets[pt]; i < g.in_offsets[pt + 1]; ++i) {
      const graph::Edge& e = g.edges[g.in_edges[i]];
      terms.emplace_back(rep[e.src].col, rep[e.src].off + e.lat_ns);
    }
    // Merge: the largest offset per column; constants into one.
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
    if (!var_duration && terms.size() == 1) {
      rep[pt] = {terms[0].first, terms[0].second};
      continue;
    }
    // A variable: bounded below by the constant term (all times are ≥ 0 from the step's begin).
    double lb = 0;
    for (const auto& [col, off] : terms) {
      if (col == 0) lb = std::max(lb, double(off));
    }
    const int v = lp.add_col(GLP_LO, lb, 0, 0);
    for (const auto& [col, off] : terms) {
      if (col != 0) lp.add_row({{v, 1.0}, {col, -1.0}}, GLP_LO, double(off));
    }
    if (var_duration) {
      const Rep s = rep[pt - 1];
      std::vector<std::pair<int, double>> t{{v, 1.0}};
      if (s.col != 0) t.emplace_back(s.col, -1.0);
      for (size_t c = 0; c < C; ++c) t.emplace_back(xcol(var_pack[n], c), -double(var_dur[n][c]));
      lp.add_row(t, GLP_LO, double(s.off));
    }
    rep[pt] = {v, 0};
  }

  // Makespan: M ≥ every end point (with non-negative latencies and durations the sinks suffice).
  double m_lb = 0;
  std::vector<std::pair<int, int64_t>> sinks;
  for (NodeId n = 0; n < N; ++n) {
    const PointId e = graph::end_point(n);
    if (g.out_offsets[e] != g.out_offsets[e + 1]) continue;
    if (rep[e].col == 0) {
      m_lb = std::max(m_lb, double(rep[e].off));
    } else {
      sinks.emplace_back(rep[e].col, rep[e].off);
    }
  }
  std::sort(sinks.begin(), sinks.end());
  if (m_lb > double(target)) {
    if (opt.stats) *opt.stats = MilpStats{def.energy_j, 0, 0, 0, 0, 0, true};
    def.name = "milp";
    return def;  // nothing but the default meets the target (it always does)
  }
  const int mcol = lp.add_col(GLP_DB, m_lb, double(target), 0);
  for (size_t i = 0; i < sinks.size(); ++i) {
    if (i + 1 < sinks.size() && sinks[i + 1].first == sinks[i].first) continue;  // the largest offset per column
    lp.add_row({{mcol, 1.0}, {sinks[i].first, -1.0}}, GLP_LO, double(sinks[i].second));
  }

  // Idle at the default clock beyond the packs and the gaps after them: r_g ≥ M − covered_g(x), r_g ≥ 0 (ns).
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    const double w = m.idle_power_w(uint32_t(gi), pr.default_clock_mhz);
    const int r = lp.add_col(GLP_LO, 0, 0, w * 1e-9);
    std::vector<std::pair<int, double>> t{{r, 1.0}, {mcol, -1.0}};
    for (uint32_t k = 0; k < P; ++k) {
      if (p.packs[k].gpu != gi) continue;
      for (size_t c = 0; c < C; ++c) {
        t.emplace_back(xcol(k, c), cost_kc[k * C + c].first * 1e9 + double(x.pack_idle_ns[k] + x.gap_after_ns[k]));
      }
    }
    lp.add_row(t, GLP_LO, 0);
  }

  // Clock switches between consecutive packs of a GPU and from its last pack to its first:
  // z[c,c'] = x[j,c]·x[k,c'] through Σ_c' z[c,c'] = x[j,c], Σ_c z[c,c'] = x[k,c'].
  const double spread_s =
      std::max(0.0, m.profile.switch_latency_p99_ms.value - m.profile.switch_latency_median_ms.value) * 1e-3;
  if (spread_s > 0) {
    std::vector<std::vector<uint32_t>> gpu_packs(p.gpus.size());
    for (uint32_t k = 0; k < P; ++k) gpu_packs[p.packs[k].gpu].push_back(k);
    for (const auto& ks : gpu_packs) {
      if (ks.size() < 2) continue;
      for (size_t i = 0; i < ks.size(); ++i) {
        const uint32_t j = ks[i == 0 ? ks.size() - 1 : i - 1], k = ks[i];
        std::vector<double> w(C * C, 0);
        bool any = false;
        for (size_t a = 0; a < C; ++a) {
          for (size_t b = 0; b < C; ++b) {
            if (a == b) continue;
            w[a * C + b] = switch_energy_j(pr, x, j, k, x.clocks[a], x.clocks[b]);
            any = any || w[a * C + b] > 0;
          }
        }
        if (!any) continue;
        const int z0 = int(lp.cost.size()) + 1;
        for (size_t a = 0; a < C; ++a) {
          for (size_t b = 0; b < C; ++b) lp.add_col(GLP_DB, 0, 1, w[a * C + b]);
        }
        for (size_t a = 0; a < C; ++a) {
          std::vector<std::pair<int, double>> t{{xcol(j, a), -1.0}};
          for (size_t b = 0; b < C; ++b) t.emplace_back(z0 + int(a * C + b), 1.0);
          lp.add_row(t, GLP_FX, 0, 0);
        }
        for (size_t b = 0; b < C; ++b) {
          std::vector<std::pair<int, double>> t{{xcol(k, b), -1.0}};
          for (size_t a = 0; a < C; ++a) t.emplace_back(z0 + int(a * C + b), 1.0);
          lp.add_row(t, GLP_FX, 0, 0);
        }
      }
    }
  }

  // Solve.
  glp_term_out(GLP_OFF);
  GlpProb prob;
  glp_set_obj_dir(prob.p, GLP_MIN);
  const int ncols = int(lp.cost.size()), nrows = int(lp.row_type.size());
  glp_add_cols(prob.p, ncols);
  glp_add_rows(prob.p, nrows);
  int binaries = 0;
  for (int j = 1; j <= ncols; ++j) {
    const size_t i = size_t(j - 1);
    glp_set_col_bnds(prob.p, j, lp.col_type[i], lp.col_lb[i], lp.col_ub[i]);
    glp_set_obj_coef(prob.p, j, lp.cost[i]);
    if (lp.binary[i]) {
      glp_set_col_kind(prob.p, j, GLP_BV);
      ++binaries;
    }
  }
  for (int r = 1; r <= nrows; ++r) {
    const size_t i = size_t(r - 1);
    glp_set_row_bnds(prob.p, r, lp.row_type[i], lp.row_lb[i], lp.row_ub[i]);
  }
  glp_load_matrix(prob.p, int(lp.ar.size()) - 1, lp.ia.data(), lp.ja.data(), lp.ar.data());

  NodeLimit nl;
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
  const int ret = glp_intopt(prob.p, &io);
  const double solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  MilpStats st{0, nl.count, nrows, ncols, binaries, solve_ms, false};
  if (opt.stats) *opt.stats = st;
  if (nl.hit) return make_error("milp", fmt::format("node limit {} reached before optimality was proven", opt.node_limit));
  if (ret == GLP_ETMLIM) return make_error("milp", fmt::format("time limit {} s reached before optimality was proven", opt.time_limit_s));
  const bool infeasible = ret == GLP_ENOPFS || (ret == 0 && glp_mip_status(prob.p) == GLP_NOFEAS);
  if (infeasible) {
    // No plan over the candidate clocks meets the target: the default plan stays (as in exhaustive()).
    st.objective_j = def.energy_j;
    st.default_plan = true;
    if (opt.stats) *opt.stats = st;
    def.name = "milp";
    return def;
  }
  if (ret != 0) return make_error("milp", fmt::format("GLPK failed (glp_intopt returned {})", ret));
  if (glp_mip_status(prob.p) != GLP_OPT) return make_error("milp", "GLPK did not prove optimality");

  std::vector<int> clocks(P);
  for (size_t k = 0; k < P; ++k) {
    size_t best = 0;
    for (size_t c = 1; c < C; ++c) {
      if (glp_mip_col_val(prob.p, xcol(k, c)) > glp_mip_col_val(prob.p, xcol(k, best))) best = c;
    }
    clocks[k] = x.clocks[best];
  }
  st.objective_j = glp_mip_obj_val(prob.p);
  Plan plan = predict_prepared(pr, x, std::move(clocks), "milp");
  plan.feasible = plan.time_ns <= target;
  if (!plan.feasible)
    return make_error("milp", fmt::format("the MILP's plan replays to {} ns, over the target {} ns", plan.time_ns, target));
  if (std::abs(plan.energy_j - st.objective_j) > 1e-6 * std::abs(plan.energy_j))
    return make_error("milp", fmt::format("the MILP's objective {:.9g} J and the replayed energy {:.9g} J disagree",
                                          st.objective_j, plan.energy_j));
  if (def.energy_j < plan.energy_j) {  // only when the default clock is not a candidate
    st.default_plan = true;
    plan = def;
    plan.name = "milp";
  }
  if (opt.stats) *opt.stats = st;
  return plan;
}

}  // namespace emo::optimize
