// Perseus-compatible pipeline energy planning: a synchronous 1F1B pipeline DAG built from a measured
// stage profile (time and energy of each stage's forward and backward pass at each SM clock), and the
// whole time–energy frontier of per-instruction clock plans, with the energy accounting of the
// published Perseus/lowtime frontiers so that the two can be compared point by point.
//
// Accounting (lowtime's, see docs/pipeline.md): time is quantized to whole units (1 ms, or 0.1 ms for
// the A40 files); an instruction's effective cost is its energy minus the blocking power over its
// time, fitted per (stage, instruction) with a·exp(b·t)+c; a plan's energy is the sum of the fitted
// costs plus stages × makespan × blocking power. The measured accounting of the same plan uses each
// node's measured time and energy at its clock, and the blocking power over every stage's idle time.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "emo/base/result.h"

namespace emo::pipeline {

enum class Instruction : uint8_t { kForward = 0, kBackward = 1 };
std::string_view instruction_name(Instruction instruction);  // "forward" | "backward"

// ---------------------------------------------------------------------------------------------
// Stage profile: the lowtime input format, columns stage,instruction,frequency,time,energy
// (stage id from 0, forward|backward, SM clock MHz, seconds and joules per microbatch).

struct ClockSample {
  int clock_mhz = 0;
  double time_s = 0;
  double energy_j = 0;
};

struct StageProfile {
  std::string path;
  int stages = 0;  // 1 + the highest stage id
  // samples[stage][instruction] in file order; a stage without rows has empty lists.
  std::vector<std::array<std::vector<ClockSample>, 2>> samples;
  size_t rows = 0;
};

// A missing column, a non-number, a non-positive time/energy/clock, an unknown instruction or a
// negative stage -> Error naming the file, line and column.
Result<StageProfile> load_stage_profile(const std::string& path);

// ---------------------------------------------------------------------------------------------
// The 1F1B pipeline DAG. Node = one instruction of one microbatch on one stage. Edges: each stage's
// 1F1B program order (warm-up forwards = min(stages − stage − 1, microbatches), then alternate one
// forward and one backward, then the remaining backwards), forward i on stage s → forward i on s+1,
// backward i on s+1 → backward i on s. At the last stage, forward i → backward i is program order.

struct NodeInfo {
  int32_t stage = 0;
  int32_t microbatch = 0;
  Instruction instruction = Instruction::kForward;
};

struct PipelineDag {
  int stages = 0;
  int microbatches = 0;
  std::vector<NodeInfo> nodes;       // numbered in a topological order: every edge goes to a higher id
  std::vector<uint32_t> pred_begin;  // CSR predecessors: preds[pred_begin[v] .. pred_begin[v+1])
  std::vector<uint32_t> preds;
  std::vector<uint32_t> succ_begin;  // CSR successors
  std::vector<uint32_t> succs;
  std::vector<std::vector<uint32_t>> program;  // per stage, its nodes in execution order

  size_t num_nodes() const { return nodes.size(); }
  size_t num_edges() const { return preds.size(); }
};

// stages >= 1, microbatches >= 1 (fewer microbatches than stages is a legal, bubble-heavy pipeline).
Result<PipelineDag> build_1f1b(int stages, int microbatches);

// Longest path (makespan) with the given per-node durations, nodes starting as early as allowed.
int64_t makespan(const PipelineDag& dag, std::span<const int64_t> duration);
double makespan(const PipelineDag& dag, std::span<const double> duration);

// ---------------------------------------------------------------------------------------------
// Per (stage, instruction) options, exactly as lowtime prepares them.

// cost(t) = a·exp(b·(t − t0)) + c, t in time units. (t0 only keeps the fit well conditioned;
// a_unshifted() is lowtime's `a` for cost = a·exp(b·t) + c.)
struct ExpCost {
  double a = 0, b = 0, c = 0, t0 = 0;
  double operator()(double t) const;
  double a_unshifted() const;
};

// Least-squares fit of y ≈ a·exp(b·x) + c with b < 0 (a decaying exponential, as lowtime's initial
// guesses start from): a global search over b, a and c solved exactly for each b; the limit b -> 0
// (a straight line) is approached as closely as b = -1e-9 / (x range). Fewer than 3 points: 1 point ->
// constant; 2 points -> through both. Error on empty or mismatched input.
Result<ExpCost> fit_exponential(std::span<const double> x, std::span<const double> y);

struct Candidate {
  int clock_mhz = 0;
  double time_s = 0;
  double energy_j = 0;
  int64_t units = 0;  // floor(time_s / unit_s), as Python's `//`
  double cost_j = 0;  // energy_j − blocking_power_w · units · unit_s (the value that is fitted)
};

struct InstructionModel {
  int stage = 0;
  Instruction instruction = Instruction::kForward;
  size_t samples = 0;                 // clocks measured
  std::vector<Candidate> candidates;  // Pareto (time, energy), one per quantized time, slowest first
  ExpCost cost;                       // fitted to (units, cost_j) of the candidates
  double fit_rmse_j = 0;
  int64_t max_units() const { return candidates.front().units; }
  int64_t min_units() const { return candidates.back().units; }
  // lowtime's knob rule: the slowest candidate whose units <= `units` (the fastest if none).
  size_t candidate_for(int64_t units) const;
};

struct PipelineModel {
  int stages = 0;
  double unit_s = 0.001;
  double blocking_power_w = 0;
  std::vector<InstructionModel> instructions;  // index stage * 2 + instruction
  const InstructionModel& at(int stage, Instruction instruction) const {
    return instructions[size_t(stage) * 2 + size_t(instruction)];
  }
};

// Uses stages 0 .. stages-1 of the profile (stages <= 0: all of them). A stage or instruction without
// samples, unit_s <= 0 or a negative blocking power -> Error.
Result<PipelineModel> build_model(const StageProfile& profile, int stages, double unit_s,
                                  double blocking_power_w);

// ---------------------------------------------------------------------------------------------
// The frontier.

enum class Accounting {
  // lowtime's: a node may take any whole number of units between its fastest and slowest candidate,
  // priced on the fitted curve, and runs at the slowest clock that meets it (what the published files do).
  kLowtime,
  // stricter: a node's duration is its clock's own quantized time (no durations between clocks).
  kClocks,
};
std::string_view accounting_name(Accounting accounting);  // "lowtime" | "clocks"

struct FrontierOptions {
  Accounting accounting = Accounting::kLowtime;
  // The plans are built and evaluated on a second thread beside the flow solver when this is ≥ 2
  // (0: EMO_THREADS or the hardware's); the frontier is the same either way.
  int threads = 0;
  // Clocks accounting only: rounding each node down to a clock leaves slack, which each point's plan
  // then spends on slower clocks (fill_slack, within the plan's own makespan); off only to compare.
  bool fill_slack = true;
};

struct FrontierPoint {
  int64_t time_units = 0;   // makespan of the plan, in units (its DAG longest path; verified)
  double time_s = 0;        // time_units · unit_s
  double energy_j = 0;      // Σ fitted cost + stages · time_s · blocking power (the published accounting)
  double model_cost_j = 0;  // Σ fitted cost alone
  // The same plan with the measured profile: nodes at their clocks' measured times, as early as
  // allowed; Σ measured energy + blocking power × (stages × measured_time_s − Σ measured times).
  double measured_time_s = 0;
  double measured_energy_j = 0;
};

// One plan: per DAG node, its duration in units and the candidate (clock) it runs at.
struct Plan {
  std::vector<int64_t> units;
  std::vector<uint32_t> candidate;  // index into the node's InstructionModel::candidates
};

struct PlanEvaluation {
  int64_t time_units = 0;
  double energy_j = 0, model_cost_j = 0;
  double measured_time_s = 0, measured_energy_j = 0;
};
// Evaluates any plan with both accountings (independent of the solver; used to check it).
PlanEvaluation evaluate(const PipelineModel& model, const PipelineDag& dag, const Plan& plan);

struct FrontierStats {
  size_t phases = 0;           // parametric max-flow phases
  size_t plans = 0;            // plans generated (one per time unit between the fastest and slowest)
  int64_t min_time_units = 0;  // all nodes at their fastest
  int64_t max_time_units = 0;  // all nodes at their slowest
};

class Frontier {
 public:
  // Pareto points, time ascending and energy (published accounting) strictly descending.
  std::vector<FrontierPoint> points;
  FrontierStats stats;
  Accounting accounting = Accounting::kLowtime;

  // Calls f(i, plan) for every point i, in descending time order (the order plans were generated).
  void for_each_plan(const std::function<void(size_t, const Plan&)>& f) const;
  Plan plan(size_t i) const;

 private:
  friend Result<Frontier> solve_frontier(const PipelineModel&, const PipelineDag&, const FrontierOptions&);
  struct Change {
    uint32_t node;
    uint32_t candidate;
    int64_t units;
  };
  Plan start_;                          // the first generated plan (all slowest)
  std::vector<Change> changes_;         // changes from one generated plan to the next
  std::vector<size_t> change_begin_;    // per generated plan: its first change
  std::vector<int64_t> point_of_plan_;  // per generated plan: its index in `points`, or -1
  std::vector<std::vector<Change>> fill_;  // per point (clocks accounting): fill_slack()'s changes
};

// For every whole number of units between the fastest and the slowest makespan, the minimum-energy
// plan under `options.accounting` (exact for lowtime's accounting: a parametric min-cost-flow over
// the DAG, one phase per change of the frontier's slope); keeps the Pareto points. Every point's
// plan is checked: its DAG makespan never exceeds its time.
Result<Frontier> solve_frontier(const PipelineModel& model, const PipelineDag& dag,
                                const FrontierOptions& options = {});

// Spends a plan's slack on slower clocks: from the last node to the first, each node takes the slowest
// of its clocks that still lets it end by its latest finish under `deadline_units` (all later nodes
// at their new clocks, as late as they may run) when that costs less on the fitted curve, at that
// clock's own time (the clocks accounting). A plan that met the deadline still does, and costs no
// more. Returns how many nodes changed.
size_t fill_slack(const PipelineModel& model, const PipelineDag& dag, Plan& plan, int64_t deadline_units);

// ---------------------------------------------------------------------------------------------
// One point's plan as the stages run it: what a runtime (Perseus' frequency controller) applies.

// The point to run under an iteration-time limit: the least-energy point whose time is at most
// max_time_s, compared in whole units of unit_s (a limit within 1e-9 units of a boundary counts as
// reaching it). Error when max_time_s is not a positive number, or when even the fastest point is
// slower (the message gives the fastest time).
Result<size_t> point_within(const Frontier& frontier, double unit_s, double max_time_s);

struct ScheduledInstruction {
  uint32_t node = 0;  // DAG node
  Instruction instruction = Instruction::kForward;
  int32_t microbatch = 0;
  int clock_mhz = 0;
  int64_t units = 0;        // planned duration (with lowtime's accounting, at least the clock's own)
  int64_t start_units = 0;  // as early as its dependencies allow, planned durations
  double clock_time_s = 0, clock_energy_j = 0;  // the measured profile at that clock
};

// Per stage, its instructions in execution order (PipelineDag::program) with their clocks and times.
std::vector<std::vector<ScheduledInstruction>> stage_schedule(const PipelineModel& model,
                                                              const PipelineDag& dag, const Plan& plan);

// The frequency file that Perseus' PointSolution scheduler reads (zeus' pipeline frequency optimizer,
// one rank per stage of a pure pipeline): a Python list holding, per stage, its ("forward" | "backward",
// MHz) pairs in execution order; then each of `comments` as a `# ` line.
std::string perseus_frequency_file(const std::vector<std::vector<ScheduledInstruction>>& schedule,
                                   const std::vector<std::string>& comments);

// One row per instruction: stage,order,instruction,microbatch,frequency_mhz,units,start_s,end_s,
// clock_time_s,clock_energy_j (start and end on the plan's time grid).
std::string schedule_csv(const std::vector<std::vector<ScheduledInstruction>>& schedule, double unit_s);

// ---------------------------------------------------------------------------------------------
// Head-to-head with a published lowtime frontier (columns time,energy; seconds, joules).

struct PublishedFrontier {
  std::string path;
  std::vector<double> time_s, energy_j;  // file order
};
Result<PublishedFrontier> load_published_frontier(const std::string& path);

// Time unit of a published file: the power of ten nearest its smallest step between times.
double infer_unit_s(const PublishedFrontier& published);

struct Comparison {
  size_t points = 0;       // published points
  size_t covered = 0;      // with one of our points at or before their time
  size_t ours_le = 0;      // ours <= theirs
  size_t ours_within = 0;  // ours <= theirs · (1 + tolerance)
  double tolerance = 0;
  double max_rel_diff = 0;  // max over covered points of (ours − theirs) / theirs
  double max_rel_diff_time_s = 0;
  double mean_rel_diff = 0;
  double min_rel_diff = 0;  // the largest saving (most negative)
  // Against their own step function too (their lowest energy at or before each time), so that the
  // slow end, where their energy rises with time, does not count as our saving.
  size_t ours_le_step = 0;
  double max_rel_diff_step = 0;
  double mean_rel_diff_step = 0;
  // Both frontiers end at the all-fastest plan, so on the same model, GPU, microbatch count and unit
  // their fastest times agree (in whole units); when they do not, the comparison compares two problems.
  double our_fastest_s = 0, their_fastest_s = 0;
  bool same_fastest = false;
};

// At each published time T: our energy = the lowest energy among our points with time <= T (our
// frontier as a step function; times compared in whole units of unit_s).
Comparison compare(const Frontier& ours, const PublishedFrontier& published, double unit_s, double tolerance);

}  // namespace emo::pipeline
