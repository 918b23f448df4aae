// See pack_setup.h.
#include "pack_setup.h"

#include "emo/backends/backends.h"

namespace emo::cli {

void PackFlags::add_to(CLI::App* sub, const std::string& device_help) {
  sub->add_option("traces", traces, "trace files, one per rank")->required();
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
}

Result<PackedStep> load_and_pack(const PackFlags& f) {
  auto profile = backends::profile_of(f.device);
  if (!profile) return profile.error();
  analysis::LoadOptions lo;
  if (f.step >= 0) lo.step = f.step;
  auto w = analysis::load(f.traces, lo);
  if (!w) return w.error();
  analysis::Analysis an = analysis::analyze(*w);
  pack::PackOptions po;
  po.min_switch_multiple = f.min_pack;
  if (f.min_pack_ms_option && f.min_pack_ms_option->count() > 0) {
    if (!(f.min_pack_ms >= 0 && f.min_pack_ms <= 1e9))
      return make_error("--min-pack-ms", "must be a number of milliseconds from 0 to 1e9");
    po.min_pack_ns = int64_t(f.min_pack_ms * 1e6);
  }
  po.critical_slack_us = f.critical_us;
  po.profile_clocks = f.clocks;
  po.per_kernel = f.per_kernel;
  auto p = pack::make_packs(*w, an, *profile, po);
  if (!p) return p.error();
  return PackedStep{std::move(*profile), std::move(*w), std::move(*p)};
}

Result<std::vector<pack::ProfiledRun>> profiling_runs(const PackedStep& s, const std::string& profile_on,
                                                      const std::string& profiled_dir) {
  if (!profiled_dir.empty()) {
    if (!profile_on.empty())
      return make_error("--profiled", "give either --profiled DIR (recorded runs) or --profile-on DEVICE, not both");
    return backends::read_profiled_dir(profiled_dir, s.workload);
  }
  return backends::profile_plan(profile_on.empty() ? "emulated:" + s.profile.name : profile_on, s.workload, s.packing);
}

}  // namespace emo::cli
