// The runtime's core, free of threads and devices so that the same code runs inside a real job
// (emo/runtime/runtime.h, wall time) and on the emulated GPU (emo/backends/apply.h, virtual time):
//   - Program: a policy file as the changes each GPU's controller issues per step, from the step's anchor;
//   - Controller: when each change is really issued, one NVML call at a time, redundant ones skipped;
//   - Phases: which steps run the policy and which the default clock (reference and --verify blocks);
//   - Monitor: GPU-anchored step times and energy-counter windows, the safety fallback, the report.
// Times are nanoseconds on one host clock (wall or virtual); clocks are MHz.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "emo/base/result.h"
#include "emo/optimize/optimize.h"

namespace emo::runtime {

// ---- the program ----------------------------------------------------------------------------------

// One clock change of a step: issued `issue_at_ns` after the step's anchor (the moment the GPU reaches
// the step's start). A change needed right at the step's start has an offset near the step's end: it
// is issued late in the step before (the policy file's wrap-around).
struct Change {
  int64_t issue_at_ns = 0;
  int clock_mhz = 0;
  uint32_t pack = 0;  // index of the pack in the policy file (for logs)
};

struct Program {
  int default_clock_mhz = 0;
  double max_slowdown = 0;
  double predicted_step_ns = 0;             // the policy's predicted step time (0: not known)
  std::vector<std::vector<Change>> ranks;   // per graph rank, by issue time
};

// The policy's packs grouped per rank (ranks the policy leaves alone get no changes).
Program program_of(const optimize::PolicyFile& policy, size_t n_ranks);
// The same straight from a policy file's text (schema emo-policy/1), without the traces it was made
// for: what a job's runtime reads (the packs were matched to the step when the policy was made).
// Errors name `where` and the key.
Result<Program> program_from_policy(const std::string& text, const std::string& where);

// ---- the controller --------------------------------------------------------------------------------

// One GPU's controller thread, as a timing model: a change is issued at anchor + issue_at, or when the
// previous NVML call returns if that is later; a change whose clock is the one last requested is
// skipped (redundant), and one that could only be issued after the next change is due is dropped
// for the next (superseded). The caller performs the call and says how long it took.
struct Issue {
  int64_t at_ns = 0;  // when the call is made
  int clock_mhz = 0;
  uint32_t pack = 0;
  int64_t late_ns = 0;  // at_ns − (anchor + issue_at)
};

class Controller {
 public:
  explicit Controller(int initial_mhz) : requested_(initial_mhz) {}
  // Decides change `i` of a step anchored at `anchor_ns`: the call to make, or nothing when it is
  // redundant or superseded (counted). A made call is reported back with issued().
  std::optional<Issue> decide(int64_t anchor_ns, const std::vector<Change>& changes, size_t i);
  void issued(const Issue& issue, int64_t returned_ns);
  // The calls of one step, in order; `call_ns(k)` is how long the k-th call of this step takes
  // (measured on hardware; drawn on the emulator).
  std::vector<Issue> plan_step(int64_t anchor_ns, const std::vector<Change>& changes,
                               const std::function<int64_t(int)>& call_ns);
  int requested_mhz() const { return requested_; }
  int64_t busy_until_ns() const { return busy_until_; }
  int64_t skipped_redundant() const { return redundant_; }
  int64_t skipped_superseded() const { return superseded_; }

 private:
  int requested_;
  int64_t busy_until_ = INT64_MIN;
  int64_t redundant_ = 0, superseded_ = 0;
};

// ---- phases: which steps run the policy ------------------------------------------------------------

enum class Mode : uint8_t { kDefault, kPolicy };

struct PhaseOptions {
  int block_steps = 8;   // steps per block (the first of each block is its transition, not measured)
  bool verify = false;   // alternate default and policy blocks for the whole run
  int reference_blocks = 2;  // without verify: default-clock blocks at the start (the reference)
  int reference_every = 10;  // without verify: then one block in this many at the default clock, so that
                             // the reference follows the job (0: never again)
};
// The mode of step `step` (0-based) before any fallback.
Mode planned_mode(const PhaseOptions& o, int step);
// Block-steps for a step of `step_ns` so that a block spans at least `min_window_ns` (the energy
// counter's update period × 25): at least 4, at most 200.
int auto_block_steps(double step_ns, double min_window_ns);

// ---- the monitor ------------------------------------------------------------------------------------

struct StepRecord {
  int step = 0;
  Mode mode = Mode::kDefault;
  int block = 0;           // block index (blocks_steps consecutive steps)
  int64_t anchor_ns = 0;   // GPU-anchored start
  int64_t time_ns = 0;     // to the next step's anchor (0 for the last step until it is known)
  std::optional<double> energy_j;  // counter reading taken at the anchor (J, arbitrary origin)
};

struct Fallback {
  int step = 0;                // first step at the default clock after it
  double slowdown_pct = 0;     // measured mean
  double slowdown_se_pct = 0;  // its standard error
  std::string reason;
};

struct MeasuredSide {
  int steps = 0;                // measured steps (transition steps left out)
  double time_us = 0;           // mean step time
  double time_se_us = 0;
  double energy_j = 0;          // per step, all this monitor's GPUs (0 when no window was measured)
  double energy_se_j = 0;
  int energy_windows = 0;
};

struct MeasuredReport {
  MeasuredSide default_side, policy_side;
  double slowdown_pct = 0, slowdown_se_pct = 0;
  double saving_pct = 0, saving_se_pct = 0;
  // 95 % intervals (mean ± 1.96 SE); empty when a side has fewer than 2 samples.
  std::vector<double> slowdown_ci_pct, saving_ci_pct;
};

// Running statistics, so that a monitor's memory and time per step stay constant over a job of any length.
struct Accumulator {
  int64_t n = 0;
  double sum = 0, sumsq = 0;
  void add(double x) {
    ++n;
    sum += x;
    sumsq += x * x;
  }
  double mean() const { return n > 0 ? sum / double(n) : 0; }
  double se() const;  // standard error of the mean; 0 below 2 samples
};

// Policy blocks against default blocks, robust to a job that drifts (on an H200 a job's mean step time
// moved 12.0 -> 13.3 ms over 8 s of one clock, and consecutive steps correlate at 0.6: per-step
// standard errors there are 4-10 times too small). Each policy block's value is divided by the mean of
// the nearest default block before it and the nearest after it (the one there is, while the next is not
// measured yet, unless `both_sides`: then such a block waits for it); the estimate is the mean of those
// ratios, its standard error theirs.
struct PairedRatio {
  double ratio = 0;  // mean of the policy blocks' ratios (0: none)
  double se = 0;     // over the ratios (0 below two)
  int n = 0;         // policy blocks with a default block beside them
};
PairedRatio paired_ratio(const std::deque<std::pair<Mode, double>>& blocks, bool both_sides = false);

class Monitor {
 public:
  Monitor(double max_slowdown, PhaseOptions phases) : max_slowdown_(max_slowdown), phases_(phases) {}
  // A step's anchor (and, when read, the energy counter at that moment, summed over the GPUs this
  // monitor covers). Closes the step before it.
  void anchor(int step, int64_t anchor_ns, std::optional<double> energy_j);
  // A reading of GPU `gpu`'s energy counter (J) at `t_ns`, polled more often than it updates (every
  // few ms). The counter only moves every 10–100 ms: an update is where the value first changes, and
  // the energy at an anchor is interpolated between the updates around it — far finer than the last
  // value read at the anchor. Once any GPU has readings, windows use them instead of the anchors'.
  void counter(size_t gpu, int64_t t_ns, double energy_j);
  // The counters to come (GPUs 0..n-1): windows wait for every one of them.
  void expect_gpus(size_t n) {
    if (updates_.size() < n) updates_.resize(n);
  }
  // The mode of the next step: the phases' plan, or the default clock for good after a fallback.
  Mode mode_of(int step) const;
  // After each closed block (with at least 2 policy blocks paired with default ones; with verify, each
  // between the default blocks on both its sides, so a policy block waits for the next one): drops the
  // policy when its measured slowdown (paired_ratio over the blocks' mean step times) is over the bound,
  // or when mean + 2 SE is, kMinPolicySteps policy steps and kMinPairs policy blocks have been
  // measured. Returns the fallback when it fires.
  std::optional<Fallback> check(int next_step);
  static constexpr int64_t kMinPolicySteps = 30;
  static constexpr int kMinPairs = 4;
  // Closed blocks kept for the paired estimates (older ones go).
  static constexpr size_t kKeptBlocks = 4096;
  // The last kKeptSteps steps (older ones live on in the statistics only).
  static constexpr size_t kKeptSteps = 4096;
  const std::deque<StepRecord>& steps() const { return steps_; }
  int64_t steps_seen() const { return seen_; }
  const std::vector<Fallback>& fallbacks() const { return fallbacks_; }
  MeasuredReport report() const;

 private:
  struct Window {  // a block's measured steps: energy from anchor a0 to anchor a1
    Mode mode;
    int64_t a0, a1;
    std::optional<double> e0, e1;
    int steps;
  };
  struct Side {
    Accumulator time_ns, window_j_per_step;
    double window_j = 0;
    int64_t window_steps = 0;
    int blocks = 0;
  };
  void finalize_windows();
  std::optional<double> energy_at(int64_t t) const;  // summed over GPUs from their updates
  double max_slowdown_;
  PhaseOptions phases_;
  std::deque<StepRecord> steps_;
  int64_t seen_ = 0;
  bool have_last_ = false, last_measured_ = false;
  StepRecord last_;
  struct Open {
    bool active = false;
    Mode mode = Mode::kDefault;
    int64_t a0 = 0;
    std::optional<double> e0;
    int steps = 0;
    double time_ns = 0;  // the measured steps' time
  } open_;
  std::deque<std::pair<Mode, double>> block_time_;    // closed blocks' mean step time (ns), in order
  std::deque<std::pair<Mode, double>> block_energy_;  // measured windows' J per step, in order
  std::deque<Window> pending_;
  Side sides_[2];
  bool block_closed_ = false;
  std::vector<Fallback> fallbacks_;
  int fallback_from_ = -1;
  std::vector<std::deque<std::pair<int64_t, double>>> updates_;  // per GPU: (first seen, value)
};

nlohmann::json measured_json(const MeasuredReport& m);

}  // namespace emo::runtime
