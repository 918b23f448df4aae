// The frequency-policy optimizer (DESIGN.md §5): one SM clock per pack, minimum total GPU energy of the
// step (busy and idle, every GPU) subject to the replayed makespan ≤ (1+δ)·T_default. Each GPU's packs
// are solved by dynamic programming over (pack, clock) with the makespan budget discretized: a pack's
// cost in budget is the time it adds beyond its slack. The budget given to the DP is then searched so
// that the plan's full replay meets the target; a plan is returned only after such a replay.
// Baselines come from the same models: default clock, best static clock, slack-only lowering (EnvPipe),
// per-phase clocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/analysis/analysis.h"
#include "emo/base/result.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"

namespace emo::optimize {

struct Problem {
  const analysis::Workload* workload = nullptr;
  const pack::Packing* packing = nullptr;
  const pack::PackModels* models = nullptr;
  int default_clock_mhz = 0;
  std::vector<int> clocks_mhz;  // candidate clocks (ascending); empty = every supported clock ≥ 0.45·f_max
  // Idle inside a pack: true = its span in the plan's replay less its busy time at its clock (a host-bound
  // pack whose kernels slow down idles less); false = as measured at the default clock (the model the MILP
  // oracle writes as linear constraints).
  bool idle_from_replay = true;
};

// A clock per pack (index = Packing::packs) and what the models predict for it.
struct Plan {
  std::string name;
  std::vector<int> pack_clock_mhz;
  int64_t time_ns = 0;
  double energy_j = 0;
  bool feasible = false;
};

struct OptimizeOptions {
  double max_slowdown = 0.05;
  // Part of the allowed slowdown kept back for model and clock-switching error: every plan must meet
  // T_default·(1 + max_slowdown·(1 − reserve)) in the models' replay, so that the true step time stays
  // under T_default·(1 + max_slowdown). 0 plans right up to the target.
  double reserve = 0.1;
  int budget_buckets = 512;
  int search_rounds = 10;
  int polish_replays = 2000;  // replays spent improving the DP's plan one pack at a time
  double polish_point_visits = 5e7;  // ... and at most this many replayed points (large graphs), ≥ 200 replays
  int block_replays = 4000;   // replays spent moving runs of consecutive packs of a GPU to one clock
  double block_point_visits = 2e7;  // ... and at most this many replayed points, ≥ 100 replays
  // Kick and repair on up to 64 packs: from the converged plan, the `kicks_saving` moves that save the
  // most energy per ns over the target and the `kicks_shortening` that shorten the step the most per
  // joule, each followed by every move that repairs it; at most `kick_replays` replays and
  // `kick_point_visits` replayed points in all. 0 turns it off.
  int kick_replays = 60000;
  double kick_point_visits = 5e8;
  int kicks_saving = 6;
  int kicks_shortening = 2;
  // The budget search tries each GPU's share of the slack on its own, with the others fixed, on up to
  // this many GPUs; past it, the GPUs of one replica set (the same ops on each stream: data-parallel
  // ranks; pack::Packing::replica_set) are given one share, searched together, so that the search's
  // replays do not grow with the GPUs (each replays every GPU).
  size_t shares_per_gpu_max = 32;
  // Trial plans that do not depend on each other are replayed on up to `threads` threads (0: EMO_THREADS
  // or the hardware's) once the step has at least `parallel_min_points` points, or a batch of trials
  // 16 times that many (a replay of a smaller one is quicker than starting a thread). The result does
  // not depend on either.
  int threads = 0;
  size_t parallel_min_points = 100000;
  // A plan to start the search from beside the DP's and the baselines' (one clock per pack; empty: none):
  // the first solve's policy where the session profiled more clocks and solves again, so that the second
  // solve never hands out a plan its own models price above the first's. Used where the models price it
  // lowest and it meets the target; clocks outside the candidates leave it unused.
  std::vector<int> start_clocks;
};

struct Solution {
  Plan default_plan;
  Plan policy;
  std::string policy_from = "dp";  // "dp", or the baseline whose plan was better once switching is counted
  std::vector<Plan> baselines;  // static_clock, slack_only, per_phase
  int64_t target_ns = 0;       // T_default·(1 + max_slowdown): the user's limit
  int64_t plan_target_ns = 0;  // what every returned plan meets in the models' replay (target less the reserve)
  double solve_ms = 0;
  int replays = 0;
};

// Predicted makespan and energy of a plan (one full replay).
Plan predict(const Problem& problem, std::vector<int> pack_clock_mhz, std::string name = "");
// predict() over the processes of a run (DESIGN.md §9), each with its part of the step (`part`: the graph
// it built of its own ranks, analysis::load_part) and a `problem` of its own GPUs (workload null; packing:
// pack::PackingPart::mine; models: pack::fit_pack_models_part's), `pack_clock_mhz` its own packs' clocks:
// the default clocks' replay and the plan's are shared over the parts, each process prices its own GPUs,
// and every GPU's energy is added up in rank order. The step time and energy of predict() of the whole
// step with every process's clocks, bit for bit, on every process (pack_clock_mhz: this process's clocks,
// held packs at the default). Every process calls it; an Error on every process where one's clocks do not
// fit its packs.
Result<Plan> predict_part(const Problem& problem, const graph::GraphPart& part, std::vector<int> pack_clock_mhz,
                          dist::Comm& comm, std::string name = "");

// Errors: max_slowdown < 0, reserve outside [0, 1), a problem without packs, or no plan (not even the default) meeting the target.
Result<Solution> optimize(const Problem& problem, const OptimizeOptions& options);

// optimize()'s first stages alone: the default plan and the targets; the DP's plan (each GPU's packs solved
// by the DP at a makespan budget, the budget searched so that the plan's replay meets the plan target, then
// each GPU's — or replica set's — share of it); the baselines; and the search's start, the DP's plan or the
// best baseline where the models price it lower (policy_from). No search moves (polish, blocks, kick and
// repair) and no pricing in issue order: Solution::policy is that start.
Result<Solution> solve_start(const Problem& problem, const OptimizeOptions& options);
// solve_start() over the processes of a run (DESIGN.md §9), each with its part of the step and a problem of
// its own GPUs (as predict_part()): the DP of each GPU runs where its packs live, and every plan the budget
// search and the baselines try is replayed over the parts (every process in step: every decision rests on
// the step's time and energy, or on what any process has — a critical pack raised, a phase — the same on
// every process). The Solution of solve_start() of the whole step, on every process; each plan's clocks
// are this process's packs' (the whole plan's slice).
Result<Solution> solve_start_part(const Problem& problem, const graph::GraphPart& part, const OptimizeOptions& options,
                                  dist::Comm& comm);
// optimize() over the processes of a run: solve_start_part()'s stages, then the search moves (polish, pairs,
// blocks, kick and repair) over the whole step's packs on every process, each trial priced over the parts
// (every process tries the same moves in the same order: every decision rests on the step's time and
// energy), and the plans priced again in issue order (each process its own GPUs' changes, the rounds going
// on while any process moves one). The Solution of optimize() of the whole step on every process (timing
// fields aside); each plan's clocks are this process's packs'. OptimizeOptions::start_clocks are the whole
// step's packs' clocks.
Result<Solution> optimize_part(const Problem& problem, const graph::GraphPart& part, const OptimizeOptions& options,
                               dist::Comm& comm);

// The models are fitted from a few uniform clocks; between them, the static and dynamic power, the
// voltage knee and floor that fit those runs may still be off where a plan runs. Where the plan's packs
// mostly run (the median clock over its packs, weighted by their busy time) lies more than this share
// of f_max from every profiled clock, one more profiling run there pins the curve where it is used
// (docs/profiling.md, "Profiling where the plan runs").
inline constexpr double kRefineGapFrac = 0.03;
// That clock, or 0 where it lies within kRefineGapFrac·max_clock_mhz of a profiled clock (or the plan
// has no packs with busy time).
int clock_to_refine(const pack::Packing& packing, const Plan& plan, const std::vector<int>& profiled_mhz,
                    double max_clock_mhz);
// The clocks to profile for a solution: the policy's clock_to_refine, then each baseline's away from the
// profiled clocks and from those already chosen, each with the plan it is for ("policy" or the baseline's
// name). The baselines are priced too (the search starts from the best of them, and the report compares
// against them), so their energy should not rest on the curve between profiled clocks either.
struct RefineClock {
  std::string plan;
  int clock_mhz = 0;
  bool operator==(const RefineClock&) const = default;
};
std::vector<RefineClock> clocks_to_refine(const pack::Packing& packing, const Solution& solution,
                                          std::vector<int> profiled_mhz, double max_clock_mhz);

// The DP alone on abstract packs (for the benchmark and the oracle tests): per pack, options of
// (budget cost ns, energy J); returns the chosen option per pack minimizing energy with Σ cost ≤ budget.
struct Option {
  int64_t cost_ns = 0;
  double energy_j = 0;
};
std::vector<int> solve_dp(const std::vector<std::vector<Option>>& packs, int64_t budget_ns, int buckets);

// Exhaustive search over every combination of clocks (≤ `max_combinations`), each checked by full replay:
// the exact optimum of the same models, for small cases.
Result<Plan> exhaustive(const Problem& problem, double max_slowdown, int64_t max_combinations = 200000);

// ---- the policy file (DESIGN.md §6, schema "emo-policy/1") ----
nlohmann::json policy_json(const Problem& problem, const Solution& s, double max_slowdown, double reserve = 0.1);
// policy_json() over the processes of a run (optimize_part()'s Solution, a problem of this process's GPUs):
// each process its ranks and packs (their issue times from the plans' replays over the parts), gathered
// in rank order; the whole step's file on process 0 (the same JSON as policy_json() of the whole step),
// null on the others. Every process calls it.
Result<nlohmann::json> policy_json_part(const Problem& problem, const graph::GraphPart& part, const Solution& s,
                                        double max_slowdown, double reserve, dist::Comm& comm);
// Checks a policy against a workload and device: schema, device name, ranks and GPU-op counts, and the
// names of each pack's first/last op. Returns per pack (in the file's order) the clock and op range.
struct AppliedPack {
  graph::RankIndex rank;
  uint32_t first = 0, last = 0;
  int clock_mhz = 0;
  int64_t issue_at_ns = 0;
};
struct PolicyFile {
  std::string device;
  int default_clock_mhz = 0;
  double max_slowdown = 0;
  double reserve = 0.1;  // the reserve it was made and checked with (files without one: the default)
  std::vector<AppliedPack> packs;
  // Baselines stored beside the policy: per-pack clocks and issue times (same packs).
  struct Baseline {
    std::string name;
    std::vector<int> clocks_mhz;
    std::vector<int64_t> issue_at_ns;
  };
  std::vector<Baseline> baselines;
  nlohmann::json predicted;
};
Result<PolicyFile> read_policy(const std::string& path, const std::string& text, const analysis::Workload& w,
                               const device::DeviceProfile& profile);
// The policy of a solution as a runtime applies it — what read_policy gives for policy_json's file.
Result<PolicyFile> applied_policy(const Problem& problem, const Solution& s, double max_slowdown);
// A plan's clocks as its changes can land: changes take effect in the order issued, and a raise is issued
// a p99 latency ahead of its pack, a lowering later (2·median − p99 ahead), so a short pack that lowers
// the clock before one that raises it would have its change issued after the next one's, its low clock
// held through the next pack. Such a pack keeps the clock before it (energy, not time). The same clocks
// where every change lands in order; optimize() returns its policy and baselines so.
std::vector<int> clocks_in_issue_order(const Problem& problem, const Plan& plan);
// The same for several plans of one problem (prepared once).
std::vector<std::vector<int>> clocks_in_issue_order(const Problem& problem, const std::vector<const Plan*>& plans);

}  // namespace emo::optimize
