// Evaluation on the emulated GPU: plans measured as a runtime would run them, and the pack models'
// fidelity against the emulated GPU's truth. See emo/backends/evaluation.h.
#include "emo/backends/evaluation.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "emo/emulator/emulator.h"

namespace emo::backends {

using graph::NodeId;

Result<EmulatedMeter> EmulatedMeter::make(const Target& on, const analysis::Workload& w, int default_clock_mhz) {
  auto gpu = on.emulated_gpu("evaluation runs on the emulated GPU", "use emulated:NAME");
  if (!gpu) return gpu.error();
  return EmulatedMeter(on, w, default_clock_mhz);
}

Result<optimize::Measured> EmulatedMeter::measure(const std::vector<optimize::AppliedPack>& packs,
                                                  const std::vector<int>& clocks,
                                                  const std::vector<int64_t>& issue_at_ns, int steps,
                                                  const std::string& name, uint64_t seed) const {
  auto gpu = target_->emulated_gpu("evaluation runs on the emulated GPU", "use emulated:NAME");
  if (!gpu) return gpu.error();
  const analysis::Workload& w = *workload_;
  const int default_clock_mhz = default_clock_mhz_;
  emulator::ClockSchedule s;
  // Steady state: each step starts at the clock its last pack left.
  s.initial_mhz = default_clock_mhz;
  s.ranks.assign(w.graph.rank_paths.size(), {});
  std::vector<int> last(w.graph.rank_paths.size(), default_clock_mhz);
  for (size_t k = 0; k < packs.size(); ++k) {
    const int c = clocks.empty() ? default_clock_mhz : clocks[k];
    s.ranks[packs[k].rank.index()].push_back({issue_at_ns.empty() ? packs[k].issue_at_ns : issue_at_ns[k], c});
  }
  emulator::RunOptions o;
  o.steps = steps;
  o.trace_steps = 0;
  o.energy_log = false;
  o.seed = seed;
  auto run = (*gpu)->run(w.ranks, s, o);
  if (!run) return run.error();
  // Leave out the first step (it starts from the initial clock, not the policy's steady state).
  optimize::Measured m;
  m.name = name;
  for (size_t i = run->step_ns.size() > 1 ? 1 : 0; i < run->step_ns.size(); ++i) m.step_ns.push_back(run->step_ns[i]);
  const size_t n = m.step_ns.size();
  // Energy per step over the same steps as the time (the first starts at the default clock).
  double e = 0;
  for (size_t i = run->step_energy_j.size() > 1 ? 1 : 0; i < run->step_energy_j.size(); ++i) e += run->step_energy_j[i];
  m.energy_j = e / double(n);
  return m;
}

Result<PackFidelity> pack_fidelity(const Target& on, const analysis::Workload& w, const pack::Packing& packing,
                                   const pack::PackModels& models, int clock_mhz) {
  auto gpu_or = on.emulated_gpu("the fidelity check needs the emulated GPU's truth", "use emulated:NAME");
  if (!gpu_or) return gpu_or.error();
  const emulator::EmulatedGpu& gpu = **gpu_or;
  const device::DeviceProfile* profile = &on.profile();
  if (std::find(profile->sm_clocks.mhz.begin(), profile->sm_clocks.mhz.end(), clock_mhz) == profile->sm_clocks.mhz.end())
    return make_error(fmt::format("{} MHz", clock_mhz), "not a supported clock of " + profile->name);
  emulator::RunOptions o;
  o.steps = 3;
  o.trace_steps = 1;
  o.energy_log = false;
  o.seed = 0xf1de11;  // not one of the profiling runs' seeds
  o.probe_period_ns = 10000;
  auto run = gpu.run(w.ranks, emulator::ClockSchedule::locked(clock_mhz), o);
  if (!run) return run.error();

  // The traced (last) step, read back as a user's trace would be.
  std::vector<trace::RankTrace> traces;
  int64_t min_origin = std::numeric_limits<int64_t>::max();
  for (const auto& rr : run->ranks) {
    auto t = trace::parse_trace(rr.trace_json, fmt::format("emulated {} MHz rank {}", clock_mhz, rr.rank));
    if (!t) return t.error();
    min_origin = std::min(min_origin, t->origin_ns);
    traces.push_back(std::move(*t));
  }
  auto pw = analysis::assemble(std::move(traces), {});
  if (!pw) return pw.error();
  const graph::Graph& pg = pw->graph;
  const graph::Graph& g = w.graph;
  const pack::ProfiledOps index(pg);
  PackFidelity f;
  f.clock_mhz = clock_mhz;
  for (uint32_t k = 0; k < packing.packs.size(); ++k) {
    const pack::Pack& pk = packing.packs[k];
    if (pk.first_op > pk.last_op) continue;
    const pack::GpuOps& go = packing.gpus[pk.rank.index()];
    PackFidelityRow row;
    row.pack = pack::PackIndex(k);
    row.rank_id = w.graph.rank_id(go.rank);
    row.first_name = std::string(g.strings.view(g.name[go.ops[pk.first_op]]));
    int64_t win_b = std::numeric_limits<int64_t>::max(), win_e = std::numeric_limits<int64_t>::min();
    int64_t busy_ns = 0;
    for (uint32_t a = pk.first_atom; a <= pk.last_atom; ++a) {
      const pack::Atom& at = packing.atoms[a];
      if (at.first > at.last) continue;
      std::vector<std::pair<int64_t, int64_t>> iv;
      for (uint32_t i = at.first; i <= at.last; ++i) {
        const auto* span = index.find(g, packing, pk.rank, i);
        if (span == nullptr) {
          return make_error("fidelity run", fmt::format("op '{}' of pack {} is missing from the emulated trace",
                                                        g.strings.view(g.name[go.ops[i]]), k));
        }
        // Absolute, on the trace clock (where the energy probes are).
        const int64_t shift = pg.rank_offset_ns[pk.rank.index()] + min_origin;
        iv.emplace_back(span->first + shift, span->second + shift);
      }
      std::sort(iv.begin(), iv.end());
      int64_t cb = iv[0].first, ce = iv[0].second;
      for (const auto& [b, e] : iv) {
        if (b > ce) {
          busy_ns += ce - cb;
          cb = b;
          ce = e;
        } else {
          ce = std::max(ce, e);
        }
        win_b = std::min(win_b, b);
        win_e = std::max(win_e, e);
      }
      busy_ns += ce - cb;
    }
    const auto& rr = run->ranks[pk.rank.index()];
    row.true_busy_ns = busy_ns;
    row.true_energy_j = rr.probe_energy_at(win_e) - rr.probe_energy_at(win_b);
    const pack::PackCost pc = pack::predict_pack(packing, models, row.pack, clock_mhz);
    row.predicted_busy_ns = pc.busy_ns;
    row.predicted_energy_j = pc.energy_j;
    f.packs.push_back(std::move(row));
  }
  optimize::Problem pr;
  pr.workload = &w;
  pr.packing = &packing;
  pr.models = &models;
  pr.default_clock_mhz = int(models.profile.default_clock_mhz.value);
  const optimize::Plan plan = optimize::predict(pr, std::vector<int>(packing.packs.size(), clock_mhz));
  f.predicted_step_ns = plan.time_ns;
  f.predicted_step_j = plan.energy_j;
  f.true_step_ns = run->mean_step_ns();
  f.true_step_j = run->energy_per_step_j();
  return f;
}

}  // namespace emo::backends
