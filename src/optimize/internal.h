// Shared by the files of the optimizer, the MILP oracle and the policy file (not a public header):
// per-op pack and signature, the pack cost model and the full-replay prediction (pricing.cpp), so all
// price a plan with exactly the same numbers; and the state one optimize() call shares between its
// stages (optimize.cpp: the driver; dp.cpp: the DP and its budget search; moves.cpp: the search moves
// that improve its plan by replay; baselines.cpp: the baselines).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "emo/optimize/optimize.h"
#include "emo/replay/distributed.h"
#include "emo/replay/replay.h"

namespace emo::optimize::detail {

// A plan's replay kept for the next one (predict_prepared): its durations and timeline.
struct ReplayState {
  std::vector<int64_t> dur;      // the durations replayed
  std::vector<int64_t> scratch;  // the next plan's durations, being filled
  replay::Timeline tl;
  bool valid = false;  // tl is the replay of dur
};
// The last replays of one problem's plans, one per thread that is not replaying now: a replay takes one
// (or starts from nothing), replays its plan from there and gives it back. Threads come and go
// (parallel_for), so the states outlive them.
struct ReplayCache {
  std::mutex m;
  std::vector<std::unique_ptr<ReplayState>> idle;
};

// A pack that begins before the step: in a loop whose GPU runs behind its host, the step's first ops ran
// in the period before, beside the step's other packs (Graph::queued_ops). In the loop's steady state it
// runs a period later.
inline bool begins_a_period_later(const pack::Packing& p, uint32_t k) {
  return p.packs[k].begin_ns < 0 && p.step_ns > 0;
}
// Each GPU's packs in the order the GPU meets them, the order their clock changes must land in: the
// packs' order, with a pack that begins a period later put among the others by that time.
std::vector<std::vector<uint32_t>> packs_in_time_order(const pack::Packing& p);

// Per GPU op: its pack and its atom's signature; per pack: busy time at the reference clock.
struct Prepared {
  std::vector<std::vector<uint32_t>> op_pack, op_sig, op_pos;  // per GPU op: pack, signature, position in its atom
  std::vector<std::vector<uint32_t>> pack_atoms;  // non-idle atoms of each pack
  std::vector<int64_t> pack_idle_ns;              // idle inside each pack at the reference clock (< 0: overlap)
  // Idle after each pack until the next pack of its GPU starts, in the default clocks' replay; after a
  // GPU's last pack, to the step's end and on from the step's start to its first pack (the next step).
  // A clock stays set until the next change, so this idle runs at the pack's clock.
  std::vector<int64_t> gap_after_ns;
  // The next pack of the same GPU in the order the GPU meets them (packs_in_time_order; the first one after
  // the last), and whether it is in the next step (the pack is that order's last).
  std::vector<uint32_t> next_pack;
  std::vector<char> next_wraps;
  // Per pack with ops, in the default clocks' replay: the start of its first op (ns), and that replay's
  // begin.
  std::vector<int64_t> first_start0;
  int64_t begin0 = 0;
  std::vector<int> clocks;
  // Per pack: held at the default clock (a signature of it could not be fitted, pack::packs_held_at_default);
  // every plan replayed runs these packs at the default clock, whatever it asks.
  std::vector<char> held;
  // Tables at the candidate clocks (filled when prepare() is asked for them), so that a replay of a
  // plan looks its numbers up: the index of a clock in `clocks` by MHz (−1: not a candidate), each op's
  // time ratio per (signature, position in its atom) and clock, each pack's cost per clock.
  std::vector<int> clock_index;
  std::vector<size_t> sig_row;    // first row of each signature in op_ratio
  std::vector<double> op_ratio;   // [(sig_row[sig] + pos) · clocks.size() + clock index]
  std::vector<std::pair<double, double>> cost;  // [pack · clocks.size() + clock index]: busy s, energy J

  // The incremental replay of this problem's graph: each plan is replayed from a recent one of this
  // Prepared (predict_prepared, `replays`), only where it moves; the same timelines bit for bit.
  std::shared_ptr<const replay::Rereplayer> rereplay;
  std::shared_ptr<ReplayCache> replays;

  int index_of(int mhz) const {
    return mhz >= 0 && size_t(mhz) < clock_index.size() ? clock_index[size_t(mhz)] : -1;
  }
};

// `tables`: also fill the per-clock tables (worth it when many plans will be replayed).
Prepared prepare(const Problem& pr, bool tables = false);
// Busy time (s) and energy (J) of one pack at clock f (its idle inside and the idle after it until the
// next pack, gap_after_ns, included, at f).
std::pair<double, double> pack_cost(const Problem& pr, const Prepared& x, uint32_t k, double f);
// The latency's spread (p99 − median): how long a clock change lands early (raised, issued a p99
// latency ahead) or late (lowered, issued 2·median − p99 ahead) in the typical case.
double switch_spread_s(const Problem& pr);
// Pack k's span at clock f, its busy time and the idle inside (s), and the energy over it (J).
std::pair<double, double> span_cost(const Problem& pr, const Prepared& x, uint32_t k, double f);
// Extra energy of the change from pack j (at `from`) to the next pack k (at `to`) of its GPU: a raise
// lands a spread early, so the end of what j owns (its gap after, then its span) runs at `to`; a lowering
// lands a spread late, so the start of k (its span, then its gap) runs at `from`. Idle time pays the idle
// power's difference; a span, the difference of its energy at the two clocks over the share of its work
// the spread holds at the clock it runs at (a higher clock gets through more work, in less time each).
double switch_energy_j(const Problem& pr, const Prepared& x, uint32_t j, uint32_t k, int from, int to);
// One full replay of a plan: makespan and energy (packs, idle at the default clock, clock switches).
Plan predict_prepared(const Problem& pr, const Prepared& x, std::vector<int> clocks, std::string name,
                      replay::Timeline* tl_out = nullptr, std::vector<int64_t>* dur_out = nullptr);
// A replay over the parts as one graph's timeline of this part's points.
replay::Timeline timeline_of(const replay::ShardTimeline& st);

// A plan's replay and pricing over the processes of a run (predict_part, solve_start_part): this process's
// part of the step and a Problem of its own GPUs (workload null; its packing and models). Its Prepared is
// this process's packs' (the owned gaps from the default replay over every part). Every process makes one
// and prices the same number of plans in the same order.
class PartPricer {
 public:
  PartPricer(const Problem& problem, const graph::GraphPart& part, dist::Comm& comm, bool tables = false);
  // The plan of this process's packs' `clocks` (held packs at the default clock): the whole step's time
  // and energy on every process. `tl_out`, `dur_out`: the replay of this part and its durations.
  Result<Plan> price(std::vector<int> clocks, std::string name, replay::ShardTimeline* tl_out = nullptr,
                     std::vector<int64_t>* dur_out = nullptr);
  // Several plans priced side by side: one sweep and one exchange of the GPUs' energy for all of them (each
  // plan's time and energy as price() gives it). Moves the plans' clocks out. `tls_out`, `durs_out`: each
  // plan's replay of this part (without the order) and its durations.
  Result<std::vector<Plan>> price_all(std::vector<std::vector<int>>& plans, const std::string& name,
                                      std::vector<replay::ShardTimeline>* tls_out = nullptr,
                                      std::vector<std::vector<int64_t>>* durs_out = nullptr);
  const Prepared& prepared() const { return x_; }
  const replay::Shard& shard() const { return shard_; }
  dist::Comm& comm() const { return comm_; }
  const Status& status() const { return status_; }
  const graph::Graph& graph() const { return part_.graph; }
  const graph::GraphPart& part() const { return part_; }

 private:
  const Problem& pr_;
  const graph::GraphPart& part_;
  dist::Comm& comm_;
  replay::Shard shard_;
  Prepared x_;
  Status status_;
  std::vector<uint32_t> order_;  // the first replay's dataflow order, for the next ones (ShardTimeline::order)
  uint64_t order_of_ = 0;
};

// Over the processes of a run: whether any process's `mine` is true, on every process.
Result<bool> any_of_processes(dist::Comm& comm, bool mine, int tag);
// clocks_in_issue_order() over the parts (this process's packs' clocks of each plan, priced by `pricer`):
// every process calls it with the same plans. `failed` gets the first exchange that failed (the clocks after
// it are the plans' own).
std::vector<std::vector<int>> clocks_in_issue_order_part(const Problem& pr, PartPricer& pricer,
                                                         const std::vector<const Plan*>& plans, Status& failed);

// ---- one optimize() call ----

// What the stages of one optimize() call share: the problem and its tables, the solution being filled
// (its default plan, targets and replay count), the best verified plan so far and the replay budgets that
// the moves draw on. Trial plans are verified by check() / check_all() only, so that every replay counts.
struct Search {
  Search(const Problem& problem, const OptimizeOptions& options, const Prepared& prepared, Solution& solution);

  const Problem& pr;
  const OptimizeOptions& opt;
  const Prepared& x;
  Solution& s;
  size_t P = 0;                                   // packs
  std::vector<std::vector<uint32_t>> gpu_packs;   // each GPU's packs, in order
  // Replays of independent trials run on `threads` worker threads where the step is big (`parallel`) or
  // a batch is (see check_all).
  bool parallel = false;
  int threads = 0;
  double points = 1;  // replayed points of one replay (≥ 1)
  Plan best;          // the best plan that meets the target so far (named "policy")
  int polish_left = 0;  // replays left to polish_single
  int block_left = 0;   // replays left to polish_blocks
  // The step's GPUs and packs: this problem's own where it is the whole step; over the processes of a run
  // (solve_start_part), this process's GPUs are the step's [first_gpu, first_gpu + gpu_packs.size()) of `gpus`,
  // `replica_sets` every GPU's, and every plan is priced over the parts by `pricer`, one at a time, in the
  // same order on every process (`failed`: the first that could not be; the later ones are skipped).
  size_t first_gpu = 0, gpus = 0, packs = 0;
  std::vector<uint32_t> replica_sets;
  PartPricer* pricer = nullptr;
  Status failed;
  // The search moves over the parts (`whole`, set by optimize_part after the first stages): P, gpu_packs
  // and best's clocks are the whole step's, the same on every process (its packs in rank order, this
  // process's from `first_pack`; `held`: every pack's held at the default clock), and each trial is priced
  // by its slice.
  bool whole = false;
  size_t first_pack = 0;
  std::vector<char> held;
  const graph::Graph* graph = nullptr;  // the graph the packing's ops are nodes of (the step's, or the part's)

  // The replayed points of one replay (the whole step's), and the move budgets that depend on them.
  void set_points(double n);
  // Marks a replayed plan feasible when it meets the plan target, and counts the replay.
  Plan check(Plan pl);
  // Replays a plan and checks it.
  Plan replay(std::vector<int> clocks, const char* name);
  // Over the parts: plans priced side by side (PartPricer::price_all; each the whole step's clocks where
  // `whole`) and checked; where one could not be, it and every plan after it are never taken (`failed`).
  // Moves the trials out.
  std::vector<Plan> priced(std::vector<std::vector<int>>& trials, const char* name);
  // check_all's batches over the parts: a sweep's messages carry `part_batch` plans' times, as many as keep a
  // process's times of them within about kPartBatchBytes (its share of the step's points; the same count on
  // every process), from 8 to 64: fewer exchanges, while the sweep's times stay in cache.
  size_t part_batch = 8;
  static constexpr double kPartBatchBytes = 2 << 20;
  // Replays trial plans that do not depend on each other, in order, and checks them. On a big step (a
  // replay takes milliseconds there) they run on worker threads; the caller then accepts them in order,
  // so the result is the same with any number of threads. Moves the trials out.
  std::vector<Plan> check_all(std::vector<std::vector<int>>& trials, const char* name);
  // Over the parts: whether any process's `mine` is true, on every process (false on every process where
  // the exchange fails: `failed` says it). In one process, `mine`.
  bool any_process(bool mine, int tag);
  // Whether a checked plan meets the target and saves energy on `best` (beyond rounding).
  bool beats_best(const Plan& pl) const { return pl.feasible && pl.energy_j < best.energy_j * (1 - 1e-9); }
};

// The DP's plan (dp.cpp): each GPU's packs solved by the DP at a makespan budget, the budget searched
// so that the plan's replay meets the target, then each GPU's share of it; leaves the best in c.best.
// `dur0`, `tl0`: the default clocks' replay (durations and timeline).
void dp_search(Search& c, const std::vector<int64_t>& dur0, const replay::Timeline& tl0);
// The same over the processes of a run (c.pricer set): each process's DP of its own GPUs, from its packs'
// slack in the default plan and the idle power of every GPU of the step (summed in rank order).
void dp_search_part(Search& c, std::vector<int64_t> pack_slack, double idle_all_w);
// Per pack: the least slack of its ops (0 for a pack without ops), from the slack of every node.
std::vector<int64_t> pack_slack_of(const pack::Packing& p, const Prepared& x, const std::vector<int64_t>& slack);

// The search moves (moves.cpp), each accepting into c.best only verified plans that save energy.
// One pack at a time at any clock (bounded by c.polish_left).
void polish_single(Search& c);
// Two packs at once, on small cases (at most 12 packs and 20000 pair trials; otherwise nothing).
void polish_pairs(Search& c);
// Runs of consecutive packs of a GPU moved to one clock, and runs of equal clocks shifted along their
// GPU, each round followed by polish_single (bounded by c.block_left). The driver runs it, and
// kick_and_repair, on cases of up to 64 packs.
void polish_blocks(Search& c);
// Kick and repair: a move that breaks the target or costs more, then every move that repairs it, each
// success polished again (bounded by opt.kick_replays and opt.kick_point_visits).
void kick_and_repair(Search& c);

// The baselines (baselines.cpp), each a verified plan of the given name (the default plan's clocks where
// nothing better meets the target).
Plan static_clock_baseline(Search& c);
Plan slack_only_baseline(Search& c);
Plan per_phase_baseline(Search& c);

}  // namespace emo::optimize::detail
