// `emo synth WORKLOAD -o DIR`: writes realistic Kineto traces, one per rank,
// of one of the workload families (docs/workloads.md); the built-in example
// input and the benchmark's large input (--min-events).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "emo/synth/synth.h"

namespace emo::cli {
namespace {

struct SynthArgs {
  std::string workload;
  std::string out_dir;
  std::string json;
  synth::Options options;
};

int run_synth(const SynthArgs& a) {
  auto workload = synth::parse_workload(a.workload);
  if (!workload) return fail(workload.error());
  synth::Options o = a.options;
  o.workload = *workload;
  if (Status st = synth::validate(o); !st.ok()) return fail(st.error());

  std::vector<synth::FileInfo> files;
  if (Status st = synth::write_traces(o, a.out_dir, &files); !st.ok()) return fail(st.error());

  if (a.json != "-") {
    for (const auto& f : files) {
      std::printf("%s: %lld events, %lld bytes\n", f.path.c_str(), static_cast<long long>(f.events),
                  static_cast<long long>(f.bytes));
    }
  }
  if (!a.json.empty()) {
    nlohmann::json j;
    j["workload"] = synth::workload_name(o.workload);
    j["ranks"] = o.ranks;
    j["layers"] = files.empty() ? o.layers : files[0].layers;
    j["steps"] = files.empty() ? o.steps : files[0].steps;
    if (o.workload == synth::Workload::kTrainPP) j["microbatches"] = o.microbatches;
    j["seed"] = o.seed;
    j["files"] = nlohmann::json::array();
    j["events"] = nlohmann::json::array();
    j["bytes"] = nlohmann::json::array();
    for (const auto& f : files) {
      j["files"].push_back(f.path);
      j["events"].push_back(f.events);
      j["bytes"].push_back(f.bytes);
    }
    if (Status st = write_file_atomic(a.json, j.dump(2) + "\n"); !st.ok()) return fail(st.error());
  }
  return kExitOk;
}

}  // namespace

void add_synth(CLI::App& root, Action& action) {
  auto args = std::make_shared<SynthArgs>();
  auto* sub = root.add_subcommand(
      "synth", "Generate realistic Kineto traces (one file per rank) of a synthetic workload");
  std::string families = "Workload families:";
  for (synth::Workload w : synth::kAllWorkloads) {
    std::string name = synth::workload_name(w);
    families += "\n  " + name + std::string(14 - name.size(), ' ') + synth::workload_summary(w);
  }
  sub->footer(families + "\nSee docs/workloads.md for the structure each one exercises.");
  sub->add_option("WORKLOAD", args->workload, "train-dp, train-pp, train-tp, infer-decode or dataloader")
      ->required();
  sub->add_option("-o,--out", args->out_dir, "Output directory (created if needed)")->required();
  sub->add_option("--ranks", args->options.ranks, "Ranks (one trace file each)")->capture_default_str();
  sub->add_option("--layers", args->options.layers,
                  "Transformer layers (train-pp: per stage; dataloader: residual blocks)")
      ->capture_default_str();
  sub->add_option("--steps", args->options.steps, "ProfilerStep#N iterations per file")
      ->capture_default_str();
  sub->add_option("--decode-tokens", args->options.decode_tokens,
                  "infer-decode: decode iterations per step")
      ->capture_default_str();
  sub->add_option("--microbatches", args->options.microbatches, "train-pp: microbatches per step")
      ->capture_default_str();
  sub->add_option("--seed", args->options.seed, "Random seed (same seed, same bytes)")
      ->capture_default_str();
  sub->add_option("--min-events", args->options.min_events,
                  "Raise --layers (dataloader: --steps) until each file has at least this many events")
      ->capture_default_str();
  sub->add_option("--json", args->json, "Write the list of files as JSON to FILE ('-' for stdout)");
  sub->callback([&action, args] { action = [args] { return run_synth(*args); }; });
}

}  // namespace emo::cli
