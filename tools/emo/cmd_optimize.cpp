// `emo optimize TRACE... --device DEV --max-slowdown D -o POLICY` and `emo evaluate POLICY TRACE...
// --device emulated:NAME`: solve for a clock per pack, write the policy; apply it (and the baselines
// stored in it) on the emulated GPU and report true time and energy side by side.
#include <cstdio>

#include <fmt/format.h>

#include "cli_common.h"
#include "pack_setup.h"
#include "emo/backends/backends.h"
#include "emo/base/file_util.h"
#include "emo/emulator/emulator.h"
#include "emo/optimize/optimize.h"

namespace emo::cli {

namespace {

struct OptimizeArgs {
  PackFlags flags;
  std::string profile_on, profiled;
  std::string out, json_out;
  double max_slowdown = 0.05;
  double reserve = 0.1;
  bool no_check = false;
};

nlohmann::json plan_json(const optimize::Plan& p, const optimize::Plan& base) {
  return {{"time_us", double(p.time_ns) / 1e3},
          {"energy_j", p.energy_j},
          {"slowdown_pct", 100.0 * (double(p.time_ns) / double(base.time_ns) - 1)},
          {"saving_pct", 100.0 * (1 - p.energy_j / base.energy_j)}};
}

}  // namespace

void add_optimize(CLI::App& root, Action& action) {
  auto a = std::make_shared<OptimizeArgs>();
  auto* sub = root.add_subcommand(
      "optimize",
      "Find the SM clock of each pack that minimizes the step's GPU energy (busy and idle, all GPUs) while "
      "the replayed step time stays within --max-slowdown of the default clock's. Packs are profiled at a "
      "few clocks on the emulated GPU of --device (or --profile-on), models are fitted, a dynamic program "
      "picks the clocks and every plan is checked by a full replay. Writes the policy (-o).");
  a->flags.add_to(sub, "target device: profile name (h100, a100, ...) or file");
  sub->add_option("--profile-on", a->profile_on, "where to run the profiling plan (default: emulated:DEVICE)");
  sub->add_option("--profiled", a->profiled,
                  "fit from profiling runs recorded at the plan's clocks in DIR instead (docs/profiling.md)");
  sub->add_option("--max-slowdown", a->max_slowdown, "allowed step-time increase, e.g. 0.05 = 5 %")->capture_default_str();
  sub->add_option("--reserve", a->reserve,
                  "part of --max-slowdown kept back for model and clock-switching error (plans meet "
                  "1 + max_slowdown·(1 − reserve) in the models' replay)")
      ->capture_default_str();
  sub->add_flag("--no-check", a->no_check,
                "hand out the optimizer's policy without first running it for a few steps on the emulated GPU "
                "that profiled it (the check lowers the plan target when the measured slowdown eats more than "
                "half the reserve; never done with --profiled)");
  sub->add_option("-o,--output", a->out, "write the policy (schema emo-policy/1) to FILE");
  sub->add_option("--json", a->json_out, "write the result summary as JSON to FILE ('-' = stdout)");
  sub->callback([a, &action] {
    action = [a] {
      if (!(a->max_slowdown >= 0 && a->max_slowdown <= 1))
        return fail(Error{"--max-slowdown", "must be between 0 and 1", "0.05 allows 5 % more step time"});
      auto st0 = load_and_pack(a->flags);
      if (!st0.ok()) return fail(st0.error());
      const auto* w = &st0->workload;
      const auto* p = &st0->packing;
      const auto* profile = &st0->profile;
      auto runs = profiling_runs(*st0, a->profile_on, a->profiled);
      if (!runs.ok()) return fail(runs.error());
      auto m = pack::fit_pack_models(*w, *p, *runs, *profile);
      if (!m.ok()) return fail(m.error());
      optimize::Problem pr;
      pr.workload = &*w;
      pr.packing = &*p;
      pr.models = &*m;
      pr.default_clock_mhz = int(profile->default_clock_mhz.value);
      optimize::OptimizeOptions oo;
      oo.max_slowdown = a->max_slowdown;
      oo.reserve = a->reserve;
      // Check the policy on the emulated GPU that profiled it, unless the runs came from a folder.
      const std::string check_on = a->profile_on.empty() ? "emulated:" + profile->name : a->profile_on;
      const bool check = !a->no_check && a->profiled.empty();
      auto checked = check ? backends::optimize_checked(pr, oo, check_on)
                           : [&]() -> Result<backends::Checked> {
                               auto sol = optimize::optimize(pr, oo);
                               if (!sol.ok()) return sol.error();
                               return backends::Checked{std::move(*sol), {}, false};
                             }();
      if (!checked.ok()) return fail(checked.error());
      const optimize::Solution* s = &checked->solution;
      if (!a->out.empty()) {
        Status st = write_file_atomic(a->out, optimize::policy_json(pr, *s, a->max_slowdown).dump(1) + "\n");
        if (!st.ok()) return fail(st.error());
      }
      nlohmann::json j;
      j["device"] = profile->name;
      j["max_slowdown"] = a->max_slowdown;
      j["reserve"] = a->reserve;
      j["baseline"] = plan_json(s->default_plan, s->default_plan);
      j["policy"] = plan_json(s->policy, s->default_plan);
      for (const auto& b : s->baselines) j["baselines"][b.name] = plan_json(b, s->default_plan);
      j["packs"] = p->packs.size();
      j["signatures"] = p->signatures.size();
      j["profiled_clocks_mhz"] = p->plan_clocks_mhz;
      j["policy_from"] = s->policy_from;
      j["solve_ms"] = s->solve_ms;
      j["replays"] = s->replays;
      if (check) j["check"] = backends::check_json(*checked);
      const std::vector<std::string> warnings = check ? backends::check_warnings(*checked) : std::vector<std::string>{};
      j["warnings"] = warnings;
      for (const auto& text : warnings) warn(text);
      if (!a->json_out.empty()) {
        Status st = write_file_atomic(a->json_out, j.dump(1) + "\n");
        if (!st.ok()) return fail(st.error());
        if (a->json_out == "-") return kExitOk;
      }
      std::printf("%zu packs on %zu GPU(s), %zu signatures profiled at %s MHz; solved in %.1f ms (%d replays)\n",
                  p->packs.size(), p->gpus.size(), p->signatures.size(),
                  fmt::format("{}", fmt::join(p->plan_clocks_mhz, ",")).c_str(), s->solve_ms, s->replays);
      auto row = [&](const optimize::Plan& pl) {
        std::printf("  %-13s %10.3f ms  %10.3f J  %+6.2f %% time  %6.2f %% energy saved (predicted)\n", pl.name.c_str(),
                    double(pl.time_ns) / 1e6, pl.energy_j,
                    100.0 * (double(pl.time_ns) / double(s->default_plan.time_ns) - 1),
                    100.0 * (1 - pl.energy_j / s->default_plan.energy_j));
      };
      for (const auto& r : checked->rounds) {
        std::printf("check on %s: %s plan (reserve %.2f): %+.2f %% predicted, %+.2f %% measured (%d steps, bound %+.2f %%): %s\n",
                    check_on.c_str(), r.plan.c_str(), r.reserve, r.predicted_pct, r.measured_pct, r.steps, r.bound_pct,
                    r.accepted ? "passed" : "over the check's limit");
      }
      if (checked->fell_back) std::printf("  no plan passed the check: the policy keeps the default clocks\n");
      row(s->default_plan);
      row(s->policy);
      if (s->policy_from != "dp") std::printf("  (the policy is the %s plan: cheaper than the DP's once clock switches are counted)\n", s->policy_from.c_str());
      for (const auto& b : s->baselines) row(b);
      if (!a->out.empty()) std::printf("policy written to %s\n", a->out.c_str());
      return kExitOk;
    };
  });
}

namespace {
struct EvaluateArgs {
  std::string policy;
  std::vector<std::string> traces;
  std::string device;
  std::string json_out;
  int64_t step = -1;
  int steps = 12;
};
}  // namespace

void add_evaluate(CLI::App& root, Action& action) {
  auto a = std::make_shared<EvaluateArgs>();
  auto* sub = root.add_subcommand(
      "evaluate",
      "Apply a policy (and the baselines stored in it) on the emulated GPU and print the true step time and "
      "energy of the default clock, the policy and each baseline side by side.");
  sub->add_option("policy", a->policy, "policy file written by `emo optimize -o`")->required();
  sub->add_option("traces", a->traces, "the trace files the policy was made for")->required();
  sub->add_option("--device", a->device, "emulated:NAME (the emulated GPU to run on)")->required();
  sub->add_option("--step", a->step, "ProfilerStep number (default: the last complete step)");
  sub->add_option("--steps", a->steps, "steps to run each plan for, 2 to 1000 (the first is a warm-up)")->capture_default_str();
  sub->add_option("--json", a->json_out, "write the comparison as JSON to FILE ('-' = stdout)");
  sub->callback([a, &action] {
    action = [a] {
      if (a->steps < 2 || a->steps > emulator::kMaxRunSteps)
        return fail(Error{"--steps", fmt::format("must be from 2 (the first is a warm-up) to {}", emulator::kMaxRunSteps), ""});
      auto spec = backends::parse_device_spec(a->device);
      if (!spec.ok()) return fail(spec.error());
      if (spec->kind != backends::DeviceSpec::Kind::kEmulated)
        return fail(Error{"--device " + a->device, "evaluate runs on the emulated GPU", "use emulated:NAME"});
      auto profile = device::load_profile(spec->profile);
      if (!profile.ok()) return fail(profile.error());
      auto text = read_file(a->policy);
      if (!text.ok()) return fail(text.error());
      analysis::LoadOptions lo;
      if (a->step >= 0) lo.step = a->step;
      auto w = analysis::load(a->traces, lo);
      if (!w.ok()) return fail(w.error());
      auto pf = optimize::read_policy(a->policy, *text, *w, *profile);
      if (!pf.ok()) return fail(pf.error());
      std::vector<backends::Measured> rows;
      auto measure = [&](const std::vector<int>& clocks, const std::string& name,
                         const std::vector<int64_t>& issues = {}) -> Status {
        auto m = backends::run_on_emulator(a->device, *w, pf->packs, clocks, issues, pf->default_clock_mhz, a->steps,
                                           name);
        if (!m.ok()) return m.error();
        rows.push_back(*m);
        return {};
      };
      std::vector<int> policy_clocks;
      for (const auto& p : pf->packs) policy_clocks.push_back(p.clock_mhz);
      Status st = measure({}, "default");
      if (st.ok()) st = measure(policy_clocks, "policy");
      for (const auto& b : pf->baselines) {
        if (st.ok()) st = measure(b.clocks_mhz, b.name, b.issue_at_ns);
      }
      if (!st.ok()) return fail(st.error());
      const backends::Measured& def = rows.front();
      nlohmann::json j;
      j["device"] = a->device;
      for (const auto& r : rows) {
        nlohmann::json e{{"time_us", r.time_us}, {"energy_j", r.energy_j},
                         {"slowdown_pct", 100.0 * (r.time_us / def.time_us - 1)},
                         {"saving_pct", 100.0 * (1 - r.energy_j / def.energy_j)}};
        if (r.name == "default" || r.name == "policy") j[r.name] = e;
        else j["baselines"][r.name] = e;
      }
      j["max_slowdown"] = pf->max_slowdown;
      if (!a->json_out.empty()) {
        Status s2 = write_file_atomic(a->json_out, j.dump(1) + "\n");
        if (!s2.ok()) return fail(s2.error());
        if (a->json_out == "-") return kExitOk;
      }
      std::printf("true behaviour on %s (%d steps each, first left out):\n", a->device.c_str(), a->steps);
      for (const auto& r : rows) {
        std::printf("  %-13s %10.3f ms  %10.3f J  %+6.2f %% time  %6.2f %% energy saved\n", r.name.c_str(),
                    r.time_us / 1e3, r.energy_j, 100.0 * (r.time_us / def.time_us - 1),
                    100.0 * (1 - r.energy_j / def.energy_j));
      }
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
