// `emo optimize TRACE... --device DEV --max-slowdown D -o POLICY` and `emo evaluate POLICY TRACE...
// --device emulated:NAME`: solve for a clock per pack, write the policy; apply it (and the baselines
// stored in it) on the emulated GPU and report true time and energy side by side.
#include <cstdio>

#include <fmt/format.h>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "session_flags.h"

namespace emo::cli {

namespace {

struct OptimizeArgs {
  PackFlags flags;
  std::string profile_on, profiled;
  std::string out, json_out;
  double max_slowdown = 0.05;
  double reserve = 0.1;
  bool no_check = false;
  bool accept_doubt = false;
  bool no_refine_profile = false;
};

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
  add_no_refine_profile_flag(sub, a->no_refine_profile);
  sub->add_flag("--accept-doubt", a->accept_doubt,
                fmt::format("optimize a step whose replay is more than {:g} % off the trace (docs/replay.md) "
                            "instead of stopping",
                            report::kReplayRefusePct));
  sub->add_option("-o,--output", a->out, "write the policy (schema emo-policy/1) to FILE");
  sub->add_option("--json", a->json_out, "write the result summary as JSON to FILE ('-' = stdout)");
  sub->callback([a, &action] {
    action = [a] {
      auto o = a->flags.options();
      if (!o.ok()) return fail(o.error());
      if (auto rc = serve_if_worker(o->traces, o->load)) return *rc;
      std::vector<std::string> inputs = a->flags.traces;
      if (!a->profiled.empty()) inputs.push_back(a->profiled);
      if (Status st = check_outputs(inputs, {{"-o", a->out}, {"--json", a->json_out}}); !st.ok()) return fail(st.error());
      o->profile_on = a->profile_on;
      o->profiled_dir = a->profiled;
      o->optimize.max_slowdown = a->max_slowdown;
      o->optimize.reserve = a->reserve;
      o->check = !a->no_check;
      o->refine_profile = !a->no_refine_profile;
      auto s = session::Session::open(std::move(*o));
      if (!s.ok()) return fail(s.error());
      if (!a->accept_doubt) {
        if (Status st = report::refuse_doubtful_step(*s); !st.ok()) return fail(st.error());
      }
      auto c = s->solution();
      if (!c.ok()) return fail(c.error());
      if (!a->out.empty()) {
        if (Status st = write_view(*s, *report::policy_file(), a->out); !st.ok()) return fail(st.error());
      }
      auto j = report::optimize_document(*s);
      if (!j.ok()) return fail(j.error());
      for (const auto& text : (*j)["warnings"]) warn(text.get<std::string>());
      if (!a->json_out.empty()) {
        if (Status st = write_view(*s, *report::optimize_json(), a->json_out); !st.ok()) return fail(st.error());
        if (a->json_out == "-") return kExitOk;
      }
      if (Status st = print_view(*s, *report::optimize_text()); !st.ok()) return fail(st.error());
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
  std::optional<int64_t> step;
  int steps = 12;
  bool cpu_ops_as_kernels = false;
  bool deprofile = false;
};
}  // namespace

void add_evaluate(CLI::App& root, Action& action) {
  auto a = std::make_shared<EvaluateArgs>();
  auto* sub = root.add_subcommand(
      "evaluate",
      "Apply a policy (and the baselines stored in it) on the emulated GPU and print the true step time and "
      "energy of the default clock, the policy and each baseline side by side.");
  sub->add_option("policy", a->policy, "policy file written by `emo optimize -o`")->required();
  sub->add_option("traces", a->traces, "the trace files the policy was made for (or their folder)")->required();
  sub->add_option("--device", a->device, "emulated:NAME (the emulated GPU to run on)")->required();
  sub->add_option("--step", a->step, "ProfilerStep number (default: the last complete step)");
  sub->add_option("--steps", a->steps, "steps to run each plan for, 2 to 1000 (the first is a warm-up)")->capture_default_str();
  sub->add_option("--json", a->json_out, "write the comparison as JSON to FILE ('-' = stdout)");
  sub->add_flag("--cpu-ops-as-kernels", a->cpu_ops_as_kernels, "a trace of a CPU-only run: each leaf CPU operator stands in for a kernel of its duration on the emulated GPU (try the whole loop without a GPU; docs/python.md)");
  add_deprofile_flag(sub, a->deprofile);
  sub->callback([a, &action] {
    action = [a] {
      session::Options o;
      o.traces = a->traces;
      o.device = a->device;
      if (Status st = set_step(a->step, o.load.step); !st.ok()) return fail(st.error());
      o.eval_steps = a->steps;
      o.policy_file = a->policy;
      o.load.cpu_ops_as_kernels = a->cpu_ops_as_kernels;
      o.load.deprofile = a->deprofile;
      if (auto rc = serve_if_worker(o.traces, o.load)) return *rc;
      std::vector<std::string> inputs = a->traces;
      inputs.push_back(a->policy);
      if (Status st = check_outputs(inputs, {{"--json", a->json_out}}); !st.ok()) return fail(st.error());
      auto s = session::Session::open(std::move(o));
      if (!s.ok()) return fail(s.error());
      if (!s->target().emulated())
        return fail(Error{"--device " + a->device, "evaluate runs on the emulated GPU", "use emulated:NAME"});
      if (auto ev = s->evaluation(); !ev.ok()) return fail(ev.error());
      if (!a->json_out.empty()) {
        if (Status st = write_view(*s, *report::evaluate_json(), a->json_out); !st.ok()) return fail(st.error());
        if (a->json_out == "-") return kExitOk;
      }
      if (Status st = print_view(*s, *report::evaluate_text()); !st.ok()) return fail(st.error());
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
