// `emo analyze TRACE...`: ingest, graph, replay, critical path, slack.
#include <cstdio>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "emo/analysis/analysis.h"
#include "emo/dist/dist.h"
#include "session_flags.h"

namespace emo::cli {

namespace {
struct AnalyzeArgs {
  std::vector<std::string> traces;
  std::string json_out;
  std::string kernels_csv;
  std::string path_csv;
  std::optional<int64_t> step;
  bool per_kernel = false;
  bool no_split = false;
  bool cpu_ops_as_kernels = false;
  bool deprofile = false;
};

// Under mpirun: every process reads its shard and builds, replays and analyzes its part of the step
// (analysis::load_part, analyze_part; with --deprofile, the profiler's cost found by shared replays and each
// process's ranks written back at it); process 0 writes what one process would (analysis::report_part).
bool in_parts() { return dist::world().size() > 1; }

int analyze_in_parts(const AnalyzeArgs& args, const analysis::LoadOptions& load) {
  dist::Comm& world = dist::world();
  const Status outputs =
      world.is_root() ? check_outputs(args.traces, {{"--json", args.json_out},
                                                    {"--kernels-csv", args.kernels_csv},
                                                    {"--critical-path-csv", args.path_csv}})
                      : Status{};
  auto w = analysis::load_part(args.traces, load, world, outputs);
  if (!w.ok()) return fail(w.error());
  auto a = analysis::analyze_part(w->part, world);
  if (!a.ok()) return fail(a.error());
  const analysis::ReportAsk ask{args.per_kernel, !args.kernels_csv.empty(), !args.path_csv.empty()};
  auto r = analysis::report_part(*w, *a, ask, world);
  if (!r.ok()) return fail(r.error());
  if (!world.is_root()) return kExitOk;
  for (const std::string& text : r->warnings) warn(text);
  for (const auto& [path, text] : {std::pair{&args.kernels_csv, &r->kernels_csv}, std::pair{&args.path_csv, &r->critical_path_csv}}) {
    if (path->empty()) continue;
    if (Status st = write_file_atomic(*path, *text); !st.ok()) return fail(st.error());
  }
  if (!args.json_out.empty()) {
    if (Status st = write_file_atomic(args.json_out, r->json.dump(1) + "\n"); !st.ok()) return fail(st.error());
    if (args.json_out == "-") return kExitOk;
  }
  std::fputs(r->text.c_str(), stdout);
  return kExitOk;
}
}  // namespace

void add_analyze(CLI::App& root, Action& action) {
  auto args = std::make_shared<AnalyzeArgs>();
  auto* sub = root.add_subcommand(
      "analyze",
      "Build the dependency graph of one step from Kineto traces (one file per rank, .json or .json.gz), "
      "replay it, and report the critical path, per-kernel slack and per-GPU busy/idle time.");
  sub->add_option("traces", args->traces, "trace files, one per rank, or a folder of them (its .json and .json.gz files)")->required();
  sub->add_option("--step", args->step, "ProfilerStep number to analyze (default: the last complete step)");
  sub->add_option("--json", args->json_out, "write the machine-readable result to FILE ('-' = stdout)");
  sub->add_option("--kernels-csv", args->kernels_csv, "write one row per GPU op with its slack to FILE");
  sub->add_option("--critical-path-csv", args->path_csv,
                  "write the critical path piece by piece (nodes and dependency latencies) to FILE");
  sub->add_flag("--per-kernel", args->per_kernel, "include every GPU op with its slack in --json");
  sub->add_flag("--cpu-ops-as-kernels", args->cpu_ops_as_kernels, "a trace of a CPU-only run: each leaf CPU operator stands in for a kernel of its duration on the emulated GPU (try the whole loop without a GPU; docs/python.md)");
  add_deprofile_flag(sub, args->deprofile);
  sub->add_flag("--no-split-collectives", args->no_split,
                "keep each collective kernel whole instead of splitting wait-for-peers from transfer");
  sub->callback([args, &action] {
    action = [args] {
      session::Options o;
      o.traces = args->traces;
      if (Status st = set_step(args->step, o.load.step); !st.ok()) return fail(st.error());
      o.load.build.split_collectives = !args->no_split;
      o.load.cpu_ops_as_kernels = args->cpu_ops_as_kernels;
      o.load.deprofile = args->deprofile;
      if (in_parts()) return analyze_in_parts(*args, o.load);
      if (auto rc = serve_if_worker(o.traces, o.load)) return *rc;
      if (Status st = check_outputs(args->traces, {{"--json", args->json_out}, {"--kernels-csv", args->kernels_csv}, {"--critical-path-csv", args->path_csv}}); !st.ok()) return fail(st.error());
      auto s = session::Session::open(o);
      if (!s.ok()) return fail(s.error());
      auto an = s->analysis();
      if (!an.ok()) return fail(an.error());
      // Doubts about the step (malformed events, events outside the profiler
      // window, missing ranks, the replay's error) go to stderr, whichever output was asked for.
      for (const std::string& text : analysis::step_warnings(**s->workload(), **an)) warn(text);
      if (!args->kernels_csv.empty()) {
        if (Status st = write_view(*s, *report::kernels_csv(), args->kernels_csv); !st.ok()) return fail(st.error());
      }
      if (!args->path_csv.empty()) {
        if (Status st = write_view(*s, *report::critical_path_csv(), args->path_csv); !st.ok()) return fail(st.error());
      }
      if (!args->json_out.empty()) {
        if (Status st = write_view(*s, *report::analyze_json(args->per_kernel), args->json_out); !st.ok())
          return fail(st.error());
        if (args->json_out == "-") return kExitOk;
      }
      if (Status st = print_view(*s, *report::analyze_text()); !st.ok()) return fail(st.error());
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
