// One `emo pipeline` job as a library call, for the CLI and every other front end: validate the
// options, load the stage profile (and the published frontier to compare with), build the model and
// the 1F1B DAG, solve the frontier, compare, choose the point to run and build its schedule and plan
// file; then the machine-readable document and the human summary of the result. Nothing here
// writes a file or prints: the caller writes JobPlan::file_text to JobOptions::plan_file, job_json()
// to its JSON file, and prints job_text() and JobResult::warnings.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "emo/base/result.h"
#include "emo/pipeline/pipeline.h"

namespace emo::pipeline {

// The `emo pipeline` options; each field says the flag it comes from. Errors name the flag.
struct JobOptions {
  std::string profile;              // --profile: stage profile CSV (stage,instruction,frequency,time,energy)
  int microbatches = 0;             // --microbatches: per iteration, 1 to kMaxJobMicrobatches
  std::optional<int> stages;        // --stages: pipeline stages, >= 1 (absent: every stage in the profile)
  double blocking_power_w = -1;     // --blocking-power: W while blocked on communication, 0 to 1e5
  // --unit-time: time quantum in s, > 0 (absent: the compared file's, else 0.001). Given, it is used:
  // 0, a negative number, NaN or infinity is an error, never "the default".
  std::optional<double> unit_time_s;
  std::string accounting = "lowtime";  // --accounting: "lowtime" | "clocks"
  std::string compare;              // --compare: a published lowtime frontier (time,energy); "" = none
  double tolerance = 1e-5;          // --tolerance: relative tolerance reported with --compare, finite, >= 0
  // --plan: FILE.py (the frequency file of Perseus' PointSolution scheduler) or FILE.csv (one row per
  // instruction); "" = none. run_job only builds the file's text (JobPlan::file_text).
  std::string plan_file;
  // --plan-at: the least-energy point whose iteration time is at most this many seconds.
  std::optional<double> plan_at_s;
  // --max-slowdown: the least-energy point within this fraction of the fastest point's time.
  // With neither (and --plan): the least-energy point of all. Both at once: the CLI refuses it;
  // here --plan-at wins.
  std::optional<double> max_slowdown;
};

inline constexpr int kMaxJobMicrobatches = 4096;
// --unit-time: the largest time quantum, in seconds.
inline constexpr double kMaxJobUnitTimeS = 3600;

// The plan file formats of --plan, from its name: ".py" | ".csv" (anything else: nullopt); "-" (standard
// output) is the .py form.
enum class PlanFileFormat { kPerseusPy, kCsv };
std::optional<PlanFileFormat> plan_file_format(const std::string& path);

// The chosen point and its schedule.
struct JobPlan {
  size_t point = 0;     // index into JobResult::frontier.points
  double limit_s = 0;   // the time limit it was chosen under (none given: its own time)
  std::vector<std::vector<ScheduledInstruction>> schedule;  // stage_schedule() of its plan
  std::string file_text;  // the --plan file's text ("" without --plan)
};

struct JobResult {
  JobOptions options;
  Accounting accounting = Accounting::kLowtime;
  double unit_s = 0.001;  // --unit-time, else inferred from the compared file, else 0.001
  PipelineModel model;
  PipelineDag dag;
  Frontier frontier;
  double solve_ms = 0;  // model fit, DAG and frontier (wall clock; file reading excluded)
  std::optional<Comparison> comparison;  // with --compare
  std::optional<JobPlan> plan;           // with --plan, --plan-at or --max-slowdown
  std::vector<std::string> warnings;     // for `warning:` lines (e.g. a comparison of two problems)
};

// Runs the job. Bad options -> Error naming the flag ("--microbatches", "--plan-at", ...); a bad
// file -> the loader's Error naming the file; a limit no point meets -> Error naming --plan-at or
// --max-slowdown, its note giving the fastest time.
Result<JobResult> run_job(const JobOptions& options);

// The --plan file's text of the chosen point (precondition: result.plan).
std::string plan_file_text(const JobResult& result, PlanFileFormat format);

// The machine-readable result (what `emo pipeline --json` writes, without the final newline).
nlohmann::json job_json(const JobResult& result);
// The human summary (what `emo pipeline` prints), one or more '\n'-terminated lines.
std::string job_text(const JobResult& result);
// The "comparison" object of job_json; `published_path` names the compared file.
nlohmann::json comparison_json(const Comparison& comparison, const std::string& published_path);

}  // namespace emo::pipeline
