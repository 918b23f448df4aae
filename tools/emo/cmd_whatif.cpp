// `emo whatif TRACE... --scale SELECTOR=FACTOR ...`: replay with scaled durations.
#include <cstdio>

#include <fmt/format.h>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "session_flags.h"
#include "emo/analysis/analysis.h"
#include "emo/dist/dist.h"
#include "emo/report/views.h"

namespace emo::cli {

namespace {
struct WhatIfArgs {
  std::vector<std::string> traces;
  std::vector<std::string> scales;
  std::string json_out;
  std::optional<int64_t> step;
  std::string topology, recorded_topology;
  bool deprofile = false;
};

// Under mpirun: every process selects among and replays its part of the step (analysis::load_part, what_if_part;
// with --topology, each models the collectives it holds; with --deprofile, each writes back its own ranks);
// process 0 writes what one process would.
bool in_parts() { return dist::world().size() > 1; }

// Process 0 reads the topology files (its failure stops every process before the traces are read) and
// hands their text to the others (topology_from_json on each: the same Topology everywhere).
constexpr int kTagTopologyText = 30;

int whatif_in_parts(const WhatIfArgs& args, const std::vector<analysis::Scale>& scales,
                    const analysis::LoadOptions& load) {
  dist::Comm& world = dist::world();
  std::string asked_text, recorded_text;
  Status before;
  if (world.is_root()) {
    const auto read_topology = [](const std::string& path, std::string& text) -> Status {
      if (path.empty()) return {};
      auto t = read_file(path);
      if (!t) return t.error();
      if (auto parsed = analysis::topology_from_json(*t, path); !parsed) return parsed.error();
      text = std::move(*t);
      return {};
    };
    before = read_topology(args.topology, asked_text);
    if (before.ok()) before = read_topology(args.recorded_topology, recorded_text);
    std::vector<std::string> inputs = args.traces;
    for (const std::string* f : {&args.topology, &args.recorded_topology}) {
      if (!f->empty()) inputs.push_back(*f);
    }
    if (before.ok()) before = check_outputs(inputs, {{"--json", args.json_out}});
  }
  auto w = analysis::load_part(args.traces, load, world, before);
  if (!w.ok()) return fail(w.error());
  std::optional<analysis::TopologyQuestion> topology;
  if (!args.topology.empty()) {
    auto texts = dist::all_gather(world, kTagTopologyText, dist::frame({asked_text, recorded_text}));
    if (!texts) return fail(texts.error());
    auto fields = dist::unframe(texts->at(dist::kRoot));
    if (!fields || fields->size() != 2) return fail(make_error("", "the topology's text arrived cut short"));
    auto asked = analysis::topology_from_json((*fields)[0], args.topology);
    if (!asked) return fail(asked.error());
    topology = analysis::TopologyQuestion{std::move(*asked), std::nullopt};
    if (!args.recorded_topology.empty()) {
      auto rec = analysis::topology_from_json((*fields)[1], args.recorded_topology);
      if (!rec) return fail(rec.error());
      topology->recorded = std::move(*rec);
    }
  }
  auto r = analysis::what_if_part(*w, scales, world, topology ? &*topology : nullptr);
  if (!r.ok()) return fail(r.error());
  // The doubts about the step, as one process says them.
  auto a = analysis::analyze_part(w->part, world);
  if (!a.ok()) return fail(a.error());
  auto step = analysis::report_part(*w, *a, {}, world);
  if (!step.ok()) return fail(step.error());
  if (!world.is_root()) return kExitOk;
  for (const std::string& text : step->warnings) warn(text);
  if (r->topology) {
    if (std::string text = analysis::topology_warning(*r->topology); !text.empty()) warn(text);
  }
  const nlohmann::json doc = report::whatif_document(*r);
  if (!args.json_out.empty()) {
    if (Status st = write_file_atomic(args.json_out, doc.dump(1) + "\n"); !st.ok()) return fail(st.error());
    if (args.json_out == "-") return kExitOk;
  }
  std::fputs(report::whatif_text(doc).c_str(), stdout);
  return kExitOk;
}
}  // namespace

void add_whatif(CLI::App& root, Action& action) {
  auto args = std::make_shared<WhatIfArgs>();
  auto* sub = root.add_subcommand(
      "whatif",
      "Predict the step time if some operations ran faster or slower. SELECTOR is a kernel-name regex, "
      "stream:N or cat:NAME (kernel, gpu_memcpy, gpu_memset, nccl, cpu_op, cuda_runtime, user_annotation, "
      "python_function, cpu_gap, or host: every CPU node's own time, waits aside); FACTOR multiplies their durations. --topology FILE replays the matched "
      "collectives' transfers at their times on another machine (hosts, GPUs per host, NVLink and network "
      "bandwidth and latency, placement; docs/replay.md, Topology) and checks the model against the trace's "
      "measured transfers.");
  sub->add_option("traces", args->traces, "trace files, one per rank, or a folder of them (its .json and .json.gz files)")->required();
  sub->add_option("--scale", args->scales, "SELECTOR=FACTOR, FACTOR from 0 to 1e6 (repeatable)");
  sub->add_option("--topology", args->topology,
                  "topology file (JSON) of the machine to ask about: each matched collective's transfer takes its "
                  "modeled time there (then --scale applies)");
  sub->add_option("--recorded-topology", args->recorded_topology,
                  "topology file of the machine the trace was recorded on: each transfer is then its measured time "
                  "x model(--topology) / model(this), and this model is the one checked against the measurements");
  sub->add_option("--step", args->step, "ProfilerStep number (default: the last complete step)");
  sub->add_option("--json", args->json_out, "write the machine-readable result to FILE ('-' = stdout)");
  add_deprofile_flag(sub, args->deprofile);
  sub->callback([args, &action] {
    action = [args] {
      std::vector<analysis::Scale> scales;
      for (const auto& text : args->scales) {
        auto s = analysis::parse_scale(text);
        if (!s.ok()) return fail(s.error());
        scales.push_back(*s);
      }
      if (!args->recorded_topology.empty() && args->topology.empty()) {
        fail(make_error("--recorded-topology", "needs --topology FILE (the machine to ask about)"));
        return kExitUsage;
      }
      if (args->scales.empty() && args->topology.empty()) {
        fail(make_error("whatif", "nothing to ask", "give --scale SELECTOR=FACTOR and/or --topology FILE"));
        return kExitUsage;
      }
      session::Options o;
      o.traces = args->traces;
      if (Status st = set_step(args->step, o.load.step); !st.ok()) return fail(st.error());
      o.load.deprofile = args->deprofile;
      if (in_parts()) return whatif_in_parts(*args, scales, o.load);
      if (auto rc = serve_if_worker(o.traces, o.load)) return *rc;
      // Read on process 0 alone (the others only serve their shards; a failure here drains them).
      std::optional<analysis::TopologyQuestion> topology;
      if (!args->topology.empty()) {
        auto asked = analysis::load_topology(args->topology);
        if (!asked) return fail(asked.error());
        topology = analysis::TopologyQuestion{std::move(*asked), std::nullopt};
        if (!args->recorded_topology.empty()) {
          auto rec = analysis::load_topology(args->recorded_topology);
          if (!rec) return fail(rec.error());
          topology->recorded = std::move(*rec);
        }
      }
      std::vector<std::string> inputs = args->traces;
      for (const std::string* f : {&args->topology, &args->recorded_topology}) {
        if (!f->empty()) inputs.push_back(*f);
      }
      if (Status st = check_outputs(inputs, {{"--json", args->json_out}}); !st.ok()) return fail(st.error());
      auto s = session::Session::open(o);
      if (!s.ok()) return fail(s.error());
      auto r = s->what_if(scales, topology ? &*topology : nullptr);
      if (!r.ok()) return fail(r.error());
      auto an = s->analysis();
      if (!an.ok()) return fail(an.error());
      for (const std::string& text : analysis::step_warnings(**s->workload(), **an)) warn(text);
      if ((*r)->topology) {
        if (std::string text = analysis::topology_warning(*(*r)->topology); !text.empty()) warn(text);
      }
      if (!args->json_out.empty()) {
        if (Status st = write_view(*s, *report::whatif_json(scales, topology), args->json_out); !st.ok()) return fail(st.error());
        if (args->json_out == "-") return kExitOk;
      }
      if (Status st = print_view(*s, *report::whatif_text(scales, topology)); !st.ok()) return fail(st.error());
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
