// `emo analyze TRACE...`: ingest, graph, replay, critical path, slack.
#include <cstdio>

#include "cli_common.h"
#include "emo/analysis/analysis.h"
#include "emo/base/file_util.h"

namespace emo::cli {

namespace {
struct AnalyzeArgs {
  std::vector<std::string> traces;
  std::string json_out;
  std::string kernels_csv;
  std::string path_csv;
  int64_t step = -1;
  bool per_kernel = false;
  bool no_split = false;
};
}  // namespace

void add_analyze(CLI::App& root, Action& action) {
  auto args = std::make_shared<AnalyzeArgs>();
  auto* sub = root.add_subcommand(
      "analyze",
      "Build the dependency graph of one step from Kineto traces (one file per rank, .json or .json.gz), "
      "replay it, and report the critical path, per-kernel slack and per-GPU busy/idle time.");
  sub->add_option("traces", args->traces, "trace files, one per rank")->required();
  sub->add_option("--step", args->step, "ProfilerStep number to analyze (default: the last complete step)");
  sub->add_option("--json", args->json_out, "write the machine-readable result to FILE ('-' = stdout)");
  sub->add_option("--kernels-csv", args->kernels_csv, "write one row per GPU op with its slack to FILE");
  sub->add_option("--critical-path-csv", args->path_csv,
                  "write the critical path piece by piece (nodes and dependency latencies) to FILE");
  sub->add_flag("--per-kernel", args->per_kernel, "include every GPU op with its slack in --json");
  sub->add_flag("--no-split-collectives", args->no_split,
                "keep each collective kernel whole instead of splitting wait-for-peers from transfer");
  sub->callback([args, &action] {
    action = [args] {
      analysis::LoadOptions lo;
      if (args->step >= 0) lo.step = args->step;
      lo.build.split_collectives = !args->no_split;
      auto w = analysis::load(args->traces, lo);
      if (!w.ok()) return fail(w.error());
      analysis::Analysis a = analysis::analyze(*w);
      if (!args->kernels_csv.empty()) {
        Status s = write_file_atomic(args->kernels_csv, analysis::kernels_csv(*w, a));
        if (!s.ok()) return fail(s.error());
      }
      if (!args->path_csv.empty()) {
        Status s = write_file_atomic(args->path_csv, analysis::critical_path_csv(*w, a));
        if (!s.ok()) return fail(s.error());
      }
      if (!args->json_out.empty()) {
        Status s = write_file_atomic(args->json_out, analysis::to_json(*w, a, args->per_kernel).dump(1) + "\n");
        if (!s.ok()) return fail(s.error());
        if (args->json_out == "-") return kExitOk;
      }
      std::fputs(analysis::to_text(*w, a).c_str(), stdout);
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
