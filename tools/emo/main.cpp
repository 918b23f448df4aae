// emo: command-line entry. Each subcommand lives in its own cmd_*.cpp file.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli_common.h"
#include "emo/device/device.h"

int main(int argc, char** argv) {
  CLI::App app{
      "EMO: lowers the GPU energy of AI workloads within a latency target, from their own "
      "PyTorch profiler (Kineto) traces."};
  app.require_subcommand(1);

  app.set_version_flag("--version", "emo 0.1.0");
  emo::cli::Action action;
  emo::cli::add_analyze(app, action);
  emo::cli::add_whatif(app, action);
  emo::cli::add_synth(app, action);
  emo::cli::add_devices(app, action);
  emo::cli::add_model_check(app, action);
  emo::cli::add_pack(app, action);
  emo::cli::add_profile(app, action);
  emo::cli::add_optimize(app, action);
  emo::cli::add_evaluate(app, action);
  emo::cli::add_apply(app, action);
  emo::cli::add_run(app, action);
  emo::cli::add_pipeline(app, action);
  emo::cli::add_calibrate(app, action);
  emo::cli::add_clockd(app, action);
  // An empty argument is never a value EMO reads (CLI11 would take `--max-slowdown ""` as 0 and
  // `--step ""` as the default): a usage error naming what it was given to.
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '\0') continue;
    const bool after_flag = i > 1 && argv[i - 1][0] == '-' && argv[i - 1][1] != '\0';
    std::fprintf(stderr, "error: %s%s: empty argument\n", after_flag ? argv[i - 1] : "argument ",
                 after_flag ? "" : std::to_string(i).c_str());
    std::fprintf(stderr, "note: give a value, or leave the option out for its default\n");
    return emo::cli::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // Usage errors speak as every other error does: `error:` and a `note:` naming the help to read.
    const std::vector<CLI::App*> used = app.get_subcommands();
    const std::string name = used.empty() ? "emo" : "emo " + used.front()->get_name();
    std::fprintf(stderr, "error: %s\nnote: run `%s --help` for the options\n", e.what(), name.c_str());
    return emo::cli::kExitUsage;
  }
  try {
    const int rc = action ? action() : emo::cli::kExitUsage;
    // A locked clock that could not be reset was said on stderr where it happened; the run fails.
    return rc == 0 && emo::device::clock_reset_failures() > 0 ? emo::cli::kExitBadInput : rc;
  } catch (const std::exception& e) {
    // Library code reports errors as values; this is a last line of defence.
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return emo::cli::kExitBadInput;
  }
}
