// `emo apply` on the emulated GPU. See emo/backends/apply.h.
#include "emo/backends/apply.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "emo/emulator/emulator.h"

namespace emo::backends {

namespace {

// Lognormal draws given the median and the 99th percentile.
class Lognormal {
 public:
  Lognormal(double median, double p99) : mu_(std::log(median)), sigma_(std::log(std::max(1.0001, p99 / median)) / 2.326) {}
  double operator()(std::mt19937_64& rng) const { return std::exp(mu_ + sigma_ * std::normal_distribution<double>()(rng)); }

 private:
  double mu_, sigma_;
};

double p99(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(std::ceil(0.99 * double(v.size()))) - 1)];
}

}  // namespace

Result<ApplyResult> apply_emulated(const Target& on, const analysis::Workload& w, const optimize::PolicyFile& policy,
                                   const ApplyOptions& o) {
  auto gpu = on.emulated_gpu("`emo apply` runs the job on the emulated GPU",
                             "use --device emulated:NAME; on hardware the runtime runs inside the job (docs/runtime.md)");
  if (!gpu) return gpu.error();
  if (o.steps != 0 && (o.steps < 4 || o.steps > emulator::kMaxRunSteps))
    return make_error("--steps", fmt::format("must be 0 (auto) or from 4 to {}, got {}", emulator::kMaxRunSteps, o.steps));
  const size_t n_ranks = w.graph.rank_paths.size();
  const runtime::Program program = runtime::program_of(policy, n_ranks);
  runtime::PhaseOptions phases;
  phases.verify = o.verify;
  const double window_ns = 25 * (*gpu)->energy_update_ms() * 1e6;
  phases.block_steps = o.block_steps > 0 ? o.block_steps : runtime::auto_block_steps(program.predicted_step_ns, window_ns);
  ApplyOptions auto_o = o;
  if (o.steps == 0) {
    // Auto: 24 blocks where they fit in kMaxRunSteps, else the fewest that measure (5; 4 with --verify).
    const int fewest = o.verify ? 4 : phases.reference_blocks + 3;
    if (o.block_steps == 0) phases.block_steps = std::min(phases.block_steps, emulator::kMaxRunSteps / fewest);
    auto_o.steps = std::clamp(24 * phases.block_steps, fewest * phases.block_steps, emulator::kMaxRunSteps);
  }
  return apply_run(**gpu, w, program, phases, auto_o);
}

Result<ApplyResult> apply_run(const emulator::EmulatedGpu& gpu, const analysis::Workload& w,
                              const runtime::Program& program, runtime::PhaseOptions phases, const ApplyOptions& o) {
  const size_t n_ranks = w.graph.rank_paths.size();
  // Two reference blocks, then at least three policy blocks.
  if (!o.verify && o.steps < (phases.reference_blocks + 3) * phases.block_steps) {
    return make_error("--steps", fmt::format("{} steps leave too few for {} reference and 3 policy blocks of {} steps",
                                             o.steps, phases.reference_blocks, phases.block_steps),
                      fmt::format("give --steps {} or more, or a smaller --block-steps", (phases.reference_blocks + 3) * phases.block_steps));
  }
  if (o.verify && o.steps < 4 * phases.block_steps) {
    return make_error("--steps", fmt::format("{} steps leave fewer than 2 blocks of each kind of {} steps", o.steps, phases.block_steps),
                      fmt::format("give --steps {} or more, or a smaller --block-steps", 4 * phases.block_steps));
  }

  runtime::Monitor monitor(program.max_slowdown, phases);
  monitor.expect_gpus(n_ranks);  // their counters are read back after the run
  std::vector<runtime::Controller> controllers(n_ranks, runtime::Controller(program.default_clock_mhz));
  std::mt19937_64 rng(o.seed * 0x9e3779b97f4a7c15ull + 17);
  const Lognormal anchor_delay(o.anchor_delay_median_us * 1e3, o.anchor_delay_p99_us * 1e3);
  const Lognormal call(o.call_median_ms * 1e6, o.call_p99_ms * 1e6);
  const std::vector<runtime::Change> to_default{runtime::Change{0, program.default_clock_mhz, 0}};
  ApplyResult res;
  std::vector<double> late_us, delay_us;

  emulator::ClockSchedule s;
  s.initial_mhz = program.default_clock_mhz;
  s.online = [&](int step, int64_t step_start, std::vector<std::vector<emulator::ClockChange>>& out) {
    const int64_t delay = int64_t(anchor_delay(rng));
    delay_us.push_back(double(delay) / 1e3);
    const int64_t anchor = step_start + delay;
    monitor.anchor(step, anchor, std::nullopt);
    if (auto fb = monitor.check(step)) res.fallbacks.push_back(*fb);
    const runtime::Mode mode = monitor.mode_of(step);
    for (size_t r = 0; r < n_ranks; ++r) {
      const auto& changes = mode == runtime::Mode::kPolicy ? program.ranks[r] : to_default;
      for (const runtime::Issue& is : controllers[r].plan_step(anchor, changes, [&](int) { return int64_t(call(rng)); })) {
        out[r].push_back(emulator::ClockChange{is.at_ns, is.clock_mhz});
        late_us.push_back(double(is.late_ns) / 1e3);
        ++res.calls;
      }
    }
  };
  emulator::RunOptions ro;
  ro.steps = o.steps;
  ro.trace_steps = 0;
  ro.seed = o.seed;
  ro.energy_log = true;
  auto run = gpu.run(w.ranks, s, ro);
  if (!run) return run.error();
  // The step after the last: its anchor closes the last step.
  monitor.anchor(o.steps, run->end_ns + int64_t(anchor_delay(rng)), std::nullopt);
  // The counter as a runtime polling it every `counter_poll_ms` sees it: each update first seen at
  // the next poll after it.
  const int64_t poll_ns = int64_t(o.counter_poll_ms * 1e6);
  for (size_t r = 0; r < run->ranks.size(); ++r) {
    for (const auto& e : run->ranks[r].energy) {
      const int64_t t = e.t_ns - run->trace_origin_ns;
      const int64_t seen = poll_ns > 0 ? (t / poll_ns + 1) * poll_ns : t;
      monitor.counter(r, seen, double(e.energy_mj) / 1e3);
    }
  }
  res.measured = monitor.report();
  res.block_steps = phases.block_steps;
  res.steps = o.steps;
  for (const auto& c : controllers) {
    res.skipped_redundant += c.skipped_redundant();
    res.skipped_superseded += c.skipped_superseded();
  }
  for (const auto& rr : run->ranks) res.changes_landed += rr.clock_changes;
  if (!late_us.empty()) {
    double sum = 0;
    for (double v : late_us) sum += v;
    res.mean_late_us = sum / double(late_us.size());
    res.p99_late_us = p99(late_us);
  }
  if (!delay_us.empty()) {
    double sum = 0;
    for (double v : delay_us) sum += v;
    res.mean_anchor_delay_us = sum / double(delay_us.size());
  }
  return res;
}

nlohmann::json apply_json(const ApplyResult& r) {
  using nlohmann::json;
  json fb = json::array();
  for (const auto& f : r.fallbacks)
    fb.push_back({{"step", f.step}, {"slowdown_pct", f.slowdown_pct}, {"slowdown_se_pct", f.slowdown_se_pct}, {"reason", f.reason}});
  return json{{"steps", r.steps},
              {"block_steps", r.block_steps},
              {"measured", runtime::measured_json(r.measured)},
              {"clock_changes", {{"calls", r.calls},
                                 {"landed", r.changes_landed},
                                 {"skipped_redundant", r.skipped_redundant},
                                 {"skipped_superseded", r.skipped_superseded},
                                 {"mean_late_us", r.mean_late_us},
                                 {"p99_late_us", r.p99_late_us}}},
              {"mean_anchor_delay_us", r.mean_anchor_delay_us},
              {"fallbacks", fb}};
}

}  // namespace emo::backends
