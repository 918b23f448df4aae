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
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "emo/base/parallel.h"
#include "emo/pipeline/pipeline.h"

namespace emo::pipeline {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kFar = std::numeric_limits<int64_t>::max() / 4;

// A stack of vertices or slots with room for all of them, so that a push is a plain store (the hot
// loops push millions of times).
class Stack {
 public:
  void reset(size_t capacity) { data_.assign(capacity, 0), size_ = 0; }
  void push_back(uint32_t x) { data_[size_++] = x; }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  void resize(size_t n) { size_ = n; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint32_t back() const { return data_[size_ - 1]; }
  uint32_t operator[](size_t i) const { return data_[i]; }
  const uint32_t* begin() const { return data_.data(); }
  const uint32_t* end() const { return data_.data() + size_; }

 private:
  std::vector<uint32_t> data_;
  size_t size_ = 0;
};

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

// One node's interval in a phase: its two ends' potentials differ by `tension` at θ = 0 and move
// by min(d_in, θ) and min(d_out, θ) (their distances, clipped to the phase's span).
struct PlanInput {
  uint32_t node;
  int64_t tension, d_in, d_out;
};

// What the plans of one phase need: the deadlines deadline − θ for θ = 0 .. span − 1; at θ = 0 the
// nodes of `first` (every node whose interval moved since its last plan) are set, at θ >= 1 those
// of `moving` (the nodes whose interval moves within the phase).
struct PhaseInput {
  int64_t deadline = 0, span = 0;
  std::vector<PlanInput> first, moving;
};

class Solver {
 public:
  Solver(const PipelineDag& dag, std::vector<Kind> kinds)
      : dag_(dag), n_(dag.num_nodes()), kinds_(std::move(kinds)) {
    kind_of_.resize(n_);
    for (size_t i = 0; i < n_; ++i)
      kind_of_[i] = uint32_t(dag.nodes[i].stage * 2 + int(dag.nodes[i].instruction));
    build_network();
  }

  // Runs every phase; calls on_phase(PhaseInput&&) with what the plans of the phase's deadlines
  // need (see PhaseInput), for T from the slowest makespan down to the fastest.
  template <class OnPhase>
  void run(OnPhase&& on_phase) {
    init_potentials();
    int64_t dt = 0;
    auto d_clip = [&](uint32_t v) { return std::min(dist_[v], dt); };  // kFar where not reached
    std::vector<uint32_t> moving, pending;
    std::vector<char> is_pending(n_, 1);
    for (uint32_t i = 0; i < n_; ++i) pending.push_back(i);
    auto add_pending = [&](const std::vector<uint32_t>& nodes) {
      for (uint32_t i : nodes) {
        if (!is_pending[i]) is_pending[i] = 1, pending.push_back(i);
      }
    };
    auto entries = [&](const std::vector<uint32_t>& nodes, std::vector<PlanInput>& out) {
      out.reserve(nodes.size());
      for (uint32_t i : nodes)
        out.push_back(PlanInput{i, pot_[2 * i] - pot_[2 * i + 1], d_clip(2 * i), d_clip(2 * i + 1)});
    };
    while (true) {
      dt = dijkstra();
      ++phases_;
      if (dt >= kFar || broken_) {  // cannot happen: node and precedence arcs always leave a path open
        broken_ = true;
        return;
      }
      PhaseInput ph;
      ph.deadline = -(pot_[t_] - pot_[s_]);
      ph.span = dt;
      // Only nodes whose two ends are at different distances change duration within this phase.
      moving.clear();
      for (uint32_t i = 0; i < n_; ++i) {
        if (d_clip(2 * i) != d_clip(2 * i + 1)) moving.push_back(i);
      }
      if (dt > 0) {  // (the first phase can have none: the slowest plan's critical path is tight)
        add_pending(moving);
        entries(pending, ph.first);
        for (uint32_t i : pending) is_pending[i] = 0;
        pending.clear();
        if (dt > 1) entries(moving, ph.moving);
        on_phase(std::move(ph));
      }
      add_pending(moving);
      // The potentials move by min(dist, Δ): all by Δ but for the vertices reached closer than the
      // sink. Only differences of potentials matter, so the common Δ is left out of all of them.
      for (uint32_t v : touched_) pot_[v] += d_clip(v) - dt;
      if (!max_flow(dt)) {  // unbounded: every critical path is at its fastest; this is the fastest plan
        dt = 0;           // so that d_clip() is 0 everywhere
        PhaseInput last;
        last.deadline = -(pot_[t_] - pot_[s_]);
        last.span = 1;
        entries(pending, last.first);
        on_phase(std::move(last));
        return;
      }
    }
  }

  size_t phases() const { return phases_; }
  int64_t slowest_units() const { return slowest_; }
  bool broken() const { return broken_; }

  const Kind& kind(size_t node) const { return kinds_[kind_of_[node]]; }
  const std::vector<Kind>& kinds() const { return kinds_; }
  const std::vector<uint32_t>& kind_of() const { return kind_of_; }

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
    bfs_.assign(vcount_, 0);
    cur_.assign(vcount_, 0);
    touched_.reset(vcount_);
    path_.reset(vcount_);
    hits_.resize(slot_.size() + 1);  // one per relaxed slot, and the source
  }

  void set_slot(uint32_t k, double cap, int32_t cost) {
    cap_[k] = cap;
    if (slot_[k].open == (cap > 0) && slot_[k].cost == cost) return;  // only the capacity moved
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
  // The last round of the previous max flow left level_ >= base_ on exactly the vertices that reach the
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
    num_hits_ = 0;
    auto relax = [&](uint32_t u, uint32_t w, int64_t nd, int64_t d) {
      if (nd < d) {  // a negative reduced cost: the potentials are broken (a bug); stop rather than loop
        broken_ = true;
        return;
      }
      if (level_[w] >= base_) {  // w reaches the sink at zero reduced cost: the sink is at most nd away
        reach_sink = std::min(reach_sink, nd);
        hits_[num_hits_++] = Hit{nd, level_[w] + 1, u};
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
    relax(s_, s_, 0, 0);
    auto scan = [&](uint32_t u, int64_t d) {
      popped_[u] = 1;
      int64_t pu = pot_[u];
      for (uint32_t k = adj_begin_[u]; k < adj_begin_[u + 1]; ++k) {
        const Slot& sl = slot_[k];
        if (!sl.open || popped_[sl.to]) continue;
        relax(u, sl.to, d + sl.cost + pu - pot_[sl.to], d);
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
  // flow optimal. On return (true), level_ >= base_ marks the vertices that still reach the sink, which
  // the next dijkstra() uses (the sink at base_ itself).
  bool max_flow(int64_t dt) {
    // Levels are stored offset by a base that moves past every stored level at each round, so
    // that a new round needs no pass to clear the previous one's: level_[v] < base_ is "no level".
    int* level = level_.data();
    uint32_t* queue = bfs_.data();
    const uint32_t* adj = adj_begin_.data();
    const Slot* slot = slot_.data();
    const int64_t* pot = pot_.data();
    first_levels(dt);
    if (level[s_] >= base_ && !blocking_flow()) return false;
    while (true) {
      if (base_ > std::numeric_limits<int>::max() / 2) {
        std::fill(level_.begin(), level_.end(), -1);
        base_ = 0;
      }
      base_ = base_ + int(vcount_) + 1;
      int base = base_;
      queue[0] = t_;
      level[t_] = base;
      cur_[t_] = adj[t_];
      size_t tail = 1;
      for (size_t q = 0; q < tail && level[s_] < base; ++q) {
        uint32_t w = queue[q];
        int64_t pw = pot[w];
        int next = level[w] + 1;
        for (uint32_t k = adj[w], e = adj[w + 1]; k < e; ++k) {
          const Slot& sl = slot[k];  // w -> u; the arc u -> w is mirrored in in_open / in_cost
          uint32_t u = sl.to;
          if (level[u] < base && sl.in_open && sl.in_cost + pot[u] - pw == 0) {
            level[u] = next;
            cur_[u] = adj[u];
            queue[tail++] = u;
          }
        }
      }
      if (level[s_] < base) return true;
      if (!blocking_flow()) return false;
    }
  }

  // The first round's levels, without searching the sink's side again. The previous phase's last
  // round labelled exactly the vertices that reached the sink, with their hop distances. The potential
  // update moved that whole side by the same amount and every vertex outside it by no more, so no arc
  // inside it changed and no arc from it to the outside became admissible: its labels are still the
  // hop distances. The arcs that did become admissible into it are those Dijkstra reached it by at the
  // sink's distance (hits_). The search goes on from them, level by level, as far as the source's
  // level: the same levels, for every vertex the blocking flow can visit, as a full search.
  void first_levels(int64_t dt) {
    seeds_.clear();
    for (size_t i = 0; i < num_hits_; ++i) {
      const Hit& h = hits_[i];
      if (h.dist == dt) seeds_.push_back({h.level, h.from});
    }
    std::sort(seeds_.begin(), seeds_.end());
    int* level = level_.data();
    const uint32_t* adj = adj_begin_.data();
    const Slot* slot = slot_.data();
    const int64_t* pot = pot_.data();
    uint32_t* queue = bfs_.data();  // level by level: [begin, end) is level `at`, appended behind
    size_t begin = 0, end = 0, k = 0;
    int at = 0;
    while (level[s_] < base_) {
      if (begin == end) {
        if (k == seeds_.size()) return;
        at = seeds_[k].first;
      }
      for (; k < seeds_.size() && seeds_[k].first == at; ++k) {
        uint32_t u = seeds_[k].second;
        if (level[u] >= base_) continue;
        level[u] = at;
        cur_[u] = adj[u];
        queue[end++] = u;
      }
      size_t tail = end;
      for (size_t q = begin; q < end; ++q) {
        uint32_t w = queue[q];
        int64_t pw = pot[w];
        for (uint32_t e = adj[w], last = adj[w + 1]; e < last; ++e) {
          const Slot& sl = slot[e];
          uint32_t u = sl.to;
          if (level[u] < base_ && sl.in_open && sl.in_cost + pot[u] - pw == 0) {
            level[u] = at + 1;
            cur_[u] = adj[u];
            queue[tail++] = u;
          }
        }
      }
      begin = end, end = tail;
      ++at;
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
      int want = level_[u] - 1;
      uint32_t k = cur_[u], e = adj_begin_[u + 1];
      for (; k < e; ++k) {
        const Slot& sl = slot_[k];
        if (level_[sl.to] == want && sl.open && sl.cost + pu - pot_[sl.to] == 0) {
          cur_[u] = k;
          path_.push_back(k);
          u = sl.to;
          advanced = true;
          break;
        }
      }
      if (advanced) continue;
      cur_[u] = e;
      if (u == s_) return true;
      level_[u] = -1;  // dead end (below any base)
      uint32_t back = path_.back();
      path_.pop_back();
      u = slot_[rev_[back]].to;
      ++cur_[u];
    }
  }

  static constexpr size_t kBuckets = 256;
  const PipelineDag& dag_;
  size_t n_;
  std::vector<Kind> kinds_;
  std::vector<uint32_t> kind_of_;
  size_t vcount_ = 0;
  uint32_t s_ = 0, t_ = 0;
  std::vector<uint32_t> adj_begin_, act_slot_, seg_, cur_, bfs_, rev_;
  Stack touched_, path_;  // (each holds a vertex, or a path's slot, at most once)
  std::vector<Slot> slot_;
  std::vector<uint8_t> tag_;
  std::vector<double> flow_, cap_;
  std::vector<int64_t> pot_, dist_;
  std::vector<char> popped_;
  std::vector<int> level_;
  int base_ = 0;  // see max_flow()
  struct Hit {
    int64_t dist;    // the sink's side reached at this distance
    int level;       // the level the arc's tail would take
    uint32_t from;   // the arc's tail
  };
  std::vector<Hit> hits_;  // (an arc is relaxed at most once a search)
  size_t num_hits_ = 0;
  std::vector<std::pair<int, uint32_t>> seeds_;
  std::vector<std::vector<uint32_t>> buckets_ = std::vector<std::vector<uint32_t>>(kBuckets);
  std::vector<std::pair<int64_t, uint32_t>> overflow_;
  size_t phases_ = 0;
  int64_t slowest_ = 0;
  bool broken_ = false;
};

// Turns the phases into plans (on the second thread): units()/choice() are the plan of the deadline
// last emitted, changed() the nodes that changed since the one before.
class Planner {
 public:
  Planner(const std::vector<Kind>& kinds, const std::vector<uint32_t>& kind_of)
      : kinds_(kinds), kind_of_(kind_of), units_(kind_of.size(), 0), choice_(kind_of.size(), kUnset) {}

  template <class Emit>
  void phase(const PhaseInput& ph, Emit&& emit) {
    changed_.clear();
    set_plan(ph.first, 0);
    emit(ph.deadline);
    for (int64_t theta = 1; theta < ph.span; ++theta) {
      changed_.clear();
      set_plan(ph.moving, theta);
      emit(ph.deadline - theta);
    }
  }

  const std::vector<uint32_t>& changed() const { return changed_; }
  const std::vector<int64_t>& units() const { return units_; }
  const std::vector<uint32_t>& choice() const { return choice_; }  // index into the node's Kind
  const Kind& kind(size_t node) const { return kinds_[kind_of_[node]]; }
  double cost_sum() const { return cost_sum_; }

 private:
  // The plan of deadline T_k − θ: each node runs for the interval its potentials give it, rounded down
  // to an allowed duration (exact in lowtime's accounting, where every whole unit is allowed).
  void set_plan(const std::vector<PlanInput>& nodes, int64_t theta) {
    for (const PlanInput& e : nodes) {
      uint32_t i = e.node;
      int64_t tension = e.tension + std::min(e.d_in, theta) - std::min(e.d_out, theta);
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

  static constexpr uint32_t kUnset = std::numeric_limits<uint32_t>::max();
  const std::vector<Kind>& kinds_;
  const std::vector<uint32_t>& kind_of_;
  std::vector<int64_t> units_;
  std::vector<uint32_t> choice_, changed_;
  double cost_sum_ = 0;
};

}  // namespace

std::string_view accounting_name(Accounting accounting) {
  return accounting == Accounting::kLowtime ? "lowtime" : "clocks";
}

namespace {

// evaluate(), with the fitted cost of node v at `units` from cost(v, units).
template <class Cost>
PlanEvaluation evaluate_with(const PipelineModel& model, const PipelineDag& dag, const Plan& plan, Cost&& cost) {
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
    r.model_cost_j += cost(v, plan.units[v]);
    sum_t += c.time_s;
    sum_e += c.energy_j;
  }
  double p = model.blocking_power_w;
  r.energy_j = r.model_cost_j + double(model.stages) * double(r.time_units) * model.unit_s * p;
  r.measured_time_s = end_s;
  r.measured_energy_j = sum_e + p * (double(model.stages) * end_s - sum_t);
  return r;
}

}  // namespace

PlanEvaluation evaluate(const PipelineModel& model, const PipelineDag& dag, const Plan& plan) {
  return evaluate_with(model, dag, plan, [&](size_t v, int64_t units) {
    return model.at(dag.nodes[v].stage, dag.nodes[v].instruction).cost(double(units));
  });
}

void Frontier::for_each_plan(const std::function<void(size_t, const Plan&)>& f) const {
  Plan plan = start_;
  for (size_t g = 0; g < change_begin_.size(); ++g) {
    size_t end = g + 1 < change_begin_.size() ? change_begin_[g + 1] : changes_.size();
    for (size_t k = change_begin_[g]; k < end; ++k) {
      plan.units[changes_[k].node] = changes_[k].units;
      plan.candidate[changes_[k].node] = changes_[k].candidate;
    }
    if (point_of_plan_[g] < 0) continue;
    const size_t i = size_t(point_of_plan_[g]);
    if (i >= fill_.size() || fill_[i].empty()) {
      f(i, plan);
      continue;
    }
    Plan filled = plan;
    for (const Change& ch : fill_[i]) {
      filled.units[ch.node] = ch.units;
      filled.candidate[ch.node] = ch.candidate;
    }
    f(i, filled);
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

  // The flow solver (this thread) hands each phase to a second thread, which turns it into the plan
  // of every deadline (1), recording only what changes from one plan to the next, and evaluates the
  // plans that may be Pareto candidates (3) as they come; which ones are (2) is known only at the end.
  // Each thread does its work in the same order as a single one would, so the numbers are the same.
  struct Evaluated {
    int64_t span;
    double span_s, cost, sum_t, sum_e;
  };
  std::vector<int64_t> gen_time;
  std::vector<double> gen_energy;
  std::vector<Evaluated> evaluated;
  struct Channel {
    std::mutex mutex;
    std::condition_variable ready;
    std::vector<PhaseInput> queue;
    bool done = false;
  } channel;
  Planner planner(solver.kinds(), solver.kind_of());
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
  const std::vector<uint32_t>& kind_of = solver.kind_of();
  {
    // Nodes are evaluated in id (topological) order with running sums and maxima; each node's running
    // values are kept, so a plan only re-evaluates from its first node that changed since the
    // previous plan (the same additions in the same order: the same numbers as a full pass).
    std::vector<int64_t> fin(n);
    std::vector<double> fin_s(n);
    std::vector<Evaluated> running(n);
    Plan plan;
    size_t stale = 0;  // first node whose fin / running values are out of date
    // Plan g is a Pareto candidate while no later plan uses as little energy (a stack of the
    // candidates so far, by increasing energy); a plan is evaluated once it has stayed a candidate
    // for kLag more plans (most never do), the candidates left at the end then.
    constexpr size_t kLag = 256;
    std::vector<size_t> candidates;
    std::vector<char> alive;
    size_t at = 0, next_eval = 0;  // the plan in `plan`; the next plan to consider evaluating
    auto evaluate_plan = [&](size_t h) {
      for (; at < h; ++at) {
        size_t end = at + 2 < fr.change_begin_.size() ? fr.change_begin_[at + 2] : fr.changes_.size();
        for (size_t k = fr.change_begin_[at + 1]; k < end; ++k) {
          const auto& ch = fr.changes_[k];
          plan.units[ch.node] = ch.units;
          plan.candidate[ch.node] = ch.candidate;
          stale = std::min(stale, size_t(ch.node));
        }
      }
      Evaluated r{0, 0, 0, 0, 0};
      if (stale > 0) r = running[stale - 1];
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
        r.span = std::max(r.span, fin[v]);
        r.span_s = std::max(r.span_s, fin_s[v]);
        r.cost += tb.cost[size_t(plan.units[v] - tb.min_units)];
        r.sum_t += c.time_s;
        r.sum_e += c.energy_j;
        running[v] = r;
      }
      stale = n;
      if (evaluated.size() <= h) evaluated.resize(h + 1);
      evaluated[h] = r;
    };
    auto evaluate_upto = [&](size_t end) {
      for (; next_eval < end; ++next_eval) {
        if (alive[next_eval]) evaluate_plan(next_eval);
      }
    };
    auto emit = [&](int64_t deadline) {
      const auto& units = planner.units();
      const auto& choice = planner.choice();
      if (gen_time.empty()) {
        fr.start_.units = units;
        fr.start_.candidate.resize(n);
        for (size_t i = 0; i < n; ++i) fr.start_.candidate[i] = planner.kind(i).candidate[choice[i]];
        plan = fr.start_;
      }
      fr.change_begin_.push_back(fr.changes_.size());
      if (!gen_time.empty()) {
        for (uint32_t i : planner.changed())
          fr.changes_.push_back({i, planner.kind(i).candidate[choice[i]], units[i]});
      }
      size_t g = gen_time.size();
      double energy = planner.cost_sum() + double(deadline) * per_unit_j;
      gen_time.push_back(deadline);
      gen_energy.push_back(energy);
      while (!candidates.empty() && !(gen_energy[candidates.back()] < energy)) {
        alive[candidates.back()] = 0;
        candidates.pop_back();
      }
      candidates.push_back(g);
      alive.push_back(1);
      if (g >= kLag) evaluate_upto(g - kLag + 1);
    };
    // The solver hands the phases over a few at a time; with a single core, each at once.
    auto consume = [&](const PhaseInput& ph) { planner.phase(ph, emit); };
    std::thread worker;
    if ((options.threads > 0 ? options.threads : worker_threads()) >= 2) {
      try {
        worker = std::thread([&] {
          std::vector<PhaseInput> batch;
          while (true) {
            {
              std::unique_lock lock(channel.mutex);
              channel.ready.wait(lock, [&] { return !channel.queue.empty() || channel.done; });
              if (channel.queue.empty()) return;
              batch.swap(channel.queue);
            }
            for (const PhaseInput& ph : batch) consume(ph);
            batch.clear();
          }
        });
      } catch (const std::system_error&) {  // no thread to be had: do it all here
      }
    }
    if (!worker.joinable()) {
      solver.run([&](PhaseInput&& ph) { consume(ph); });
    } else {
      std::vector<PhaseInput> pending;
      auto hand_over = [&](bool last) {
        {
          std::lock_guard lock(channel.mutex);
          for (auto& ph : pending) channel.queue.push_back(std::move(ph));
          channel.done = last;
        }
        channel.ready.notify_one();
        pending.clear();
      };
      try {
        solver.run([&](PhaseInput&& ph) {
          pending.push_back(std::move(ph));
          if (pending.size() >= 16) hand_over(false);
        });
      } catch (...) {  // (out of memory) let the worker finish before passing the exception on
        hand_over(true);
        worker.join();
        throw;
      }
      hand_over(true);
      worker.join();
    }
    evaluate_upto(gen_time.size());
  }
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

  // 3. Check each kept plan's DAG makespan against its deadline, and its evaluation in both
  // accountings (as evaluate() does, with the costs tabulated per time unit).
  fr.point_of_plan_.assign(gen_time.size(), -1);
  std::vector<FrontierPoint> pts;  // in generation order
  std::vector<size_t> pts_gen;
  const double p_block = model.blocking_power_w;
  for (size_t g = 0; g < gen_time.size(); ++g) {
    if (!keep[g]) continue;
    const Evaluated& r = evaluated[g];
    if (r.span > gen_time[g])
      return make_error("", "internal: the plan for " + std::to_string(gen_time[g]) + " units takes " +
                                std::to_string(r.span) + " units");
    FrontierPoint p;
    p.time_units = r.span;
    p.time_s = double(r.span) * model.unit_s;
    p.model_cost_j = r.cost;
    p.energy_j = r.cost + double(r.span) * per_unit_j;
    p.measured_time_s = r.span_s;
    p.measured_energy_j = r.sum_e + p_block * (double(model.stages) * r.span_s - r.sum_t);
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
  // 5. Clocks accounting: each node was rounded down to a clock, which leaves slack; each point's plan
  // spends it on slower clocks within its own makespan (fill_slack: the same time, no more energy), and
  // the Pareto set is taken again.
  if (options.accounting == Accounting::kClocks && options.fill_slack && !fr.points.empty()) {
    std::vector<std::vector<Frontier::Change>> fills(fr.points.size());
    std::optional<Error> broken;
    fr.for_each_plan([&](size_t i, const Plan& plan) {
      FrontierPoint& p = fr.points[i];
      Plan filled = plan;
      if (broken || fill_slack(model, dag, filled, p.time_units) == 0) return;
      PlanEvaluation ev = evaluate_with(model, dag, filled, [&](size_t v, int64_t u) {
        const Table& tb = tables[kind_of[v]];
        return tb.cost[size_t(u - tb.min_units)];
      });
      if (ev.time_units != p.time_units || !(ev.energy_j <= p.energy_j * (1 + 1e-12))) {
        broken = make_error("", "internal: filling the slack of the plan for " + std::to_string(p.time_units) +
                                    " units changed its time or raised its energy");
        return;
      }
      for (uint32_t v = 0; v < n; ++v) {
        if (filled.candidate[v] != plan.candidate[v]) fills[i].push_back({v, filled.candidate[v], filled.units[v]});
      }
      p.energy_j = ev.energy_j;
      p.model_cost_j = ev.model_cost_j;
      p.measured_time_s = ev.measured_time_s;
      p.measured_energy_j = ev.measured_energy_j;
    });
    if (broken) return *broken;
    // Points are time ascending: keep each that uses less energy than every faster one kept.
    std::vector<int64_t> renumber(fr.points.size(), -1);
    std::vector<FrontierPoint> kept;
    std::vector<std::vector<Frontier::Change>> kept_fill;
    for (size_t i = 0; i < fr.points.size(); ++i) {
      if (!kept.empty() && !(fr.points[i].energy_j < kept.back().energy_j)) continue;
      renumber[i] = int64_t(kept.size());
      kept.push_back(fr.points[i]);
      kept_fill.push_back(std::move(fills[i]));
    }
    for (int64_t& pi : fr.point_of_plan_) {
      if (pi >= 0) pi = renumber[size_t(pi)];
    }
    fr.points = std::move(kept);
    fr.fill_ = std::move(kept_fill);
  }
  return fr;
}

}  // namespace emo::pipeline
