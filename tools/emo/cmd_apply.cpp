// `emo apply POLICY TRACE... --device emulated:NAME[@SEED] --steps N [--verify] --json FILE`: the whole
// loop without a GPU — the step's program runs on the emulated GPU while the runtime's core applies the
// policy online (anchors, one NVML call at a time, the safety fallback), and the saving is what the
// runtime measured, as on a real job.
#include <cstdio>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "session_flags.h"
#include "emo/backends/apply.h"
#include "emo/base/file_util.h"
#include "emo/report/views.h"
#include "emo/session/session.h"

namespace emo::cli {

namespace {

struct ApplyArgs {
  std::string policy, device, json_out;
  std::vector<std::string> traces;
  std::optional<int64_t> step;
  int steps = 0;
  int block_steps = 0;
  uint64_t seed = 1;
  bool verify = false;
  bool evaluate = false;
  bool cpu_ops_as_kernels = false;
  bool deprofile = false;
};

std::string ci(const std::vector<double>& v) {
  return v.size() == 2 ? fmt::format(" [{:.2f}, {:.2f}]", v[0], v[1]) : std::string(" [n/a]");
}

}  // namespace

void add_apply(CLI::App& root, Action& action) {
  auto a = std::make_shared<ApplyArgs>();
  auto* sub = root.add_subcommand(
      "apply",
      "Run the step for --steps steps on the emulated GPU with the runtime applying the policy online, as it "
      "would inside a real job: each step anchored when the GPU reaches it, each change issued from that anchor "
      "by a controller making one NVML call at a time (call and switching latencies drawn as on hardware), "
      "step time and energy measured by the runtime, the policy dropped for the default clock if its measured "
      "slowdown (mean + 2 SE) runs over the policy's bound. The first 2 blocks run at the default clock (the "
      "reference), then one block in 10; --verify alternates default and policy blocks for the whole run instead.");
  sub->add_option("policy", a->policy, "policy file written by `emo optimize -o`")->required();
  sub->add_option("traces", a->traces, "the trace files the policy was made for (or their folder)")->required();
  sub->add_option("--device", a->device, "emulated:NAME[@SEED] (on hardware the runtime runs inside the job)")->required();
  sub->add_option("--step", a->step, "ProfilerStep number (default: the last complete step)");
  sub->add_option("--steps", a->steps, "steps to run, 4 to 1000; 0: 24 blocks (fewer where they do not fit in 1000)")
      ->capture_default_str();
  sub->add_option("--block-steps", a->block_steps,
                  "steps per block (the first of each is a transition, not measured); 0: enough for 25 updates of "
                  "the energy counter, at least 4")
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "the run's draws (anchors, call latencies, jitter)")->capture_default_str();
  sub->add_flag("--verify", a->verify, "alternate blocks at the default clock and under the policy; report both with 95 % intervals");
  sub->add_flag("--evaluate", a->evaluate, "also run `emo evaluate`'s measurement of the policy and print both");
  sub->add_option("--json", a->json_out, "write the result as JSON to FILE ('-' = stdout)");
  sub->add_flag("--cpu-ops-as-kernels", a->cpu_ops_as_kernels, "a trace of a CPU-only run: each leaf CPU operator stands in for a kernel of its duration on the emulated GPU (try the whole loop without a GPU; docs/python.md)");
  add_deprofile_flag(sub, a->deprofile);
  sub->callback([a, &action] {
    action = [a] {
      std::vector<std::string> inputs = a->traces;
      inputs.push_back(a->policy);
      if (Status st = check_outputs(inputs, {{"--json", a->json_out}}); !st.ok()) return fail(st.error());
      if (a->block_steps < 0) return fail(Error{"--block-steps", fmt::format("must be 0 (auto) or more, got {}", a->block_steps), ""});
      session::Options o;
      o.traces = a->traces;
      o.device = a->device;
      if (Status st = set_step(a->step, o.load.step); !st.ok()) return fail(st.error());
      o.policy_file = a->policy;
      o.load.cpu_ops_as_kernels = a->cpu_ops_as_kernels;
      o.load.deprofile = a->deprofile;
      auto s = session::Session::open(std::move(o));
      if (!s.ok()) return fail(s.error());
      backends::ApplyOptions ao;
      ao.steps = a->steps;
      ao.verify = a->verify;
      ao.block_steps = a->block_steps;
      ao.seed = a->seed;
      auto d = report::apply_document(*s, ao, a->evaluate);
      if (!d.ok()) return fail(d.error());
      nlohmann::json& j = d->document;
      j["policy"] = a->policy;
      for (const auto& line : d->warnings) warn(line);
      if (!a->json_out.empty()) {
        if (Status st = write_file_atomic(a->json_out, j.dump(2) + "\n"); !st.ok()) return fail(st.error());
        if (a->json_out == "-") return kExitOk;
      }
      const nlohmann::json& m = j["measured"];
      const nlohmann::json& cc = j["clock_changes"];
      std::printf("emo apply: %s on %s, %d steps in blocks of %d (%s)\n", a->policy.c_str(), a->device.c_str(),
                  j["steps"].get<int>(), j["block_steps"].get<int>(),
                  a->verify ? "default and policy blocks alternating" : "2 reference blocks, then the policy with one reference block in 10");
      std::printf("  %-8s %6s %22s %24s\n", "", "steps", "step time (ms)", "energy per step (J)");
      for (const char* side : {"default", "policy"}) {
        const nlohmann::json& sd = m[side];
        std::printf("  %-8s %6d %13.4f ± %-6.4f %15.3f ± %-6.3f\n", side, sd["steps"].get<int>(), sd["time_us"].get<double>() / 1e3,
                    sd["time_se_us"].get<double>() / 1e3, sd["energy_j"].get<double>(), sd["energy_se_j"].get<double>());
      }
      const nlohmann::json& p = m["policy"];
      std::printf("  measured: saving %.2f %%%s, slowdown %+.2f %%%s (bound %.1f %%)\n", p["saving_pct"].get<double>(),
                  ci(p["saving_ci_pct"].get<std::vector<double>>()).c_str(), p["slowdown_pct"].get<double>(),
                  ci(p["slowdown_ci_pct"].get<std::vector<double>>()).c_str(), 100 * j["max_slowdown"].get<double>());
      if (j.contains("evaluate")) {
        std::printf("  emo evaluate: saving %.2f %%, slowdown %+.2f %%\n", j["evaluate"]["saving_pct"].get<double>(),
                    j["evaluate"]["slowdown_pct"].get<double>());
      }
      std::printf("  clock calls %lld (skipped: %lld redundant, %lld superseded), issued late by %.2f ms on average, "
                  "p99 %.2f ms\n",
                  cc["calls"].get<long long>(), cc["skipped_redundant"].get<long long>(), cc["skipped_superseded"].get<long long>(),
                  cc["mean_late_us"].get<double>() / 1e3, cc["p99_late_us"].get<double>() / 1e3);
      std::printf("  fallbacks: %s\n",
                  j["fallbacks"].empty() ? "none" : fmt::format("from step {}", j["fallbacks"][0]["step"].get<int>()).c_str());
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
