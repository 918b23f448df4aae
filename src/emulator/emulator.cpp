// The emulated GPU's run: execute the step's program (the independent executor, emo/executor) with
// every GPU op's duration taken from its hidden truth at the clock in effect when it starts (clock
// changes land mid-kernel; the kernel's remaining work then runs at the new rate), integrate each
// GPU's power over the run (busy ops, idle gaps at the locked clock), sample the energy counter as
// hardware does, and write the traced steps as a Kineto trace.
#include "emo/emulator/emulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <unordered_map>

#include "emulator_detail.h"
#include "truth.h"

namespace emo::emulator {

using detail::GpuTruth;
using detail::KernelTruth;

struct EmulatedGpu::Impl {
  GpuTruth gpu;
};

EmulatedGpu::EmulatedGpu(device::DeviceProfile profile, uint64_t seed, double host_scale)
    : profile_(std::move(profile)), seed_(seed), host_scale_(host_scale), impl_(std::make_unique<Impl>()) {
  impl_->gpu = detail::make_gpu_truth(profile_, seed_);
}
EmulatedGpu::~EmulatedGpu() = default;
EmulatedGpu::EmulatedGpu(EmulatedGpu&&) noexcept = default;
EmulatedGpu& EmulatedGpu::operator=(EmulatedGpu&&) noexcept = default;

// ANCHORS.md: the NVML energy counter updates every ≈10–100 ms; 20 ms is assumed for every profile.
double EmulatedGpu::energy_update_ms() const { return 20.0; }

double RankRun::probe_energy_at(int64_t t_ns) const {
  if (probe_j.empty() || probe_period_ns <= 0) return 0;
  const double x = double(t_ns - probe_origin_ns) / double(probe_period_ns);
  if (x <= 0) return probe_j.front();
  const size_t i = size_t(x);
  if (i + 1 >= probe_j.size()) return probe_j.back();
  const double frac = x - double(i);
  return probe_j[i] + frac * (probe_j[i + 1] - probe_j[i]);
}

double RunResult::mean_step_ns() const {
  if (step_ns.empty()) return 0;
  double s = 0;
  for (int64_t v : step_ns) s += double(v);
  return s / double(step_ns.size());
}

namespace {
// The most unmeasured steps a run starts with for a loop whose GPU runs behind its host (EmulatedGpu::run).
constexpr int64_t kMaxWarmUpSteps = 16;

// Deterministic normal draws from a counter (Box–Muller on two hashes).
double normal(uint64_t key) {
  const double u1 = std::max(1e-12, detail::unit_hash(key));
  const double u2 = detail::unit_hash(key ^ 0xa5a5a5a5a5a5a5a5ull);
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Clock in effect on one GPU over time: (time it takes effect, MHz), effect times non-decreasing.
struct ClockLine {
  std::vector<int64_t> t;
  std::vector<double> f;
  size_t segment(int64_t at) const {  // last index with t <= at
    auto it = std::upper_bound(t.begin(), t.end(), at);
    return it == t.begin() ? 0 : size_t(it - t.begin()) - 1;
  }
  double at(int64_t when) const { return f[segment(when)]; }
};

// Duration of `work_ns` (time at f_max) started at `start` under the clock line.
int64_t integrate(const detail::TruthMemo& memo, uint32_t k, const ClockLine& line, int64_t start, double work_ns) {
  size_t i = line.segment(start);
  int64_t t = start;
  double left = work_ns;
  while (true) {
    const double ratio = memo.time_ratio(k, line.f[i]);
    const int64_t seg_end = i + 1 < line.t.size() ? line.t[i + 1] : std::numeric_limits<int64_t>::max();
    const double need = left * ratio;
    if (double(seg_end - t) >= need) return t + int64_t(std::llround(need)) - start;
    left -= double(seg_end - t) / ratio;
    t = seg_end;
    ++i;
  }
}

}  // namespace

Result<RunResult> EmulatedGpu::run(const std::vector<trace::RankTrace>& ranks, const ClockSchedule& schedule,
                                   const RunOptions& options) const {
  const size_t n_ranks = ranks.size();
  const GpuTruth& gpu = impl_->gpu;
  if (options.steps < 1 || options.steps > kMaxEmulatedSteps)
    return make_error("emulator", fmt::format("steps must be from 1 to {}", kMaxEmulatedSteps));
  // The step's program, compiled once: its GPU ops and runtime calls (no more than the graph's nodes,
  // which bound the packing's plans) bound the run.
  executor::Scenario scenario;
  scenario.cpu_factor = host_scale_;
  auto compiled = executor::Program::compile(ranks, scenario);
  if (!compiled.ok()) return compiled.error();
  executor::Program& program = *compiled;
  const int64_t items = int64_t(program.gpu_ops().size() + program.calls().size());
  if (int64_t(options.steps) * std::max<int64_t>(1, items) > kMaxRunNodeSteps) {
    return make_error("emulator", fmt::format("{} steps of {} GPU ops and runtime calls are more than a run executes ({})",
                                              options.steps, items, kMaxRunNodeSteps));
  }
  if (options.trace_steps < 0 || options.trace_steps > options.steps)
    return make_error("emulator", "trace_steps must be between 0 and steps");
  if (schedule.ranks.size() > n_ranks)
    return make_error("clock schedule", fmt::format("has {} ranks, the workload {}", schedule.ranks.size(), n_ranks));
  auto supported = [&](int mhz) {
    return std::binary_search(profile_.sm_clocks.mhz.begin(), profile_.sm_clocks.mhz.end(), mhz);
  };
  const int initial = schedule.initial_mhz == 0 ? int(profile_.default_clock_mhz.value) : schedule.initial_mhz;
  if (!supported(initial))
    return make_error("clock schedule", fmt::format("{} MHz is not a supported clock of {}", initial, profile_.name),
                      "`emo devices " + profile_.name + "` lists the clocks");
  for (const auto& changes : schedule.ranks) {
    for (const ClockChange& c : changes) {
      if (!supported(c.clock_mhz))
        return make_error("clock schedule", fmt::format("{} MHz is not a supported clock of {}", c.clock_mhz, profile_.name),
                          "`emo devices " + profile_.name + "` lists the clocks");
    }
  }

  const std::vector<executor::Program::GpuOp>& gops = program.gpu_ops();
  const size_t n_ops = gops.size();

  // ---- truths: one per distinct GPU op name ----
  std::vector<KernelTruth> truths;
  std::unordered_map<std::string_view, uint32_t> truth_of_name;
  std::vector<uint32_t> truth(n_ops, 0);
  for (size_t i = 0; i < n_ops; ++i) {
    const trace::RankTrace& t = ranks[gops[i].rank];
    const trace::Event& e = t.events[gops[i].event];
    const std::string_view name = t.name_of(e);
    auto [it, fresh] = truth_of_name.try_emplace(name, uint32_t(truths.size()));
    if (fresh) {
      KernelTruth k;
      if (e.kind == trace::EventKind::kMemcpy || e.kind == trace::EventKind::kMemset) {
        k = detail::make_kernel_truth("memcpy", seed_);
      } else if (e.collective != trace::kNoIndex) {
        k = detail::make_kernel_truth("nccl", seed_ ^ detail::mix64(detail::hash_name(name)));
      } else {
        k = detail::make_kernel_truth(name, seed_);
      }
      gpu.set_throttle(k);
      truths.push_back(k);
    }
    truth[i] = it->second;
  }
  const detail::TruthMemo memo(gpu, truths);
  // Ranks of each matched collective (their GPUs' clocks set its transfer rate).
  std::vector<std::vector<uint32_t>> coll_ranks;
  for (const auto& members : program.collectives()) {
    auto& rs = coll_ranks.emplace_back();
    for (uint32_t m : members) rs.push_back(gops[m].rank);
  }

  // ---- the run, step by step ----
  std::vector<ClockLine> lines(n_ranks);
  for (auto& l : lines) {
    l.t.push_back(std::numeric_limits<int64_t>::min());
    l.f.push_back(initial);
  }
  const double med_ms = profile_.switch_latency_median_ms.value;
  const double sigma = std::log(std::max(1.0001, profile_.switch_latency_p99_ms.value / med_ms)) / 2.326;
  uint64_t draw = detail::mix64(options.seed * 0x2545f4914f6cdd1dull + seed_);
  RunResult out;
  out.ranks.resize(n_ranks);
  // ---- energy: each GPU's power integrated as the run goes, step by step ----
  // What is asked of each integral: the energy at each step bound, at each counter reading and at each
  // probe. Readings and probes are asked as the sweep nears them, their last ones once the run's end is known.
  const double period_ns = energy_update_ms() * 1e6;
  struct RankEnergy {
    detail::EnergySweep sweep;
    std::vector<size_t> bounds;                        // slot per step bound
    std::vector<std::pair<int64_t, size_t>> readings;  // (time, slot) per counter reading
    std::vector<size_t> probes;                        // slot per probe
    double origin_mj = 0, next_reading = 0;
    uint64_t draw = 0;
    int64_t next_probe = 0;
    int64_t earliest_issue = 0;  // the schedule's earliest change in a step (issue_ns, ≤ 0)
  };
  std::vector<RankEnergy> energy;
  energy.reserve(n_ranks);
  for (size_t r = 0; r < n_ranks; ++r) {
    RankEnergy& re = energy.emplace_back(RankEnergy{detail::EnergySweep(memo, lines[r].t, lines[r].f), {}, {}, {}});
    const uint64_t key = detail::mix64(options.seed * 31 + r + seed_);
    re.origin_mj = 1e9 * (1 + detail::unit_hash(key));  // "since driver load"
    re.next_reading = detail::unit_hash(key + 1) * period_ns;
    re.draw = key + 2;
    if (r < schedule.ranks.size()) {
      for (const ClockChange& c : schedule.ranks[r]) re.earliest_issue = std::min(re.earliest_issue, c.issue_ns);
    }
  }
  // Asks every reading and probe before `safe`, or, at the run's end (`safe` < 0), up to the last ones.
  auto ask_until = [&](RankEnergy& re, int64_t safe, int64_t run_end) {
    const bool last = safe < 0;
    while (options.energy_log && (last ? re.next_reading <= double(run_end) + period_ns : re.next_reading < double(safe))) {
      const int64_t ti = int64_t(re.next_reading);
      re.readings.emplace_back(ti, re.sweep.ask(ti));
      re.next_reading += period_ns * (0.9 + 0.2 * detail::unit_hash(++re.draw));
    }
    while (options.probe_period_ns > 0 &&
           (last ? re.next_probe <= run_end + options.probe_period_ns : re.next_probe < safe)) {
      re.probes.push_back(re.sweep.ask(re.next_probe));
      re.next_probe += options.probe_period_ns;
    }
  };
  std::vector<detail::TracedStep> traced;
  int64_t step_start = 0;
  std::vector<int> last_clock(n_ranks, initial);
  std::vector<int64_t> step_bounds;
  uint64_t rep_key = 0;
  // Jitter per op and step; a collective's members share theirs (one transfer).
  auto jit = [&](uint64_t id) {
    return std::max(0.5, 1 + options.jitter * normal(rep_key + id * 0x9e3779b97f4a7c15ull));
  };
  const executor::Program::DurationFn dur_at = [&](uint32_t i, int64_t t) -> int64_t {
    const executor::Program::GpuOp& op = gops[i];
    const int64_t base = op.dur_ns;
    if (base <= 0) return base;
    const int64_t at = t + step_start;
    if (op.collective >= 0) {
      double f = 1e9;
      for (uint32_t r : coll_ranks[size_t(op.collective)]) f = std::min(f, lines[r].at(at));
      const double j = jit(uint64_t(n_ops) + uint64_t(op.collective));
      return int64_t(std::llround(double(base) * j * memo.time_ratio(truth[i], f)));
    }
    return integrate(memo, truth[i], lines[op.rank], at, double(base) * jit(i));
  };
  // A loop whose GPU runs behind its host (steps whose GPU ops wait on earlier steps' queued work): steps
  // first, unmeasured, as many as the GPU's lag behind the step's start holds periods (a step run once at
  // the starting clock tells), so that the first measured step begins on the earlier steps' GPU work as in
  // the job: every measured step's window then holds one period of GPU work, and a traced step comes with
  // the steps its queued ops wait on.
  int warm = 0;
  if (program.pipelined()) {
    rep_key = detail::mix64(options.seed ^ seed_ ^ 0x3a9e5ull);
    EMO_RETURN_IF_ERROR(program.run(dur_at));
    const int64_t period = std::max<int64_t>(1, program.period_ns());
    warm = static_cast<int>(std::clamp<int64_t>((program.end_ns() - 1) / period, 1, kMaxWarmUpSteps));
  }
  for (int rep = -warm; rep < options.steps; ++rep) {
    if (rep >= 0) {
      step_bounds.push_back(step_start);
      for (RankEnergy& re : energy) re.bounds.push_back(re.sweep.ask(step_start));
    }
    // Online: the runtime says what it issues in this step (times from the run's start).
    std::vector<std::vector<ClockChange>> online;
    int64_t issue_origin = step_start;
    if (schedule.online) {
      online.assign(n_ranks, {});
      if (rep >= 0) schedule.online(rep, step_start, online);
      issue_origin = 0;
      for (const auto& changes : online) {
        for (const ClockChange& c : changes) {
          if (!supported(c.clock_mhz))
            return make_error("clock schedule", fmt::format("{} MHz is not a supported clock of {}", c.clock_mhz, profile_.name));
        }
      }
    }
    const auto& this_step = schedule.online ? online : schedule.ranks;
    for (size_t r = 0; r < this_step.size() && r < n_ranks; ++r) {
      auto changes = this_step[r];
      std::stable_sort(changes.begin(), changes.end(),
                       [](const ClockChange& a, const ClockChange& b) { return a.issue_ns < b.issue_ns; });
      for (const ClockChange& c : changes) {
        if (c.clock_mhz == last_clock[r]) continue;
        const double lat_ms = med_ms * std::exp(sigma * normal(++draw));
        int64_t effect = issue_origin + c.issue_ns + int64_t(lat_ms * 1e6);
        effect = std::max(effect, lines[r].t.back());
        lines[r].t.push_back(effect);
        lines[r].f.push_back(c.clock_mhz);
        last_clock[r] = c.clock_mhz;
        ++out.ranks[r].clock_changes;
      }
    }
    rep_key = detail::mix64(options.seed ^ (uint64_t(rep) << 32) ^ seed_);
    EMO_RETURN_IF_ERROR(program.run(dur_at));
    const int64_t span = program.period_ns();
    if (rep >= 0) out.step_ns.push_back(span);
    for (uint32_t i = 0; i < n_ops; ++i) {
      const int64_t b = program.op_start(i) + step_start, e = program.op_end(i) + step_start;
      if (e > b) energy[gops[i].rank].sweep.add_op(b, e, truth[i]);
    }
    // A pipelined loop's traced steps come with the ones before (their GPU work runs into the first of them).
    if (options.trace_steps > 0 && rep >= options.steps - options.trace_steps - warm)
      traced.push_back(detail::TracedStep::of(program, step_start));
    step_start += span;
    // Every op of the step ends by its end; the changes of later steps take effect at or after their
    // step's start plus the schedule's earliest issue time, and never before the last change so far
    // (online: only that).
    for (size_t r = 0; r < n_ranks; ++r) {
      RankEnergy& re = energy[r];
      const int64_t later = schedule.online ? lines[r].t.back()
                                            : std::max(lines[r].t.back(), step_start + re.earliest_issue);
      const int64_t safe = std::min(step_start, later);
      if (safe > 0) ask_until(re, safe, 0);
      re.sweep.advance(safe);
    }
  }
  const int64_t run_end = step_start;
  step_bounds.push_back(run_end);
  out.begin_ns = 0;
  out.end_ns = run_end;
  out.trace_origin_ns = detail::kTraceOriginOffsetNs;
  out.step_energy_j.assign(step_bounds.size() - 1, 0.0);

  for (size_t r = 0; r < n_ranks; ++r) {
    RankRun& rr = out.ranks[r];
    RankEnergy& re = energy[r];
    rr.rank = ranks[r].rank >= 0 ? ranks[r].rank : int(r);
    re.bounds.push_back(re.sweep.ask(run_end));
    ask_until(re, -1, run_end);
    re.sweep.finish(run_end);
    // After warm-up steps, from the first measured step's start to the run's end (which holds the warm-up
    // steps' GPU tail as the last steps' runs past it).
    rr.energy_j = warm > 0 ? re.sweep.answer(re.bounds.back()) - re.sweep.answer(re.bounds.front()) : re.sweep.total_j();
    rr.gpu_busy_ns = re.sweep.busy_ns();
    for (size_t i = 0; i + 1 < re.bounds.size(); ++i)
      out.step_energy_j[i] += re.sweep.answer(re.bounds[i + 1]) - re.sweep.answer(re.bounds[i]);
    out.energy_j += rr.energy_j;
    if (options.probe_period_ns > 0) {
      rr.probe_origin_ns = detail::kTraceOriginOffsetNs;
      rr.probe_period_ns = options.probe_period_ns;
      for (size_t slot : re.probes) rr.probe_j.push_back(re.sweep.answer(slot));
    }
    // After warm-up steps, the readings of the measured steps alone (the warm-up begins on an idle GPU
    // that the job's steady state never sees; the last steps' GPU tail runs past the run's end).
    for (const auto& [ti, slot] : re.readings) {
      if (warm > 0 && (ti < step_bounds.front() || ti > run_end)) continue;
      rr.energy.push_back({ti + detail::kTraceOriginOffsetNs, int64_t(re.origin_mj + re.sweep.answer(slot) * 1e3)});
    }
  }

  // ---- traces of the last steps ----
  if (!traced.empty()) {
    for (size_t r = 0; r < n_ranks; ++r) {
      out.ranks[r].trace_json = detail::write_kineto(ranks, uint32_t(r), program, traced, profile_);
      if (options.take_trace) EMO_RETURN_IF_ERROR(options.take_trace(out.ranks[r]));
    }
  }
  return out;
}

}  // namespace emo::emulator
