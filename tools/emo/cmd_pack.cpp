// `emo pack TRACE... --device DEV`: packs, signatures, the profiling plan and what it saves; with
// --fidelity-at MHz, fits the pack models from the profiling runs (emulated, or --profiled DIR) and
// compares their predictions at that clock with the emulated GPU's truth, per pack and for the step.
// `emo profile TRACE... --device emulated:NAME -o DIR` writes the profiling runs as a hardware capture would.
#include <fmt/format.h>

#include <cstdio>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "session_flags.h"
#include "emo/analysis/analysis.h"

namespace emo::cli {

namespace {
struct PackArgs {
  PackFlags flags;
  std::string json_out, csv_out;
  bool list = false;
  int fidelity_at = 0;
  std::string fidelity_csv, profiled, profile_on;
};

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
      std::vector<std::string> inputs = a->flags.traces;
      if (!a->profiled.empty()) inputs.push_back(a->profiled);
      if (Status st = check_outputs(inputs, {{"--json", a->json_out}, {"--csv", a->csv_out}, {"--fidelity-csv", a->fidelity_csv}}); !st.ok()) return fail(st.error());
      auto o = a->flags.options();
      if (!o.ok()) return fail(o.error());
      o->profile_on = a->profile_on;
      o->profiled_dir = a->profiled;
      auto s = session::Session::open(std::move(*o));
      if (!s.ok()) return fail(s.error());
      if (auto p = s->packing(); !p.ok()) return fail(p.error());
      for (const std::string& text : analysis::import_warnings(**s->workload())) warn(text);
      if (a->fidelity_at != 0) {
        if (auto f = s->pack_fidelity(a->fidelity_at); !f.ok()) return fail(f.error());
        if (!a->fidelity_csv.empty()) {
          if (Status st = write_view(*s, *report::fidelity_csv(a->fidelity_at), a->fidelity_csv); !st.ok())
            return fail(st.error());
        }
      }
      if (!a->csv_out.empty()) {
        if (Status st = write_view(*s, *report::packs_csv(), a->csv_out); !st.ok()) return fail(st.error());
      }
      if (!a->json_out.empty()) {
        if (Status st = write_view(*s, *report::pack_json(a->list, a->fidelity_at), a->json_out); !st.ok())
          return fail(st.error());
        if (a->json_out == "-") return kExitOk;
      }
      if (Status st = print_view(*s, *report::pack_text(a->fidelity_at)); !st.ok()) return fail(st.error());
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
      if (Status st = check_outputs(a->flags.traces, {{"-o", a->out}}); !st.ok()) return fail(st.error());
      auto o = a->flags.options();
      if (!o.ok()) return fail(o.error());
      auto s = session::Session::open(std::move(*o));
      if (!s.ok()) return fail(s.error());
      if (Status st = s->write_profiled_dir(a->out); !st.ok()) return fail(st.error());
      const pack::Packing& p = **s->packing();
      std::printf("profiling runs at %s MHz (%d steps each, %zu rank(s)) written to %s/\n",
                  fmt::format("{}", fmt::join(p.plan_clocks_mhz, ",")).c_str(), p.plan_steps, p.gpus.size(),
                  a->out.c_str());
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
