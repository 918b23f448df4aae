// `emo pack TRACE... --device DEV`: packs, signatures, the profiling plan and what it saves; with
// --fidelity-at MHz, fits the pack models from the profiling runs (emulated, or --profiled DIR) and
// compares their predictions at that clock with the emulated GPU's truth, per pack and for the step.
// `emo profile TRACE... --device emulated:NAME -o DIR` writes the profiling runs as a hardware capture would;
// with --device nvml:N --command CMD it records them on the GPU, the job run once per clock of the plan.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "session_flags.h"
#include "emo/analysis/analysis.h"
#include "emo/backends/target.h"
#include "emo/dist/dist.h"
#include "emo/pack/pack.h"
#include "emo/runtime/clockd.h"
#include "emo/runtime/profile_job.h"
#include "emo/session/session.h"

namespace emo::cli {

namespace {
struct PackArgs {
  PackFlags flags;
  std::string json_out, csv_out;
  bool list = false;
  int fidelity_at = 0;
  std::string fidelity_csv, profiled, profile_on;
};

// Under mpirun (without --fidelity-at, whose profiling runs the whole step): every process reads its shard
// and builds, replays, analyzes and packs its part of the step (analysis::load_part, analyze_part,
// pack::make_packs_part); process 0 writes what one process would.
int pack_in_parts(const PackArgs& a, session::Options o) {
  dist::Comm& world = dist::world();
  const analysis::LoadOptions load = o.load;
  const pack::PackOptions options = o.pack;
  // The device as one process opens it (the same error), on every process.
  auto s = session::Session::open(std::move(o));
  Status before;
  if (world.is_root()) {
    before = s.ok() ? check_outputs(a.flags.traces, {{"--json", a.json_out}, {"--csv", a.csv_out}}) : Status(s.error());
  }
  auto w = analysis::load_part(a.flags.traces, load, world, before);
  if (!w.ok()) return fail(w.error());
  if (!s.ok()) return fail(s.error());
  replay::ShardTimeline replayed;
  auto an = analysis::analyze_part(w->part, world, &replayed);
  if (!an.ok()) return fail(an.error());
  auto step = analysis::report_part(*w, *an, {}, world);
  if (!step.ok()) return fail(step.error());
  auto device = analysis::device_warnings_part(*w, s->profile().name, world);
  if (!device.ok()) return fail(device.error());
  auto p = pack::make_packs_part(w->part, *an, replayed, s->profile(), options, world);
  if (!p.ok()) return fail(p.error());
  if (!world.is_root()) return kExitOk;
  for (const std::string& text : step->warnings) warn(text);
  for (const std::string& text : *device) warn(text);
  const pack::Packing& whole = *p->whole;
  if (!a.csv_out.empty()) {
    if (Status st = write_file_atomic(a.csv_out, pack::packs_csv(whole)); !st.ok()) return fail(st.error());
  }
  if (!a.json_out.empty()) {
    if (Status st = write_file_atomic(a.json_out, pack::to_json(whole, a.list).dump(1) + "\n"); !st.ok())
      return fail(st.error());
    if (a.json_out == "-") return kExitOk;
  }
  std::fputs(pack::to_text(whole).c_str(), stdout);
  return kExitOk;
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
      auto o = a->flags.options();
      if (!o.ok()) return fail(o.error());
      if (dist::world().size() > 1 && a->fidelity_at == 0) return pack_in_parts(*a, std::move(*o));
      if (auto rc = serve_if_worker(o->traces, o->load)) return *rc;
      std::vector<std::string> inputs = a->flags.traces;
      if (!a->profiled.empty()) inputs.push_back(a->profiled);
      if (Status st = check_outputs(inputs, {{"--json", a->json_out}, {"--csv", a->csv_out}, {"--fidelity-csv", a->fidelity_csv}}); !st.ok()) return fail(st.error());
      o->profile_on = a->profile_on;
      o->profiled_dir = a->profiled;
      auto s = session::Session::open(std::move(*o));
      if (!s.ok()) return fail(s.error());
      if (auto p = s->packing(); !p.ok()) return fail(p.error());
      auto doubts = report::step_warnings(*s);
      if (!doubts.ok()) return fail(doubts.error());
      for (const std::string& text : *doubts) warn(text);
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
  std::string command, clockd;
  int clockd_gpu = 0;
  int rank = 0;
  double timeout_s = 3600;
};

// `emo profile --device nvml:N --command CMD`: the plan's clocks locked one by one while the job runs.
int profile_on_hardware(const ProfileArgs& a, session::Session& s) {
  auto p = s.packing();
  if (!p.ok()) return fail(p.error());
  auto meter_target = backends::Target::open(a.flags.device);
  if (!meter_target.ok()) return fail(meter_target.error());
  auto meter = meter_target->device();
  if (!meter.ok()) return fail(meter.error());
  std::unique_ptr<runtime::ClockControl> clock;
  if (!a.clockd.empty()) {
    auto c = runtime::ClockdClient::connect(a.clockd, a.clockd_gpu);
    if (!c.ok()) return fail(c.error());
    clock = std::move(*c);
  } else {
    clock = std::make_unique<runtime::DeviceClockControl>(**meter);
  }
  AtomicDir dir;
  if (Status st = dir.open(a.out, "profiling folder"); !st.ok()) return fail(st.error());
  runtime::ProfileJobOptions o;
  o.clocks_mhz = (*p)->plan_clocks_mhz;
  o.steps = (*p)->plan_steps;
  o.rank = a.rank;
  o.command = a.command;
  o.clock = clock.get();
  o.meter = *meter;
  o.device_name = s.profile().name;
  o.timeout_s = a.timeout_s;
  o.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  if (Status st = runtime::profile_job(o, dir); !st.ok()) return fail(st.error());
  if (Status st = dir.commit(); !st.ok()) return fail(st.error());
  std::printf("profiling runs at %s MHz (%d steps each asked for, rank %d) on %s written to %s/\n",
              fmt::format("{}", fmt::join(o.clocks_mhz, ",")).c_str(), o.steps, o.rank, clock->describe().c_str(),
              a.out.c_str());
  return kExitOk;
}
}  // namespace

void add_profile(CLI::App& root, Action& action) {
  auto a = std::make_shared<ProfileArgs>();
  auto* sub = root.add_subcommand(
      "profile",
      "Run the profiling plan of `emo pack` (the step at a few locked clocks) on the emulated GPU and write the "
      "runs to a folder in the layout a hardware capture uses (docs/profiling.md): <MHz>mhz/rank<R>.json "
      "(Kineto trace) and <MHz>mhz/rank<R>.energy.csv (energy counter). `emo optimize --profiled DIR` reads it. "
      "With --device nvml:N --command CMD the runs are recorded on that GPU: the job runs once per clock, the "
      "clock locked for it (NVML as root, or --clockd), its energy counter logged beside its trace.");
  a->flags.device = "emulated:h100";
  a->flags.add_to(sub, "emulated:NAME[@SEED] to run on, or nvml:N with --command (a real GPU)");
  sub->add_option("-o,--output", a->out, "folder to write (replaced only once complete)")->required();
  sub->add_option("--command", a->command,
                  "nvml:N only: the job to run at each clock of the plan (with /bin/sh -c), the SM clock locked for it "
                  "and the energy counter logged beside it; it writes its torch.profiler trace to "
                  "$EMO_PROFILE_DIR/rank<R>.json[.gz] (also set: EMO_PROFILE_CLOCK_MHZ, EMO_PROFILE_STEPS, "
                  "EMO_PROFILE_RANK)");
  sub->add_option("--clockd", a->clockd, "lock clocks through the node's emo clockd at this socket (no root needed)");
  sub->add_option("--clockd-gpu", a->clockd_gpu, "the daemon's GPU number (its config's order)")->capture_default_str();
  sub->add_option("--rank", a->rank, "the rank whose trace and energy log are written")->capture_default_str();
  sub->add_option("--timeout", a->timeout_s, "seconds the command may run at each clock")->capture_default_str();
  sub->callback([a, &action] {
    action = [a] {
      const bool hardware = a->flags.device.rfind("nvml:", 0) == 0;
      if (hardware && a->command.empty())
        return fail(Error{"--device " + a->flags.device, "profiling on a real GPU runs the job: give --command", ""});
      if (!hardware && (!a->command.empty() || !a->clockd.empty()))
        return fail(Error{"--command/--clockd", "only apply with --device nvml:N", "the emulated GPU runs the step itself"});
      if (a->rank < 0) return fail(Error{"--rank", fmt::format("must be 0 or more, got {}", a->rank), ""});
      if (!(a->timeout_s > 0)) return fail(Error{"--timeout", "must be more than 0", ""});
      auto o = a->flags.options();
      if (!o.ok()) return fail(o.error());
      if (auto rc = serve_if_worker(o->traces, o->load)) return *rc;
      if (Status st = check_outputs(a->flags.traces, {{"-o", a->out}}); !st.ok()) return fail(st.error());
      auto s = session::Session::open(std::move(*o));
      if (!s.ok()) return fail(s.error());
      if (hardware) return profile_on_hardware(*a, *s);
      if (Status st = s->write_profiled_dir(a->out); !st.ok()) return fail(st.error());
      const pack::Packing& p = **s->packing();
      // The plan's clocks and, where the energy still fell at the lowest, the one profiled after them.
      std::vector<int> clocks = (*s->models())->clocks_mhz;
      std::sort(clocks.rbegin(), clocks.rend());
      std::printf("profiling runs at %s MHz (%d steps each, %zu rank(s)) written to %s/\n",
                  fmt::format("{}", fmt::join(clocks, ",")).c_str(), p.plan_steps, p.gpus.size(), a->out.c_str());
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
