// `emo run [TRACE...] --device DEV --max-slowdown D -o DIR`: the whole method end to end (analyze,
// pack, profile, fit, optimize, evaluate on the emulated GPU) with a report folder. Without traces it
// runs on the built-in example (`emo synth train-pp --ranks 4`, written into DIR/input/).
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "cli_common.h"
#include "session_flags.h"
#include "emo/base/file_util.h"
#include "emo/report/report.h"
#include "emo/report/views.h"

namespace emo::cli {

namespace {
struct RunArgs {
  report::RunOptions options;
  std::string json_out;
  bool no_check = false;
  bool no_refine_profile = false;
};
}  // namespace

void add_run(CLI::App& root, Action& action) {
  auto a = std::make_shared<RunArgs>();
  a->options.out_dir = "emo-report";
  auto* sub = root.add_subcommand(
      "run",
      "The whole method end to end: analyze the step, pack its GPU ops, profile the packs on the emulated GPU "
      "of --device, fit models, optimize a clock per pack within --max-slowdown, evaluate the policy and the "
      "baselines on the emulated GPU, and write a report folder (summary.json, packs.csv, results.csv, "
      "policy.json, report.html, overlay*.json). Without traces, runs on the built-in example "
      "(emo synth train-pp, 4 ranks).");
  sub->add_option("traces", a->options.traces, "trace files, one per rank, or a folder of them (default: the built-in example)");
  sub->add_option("--device", a->options.device, "target device: profile name (h100, a100, ...), file, or emulated:NAME")
      ->capture_default_str();
  sub->add_option("--profile-on", a->options.profile_on,
                  "the emulated GPU that profiles, checks and evaluates, e.g. emulated:FILE@3 for one built from a "
                  "modified profile while the models keep --device's (default: emulated:DEVICE)");
  sub->add_option("--max-slowdown", a->options.max_slowdown, "allowed step-time increase, e.g. 0.05 = 5 %")
      ->capture_default_str();
  sub->add_option("--reserve", a->options.reserve,
                  "part of --max-slowdown kept back for model and clock-switching error")
      ->capture_default_str();
  sub->add_option("--profiled", a->options.profiled_dir,
                  "fit from profiling runs recorded at the plan's clocks in DIR (docs/profiling.md) instead of "
                  "profiling on the emulated GPU");
  sub->add_flag("--no-check", a->no_check,
                "hand out the optimizer's policy without first running it for a few steps on the emulated GPU "
                "that profiled it (the check lowers the plan target when the measured slowdown eats more than "
                "half the reserve; never done with --profiled)");
  add_no_refine_profile_flag(sub, a->no_refine_profile);
  sub->add_flag("--accept-doubt", a->options.accept_doubt,
                fmt::format("optimize a step whose replay is more than {:g} % off the trace (docs/replay.md) "
                            "instead of stopping",
                            report::kReplayRefusePct));
  add_deprofile_flag(sub, a->options.deprofile);
  sub->add_option("--steps", a->options.eval_steps, "steps to run each plan for in the evaluation, 2 to 1000 (the first is a warm-up)")
      ->capture_default_str();
  sub->add_option("-o,--output", a->options.out_dir, "report folder (replaced only once the new one is complete)")
      ->capture_default_str();
  sub->add_option("--json", a->json_out, "write the summary as JSON to FILE ('-' = stdout)");
  sub->callback([a, &action] {
    action = [a] {
      report::RunOptions o = a->options;
      o.check = !a->no_check;
      o.refine_profile = !a->no_refine_profile;
      if (::isatty(2)) o.progress = [](const std::string& line) { std::fprintf(stderr, "emo run: %s\n", line.c_str()); };
      if (auto rc = serve_if_worker(o.traces, report::session_options(o).load)) return *rc;
      std::vector<std::string> inputs = o.traces;
      if (!o.profiled_dir.empty()) inputs.push_back(o.profiled_dir);
      if (Status st = check_outputs(inputs, {{"-o", o.out_dir}, {"--json", a->json_out}}); !st.ok())
        return fail(st.error());
      // The --json file is opened before the run, so that a path that cannot be written fails the run
      // before the report folder replaces an earlier one.
      AtomicFile json;
      if (!a->json_out.empty()) {
        if (Status st = json.open(a->json_out); !st.ok()) return fail(st.error());
      }
      auto r = report::run(o);
      if (!r.ok()) return fail(r.error());
      for (const auto& w : r->summary["summary"].value("warnings", std::vector<std::string>{})) warn(w);
      if (!a->json_out.empty()) {
        Status st = json.write(r->summary.dump(1) + "\n");
        if (st.ok()) st = json.commit();
        if (!st.ok()) return fail(st.error());
        if (a->json_out == "-") return kExitOk;
      }
      std::printf("true behaviour on the emulated GPU (%d steps each, first left out):\n%s", o.eval_steps,
                  report::measured_table(r->plans, o.max_slowdown, o.reserve).c_str());
      std::printf("report written to %s/ (report.html, summary.json, results.csv, packs.csv, policy.json, overlay.json)\n",
                  r->out_dir.c_str());
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
