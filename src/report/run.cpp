// The end-to-end run: load and analyze, pack, profile on the emulated GPU, fit, optimize, evaluate the
// policy and the baselines, and write the report folder (built as DIR.tmp.<pid>, renamed at the end).
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "emo/base/file_util.h"
#include "emo/base/parallel.h"
#include "emo/emulator/emulator.h"
#include "emo/graph/graph.h"
#include "emo/report/report.h"

namespace emo::report {

namespace fs = std::filesystem;

synth::Options example_options() {
  synth::Options o;
  o.workload = synth::Workload::kTrainPP;
  o.ranks = 4;
  return o;
}

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Status write_in(AtomicDir& dir, const std::string& name, std::string_view text, std::vector<std::string>* files) {
  EMO_RETURN_IF_ERROR(dir.write(name, text));
  files->push_back(name);
  return {};
}

const optimize::Plan* find_plan(const optimize::Solution& s, const std::string& name) {
  if (name == "default") return &s.default_plan;
  if (name == "policy") return &s.policy;
  for (const auto& b : s.baselines)
    if (b.name == name) return &b;
  return nullptr;
}

}  // namespace

std::string results_csv(const std::vector<PlanRow>& plans) {
  std::string out =
      "name,predicted_time_us,predicted_energy_j,true_time_us,true_energy_j,saving_pct,slowdown_pct\n";
  for (const PlanRow& r : plans) {
    out += fmt::format("{},{:.3f},{:.6f},{:.3f},{:.6f},{:.3f},{:.3f}\n", r.name, r.predicted_time_us,
                       r.predicted_energy_j, r.true_time_us, r.true_energy_j, r.saving_pct, r.slowdown_pct);
  }
  return out;
}

Result<RunResult> run(const RunOptions& o) {
  if (!(o.max_slowdown >= 0 && o.max_slowdown <= 1))
    return make_error("--max-slowdown", "must be between 0 and 1", "0.05 allows 5 % more step time");
  if (o.eval_steps < 2 || o.eval_steps > emulator::kMaxRunSteps)
    return make_error("--steps", fmt::format("must be from 2 (the first is a warm-up) to {}", emulator::kMaxRunSteps));
  if (o.out_dir.empty()) return make_error("-o", "the report folder name is empty");
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  nlohmann::json stage_ms = nlohmann::json::object();
  const auto t_all = std::chrono::steady_clock::now();

  auto profile = backends::profile_of(o.device);
  if (!profile.ok()) return profile.error();
  auto spec = backends::parse_device_spec(o.device);
  if (!spec.ok()) return spec.error();
  const std::string emulated = spec->kind == backends::DeviceSpec::Kind::kEmulated ? o.device
                                                                                 : "emulated:" + profile->name;

  AtomicDir tmp;
  EMO_RETURN_IF_ERROR(tmp.open(o.out_dir, "report folder"));
  std::vector<std::string> files;

  // ---- inputs ----
  std::vector<std::string> traces = o.traces;
  std::vector<std::string> shown = o.traces;  // as they will be named once the folder is in place
  if (traces.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    say(fmt::format("synthesizing the built-in example ({} ranks, {})", o.example.ranks,
                    synth::workload_name(o.example.workload)));
    EMO_RETURN_IF_ERROR(synth::write_traces(o.example, (fs::path(tmp.tmp_path()) / "input").string(), &traces));
    for (const auto& t : traces) shown.push_back((fs::path(tmp.final_path()) / "input" / fs::path(t).filename()).string());
    stage_ms["synth"] = ms_since(t0);
  }

  auto t0 = std::chrono::steady_clock::now();
  say("loading and analyzing " + std::to_string(traces.size()) + " trace(s)");
  auto w = analysis::load(traces, {});
  if (!w.ok()) return w.error();
  analysis::Analysis an = analysis::analyze(*w);
  stage_ms["analyze"] = ms_since(t0);

  t0 = std::chrono::steady_clock::now();
  say("packing");
  auto p = pack::make_packs(*w, an, *profile, {});
  if (!p.ok()) return p.error();
  stage_ms["pack"] = ms_since(t0);

  t0 = std::chrono::steady_clock::now();
  if (o.profiled_dir.empty()) {
    say(fmt::format("profiling {} signature(s) at {} clocks on {}", p->signatures.size(), p->plan_clocks_mhz.size(),
                    emulated));
  } else {
    say("reading the profiling runs in " + o.profiled_dir);
  }
  auto runs = o.profiled_dir.empty() ? backends::profile_plan(emulated, *w, *p)
                                     : backends::read_profiled_dir(o.profiled_dir, *w);
  if (!runs.ok()) return runs.error();
  stage_ms["profile"] = ms_since(t0);

  t0 = std::chrono::steady_clock::now();
  say("fitting pack models");
  auto m = pack::fit_pack_models(*w, *p, *runs, *profile);
  if (!m.ok()) return m.error();
  stage_ms["fit"] = ms_since(t0);

  t0 = std::chrono::steady_clock::now();
  say("optimizing the clock policy");
  optimize::Problem pr;
  pr.workload = &*w;
  pr.packing = &*p;
  pr.models = &*m;
  pr.default_clock_mhz = int(profile->default_clock_mhz.value);
  optimize::OptimizeOptions oo;
  oo.max_slowdown = o.max_slowdown;
  oo.reserve = o.reserve;
  const bool check = o.check && o.profiled_dir.empty();
  auto checked = check ? backends::optimize_checked(pr, oo, emulated) : [&]() -> Result<backends::Checked> {
    auto sol = optimize::optimize(pr, oo);
    if (!sol.ok()) return sol.error();
    return backends::Checked{std::move(*sol), {}, false};
  }();
  if (!checked.ok()) return checked.error();
  const optimize::Solution* s = &checked->solution;
  stage_ms["optimize"] = ms_since(t0);

  const std::string policy_text = optimize::policy_json(pr, *s, o.max_slowdown).dump(1) + "\n";
  EMO_RETURN_IF_ERROR(write_in(tmp, "policy.json", policy_text, &files));

  // ---- evaluate on the emulated GPU, as `emo evaluate` does ----
  t0 = std::chrono::steady_clock::now();
  say(fmt::format("evaluating the policy and {} baseline(s) on {}", s->baselines.size(), emulated));
  auto pf = optimize::read_policy("policy.json", policy_text, *w, *profile);
  if (!pf.ok()) return pf.error();
  struct Job {
    std::vector<int> clocks;
    std::string name;
    std::vector<int64_t> issues;
  };
  std::vector<Job> jobs{{{}, "default", {}}, {{}, "policy", {}}};
  for (const auto& ap : pf->packs) jobs[1].clocks.push_back(ap.clock_mhz);
  for (const auto& b : pf->baselines) jobs.push_back({b.clocks_mhz, b.name, b.issue_at_ns});
  // The runs are independent (each starts from its own seed): one per thread.
  std::vector<std::optional<Result<backends::Measured>>> evals(jobs.size());
  parallel_for(jobs.size(), [&](size_t i) {
    evals[i] = backends::run_on_emulator(emulated, *w, pf->packs, jobs[i].clocks, jobs[i].issues,
                                        pf->default_clock_mhz, o.eval_steps, jobs[i].name);
  });
  std::vector<backends::Measured> measured;
  for (auto& r : evals) {
    if (!*r) return r->error();
    measured.push_back(**r);
  }
  stage_ms["evaluate"] = ms_since(t0);

  RunResult res;
  const backends::Measured& def = measured.front();
  for (const auto& mm : measured) {
    PlanRow r;
    r.name = mm.name;
    if (const optimize::Plan* pl = find_plan(*s, mm.name)) {
      r.predicted_time_us = double(pl->time_ns) / 1e3;
      r.predicted_energy_j = pl->energy_j;
    }
    r.true_time_us = mm.time_us;
    r.true_energy_j = mm.energy_j;
    r.slowdown_pct = def.time_us > 0 ? 100.0 * (mm.time_us / def.time_us - 1) : 0;
    r.saving_pct = def.energy_j > 0 ? 100.0 * (1 - mm.energy_j / def.energy_j) : 0;
    res.plans.push_back(r);
  }

  // ---- summary ----
  nlohmann::json sm;
  sm["device"] = profile->name;
  sm["evaluated_on"] = emulated;
  sm["max_slowdown"] = o.max_slowdown;
  sm["reserve"] = o.reserve;
  sm["profiled"] = o.profiled_dir.empty() ? emulated : o.profiled_dir;
  sm["inputs"] = shown;
  sm["ranks"] = w->ranks.size();
  sm["events"] = w->events;
  sm["gpu_ops"] = p->kernel_ops;
  sm["replay_error_pct"] = an.replay_error_pct;
  sm["default_clock_mhz"] = pr.default_clock_mhz;
  sm["step_time_us"] = {{"default", res.plans[0].true_time_us}, {"policy", res.plans[1].true_time_us}};
  sm["energy_j"] = {{"default", res.plans[0].true_energy_j}, {"policy", res.plans[1].true_energy_j}};
  sm["predicted"] = {{"default", {{"time_us", res.plans[0].predicted_time_us}, {"energy_j", res.plans[0].predicted_energy_j}}},
                     {"policy", {{"time_us", res.plans[1].predicted_time_us}, {"energy_j", res.plans[1].predicted_energy_j}}}};
  sm["policy"] = {{"saving_pct", res.plans[1].saving_pct}, {"slowdown_pct", res.plans[1].slowdown_pct}};
  sm["policy_from"] = s->policy_from;
  nlohmann::json bl = nlohmann::json::object();
  for (size_t i = 2; i < res.plans.size(); ++i)
    bl[res.plans[i].name] = {{"saving_pct", res.plans[i].saving_pct}, {"slowdown_pct", res.plans[i].slowdown_pct}};
  sm["baselines"] = bl;
  // Doubt: the models' step energy against the check's and the evaluation's measurement.
  std::vector<std::string> warnings = check ? backends::check_warnings(*checked) : std::vector<std::string>{};
  double eval_gap = 0;
  for (size_t i = 0; i < 2 && i < res.plans.size(); ++i)
    eval_gap = std::max(eval_gap, backends::energy_gap_pct(res.plans[i].predicted_energy_j, res.plans[i].true_energy_j));
  if (eval_gap > backends::kEnergyDoubtPct) {
    warnings.push_back(fmt::format("the evaluation measured a step energy {:.1f} % away from the models' prediction "
                                   "(default clocks or policy; more than {:g} %): the predicted saving does not hold, "
                                   "the measured one (results.csv) does",
                                   eval_gap, backends::kEnergyDoubtPct));
  }
  sm["warnings"] = warnings;
  sm["packs"] = p->packs.size();
  sm["signatures"] = p->signatures.size();
  sm["profiled_units"] = p->profiled_units;
  sm["kernel_units"] = p->kernel_units;
  sm["profiling_reduction"] = p->reduction();
  sm["profiled_clocks_mhz"] = p->plan_clocks_mhz;
  const nlohmann::json aj = analysis::to_json(*w, an, false);
  sm["critical_path"] = {{"length_us", aj.at("critical_path").value("length_us", 0.0)},
                         {"breakdown", aj.at("critical_path").value("breakdown", nlohmann::json::object())}};
  sm["solve_ms"] = s->solve_ms;
  sm["replays"] = s->replays;
  if (check) sm["check"] = backends::check_json(*checked);

  ReportData d;
  d.workload = &*w;
  d.analysis = &an;
  d.packing = &*p;
  d.pack_clock_mhz = s->policy.pack_clock_mhz;
  d.default_clock_mhz = pr.default_clock_mhz;
  d.plans = res.plans;

  // ---- the views ----
  t0 = std::chrono::steady_clock::now();
  say("writing the report");
  EMO_RETURN_IF_ERROR(write_in(tmp, "packs.csv", pack::packs_csv(*w, *p), &files));
  EMO_RETURN_IF_ERROR(write_in(tmp, "results.csv", results_csv(res.plans), &files));
  for (uint32_t r = 0; r < w->ranks.size(); ++r) {
    auto text = read_text(w->graph.rank_paths[r]);
    if (!text.ok()) return text.error();
    auto ov = overlay_json(*text, w->graph.rank_paths[r], d, r);
    if (!ov.ok()) return ov.error();
    const std::string name = r == 0 ? "overlay.json" : fmt::format("overlay_rank{}.json", w->graph.rank_ids[r]);
    EMO_RETURN_IF_ERROR(write_in(tmp, name, *ov, &files));
  }
  stage_ms["views"] = ms_since(t0);
  stage_ms["total"] = ms_since(t_all);
  sm["stage_ms"] = stage_ms;
  d.summary = sm;
  EMO_RETURN_IF_ERROR(write_in(tmp, "report.html", render_html(d), &files));
  res.summary = {{"summary", sm}};
  EMO_RETURN_IF_ERROR(write_in(tmp, "summary.json", res.summary.dump(1) + "\n", &files));

  // ---- put the folder in place: the old one goes only once the new one is complete ----
  EMO_RETURN_IF_ERROR(tmp.commit());
  res.out_dir = tmp.final_path();
  res.files = files;
  return res;
}

}  // namespace emo::report
