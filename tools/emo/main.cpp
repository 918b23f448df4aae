// emo: command-line entry. Each subcommand lives in its own cmd_*.cpp file.
#include <cstdio>
#include <exception>

#include "cli_common.h"

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
  emo::cli::add_run(app, action);
  emo::cli::add_pipeline(app, action);
  emo::cli::add_calibrate(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);  // prints help / usage message
    return rc == 0 ? 0 : emo::cli::kExitUsage;
  }
  try {
    return action ? action() : emo::cli::kExitUsage;
  } catch (const std::exception& e) {
    // Library code reports errors as values; this is a last line of defence.
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return emo::cli::kExitBadInput;
  }
}
