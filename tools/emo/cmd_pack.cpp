// `emo pack TRACE... --device DEV`: packs, signatures, the profiling plan and what it saves; with
// --fit, runs the plan on the emulated GPU and reports how well the pack models predict it.
#include <cstdio>

#include "cli_common.h"
#include "emo/backends/backends.h"
#include "emo/base/file_util.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"

namespace emo::cli {

namespace {
struct PackArgs {
  std::vector<std::string> traces;
  std::string device = "h100";
  std::string json_out, csv_out;
  int64_t step = -1;
  double min_pack = 1.0;
  double min_pack_ms = -1;
  double critical_us = 50;
  int clocks = 3;
  bool list = false;
};
}  // namespace

void add_pack(CLI::App& root, Action& action) {
  auto a = std::make_shared<PackArgs>();
  auto* sub = root.add_subcommand(
      "pack",
      "Split each GPU's timeline of one step into packs (contiguous segments that get one SM clock), give "
      "repeated structure one signature, and plan the profiling: which clocks to record and how many "
      "profiled units that is against per-kernel profiling.");
  sub->add_option("traces", a->traces, "trace files, one per rank")->required();
  sub->add_option("--device", a->device, "device profile (h100, a100, ...), profile file, emulated:NAME or nvml:N")
      ->capture_default_str();
  sub->add_option("--step", a->step, "ProfilerStep number (default: the last complete step)");
  sub->add_option("--min-pack", a->min_pack, "packs last at least this many clock-switch latencies")->capture_default_str();
  sub->add_option("--min-pack-ms", a->min_pack_ms, "minimum pack length in ms (overrides --min-pack)");
  sub->add_option("--critical-slack-us", a->critical_us, "ops with at most this much slack count as critical")
      ->capture_default_str();
  sub->add_option("--profile-clocks", a->clocks, "clocks in the profiling plan")->capture_default_str();
  sub->add_option("--json", a->json_out, "write packs, signatures and units as JSON to FILE ('-' = stdout)");
  sub->add_option("--csv", a->csv_out, "write one row per pack to FILE");
  sub->add_flag("--all", a->list, "list every pack in --json (default: the first 1000)");
  sub->callback([a, &action] {
    action = [a] {
      auto profile = backends::profile_of(a->device);
      if (!profile.ok()) return fail(profile.error());
      analysis::LoadOptions lo;
      if (a->step >= 0) lo.step = a->step;
      auto w = analysis::load(a->traces, lo);
      if (!w.ok()) return fail(w.error());
      analysis::Analysis an = analysis::analyze(*w);
      pack::PackOptions po;
      po.min_switch_multiple = a->min_pack;
      if (a->min_pack_ms >= 0) po.min_pack_ns = int64_t(a->min_pack_ms * 1e6);
      po.critical_slack_us = a->critical_us;
      po.profile_clocks = a->clocks;
      auto p = pack::make_packs(*w, an, *profile, po);
      if (!p.ok()) return fail(p.error());
      if (!a->csv_out.empty()) {
        Status s = write_file_atomic(a->csv_out, pack::packs_csv(*w, *p));
        if (!s.ok()) return fail(s.error());
      }
      if (!a->json_out.empty()) {
        Status s = write_file_atomic(a->json_out, pack::to_json(*w, *p, a->list).dump(1) + "\n");
        if (!s.ok()) return fail(s.error());
        if (a->json_out == "-") return kExitOk;
      }
      std::fputs(pack::to_text(*w, *p).c_str(), stdout);
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
