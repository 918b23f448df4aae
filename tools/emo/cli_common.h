// Shared pieces of the emo subcommands: error printing and exit codes.
// Exit status: 0 ok, 1 bad input (an `error:` line, maybe a `note:`), 2 usage.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/base/result.h"

namespace emo::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 1;
inline constexpr int kExitUsage = 2;

// Prints `error: WHERE: WHAT` and `note: NOTE` to stderr; returns kExitBadInput.
int fail(const Error& e);
void warn(const std::string& message);
// --step N into the load options: a ProfilerStep number, 0 or more (absent: the last complete step).
Status set_step(const std::optional<int64_t>& step, std::optional<int64_t>& into);
// "855,1140,1410" -> {855, 1140, 1410}; a bad item -> Error naming `flag`.
Result<std::vector<int>> parse_clock_list(const std::string& text, const std::string& flag);

// Under an MPI run of several processes (docs/mpi.md), the first step of a subcommand on the trace flow:
// a process other than 0 serves its shard of `traces` and returns its exit status; process 0 notes the
// traces and returns nullopt, as one process does. Every process calls it at the same point.
std::optional<int> serve_if_worker(const std::vector<std::string>& traces, const analysis::LoadOptions& load);
// main, on process 0 after the subcommand: a subcommand that failed before reading the traces drains the
// others' shards (or, where one does not come, ends the run); returns `rc`.
int end_run(int rc);
// The subcommands that read traces under an MPI run; the others run on process 0 alone.
inline bool shards_traces(const std::string& subcommand) {
  for (const char* s : {"analyze", "whatif", "pack", "profile", "optimize", "evaluate", "run"})
    if (subcommand == s) return true;
  return false;
}

// A subcommand: registered on the root app, run after parsing if selected.
using Action = std::function<int()>;
void add_analyze(CLI::App& root, Action& action);
void add_whatif(CLI::App& root, Action& action);
void add_synth(CLI::App& root, Action& action);
void add_deprofile(CLI::App& root, Action& action);
void add_devices(CLI::App& root, Action& action);
void add_model_check(CLI::App& root, Action& action);
void add_pack(CLI::App& root, Action& action);
void add_profile(CLI::App& root, Action& action);
void add_optimize(CLI::App& root, Action& action);
void add_evaluate(CLI::App& root, Action& action);
void add_apply(CLI::App& root, Action& action);
void add_run(CLI::App& root, Action& action);
void add_pipeline(CLI::App& root, Action& action);
void add_calibrate(CLI::App& root, Action& action);
void add_clockd(CLI::App& root, Action& action);

}  // namespace emo::cli
