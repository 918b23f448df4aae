// The optimizer's driver: the default plan and the targets, the DP's plan (dp.cpp) and the baselines
// (baselines.cpp); the better of the DP's plan and the best baseline improved by the search moves
// (moves.cpp) is the policy; and the exhaustive oracle. See emo/optimize/optimize.h; the pricing of a
// plan is in pricing.cpp.
#include "emo/optimize/optimize.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "emo/base/parallel.h"
#include "emo/dist/dist.h"
#include "internal.h"

namespace emo::optimize {

namespace detail {

Search::Search(const Problem& problem, const OptimizeOptions& options, const Prepared& prepared, Solution& solution)
    : pr(problem), opt(options), x(prepared), s(solution), P(problem.packing->packs.size()),
      gpu_packs(problem.packing->gpus.size()),
      parallel(problem.workload != nullptr && problem.workload->graph.num_points() >= options.parallel_min_points),
      threads(options.threads > 0 ? options.threads : worker_threads()),
      best(solution.default_plan), gpus(problem.packing->gpus.size()), packs(problem.packing->packs.size()),
      replica_sets(problem.packing->replica_set),
      graph(problem.workload != nullptr ? &problem.workload->graph : nullptr) {
  for (uint32_t k = 0; k < P; ++k) gpu_packs[problem.packing->packs[k].rank.index()].push_back(k);
  best.name = "policy";
  set_points(problem.workload != nullptr ? double(problem.workload->graph.num_points()) : 1.0);
}

void Search::set_points(double n) {
  points = std::max(1.0, n);
  // The polish is bounded by `polish_replays`, and on large graphs by work: at most
  // `polish_point_visits` replayed points in all, but never under 200 replays; the block moves alike.
  polish_left = int(std::min<double>(opt.polish_replays, std::max(200.0, opt.polish_point_visits / points)));
  block_left = int(std::min<double>(opt.block_replays, std::max(100.0, opt.block_point_visits / points)));
}

Plan Search::check(Plan pl) {
  pl.feasible = pl.time_ns <= s.plan_target_ns;
  ++s.replays;
  return pl;
}

Result<bool> any_of_processes(dist::Comm& comm, bool mine, int tag) {
  auto all = dist::all_combine(comm, tag, {mine ? 1 : 0}, [](const std::vector<std::vector<int64_t>>& parts) {
    int64_t any = 0;
    for (const auto& v : parts) any |= v.empty() ? 0 : v[0];
    return std::vector<int64_t>{any};
  });
  if (!all) return all.error();
  if (all->size() != 1) return make_error("optimize", "a process's answer arrived cut short");
  return (*all)[0] != 0;
}

bool Search::any_process(bool mine, int tag) {
  if (pricer == nullptr) return mine;
  auto any = any_of_processes(pricer->comm(), mine, tag);
  if (!any && failed.ok()) failed = any.error();
  return any && *any;
}

Plan Search::replay(std::vector<int> clocks, const char* name) {
  if (pricer == nullptr) return check(predict_prepared(pr, x, std::move(clocks), name));
  std::vector<std::vector<int>> one{std::move(clocks)};
  return std::move(priced(one, name).front());
}

std::vector<Plan> Search::priced(std::vector<std::vector<int>>& trials, const char* name) {
  std::vector<Plan> out;
  if (failed.ok()) {
    const size_t mine = pr.packing->packs.size();
    std::vector<std::vector<int>> slices;  // whole: each trial's slice of this process's packs
    if (whole) {
      for (std::vector<int>& clocks : trials) {
        for (size_t k = 0; k < clocks.size() && k < held.size(); ++k) {
          if (held[k]) clocks[k] = pr.default_clock_mhz;
        }
        slices.emplace_back();  // short of the slice: refused by the pricer, on every process
        if (first_pack + mine <= clocks.size())
          slices.back().assign(clocks.begin() + ptrdiff_t(first_pack), clocks.begin() + ptrdiff_t(first_pack + mine));
      }
    }
    auto pl = pricer->price_all(whole ? slices : trials, name);
    if (pl) {
      for (size_t i = 0; i < pl->size(); ++i) {
        if (whole) (*pl)[i].pack_clock_mhz = std::move(trials[i]);
        out.push_back(check(std::move((*pl)[i])));
      }
      return out;
    }
    failed = pl.error();
  }
  for (size_t i = 0; i < trials.size(); ++i) {
    Plan none;  // not priced: never taken
    none.name = name;
    none.energy_j = std::numeric_limits<double>::infinity();
    none.time_ns = std::numeric_limits<int64_t>::max();
    out.push_back(std::move(none));
  }
  return out;
}

std::vector<Plan> Search::check_all(std::vector<std::vector<int>>& trials, const char* name) {
  if (pricer != nullptr) {  // over the parts: side by side, part_batch at a time, every process in step
    std::vector<Plan> out;
    for (size_t at = 0; at < trials.size(); at += part_batch) {
      const size_t end = std::min(trials.size(), at + part_batch);
      std::vector<std::vector<int>> batch(std::make_move_iterator(trials.begin() + ptrdiff_t(at)),
                                          std::make_move_iterator(trials.begin() + ptrdiff_t(end)));
      for (Plan& pl : priced(batch, name)) out.push_back(std::move(pl));
    }
    return out;
  }
  std::vector<Plan> out(trials.size());
  auto one = [&](size_t i) { out[i] = predict_prepared(pr, x, std::move(trials[i]), name); };
  const double n = double(pr.workload->graph.num_points());
  if (parallel || double(trials.size()) * n >= double(opt.parallel_min_points) * 16) {
    parallel_for(trials.size(), one, threads);
  } else {
    for (size_t i = 0; i < trials.size(); ++i) one(i);
  }
  for (Plan& pl : out) pl = check(std::move(pl));
  return out;
}

}  // namespace detail

using namespace detail;

namespace {

// The targets derived from the default plan's time.
void set_targets(const OptimizeOptions& opt, Solution& s) {
  s.target_ns = int64_t(std::floor(double(s.default_plan.time_ns) * (1 + opt.max_slowdown)));
  s.plan_target_ns =
      int64_t(std::floor(double(s.default_plan.time_ns) * (1 + opt.max_slowdown * (1 - opt.reserve))));
  s.default_plan.feasible = true;
}

// The default clocks' plan (replayed into `tl0`, `dur0`) and the targets derived from its time.
void default_plan_and_targets(const Problem& pr, const Prepared& x, const OptimizeOptions& opt, Solution& s,
                              replay::Timeline& tl0, std::vector<int64_t>& dur0) {
  const size_t P = pr.packing->packs.size();
  s.default_plan = predict_prepared(pr, x, std::vector<int>(P, pr.default_clock_mhz), "default", &tl0, &dur0);
  s.replays = 1;
  set_targets(opt, s);
}

// The baselines, each verified by the same replay as the policy.
std::vector<Plan> baselines(Search& c) {
  return {static_clock_baseline(c), slack_only_baseline(c), per_phase_baseline(c)};
}

// The search's start: the DP's plan or, where the models price one lower, the best baseline — so that
// the policy is never worse than a baseline at the same bound. Returns the start's name.
std::string seed_search(Search& c, const std::vector<Plan>& base) {
  std::string from = "dp";
  for (const Plan& b : base) {
    if (c.beats_best(b)) {
      c.best = b;
      from = b.name;
    }
  }
  c.best.name = "policy";
  return from;
}

// The caller's start (OptimizeOptions::start_clocks, the step's packs' clocks) where it is every pack's
// candidate clock and the models price it lower.
void from_start_clocks(Search& c, Solution& s) {
  const std::vector<int>& f = c.opt.start_clocks;
  if (f.size() != c.P || !std::all_of(f.begin(), f.end(), [&](int mhz) {
        return std::find(c.x.clocks.begin(), c.x.clocks.end(), mhz) != c.x.clocks.end();
      }))
    return;
  if (Plan start = c.replay(f, "policy"); c.beats_best(start)) {
    c.best = std::move(start);
    s.policy_from = "first_solve";
  }
}

// The search moves from the start: the polish, pairs on small cases, blocks and kick and repair on
// cases of up to 64 packs.
void improve(Search& c) {
  polish_single(c);
  polish_pairs(c);
  if (c.P <= 64) {
    polish_blocks(c);
    kick_and_repair(c);
  }
}

// Over the parts: whether any process's clocks of a plan moved in issue order.
constexpr int kTagIssueChanged = 54;

// The policy and the baselines as they will run: a change that would land after the next pack's change
// on its GPU is dropped (clocks_in_issue_order: that pack keeps the clock before it, which costs energy,
// not time), and the plan is priced again. A plan that would then miss the target stays as it was. The
// best baseline replaces the policy where it is now priced lower (never lose to a baseline).
void in_issue_order(Search& c, Solution& s) {
  std::vector<Plan*> plans{&c.best};
  for (Plan& b : s.baselines) plans.push_back(&b);
  const std::vector<const Plan*> in(plans.begin(), plans.end());
  std::vector<std::vector<int>> clocks = c.pricer != nullptr
                                             ? clocks_in_issue_order_part(c.pr, *c.pricer, in, c.failed)
                                             : clocks_in_issue_order(c.pr, in);
  for (size_t i = 0; i < plans.size(); ++i) {
    Plan& p = *plans[i];
    if (!c.any_process(clocks[i] != p.pack_clock_mhz, kTagIssueChanged)) continue;
    Plan q = c.replay(std::move(clocks[i]), p.name.c_str());
    if (q.feasible || !p.feasible) p = std::move(q);
  }
  for (const Plan& b : s.baselines) {
    if (c.beats_best(b)) {
      c.best = b;
      c.best.name = "policy";
      s.policy_from = b.name;
    }
  }
}

}  // namespace

int clock_to_refine(const pack::Packing& packing, const Plan& plan, const std::vector<int>& profiled_mhz,
                    double max_clock_mhz) {
  std::vector<std::pair<int, int64_t>> weighted;  // (clock, busy ns) per pack
  int64_t total = 0;
  for (size_t k = 0; k < packing.packs.size() && k < plan.pack_clock_mhz.size(); ++k) {
    if (packing.packs[k].busy_ns <= 0) continue;
    weighted.emplace_back(plan.pack_clock_mhz[k], packing.packs[k].busy_ns);
    total += packing.packs[k].busy_ns;
  }
  if (total <= 0 || profiled_mhz.empty()) return 0;
  std::sort(weighted.begin(), weighted.end());
  int median = 0;
  int64_t acc = 0;
  for (const auto& [clock, busy] : weighted) {
    acc += busy;
    if (2 * acc >= total) {
      median = clock;
      break;
    }
  }
  int nearest = std::numeric_limits<int>::max();
  for (int c : profiled_mhz) nearest = std::min(nearest, std::abs(c - median));
  return median > 0 && double(nearest) > kRefineGapFrac * max_clock_mhz ? median : 0;
}

std::vector<RefineClock> clocks_to_refine(const pack::Packing& packing, const Solution& solution,
                                          std::vector<int> profiled_mhz, double max_clock_mhz) {
  std::vector<RefineClock> out;
  std::vector<std::pair<std::string, const Plan*>> plans{{"policy", &solution.policy}};
  for (const Plan& b : solution.baselines) plans.emplace_back(b.name, &b);
  for (const auto& [name, p] : plans) {
    if (const int f = clock_to_refine(packing, *p, profiled_mhz, max_clock_mhz); f > 0) {
      out.push_back({name, f});
      profiled_mhz.push_back(f);
    }
  }
  return out;
}

namespace {
// The checks optimize() makes of its options and problem before it prices anything.
Status check_problem(const OptimizeOptions& opt, size_t packs) {
  if (!(opt.max_slowdown >= 0)) return make_error("--max-slowdown", "must be a number >= 0");
  if (!(opt.reserve >= 0 && opt.reserve < 1)) return make_error("--reserve", "must be in [0, 1)");
  if (packs == 0) return make_error("optimize", "no packs to optimize");
  return {};
}

// solve_start_part's message: every process's pack count, then its GPUs' replica sets and idle powers.
constexpr int kTagDpGpus = 50;
}  // namespace

namespace {
// optimize() (`moves`: the search moves and the issue-order pricing after the first stages) or its first
// stages alone (solve_start).
Result<Solution> solve(const Problem& pr, const OptimizeOptions& opt, bool moves) {
  const auto t0 = std::chrono::steady_clock::now();
  EMO_RETURN_IF_ERROR(check_problem(opt, pr.packing->packs.size()));
  const Prepared x = prepare(pr, true);
  if (x.clocks.empty()) return make_error("optimize", "no candidate clocks");
  Solution s;
  replay::Timeline tl0;
  std::vector<int64_t> dur0;
  default_plan_and_targets(pr, x, opt, s, tl0, dur0);
  Search c(pr, opt, x, s);
  dp_search(c, dur0, tl0);
  s.baselines = baselines(c);
  s.policy_from = seed_search(c, s.baselines);
  if (moves) {
    from_start_clocks(c, s);
    improve(c);
    in_issue_order(c, s);
  }
  s.policy = c.best;
  s.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return s;
}
}  // namespace

Result<Solution> optimize(const Problem& pr, const OptimizeOptions& opt) { return solve(pr, opt, true); }

Result<Solution> solve_start(const Problem& pr, const OptimizeOptions& opt) { return solve(pr, opt, false); }

namespace {
// solve_part's message: every process's packs (the step's GPU of each, held at the default clock, its
// clock in the search's start).
constexpr int kTagWholeStep = 55;

// The search moves over the parts work on the whole step's packs (in rank order, so that each move is tried
// in the order one process tries it): every process's packs, their GPUs and held packs, and the start's
// clocks, on every process.
Status to_whole_step(Search& c, const graph::GraphPart& part, dist::Comm& comm) {
  const pack::Packing& p = *c.pr.packing;
  std::vector<int64_t> mine{int64_t(p.packs.size())};
  for (size_t k = 0; k < p.packs.size(); ++k) {
    mine.push_back(int64_t(part.first_rank + p.packs[k].rank.index()));
    mine.push_back(c.x.held[k]);
    mine.push_back(c.best.pack_clock_mhz[k]);
  }
  auto all = dist::all_gather(comm, kTagWholeStep, dist::to_bytes(mine));
  if (!all) return make_error("optimize", "the processes' packs: " + all.error().message());
  std::vector<std::vector<uint32_t>> gpu_packs(c.gpus);
  std::vector<int> clocks;
  std::vector<char> held;
  for (size_t q = 0; q < all->size(); ++q) {
    auto v = dist::from_bytes((*all)[q], int(q));
    if (!v) return v.error();
    if (v->empty() || (*v)[0] < 0 || v->size() != 1 + 3 * size_t((*v)[0]))
      return make_error("optimize", fmt::format("process {} sent its packs cut short", q));
    if (int(q) == comm.rank()) c.first_pack = clocks.size();
    for (size_t i = 1; i < v->size(); i += 3) {
      const int64_t gpu = (*v)[i];
      if (gpu < 0 || size_t(gpu) >= gpu_packs.size())
        return make_error("optimize", fmt::format("process {} sent a pack of GPU {}, of {}", q, gpu, gpu_packs.size()));
      gpu_packs[size_t(gpu)].push_back(uint32_t(clocks.size()));
      held.push_back((*v)[i + 1] != 0 ? 1 : 0);
      clocks.push_back(int((*v)[i + 2]));
    }
  }
  c.P = clocks.size();
  c.gpu_packs = std::move(gpu_packs);
  c.held = std::move(held);
  c.best.pack_clock_mhz = std::move(clocks);
  c.whole = true;
  return {};
}

// Back to this process's packs: the best plan's slice.
void to_own_packs(Search& c) {
  const pack::Packing& p = *c.pr.packing;
  std::vector<int>& clocks = c.best.pack_clock_mhz;
  clocks = std::vector<int>(clocks.begin() + ptrdiff_t(c.first_pack),
                            clocks.begin() + ptrdiff_t(c.first_pack + p.packs.size()));
  c.P = p.packs.size();
  c.gpu_packs.assign(p.gpus.size(), {});
  for (uint32_t k = 0; k < c.P; ++k) c.gpu_packs[p.packs[k].rank.index()].push_back(k);
  c.whole = false;
}

// solve_start_part() and, with `moves`, optimize_part().
Result<Solution> solve_part(const Problem& pr, const graph::GraphPart& part, const OptimizeOptions& opt,
                            dist::Comm& comm, bool moves) {
  const auto t0 = std::chrono::steady_clock::now();
  const pack::Packing& p = *pr.packing;
  // Every process's packs, GPUs' replica sets and idle powers at the default clock, in rank order.
  std::vector<int64_t> mine{int64_t(p.packs.size()), int64_t(p.gpus.size())};
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    mine.push_back(gi < p.replica_set.size() ? int64_t(p.replica_set[gi]) : -1);
    mine.push_back(gi < pr.models->gpus.size()
                       ? std::bit_cast<int64_t>(pr.models->idle_power_w(graph::RankIndex(uint32_t(gi)), pr.default_clock_mhz))
                       : 0);
  }
  auto all = dist::all_gather(comm, kTagDpGpus, dist::to_bytes(mine));
  if (!all) return make_error("optimize", "the processes' GPUs: " + all.error().message());
  size_t packs = 0;
  std::vector<uint32_t> sets;
  double idle_all_w = 0;
  for (size_t q = 0; q < all->size(); ++q) {
    auto v = dist::from_bytes((*all)[q], int(q));
    if (!v) return v.error();
    if (v->size() < 2 || (*v)[1] < 0 || v->size() != 2 + 2 * size_t((*v)[1]))
      return make_error("optimize", fmt::format("process {} sent its GPUs cut short", q));
    packs += size_t(std::max<int64_t>(0, (*v)[0]));
    for (size_t i = 2; i < v->size(); i += 2) {
      sets.push_back(uint32_t((*v)[i]));
      idle_all_w += std::bit_cast<double>((*v)[i + 1]);
    }
  }
  EMO_RETURN_IF_ERROR(check_problem(opt, packs));
  PartPricer pricer(pr, part, comm, true);
  EMO_RETURN_IF_ERROR(pricer.status());
  const Prepared& x = pricer.prepared();
  if (x.clocks.empty()) return make_error("optimize", "no candidate clocks");
  Solution s;
  replay::ShardTimeline tl0;
  std::vector<int64_t> dur0;
  auto d = pricer.price(std::vector<int>(p.packs.size(), pr.default_clock_mhz), "default", &tl0, &dur0);
  if (!d) return d.error();
  s.default_plan = std::move(*d);
  s.replays = 1;
  set_targets(opt, s);
  std::vector<int64_t> slack;
  EMO_RETURN_IF_ERROR(replay::slack_distributed(pricer.shard(), dur0, tl0, comm, slack));
  Search c(pr, opt, x, s);
  c.pricer = &pricer;
  const double points_each = 2.0 * double(part.total_nodes) / double(std::max(1, comm.size()));
  c.part_batch = size_t(std::clamp(Search::kPartBatchBytes / (8.0 * std::max(1.0, points_each)), 8.0, 64.0));
  c.graph = &part.graph;
  c.first_gpu = part.first_rank;
  c.gpus = sets.size();
  c.packs = packs;
  c.replica_sets = std::move(sets);
  dp_search_part(c, pack_slack_of(p, x, slack), idle_all_w);
  EMO_RETURN_IF_ERROR(c.failed);
  s.baselines = baselines(c);
  EMO_RETURN_IF_ERROR(c.failed);
  s.policy_from = seed_search(c, s.baselines);
  if (moves) {
    c.set_points(2.0 * double(part.total_nodes));
    EMO_RETURN_IF_ERROR(to_whole_step(c, part, comm));
    from_start_clocks(c, s);
    improve(c);
    EMO_RETURN_IF_ERROR(c.failed);
    to_own_packs(c);
    in_issue_order(c, s);
    EMO_RETURN_IF_ERROR(c.failed);
  }
  s.policy = c.best;
  s.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return s;
}
}  // namespace

Result<Solution> solve_start_part(const Problem& pr, const graph::GraphPart& part, const OptimizeOptions& opt,
                                  dist::Comm& comm) {
  return solve_part(pr, part, opt, comm, false);
}

Result<Solution> optimize_part(const Problem& pr, const graph::GraphPart& part, const OptimizeOptions& opt,
                               dist::Comm& comm) {
  return solve_part(pr, part, opt, comm, true);
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
