// `emo pack TRACE... --device DEV`: packs, signatures, the profiling plan and what it saves; with
// --fidelity-at MHz, fits the pack models from the profiling runs (emulated, or --profiled DIR) and
// compares their predictions at that clock with the emulated GPU's truth, per pack and for the step.
// `emo profile TRACE... --device emulated:NAME -o DIR` writes the profiling runs as a hardware capture would.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli_common.h"
#include "emo/backends/backends.h"
#include "emo/base/file_util.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"
#include "pack_setup.h"

namespace emo::cli {

namespace {
struct PackArgs {
  PackFlags flags;
  std::string json_out, csv_out;
  bool list = false;
  int fidelity_at = 0;
  std::string fidelity_csv, profiled, profile_on;
};

// Median, 90th percentile and largest of |x| (x in %).
struct Spread {
  double median = 0, p90 = 0, max = 0;
};
Spread spread_of(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  for (double& x : v) x = std::abs(x);
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  s.p90 = v[std::min(v.size() - 1, size_t(std::ceil(0.9 * double(v.size()))) - 1)];
  s.max = v.back();
  return s;
}

nlohmann::json fidelity_json(const backends::PackFidelity& f) {
  std::vector<double> te, ee;
  double weight = 0, wt = 0, we = 0;  // busy-time weighted mean |error|
  for (const auto& r : f.packs) {
    if (r.true_busy_s <= 0 || r.true_energy_j <= 0) continue;
    te.push_back(100 * (r.predicted_busy_s / r.true_busy_s - 1));
    ee.push_back(100 * (r.predicted_energy_j / r.true_energy_j - 1));
    weight += r.true_busy_s;
    wt += r.true_busy_s * std::abs(te.back());
    we += r.true_busy_s * std::abs(ee.back());
  }
  const Spread st = spread_of(te), se = spread_of(ee);
  return {{"clock_mhz", f.clock_mhz},
          {"packs", te.size()},
          {"step_time_error_pct", 100 * (f.predicted_step_s / f.true_step_s - 1)},
          {"step_energy_error_pct", 100 * (f.predicted_step_j / f.true_step_j - 1)},
          {"pack_time_abs_error_pct", {{"median", st.median}, {"p90", st.p90}, {"max", st.max}, {"weighted_mean", weight > 0 ? wt / weight : 0}}},
          {"pack_energy_abs_error_pct", {{"median", se.median}, {"p90", se.p90}, {"max", se.max}, {"weighted_mean", weight > 0 ? we / weight : 0}}}};
}
}  // namespace

void add_pack(CLI::App& root, Action& action) {
  auto a = std::make_shared<PackArgs>();
  auto* sub = root.add_subcommand(
      "pack",
      "Split each GPU's timeline of one step into packs (contiguous segments that get one SM clock), give "
      "repeated structure one signature, and plan the profiling: which clocks to record and how many "
      "profiled units that is against per-kernel profiling. With --fidelity-at, also fit the pack models "
      "and check their predictions at an unprofiled clock against the emulated GPU.");
  a->flags.add_to(sub, "device profile (h100, a100, ...), profile file, emulated:NAME or nvml:N");
  sub->add_option("--json", a->json_out, "write packs, signatures and units as JSON to FILE ('-' = stdout)");
  sub->add_option("--csv", a->csv_out, "write one row per pack to FILE");
  sub->add_flag("--all", a->list, "list every pack in --json (default: the first 1000)");
  sub->add_option("--fidelity-at", a->fidelity_at,
                  "fit the pack models, then run the step locked at this clock (MHz) on the emulated GPU and "
                  "report predicted vs true time and energy per pack and for the step");
  sub->add_option("--fidelity-csv", a->fidelity_csv, "with --fidelity-at: one row per pack to FILE");
  sub->add_option("--profiled", a->profiled, "with --fidelity-at: fit from recorded profiling runs in DIR (docs/profiling.md)");
  sub->add_option("--profile-on", a->profile_on, "with --fidelity-at: where to run the profiling plan (default: emulated:DEVICE)");
  sub->callback([a, &action] {
    action = [a] {
      if (a->fidelity_at == 0 && (!a->fidelity_csv.empty() || !a->profiled.empty() || !a->profile_on.empty()))
        return fail(Error{"--fidelity-csv/--profiled/--profile-on", "only apply with --fidelity-at MHz", ""});
      auto s = load_and_pack(a->flags);
      if (!s.ok()) return fail(s.error());
      const auto& w = s->workload;
      const auto& p = s->packing;
      nlohmann::json j = pack::to_json(w, p, a->list);
      if (a->fidelity_at != 0) {
        auto runs = profiling_runs(*s, a->profile_on, a->profiled);
        if (!runs.ok()) return fail(runs.error());
        auto m = pack::fit_pack_models(w, p, *runs, s->profile);
        if (!m.ok()) return fail(m.error());
        const std::string truth_on = a->flags.device.rfind("emulated:", 0) == 0 ? a->flags.device : "emulated:" + s->profile.name;
        auto f = backends::pack_fidelity(truth_on, w, p, *m, a->fidelity_at);
        if (!f.ok()) return fail(f.error());
        if (!a->fidelity_csv.empty()) {
          Status st = write_file_atomic(a->fidelity_csv, backends::pack_fidelity_csv(*f));
          if (!st.ok()) return fail(st.error());
        }
        j["fidelity"] = fidelity_json(*f);
      }
      if (!a->csv_out.empty()) {
        Status st = write_file_atomic(a->csv_out, pack::packs_csv(w, p));
        if (!st.ok()) return fail(st.error());
      }
      if (!a->json_out.empty()) {
        Status st = write_file_atomic(a->json_out, j.dump(1) + "\n");
        if (!st.ok()) return fail(st.error());
        if (a->json_out == "-") return kExitOk;
      }
      std::fputs(pack::to_text(w, p).c_str(), stdout);
      if (j.contains("fidelity")) {
        const auto& f = j["fidelity"];
        std::printf("fidelity at %d MHz (not profiled unless in the plan), predicted vs emulated truth:\n", a->fidelity_at);
        std::printf("  step: time %+.2f %%, energy %+.2f %%\n", f["step_time_error_pct"].get<double>(),
                    f["step_energy_error_pct"].get<double>());
        for (const char* k : {"pack_time_abs_error_pct", "pack_energy_abs_error_pct"}) {
          const auto& e = f[k];
          std::printf("  %zu packs, |%s error|: median %.2f %%, p90 %.2f %%, max %.2f %%, busy-weighted mean %.2f %%\n",
                      f["packs"].get<size_t>(), std::string(k).find("time") != std::string::npos ? "time" : "energy",
                      e["median"].get<double>(), e["p90"].get<double>(), e["max"].get<double>(),
                      e["weighted_mean"].get<double>());
        }
      }
      return kExitOk;
    };
  });
}

namespace {
struct ProfileArgs {
  PackFlags flags;
  std::string out;
};
}  // namespace

void add_profile(CLI::App& root, Action& action) {
  auto a = std::make_shared<ProfileArgs>();
  auto* sub = root.add_subcommand(
      "profile",
      "Run the profiling plan of `emo pack` (the step at a few locked clocks) on the emulated GPU and write the "
      "runs to a folder in the layout a hardware capture uses (docs/profiling.md): <MHz>mhz/rank<R>.json "
      "(Kineto trace) and <MHz>mhz/rank<R>.energy.csv (energy counter). `emo optimize --profiled DIR` reads it.");
  a->flags.device = "emulated:h100";
  a->flags.add_to(sub, "emulated:NAME[@SEED] to run on");
  sub->add_option("-o,--output", a->out, "folder to write (replaced only once complete)")->required();
  sub->callback([a, &action] {
    action = [a] {
      auto s = load_and_pack(a->flags);
      if (!s.ok()) return fail(s.error());
      Status st = backends::write_profiled_dir(a->flags.device, s->workload, s->packing, a->out);
      if (!st.ok()) return fail(st.error());
      std::printf("profiling runs at %s MHz (%d steps each, %zu rank(s)) written to %s/\n",
                  fmt::format("{}", fmt::join(s->packing.plan_clocks_mhz, ",")).c_str(), s->packing.plan_steps,
                  s->packing.gpus.size(), a->out.c_str());
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
