// See session_flags.h.
#include "session_flags.h"

#include <cstdio>

#include "cli_common.h"
#include "emo/base/file_util.h"

namespace emo::cli {

void PackFlags::add_to(CLI::App* sub, const std::string& device_help) {
  sub->add_option("traces", traces, "trace files, one per rank, or a folder of them (its .json and .json.gz files)")->required();
  sub->add_option("--device", device, device_help)->capture_default_str();
  sub->add_option("--step", step, "ProfilerStep number (default: the last complete step)");
  sub->add_option("--min-pack", min_pack, "packs last at least this many clock-switch latencies")->capture_default_str();
  min_pack_ms_option =
      sub->add_option("--min-pack-ms", min_pack_ms, "minimum pack length in ms (overrides --min-pack)");
  sub->add_option("--critical-slack-us", critical_us, "ops with at most this much slack count as critical")
      ->capture_default_str();
  sub->add_option("--profile-clocks", clocks, "clocks in the profiling plan")->capture_default_str();
  sub->add_flag("--per-kernel", per_kernel,
                "kernel-level reference: every GPU op is a pack of its own (no minimum length), to measure "
                "what packing costs");
  sub->add_flag("--cpu-ops-as-kernels", cpu_ops_as_kernels,
                "a trace of a CPU-only run: each leaf CPU operator stands in for a kernel of its duration on the emulated GPU (try the whole loop without a GPU; docs/python.md)");
  add_deprofile_flag(sub, deprofile);
}

void add_deprofile_flag(CLI::App* sub, bool& into) {
  sub->add_flag("--deprofile", into,
                "where the profiler slowed the step by more than 10 % against the job's untraced steps the trace "
                "carries (emo_untraced_step_us), work on the step without the profiler's host cost (as `emo "
                "deprofile` writes it; docs/replay.md, \"The profiler's cost\")");
}

void add_no_refine_profile_flag(CLI::App* sub, bool& into) {
  sub->add_flag("--no-refine-profile", into,
                "fit only from the profiling plan's clocks: by default, where the first plan (or a baseline) mostly runs "
                "more than 3 % of f_max from every profiled clock, that clock is profiled too and the step solved again "
                "(one more profiling run per clock and one more solve; docs/profiling.md, \"Profiling where the plan runs\"); "
                "with --profiled the runs cannot grow and a warning names the clock to record");
}

Result<session::Options> PackFlags::options() const {
  session::Options o;
  o.traces = traces;
  o.device = device;
  EMO_RETURN_IF_ERROR(set_step(step, o.load.step));
  o.load.cpu_ops_as_kernels = cpu_ops_as_kernels;
  o.load.deprofile = deprofile;
  o.pack.min_switch_multiple = min_pack;
  if (min_pack_ms_option && min_pack_ms_option->count() > 0) {
    if (!(min_pack_ms >= 0 && min_pack_ms <= 1e9))
      return make_error("--min-pack-ms", "must be a number of milliseconds from 0 to 1e9");
    o.pack.min_pack_ns = int64_t(min_pack_ms * 1e6);
  }
  if (!(critical_us >= 0 && critical_us <= 1e9))
    return make_error("--critical-slack-us", "must be a number of microseconds from 0 to 1e9");
  o.pack.critical_slack_ns = int64_t(critical_us * 1e3);
  o.pack.profile_clocks = clocks;
  o.pack.per_kernel = per_kernel;
  return o;
}

Status write_view(session::Session& s, const report::View& view, const std::string& path) {
  auto text = view.render(s);
  if (!text) return text.error();
  return write_file_atomic(path, *text);
}

Status print_view(session::Session& s, const report::View& view) {
  auto text = view.render(s);
  if (!text) return text.error();
  std::fputs(text->c_str(), stdout);
  return {};
}

}  // namespace emo::cli
