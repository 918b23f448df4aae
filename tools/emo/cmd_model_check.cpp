// `emo model-check FILE --format perseus|nvdvfs|gpudvfs [--fit-clocks A,B,C]`: model fidelity on a
// measured DVFS dataset — fit each unit from a few clocks, predict the others, report time and
// energy MAPE overall, per clock and per unit. `--calibrate` fits the device priors to the whole
// sweep instead (how the fitted values of the built-in profiles were obtained).
// The job is model::run_check_job (include/emo/model/check_report.h); this file parses flags and writes.
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "emo/model/check_report.h"

namespace emo::cli {

namespace {

struct ModelCheckArgs {
  model::CheckJobOptions job;
  std::string format;
  std::string fit_clocks;
  std::string json_out;
};

int run(const ModelCheckArgs& a) {
  if (Status st = check_outputs({a.job.file}, {{"--json", a.json_out}}); !st.ok()) return fail(st.error());
  model::CheckJobOptions o = a.job;
  auto format = model::parse_format(a.format);
  if (!format) return fail(format.error());
  o.format = *format;
  if (!a.fit_clocks.empty()) {
    auto c = parse_clock_list(a.fit_clocks, "--fit-clocks");
    if (!c) {
      fail(c.error());
      return kExitUsage;
    }
    o.fit_clocks = *c;
  }
  auto r = model::run_check_job(o);
  if (!r) return fail(r.error());
  if (!a.json_out.empty()) {
    Status s = write_file_atomic(a.json_out, model::check_job_json(*r).dump(1) + "\n");
    if (!s.ok()) return fail(s.error());
    if (a.json_out == "-") return kExitOk;
  }
  std::fputs(model::check_job_text(*r).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_model_check(CLI::App& root, Action& action) {
  auto args = std::make_shared<ModelCheckArgs>();
  auto& job = args->job;
  auto* sub = root.add_subcommand(
      "model-check",
      "Model fidelity on measured DVFS data: fit each unit (pipeline stage, kernel, workload) from a few SM clocks, "
      "predict the other measured clocks, report time and energy MAPE.");
  sub->add_option("file", job.file, "the dataset (CSV)")->required();
  sub->add_option("--format", args->format, "perseus (stage profile), nvdvfs (NV-DVFS-Benchmark slim CSV) or gpudvfs "
                                            "(GPU-DVFS-Dataset performance/power tables)")
      ->required();
  sub->add_option("--fit-clocks", args->fit_clocks, "clocks to fit from, A,B,C in MHz (default: 3 chosen from the data)");
  sub->add_option("--device", job.device, "device profile name or JSON file (default: from the format and file name)");
  sub->add_option("--json", args->json_out, "write the machine-readable result to FILE ('-' = stdout)");
  sub->add_option("--worst", job.worst, "how many worst units to list (default 5)");
  sub->add_flag("--calibrate", job.calibrate, "fit the device priors (V(f) knee/floor, memory knee/exponent) to the "
                                              "whole sweep instead");
  sub->add_option("--min-clock", job.min_clock_mhz, "with --calibrate: leave out clocks below this (MHz)");
  sub->callback([args, &action] { action = [args] { return run(*args); }; });
}

}  // namespace emo::cli
