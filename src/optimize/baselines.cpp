// The baselines, from the same models and verified by the same replay as the policy: the best static
// clock, slack-only lowering (EnvPipe's idea) and per-phase clocks.
#include <algorithm>

#include "emo/dist/dist.h"
#include "emo/model/kernel_names.h"
#include "emo/optimize/optimize.h"
#include "internal.h"

namespace emo::optimize::detail {

namespace {

// The candidate clock of least energy for each pack (index into x.clocks; the lowest such on a tie).
std::vector<size_t> lowest_energy_clocks(const Search& c) {
  std::vector<size_t> idx(c.P);
  for (uint32_t k = 0; k < c.P; ++k) {
    std::vector<double> e;
    for (int f : c.x.clocks) e.push_back(pack_cost(c.pr, c.x, k, f).second);
    idx[k] = size_t(std::min_element(e.begin(), e.end()) - e.begin());
  }
  return idx;
}

// The baselines' messages over the parts: whether any process raised a pack, which phases any has.
constexpr int kTagRaised = 51, kTagPhases = 52;

// One step of slack-only raising: the packs with a critical op (slack ≤ 1 µs in the plan's replay, `sl`
// per node of the problem's graph) one clock up; where none can go up (on any process), every pack.
void raise_critical(Search& c, const std::vector<int64_t>& sl, std::vector<size_t>& idx) {
  const pack::Packing& p = *c.pr.packing;
  const size_t top = c.x.clocks.size() - 1;
  std::vector<char> crit(c.P, 0);
  for (size_t gi = 0; gi < p.gpus.size(); ++gi) {
    for (size_t i = 0; i < p.gpus[gi].ops.size(); ++i) {
      if (sl[p.gpus[gi].ops[i]] <= 1000) crit[c.x.op_pack[gi][i]] = 1;
    }
  }
  bool raised = false;
  for (uint32_t k = 0; k < c.P; ++k) {
    if (crit[k] && idx[k] < top) {
      ++idx[k];
      raised = true;
    }
  }
  if (!c.any_process(raised, kTagRaised)) {  // nothing critical left to raise: raise everything
    for (uint32_t k = 0; k < c.P; ++k) idx[k] = std::min(top, idx[k] + 1);
  }
}

// Each pack's phase: the phase of most of its ops' default time (the first such on a tie).
std::vector<int> pack_phases(const Search& c) {
  const graph::Graph& g = *c.graph;
  const pack::Packing& p = *c.pr.packing;
  std::vector<int> phase(c.P, 0);
  for (uint32_t k = 0; k < c.P; ++k) {
    double w[model::kPhases] = {0, 0, 0, 0};
    const pack::Pack& pk = p.packs[k];
    const auto& ops = p.gpus[pk.rank.index()].ops;
    for (uint32_t i = pk.first_op; i <= pk.last_op && pk.first_op <= pk.last_op; ++i) {
      const model::Phase ph = model::classify_kernel_name(g.strings.view(g.name[ops[i]])).phase;
      w[static_cast<int>(ph)] += double(g.dur_ns[ops[i]]);
    }
    phase[k] = int(std::max_element(w, w + model::kPhases) - w);
  }
  return phase;
}

}  // namespace

// Best single static clock for the whole step.
Plan static_clock_baseline(Search& c) {
  Plan stat = c.s.default_plan;
  stat.name = "static_clock";
  std::vector<std::vector<int>> trials;
  for (int f : c.x.clocks) trials.emplace_back(c.P, f);
  for (Plan& pl : c.check_all(trials, "static_clock")) {
    if (pl.feasible && pl.energy_j < stat.energy_j) stat = std::move(pl);
  }
  return stat;
}

// Slack-only lowering (EnvPipe's idea): each pack at its lowest-energy clock, then raise the clocks of
// packs on the critical path one step at a time until the target holds.
Plan slack_only_baseline(Search& c) {
  std::vector<size_t> idx = lowest_energy_clocks(c);
  Plan pl;
  for (size_t it = 0; it <= c.x.clocks.size() + 1 && c.failed.ok(); ++it) {
    std::vector<int> clocks(c.P);
    for (uint32_t k = 0; k < c.P; ++k) clocks[k] = c.x.clocks[idx[k]];
    std::vector<int64_t> dur, sl;
    if (c.pricer == nullptr) {
      replay::Timeline tl;
      pl = c.check(predict_prepared(c.pr, c.x, clocks, "slack_only", &tl, &dur));
      if (pl.feasible) break;
      replay::Replayer(c.pr.workload->graph).slack(dur, tl, sl);
    } else {  // over the parts: the replay and its slack shared
      replay::ShardTimeline tl;
      auto priced = c.pricer->price(clocks, "slack_only", &tl, &dur);
      if (!priced) {
        c.failed = priced.error();
        break;
      }
      pl = c.check(std::move(*priced));
      if (pl.feasible) break;
      if (Status st = replay::slack_distributed(c.pricer->shard(), dur, tl, c.pricer->comm(), sl); !st.ok()) {
        c.failed = st;
        break;
      }
    }
    raise_critical(c, sl, idx);
  }
  if (!pl.feasible) pl = c.s.default_plan, pl.name = "slack_only";
  return pl;
}

// Per-phase clocks: forward / backward / optimizer / communication (model::Phase), by coordinate
// descent over up to 16 clocks of each phase present, two passes.
Plan per_phase_baseline(Search& c) {
  const std::vector<int> phase = pack_phases(c);
  int phase_clock[model::kPhases];
  std::fill(phase_clock, phase_clock + model::kPhases, c.pr.default_clock_mhz);
  auto build = [&](const int* pc) {
    std::vector<int> clocks(c.P);
    for (uint32_t k = 0; k < c.P; ++k) clocks[k] = pc[phase[k]];
    return clocks;
  };
  Plan bestp = c.s.default_plan;
  bestp.name = "per_phase";
  const size_t C = c.x.clocks.size();
  // The phases any process's packs are of (every process tries the same phases).
  std::vector<char> present(model::kPhases, 0);
  for (int ph = 0; ph < model::kPhases; ++ph)
    present[size_t(ph)] = c.any_process(std::find(phase.begin(), phase.end(), ph) != phase.end(), kTagPhases);
  for (int pass = 0; pass < 2; ++pass) {
    for (int ph = 0; ph < model::kPhases; ++ph) {
      if (!present[size_t(ph)]) continue;
      // The trials of one phase differ only in that phase's clock: replay them together.
      std::vector<int> tried;
      std::vector<std::vector<int>> trials;
      for (size_t ci = 0; ci < C; ci += std::max<size_t>(1, C / 16)) {
        int trial[model::kPhases];
        std::copy(phase_clock, phase_clock + model::kPhases, trial);
        trial[ph] = c.x.clocks[ci];
        tried.push_back(trial[ph]);
        trials.push_back(build(trial));
      }
      std::vector<Plan> plans = c.check_all(trials, "per_phase");
      for (size_t j = 0; j < plans.size(); ++j) {
        if (plans[j].feasible && plans[j].energy_j < bestp.energy_j) {
          bestp = std::move(plans[j]);
          phase_clock[ph] = tried[j];
        }
      }
    }
  }
  return bestp;
}

}  // namespace emo::optimize::detail
