// Profiling runs and true measurements on the emulated GPU, for `emo pack`, `emo optimize`, `emo evaluate`.
#include <fmt/format.h>

#include <algorithm>

#include "emo/backends/backends.h"
#include "emo/emulator/emulator.h"
#include "emulated_runs.h"

namespace emo::backends {

namespace detail {

Result<std::vector<std::pair<int, emulator::RunResult>>> emulated_plan_runs(const std::string& spec_text,
                                                                            const analysis::Workload& w,
                                                                            const pack::Packing& packing) {
  auto spec = parse_device_spec(spec_text);
  if (!spec) return spec.error();
  if (spec->kind != DeviceSpec::Kind::kEmulated) {
    return make_error("--device " + spec_text, "profiling runs need a device that can run the workload",
                      "use emulated:NAME here; on hardware, record the step at each plan clock (docs/profiling.md) "
                      "and pass the folder with --profiled");
  }
  auto profile = device::load_profile(spec->profile);
  if (!profile) return profile.error();
  emulator::EmulatedGpu gpu(*profile, spec->seed);
  std::vector<std::pair<int, emulator::RunResult>> out;
  for (int clock : packing.plan_clocks_mhz) {
    emulator::RunOptions o;
    o.steps = packing.plan_steps;
    o.trace_steps = 1;
    o.seed = uint64_t(clock) * 7919u + 1;
    auto run = gpu.run(w, emulator::ClockSchedule::locked(clock), o);
    if (!run) return run.error();
    out.emplace_back(clock, std::move(*run));
  }
  return out;
}

}  // namespace detail

Result<std::vector<pack::ProfiledRun>> profile_plan(const std::string& spec_text, const analysis::Workload& w,
                                                    const pack::Packing& packing) {
  auto runs = detail::emulated_plan_runs(spec_text, w, packing);
  if (!runs) return runs.error();
  std::vector<pack::ProfiledRun> out;
  for (auto& [clock, run] : *runs) {
    pack::ProfiledRun pr;
    pr.clock_mhz = clock;
    for (auto& rr : run.ranks) {
      auto t = trace::parse_trace(rr.trace_json, fmt::format("emulated {} MHz rank {}", clock, rr.rank));
      if (!t) return t.error();
      pr.traces.push_back(std::move(*t));
      pr.energy.push_back(std::move(rr.energy));
    }
    out.push_back(std::move(pr));
  }
  return out;
}

Result<Measured> run_on_emulator(const std::string& spec_text, const analysis::Workload& w,
                                 const std::vector<optimize::AppliedPack>& packs, const std::vector<int>& clocks,
                                 const std::vector<int64_t>& issue_at_ns, int default_clock_mhz, int steps,
                                 const std::string& name) {
  auto spec = parse_device_spec(spec_text);
  if (!spec) return spec.error();
  if (spec->kind != DeviceSpec::Kind::kEmulated)
    return make_error("--device " + spec_text, "evaluation runs on the emulated GPU", "use emulated:NAME");
  auto profile = device::load_profile(spec->profile);
  if (!profile) return profile.error();
  emulator::EmulatedGpu gpu(*profile, spec->seed);
  emulator::ClockSchedule s;
  // Steady state: each step starts at the clock its last pack left.
  s.initial_mhz = default_clock_mhz;
  s.ranks.assign(w.graph.rank_paths.size(), {});
  std::vector<int> last(w.graph.rank_paths.size(), default_clock_mhz);
  for (size_t k = 0; k < packs.size(); ++k) {
    const int c = clocks.empty() ? default_clock_mhz : clocks[k];
    s.ranks[packs[k].rank].push_back({issue_at_ns.empty() ? packs[k].issue_at_ns : issue_at_ns[k], c});
  }
  emulator::RunOptions o;
  o.steps = steps;
  o.trace_steps = 0;
  o.energy_log = false;
  o.seed = 424242;
  auto run = gpu.run(w, s, o);
  if (!run) return run.error();
  // Leave out the first step (it starts from the initial clock, not the policy's steady state).
  Measured m;
  m.name = name;
  double t = 0;
  for (size_t i = run->step_ns.size() > 1 ? 1 : 0; i < run->step_ns.size(); ++i) t += double(run->step_ns[i]);
  const size_t n = run->step_ns.size() > 1 ? run->step_ns.size() - 1 : 1;
  m.time_us = t / double(n) / 1e3;
  m.energy_j = run->energy_j / double(run->step_ns.size());
  return m;
}

}  // namespace emo::backends
