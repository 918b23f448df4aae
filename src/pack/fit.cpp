// Fitting pack-level (signature-level) models from profiling runs; see emo/pack/fit.h.
#include "emo/pack/fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "emo/dist/dist.h"
#include "emo/replay/distributed.h"

namespace emo::pack {

using graph::NodeId;

double PackModels::time_ratio(SignatureIndex sig, double f) const {
  const SignatureModel& s = signatures[sig.index()];
  if (s.ref_time_s <= 0) return 1.0;
  // A throttled signature runs at its throttle clock whenever a higher one is set.
  const double eff = s.unit.throttle_mhz > 0 ? std::min(f, s.unit.throttle_mhz) : f;
  return s.unit.time.time_s(eff) / s.ref_time_s;
}

double PackModels::op_time_ratio(SignatureIndex sig, uint32_t pos, double f) const {
  const SignatureModel& s = signatures[sig.index()];
  if (pos >= s.op_ref_s.size() || s.op_ref_s[pos] <= 0) return time_ratio(sig, f);
  return s.op_time[pos].time_s(f) / s.op_ref_s[pos];
}

namespace {

// A signature's modelled busy power at f in its parts: static, memory, and the SM part that scales as
// V(f)²·f (model::PowerModel::power_w). `split` is false where the parts do not add up to the power:
// a signature without a fitted model, or one at the power limit (its power is the cap whatever V is).
// `at_limit`: a signature seen to throttle, at or above its throttle clock: it draws the limit, whatever
// this GPU's scales. `throttle_mhz` > 0 (below it): its SM part was set from the limit at that clock,
// so this GPU's voltage enters only relative to the voltage there.
struct PowerParts {
  double stat = 0, mem = 0, sm = 0, total = 0;
  double clock_mhz = 0;  // the clock in effect
  double throttle_mhz = 0;
  bool split = false;
  bool at_limit = false;
};

PowerParts power_parts(const SignatureModel& s, double f) {
  const model::Prediction pr = model::predict(s.unit, f);
  PowerParts p;
  p.stat = s.unit.power.const_w;
  p.total = pr.power_w;
  p.clock_mhz = pr.effective_clock_mhz;
  if (s.fitted && s.unit.throttle_mhz > 0) {
    if (pr.capped) {
      p.at_limit = true;
      p.stat = 0;
      return p;
    }
    p.throttle_mhz = s.unit.throttle_mhz;
  }
  if (!s.fitted || pr.capped) return p;
  const double uncapped = s.unit.power.power_w(pr.effective_clock_mhz, s.unit.time);
  if (!(uncapped <= pr.power_w)) return p;  // over the cap (or not a number): the capped power stands
  p.mem = s.unit.power.memory_w(pr.effective_clock_mhz, s.unit.time);
  p.sm = std::max(0.0, uncapped - p.stat - p.mem);
  p.split = true;
  return p;
}

// Throttling seen in a signature's times. A GPU at its power limit lowers its clock, so a kernel that
// would draw more than the limit takes as long at every clock above the one where it meets it: at the
// top profiled clocks its time is longer than the SM-bound (1/f) fit of the lower clocks says. The
// clock it ran at is where that fit gives its measured time. Tried with the top m points (m from the
// most the lower ones leave, at least 2, down to 1): each must be kThrottleTol longer than the fit of the
// others, which must be SM-bound there (a memory-bound unit's time is flat above its knee for another
// reason, and draws far less). `pts` ascending by clock; returns 0 where no throttling shows.
constexpr double kThrottleTol = 0.015;
constexpr double kThrottleComputeShare = 0.9;

struct Throttle {
  double mhz = 0;
  model::TimeModel time;  // fitted on the unthrottled points
};

Throttle find_throttle(const std::vector<model::Point>& pts, const device::DeviceProfile& profile) {
  Throttle out;
  const size_t n = pts.size();
  if (n < 3) return out;
  for (size_t m = n - 2; m >= 1; --m) {
    const size_t nfree = n - m;
    auto tm = model::fit_time_model(std::span<const model::Point>(pts.data(), nfree), profile);
    if (!tm) continue;
    const double f_free = pts[nfree - 1].clock_mhz;
    bool all = true;
    double sum = 0;
    for (size_t i = nfree; i < n && all; ++i) {
      const double f = pts[i].clock_mhz, t = pts[i].time_s;
      if (!(t > tm->time_s(f) * (1 + kThrottleTol)) || tm->compute_share(f) < kThrottleComputeShare) {
        all = false;
        break;
      }
      // The fit's time falls with the clock: bisect for where it equals t. A time no shorter than at the
      // highest unthrottled clock is not a throttle (that one ran at its clock): something else. Nor is
      // one about as long there when only two clocks are free: flat from the higher of them up is what a
      // memory-bound kernel's time does above its memory knee, and two points cannot tell that from 1/f.
      double lo = f_free, hi = f;
      const double t_free = tm->time_s(lo);
      if (t_free <= t || (nfree < 3 && !(t < t_free * (1 - kThrottleTol)))) {
        all = false;
        break;
      }
      for (int it = 0; it < 50; ++it) {
        const double mid = 0.5 * (lo + hi);
        (tm->time_s(mid) > t ? lo : hi) = mid;
      }
      sum += 0.5 * (lo + hi);
    }
    if (all) {
      out.mhz = sum / double(m);
      out.time = *tm;
      return out;
    }
  }
  return out;
}

// Two atoms running at once for `ns`: the smaller dynamic power of the two (the prior's, at f) over
// that time, of which two kernels at once draw only the GPU's concurrent share (GpuCorrection::
// concurrent_share). None (w_s = 0) where either signature throttles: a GPU at its limit draws the
// limit, whatever runs.
struct SharedPower {
  double w_s = 0;          // seconds the two ran at once
  SignatureIndex lesser;   // the signature whose dynamic power is the smaller
  PowerParts parts;        // its parts at f
};

SharedPower shared_power(const Packing& p, const PackModels& m, uint32_t first, uint32_t second, double ns, double f) {
  SharedPower out;
  const SignatureIndex x = p.atoms[first].signature, y = p.atoms[second].signature;
  const SignatureModel& sx = m.signatures[x.index()];
  const SignatureModel& sy = m.signatures[y.index()];
  if (!(ns > 0) || (sx.fitted && sx.unit.throttle_mhz > 0) || (sy.fitted && sy.unit.throttle_mhz > 0)) return out;
  const PowerParts px = power_parts(sx, f), py = power_parts(sy, f);
  auto dyn = [](const PowerParts& q) { return q.split ? q.mem + q.sm : std::max(0.0, q.total - q.stat); };
  const bool x_less = dyn(px) <= dyn(py);
  out.lesser = x_less ? x : y;
  out.parts = x_less ? px : py;
  out.w_s = ns * 1e-9;
  return out;
}

}  // namespace

double PackModels::voltage_rel(graph::RankIndex rank, double f) const {
  const size_t gpu = rank.index();
  const double scale = gpu < gpus.size() ? gpus[gpu].floor_scale : 1.0;
  const double floor = std::min(1.0, profile.voltage.floor_rel.value * scale);
  const double fmax = profile.max_clock_mhz();
  const double knee = profile.voltage.knee_mhz.value * (gpu < gpus.size() ? gpus[gpu].knee_scale : 1.0);
  if (f <= knee || fmax <= knee) return floor;
  return floor + (1.0 - floor) * std::min(1.0, (f - knee) / (fmax - knee));
}

double GpuCorrection::residual_at(double f) const {
  if (residual.empty()) return 1.0;
  if (f <= residual.front().first) return residual.front().second;
  if (f >= residual.back().first) return residual.back().second;
  const auto hi = std::lower_bound(residual.begin(), residual.end(), f,
                                   [](const std::pair<double, double>& r, double x) { return r.first < x; });
  const auto lo = hi - 1;
  const double t = (f - lo->first) / (hi->first - lo->first);
  return lo->second + t * (hi->second - lo->second);
}

double PackModels::busy_power_w(SignatureIndex sig, graph::RankIndex gpu, double f) const {
  return gpus[gpu.index()].residual_at(f) * fitted_busy_power_w(sig, gpu, f);
}

double PackModels::fitted_busy_power_w(SignatureIndex sig, graph::RankIndex gpu, double f) const {
  const SignatureModel& s = signatures[sig.index()];
  const GpuCorrection& c = gpus[gpu.index()];
  if (s.unit.throttle_mhz > 0 && s.fitted) {
    const PowerParts p = power_parts(s, f);
    if (p.at_limit) return c.limit_scale * p.total;
    if (p.split) {
      const double k = voltage_gain(gpu, p.clock_mhz) / voltage_gain(gpu, p.throttle_mhz);
      return c.static_scale * p.stat + c.dynamic_scale * p.mem + c.limit_scale * k * p.sm;
    }
  }
  if (c.floor_scale != 1.0 || c.knee_scale != 1.0) {
    const PowerParts p = power_parts(s, f);
    if (p.split) {
      const double v0 = profile.voltage_rel(p.clock_mhz), v = voltage_rel(gpu, p.clock_mhz);
      const double k = v0 > 0 ? (v * v) / (v0 * v0) : 1.0;
      return c.static_scale * p.stat + c.dynamic_scale * (p.mem + k * p.sm);
    }
  }
  const model::Prediction pr = model::predict(s.unit, f);
  const double stat = s.unit.power.const_w;
  return c.static_scale * stat + c.dynamic_scale * std::max(0.0, pr.power_w - stat);
}

double PackModels::voltage_gain(graph::RankIndex gpu, double f) const {
  const double v0 = profile.voltage_rel(f), v = voltage_rel(gpu, f);
  return v0 > 0 ? (v * v) / (v0 * v0) : 1.0;
}

double PackModels::idle_power_w(graph::RankIndex gpu, double f) const {
  // Idle: static power plus a little clocked power (the clock tree), scaled like the busy static part.
  const double v = voltage_rel(gpu, f);
  const double idle = profile.idle_power_w.value * (0.85 + 0.15 * v * v * f / profile.max_clock_mhz());
  const GpuCorrection& c = gpus[gpu.index()];
  return c.residual_at(f) * c.static_scale * idle;
}

double PackModels::overlap_ns(const Overlap& o, double f) const {
  const std::vector<double>& c = overlap_clocks_mhz;
  if (c.empty() || o.ns.size() != c.size()) return 0;
  if (f <= c.front()) return o.ns.front();
  if (f >= c.back()) return o.ns.back();
  const size_t i = size_t(std::upper_bound(c.begin(), c.end(), f) - c.begin());  // c[i-1] < f < c[i]
  const double w = (f - c[i - 1]) / (c[i] - c[i - 1]);
  return o.ns[i - 1] + w * (o.ns[i] - o.ns[i - 1]);
}

ProfiledOps::ProfiledOps(const graph::Graph& pg) {
  const std::vector<std::vector<NodeId>> pops = gpu_ops_in_index_order(pg);
  index_.resize(pops.size());
  counts_.resize(pops.size());
  for (size_t r = 0; r < pops.size(); ++r) {
    for (NodeId n : pops[r]) {
      const std::string_view name = pg.strings.view(pg.name[n]);
      auto it = names_.find(name);
      if (it == names_.end()) it = names_.emplace(std::string(name), uint32_t(names_.size())).first;
      const uint64_t key = (uint64_t(uint32_t(pg.lanes[pg.lane[n]].stream)) << 32) | it->second;
      index_[r][key].emplace_back(pg.meas_start_ns[n], pg.meas_end_ns[n]);
    }
    counts_[r] = pops[r].size();
  }
}

const std::pair<int64_t, int64_t>* ProfiledOps::find(const graph::Graph& g, const Packing& packing,
                                                     graph::RankIndex rank, uint32_t i) const {
  const size_t gpu = rank.index();
  if (gpu >= index_.size()) return nullptr;
  const GpuOps& go = packing.gpus[gpu];
  const NodeId n = go.ops[i];
  const auto name = names_.find(g.strings.view(g.name[n]));
  if (name == names_.end()) return nullptr;
  const auto it = index_[gpu].find((uint64_t(uint32_t(g.lanes[g.lane[n]].stream)) << 32) | name->second);
  if (it == index_[gpu].end() || go.occurrence[i] >= it->second.size()) return nullptr;
  return &it->second[go.occurrence[i]];
}

std::vector<PackIndex> packs_held_at_default(const Packing& p, const PackModels& m) {
  std::vector<PackIndex> out;
  for (uint32_t k = 0; k < p.packs.size(); ++k) {
    const Pack& pk = p.packs[k];
    for (uint32_t a = pk.first_atom; a <= pk.last_atom; ++a) {
      const Atom& at = p.atoms[a];
      const size_t sg = at.signature.index();
      if (at.first <= at.last && sg < m.signatures.size() && m.signatures[sg].fit_failed) {
        out.push_back(PackIndex(k));
        break;
      }
    }
  }
  return out;
}

int lowest_candidate_clock(const device::DeviceProfile& profile) {
  int best = 0;
  for (int c : profile.sm_clocks.mhz) {
    if (c >= kLowestCandidateFrac * profile.max_clock_mhz() && (best == 0 || c < best)) best = c;
  }
  return best;
}

StillFalling energy_still_falling(const PackModels& m) {
  // The counter's noise on a step energy (the fit assumes 0.5 %): a fall smaller than it shows nothing.
  constexpr double kNoise = 0.005;
  const int lowest_candidate = lowest_candidate_clock(m.profile);
  for (size_t r = 0; r < m.gpus.size(); ++r) {
    const GpuCorrection& c = m.gpus[r];
    std::vector<std::pair<int, double>> runs;  // (clock, measured step energy), ascending by clock
    for (size_t i = 0; i < c.clocks_mhz.size() && i < c.measured_j.size(); ++i) runs.emplace_back(c.clocks_mhz[i], c.measured_j[i]);
    std::sort(runs.begin(), runs.end());
    if (runs.size() < 2 || !(runs[0].second > 0) || !(runs[0].second < (1 - kNoise) * runs[1].second)) continue;
    if (lowest_candidate <= 0 || lowest_candidate >= runs[0].first) continue;
    return StillFalling{int(r), runs[0].first, runs[1].first, runs[0].second, runs[1].second, lowest_candidate};
  }
  return {};
}

WorstFit worst_energy_fit(const PackModels& m) {
  WorstFit w;
  for (size_t r = 0; r < m.gpus.size(); ++r) {
    const GpuCorrection& c = m.gpus[r];
    for (size_t i = 0; i < c.runs(); ++i) {
      if (!(c.measured_j[i] > 0)) continue;
      const double gap = c.gap_pct(i);
      if (w.gpu < 0 || std::abs(gap) > std::abs(w.gap_pct)) w = WorstFit{int(r), c.clocks_mhz[i], c.measured_j[i], c.predicted_j[i], gap};
    }
  }
  return w;
}

std::vector<std::string> fit_warnings(const Packing& p, const PackModels& m) {
  std::vector<std::string> out;
  if (const StillFalling sf = energy_still_falling(m); sf.profile_mhz > 0) {
    out.push_back(fmt::format(
        "GPU {}'s step energy still falls at the lowest profiled clock ({:.3f} J at {} MHz against {:.3f} J at {} MHz): "
        "its energy-optimal clock may lie lower, where the models extrapolate; record one more run at {} MHz "
        "(docs/profiling.md)",
        sf.gpu, sf.lowest_j, sf.lowest_mhz, sf.next_j, sf.next_mhz, sf.profile_mhz));
  }
  size_t failed = 0, with_ops = 0;
  for (size_t sg = 0; sg < p.signatures.size() && sg < m.signatures.size(); ++sg) {
    if (p.signatures[sg].ops == 0) continue;
    ++with_ops;
    failed += m.signatures[sg].fit_failed ? 1 : 0;
  }
  if (failed > 0) {
    int64_t busy = 0, busy_failed = 0;
    for (const Atom& at : p.atoms) {
      if (at.first > at.last) continue;
      busy += at.busy_ns;
      if (at.signature.index() < m.signatures.size() && m.signatures[at.signature.index()].fit_failed) busy_failed += at.busy_ns;
    }
    out.push_back(fmt::format("the time of {} of {} signatures ({:.1f} % of the step's GPU busy time) could not be fitted "
                              "from the profiled runs; their {} pack(s) are held at the default clock",
                              failed, with_ops, busy > 0 ? 100.0 * double(busy_failed) / double(busy) : 0.0,
                              packs_held_at_default(p, m).size()));
  }
  if (const WorstFit wf = worst_energy_fit(m); wf.gpu >= 0 && std::abs(wf.gap_pct) > kFitDoubtPct) {
    // Where the static and dynamic scales could not be fitted apart, say so: that is why the residuals
    // are large, and the least-squares pair says which way the model's power split is off.
    std::string why;
    if (const GpuCorrection& c = m.gpus[size_t(wf.gpu)]; c.common_scale) {
      why = c.ls_static != 0 || c.ls_dynamic != 0
                ? fmt::format("; its static and dynamic power could not be scaled apart (least squares gives static "
                              "×{:.2f}, dynamic ×{:.2f}, outside 0.5–2 and 0.3–3), so one scale ×{:.3f} stands for both",
                              c.ls_static, c.ls_dynamic, c.static_scale)
                : fmt::format("; its static and dynamic power could not be told apart from the runs, so one scale "
                              "×{:.3f} stands for both",
                              c.static_scale);
    }
    out.push_back(fmt::format(
        "the fitted models give GPU {}'s step energy at the profiled {} MHz {:+.1f} % off the measured ({:.3f} J "
        "against {:.3f} J, more than {:g} %){}: predicted energies and savings may be off by as much; `emo evaluate` "
        "or `emo run` measures them (the optimize JSON's energy_fit lists every GPU and clock)",
        wf.gpu, wf.clock_mhz, wf.gap_pct, wf.fitted_j, wf.measured_j, kFitDoubtPct, why));
  }
  return out;
}

namespace {

// The energy (J) two atoms that ran at once for `ns` do not draw at f: (1 − concurrent_share) of the
// smaller dynamic power of the two over that time (0 where either throttles).
double overlap_saving_j(const Packing& p, const PackModels& m, uint32_t first, uint32_t second, double ns, double f) {
  const SharedPower sp = shared_power(p, m, first, second, ns, f);
  if (sp.w_s <= 0) return 0;
  const graph::RankIndex gpu = p.atoms[first].rank;
  const GpuCorrection& gc = m.gpus[gpu.index()];
  return (1 - gc.concurrent_share) * sp.w_s *
         std::max(0.0, m.busy_power_w(sp.lesser, gpu, f) - gc.residual_at(f) * gc.static_scale * sp.parts.stat);
}

// The same over the overlaps pack k owns (its atoms' with later ones), at their measured time at f.
double pack_overlap_saving_j(const Packing& p, const PackModels& m, PackIndex k, double f) {
  const Pack& pk = p.packs[k.index()];
  double e = 0;
  auto it = std::lower_bound(m.overlaps.begin(), m.overlaps.end(), pk.first_atom,
                             [](const PackModels::Overlap& o, uint32_t a) { return o.first < a; });
  for (; it != m.overlaps.end() && it->first <= pk.last_atom; ++it) e += overlap_saving_j(p, m, it->first, it->second, m.overlap_ns(*it, f), f);
  return e;
}

}  // namespace

PackCost predict_pack(const Packing& p, const PackModels& m, PackIndex k, double f) {
  const Pack& pk = p.packs[k.index()];
  PackCost c;
  for (uint32_t a = pk.first_atom; a <= pk.last_atom; ++a) {
    const Atom& at = p.atoms[a];
    if (at.first > at.last) continue;
    const double ratio = m.time_ratio(at.signature, f);
    c.busy_ns += double(at.busy_ns) * ratio;
    c.energy_j += double(at.busy_ns) * 1e-9 * ratio * m.busy_power_w(at.signature, pk.rank, f);
  }
  // Negative where the pack's atoms overlap (a collective on one stream beside compute on another):
  // their busy powers then add up, less the idle power once over the overlap, as in the fit; and less
  // the share of the smaller dynamic power that two kernels at once do not draw (1 − concurrent_share),
  // over the overlaps this pack owns (its atoms' with later ones), as long as the runs measured them
  // around f (PackModels::overlap_ns).
  const int64_t idle_ns = (pk.end_ns - pk.begin_ns) - pk.busy_ns;
  c.energy_j += double(idle_ns) * 1e-9 * m.idle_power_w(pk.rank, f);
  c.energy_j -= pack_overlap_saving_j(p, m, k, f);
  return c;
}



namespace {
trace::RankTrace copy_trace(const trace::RankTrace& t) {
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
  return c;
}
}  // namespace

Status digest_run(const analysis::Workload& base, const Packing& packing, ProfiledRun& run) {
  const graph::Graph& g = base.graph;
  const size_t n_gpu = packing.gpus.size();
  const std::string where = fmt::format("profiling run at {} MHz", run.clock_mhz);
  if (run.traces.size() != n_gpu) {
    return make_error(where, fmt::format("has {} rank traces, the step {}", run.traces.size(), n_gpu));
  }
  auto w = analysis::assemble(std::move(run.traces), analysis::LoadOptions{});
  run.traces.clear();
  if (!w) return w.error();
  const graph::Graph& pg = w->graph;
  const ProfiledOps index(pg);
  for (size_t r = 0; r < n_gpu; ++r) {
    if (index.ops(uint32_t(r)) != packing.gpus[r].ops.size()) {
      return make_error(where, fmt::format("rank {} has {} GPU ops in its step, the base step {}", r,
                                           index.ops(uint32_t(r)), packing.gpus[r].ops.size()),
                        "profile the same step of the same program (same model, batch and parallelism)");
    }
  }
  ProfiledRun::Digest d;
  d.step_s = double(pg.measured_span_ns()) * 1e-9;  // a scan of the graph
  d.spans.resize(n_gpu);
  for (size_t r = 0; r < n_gpu; ++r) {
    const GpuOps& go = packing.gpus[r];
    d.spans[r].reserve(go.ops.size());
    for (size_t i = 0; i < go.ops.size(); ++i) {
      const auto* span = index.find(g, packing, graph::RankIndex(uint32_t(r)), uint32_t(i));
      if (span == nullptr) {
        const NodeId n = go.ops[i];
        return make_error(where, fmt::format("rank {}: op {} ('{}' on stream {}) is not in the profiled step", r, i,
                                             g.strings.view(g.name[n]), g.lanes[g.lane[n]].stream),
                          "profile the same step of the same program");
      }
      d.spans[r].push_back(*span);
    }
  }
  run.digest = std::move(d);
  return {};
}

// The fit's messages over the processes of a run (pack's tags are 31 to 33).
constexpr int kTagDigestStatus = 34, kTagFitStatus = 36, kTagFitSums = 37;

Status digest_run_part(const graph::GraphPart& base, const Packing& mine, const graph::GraphPart& profiled,
                       ProfiledRun& run, dist::Comm& comm) {
  const graph::Graph& g = base.graph;
  const graph::Graph& pg = profiled.graph;
  const size_t n_gpu = mine.gpus.size();
  const std::string where = fmt::format("profiling run at {} MHz", run.clock_mhz);
  ProfiledRun::Digest d;
  // This process's GPUs' spans; an error here is every process's (the first failing process's).
  const auto spans = [&]() -> Status {
    if (profiled.first_rank != base.first_rank || pg.num_ranks() != g.num_ranks())
      return make_error(where, "the run's part holds other ranks than the step's", "read it with the step's rank bounds");
    const ProfiledOps index(pg);
    d.spans.resize(n_gpu);
    for (size_t r = 0; r < n_gpu; ++r) {
      const GpuOps& go = mine.gpus[r];
      const size_t rank = base.first_rank + go.rank.index();
      if (index.ops(go.rank.value()) != go.ops.size()) {
        return make_error(where, fmt::format("rank {} has {} GPU ops in its step, the base step {}", rank,
                                             index.ops(go.rank.value()), go.ops.size()),
                          "profile the same step of the same program (same model, batch and parallelism)");
      }
      d.spans[r].reserve(go.ops.size());
      for (size_t i = 0; i < go.ops.size(); ++i) {
        const auto* span = index.find(g, mine, graph::RankIndex(uint32_t(r)), uint32_t(i));
        if (span == nullptr) {
          const NodeId n = go.ops[i];
          return make_error(where, fmt::format("rank {}: op {} ('{}' on stream {}) is not in the profiled step", rank, i,
                                               g.strings.view(g.name[n]), g.lanes[g.lane[n]].stream),
                            "profile the same step of the same program");
        }
        d.spans[r].push_back(*span);
      }
    }
    return {};
  };
  EMO_RETURN_IF_ERROR(dist::first_error(comm, kTagDigestStatus, spans()));
  // The run's step time: its measured span over every process's part, as one graph's measured_span_ns().
  const replay::Shard shard = replay::make_shard(profiled);
  std::vector<int64_t> measured(shard.num_points());
  for (NodeId n = 0; n < pg.num_nodes(); ++n) {
    measured[graph::start_point(n)] = pg.meas_start_ns[n];
    measured[graph::end_point(n)] = pg.meas_end_ns[n];
  }
  auto span = replay::span_distributed(shard, measured, comm);
  if (!span) return make_error(where, "its step's span: " + span.error().message());
  d.step_s = double((*span)[1] - (*span)[0]) * 1e-9;
  run.traces.clear();
  run.digest = std::move(d);
  return {};
}

namespace {

// Sums over every GPU of the step, where `packing` holds only some of them (a process's part): each
// process's integers added up, element by element, the same on every process; an Error on every process
// where any process's `mine` failed (the first one's). In one process: `mine` as it is.
using SumOverGpus = std::function<Result<std::vector<int64_t>>(const Status& mine, std::vector<int64_t> sums)>;

// fit_pack_models() of `packing`'s GPUs (the whole step's, or a process's own: PackingPart::mine), the
// signatures' times summed over every GPU by `sum_gpus`. `base` digests runs given with their traces (null:
// every run must come digested).
Result<PackModels> fit_models(const analysis::Workload* base, const Packing& packing, const std::vector<ProfiledRun>& runs,
                              const device::DeviceProfile& profile, const FitOptions& options, const SumOverGpus& sum_gpus) {
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
  // Per signature and run: the sum of its members' op durations (ns, then s). Whole nanoseconds, so that
  // the sum is the same whichever processes' GPUs are added first.
  std::vector<std::vector<int64_t>> sig_ns(n_sig, std::vector<int64_t>(runs.size(), 0));
  // Per signature, op position and run: the sum of that op's durations over the members (ns, then s).
  std::vector<std::vector<std::vector<int64_t>>> pos_ns(n_sig);
  for (size_t s = 0; s < n_sig; ++s)
    pos_ns[s].assign(packing.signatures[s].ops, std::vector<int64_t>(runs.size(), 0));
  // Per op of the base step: its position within its atom.
  std::vector<std::vector<uint32_t>> op_pos(n_gpu);
  for (size_t gi = 0; gi < n_gpu; ++gi) op_pos[gi].assign(packing.gpus[gi].ops.size(), 0);
  // Per GPU and run: measured step time and energy.
  std::vector<std::vector<double>> step_s(n_gpu, std::vector<double>(runs.size(), 0));
  std::vector<std::vector<double>> step_j(n_gpu, std::vector<double>(runs.size(), 0));
  // Per op of the base step: its atom's signature.
  std::vector<std::vector<SignatureIndex>> op_sig(n_gpu);
  for (size_t gi = 0; gi < n_gpu; ++gi) op_sig[gi].assign(packing.gpus[gi].ops.size(), SignatureIndex(0));
  for (const Atom& a : packing.atoms) {
    for (uint32_t i = a.first; i <= a.last && a.first <= a.last; ++i) {
      op_sig[a.rank.index()][i] = a.signature;
      op_pos[a.rank.index()][i] = i - a.first;
    }
  }

  // Per pair of atoms that ran at once: their overlap in each run.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<double>> run_overlaps;
  // What the runs give of this packing's GPUs; an error here is said by every process (`sum`).
  const auto read_runs = [&]() -> Status {
    for (size_t ri = 0; ri < runs.size(); ++ri) {
      const ProfiledRun& run = runs[ri];
      const std::string where = fmt::format("profiling run at {} MHz", run.clock_mhz);
      std::optional<ProfiledRun> digested;  // a run given with its traces: digested here, from a copy
      if (!run.digest) {
        if (base == nullptr) return make_error(where, "the run is not digested (pack::digest_run)");
        digested.emplace();
        digested->clock_mhz = run.clock_mhz;
        for (const auto& t : run.traces) digested->traces.push_back(copy_trace(t));
        EMO_RETURN_IF_ERROR(digest_run(*base, packing, *digested));
      }
      const ProfiledRun::Digest& dg = digested ? *digested->digest : *run.digest;
      if (dg.spans.size() != n_gpu) return make_error(where, fmt::format("has {} ranks, the step {}", dg.spans.size(), n_gpu));
      for (const AtomOverlap& ov : options.share_overlaps ? atom_overlaps(packing, dg.spans) : std::vector<AtomOverlap>{}) {
        std::vector<double>& v = run_overlaps[{ov.first, ov.second}];
        v.resize(runs.size(), 0.0);
        v[ri] = double(ov.ns);
      }
      // Sum member op durations per signature.
      for (size_t r = 0; r < n_gpu; ++r) {
        step_s[r][ri] = dg.step_s;
        const GpuOps& go = packing.gpus[r];
        if (dg.spans[r].size() != go.ops.size())
          return make_error(where, fmt::format("rank {} has {} GPU ops in its digest, the base step {}", r,
                                               dg.spans[r].size(), go.ops.size()));
        for (size_t i = 0; i < go.ops.size(); ++i) {
          const auto& span = dg.spans[r][i];
          // Matched collectives: the kernel's own span includes waiting for peers; use it as measured.
          const int64_t d = span.second - span.first;
          sig_ns[op_sig[r][i].index()][ri] += d;
          auto& pt = pos_ns[op_sig[r][i].index()];
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
    return {};
  };
  const Status read = read_runs();
  // The signatures' sums over every GPU of the step, in seconds.
  std::vector<int64_t> flat;
  for (size_t s = 0; s < n_sig && read.ok(); ++s) {
    flat.insert(flat.end(), sig_ns[s].begin(), sig_ns[s].end());
    for (const auto& v : pos_ns[s]) flat.insert(flat.end(), v.begin(), v.end());
  }
  const size_t expected = flat.size();
  auto summed = sum_gpus(read, std::move(flat));
  if (!summed) return summed.error();
  if (summed->size() != expected)
    return make_error("profiling", "the processes' profiled runs hold other signatures or clocks than this one's");
  std::vector<std::vector<double>> sig_time(n_sig, std::vector<double>(runs.size(), 0));
  std::vector<std::vector<std::vector<double>>> pos_time(n_sig);
  size_t at = 0;
  for (size_t s = 0; s < n_sig; ++s) {
    for (double& t : sig_time[s]) t = double((*summed)[at++]) * 1e-9;
    pos_time[s].assign(pos_ns[s].size(), std::vector<double>(runs.size(), 0));
    for (auto& v : pos_time[s])
      for (double& t : v) t = double((*summed)[at++]) * 1e-9;
  }

  // The overlaps by clock, ascending (the runs' order need not be); run_rank[run] = its place there.
  std::vector<size_t> run_rank(runs.size(), 0);
  {
    std::vector<size_t> order(runs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return runs[x].clock_mhz < runs[y].clock_mhz; });
    for (size_t i : order) m.overlap_clocks_mhz.push_back(double(runs[i].clock_mhz));
    for (size_t i = 0; i < order.size(); ++i) run_rank[order[i]] = i;
    for (auto& [ab, v] : run_overlaps) {
      v.resize(runs.size(), 0.0);
      PackModels::Overlap o{ab.first, ab.second, {}};
      for (size_t i : order) o.ns.push_back(v[i]);
      m.overlaps.push_back(std::move(o));
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
    auto tm = pts.size() < 2 ? Result<model::TimeModel>(make_error("fit", "fewer than 2 points"))
                             : model::fit_time_model(pts, profile);
    const double t_ref = tm ? tm->time_s(fmax) : 0.0;
    if (pts.empty()) continue;  // its ops took no time at any clock: nothing to scale
    if (!tm || !(t_ref > 0) || !std::isfinite(t_ref)) {
      // Its power at the default clock still counts: the prior's, for the time it took there.
      double t_top = 0;
      for (const model::Point& pt : pts) t_top = std::max(t_top, pt.time_s);
      sm.unit = model::prior_unit_model(profile, t_top, 0.5);
      sm.fit_failed = true;
      continue;
    }
    const bool comm = packing.signatures[s].bound == Boundness::kCommunication;
    // Throttled at the top clocks (not for collectives: their spans are waits, below).
    Throttle th;
    if (!comm && options.fit_throttle) {
      std::vector<model::Point> sorted = pts;
      std::sort(sorted.begin(), sorted.end(), [](const model::Point& x, const model::Point& y) { return x.clock_mhz < y.clock_mhz; });
      th = find_throttle(sorted, profile);
    }
    const model::TimeModel& tfit = th.mhz > 0 ? th.time : *tm;
    const double f_ref = th.mhz > 0 ? std::min(fmax, th.mhz) : fmax;
    const double t_at_ref = tfit.time_s(f_ref);
    const double share = tfit.compute_share(f_ref);
    sm.unit = model::prior_unit_model(profile, t_at_ref, share);
    sm.unit.time = tfit;
    // Collectives and send/recv: their spans include waiting for peers, which stretches as the peers
    // slow down, so a time fit reads them as compute-bound; their power is a communication kernel's.
    if (comm) {
      sm.unit.power.fixed_activity = model::kCommunicationActivity;
      sm.communication = true;
    }
    if (th.mhz > 0 && sm.unit.cap_w > 0) {
      // It draws the limit at its throttle clock: that sets its SM power (the prior's activity does not).
      model::PowerModel unit_sm = sm.unit.power;
      unit_sm.const_w = 0;
      unit_sm.mem_w = 0;
      unit_sm.dynamic_w = 1;
      const double per_w = unit_sm.power_w(th.mhz, sm.unit.time);
      const double rest = sm.unit.power.const_w + sm.unit.power.memory_w(th.mhz, sm.unit.time);
      if (per_w > 0 && sm.unit.cap_w > rest) {
        sm.unit.power.dynamic_w = (sm.unit.cap_w - rest) / per_w;
        sm.unit.throttle_mhz = th.mhz;
      }
    }
    sm.ref_time_s = sm.unit.throttle_mhz > 0 ? t_at_ref : tfit.time_s(fmax);
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

  // ---- per-GPU correction from the measured step energies ----
  // E = a·(S + I) + b·D per run: S the busy static energy, I the idle energy, D the dynamic energy, all
  // as the fitted signature models predict them. The SM part of D (and the idle clock tree) goes as
  // V(f)², and the voltage floor differs from GPU to GPU (the profile gives one value; the A100 fits on
  // two models' profiles differ by 3 %): below the voltage knee D shrinks with the floor², at f_max it
  // does not, so the runs below the knee against the one above it show this GPU's floor — a third
  // parameter next to (a, b). The knee (a fourth) shows only from a run between it and f_max, where V
  // rises: the default plan has one (plan_clocks); without it the knee stays the profile's.
  // Fit: (a, b) by least squares for each floor scale 1 + δ and knee scale 1 + κ, (δ, κ) by the smallest
  // relative residual plus priors (σ kFloorPriorSd around the profile's floor, at most ±kFloorMaxDev;
  // σ kKneePriorSd around its knee, at most ±kKneeMaxDev), against an assumed accuracy of the measured
  // step energies (kEnergySd) — with as many runs as parameters they would otherwise fit them exactly,
  // noise included; with 2 runs δ stays 0.
  constexpr double kEnergySd = 0.005, kFloorPriorSd = 0.025, kFloorMaxDev = 0.08;
  constexpr double kKneeMaxDev = 0.08;
  // A knee the profile marks assumed (no measured sweep behind it: H100, H200) may be far off — the
  // sensitivity table moves it ±20 % — and where it is lower, the energy keeps falling below the
  // assumed knee: σ 7 %, down to 0.75×, fitted only where the runs outnumber (a, b, floor) so they
  // can tell it. A fitted knee (A100, V100, A40): σ 2.5 %, ±8 %.
  const bool knee_assumed = profile.voltage.knee_mhz.source.rfind("assumed", 0) == 0;
  const double kKneePriorSd = knee_assumed ? 0.07 : 0.025;
  const double knee_lo_scale = knee_assumed ? 0.75 : 1 - kKneeMaxDev;
  // The power a throttled signature draws, relative to the modelled limit (model::prior_unit_model's
  // cap: 98 % of the profile's): σ 2 %, at most ±6 %.
  constexpr double kLimitPriorSd = 0.02, kLimitMaxDev = 0.06;
  // The concurrent share (model::kConcurrentShare, assumed): σ 0.25, within [0, 1].
  constexpr double kSharePriorSd = 0.25;
  m.gpus.resize(n_gpu);
  // The overlaps of each GPU (PackModels::overlaps is by first atom, and a GPU's atoms are contiguous).
  std::vector<std::vector<const PackModels::Overlap*>> gpu_overlaps(n_gpu);
  for (const PackModels::Overlap& o : m.overlaps) gpu_overlaps[packing.atoms[o.first].rank.index()].push_back(&o);
  const double floor0 = profile.voltage.floor_rel.value;
  for (size_t r = 0; r < n_gpu; ++r) {
    // Per run: static S, dynamic parts that do not scale with V (memory; unsplit or capped signatures)
    // and that do (SM, at the profile's V), and the idle time.
    // At the limit: energy of throttled signatures at or above their throttle clock (the limit, whatever
    // this GPU's scales); `cal`: their SM energy below it, with the clock they throttle at.
    struct RunParts {
      double f = 0, S = 0, d_fix = 0, d_sm = 0, idle_s = 0, E = 0, at_limit = 0;
      double o_fix = 0, o_sm = 0;  // the smaller dynamic energy of atoms that ran at once, its parts
      std::vector<std::pair<double, double>> cal;
    };
    std::vector<RunParts> parts(runs.size());
    for (size_t ri = 0; ri < runs.size(); ++ri) {
      RunParts& rp = parts[ri];
      rp.f = runs[ri].clock_mhz;
      double busy = 0;
      for (const Atom& a : packing.atoms) {
        if (a.rank.index() != r || a.first > a.last) continue;
        const SignatureModel& sm = m.signatures[a.signature.index()];
        const double t = double(a.busy_ns) * 1e-9 * m.time_ratio(a.signature, rp.f);
        const PowerParts p = power_parts(sm, rp.f);
        rp.S += t * p.stat;
        if (p.at_limit) {
          rp.at_limit += t * p.total;
        } else if (p.split && p.throttle_mhz > 0) {
          rp.d_fix += t * p.mem;
          rp.cal.emplace_back(t * p.sm, p.throttle_mhz);
        } else if (p.split) {  // not capped: the clock in effect is f
          rp.d_fix += t * p.mem;
          rp.d_sm += t * p.sm;
        } else {
          rp.d_fix += t * std::max(0.0, p.total - p.stat);
        }
        busy += t;
      }
      // Atoms that overlap (a collective beside compute on another stream) are busy in both: their
      // powers add, and the idle power is taken off once over the overlap (so idle_s may be negative),
      // and the share of the smaller dynamic power two kernels at once do not draw, over the overlap as
      // this run measured it (predict_pack).
      for (const PackModels::Overlap* o : gpu_overlaps[r]) {
        const SharedPower sp = shared_power(packing, m, o->first, o->second, o->ns[run_rank[ri]], rp.f);
        if (sp.w_s <= 0) continue;
        if (sp.parts.split) {
          rp.o_fix += sp.w_s * sp.parts.mem;
          rp.o_sm += sp.w_s * sp.parts.sm;
        } else {
          rp.o_fix += sp.w_s * std::max(0.0, sp.parts.total - sp.parts.stat);
        }
      }
      rp.idle_s = step_s[r][ri] - busy;
      rp.E = step_j[r][ri];
    }
    // For a floor scale: the (a, b) fit, its predictions and the objective.
    struct Solution {
      double a = 1, b = 1, c = 1, scale = 1, knee = 1, share = model::kConcurrentShare, objective = 0;
      double ls_a = 0, ls_b = 0;  // the least-squares pair, also where it was refused
      bool ok = false;
      std::vector<double> x, d, fixed;  // per run: S + I, D and the energy not scaled, at this floor
    };
    double share = model::kConcurrentShare;  // of the smaller dynamic power where atoms ran at once
    auto solve = [&](double scale, double knee) {
      Solution so;
      so.scale = scale;
      so.knee = knee;
      so.share = share;
      GpuCorrection probe;
      probe.floor_scale = scale;
      probe.knee_scale = knee;
      m.gpus[r] = probe;  // static_scale 1: idle_power_w gives the profile's idle power at this floor
      bool any_fixed = false;
      for (const RunParts& rp : parts) {
        const double v0 = profile.voltage_rel(rp.f), v = m.voltage_rel(graph::RankIndex(uint32_t(r)), rp.f);
        const double k = v0 > 0 ? (v * v) / (v0 * v0) : 1.0;
        const double x = rp.S + rp.idle_s * m.idle_power_w(graph::RankIndex(uint32_t(r)), rp.f);
        const double d = (rp.d_fix - (1 - share) * rp.o_fix) + k * (rp.d_sm - (1 - share) * rp.o_sm);
        double fixed = rp.at_limit;
        for (const auto& [e, thr] : rp.cal)
          fixed += e * m.voltage_gain(graph::RankIndex(uint32_t(r)), rp.f) / m.voltage_gain(graph::RankIndex(uint32_t(r)), thr);
        so.x.push_back(x);
        so.d.push_back(d);
        so.fixed.push_back(fixed);
        any_fixed = any_fixed || fixed > 0;
      }
      // For a scale c of the power at the limit: (a, b) by least squares on what the rest leaves.
      auto fit_ab = [&](Solution& t, double c) {
        t.c = c;
        t.ok = false;
        t.ls_a = t.ls_b = 0;
        double sxx = 0, sxd = 0, sdd = 0, sxe = 0, sde = 0;
        for (size_t i = 0; i < parts.size(); ++i) {
          const double x = t.x[i], d = t.d[i], y = parts[i].E - c * t.fixed[i];
          sxx += x * x;
          sxd += x * d;
          sdd += d * d;
          sxe += x * y;
          sde += d * y;
        }
        const double det = sxx * sdd - sxd * sxd;
        if (std::abs(det) > 1e-12 * sxx * sdd && det != 0) {
          t.a = (sxe * sdd - sde * sxd) / det;
          t.b = (sxx * sde - sxd * sxe) / det;
          t.ls_a = t.a;
          t.ls_b = t.b;
          t.ok = t.a > 0.5 && t.a < 2.0 && t.b > 0.3 && t.b < 3.0;
        }
        if (!t.ok) {  // ill-conditioned: one common scale instead
          double num = 0, den = 0;
          for (size_t i = 0; i < parts.size(); ++i) {
            num += (t.x[i] + t.d[i]) * (parts[i].E - c * t.fixed[i]);
            den += (t.x[i] + t.d[i]) * (t.x[i] + t.d[i]);
          }
          t.a = t.b = den > 0 ? num / den : 1.0;
        }
        double rss = 0;
        for (size_t i = 0; i < parts.size(); ++i) {
          if (parts[i].E <= 0) continue;
          const double e = (t.a * t.x[i] + t.b * t.d[i] + c * t.fixed[i]) / parts[i].E - 1;
          rss += e * e;
        }
        const double dev = scale - 1, kdev = knee - 1, cdev = c - 1, sdev = share - model::kConcurrentShare;
        t.objective = rss / (kEnergySd * kEnergySd) + (dev * dev) / (kFloorPriorSd * kFloorPriorSd) +
                      (kdev * kdev) / (kKneePriorSd * kKneePriorSd) + (cdev * cdev) / (kLimitPriorSd * kLimitPriorSd) +
                      (sdev * sdev) / (kSharePriorSd * kSharePriorSd);
      };
      fit_ab(so, 1.0);
      if (!any_fixed) return so;
      // The level a throttling GPU holds its power at differs from board to board: a grid, then a finer one.
      Solution best_c = so;
      double centre = 1.0;
      for (double step : {0.0025, 0.0002}) {
        const double lo = step > 0.001 ? 1 - kLimitMaxDev : centre - 12 * step;
        const int n = step > 0.001 ? int(std::lround(2 * kLimitMaxDev / step)) : 24;
        for (int i = 0; i <= n; ++i) {
          Solution t = so;
          fit_ab(t, std::clamp(lo + i * step, 1 - kLimitMaxDev, 1 + kLimitMaxDev));
          if ((t.ok || !best_c.ok) && (t.objective < best_c.objective || (t.ok && !best_c.ok))) best_c = std::move(t);
        }
        centre = best_c.c;
      }
      return best_c;
    };
    // The concurrent share, where atoms ran at once: the overlap grows as the clock falls (compute
    // stretches into a collective's wait), so the runs tell the share apart from the dynamic scale. A
    // grid at the voltage in force (the profile's, then the fitted one), the solution in bounds first.
    bool overlapped = false;
    for (const RunParts& rp : parts) overlapped = overlapped || rp.o_fix + rp.o_sm > 0;
    auto fit_share = [&](Solution& best_so, double lo, double hi, double step) {
      if (!overlapped) return;
      for (double sh = lo; sh <= hi + 1e-9; sh += step) {
        share = std::clamp(sh, 0.0, 1.0);
        Solution t = solve(best_so.scale, best_so.knee);
        if ((t.ok || !best_so.ok) && (t.objective < best_so.objective || (t.ok && !best_so.ok))) best_so = std::move(t);
      }
      share = best_so.share;
    };
    Solution best = solve(1.0, 1.0);
    fit_share(best, 0.0, 1.0, 0.05);
    const double max_scale = floor0 > 0 ? std::min(1 + kFloorMaxDev, 1.0 / floor0) : 1.0;
    // The floor shows only against a run above the knee whose dynamic power is mostly the V²-scaled
    // SM part; where that run is at the power limit (A100 at 1410 MHz) its power says nothing of V.
    bool floor_seen = false;
    for (const RunParts& rp : parts) {
      if (rp.f > profile.voltage.knee_mhz.value && rp.d_sm >= 0.5 * (rp.d_sm + rp.d_fix) && rp.d_sm > 0)
        floor_seen = true;
    }
    // The knee shows only against a run strictly between it and f_max (where V rises): for a fitted
    // knee, a run above its whole range; for an assumed one, a run above its lowest and more runs than
    // (a, b, floor) — with as many, any knee in the range fits them.
    const double knee0 = profile.voltage.knee_mhz.value;
    bool knee_seen = false;
    const double knee_run_min = knee_assumed ? knee0 * knee_lo_scale : knee0 * (1 + kKneeMaxDev);
    for (const RunParts& rp : parts) {
      if (options.fit_voltage_knee && rp.f > knee_run_min && rp.f < fmax && rp.d_sm >= 0.5 * (rp.d_sm + rp.d_fix) &&
          (!knee_assumed || parts.size() >= 4))
        knee_seen = true;
    }
    if (options.fit_voltage_floor && best.ok && floor_seen && floor0 > 0 && floor0 < 1) {
      // The objective is smooth in the scales with one minimum in practice: a grid, then finer ones.
      double step = 0.002, centre = 1.0, kstep = knee_assumed ? 0.01 : 0.005, kcentre = 1.0;
      for (int pass = 0; pass < 3; ++pass, step /= 20, kstep /= 10) {
        const double lo = pass == 0 ? 1 - kFloorMaxDev : centre - 20 * step;
        const int n = pass == 0 ? int(std::lround((max_scale - lo) / step)) : 40;
        const double klo = pass == 0 ? knee_lo_scale : kcentre - 10 * kstep;
        const int kn = !knee_seen ? 0 : pass == 0 ? int(std::lround((1 + kKneeMaxDev - knee_lo_scale) / kstep)) : 20;
        for (int j = 0; j <= kn; ++j) {
          const double kc = knee_seen ? std::clamp(klo + j * kstep, knee_lo_scale, 1 + kKneeMaxDev) : 1.0;
          for (int i = 0; i <= n; ++i) {
            const double sc = std::clamp(lo + i * step, 1 - kFloorMaxDev, max_scale);
            Solution so = solve(sc, kc);
            if (so.ok && so.objective < best.objective) best = std::move(so);
          }
        }
        centre = best.scale;
        kcentre = best.knee;
      }
    }
    fit_share(best, best.share - 0.05, best.share + 0.05, 0.005);
    GpuCorrection& c = m.gpus[r];
    c = GpuCorrection{};
    c.static_scale = best.a;
    c.dynamic_scale = best.b;
    c.floor_scale = best.scale;
    c.knee_scale = best.knee;
    c.limit_scale = best.c;
    c.concurrent_share = best.share;
    c.common_scale = !best.ok;
    if (!best.ok) {
      c.ls_static = best.ls_a;
      c.ls_dynamic = best.ls_b;
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      c.clocks_mhz.push_back(runs[i].clock_mhz);
      c.measured_j.push_back(parts[i].E);
      c.predicted_j.push_back(best.a * best.x[i] + best.b * best.d[i] + best.c * best.fixed[i]);
    }
    // Anchor the powers at the profiled clocks: one ratio per clock (the mean where a clock was run
    // twice), within [0.5, 2] (a fit farther off than that is warned about, not trusted to be bent).
    std::map<int, std::pair<double, int>> by_clock;
    for (size_t i = 0; i < c.runs(); ++i) {
      if (!(c.measured_j[i] > 0 && c.predicted_j[i] > 0)) continue;
      auto& [sum, n] = by_clock[c.clocks_mhz[i]];
      sum += std::clamp(c.measured_j[i] / c.predicted_j[i], 0.5, 2.0);
      ++n;
    }
    for (const auto& [clock, sn] : by_clock) c.residual.emplace_back(double(clock), sn.first / sn.second);
  }
  return m;
}

}  // namespace

Result<PackModels> fit_pack_models(const analysis::Workload& base, const Packing& packing,
                                   const std::vector<ProfiledRun>& runs, const device::DeviceProfile& profile,
                                   const FitOptions& options) {
  return fit_models(&base, packing, runs, profile, options,
                    [](const Status& mine, std::vector<int64_t> sums) -> Result<std::vector<int64_t>> {
                      if (!mine.ok()) return mine.error();
                      return sums;
                    });
}

Result<PackModels> fit_pack_models_part(const Packing& mine, const std::vector<ProfiledRun>& runs,
                                        const device::DeviceProfile& profile, dist::Comm& comm,
                                        const FitOptions& options) {
  return fit_models(nullptr, mine, runs, profile, options,
                    [&](const Status& st, std::vector<int64_t> sums) -> Result<std::vector<int64_t>> {
                      EMO_RETURN_IF_ERROR(dist::first_error(comm, kTagFitStatus, st));
                      auto all = dist::all_combine(comm, kTagFitSums, sums, [](const std::vector<std::vector<int64_t>>& parts) {
                        std::vector<int64_t> out = parts.empty() ? std::vector<int64_t>{} : parts[0];
                        for (size_t q = 1; q < parts.size(); ++q) {
                          if (parts[q].size() != out.size()) return std::vector<int64_t>{};  // said below
                          for (size_t i = 0; i < out.size(); ++i) out[i] += parts[q][i];
                        }
                        return out;
                      });
                      if (!all) return make_error("", "the profiled runs' sums: " + all.error().message());
                      return std::move(*all);
                    });
}

}  // namespace emo::pack
