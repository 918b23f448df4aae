// One frontier point's plan as each stage runs it: choosing the point for an iteration-time limit,
// the per-stage schedule, and the files a runtime reads (Perseus' frequency file, a CSV table).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "emo/pipeline/pipeline.h"

namespace emo::pipeline {

size_t fill_slack(const PipelineModel& model, const PipelineDag& dag, Plan& plan, int64_t deadline_units) {
  const size_t n = dag.num_nodes();
  std::vector<int64_t> earliest(n, 0), latest_start(n, 0);
  for (size_t v = 0; v < n; ++v) {  // ids are topological
    for (uint32_t k = dag.pred_begin[v]; k < dag.pred_begin[v + 1]; ++k) {
      const uint32_t u = dag.preds[k];
      earliest[v] = std::max(earliest[v], earliest[u] + plan.units[u]);
    }
  }
  // A node's predecessors are placed after it, each ending by its latest start, which is at least its
  // earliest start: so each keeps at least the room it had.
  size_t changed = 0;
  for (size_t v = n; v-- > 0;) {
    int64_t latest_finish = deadline_units;
    for (uint32_t k = dag.succ_begin[v]; k < dag.succ_begin[v + 1]; ++k)
      latest_finish = std::min(latest_finish, latest_start[dag.succs[k]]);
    const InstructionModel& im = model.at(dag.nodes[v].stage, dag.nodes[v].instruction);
    const int64_t room = latest_finish - earliest[v];
    // Candidates are slowest first: skip those that do not fit (by halves), then take the slowest
    // that fits and costs less.
    const auto& cands = im.candidates;
    const auto first_fit = std::partition_point(cands.begin(), cands.begin() + plan.candidate[v],
                                                [&](const Candidate& c) { return c.units > room; });
    double now = std::numeric_limits<double>::quiet_NaN();  // its cost, once a slower clock fits
    for (uint32_t c = uint32_t(first_fit - cands.begin()); c < plan.candidate[v]; ++c) {
      const Candidate& cand = cands[c];
      if (cand.units <= plan.units[v]) break;
      if (std::isnan(now)) now = im.cost(double(plan.units[v]));
      if (im.cost(double(cand.units)) < now) {
        plan.candidate[v] = c;
        plan.units[v] = cand.units;
        ++changed;
        break;
      }
    }
    latest_start[v] = latest_finish - plan.units[v];
  }
  return changed;
}

Result<size_t> point_within(const Frontier& frontier, double unit_s, double max_time_s) {
  if (!(max_time_s > 0) || !std::isfinite(max_time_s) || !(unit_s > 0))
    return make_error("", "the time limit must be a positive number of seconds");
  const auto& pts = frontier.points;
  if (pts.empty()) return make_error("", "the frontier has no points");
  const double limit = std::floor(max_time_s / unit_s + 1e-9);
  // Points are time ascending and energy descending: the last one within the limit uses the least.
  auto after = std::upper_bound(pts.begin(), pts.end(), limit,
                                [](double l, const FrontierPoint& p) { return l < double(p.time_units); });
  if (after == pts.begin())
    return make_error("", fmt::format("no plan finishes within {:g} s", max_time_s),
                      fmt::format("the fastest plan takes {:g} s", pts.front().time_s));
  return size_t(after - pts.begin()) - 1;
}

std::vector<std::vector<ScheduledInstruction>> stage_schedule(const PipelineModel& model,
                                                              const PipelineDag& dag, const Plan& plan) {
  std::vector<int64_t> start(dag.num_nodes(), 0);
  for (size_t v = 0; v < dag.num_nodes(); ++v) {  // ids are topological
    for (uint32_t k = dag.pred_begin[v]; k < dag.pred_begin[v + 1]; ++k) {
      uint32_t u = dag.preds[k];
      start[v] = std::max(start[v], start[u] + plan.units[u]);
    }
  }
  std::vector<std::vector<ScheduledInstruction>> out(dag.program.size());
  for (size_t s = 0; s < dag.program.size(); ++s) {
    for (uint32_t v : dag.program[s]) {
      const NodeInfo& nd = dag.nodes[v];
      const Candidate& c = model.at(nd.stage, nd.instruction).candidates[plan.candidate[v]];
      out[s].push_back(ScheduledInstruction{v, nd.instruction, nd.microbatch, c.clock_mhz, plan.units[v],
                                            start[v], c.time_s, c.energy_j});
    }
  }
  return out;
}

std::string perseus_frequency_file(const std::vector<std::vector<ScheduledInstruction>>& schedule,
                                   const std::vector<std::string>& comments) {
  std::string out = "[\n";
  for (const auto& stage : schedule) {
    out += '[';
    for (size_t i = 0; i < stage.size(); ++i)
      out += fmt::format("{}(\"{}\", {})", i ? ", " : "", instruction_name(stage[i].instruction),
                         stage[i].clock_mhz);
    out += "],\n";
  }
  out += "]\n";
  for (const auto& c : comments) out += "# " + c + "\n";
  return out;
}

std::string schedule_csv(const std::vector<std::vector<ScheduledInstruction>>& schedule, double unit_s) {
  std::string out =
      "stage,order,instruction,microbatch,frequency_mhz,units,start_s,end_s,clock_time_s,clock_energy_j\n";
  for (size_t s = 0; s < schedule.size(); ++s) {
    for (size_t i = 0; i < schedule[s].size(); ++i) {
      const ScheduledInstruction& x = schedule[s][i];
      out += fmt::format("{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g}\n", s, i, instruction_name(x.instruction),
                         x.microbatch, x.clock_mhz, x.units, double(x.start_units) * unit_s,
                         double(x.start_units + x.units) * unit_s, x.clock_time_s, x.clock_energy_j);
    }
  }
  return out;
}

}  // namespace emo::pipeline
