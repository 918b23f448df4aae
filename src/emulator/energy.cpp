// Power integration of one emulated GPU over a run: a sweep over op starts/ends and clock changes,
// with constant power between consecutive events.
#include <algorithm>

#include "emulator_detail.h"

namespace emo::emulator::detail {

double EnergyIntegral::at(int64_t when) const {
  if (t.empty()) return 0;
  if (when <= t.front()) return e_j.front();
  if (when >= t.back()) return e_j.back();
  const size_t i = size_t(std::upper_bound(t.begin(), t.end(), when) - t.begin()) - 1;
  const double span = double(t[i + 1] - t[i]);
  return e_j[i] + (e_j[i + 1] - e_j[i]) * (span > 0 ? double(when - t[i]) / span : 0.0);
}

EnergyIntegral integrate_energy(const TruthMemo& truths, std::vector<OpSpan> ops, const std::vector<int64_t>& clock_t,
                                const std::vector<double>& clock_f, int64_t end) {
  // Events: +op at begin, -op at end, clock change at its effect time.
  struct Ev { int64_t t; int type; uint32_t idx; };  // type 0 = end, 1 = clock, 2 = start
  std::vector<Ev> ev;
  ev.reserve(ops.size() * 2 + clock_t.size());
  for (uint32_t i = 0; i < ops.size(); ++i) {
    ev.push_back({ops[i].begin, 2, i});
    ev.push_back({ops[i].end(), 0, i});
  }
  for (uint32_t i = 1; i < clock_t.size(); ++i) ev.push_back({clock_t[i], 1, i});
  // Clock changes that land at the same time (a later one clamped behind an earlier one) keep their
  // order: the last is the clock in effect, as the time integration has it.
  std::sort(ev.begin(), ev.end(), [](const Ev& a, const Ev& b) {
    if (a.t != b.t) return a.t < b.t;
    if (a.type != b.type) return a.type < b.type;
    return a.idx < b.idx;
  });

  const GpuTruth& gpu = truths.gpu();
  EnergyIntegral out;
  double f = clock_f.front();
  for (size_t i = 1; i < clock_t.size() && clock_t[i] <= 0; ++i) f = clock_f[i];
  std::vector<uint32_t> running;  // op indices
  double power = gpu.idle_power_w(f);
  auto recompute = [&] {
    if (running.empty()) {
      power = gpu.idle_power_w(f);
      return;
    }
    double sum = 0, mx = 0;
    for (uint32_t o : running) {
      const double d = truths.dynamic_part_w(ops[o].truth, f);
      sum += d;
      mx = std::max(mx, d);
    }
    const double stat = truths.power_w(ops[running.front()].truth, f) - truths.dynamic_part_w(ops[running.front()].truth, f);
    power = std::min(gpu.tdp_w, stat + mx + 0.25 * (sum - mx));
  };
  int64_t now = 0;
  double e = 0;
  int64_t busy_since = -1;
  out.t.reserve(ev.size() + 1);
  out.e_j.reserve(ev.size() + 1);
  out.t.push_back(0);
  out.e_j.push_back(0);
  for (const Ev& x : ev) {
    const int64_t at = std::clamp<int64_t>(x.t, 0, end);
    if (at > now) {
      e += power * double(at - now) * 1e-9;
      now = at;
      out.t.push_back(now);
      out.e_j.push_back(e);
    }
    if (x.type == 2) {
      if (running.empty()) busy_since = at;
      running.push_back(x.idx);
    } else if (x.type == 0) {
      auto it = std::find(running.begin(), running.end(), x.idx);
      if (it != running.end()) running.erase(it);
      if (running.empty() && busy_since >= 0) out.busy_ns += at - busy_since;
    } else {
      f = clock_f[x.idx];
    }
    recompute();
  }
  if (end > now) {
    e += power * double(end - now) * 1e-9;
    out.t.push_back(end);
    out.e_j.push_back(e);
  }
  out.total_j = e;
  return out;
}

}  // namespace emo::emulator::detail
