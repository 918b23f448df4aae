// `emo pipeline --profile CSV --microbatches N --blocking-power W [--compare PUBLISHED.csv]`:
// Perseus-compatible planning — the 1F1B pipeline DAG from a stage profile, the whole time–energy
// frontier of per-instruction clock plans with the published (lowtime) accounting, the same plans
// with the measured profile, and optionally a point-by-point comparison with a published frontier.
// The job is pipeline::run_job (include/emo/pipeline/job.h); this file parses flags and writes.
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "emo/pipeline/job.h"

namespace emo::cli {

namespace {

struct PipelineArgs {
  pipeline::JobOptions job;
  std::string json_out;
  double plan_at = 0, max_slowdown = 0;
  CLI::Option* plan_at_opt = nullptr;
  CLI::Option* max_slowdown_opt = nullptr;
};

int run(const PipelineArgs& a) {
  if (Status st = check_outputs({a.job.profile, a.job.compare}, {{"--json", a.json_out}, {"--plan", a.job.plan_file}});
      !st.ok())
    return fail(st.error());
  if (a.json_out == "-" && a.job.plan_file == "-") {
    fail(make_error("--plan -", "standard output is also --json's", "give one of them a file"));
    return kExitUsage;
  }
  pipeline::JobOptions o = a.job;
  if (a.plan_at_opt->count()) o.plan_at_s = a.plan_at;
  if (a.max_slowdown_opt->count()) o.max_slowdown = a.max_slowdown;
  auto r = pipeline::run_job(o);
  if (!r) return fail(r.error());
  for (const auto& w : r->warnings) warn(w);  // stderr, whichever output goes to stdout
  if (!o.plan_file.empty()) {
    Status st = write_file_atomic(o.plan_file, r->plan->file_text);
    if (!st.ok()) return fail(st.error());
  }
  if (!a.json_out.empty()) {
    Status s = write_file_atomic(a.json_out, pipeline::job_json(*r).dump(1) + "\n");
    if (!s.ok()) return fail(s.error());
  }
  if (a.json_out != "-" && o.plan_file != "-") std::fputs(pipeline::job_text(*r).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_pipeline(CLI::App& root, Action& action) {
  auto args = std::make_shared<PipelineArgs>();
  auto& job = args->job;
  auto* sub = root.add_subcommand(
      "pipeline",
      "Perseus-compatible: the 1F1B pipeline DAG from a stage profile and the whole time-energy frontier of "
      "per-instruction clock plans, with the published (lowtime) energy accounting.");
  sub->add_option("--profile", job.profile, "stage profile CSV: stage,instruction,frequency,time,energy")
      ->required();
  sub->add_option("--microbatches", job.microbatches, "microbatches per iteration (1 to 4096)")->required();
  sub->add_option("--stages", job.stages, "pipeline stages, 1 or more (default: every stage in the profile)");
  sub->add_option("--blocking-power", job.blocking_power_w,
                  "GPU power while blocked on communication, W (Perseus: A100 83.64, A40 70.38)")
      ->required();
  sub->add_option("--unit-time", job.unit_time_s,
                  "time quantum in seconds, more than 0 and at most 3600 (default: the compared file's, "
                  "else 0.001)");
  sub->add_option(
      "--accounting", job.accounting,
      "lowtime (durations on the time grid, as the published files) or clocks (each clock's own time)");
  auto* compare_opt =
      sub->add_option("--compare", job.compare, "a published lowtime frontier (time,energy) to compare with");
  // Without --compare a tolerance would be read and then ignored: a usage error (as --plan-at with
  // --max-slowdown), not a silent no-op.
  sub->add_option("--tolerance", job.tolerance,
                  "relative tolerance reported with --compare, a finite number >= 0 (default 1e-5)")
      ->needs(compare_opt);
  sub->add_option("--json", args->json_out, "write the machine-readable result to FILE ('-' = stdout)");
  sub->add_option("--plan", job.plan_file,
                  "write the chosen point's plan: FILE.py is the frequency file of Perseus' PointSolution "
                  "scheduler (per stage, its (instruction, MHz) in execution order), FILE.csv one row per "
                  "instruction, '-' the .py form on stdout. The point: see --plan-at and --max-slowdown; neither: the "
                  "least-energy point");
  args->plan_at_opt = sub->add_option(
      "--plan-at", args->plan_at, "choose the least-energy point whose iteration time is at most SECONDS");
  args->max_slowdown_opt =
      sub->add_option("--max-slowdown", args->max_slowdown,
                      "choose the least-energy point within this fraction of the fastest plan's time (0.05: 5 %)")
          ->excludes(args->plan_at_opt);
  sub->callback([args, &action] { action = [args] { return run(*args); }; });
}

}  // namespace emo::cli
