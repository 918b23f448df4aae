// Profiling runs and true measurements on the emulated GPU, for `emo pack`, `emo optimize`, `emo evaluate`.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "emo/backends/backends.h"
#include "emo/base/parallel.h"
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
  // The runs are independent (each has its own seed): one per thread.
  const std::vector<int>& clocks = packing.plan_clocks_mhz;
  std::vector<std::optional<Result<emulator::RunResult>>> runs(clocks.size());
  parallel_for(clocks.size(), [&](size_t i) {
    emulator::RunOptions o;
    o.steps = packing.plan_steps;
    o.trace_steps = 1;
    o.seed = uint64_t(clocks[i]) * 7919u + 1;
    runs[i] = gpu.run(w, emulator::ClockSchedule::locked(clocks[i]), o);
  });
  std::vector<std::pair<int, emulator::RunResult>> out;
  for (size_t i = 0; i < clocks.size(); ++i) {
    if (!*runs[i]) return runs[i]->error();
    out.emplace_back(clocks[i], std::move(**runs[i]));
  }
  return out;
}

}  // namespace detail

Result<std::vector<pack::ProfiledRun>> profile_plan(const std::string& spec_text, const analysis::Workload& w,
                                                    const pack::Packing& packing) {
  auto runs = detail::emulated_plan_runs(spec_text, w, packing);
  if (!runs) return runs.error();
  // Parse every (clock, rank) trace, in parallel; each text is freed once parsed.
  std::vector<std::pair<size_t, size_t>> items;
  for (size_t c = 0; c < runs->size(); ++c) {
    for (size_t r = 0; r < (*runs)[c].second.ranks.size(); ++r) items.emplace_back(c, r);
  }
  std::vector<std::optional<Result<trace::RankTrace>>> parsed(items.size());
  parallel_for(items.size(), [&](size_t i) {
    auto& [clock, run] = (*runs)[items[i].first];
    auto& rr = run.ranks[items[i].second];
    parsed[i] = trace::parse_trace(rr.trace_json, fmt::format("emulated {} MHz rank {}", clock, rr.rank));
    std::string().swap(rr.trace_json);
  });
  std::vector<pack::ProfiledRun> out;
  size_t i = 0;
  for (auto& [clock, run] : *runs) {
    pack::ProfiledRun pr;
    pr.clock_mhz = clock;
    for (auto& rr : run.ranks) {
      auto& t = *parsed[i++];
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
                                 const std::string& name, uint64_t seed) {
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
  o.seed = seed;
  auto run = gpu.run(w, s, o);
  if (!run) return run.error();
  // Leave out the first step (it starts from the initial clock, not the policy's steady state).
  Measured m;
  m.name = name;
  double t = 0;
  for (size_t i = run->step_ns.size() > 1 ? 1 : 0; i < run->step_ns.size(); ++i) {
    t += double(run->step_ns[i]);
    m.step_us.push_back(double(run->step_ns[i]) / 1e3);
  }
  const size_t n = run->step_ns.size() > 1 ? run->step_ns.size() - 1 : 1;
  m.time_us = t / double(n) / 1e3;
  // Energy per step over the same steps as the time (the first starts at the default clock).
  double e = 0;
  for (size_t i = run->step_energy_j.size() > 1 ? 1 : 0; i < run->step_energy_j.size(); ++i) e += run->step_energy_j[i];
  m.energy_j = e / double(n);
  return m;
}

}  // namespace emo::backends
