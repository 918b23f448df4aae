// `emo whatif TRACE... --scale SELECTOR=FACTOR ...`: replay with scaled durations.
#include <cstdio>

#include <fmt/format.h>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "session_flags.h"
#include "emo/analysis/analysis.h"

namespace emo::cli {

namespace {
struct WhatIfArgs {
  std::vector<std::string> traces;
  std::vector<std::string> scales;
  std::string json_out;
  std::optional<int64_t> step;
};
}  // namespace

void add_whatif(CLI::App& root, Action& action) {
  auto args = std::make_shared<WhatIfArgs>();
  auto* sub = root.add_subcommand(
      "whatif",
      "Predict the step time if some operations ran faster or slower. SELECTOR is a kernel-name regex, "
      "stream:N or cat:NAME (kernel, gpu_memcpy, gpu_memset, nccl, cpu_op, cuda_runtime, user_annotation, "
      "python_function, cpu_gap); FACTOR multiplies their durations.");
  sub->add_option("traces", args->traces, "trace files, one per rank")->required();
  sub->add_option("--scale", args->scales, "SELECTOR=FACTOR, FACTOR from 0 to 1e6 (repeatable)")->required();
  sub->add_option("--step", args->step, "ProfilerStep number (default: the last complete step)");
  sub->add_option("--json", args->json_out, "write the machine-readable result to FILE ('-' = stdout)");
  sub->callback([args, &action] {
    action = [args] {
      std::vector<analysis::Scale> scales;
      for (const auto& text : args->scales) {
        auto s = analysis::parse_scale(text);
        if (!s.ok()) return fail(s.error());
        scales.push_back(*s);
      }
      session::Options o;
      o.traces = args->traces;
      if (Status st = set_step(args->step, o.load.step); !st.ok()) return fail(st.error());
      if (auto rc = serve_if_worker(o.traces, o.load)) return *rc;
      if (Status st = check_outputs(args->traces, {{"--json", args->json_out}}); !st.ok()) return fail(st.error());
      auto s = session::Session::open(o);
      if (!s.ok()) return fail(s.error());
      if (auto r = s->what_if(scales); !r.ok()) return fail(r.error());
      auto an = s->analysis();
      if (!an.ok()) return fail(an.error());
      for (const std::string& text : analysis::step_warnings(**s->workload(), **an)) warn(text);
      if (!args->json_out.empty()) {
        if (Status st = write_view(*s, *report::whatif_json(scales), args->json_out); !st.ok()) return fail(st.error());
        if (args->json_out == "-") return kExitOk;
      }
      if (Status st = print_view(*s, *report::whatif_text(scales)); !st.ok()) return fail(st.error());
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
