// `emo deprofile TRACE... -o DIR`: the step as the job runs it without the profiler's cost on the host
// (emo/analysis/deprofile.h, docs/replay.md "The profiler's cost"), written back as Kineto traces.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"
#include "emo/analysis/deprofile.h"
#include "emo/base/file_util.h"

namespace emo::cli {
namespace {

struct DeprofileArgs {
  std::vector<std::string> traces;
  std::string out_dir;
  std::optional<int64_t> step;
  std::optional<double> host_scale;
  std::optional<double> untraced_ms;
};

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

int run_deprofile(const DeprofileArgs& a) {
  if (a.host_scale && !(*a.host_scale >= 0 && *a.host_scale <= 1)) {
    fail(make_error("--host-scale", std::to_string(*a.host_scale) + " is not a factor from 0 to 1"));
    return kExitUsage;
  }
  if (a.host_scale && a.untraced_ms) {
    fail(make_error("--host-scale", "give either the factor or the job's step time (--untraced-step-ms), not both"));
    return kExitUsage;
  }
  if (a.untraced_ms && !(*a.untraced_ms > 0 && *a.untraced_ms <= 1e9)) {
    fail(make_error("--untraced-step-ms", "must be a step time in ms above 0"));
    return kExitUsage;
  }
  std::optional<int64_t> untraced_ns;
  if (a.untraced_ms) untraced_ns = static_cast<int64_t>(*a.untraced_ms * 1e6 + 0.5);
  auto paths = analysis::expand_trace_paths(a.traces);
  if (!paths) return fail(paths.error());
  if (Status st = check_outputs(*paths, {{"-o", a.out_dir}}); !st.ok()) return fail(st.error());
  analysis::LoadOptions lo;
  if (Status st = set_step(a.step, lo.step); !st.ok()) return fail(st.error());
  auto w = analysis::load(*paths, lo);
  if (!w) return fail(w.error());
  auto d = analysis::deprofile(*w, a.out_dir, a.host_scale, untraced_ns);
  if (!d) return fail(d.error());
  for (const std::string& text : d->warnings) warn(text);
  if (d->cost) {
    std::printf("step: %.3f ms traced, %.3f ms without the profiler (%s)\n", ms(d->cost->traced_ns),
                ms(d->cost->untraced_ns), untraced_ns ? "--untraced-step-ms" : "emo_untraced_step_us");
  }
  std::printf("host time x%.4f: the step replays at %.3f ms\n", d->host_scale, ms(d->replayed_ns));
  for (const std::string& f : d->files) std::printf("wrote %s\n", f.c_str());
  return kExitOk;
}

}  // namespace

void add_deprofile(CLI::App& root, Action& action) {
  auto args = std::make_shared<DeprofileArgs>();
  auto* sub = root.add_subcommand(
      "deprofile",
      "Take the profiler's own cost on the host out of a step: torch.profiler slows every recorded operator and "
      "runtime call, so a traced step can be far slower than the job's and show GPU slack the job does not have. "
      "From the job's untraced step times in the trace (emo_untraced_step_us, written by emo.torch.capture and "
      "EnergyOptimizer), finds the factor on host time (CPU ops, runtime calls, the gaps between them; not waits) "
      "at which the replayed step takes the untraced time, and writes the step replayed at it as Kineto traces, "
      "one per rank, for every other command to read (docs/replay.md, \"The profiler's cost\").");
  sub->add_option("traces", args->traces, "trace files, one per rank, or a folder of them (its .json and .json.gz files)")
      ->required();
  sub->add_option("-o,--out", args->out_dir, "output folder (replaced once complete): one <name>.json per rank")
      ->required();
  sub->add_option("--step", args->step, "ProfilerStep number (default: the last complete step)");
  sub->add_option("--untraced-step-ms", args->untraced_ms,
                  "the job's step time without the profiler, in ms (e.g. from its own log), instead of the trace's "
                  "emo_untraced_step_us: for traces recorded without emo.torch.capture");
  sub->add_option("--host-scale", args->host_scale,
                  "the factor on host time, from 0 to 1, instead of the one the untraced step gives");
  sub->callback([&action, args] { action = [args] { return run_deprofile(*args); }; });
}

}  // namespace emo::cli
