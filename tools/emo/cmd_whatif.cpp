// `emo whatif TRACE... --scale SELECTOR=FACTOR ...`: replay with scaled durations.
#include <cstdio>

#include <fmt/format.h>

#include "cli_common.h"
#include "emo/analysis/analysis.h"
#include "emo/base/file_util.h"

namespace emo::cli {

namespace {
struct WhatIfArgs {
  std::vector<std::string> traces;
  std::vector<std::string> scales;
  std::string json_out;
  int64_t step = -1;
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
      analysis::LoadOptions lo;
      if (args->step >= 0) lo.step = args->step;
      auto w = analysis::load(args->traces, lo);
      if (!w.ok()) return fail(w.error());
      auto r = analysis::what_if(*w, scales);
      if (!r.ok()) return fail(r.error());
      double base = static_cast<double>(r->baseline_span_ns) / 1000.0;
      double pred = static_cast<double>(r->predicted_span_ns) / 1000.0;
      if (!args->json_out.empty()) {
        nlohmann::json j = {{"baseline_span_us", base}, {"predicted_span_us", pred},
                            {"change_pct", base > 0 ? 100.0 * (pred - base) / base : 0.0},
                            {"matched_nodes", r->matched}};
        Status s = write_file_atomic(args->json_out, j.dump(1) + "\n");
        if (!s.ok()) return fail(s.error());
        if (args->json_out == "-") return kExitOk;
      }
      std::fputs(fmt::format("step span: baseline {:.3f} ms -> predicted {:.3f} ms ({:+.2f} %)\n", base / 1000,
                             pred / 1000, base > 0 ? 100.0 * (pred - base) / base : 0.0)
                     .c_str(),
                 stdout);
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
