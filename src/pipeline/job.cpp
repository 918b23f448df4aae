// One `emo pipeline` job (include/emo/pipeline/job.h): options checked in a fixed order, the
// frontier solved, the point chosen, and the JSON document and the text summary of the result.
#include "emo/pipeline/job.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <utility>

namespace emo::pipeline {

std::optional<PlanFileFormat> plan_file_format(const std::string& path) {
  if (path.ends_with(".py") || path == "-") return PlanFileFormat::kPerseusPy;
  if (path.ends_with(".csv")) return PlanFileFormat::kCsv;
  return std::nullopt;
}

nlohmann::json comparison_json(const Comparison& c, const std::string& published_path) {
  return {{"published", published_path},
          {"points", c.points},
          {"covered", c.covered},
          {"ours_le", c.ours_le},
          {"ours_within_tolerance", c.ours_within},
          {"tolerance_rel", c.tolerance},
          {"max_rel_diff", c.max_rel_diff},
          {"max_rel_diff_time_s", c.max_rel_diff_time_s},
          {"mean_rel_diff", c.mean_rel_diff},
          {"min_rel_diff", c.min_rel_diff},
          {"our_fastest_s", c.our_fastest_s},
          {"their_fastest_s", c.their_fastest_s},
          {"same_fastest", c.same_fastest},
          {"vs_their_step",
           {{"ours_le", c.ours_le_step},
            {"max_rel_diff", c.max_rel_diff_step},
            {"mean_rel_diff", c.mean_rel_diff_step}}}};
}

std::string plan_file_text(const JobResult& r, PlanFileFormat format) {
  const JobPlan& plan = *r.plan;
  if (format == PlanFileFormat::kCsv) return schedule_csv(plan.schedule, r.unit_s);
  const auto& p = r.frontier.points[plan.point];
  return perseus_frequency_file(
      plan.schedule,
      {fmt::format("emo pipeline: {}, {} stages x {} microbatches, 1F1B, {} accounting", r.options.profile,
                   r.model.stages, r.options.microbatches, accounting_name(r.accounting)),
       fmt::format("iteration time {:.6g} s (limit {:.6g} s), energy {:.6g} J; measured profile: "
                   "{:.6g} s, {:.6g} J",
                   p.time_s, plan.limit_s, p.energy_j, p.measured_time_s, p.measured_energy_j)});
}

Result<JobResult> run_job(const JobOptions& o) {
  if (o.microbatches < 1) return make_error("--microbatches", "must be >= 1");
  if (o.microbatches > kMaxJobMicrobatches)
    return make_error("--microbatches", "must be at most " + std::to_string(kMaxJobMicrobatches),
                      "the solve time grows about with the square of the microbatches (docs/pipeline.md §8)");
  if (o.stages && *o.stages < 1)
    return make_error("--stages", "must be >= 1, got " + std::to_string(*o.stages),
                      "leave it out for every stage in the profile");
  if (!(o.blocking_power_w >= 0 && o.blocking_power_w <= 1e5))
    return make_error("--blocking-power", fmt::format("must be from 0 to 1e5 W, got {:g}", o.blocking_power_w),
                      "Perseus uses 83.64 W for A100 and 70.38 W for A40");
  // At most an hour (coarser, every instruction of any real profile would last 0 units; a unit longer
  // than some instruction of this profile is refused by build_model, naming --unit-time too).
  if (o.unit_time_s && !(*o.unit_time_s > 0 && *o.unit_time_s <= kMaxJobUnitTimeS))
    return make_error("--unit-time",
                      fmt::format("must be more than 0 and at most {:g} seconds, got {:g}", kMaxJobUnitTimeS,
                                  *o.unit_time_s),
                      "leave it out for the compared file's unit, else 0.001 s (lowtime uses 1 ms, or 0.1 ms "
                      "for the A40 files)");
  if (!(o.tolerance >= 0 && std::isfinite(o.tolerance)))
    return make_error("--tolerance", fmt::format("must be a finite number >= 0, got {:g}", o.tolerance),
                      "a relative tolerance, e.g. 1e-5 (the default)");
  const bool want_plan = !o.plan_file.empty() || o.plan_at_s || o.max_slowdown;
  std::optional<PlanFileFormat> file_format;
  if (!o.plan_file.empty()) {
    file_format = plan_file_format(o.plan_file);
    if (!file_format)
      return make_error("--plan", "'" + o.plan_file + "' must end in .py or .csv",
                        ".py: the frequency file of Perseus' PointSolution scheduler; .csv: one row per "
                        "instruction");
  }
  if (o.plan_at_s && !(*o.plan_at_s > 0 && std::isfinite(*o.plan_at_s)))
    return make_error("--plan-at",
                      fmt::format("must be a positive number of seconds, got {:g}", *o.plan_at_s));
  if (o.max_slowdown && !(*o.max_slowdown >= 0 && *o.max_slowdown <= 100))
    return make_error("--max-slowdown",
                      fmt::format("must be from 0 to 100 (a fraction of the fastest plan's time), got {:g}",
                                  *o.max_slowdown));
  JobResult r;
  r.options = o;
  if (o.accounting == "lowtime") {
    r.accounting = Accounting::kLowtime;
  } else if (o.accounting == "clocks") {
    r.accounting = Accounting::kClocks;
  } else {
    return make_error("--accounting", "unknown accounting '" + o.accounting + "'", "use lowtime or clocks");
  }

  auto profile = load_stage_profile(o.profile);
  if (!profile) return profile.error();
  std::optional<PublishedFrontier> published;
  if (!o.compare.empty()) {
    auto p = load_published_frontier(o.compare);
    if (!p) return p.error();
    published = std::move(*p);
  }
  // The published A100 files use 1 ms units, the A40 ones 0.1 ms: take the unit from the file compared.
  r.unit_s = o.unit_time_s ? *o.unit_time_s : published ? infer_unit_s(*published) : 0.001;

  auto t0 = std::chrono::steady_clock::now();
  auto model = build_model(*profile, o.stages.value_or(0), r.unit_s, o.blocking_power_w);
  if (!model) return model.error();
  r.model = std::move(*model);
  auto dag = build_1f1b(r.model.stages, o.microbatches);
  if (!dag) return dag.error();
  r.dag = std::move(*dag);
  FrontierOptions fo;
  fo.accounting = r.accounting;
  auto frontier = solve_frontier(r.model, r.dag, fo);
  if (!frontier) return frontier.error();
  r.frontier = std::move(*frontier);
  r.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (published) r.comparison = compare(r.frontier, *published, r.unit_s, o.tolerance);

  const auto& pts = r.frontier.points;
  // The plan to run: the least-energy point within --plan-at seconds, within --max-slowdown of the
  // fastest point, or (neither) the least-energy point of all.
  if (want_plan && pts.empty()) return make_error("--plan", "the frontier has no points");
  if (want_plan) {
    JobPlan plan;
    if (o.plan_at_s || o.max_slowdown) {
      plan.limit_s = o.plan_at_s ? *o.plan_at_s : pts.front().time_s * (1 + *o.max_slowdown);
      auto idx = point_within(r.frontier, r.unit_s, plan.limit_s);
      if (!idx) {
        Error e = idx.error();
        e.where = o.plan_at_s ? "--plan-at" : "--max-slowdown";
        return e;
      }
      plan.point = *idx;
    } else {
      plan.point = pts.size() - 1;
      plan.limit_s = pts.back().time_s;
    }
    plan.schedule = stage_schedule(r.model, r.dag, r.frontier.plan(plan.point));
    r.plan = std::move(plan);
    if (file_format) r.plan->file_text = plan_file_text(r, *file_format);
  }
  if (r.comparison && !r.comparison->same_fastest)
    r.warnings.push_back(fmt::format(
        "{}: its fastest point takes {:g} s, our fastest plan {:g} s; both frontiers end at the "
        "all-fastest plan, so this compares two different problems (model, GPU, microbatches "
        "or --unit-time)",
        o.compare, r.comparison->their_fastest_s, r.comparison->our_fastest_s));
  return r;
}

nlohmann::json job_json(const JobResult& r) {
  const JobOptions& o = r.options;
  const auto& pts = r.frontier.points;
  nlohmann::json j;
  j["profile"] = o.profile;
  j["stages"] = r.model.stages;
  j["microbatches"] = o.microbatches;
  j["nodes"] = r.dag.num_nodes();
  j["edges"] = r.dag.num_edges();
  j["blocking_power_w"] = o.blocking_power_w;
  j["unit_time_s"] = r.unit_s;
  j["accounting"] = std::string(accounting_name(r.accounting));
  j["solve_ms"] = r.solve_ms;
  j["phases"] = r.frontier.stats.phases;
  j["plans"] = r.frontier.stats.plans;
  j["min_time_s"] = double(r.frontier.stats.min_time_units) * r.unit_s;
  j["max_time_s"] = double(r.frontier.stats.max_time_units) * r.unit_s;
  nlohmann::json f = nlohmann::json::array(), fm = nlohmann::json::array();
  for (const auto& p : pts) {
    f.push_back({p.time_s, p.energy_j});
    fm.push_back({p.measured_time_s, p.measured_energy_j});
  }
  j["frontier"] = std::move(f);
  j["frontier_measured"] = std::move(fm);
  nlohmann::json ins = nlohmann::json::array();
  for (const auto& im : r.model.instructions) {
    ins.push_back({{"stage", im.stage},
                   {"instruction", std::string(instruction_name(im.instruction))},
                   {"clocks", im.samples},
                   {"candidates", im.candidates.size()},
                   {"min_units", im.min_units()},
                   {"max_units", im.max_units()},
                   {"fit", {{"a", im.cost.a_unshifted()}, {"b", im.cost.b}, {"c", im.cost.c}, {"rmse_j", im.fit_rmse_j}}}});
  }
  j["instructions"] = std::move(ins);
  if (r.comparison) j["comparison"] = comparison_json(*r.comparison, o.compare);
  if (r.plan) {
    const auto& p = pts[r.plan->point];
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& st : r.plan->schedule) {
      nlohmann::json row = nlohmann::json::array();
      for (const auto& x : st) row.push_back({std::string(instruction_name(x.instruction)), x.clock_mhz});
      stages.push_back(std::move(row));
    }
    j["plan"] = {{"point", r.plan->point},
                 {"limit_s", r.plan->limit_s},
                 {"time_s", p.time_s},
                 {"energy_j", p.energy_j},
                 {"measured_time_s", p.measured_time_s},
                 {"measured_energy_j", p.measured_energy_j},
                 {"file", o.plan_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.plan_file)},
                 {"stages", std::move(stages)}};
  }
  return j;
}

std::string job_text(const JobResult& r) {
  const JobOptions& o = r.options;
  const auto& pts = r.frontier.points;
  std::string out = fmt::format(
      "{}: {} stages x {} microbatches, 1F1B ({} nodes, {} edges), blocking power {:g} W, unit {:g} s\n",
      o.profile, r.model.stages, o.microbatches, r.dag.num_nodes(), r.dag.num_edges(), o.blocking_power_w,
      r.unit_s);
  if (!pts.empty()) {
    size_t emin = pts.size() - 1;
    out += fmt::format("frontier ({} accounting): {} points in {:.1f} ms ({} flow phases for {} deadlines)\n",
                       accounting_name(r.accounting), pts.size(), r.solve_ms, r.frontier.stats.phases,
                       r.frontier.stats.plans);
    out += fmt::format("  fastest      {:.4f} s  {:.1f} J   (measured: {:.4f} s  {:.1f} J)\n",
                       pts.front().time_s, pts.front().energy_j, pts.front().measured_time_s,
                       pts.front().measured_energy_j);
    out += fmt::format(
        "  least energy {:.4f} s  {:.1f} J   (measured: {:.4f} s  {:.1f} J), {:.1f} % less energy, "
        "{:.1f} % more time\n",
        pts[emin].time_s, pts[emin].energy_j, pts[emin].measured_time_s, pts[emin].measured_energy_j,
        100 * (1 - pts[emin].energy_j / pts.front().energy_j), 100 * (pts[emin].time_s / pts.front().time_s - 1));
  }
  if (r.comparison) {
    const Comparison& c = *r.comparison;
    out += fmt::format(
        "vs {}: at {} of {} published points ours <= theirs ({} within {:g}); max {:+.2e} (at {:g} s), "
        "mean {:+.2e}, best {:+.2e}\n",
        o.compare, c.ours_le, c.points, c.ours_within, c.tolerance, c.max_rel_diff, c.max_rel_diff_time_s,
        c.mean_rel_diff, c.min_rel_diff);
    out += fmt::format(
        "  against their own step function (their lowest energy by each time): ours <= theirs at {}, "
        "max {:+.2e}, mean {:+.2e}\n",
        c.ours_le_step, c.max_rel_diff_step, c.mean_rel_diff_step);
    if (c.covered < c.points)
      out += fmt::format("  {} published points are faster than our fastest plan\n", c.points - c.covered);
  }
  if (r.plan) {
    const auto& p = pts[r.plan->point];
    out += fmt::format("plan within {:.6g} s: {:.4f} s  {:.1f} J   (measured: {:.4f} s  {:.1f} J), {:.1f} % less "
                       "energy than the fastest{}\n",
                       r.plan->limit_s, p.time_s, p.energy_j, p.measured_time_s, p.measured_energy_j,
                       100 * (1 - p.energy_j / pts.front().energy_j),
                       o.plan_file.empty() ? "" : "; written to " + o.plan_file);
  }
  return out;
}

}  // namespace emo::pipeline
