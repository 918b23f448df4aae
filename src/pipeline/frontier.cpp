// The whole time–energy frontier of a pipeline DAG, by parametric min-cost flow (Fulkerson 1961;
// Phillips–Dessouky solve the same problem one time unit at a time).
//
// The problem, for a deadline T: choose each node's duration d_i (a whole number of units) to minimize
// Σ c_i(d_i) subject to the DAG's longest path <= T, with c_i convex and decreasing (the fitted
// lowtime cost). Its LP dual is a flow from a source to a sink through the DAG (each node split into
// in → out): pushing flow through node i "buys" time at the node's marginal cost, and the shortest
// path in the residual network (costs −d_i) is the critical path. Successive shortest paths with
// potentials (primal–dual): each phase finds the shortest-path distances (Dijkstra on reduced costs),
// then a maximum flow on the zero-reduced-cost arcs. Between two phases the optimal flow is constant
// and the potentials p + min(dist, θ), θ = 0 .. Δ, are optimal schedules for every deadline from T to
// T − Δ: so every whole-unit deadline gets its optimal plan, and the work is one phase per slope change
// of the frontier, not one per time unit.
//
// Node i's convex cost becomes a chain of flow segments: with hull durations u_0 > u_1 > ... and costs
// c_0 < c_1 < ..., segment j carries flow in [R_j, R_{j+1}), R_j = (c_j − c_{j−1}) / (u_{j−1} − u_j)
// (the price of one unit of time at which the node moves from u_{j−1} to u_j), at cost −u_j per unit.
#include <algorithm>
#include <cmath>
#include <limits>

#include "emo/pipeline/pipeline.h"

namespace emo::pipeline {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kFar = std::numeric_limits<int64_t>::max() / 4;

// What the solver may choose for one (stage, instruction).
struct Kind {
  int64_t min_units = 0, max_units = 0;
  // Allowed durations, slowest first, each with its candidate (clock) and accounting cost.
  std::vector<int64_t> units;
  std::vector<uint32_t> candidate;
  std::vector<double> cost;
  // by_units[t − min_units]: the allowed duration to run for an interval of t units (the largest <= t).
  std::vector<uint32_t> by_units;
  // Lower convex hull of the non-dominated (units, cost), slowest first, and the flow breakpoints.
  std::vector<int64_t> hull_units;
  std::vector<double> breakpoint;  // size hull + 1: R_0 = 0, R_m = +inf
};

Kind make_kind(const InstructionModel& im, Accounting accounting) {
  Kind k;
  k.min_units = im.min_units();
  k.max_units = im.max_units();
  if (accounting == Accounting::kLowtime) {
    for (int64_t u = k.max_units; u >= k.min_units; --u) {
      k.units.push_back(u);
      k.candidate.push_back(uint32_t(im.candidate_for(u)));
      k.cost.push_back(im.cost(double(u)));
    }
  } else {
    for (size_t c = 0; c < im.candidates.size(); ++c) {
      k.units.push_back(im.candidates[c].units);
      k.candidate.push_back(uint32_t(c));
      k.cost.push_back(im.cost(double(im.candidates[c].units)));
    }
  }
  k.by_units.assign(size_t(k.max_units - k.min_units + 1), 0);
  size_t j = k.units.size() - 1;  // fastest
  for (int64_t t = k.min_units; t <= k.max_units; ++t) {
    while (j > 0 && k.units[j - 1] <= t) --j;
    k.by_units[size_t(t - k.min_units)] = uint32_t(j);
  }
  // A slower option that costs no less than some faster one is never worth choosing.
  std::vector<size_t> useful;
  double cheapest_faster = kInf;
  for (size_t i = k.units.size(); i-- > 0;) {
    if (k.cost[i] < cheapest_faster) useful.push_back(i);
    cheapest_faster = std::min(cheapest_faster, k.cost[i]);
  }
  std::reverse(useful.begin(), useful.end());  // slowest first; costs strictly increase
  std::vector<size_t> hull;
  auto rate = [&](size_t a, size_t b) { return (k.cost[b] - k.cost[a]) / double(k.units[a] - k.units[b]); };
  for (size_t i : useful) {
    while (hull.size() >= 2 && rate(hull[hull.size() - 1], i) <= rate(hull[hull.size() - 2], hull.back()))
      hull.pop_back();
    hull.push_back(i);
  }
  k.breakpoint.push_back(0);
  for (size_t h = 0; h < hull.size(); ++h) {
    k.hull_units.push_back(k.units[hull[h]]);
    if (h > 0) k.breakpoint.push_back(rate(hull[h - 1], hull[h]));
  }
  k.breakpoint.push_back(kInf);
  return k;
}

class Solver {
 public:
  Solver(const PipelineDag& dag, std::vector<Kind> kinds)
      : dag_(dag), n_(dag.num_nodes()), kinds_(std::move(kinds)) {
    kind_of_.resize(n_);
    for (size_t i = 0; i < n_; ++i)
      kind_of_[i] = uint32_t(dag.nodes[i].stage * 2 + int(dag.nodes[i].instruction));
    build_network();
  }

  // Runs every phase; calls emit(T) after setting units_/choice_ to the optimal plan for deadline T,
  // for T from the slowest makespan down to the fastest. changed() lists the nodes whose plan entry
  // changed since the previous emit.
  template <class Emit>
  void run(Emit&& emit) {
    init_potentials();
    std::vector<int64_t> d_clip(vcount_);
    std::vector<uint32_t> moving, pending;
    std::vector<char> is_pending(n_, 1);
    for (uint32_t i = 0; i < n_; ++i) pending.push_back(i);
    auto add_pending = [&](const std::vector<uint32_t>& nodes) {
      for (uint32_t i : nodes) {
        if (!is_pending[i]) is_pending[i] = 1, pending.push_back(i);
      }
    };
    while (true) {
      int64_t dt = dijkstra();
      ++phases_;
      if (dt >= kFar || broken_) {  // cannot happen: node and precedence arcs always leave a path open
        broken_ = true;
        return;
      }
      int64_t tk = -(pot_[t_] - pot_[s_]);
      for (size_t v = 0; v < vcount_; ++v) d_clip[v] = std::min(dist_[v], dt);
      // Only nodes whose two ends are at different distances change duration within this phase.
      moving.clear();
      for (uint32_t i = 0; i < n_; ++i) {
        if (d_clip[2 * i] != d_clip[2 * i + 1]) moving.push_back(i);
      }
      for (int64_t theta = 0; theta < dt; ++theta) {
        changed_.clear();
        if (theta == 0) {
          add_pending(moving);
          set_plan(pending, d_clip, theta);
          for (uint32_t i : pending) is_pending[i] = 0;
          pending.clear();
        } else {
          set_plan(moving, d_clip, theta);
        }
        emit(tk - theta);
      }
      add_pending(moving);
      for (size_t v = 0; v < vcount_; ++v) pot_[v] += d_clip[v];
      if (!max_flow()) {  // unbounded: every critical path is at its fastest; this is the fastest plan
        std::fill(d_clip.begin(), d_clip.end(), 0);
        changed_.clear();
        set_plan(pending, d_clip, 0);
        emit(-(pot_[t_] - pot_[s_]));
        return;
      }
    }
  }

  const std::vector<uint32_t>& changed() const { return changed_; }
  size_t phases() const { return phases_; }
  int64_t slowest_units() const { return slowest_; }
  const std::vector<int64_t>& units() const { return units_; }
  const std::vector<uint32_t>& choice() const { return choice_; }  // index into the node's Kind
  const Kind& kind(size_t node) const { return kinds_[kind_of_[node]]; }
  double cost_sum() const { return cost_sum_; }
  bool broken() const { return broken_; }

 private:
  // Vertices: in(i) = 2i, out(i) = 2i + 1, then source and sink. Arcs: the nodes (in → out), then
  // precedence, source and sink arcs (unbounded, cost 0). Each arc has two residual slots, stored in
  // CSR order by their start vertex; a slot also mirrors whether its reverse slot is open and its
  // cost, so the backward search reads the same 16 bytes. Capacities and reverse indices, needed only
  // when flow moves, live apart (cap_, rev_).
  struct Slot {
    uint32_t to;
    int32_t cost;     // cost per unit of flow (−duration along a node, +duration against it)
    int32_t in_cost;  // the reverse slot's cost (from `to` back to the owner)
    uint8_t open;     // residual capacity > 0
    uint8_t in_open;  // the reverse slot's residual capacity > 0
  };
  enum Tag : uint8_t { kPlainAlong, kPlainAgainst, kNodeAlong, kNodeAgainst };

  void build_network() {
    vcount_ = 2 * n_ + 2;
    s_ = uint32_t(2 * n_);
    t_ = s_ + 1;
    std::vector<std::pair<uint32_t, uint32_t>> arcs;
    for (size_t i = 0; i < n_; ++i) arcs.emplace_back(uint32_t(2 * i), uint32_t(2 * i + 1));
    for (size_t i = 0; i < n_; ++i) {
      if (dag_.pred_begin[i] == dag_.pred_begin[i + 1]) arcs.emplace_back(s_, uint32_t(2 * i));
      if (dag_.succ_begin[i] == dag_.succ_begin[i + 1]) arcs.emplace_back(uint32_t(2 * i + 1), t_);
      for (uint32_t k = dag_.succ_begin[i]; k < dag_.succ_begin[i + 1]; ++k)
        arcs.emplace_back(uint32_t(2 * i + 1), uint32_t(2 * dag_.succs[k]));
    }
    adj_begin_.assign(vcount_ + 1, 0);
    for (auto [a, b] : arcs) ++adj_begin_[a + 1], ++adj_begin_[b + 1];
    for (size_t v = 0; v < vcount_; ++v) adj_begin_[v + 1] += adj_begin_[v];
    slot_.resize(2 * arcs.size());
    cap_.resize(2 * arcs.size());
    rev_.resize(2 * arcs.size());
    tag_.resize(2 * arcs.size());
    act_slot_.resize(n_);
    std::vector<uint32_t> fill(adj_begin_.begin(), adj_begin_.end() - 1);
    for (size_t e = 0; e < arcs.size(); ++e) {
      auto [a, b] = arcs[e];
      uint32_t fa = fill[a]++, fb = fill[b]++;
      slot_[fa] = Slot{b, 0, 0, 1, 0};
      slot_[fb] = Slot{a, 0, 0, 0, 1};
      cap_[fa] = kInf, cap_[fb] = 0;
      rev_[fa] = fb, rev_[fb] = fa;
      tag_[fa] = e < n_ ? kNodeAlong : kPlainAlong;
      tag_[fb] = e < n_ ? kNodeAgainst : kPlainAgainst;
      if (e < n_) act_slot_[e] = fa;
    }
    flow_.assign(n_, 0);
    seg_.assign(n_, 0);
    for (uint32_t i = 0; i < n_; ++i) refresh(i);
    pot_.assign(vcount_, 0);
    dist_.assign(vcount_, kFar);
    popped_.assign(vcount_, 0);
    level_.assign(vcount_, -1);
    level_[t_] = 0;
    cur_.assign(vcount_, 0);
    units_.assign(n_, 0);
    choice_.assign(n_, kUnset);
  }

  void set_slot(uint32_t k, double cap, int32_t cost) {
    cap_[k] = cap;
    slot_[k].cost = cost, slot_[k].open = cap > 0;
    Slot& r = slot_[rev_[k]];
    r.in_cost = cost, r.in_open = cap > 0;
  }

  // The two residual slots of node i from its flow x and segment j (R_j <= x < R_{j+1}): along it,
  // the next unit of flow costs −u_j up to R_{j+1}; against it, flow returns at +u_j down to R_j, or
  // (at x == R_j) at +u_{j−1} down to R_{j−1}.
  void refresh(uint32_t i) {
    const Kind& k = kinds_[kind_of_[i]];
    size_t j = seg_[i], m = k.hull_units.size();
    double x = flow_[i];
    uint32_t f = act_slot_[i], b = rev_[f];
    set_slot(f, j + 1 == m ? kInf : k.breakpoint[j + 1] - x, int32_t(-k.hull_units[j]));
    if (x > k.breakpoint[j]) {
      set_slot(b, x - k.breakpoint[j], int32_t(k.hull_units[j]));
    } else if (j > 0) {
      set_slot(b, k.breakpoint[j] - k.breakpoint[j - 1], int32_t(k.hull_units[j - 1]));
    } else {
      set_slot(b, 0, 0);
    }
  }

  static bool near(double x, double r) { return std::abs(x - r) <= 1e-12 * std::max(1.0, std::abs(r)); }

  void push(uint32_t k, double g) {
    switch (tag_[k]) {
      case kPlainAlong: {
        uint32_t r = rev_[k];
        set_slot(r, cap_[r] + g, 0);
        return;
      }
      case kPlainAgainst: {
        double c = cap_[k] - g;
        set_slot(k, c < 1e-15 * g ? 0 : c, 0);
        return;
      }
      default:
        break;
    }
    uint32_t i = slot_[k].to / 2;  // along: in(i) -> out(i); against: out(i) -> in(i)
    const Kind& kd = kinds_[kind_of_[i]];
    uint32_t& j = seg_[i];
    double& x = flow_[i];
    size_t m = kd.hull_units.size();
    if (tag_[k] == kNodeAlong) {
      x += g;
      if (j + 1 < m && (x >= kd.breakpoint[j + 1] || near(x, kd.breakpoint[j + 1]))) x = kd.breakpoint[++j];
    } else {
      if (!(x > kd.breakpoint[j])) --j;
      x -= g;
      if (x <= kd.breakpoint[j] || near(x, kd.breakpoint[j])) x = kd.breakpoint[j];
    }
    refresh(i);
  }

  // Potentials of the slowest plan: minus the earliest event times (a shortest path with costs −u_0).
  void init_potentials() {
    std::vector<int64_t> finish(n_, 0);
    int64_t end = 0;
    for (size_t v = 0; v < n_; ++v) {
      int64_t start = 0;
      for (uint32_t k = dag_.pred_begin[v]; k < dag_.pred_begin[v + 1]; ++k)
        start = std::max(start, finish[dag_.preds[k]]);
      finish[v] = start + kind(v).hull_units[0];
      pot_[2 * v] = -start;
      pot_[2 * v + 1] = -finish[v];
      end = std::max(end, finish[v]);
    }
    pot_[s_] = 0;
    pot_[t_] = -end;
    slowest_ = end;
  }

  // Shortest distances from the source on reduced costs, up to the sink's; returns the sink's. Dial's
  // buckets for small distances (the usual case: the sink is a few units away), a heap beyond.
  // The last round of the previous max flow left level_ >= 0 on exactly the vertices that reach the
  // sink by open zero-reduced-cost arcs (its backward search ran to the end without meeting the
  // source); the potentials have not moved since. Such a vertex w is at least as far as the sink
  // (dist(t) <= dist(w) + 0) and reaching it at d puts the sink at most d away, so the search stops at
  // its boundary instead of walking through the sink's side: the sink's distance is the smallest d at
  // which that side is reached, and the vertices never scanned are all at or beyond it, where the
  // potential update is clipped to that distance anyway. The search also stops as soon as the bucket
  // of that distance comes up.
  int64_t dijkstra() {
    for (uint32_t v : touched_) dist_[v] = kFar, popped_[v] = 0;
    touched_.clear();
    for (auto& b : buckets_) b.clear();
    overflow_.clear();
    auto cmp = [](const std::pair<int64_t, uint32_t>& a, const std::pair<int64_t, uint32_t>& b) {
      return a.first > b.first;
    };
    int64_t reach_sink = kFar;
    auto relax = [&](uint32_t w, int64_t nd, int64_t d) {
      if (nd < d) {  // a negative reduced cost: the potentials are broken (a bug); stop rather than loop
        broken_ = true;
        return;
      }
      if (level_[w] >= 0) {  // w reaches the sink at zero reduced cost: the sink is at most nd away
        reach_sink = std::min(reach_sink, nd);
        return;
      }
      if (nd >= dist_[w]) return;
      if (dist_[w] == kFar) touched_.push_back(w);
      dist_[w] = nd;
      if (nd < int64_t(kBuckets)) {
        buckets_[size_t(nd)].push_back(w);
      } else {
        overflow_.push_back({nd, w});
        std::push_heap(overflow_.begin(), overflow_.end(), cmp);
      }
    };
    relax(s_, 0, 0);
    auto scan = [&](uint32_t u, int64_t d) {
      popped_[u] = 1;
      int64_t pu = pot_[u];
      for (uint32_t k = adj_begin_[u]; k < adj_begin_[u + 1]; ++k) {
        const Slot& sl = slot_[k];
        if (!sl.open || popped_[sl.to]) continue;
        relax(sl.to, d + sl.cost + pu - pot_[sl.to], d);
      }
    };
    for (size_t d = 0; d < kBuckets; ++d) {
      auto& b = buckets_[d];
      for (size_t q = 0; q < b.size(); ++q) {  // the bucket may grow while scanned (zero-cost arcs)
        if (reach_sink <= int64_t(d)) return reach_sink;
        uint32_t u = b[q];
        if (popped_[u] || dist_[u] != int64_t(d)) continue;
        scan(u, int64_t(d));
      }
    }
    while (!overflow_.empty()) {
      std::pop_heap(overflow_.begin(), overflow_.end(), cmp);
      auto [d, u] = overflow_.back();
      overflow_.pop_back();
      if (reach_sink <= d) return reach_sink;
      if (popped_[u] || d != dist_[u]) continue;
      scan(u, d);
    }
    return reach_sink;
  }

  // Dinic's maximum flow on the zero-reduced-cost arcs. Returns false when the flow is unbounded (a
  // source–sink path of unbounded arcs: the fastest makespan). Levels are hop distances to the sink (a
  // backward search), so augmenting paths only visit vertices that reach the sink. Every arc of zero
  // reduced cost is admissible, including those among vertices Dijkstra left at or beyond the sink's
  // distance (their potentials all moved by the same Δ): augmenting on any zero-cost path keeps the
  // flow optimal. On return (true), level_ >= 0 marks the vertices that still reach the sink, which
  // the next dijkstra() uses; the sink keeps level 0 throughout.
  bool max_flow() {
    while (true) {
      for (uint32_t v : bfs_) level_[v] = -1;
      bfs_.clear();
      bfs_.push_back(t_);
      level_[t_] = 0;
      for (size_t q = 0; q < bfs_.size() && level_[s_] < 0; ++q) {
        uint32_t w = bfs_[q];
        int64_t pw = pot_[w];
        for (uint32_t k = adj_begin_[w]; k < adj_begin_[w + 1]; ++k) {
          const Slot& sl = slot_[k];  // w -> u; the arc u -> w is mirrored in in_open / in_cost
          uint32_t u = sl.to;
          if (level_[u] < 0 && sl.in_open && sl.in_cost + pot_[u] - pw == 0) {
            level_[u] = level_[w] + 1;
            bfs_.push_back(u);
          }
        }
      }
      if (level_[s_] < 0) return true;
      for (uint32_t v : bfs_) cur_[v] = adj_begin_[v];
      if (!blocking_flow()) return false;
    }
  }

  // Augments along level-decreasing zero-reduced-cost paths until none is left (iterative DFS with
  // current-arc pointers). Returns false on an unbounded path.
  bool blocking_flow() {
    path_.clear();
    uint32_t u = s_;
    while (true) {
      if (u == t_) {
        double g = kInf;
        for (uint32_t k : path_) g = std::min(g, cap_[k]);
        if (g == kInf) return false;
        size_t cut = path_.size();
        for (size_t p = 0; p < path_.size(); ++p) {
          // A node slot that fills its segment moves to the next one: still capacity, but a new cost
          // (no longer admissible). The search resumes before the first slot that closed or changed
          // (judged after the push, which snaps flows within rounding of a breakpoint onto it).
          uint32_t k = path_[p];
          int32_t cost = slot_[k].cost;
          push(k, g);
          if (cut == path_.size() && (!slot_[k].open || slot_[k].cost != cost)) cut = p;
        }
        // Resume from the tail of the first saturated slot.
        path_.resize(cut);
        u = path_.empty() ? s_ : slot_[path_.back()].to;
        continue;
      }
      bool advanced = false;
      int64_t pu = pot_[u];
      for (; cur_[u] < adj_begin_[u + 1]; ++cur_[u]) {
        uint32_t k = cur_[u];
        const Slot& sl = slot_[k];
        if (level_[sl.to] == level_[u] - 1 && sl.open && sl.cost + pu - pot_[sl.to] == 0) {
          path_.push_back(k);
          u = sl.to;
          advanced = true;
          break;
        }
      }
      if (advanced) continue;
      if (u == s_) return true;
      level_[u] = -1;  // dead end
      uint32_t k = path_.back();
      path_.pop_back();
      u = slot_[rev_[k]].to;
      ++cur_[u];
    }
  }

  // The plan of deadline T_k − θ: each node runs for the interval its potentials give it, rounded down
  // to an allowed duration (exact in lowtime's accounting, where every whole unit is allowed).
  void set_plan(const std::vector<uint32_t>& nodes, const std::vector<int64_t>& d_clip, int64_t theta) {
    for (uint32_t i : nodes) {
      uint32_t in = 2 * i, out = in + 1;
      int64_t tension = pot_[in] + std::min(d_clip[in], theta) - pot_[out] - std::min(d_clip[out], theta);
      const Kind& k = kind(i);
      int64_t t = std::clamp(tension, k.min_units, k.max_units);
      uint32_t c = k.by_units[size_t(t - k.min_units)];
      if (c != choice_[i]) {
        if (choice_[i] != kUnset) cost_sum_ -= k.cost[choice_[i]];
        cost_sum_ += k.cost[c];
        choice_[i] = c;
        units_[i] = k.units[c];
        changed_.push_back(i);
      }
    }
  }

  static constexpr size_t kBuckets = 256;
  static constexpr uint32_t kUnset = std::numeric_limits<uint32_t>::max();
  const PipelineDag& dag_;
  size_t n_;
  std::vector<Kind> kinds_;
  std::vector<uint32_t> kind_of_;
  size_t vcount_ = 0;
  uint32_t s_ = 0, t_ = 0;
  std::vector<uint32_t> adj_begin_, act_slot_, seg_, cur_, touched_, bfs_, path_, rev_;
  std::vector<Slot> slot_;
  std::vector<uint8_t> tag_;
  std::vector<double> flow_, cap_;
  std::vector<int64_t> pot_, dist_;
  std::vector<char> popped_;
  std::vector<int> level_;
  std::vector<std::vector<uint32_t>> buckets_ = std::vector<std::vector<uint32_t>>(kBuckets);
  std::vector<std::pair<int64_t, uint32_t>> overflow_;
  size_t phases_ = 0;
  int64_t slowest_ = 0;
  std::vector<int64_t> units_;
  std::vector<uint32_t> choice_, changed_;
  double cost_sum_ = 0;
  bool broken_ = false;
};

}  // namespace

std::string_view accounting_name(Accounting accounting) {
  return accounting == Accounting::kLowtime ? "lowtime" : "clocks";
}

PlanEvaluation evaluate(const PipelineModel& model, const PipelineDag& dag, const Plan& plan) {
  size_t n = dag.num_nodes();
  std::vector<int64_t> fin(n);
  std::vector<double> fin_s(n);
  PlanEvaluation r;
  double sum_t = 0, sum_e = 0, end_s = 0;
  for (size_t v = 0; v < n; ++v) {
    const auto& im = model.at(dag.nodes[v].stage, dag.nodes[v].instruction);
    const Candidate& c = im.candidates[plan.candidate[v]];
    int64_t start = 0;
    double start_s = 0;
    for (uint32_t k = dag.pred_begin[v]; k < dag.pred_begin[v + 1]; ++k) {
      start = std::max(start, fin[dag.preds[k]]);
      start_s = std::max(start_s, fin_s[dag.preds[k]]);
    }
    fin[v] = start + plan.units[v];
    fin_s[v] = start_s + c.time_s;
    r.time_units = std::max(r.time_units, fin[v]);
    end_s = std::max(end_s, fin_s[v]);
    r.model_cost_j += im.cost(double(plan.units[v]));
    sum_t += c.time_s;
    sum_e += c.energy_j;
  }
  double p = model.blocking_power_w;
  r.energy_j = r.model_cost_j + double(model.stages) * double(r.time_units) * model.unit_s * p;
  r.measured_time_s = end_s;
  r.measured_energy_j = sum_e + p * (double(model.stages) * end_s - sum_t);
  return r;
}

void Frontier::for_each_plan(const std::function<void(size_t, const Plan&)>& f) const {
  Plan plan = start_;
  for (size_t g = 0; g < change_begin_.size(); ++g) {
    size_t end = g + 1 < change_begin_.size() ? change_begin_[g + 1] : changes_.size();
    for (size_t k = change_begin_[g]; k < end; ++k) {
      plan.units[changes_[k].node] = changes_[k].units;
      plan.candidate[changes_[k].node] = changes_[k].candidate;
    }
    if (point_of_plan_[g] >= 0) f(size_t(point_of_plan_[g]), plan);
  }
}

Plan Frontier::plan(size_t i) const {
  Plan out;
  for_each_plan([&](size_t k, const Plan& p) {
    if (k == i) out = p;
  });
  return out;
}

Result<Frontier> solve_frontier(const PipelineModel& model, const PipelineDag& dag,
                                const FrontierOptions& options) {
  if (model.stages != dag.stages)
    return make_error("", "the model has " + std::to_string(model.stages) + " stages, the DAG " +
                              std::to_string(dag.stages));
  for (const auto& im : model.instructions) {
    if (im.candidates.empty())
      return make_error("", "stage " + std::to_string(im.stage) + " has no candidates");
  }
  const size_t n = dag.num_nodes();
  for (const auto& im : model.instructions) {
    if (im.max_units() - im.min_units() > 1'000'000)
      return make_error("",
                        "stage " + std::to_string(im.stage) + " " +
                            std::string(instruction_name(im.instruction)) + " spans " +
                            std::to_string(im.max_units() - im.min_units()) + " time units",
                        "use a coarser --unit-time (lowtime uses 1 ms, or 0.1 ms for the A40 files)");
  }
  std::vector<Kind> kinds;
  for (const auto& im : model.instructions) kinds.push_back(make_kind(im, options.accounting));
  Solver solver(dag, std::move(kinds));
  Frontier fr;
  fr.accounting = options.accounting;
  const double per_unit_j = double(model.stages) * model.unit_s * model.blocking_power_w;

  // 1. Generate the plan of every deadline, recording only what changes from one plan to the next.
  std::vector<int64_t> gen_time;
  std::vector<double> gen_energy;
  solver.run([&](int64_t deadline) {
    const auto& units = solver.units();
    const auto& choice = solver.choice();
    if (gen_time.empty()) {
      fr.start_.units = units;
      fr.start_.candidate.resize(n);
      for (size_t i = 0; i < n; ++i) fr.start_.candidate[i] = solver.kind(i).candidate[choice[i]];
    }
    fr.change_begin_.push_back(fr.changes_.size());
    if (!gen_time.empty()) {
      for (uint32_t i : solver.changed())
        fr.changes_.push_back({i, solver.kind(i).candidate[choice[i]], units[i]});
    }
    gen_time.push_back(deadline);
    gen_energy.push_back(solver.cost_sum() + double(deadline) * per_unit_j);
  });
  if (solver.broken()) return make_error("", "internal: the frontier solver lost its optimality invariant");
  fr.stats.phases = solver.phases();
  fr.stats.plans = gen_time.size();
  fr.stats.max_time_units = solver.slowest_units();
  fr.stats.min_time_units = gen_time.empty() ? 0 : gen_time.back();

  // 2. Pareto candidates: plans are generated slowest first, so walk them backwards (fastest first).
  std::vector<char> keep(gen_time.size(), 0);
  double best = kInf;
  for (size_t g = gen_time.size(); g-- > 0;) {
    if (gen_energy[g] < best) keep[g] = 1, best = gen_energy[g];
  }

  // 3. Replay the kept plans: check each one's DAG makespan against its deadline and evaluate both
  // accountings on the plan itself (as evaluate() does, with the costs tabulated per time unit).
  struct Table {
    int64_t min_units = 0;
    std::vector<double> cost;  // fitted cost per unit from min_units to max_units
  };
  std::vector<Table> tables;
  for (const auto& im : model.instructions) {
    Table tb;
    tb.min_units = im.min_units();
    for (int64_t u = im.min_units(); u <= im.max_units(); ++u) tb.cost.push_back(im.cost(double(u)));
    tables.push_back(std::move(tb));
  }
  std::vector<uint32_t> kind_of(n);
  for (size_t i = 0; i < n; ++i)
    kind_of[i] = uint32_t(dag.nodes[i].stage * 2 + int(dag.nodes[i].instruction));
  fr.point_of_plan_.assign(gen_time.size(), -1);
  std::vector<FrontierPoint> pts;  // in generation order
  std::vector<size_t> pts_gen;
  Plan plan = fr.start_;
  // Nodes are evaluated in id (topological) order with running sums and maxima; each node's running
  // values are kept, so a plan only re-evaluates from its first node that changed since the last
  // evaluated plan (the same additions in the same order: the same numbers as a full pass).
  struct Running {
    int64_t span;
    double span_s, cost, sum_t, sum_e;
  };
  std::vector<int64_t> fin(n);
  std::vector<double> fin_s(n);
  std::vector<Running> running(n);
  size_t stale = 0;  // first node whose fin / running values are out of date
  const double p_block = model.blocking_power_w;
  for (size_t g = 0; g < gen_time.size(); ++g) {
    size_t end = g + 1 < fr.change_begin_.size() ? fr.change_begin_[g + 1] : fr.changes_.size();
    for (size_t k = fr.change_begin_[g]; k < end; ++k) {
      plan.units[fr.changes_[k].node] = fr.changes_[k].units;
      plan.candidate[fr.changes_[k].node] = fr.changes_[k].candidate;
      stale = std::min(stale, size_t(fr.changes_[k].node));
    }
    if (!keep[g]) continue;
    int64_t span = 0;
    double span_s = 0, cost = 0, sum_t = 0, sum_e = 0;
    if (stale > 0) {
      const Running& r = running[stale - 1];
      span = r.span, span_s = r.span_s, cost = r.cost, sum_t = r.sum_t, sum_e = r.sum_e;
    }
    for (size_t v = stale; v < n; ++v) {
      int64_t start = 0;
      double start_s = 0;
      for (uint32_t k = dag.pred_begin[v]; k < dag.pred_begin[v + 1]; ++k) {
        start = std::max(start, fin[dag.preds[k]]);
        start_s = std::max(start_s, fin_s[dag.preds[k]]);
      }
      const Table& tb = tables[kind_of[v]];
      const Candidate& c = model.instructions[kind_of[v]].candidates[plan.candidate[v]];
      fin[v] = start + plan.units[v];
      fin_s[v] = start_s + c.time_s;
      span = std::max(span, fin[v]);
      span_s = std::max(span_s, fin_s[v]);
      cost += tb.cost[size_t(plan.units[v] - tb.min_units)];
      sum_t += c.time_s;
      sum_e += c.energy_j;
      running[v] = Running{span, span_s, cost, sum_t, sum_e};
    }
    stale = n;
    if (span > gen_time[g])
      return make_error("", "internal: the plan for " + std::to_string(gen_time[g]) + " units takes " +
                                std::to_string(span) + " units");
    FrontierPoint p;
    p.time_units = span;
    p.time_s = double(span) * model.unit_s;
    p.model_cost_j = cost;
    p.energy_j = cost + double(span) * per_unit_j;
    p.measured_time_s = span_s;
    p.measured_energy_j = sum_e + p_block * (double(model.stages) * span_s - sum_t);
    pts.push_back(p);
    pts_gen.push_back(g);
  }
  // 4. The evaluated makespan can be shorter than the deadline (clocks accounting); keep the Pareto set.
  best = kInf;
  for (size_t k = pts.size(); k-- > 0;) {
    if (pts[k].energy_j < best && (fr.points.empty() || pts[k].time_units > fr.points.back().time_units)) {
      best = pts[k].energy_j;
      fr.point_of_plan_[pts_gen[k]] = int64_t(fr.points.size());
      fr.points.push_back(pts[k]);
    }
  }
  return fr;
}

}  // namespace emo::pipeline
