// Fitting pack-level (signature-level) models from profiling runs; see emo/pack/fit.h.
#include "emo/pack/fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace emo::pack {

using graph::NodeId;

double PackModels::time_ratio(uint32_t sig, double f) const {
  const SignatureModel& s = signatures[sig];
  if (s.ref_time_s <= 0) return 1.0;
  return s.unit.time.time_s(f) / s.ref_time_s;
}

double PackModels::op_time_ratio(uint32_t sig, uint32_t pos, double f) const {
  const SignatureModel& s = signatures[sig];
  if (pos >= s.op_ref_s.size() || s.op_ref_s[pos] <= 0) return time_ratio(sig, f);
  return s.op_time[pos].time_s(f) / s.op_ref_s[pos];
}

double PackModels::busy_power_w(uint32_t sig, uint32_t gpu, double f) const {
  const SignatureModel& s = signatures[sig];
  const model::Prediction pr = model::predict(s.unit, f);
  const double stat = s.unit.power.const_w;
  const GpuCorrection& c = gpus[gpu];
  return c.static_scale * stat + c.dynamic_scale * std::max(0.0, pr.power_w - stat);
}

double PackModels::idle_power_w(uint32_t gpu, double f) const {
  // Idle: static power plus a little clocked power (the clock tree), scaled like the busy static part.
  const double v = profile.voltage_rel(f);
  const double idle = profile.idle_power_w.value * (0.85 + 0.15 * v * v * f / profile.max_clock_mhz());
  return gpus[gpu].static_scale * idle;
}

ProfiledOps::ProfiledOps(const graph::Graph& pg) {
  const std::vector<std::vector<NodeId>> pops = gpu_ops_in_index_order(pg);
  index_.resize(pops.size());
  counts_.resize(pops.size());
  for (size_t r = 0; r < pops.size(); ++r) {
    std::map<std::pair<int32_t, std::string>, uint32_t> occ;
    for (NodeId n : pops[r]) {
      const int32_t stream = pg.lanes[pg.lane[n]].stream;
      std::string name(pg.strings.view(pg.name[n]));
      const uint32_t k = occ[{stream, name}]++;
      index_[r][Key{stream, std::move(name), k}] = {pg.meas_start_ns[n], pg.meas_end_ns[n]};
    }
    counts_[r] = pops[r].size();
  }
}

const std::pair<int64_t, int64_t>* ProfiledOps::find(const graph::Graph& g, const Packing& packing, uint32_t gpu,
                                                     uint32_t i) const {
  if (gpu >= index_.size()) return nullptr;
  const GpuOps& go = packing.gpus[gpu];
  const NodeId n = go.ops[i];
  auto it = index_[gpu].find(Key{g.lanes[g.lane[n]].stream, std::string(g.strings.view(g.name[n])), go.occurrence[i]});
  return it == index_[gpu].end() ? nullptr : &it->second;
}

PackCost predict_pack(const Packing& p, const PackModels& m, uint32_t k, double f) {
  const Pack& pk = p.packs[k];
  PackCost c;
  for (uint32_t a = pk.first_atom; a <= pk.last_atom; ++a) {
    const Atom& at = p.atoms[a];
    if (at.first > at.last) continue;
    const double t = double(at.busy_ns) * 1e-9 * m.time_ratio(at.signature, f);
    c.busy_s += t;
    c.energy_j += t * m.busy_power_w(at.signature, pk.gpu, f);
  }
  const int64_t idle_ns = std::max<int64_t>(0, (pk.end_ns - pk.begin_ns) - pk.busy_ns);
  c.energy_j += double(idle_ns) * 1e-9 * m.idle_power_w(pk.gpu, f);
  return c;
}


Result<PackModels> fit_pack_models(const analysis::Workload& base, const Packing& packing,
                                   const std::vector<ProfiledRun>& runs, const device::DeviceProfile& profile) {
  const graph::Graph& g = base.graph;
  PackModels m;
  m.profile = profile;
  std::vector<int> clocks;
  for (const ProfiledRun& r : runs) clocks.push_back(r.clock_mhz);
  std::sort(clocks.begin(), clocks.end());
  clocks.erase(std::unique(clocks.begin(), clocks.end()), clocks.end());
  if (clocks.size() < 2) return make_error("profiling", "at least 2 distinct profiled clocks are needed");
  m.clocks_mhz = clocks;
  const size_t n_sig = packing.signatures.size();
  const size_t n_gpu = packing.gpus.size();
  // Per signature and run: the sum of its members' op durations (s).
  std::vector<std::vector<double>> sig_time(n_sig, std::vector<double>(runs.size(), 0));
  // Per signature, op position and run: the sum of that op's durations over the members (s).
  std::vector<std::vector<std::vector<double>>> pos_time(n_sig);
  for (size_t s = 0; s < n_sig; ++s)
    pos_time[s].assign(packing.signatures[s].ops, std::vector<double>(runs.size(), 0));
  // Per op of the base step: its position within its atom.
  std::vector<std::vector<uint32_t>> op_pos(n_gpu);
  for (size_t gi = 0; gi < n_gpu; ++gi) op_pos[gi].assign(packing.gpus[gi].ops.size(), 0);
  // Per GPU and run: measured step time and energy.
  std::vector<std::vector<double>> step_s(n_gpu, std::vector<double>(runs.size(), 0));
  std::vector<std::vector<double>> step_j(n_gpu, std::vector<double>(runs.size(), 0));
  // Per op of the base step: its atom's signature.
  std::vector<std::vector<uint32_t>> op_sig(n_gpu);
  for (size_t gi = 0; gi < n_gpu; ++gi) op_sig[gi].assign(packing.gpus[gi].ops.size(), 0);
  for (const Atom& a : packing.atoms) {
    for (uint32_t i = a.first; i <= a.last && a.first <= a.last; ++i) {
      op_sig[a.gpu][i] = a.signature;
      op_pos[a.gpu][i] = i - a.first;
    }
  }

  for (size_t ri = 0; ri < runs.size(); ++ri) {
    const ProfiledRun& run = runs[ri];
    const std::string where = fmt::format("profiling run at {} MHz", run.clock_mhz);
    if (run.traces.size() != n_gpu) {
      return make_error(where, fmt::format("has {} rank traces, the step {}", run.traces.size(), n_gpu));
    }
    analysis::LoadOptions lo;
    std::vector<trace::RankTrace> copies;
    // The traces are consumed by assemble(); the caller's are kept, so rebuild from a copy of each.
    for (const auto& t : run.traces) {
      trace::RankTrace c;
      c.path = t.path;
      c.rank = t.rank;
      c.world_size = t.world_size;
      c.origin_ns = t.origin_ns;
      c.device_name = t.device_name;
      for (size_t i = 0; i < t.strings.size(); ++i) c.strings.intern(t.strings.view(StrId(i)));
      c.lanes = t.lanes;
      c.events = t.events;
      c.collectives = t.collectives;
      c.steps = t.steps;
      copies.push_back(std::move(c));
    }
    auto w = analysis::assemble(std::move(copies), lo);
    if (!w) return w.error();
    const graph::Graph& pg = w->graph;
    const ProfiledOps index(pg);
    for (size_t r = 0; r < n_gpu; ++r) {
      step_s[r][ri] = double(pg.measured_end_ns() - pg.measured_begin_ns()) * 1e-9;
      if (index.ops(uint32_t(r)) != packing.gpus[r].ops.size()) {
        return make_error(where, fmt::format("rank {} has {} GPU ops in its step, the base step {}", r,
                                             index.ops(uint32_t(r)), packing.gpus[r].ops.size()),
                          "profile the same step of the same program (same model, batch and parallelism)");
      }
    }
    // Sum member op durations per signature.
    for (size_t r = 0; r < n_gpu; ++r) {
      const GpuOps& go = packing.gpus[r];
      for (size_t i = 0; i < go.ops.size(); ++i) {
        const auto* span = index.find(g, packing, uint32_t(r), uint32_t(i));
        if (span == nullptr) {
          const NodeId n = go.ops[i];
          return make_error(where, fmt::format("rank {}: op {} ('{}' on stream {}) is not in the profiled step", r, i,
                                               g.strings.view(g.name[n]), g.lanes[g.lane[n]].stream),
                            "profile the same step of the same program");
        }
        // Matched collectives: the kernel's own span includes waiting for peers; use it as measured.
        const double d = double(span->second - span->first) * 1e-9;
        sig_time[op_sig[r][i]][ri] += d;
        auto& pt = pos_time[op_sig[r][i]];
        if (op_pos[r][i] < pt.size()) pt[op_pos[r][i]][ri] += d;
      }
      // Energy per step: the counter's mean power over the run × the step time.
      const auto& log = run.energy.size() > r ? run.energy[r] : std::vector<device::EnergySample>{};
      if (log.size() < 2 || log.back().t_ns <= log.front().t_ns) {
        return make_error(where, fmt::format("rank {}: the energy log has fewer than 2 counter readings", r),
                          "run at each clock for long enough (seconds) to see the counter move");
      }
      const double watts = double(log.back().energy_mj - log.front().energy_mj) * 1e-3 /
                           (double(log.back().t_ns - log.front().t_ns) * 1e-9);
      step_j[r][ri] = watts * step_s[r][ri];
    }
  }

  // ---- signature models ----
  m.signatures.resize(n_sig);
  const double fmax = profile.max_clock_mhz();
  for (size_t s = 0; s < n_sig; ++s) {
    SignatureModel& sm = m.signatures[s];
    if (packing.signatures[s].ops == 0) continue;
    std::vector<model::Point> pts;
    for (size_t ri = 0; ri < runs.size(); ++ri) {
      if (sig_time[s][ri] > 0) pts.push_back({double(runs[ri].clock_mhz), sig_time[s][ri], sig_time[s][ri] * 100});
    }
    if (pts.size() < 2) continue;
    auto tm = model::fit_time_model(pts, profile);
    if (!tm) continue;
    const double t_ref = tm->time_s(fmax);
    const double share = tm->compute_share(fmax);
    sm.unit = model::prior_unit_model(profile, t_ref, share);
    sm.unit.time = *tm;
    sm.ref_time_s = t_ref;
    sm.compute_share = share;
    sm.fitted = true;
    const size_t n_pos = pos_time[s].size();
    sm.op_time.assign(n_pos, model::TimeModel{});
    sm.op_ref_s.assign(n_pos, 0.0);
    if (n_pos < 2) continue;  // one op: the signature's model is the op's
    for (size_t j = 0; j < n_pos; ++j) {
      std::vector<model::Point> op_pts;
      for (size_t ri = 0; ri < runs.size(); ++ri) {
        const double t = pos_time[s][j][ri];
        if (t > 0) op_pts.push_back({double(runs[ri].clock_mhz), t, t * 100});
      }
      if (op_pts.size() < 2) continue;
      auto om = model::fit_time_model(op_pts, profile);
      if (!om) continue;
      const double r = om->time_s(fmax);
      if (!(r > 0)) continue;
      sm.op_time[j] = *om;
      sm.op_ref_s[j] = r;
    }
  }

  // ---- per-GPU correction of static and dynamic power from the measured step energies ----
  m.gpus.resize(n_gpu);
  m.step_s.assign(runs.size(), std::vector<double>(n_gpu, 0));
  for (size_t r = 0; r < n_gpu; ++r) {
    // E = a·(S + I) + b·D per run; least squares for (a, b).
    double sss = 0, ssd = 0, sdd = 0, sse = 0, sde = 0;
    std::vector<std::array<double, 3>> parts(runs.size());
    for (size_t ri = 0; ri < runs.size(); ++ri) {
      const double f = runs[ri].clock_mhz;
      double S = 0, D = 0, busy = 0;
      for (const Atom& a : packing.atoms) {
        if (a.gpu != r || a.first > a.last) continue;
        const SignatureModel& sm = m.signatures[a.signature];
        const double t = double(a.busy_ns) * 1e-9 * m.time_ratio(a.signature, f);
        const double p = model::predict(sm.unit, f).power_w;
        S += t * sm.unit.power.const_w;
        D += t * std::max(0.0, p - sm.unit.power.const_w);
        busy += t;
      }
      GpuCorrection unit;
      m.gpus[r] = unit;
      const double I = std::max(0.0, step_s[r][ri] - busy) * m.idle_power_w(uint32_t(r), f);
      parts[ri] = {S + I, D, step_j[r][ri]};
      sss += (S + I) * (S + I);
      ssd += (S + I) * D;
      sdd += D * D;
      sse += (S + I) * step_j[r][ri];
      sde += D * step_j[r][ri];
      m.step_s[ri][r] = step_s[r][ri];
    }
    const double det = sss * sdd - ssd * ssd;
    double a = 1, b = 1;
    if (std::abs(det) > 1e-12 * sss * sdd && det != 0) {
      a = (sse * sdd - sde * ssd) / det;
      b = (sss * sde - ssd * sse) / det;
    }
    if (!(a > 0.5 && a < 2.0 && b > 0.3 && b < 3.0)) {  // ill-conditioned: one common scale instead
      double num = 0, den = 0;
      for (const auto& pr : parts) {
        num += (pr[0] + pr[1]) * pr[2];
        den += (pr[0] + pr[1]) * (pr[0] + pr[1]);
      }
      a = b = den > 0 ? num / den : 1.0;
    }
    GpuCorrection& c = m.gpus[r];
    c.static_scale = a;
    c.dynamic_scale = b;
    for (const auto& pr : parts) {
      c.measured_j.push_back(pr[2]);
      c.predicted_j.push_back(a * pr[0] + b * pr[1]);
    }
  }
  return m;
}

}  // namespace emo::pack
