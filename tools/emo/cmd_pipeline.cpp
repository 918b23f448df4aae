// `emo pipeline --profile CSV --microbatches N --blocking-power W [--compare PUBLISHED.csv]`:
// Perseus-compatible planning — the 1F1B pipeline DAG from a stage profile, the whole time–energy
// frontier of per-instruction clock plans with the published (lowtime) accounting, the same plans
// with the measured profile, and optionally a point-by-point comparison with a published frontier.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "emo/pipeline/pipeline.h"

namespace emo::cli {

namespace {

struct PipelineArgs {
  std::string profile;
  int microbatches = 0;
  int stages = 0;
  double blocking_power = -1;
  double unit_time = 0;
  std::string accounting = "lowtime";
  std::string compare;
  double tolerance = 1e-5;
  std::string json_out;
  std::string plan_file;
  double plan_at = 0, max_slowdown = 0;
  CLI::Option* plan_at_opt = nullptr;
  CLI::Option* max_slowdown_opt = nullptr;
};

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

nlohmann::json comparison_json(const pipeline::Comparison& c, const std::string& path) {
  return {{"published", path},
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

constexpr int kMaxMicrobatches = 4096;

int run(const PipelineArgs& a) {
  if (a.microbatches < 1) return fail(make_error("--microbatches", "must be >= 1"));
  if (a.microbatches > kMaxMicrobatches)
    return fail(make_error("--microbatches", "must be at most " + std::to_string(kMaxMicrobatches),
                           "the solve time grows about with the square of the microbatches (docs/pipeline.md §8)"));
  if (a.stages < 0) return fail(make_error("--stages", "must be >= 1"));
  if (!(a.blocking_power >= 0 && a.blocking_power <= 1e5))
    return fail(make_error("--blocking-power", "must be from 0 to 1e5 W",
                           "Perseus uses 83.64 W for A100 and 70.38 W for A40"));
  if (a.unit_time < 0 || !std::isfinite(a.unit_time))
    return fail(make_error("--unit-time", "must be > 0 seconds"));
  if (!(a.tolerance >= 0)) return fail(make_error("--tolerance", "must be >= 0"));
  const bool want_plan = !a.plan_file.empty() || a.plan_at_opt->count() || a.max_slowdown_opt->count();
  if (!a.plan_file.empty() && !ends_with(a.plan_file, ".py") && !ends_with(a.plan_file, ".csv"))
    return fail(make_error("--plan", "'" + a.plan_file + "' must end in .py or .csv",
                           ".py: the frequency file of Perseus' PointSolution scheduler; .csv: one row per "
                           "instruction"));
  if (a.plan_at_opt->count() && !(a.plan_at > 0 && std::isfinite(a.plan_at)))
    return fail(make_error("--plan-at", "must be a positive number of seconds"));
  if (a.max_slowdown_opt->count() && !(a.max_slowdown >= 0 && a.max_slowdown <= 100))
    return fail(make_error("--max-slowdown", "must be from 0 to 100 (a fraction of the fastest plan's time)"));
  pipeline::Accounting accounting;
  if (a.accounting == "lowtime") {
    accounting = pipeline::Accounting::kLowtime;
  } else if (a.accounting == "clocks") {
    accounting = pipeline::Accounting::kClocks;
  } else {
    return fail(
        make_error("--accounting", "unknown accounting '" + a.accounting + "'", "use lowtime or clocks"));
  }

  auto profile = pipeline::load_stage_profile(a.profile);
  if (!profile) return fail(profile.error());
  std::optional<pipeline::PublishedFrontier> published;
  if (!a.compare.empty()) {
    auto p = pipeline::load_published_frontier(a.compare);
    if (!p) return fail(p.error());
    published = std::move(*p);
  }
  // The published A100 files use 1 ms units, the A40 ones 0.1 ms: take the unit from the file compared.
  double unit = a.unit_time > 0 ? a.unit_time : published ? pipeline::infer_unit_s(*published) : 0.001;

  auto t0 = std::chrono::steady_clock::now();
  auto model = pipeline::build_model(*profile, a.stages, unit, a.blocking_power);
  if (!model) return fail(model.error());
  auto dag = pipeline::build_1f1b(model->stages, a.microbatches);
  if (!dag) return fail(dag.error());
  auto frontier = pipeline::solve_frontier(*model, *dag, {accounting});
  if (!frontier) return fail(frontier.error());
  double solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::optional<pipeline::Comparison> cmp;
  if (published) cmp = pipeline::compare(*frontier, *published, unit, a.tolerance);

  const auto& pts = frontier->points;
  // The plan to run: the least-energy point within --plan-at seconds, within --max-slowdown of the
  // fastest point, or (neither) the least-energy point of all.
  std::optional<size_t> chosen;
  double limit_s = 0;
  std::vector<std::vector<pipeline::ScheduledInstruction>> schedule;
  if (want_plan && pts.empty()) return fail(make_error("--plan", "the frontier has no points"));
  if (want_plan) {
    const char* flag = a.plan_at_opt->count() ? "--plan-at" : "--max-slowdown";
    if (a.plan_at_opt->count() || a.max_slowdown_opt->count()) {
      limit_s = a.plan_at_opt->count() ? a.plan_at : pts.front().time_s * (1 + a.max_slowdown);
      auto idx = pipeline::point_within(*frontier, unit, limit_s);
      if (!idx) {
        Error e = idx.error();
        e.where = flag;
        return fail(e);
      }
      chosen = *idx;
    } else {
      chosen = pts.size() - 1;
      limit_s = pts.back().time_s;
    }
    schedule = pipeline::stage_schedule(*model, *dag, frontier->plan(*chosen));
    if (!a.plan_file.empty()) {
      const auto& p = pts[*chosen];
      std::string text =
          ends_with(a.plan_file, ".py")
              ? pipeline::perseus_frequency_file(
                    schedule,
                    {fmt::format("emo pipeline: {}, {} stages x {} microbatches, 1F1B, {} accounting", a.profile,
                                 model->stages, a.microbatches, pipeline::accounting_name(accounting)),
                     fmt::format("iteration time {:.6g} s (limit {:.6g} s), energy {:.6g} J; measured profile: "
                                 "{:.6g} s, {:.6g} J",
                                 p.time_s, limit_s, p.energy_j, p.measured_time_s, p.measured_energy_j)})
              : pipeline::schedule_csv(schedule, unit);
      Status st = write_file_atomic(a.plan_file, text);
      if (!st.ok()) return fail(st.error());
    }
  }
  if (!a.json_out.empty()) {
    nlohmann::json j;
    j["profile"] = a.profile;
    j["stages"] = model->stages;
    j["microbatches"] = a.microbatches;
    j["nodes"] = dag->num_nodes();
    j["edges"] = dag->num_edges();
    j["blocking_power_w"] = a.blocking_power;
    j["unit_time_s"] = unit;
    j["accounting"] = std::string(pipeline::accounting_name(accounting));
    j["solve_ms"] = solve_ms;
    j["phases"] = frontier->stats.phases;
    j["plans"] = frontier->stats.plans;
    j["min_time_s"] = double(frontier->stats.min_time_units) * unit;
    j["max_time_s"] = double(frontier->stats.max_time_units) * unit;
    nlohmann::json f = nlohmann::json::array(), fm = nlohmann::json::array();
    for (const auto& p : pts) {
      f.push_back({p.time_s, p.energy_j});
      fm.push_back({p.measured_time_s, p.measured_energy_j});
    }
    j["frontier"] = std::move(f);
    j["frontier_measured"] = std::move(fm);
    nlohmann::json ins = nlohmann::json::array();
    for (const auto& im : model->instructions) {
      ins.push_back(
          {{"stage", im.stage},
           {"instruction", std::string(pipeline::instruction_name(im.instruction))},
           {"clocks", im.samples},
           {"candidates", im.candidates.size()},
           {"min_units", im.min_units()},
           {"max_units", im.max_units()},
           {"fit",
            {{"a", im.cost.a_unshifted()}, {"b", im.cost.b}, {"c", im.cost.c}, {"rmse_j", im.fit_rmse_j}}}});
    }
    j["instructions"] = std::move(ins);
    if (cmp) j["comparison"] = comparison_json(*cmp, a.compare);
    if (chosen) {
      const auto& p = pts[*chosen];
      nlohmann::json stages = nlohmann::json::array();
      for (const auto& st : schedule) {
        nlohmann::json row = nlohmann::json::array();
        for (const auto& x : st) row.push_back({std::string(pipeline::instruction_name(x.instruction)), x.clock_mhz});
        stages.push_back(std::move(row));
      }
      j["plan"] = {{"point", *chosen},
                   {"limit_s", limit_s},
                   {"time_s", p.time_s},
                   {"energy_j", p.energy_j},
                   {"measured_time_s", p.measured_time_s},
                   {"measured_energy_j", p.measured_energy_j},
                   {"file", a.plan_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.plan_file)},
                   {"stages", std::move(stages)}};
    }
    Status s = write_file_atomic(a.json_out, j.dump(1) + "\n");
    if (!s.ok()) return fail(s.error());
    if (a.json_out == "-") return kExitOk;
  }

  std::string out = fmt::format(
      "{}: {} stages x {} microbatches, 1F1B ({} nodes, {} edges), blocking power {:g} W, unit {:g} s\n",
      a.profile, model->stages, a.microbatches, dag->num_nodes(), dag->num_edges(), a.blocking_power, unit);
  if (!pts.empty()) {
    size_t emin = pts.size() - 1;
    out += fmt::format("frontier ({} accounting): {} points in {:.1f} ms ({} flow phases for {} deadlines)\n",
                       pipeline::accounting_name(accounting), pts.size(), solve_ms, frontier->stats.phases,
                       frontier->stats.plans);
    out += fmt::format("  fastest      {:.4f} s  {:.1f} J   (measured: {:.4f} s  {:.1f} J)\n",
                       pts.front().time_s, pts.front().energy_j, pts.front().measured_time_s,
                       pts.front().measured_energy_j);
    out += fmt::format(
        "  least energy {:.4f} s  {:.1f} J   (measured: {:.4f} s  {:.1f} J), {:.1f} % less energy, "
        "{:.1f} % more time\n",
        pts[emin].time_s, pts[emin].energy_j, pts[emin].measured_time_s, pts[emin].measured_energy_j,
        100 * (1 - pts[emin].energy_j / pts.front().energy_j),
        100 * (pts[emin].time_s / pts.front().time_s - 1));
  }
  if (cmp) {
    out += fmt::format(
        "vs {}: at {} of {} published points ours <= theirs ({} within {:g}); max {:+.2e} (at {:g} s), "
        "mean {:+.2e}, best {:+.2e}\n",
        a.compare, cmp->ours_le, cmp->points, cmp->ours_within, cmp->tolerance, cmp->max_rel_diff,
        cmp->max_rel_diff_time_s, cmp->mean_rel_diff, cmp->min_rel_diff);
    out += fmt::format(
        "  against their own step function (their lowest energy by each time): ours <= theirs at {}, "
        "max {:+.2e}, mean {:+.2e}\n",
        cmp->ours_le_step, cmp->max_rel_diff_step, cmp->mean_rel_diff_step);
    if (cmp->covered < cmp->points)
      out +=
          fmt::format("  {} published points are faster than our fastest plan\n", cmp->points - cmp->covered);
  }
  if (chosen) {
    const auto& p = pts[*chosen];
    out += fmt::format("plan within {:.6g} s: {:.4f} s  {:.1f} J   (measured: {:.4f} s  {:.1f} J), {:.1f} % less "
                       "energy than the fastest{}\n",
                       limit_s, p.time_s, p.energy_j, p.measured_time_s, p.measured_energy_j,
                       100 * (1 - p.energy_j / pts.front().energy_j),
                       a.plan_file.empty() ? "" : "; written to " + a.plan_file);
  }
  std::fputs(out.c_str(), stdout);
  if (cmp && !cmp->same_fastest)
    warn(fmt::format("{}: its fastest point takes {:g} s, our fastest plan {:g} s; both frontiers end at the "
                     "all-fastest plan, so this compares two different problems (model, GPU, microbatches "
                     "or --unit-time)",
                     a.compare, cmp->their_fastest_s, cmp->our_fastest_s));
  return kExitOk;
}

}  // namespace

void add_pipeline(CLI::App& root, Action& action) {
  auto args = std::make_shared<PipelineArgs>();
  auto* sub = root.add_subcommand(
      "pipeline",
      "Perseus-compatible: the 1F1B pipeline DAG from a stage profile and the whole time-energy frontier of "
      "per-instruction clock plans, with the published (lowtime) energy accounting.");
  sub->add_option("--profile", args->profile, "stage profile CSV: stage,instruction,frequency,time,energy")
      ->required();
  sub->add_option("--microbatches", args->microbatches, "microbatches per iteration (1 to 4096)")->required();
  sub->add_option("--stages", args->stages, "pipeline stages (default: every stage in the profile)");
  sub->add_option("--blocking-power", args->blocking_power,
                  "GPU power while blocked on communication, W (Perseus: A100 83.64, A40 70.38)")
      ->required();
  sub->add_option("--unit-time", args->unit_time,
                  "time quantum in seconds (default: the compared file's, else 0.001)");
  sub->add_option(
      "--accounting", args->accounting,
      "lowtime (durations on the time grid, as the published files) or clocks (each clock's own time)");
  sub->add_option("--compare", args->compare, "a published lowtime frontier (time,energy) to compare with");
  sub->add_option("--tolerance", args->tolerance,
                  "relative tolerance reported with --compare (default 1e-5)");
  sub->add_option("--json", args->json_out, "write the machine-readable result to FILE ('-' = stdout)");
  sub->add_option("--plan", args->plan_file,
                  "write the chosen point's plan: FILE.py is the frequency file of Perseus' PointSolution "
                  "scheduler (per stage, its (instruction, MHz) in execution order), FILE.csv one row per "
                  "instruction. The point: see --plan-at and --max-slowdown; neither: the least-energy point");
  args->plan_at_opt = sub->add_option(
      "--plan-at", args->plan_at, "choose the least-energy point whose iteration time is at most SECONDS");
  args->max_slowdown_opt =
      sub->add_option("--max-slowdown", args->max_slowdown,
                      "choose the least-energy point within this fraction of the fastest plan's time (0.05: 5 %)")
          ->excludes(args->plan_at_opt);
  sub->callback([args, &action] { action = [args] { return run(*args); }; });
}

}  // namespace emo::cli
