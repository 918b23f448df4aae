// The pipeline as one object (docs/design.md, "The session"): a `Session` owns the opened devices,
// the loaded step and each stage's result — analyze → pack → profile → fit → optimize (+ check on the
// device) → evaluate — and runs a stage on demand, the stages before it first, each once. Every
// subcommand on the trace flow (analyze, whatif, pack, profile, optimize, evaluate, run), the Python
// package and the runtime call it; what they show is a view over its results (emo/report/views.h).
//
//   auto s = session::Session::open(options);        // parses and validates options, opens devices
//   auto sol = s->solution();                          // loads, analyzes, packs, profiles, fits, optimizes
//   auto json = report::optimize_json_view()->render(*s);
//
// Times in this API are int64 ns (double ns for means over steps and for model predictions);
// the views convert at the edges (µs and ms in JSON and text, as their keys say).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/backends/evaluation.h"
#include "emo/backends/target.h"
#include "emo/base/result.h"
#include "emo/optimize/check.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"

namespace emo::session {

struct Options {
  std::vector<std::string> traces;  // one file per rank
  analysis::LoadOptions load;       // the step (default: the last complete one), graph options
  // The target device: a profile name or file (h100, a100, ...), emulated:NAME[@SEED], or nvml:N.
  std::string device = "h100";
  pack::PackOptions pack;
  // Where the profiling plan runs, the policy is checked and plans are evaluated: empty = the device
  // itself when it is emulated, else the emulated GPU of its profile (emulated:NAME).
  std::string profile_on;
  std::string profiled_dir;  // fit from runs recorded at the plan's clocks in this folder instead
  optimize::OptimizeOptions optimize;
  // After the first fit, solve once and, where its policy or a baseline mostly runs away from the
  // profiled clocks (optimize::clocks_to_refine), profile those clocks too, fit again and solve again from
  // the first policy as well: one profiling run per clock and one more solve (docs/profiling.md,
  // "Profiling where the plan runs"). Never with profiled_dir (recorded runs cannot grow: the optimize
  // view warns and names the policy's clock to record instead).
  bool refine_profile = true;
  // Run the policy on the profiling device before handing it out (optimize::optimize_checked); never
  // with profiled_dir (there is nothing to run it on).
  bool check = true;
  optimize::CheckOptions check_options;
  int eval_steps = 12;  // steps per plan in evaluation() (the first is a warm-up)
  // Evaluate this policy file (written by `emo optimize -o`) instead of optimizing: policy() reads it,
  // checked against the step and the device.
  std::string policy_file;
  std::function<void(const std::string&)> progress;  // one line per stage as it starts; may be empty
  // The processes that read the rank files (emo/dist/dist.h; null: dist::world()). Only process 0 runs
  // the stages: on the others workload() serves their shard and fails with analysis::kShardHandedOver.
  dist::Comm* comm = nullptr;
};

// One plan of the evaluation: as the models predicted it (where it is a plan of the solution) and as
// the profiling device measured it.
struct EvaluatedPlan {
  std::string name;  // default, policy, then each baseline
  bool predicted = false;  // predicted_* hold the solution's plan
  int64_t predicted_time_ns = 0;
  double predicted_energy_j = 0;
  optimize::Measured measured;
  double saving_pct = 0, slowdown_pct = 0;  // measured, against the default clocks' run
};

// The options' own checks (each error names its flag), without opening anything.
Status validate(const Options& options);

class Session {
 public:
  // Validates the options (each error names its flag) and opens the devices, once.
  static Result<Session> open(Options options);
  // The same over a step already loaded (tests, other front ends); options.traces is not read.
  static Result<Session> open(Options options, analysis::Workload workload);

  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  const Options& options() const;
  const backends::Target& target() const;  // the device the policy is for
  const backends::Target& bench() const;   // where profiling, the check and evaluation run
  const device::DeviceProfile& profile() const { return target().profile(); }
  int default_clock_mhz() const;
  // Checking happens: options().check and the runs are not read from a folder.
  bool checks() const;

  // ---- the stages, each run on first use ----
  Result<const analysis::Workload*> workload();
  Result<const analysis::Analysis*> analysis();
  Result<const pack::Packing*> packing();
  Result<const std::vector<pack::ProfiledRun>*> profiled_runs();
  Result<const pack::PackModels*> models();
  Result<const optimize::Problem*> problem();
  // The optimizer's solution with the check's rounds (rounds empty when checks() is false).
  Result<const optimize::Checked*> solution();
  // The policy as a runtime applies it: packs, their clocks and issue times, the baselines' clocks —
  // the solution's, or options().policy_file's.
  Result<const optimize::PolicyFile*> policy();
  // The default clocks, the policy and each baseline run on bench() for eval_steps steps, in that order
  // (predictions beside them where the policy is the solution's).
  Result<const std::vector<EvaluatedPlan>*> evaluation();

  // ---- with arguments: cached per argument ----
  // With `topology`: the matched collectives' transfers at their times on it first (`whatif --topology`).
  Result<const analysis::WhatIf*> what_if(const std::vector<analysis::Scale>& scales,
                                          const analysis::TopologyQuestion* topology = nullptr);
  Result<const backends::PackFidelity*> pack_fidelity(int clock_mhz);
  // The profiling plan run on bench() and written as a hardware capture would be (docs/profiling.md),
  // with the clock models() adds where the energy still falls at the lowest plan clock.
  Status write_profiled_dir(const std::string& dir);

  // Wall-clock ms of each stage run so far ("analyze", "pack", "profile", "fit", "optimize", "evaluate").
  const std::map<std::string, double>& stage_ms() const;

 private:
  struct State;  // every stage's result, at a stable address (the Problem points into it)
  explicit Session(std::unique_ptr<State> s);
  void say(const std::string& line) const;
  Result<std::vector<EvaluatedPlan>> measure_all(const optimize::PolicyFile& policy, int steps,
                                                 const optimize::Solution* predicted);
  std::unique_ptr<State> s_;
};

}  // namespace emo::session
