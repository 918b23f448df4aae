// Views over a session: each subcommand's JSON document built in one place, and the text, CSV, HTML
// and overlay renderings. See emo/report/views.h.
#include "emo/report/views.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "emo/report/report.h"

namespace emo::report {

using nlohmann::json;
using session::EvaluatedPlan;
using session::Session;

namespace {

// A view from a name and a function: the views below differ only in what they render.
class FnView final : public View {
 public:
  using Fn = std::function<Result<std::string>(Session&)>;
  FnView(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  Result<std::string> render(Session& s) const override { return fn_(s); }

 private:
  std::string name_;
  Fn fn_;
};

std::unique_ptr<View> make_view(std::string name, FnView::Fn fn) {
  return std::make_unique<FnView>(std::move(name), std::move(fn));
}

// A JSON document as the files hold it: indented by one, a newline at the end.
std::unique_ptr<View> json_view(std::string name, std::function<Result<json>(Session&)> doc) {
  return make_view(std::move(name), [doc = std::move(doc)](Session& s) -> Result<std::string> {
    auto j = doc(s);
    if (!j) return j.error();
    return j->dump(1) + "\n";
  });
}

double pct_change(double x, double base) { return 100.0 * (x / base - 1); }
double pct_saved(double x, double base) { return 100.0 * (1 - x / base); }

// Median, 90th percentile and largest of |x| (x in %).
struct Spread {
  double median = 0, p90 = 0, max = 0;
};
Spread spread_of(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  for (double& x : v) x = std::abs(x);
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  s.p90 = v[std::min(v.size() - 1, size_t(std::ceil(0.9 * double(v.size()))) - 1)];
  s.max = v.back();
  return s;
}

json fidelity_document(const backends::PackFidelity& f) {
  std::vector<double> te, ee;
  double weight = 0, wt = 0, we = 0;  // busy-time weighted mean |error|
  for (const auto& r : f.packs) {
    if (r.true_busy_ns <= 0 || r.true_energy_j <= 0) continue;
    const double true_busy_s = double(r.true_busy_ns) * 1e-9, predicted_busy_s = r.predicted_busy_ns * 1e-9;
    te.push_back(100 * (predicted_busy_s / true_busy_s - 1));
    ee.push_back(100 * (r.predicted_energy_j / r.true_energy_j - 1));
    weight += true_busy_s;
    wt += true_busy_s * std::abs(te.back());
    we += true_busy_s * std::abs(ee.back());
  }
  const Spread st = spread_of(te), se = spread_of(ee);
  auto spread_json = [&](const Spread& sp, double sum) {
    return json{{"median", sp.median}, {"p90", sp.p90}, {"max", sp.max}, {"weighted_mean", weight > 0 ? sum / weight : 0}};
  };
  return {{"clock_mhz", f.clock_mhz},
          {"packs", te.size()},
          {"step_time_error_pct", 100 * (double(f.predicted_step_ns) / f.true_step_ns - 1)},
          {"step_energy_error_pct", 100 * (f.predicted_step_j / f.true_step_j - 1)},
          {"pack_time_abs_error_pct", spread_json(st, wt)},
          {"pack_energy_abs_error_pct", spread_json(se, we)}};
}

}  // namespace

Margin measured_margin(const std::vector<EvaluatedPlan>& plans, double max_slowdown, double reserve) {
  Margin m{"default", 0, 0, optimize::check_accept_pct(max_slowdown, reserve)};
  const EvaluatedPlan* policy = nullptr;
  for (const EvaluatedPlan& r : plans) {
    if (r.name == "policy") policy = &r;
    if (r.name == "default" || r.name == "policy") continue;
    if (r.slowdown_pct <= m.bound_pct && r.saving_pct > m.baseline_saving_pct) {
      m.best_baseline = r.name;
      m.baseline_saving_pct = r.saving_pct;
    }
  }
  m.points = (policy ? policy->saving_pct : 0) - m.baseline_saving_pct;
  return m;
}

Margin predicted_margin(const optimize::Solution& s) {
  Margin m{"default", 0, 0, 0};
  for (const optimize::Plan& b : s.baselines) {
    const double saved = pct_saved(b.energy_j, s.default_plan.energy_j);
    if (b.feasible && saved > m.baseline_saving_pct) {
      m.best_baseline = b.name;
      m.baseline_saving_pct = saved;
    }
  }
  m.points = pct_saved(s.policy.energy_j, s.default_plan.energy_j) - m.baseline_saving_pct;
  return m;
}

json margin_json(const Margin& m) {
  json j = {{"best_baseline", m.best_baseline}, {"baseline_saving_pct", m.baseline_saving_pct}, {"points", m.points}};
  if (m.bound_pct > 0) j["bound_pct"] = m.bound_pct;
  return j;
}

namespace {

// "  policy vs best baseline within +4.75 % (static_clock, 8.04 % saved): +3.12 points (measured)".
std::string margin_line(const Margin& m, const char* how) {
  const std::string within = m.bound_pct > 0 ? fmt::format(" within {:+.2f} %", m.bound_pct) : std::string();
  return fmt::format("  policy vs best baseline{} ({}, {:.2f} % saved): {:+.2f} points ({})\n", within, m.best_baseline,
                     m.baseline_saving_pct, m.points, how);
}


// The clocks the models were fitted at, highest first (the plan's order): the plan's clocks, one more
// where the energy still fell at the lowest, or a --profiled folder's.
std::vector<int> profiled_clocks(Session& s) {
  auto m = s.models();
  if (!m) {
    auto p = s.packing();
    return p ? (*p)->plan_clocks_mhz : std::vector<int>{};
  }
  std::vector<int> c = (*m)->clocks_mhz;
  std::sort(c.rbegin(), c.rend());
  return c;
}

}  // namespace

namespace {

// A predicted plan against the default clocks' plan.
json plan_document(const optimize::Plan& p, const optimize::Plan& base) {
  return {{"time_us", double(p.time_ns) / 1e3},
          {"energy_j", p.energy_j},
          {"slowdown_pct", pct_change(double(p.time_ns), double(base.time_ns))},
          {"saving_pct", pct_saved(p.energy_j, base.energy_j)}};
}

// The doubt an optimization leaves: the step's (step_warnings: its import, missing ranks, lost launches,
// the replay's error, a trace of another GPU than --device), signatures the models could not fit and, where it ran, the check's predicted-against-measured energy.
std::vector<std::string> check_warnings_of(Session& s, const optimize::Checked& c) {
  std::vector<std::string> out = *step_warnings(s);  // the solution exists: so does the analysis
  if (auto m = s.models(); m.ok()) {
    for (auto& w : pack::fit_warnings(**s.packing(), **m)) out.push_back(std::move(w));
    // Where the models could not be refined (recorded runs, or --no-refine-profile) and the policy mostly
    // runs away from every profiled clock, its energy rests on the fitted curve between them. Only the
    // policy's: the baselines' clocks move with every refit, and a warning would chase them.
    if (!s.options().refine_profile || !s.options().profiled_dir.empty()) {
      if (const int f = optimize::clock_to_refine(**s.packing(), c.solution.policy, (*m)->clocks_mhz,
                                                  s.profile().max_clock_mhz());
          f > 0) {
        out.push_back(fmt::format(
            "the policy runs mostly at {} MHz, more than {:g} % of f_max from every profiled clock: its energy rests "
            "on the models between them; {} (docs/profiling.md, \"Profiling where the plan runs\")",
            f, 100 * optimize::kRefineGapFrac,
            s.options().profiled_dir.empty() ? fmt::format("without --no-refine-profile, {} MHz is profiled too", f)
                                             : fmt::format("record one more run at {} MHz", f)));
      }
    }
  }
  if (s.checks()) {
    for (auto& w : optimize::check_warnings(c)) out.push_back(std::move(w));
  }
  return out;
}

// What report.html (with_summary) and the overlays draw.
Result<ReportData> report_data(Session& s, const RunInfo& run, bool with_summary) {
  auto ev = s.evaluation();
  if (!ev) return ev.error();
  ReportData d;
  d.workload = *s.workload();
  d.analysis = *s.analysis();
  d.packing = *s.packing();
  d.pack_clock_mhz = (*s.solution())->solution.policy.pack_clock_mhz;
  d.default_clock_mhz = s.default_clock_mhz();
  d.scale_max_mhz = d.default_clock_mhz;
  d.scale_min_mhz = d.default_clock_mhz;
  for (int c : s.profile().sm_clocks.mhz) {
    if (c >= pack::kLowestCandidateFrac * s.profile().max_clock_mhz() && c <= d.default_clock_mhz) d.scale_min_mhz = std::min(d.scale_min_mhz, c);
  }
  d.plans = **ev;
  if (with_summary) {
    auto sm = summary_document(s, run);
    if (!sm) return sm.error();
    d.summary = std::move(*sm);
  }
  return d;
}

}  // namespace

// ---- documents ----

Result<json> analyze_document(Session& s, bool per_kernel) {
  auto an = s.analysis();
  if (!an) return an.error();
  return analysis::to_json(**s.workload(), **an, per_kernel);
}

json whatif_document(const analysis::WhatIf& r) {
  const double base = double(r.baseline_span_ns) / 1000.0, pred = double(r.predicted_span_ns) / 1000.0;
  json j{{"baseline_span_us", base}, {"predicted_span_us", pred},
         {"change_pct", base > 0 ? 100.0 * (pred - base) / base : 0.0}, {"matched_nodes", r.matched}};
  if (r.topology) j["topology"] = analysis::to_json(*r.topology);
  return j;
}

Result<json> whatif_document(Session& s, const std::vector<analysis::Scale>& scales,
                             const analysis::TopologyQuestion* topology) {
  auto r = s.what_if(scales, topology);
  if (!r) return r.error();
  return whatif_document(**r);
}

std::string whatif_text(const json& doc) {
  const json* j = &doc;
  const double base = (*j)["baseline_span_us"].get<double>(), pred = (*j)["predicted_span_us"].get<double>();
  std::string out;
  if (j->contains("topology")) {
    const json& t = (*j)["topology"];
    out += fmt::format("topology {}: {} collective(s) modeled, {} without a message size and {} unmatched kernel(s) "
                       "kept as measured\n",
                       t["file"].get<std::string>(), t["collectives_modeled"].get<int64_t>(),
                       t["collectives_without_size"].get<int64_t>(), t["collective_kernels_unmatched"].get<int64_t>());
    const std::string model =
        t["recorded_file"].is_null() ? t["file"].get<std::string>() : t["recorded_file"].get<std::string>();
    if (t["collectives_modeled"].get<int64_t>() > 0)
      out += fmt::format("  model of {} against the measured transfers: median {:.1f} % off, worst {:.1f} %\n", model,
                         t["median_error_pct"].get<double>(), t["worst_error_pct"].get<double>());
    if (t["unmatched_modeled"].get<int64_t>() > 0)
      out += fmt::format("  unmatched kernels (wait included) shorter than the model of {}: {} of {}\n", model,
                         t["unmatched_faster_than_model"].get<int64_t>(), t["unmatched_modeled"].get<int64_t>());
    for (const json& f : t["fitted_links"]) {
      out += fmt::format("  fitted to the measured transfers: {} {:.1f} GB/s, {:.2f} us per step, {:.2f} us per "
                         "collective ({} collectives, median {:.1f} % off)\n",
                         f["link"].get<std::string>(), f["bandwidth_gb_s"].get<double>(), f["latency_us"].get<double>(),
                         f["base_latency_us"].get<double>(), f["collectives"].get<int64_t>(),
                         f["median_error_pct"].get<double>());
    }
    for (const json& k : t["by_kind"]) {
      out += fmt::format("  {:<15} {:>6} x  measured {:>10.1f} us  modeled {:>10.1f} us  replayed {:>10.1f} us\n",
                         k["kind"].get<std::string>(), k["count"].get<int64_t>(), k["measured_transfer_us"].get<double>(),
                         k["modeled_transfer_us"].get<double>(), k["predicted_transfer_us"].get<double>());
    }
  }
  out += fmt::format("step span: baseline {:.3f} ms -> predicted {:.3f} ms ({:+.2f} %)\n", base / 1000, pred / 1000,
                     (*j)["change_pct"].get<double>());
  return out;
}

Result<json> pack_document(Session& s, bool all, int fidelity_mhz) {
  auto p = s.packing();
  if (!p) return p.error();
  json j = pack::to_json(**p, all);
  if (fidelity_mhz != 0) {
    auto f = s.pack_fidelity(fidelity_mhz);
    if (!f) return f.error();
    j["fidelity"] = fidelity_document(**f);
  }
  return j;
}

namespace {
// Each GPU's energy fit (pack::GpuCorrection): its scales, and the step energy at each profiled clock as
// measured and as the fitted models give it back, with the largest gap between the two.
json energy_fit_json(const pack::PackModels& m) {
  json gpus = json::array();
  for (size_t r = 0; r < m.gpus.size(); ++r) {
    const pack::GpuCorrection& c = m.gpus[r];
    json runs = json::array();
    double worst = 0;
    for (size_t i = 0; i < c.runs(); ++i) {
      const double gap = c.gap_pct(i);
      worst = std::max(worst, std::abs(gap));
      runs.push_back({{"clock_mhz", c.clocks_mhz[i]}, {"measured_j", c.measured_j[i]}, {"fitted_j", c.predicted_j[i]},
                      {"gap_pct", gap}});
    }
    gpus.push_back({{"gpu", r},
                    {"static_scale", c.static_scale},
                    {"dynamic_scale", c.dynamic_scale},
                    {"floor_scale", c.floor_scale},
                    {"knee_scale", c.knee_scale},
                    {"limit_scale", c.limit_scale},
                    {"concurrent_share", c.concurrent_share},
                    {"common_scale", c.common_scale},
                    {"largest_gap_pct", worst},
                    {"runs", std::move(runs)}});
    if (c.common_scale && (c.ls_static != 0 || c.ls_dynamic != 0))
      gpus.back()["least_squares"] = {{"static_scale", c.ls_static}, {"dynamic_scale", c.ls_dynamic}};
  }
  return gpus;
}
}  // namespace

Result<json> optimize_document(Session& s) {
  auto c = s.solution();
  if (!c) return c.error();
  const optimize::Solution& sol = (*c)->solution;
  const pack::Packing& p = **s.packing();
  const auto& o = s.options().optimize;
  json j;
  j["device"] = s.profile().name;
  j["max_slowdown"] = o.max_slowdown;
  j["reserve"] = o.reserve;
  j["baseline"] = plan_document(sol.default_plan, sol.default_plan);
  j["policy"] = plan_document(sol.policy, sol.default_plan);
  for (const auto& b : sol.baselines) j["baselines"][b.name] = plan_document(b, sol.default_plan);
  j["packs"] = p.packs.size();
  j["signatures"] = p.signatures.size();
  j["profiled_clocks_mhz"] = profiled_clocks(s);
  j["policy_from"] = sol.policy_from;
  if (auto m = s.models()) j["energy_fit"] = energy_fit_json(**m);
  j["margin"] = margin_json(predicted_margin(sol));
  j["solve_ms"] = sol.solve_ms;
  j["replays"] = sol.replays;
  if (s.checks()) j["check"] = optimize::check_json(**c);
  j["warnings"] = check_warnings_of(s, **c);
  return j;
}

Result<json> evaluate_document(Session& s) {
  auto ev = s.evaluation();
  if (!ev) return ev.error();
  const EvaluatedPlan& def = (*ev)->front();
  json j;
  j["device"] = s.options().device;
  for (const EvaluatedPlan& r : **ev) {
    const double t_us = r.measured.mean_step_ns() / 1e3;
    json e{{"time_us", t_us}, {"energy_j", r.measured.energy_j},
           {"slowdown_pct", pct_change(t_us, def.measured.mean_step_ns() / 1e3)},
           {"saving_pct", pct_saved(r.measured.energy_j, def.measured.energy_j)}};
    if (r.name == "default" || r.name == "policy") j[r.name] = e;
    else j["baselines"][r.name] = e;
  }
  j["max_slowdown"] = (*s.policy())->max_slowdown;
  j["margin"] = margin_json(measured_margin(**ev, (*s.policy())->max_slowdown, (*s.policy())->reserve));
  return j;
}

Result<std::vector<std::string>> step_warnings(Session& s) {
  auto an = s.analysis();
  if (!an) return an.error();
  std::vector<std::string> out = analysis::step_warnings(**s.workload(), **an);
  for (auto& w : analysis::device_warnings(**s.workload(), s.profile().name)) out.push_back(std::move(w));
  return out;
}

Status refuse_doubtful_step(Session& s) {
  auto an = s.analysis();
  if (!an) return an.error();
  const analysis::Workload& w = **s.workload();
  const std::string where = w.ranks.size() == 1 ? w.ranks.front().path : "the step";
  const char* note = "give --accept-doubt to optimize it all the same";
  const analysis::LostLaunches ll = analysis::lost_launches(w);
  if (ll.pct() > kLostLaunchRefusePct) {
    int64_t malformed = 0;
    for (const auto& t : w.ranks) malformed += t.stats.error_count();
    return make_error(where,
                      fmt::format("{} of its {} launch calls ({:.0f} %, more than {:g} %) have no GPU activity in the trace, "
                                  "e.g. {}{}: most of the GPU work is missing, and clocks chosen for what is left would not be this job's",
                                  ll.lost, ll.launches, ll.pct(), kLostLaunchRefusePct, ll.example,
                                  malformed > 0 ? fmt::format(" ({} malformed events were skipped on reading: import_stats in `emo analyze --json`)", malformed) : ""),
                      note);
  }
  // A share of the step spent on what the trace does not show as the job's work: "P % of its step (more
  // than 50 %) is WHAT, e.g. EXAMPLE: WHY".
  const auto share_refused = [&](double pct, std::string_view what, const std::string& example, std::string_view why) {
    return make_error(where,
                      fmt::format("{:.0f} % of its step (more than {:g} %) is {}, e.g. {}: {}", pct,
                                  kUnrecordedWaitRefusePct, what, example, why),
                      note);
  };
  const analysis::UnrecordedWaits uw = analysis::unrecorded_waits(w, **an);
  if (uw.pct > kUnrecordedWaitRefusePct) {
    return share_refused(uw.pct, "synchronize calls blocked after the GPU work the trace shows had ended", uw.example,
                         "the GPU ran work the trace does not record, and clocks chosen for what it shows would not be "
                         "this job's");
  }
  const analysis::LateGpuStarts ls = analysis::late_gpu_starts(w, **an);
  if (ls.pct > kUnrecordedWaitRefusePct) {
    return share_refused(ls.pct,
                         "GPU ops on the critical path waiting after their launch while their GPU ran nothing of the step",
                         ls.example,
                         "the GPU ran work the step does not show, and clocks chosen for what it shows would not be this "
                         "job's");
  }
  const analysis::OneTimeCalls ot = analysis::one_time_calls(w, **an);
  if (ot.pct > kUnrecordedWaitRefusePct) {
    return share_refused(ot.pct, "runtime calls that kept the host while the GPU ran nothing", ot.example,
                         "a first call's one-time cost, not the job's steady state, and clocks chosen for this step "
                         "would not be the job's; record a later step");
  }
  const double err = (*an)->replay_error_pct;
  if (!(std::abs(err) > kReplayRefusePct)) return {};
  return make_error(where,
                    fmt::format("its replay takes {:+.1f} % the time the trace measured (more than {:g} % off): "
                                "clocks chosen on that replay would not be this job's",
                                err, kReplayRefusePct),
                    note);
}

Result<std::vector<std::string>> run_warnings(Session& s) {
  auto ev = s.evaluation();
  if (!ev) return ev.error();
  std::vector<std::string> warnings = check_warnings_of(s, **s.solution());
  double eval_gap = 0;
  for (size_t i = 0; i < 2 && i < (*ev)->size(); ++i) {
    const EvaluatedPlan& r = (**ev)[i];
    eval_gap = std::max(eval_gap, optimize::energy_gap_pct(r.predicted_energy_j, r.measured.energy_j));
  }
  if (eval_gap > optimize::kEnergyDoubtPct) {
    warnings.push_back(fmt::format("the evaluation measured a step energy {:.1f} % away from the models' prediction "
                                   "(default clocks or policy; more than {:g} %): the predicted saving does not hold, "
                                   "the measured one (results.csv) does",
                                   eval_gap, optimize::kEnergyDoubtPct));
  }
  return warnings;
}

Result<json> summary_document(Session& s, const RunInfo& run) {
  auto ev = s.evaluation();
  if (!ev) return ev.error();
  auto warnings = run_warnings(s);
  if (!warnings) return warnings.error();
  const std::vector<EvaluatedPlan>& plans = **ev;
  const analysis::Workload& w = **s.workload();
  const pack::Packing& p = **s.packing();
  const optimize::Checked& c = **s.solution();
  const session::Options& o = s.options();
  auto predicted = [](const EvaluatedPlan& r) {
    return json{{"time_us", double(r.predicted_time_ns) / 1e3}, {"energy_j", r.predicted_energy_j}};
  };
  json sm;
  sm["device"] = s.profile().name;
  sm["evaluated_on"] = s.bench().spec_text();
  sm["max_slowdown"] = o.optimize.max_slowdown;
  sm["reserve"] = o.optimize.reserve;
  sm["profiled"] = o.profiled_dir.empty() ? s.bench().spec_text() : o.profiled_dir;
  sm["inputs"] = run.inputs;
  sm["ranks"] = w.ranks.size();
  sm["events"] = w.events;
  sm["gpu_ops"] = p.kernel_ops;
  sm["replay_error_pct"] = (*s.analysis())->replay_error_pct;
  sm["default_clock_mhz"] = s.default_clock_mhz();
  sm["step_time_us"] = {{"default", plans[0].measured.mean_step_ns() / 1e3}, {"policy", plans[1].measured.mean_step_ns() / 1e3}};
  sm["energy_j"] = {{"default", plans[0].measured.energy_j}, {"policy", plans[1].measured.energy_j}};
  sm["predicted"] = {{"default", predicted(plans[0])}, {"policy", predicted(plans[1])}};
  sm["policy"] = {{"saving_pct", plans[1].saving_pct}, {"slowdown_pct", plans[1].slowdown_pct}};
  sm["policy_from"] = c.solution.policy_from;
  json bl = json::object();
  for (size_t i = 2; i < plans.size(); ++i)
    bl[plans[i].name] = {{"saving_pct", plans[i].saving_pct}, {"slowdown_pct", plans[i].slowdown_pct}};
  sm["baselines"] = bl;
  sm["margin"] = margin_json(measured_margin(plans, o.optimize.max_slowdown, o.optimize.reserve));
  sm["warnings"] = *warnings;
  sm["packs"] = p.packs.size();
  sm["signatures"] = p.signatures.size();
  sm["profiled_units"] = p.profiled_units;
  sm["kernel_units"] = p.kernel_units;
  sm["profiling_reduction"] = p.reduction();
  sm["replica_sets"] = p.replica_sets;
  sm["profiled_units_per_gpu"] = p.per_gpu_units;
  sm["profiled_clocks_mhz"] = profiled_clocks(s);
  if (auto m = s.models()) sm["energy_fit"] = energy_fit_json(**m);
  auto aj = analyze_document(s, false);
  if (!aj) return aj.error();
  sm["critical_path"] = {{"length_us", aj->at("critical_path").value("length_us", 0.0)},
                         {"breakdown", aj->at("critical_path").value("breakdown", json::object())}};
  sm["solve_ms"] = c.solution.solve_ms;
  sm["replays"] = c.solution.replays;
  if (s.checks()) sm["check"] = optimize::check_json(c);
  json stage_ms = json::object();
  for (const auto& [k, v] : s.stage_ms()) stage_ms[k] = v;
  for (const auto& [k, v] : run.extra_stage_ms) stage_ms[k] = v;
  sm["stage_ms"] = stage_ms;
  return sm;
}

// ---- views ----

std::unique_ptr<View> analyze_json(bool per_kernel) {
  return json_view("analyze.json", [per_kernel](Session& s) { return analyze_document(s, per_kernel); });
}

std::unique_ptr<View> analyze_text() {
  return make_view("analyze.txt", [](Session& s) -> Result<std::string> {
    auto an = s.analysis();
    if (!an) return an.error();
    return analysis::to_text(**s.workload(), **an);
  });
}

std::unique_ptr<View> kernels_csv() {
  return make_view("kernels.csv", [](Session& s) -> Result<std::string> {
    auto an = s.analysis();
    if (!an) return an.error();
    return analysis::kernels_csv(**s.workload(), **an);
  });
}

std::unique_ptr<View> critical_path_csv() {
  return make_view("critical_path.csv", [](Session& s) -> Result<std::string> {
    auto an = s.analysis();
    if (!an) return an.error();
    return analysis::critical_path_csv(**s.workload(), **an);
  });
}

std::unique_ptr<View> whatif_json(std::vector<analysis::Scale> scales,
                                  std::optional<analysis::TopologyQuestion> topology) {
  return json_view("whatif.json", [scales = std::move(scales), topology = std::move(topology)](Session& s) {
    return whatif_document(s, scales, topology ? &*topology : nullptr);
  });
}

std::unique_ptr<View> whatif_text(std::vector<analysis::Scale> scales,
                                  std::optional<analysis::TopologyQuestion> topology) {
  return make_view("whatif.txt", [scales = std::move(scales), topology = std::move(topology)](
                                     Session& s) -> Result<std::string> {
    auto j = whatif_document(s, scales, topology ? &*topology : nullptr);
    if (!j) return j.error();
    return whatif_text(*j);
  });
}

std::unique_ptr<View> pack_json(bool all, int fidelity_mhz) {
  return json_view("pack.json", [all, fidelity_mhz](Session& s) { return pack_document(s, all, fidelity_mhz); });
}

std::unique_ptr<View> pack_text(int fidelity_mhz) {
  return make_view("pack.txt", [fidelity_mhz](Session& s) -> Result<std::string> {
    auto p = s.packing();
    if (!p) return p.error();
    std::string out = pack::to_text(**p);
    if (fidelity_mhz == 0) return out;
    auto j = pack_document(s, false, fidelity_mhz);
    if (!j) return j.error();
    const json& f = (*j)["fidelity"];
    out += fmt::format("fidelity at {} MHz (not profiled unless in the plan), predicted vs emulated truth:\n", fidelity_mhz);
    out += fmt::format("  step: time {:+.2f} %, energy {:+.2f} %\n", f["step_time_error_pct"].get<double>(),
                       f["step_energy_error_pct"].get<double>());
    for (const char* k : {"pack_time_abs_error_pct", "pack_energy_abs_error_pct"}) {
      const json& e = f[k];
      out += fmt::format("  {} packs, |{} error|: median {:.2f} %, p90 {:.2f} %, max {:.2f} %, busy-weighted mean {:.2f} %\n",
                         f["packs"].get<size_t>(), std::string(k).find("time") != std::string::npos ? "time" : "energy",
                         e["median"].get<double>(), e["p90"].get<double>(), e["max"].get<double>(),
                         e["weighted_mean"].get<double>());
    }
    return out;
  });
}

std::unique_ptr<View> packs_csv(bool policy_clocks) {
  return make_view("packs.csv", [policy_clocks](Session& s) -> Result<std::string> {
    auto p = s.packing();
    if (!p) return p.error();
    if (!policy_clocks) return pack::packs_csv(**p);
    auto sol = s.solution();
    if (!sol) return sol.error();
    return pack::packs_csv(**p, &(*sol)->solution.policy.pack_clock_mhz);
  });
}

std::unique_ptr<View> fidelity_csv(int fidelity_mhz) {
  return make_view("fidelity.csv", [fidelity_mhz](Session& s) -> Result<std::string> {
    auto f = s.pack_fidelity(fidelity_mhz);
    if (!f) return f.error();
    std::string out =
        "pack,rank,first_name,clock_mhz,predicted_busy_us,true_busy_us,time_error_pct,predicted_energy_j,true_energy_j,"
        "energy_error_pct\n";
    auto pct = [](double p, double t) { return t > 0 ? 100.0 * (p / t - 1) : 0.0; };
    for (const auto& r : (*f)->packs) {
      std::string name = r.first_name;
      std::replace(name.begin(), name.end(), '"', '\'');
      const double predicted_us = r.predicted_busy_ns / 1e3, true_us = double(r.true_busy_ns) / 1e3;
      out += fmt::format("{},{},\"{}\",{},{:.3f},{:.3f},{:.3f},{:.6f},{:.6f},{:.3f}\n", r.pack.value(), r.rank_id, name,
                         (*f)->clock_mhz, predicted_us, true_us, pct(predicted_us, true_us), r.predicted_energy_j,
                         r.true_energy_j, pct(r.predicted_energy_j, r.true_energy_j));
    }
    return out;
  });
}

std::unique_ptr<View> optimize_json() { return json_view("optimize.json", optimize_document); }

std::unique_ptr<View> optimize_text() {
  return make_view("optimize.txt", [](Session& s) -> Result<std::string> {
    auto c = s.solution();
    if (!c) return c.error();
    const optimize::Solution& sol = (*c)->solution;
    const pack::Packing& p = **s.packing();
    std::string out = fmt::format("{} packs on {} GPU(s), {} signatures profiled at {} MHz; solved in {:.1f} ms ({} replays)\n",
                                  p.packs.size(), p.gpus.size(), p.signatures.size(),
                                  fmt::join(profiled_clocks(s), ","), sol.solve_ms, sol.replays);
    auto row = [&](const optimize::Plan& pl) {
      out += fmt::format("  {:<13} {:10.3f} ms  {:10.3f} J  {:+6.2f} % time  {:6.2f} % energy saved (predicted)\n",
                         pl.name, double(pl.time_ns) / 1e6, pl.energy_j,
                         pct_change(double(pl.time_ns), double(sol.default_plan.time_ns)),
                         pct_saved(pl.energy_j, sol.default_plan.energy_j));
    };
    for (const auto& r : (*c)->rounds) {
      out += fmt::format("check on {}: {} plan (reserve {:.2f}): {:+.2f} % predicted, {:+.2f} % measured ({} steps, bound {:+.2f} %): {}\n",
                         s.bench().spec_text(), r.plan, r.reserve, r.predicted_pct, r.measured_pct, r.steps, r.bound_pct,
                         r.accepted ? "passed" : "over the check's limit");
    }
    if ((*c)->fell_back) out += "  no plan passed the check: the policy keeps the default clocks\n";
    if ((*c)->energy_fell_back)
      out += "  the checked plan measured no less energy than the default clocks: the policy keeps the default clocks\n";
    row(sol.default_plan);
    row(sol.policy);
    for (const auto& b : sol.baselines) row(b);
    out += margin_line(predicted_margin(sol), "predicted");
    if (sol.policy_from == "default" || sol.policy_from == "dp") return out;
    if (sol.policy_from == "first_solve") {
      out += "  (the search started from the first solve's policy, before the extra profiled clocks, which the refitted "
             "models price below the DP's and the baselines')\n";
      return out;
    }
    bool as_is = false;
    for (const auto& b : sol.baselines) as_is |= b.name == sol.policy_from && b.pack_clock_mhz == sol.policy.pack_clock_mhz;
    if (!as_is) {
      out += fmt::format("  (the search started from the {} plan, which the models price below the DP's)\n", sol.policy_from);
      return out;
    }
    // The policy is the passing plan that measured the least energy in the check: where the models price
    // another passing plan lower, the margin above is negative, and this says why.
    auto measured = [&](const std::string& plan) -> double {
      double e = 0;
      for (const auto& r : (*c)->rounds)
        if (r.plan == plan && r.accepted) e = r.measured_energy_j;
      return e;
    };
    const optimize::Plan* cheaper = nullptr;
    for (const auto& b : sol.baselines) {
      if (b.name != sol.policy_from && b.energy_j < sol.policy.energy_j && measured(b.name) > 0 &&
          (cheaper == nullptr || b.energy_j < cheaper->energy_j))
        cheaper = &b;
    }
    const double mine = measured(sol.policy_from);
    if (cheaper != nullptr && mine > 0) {
      out += fmt::format("  (the policy is the {} plan as it is: of the plans that passed the check it measured the least "
                         "energy, {:.3f} J a step against {:.3f} J for {}, which the models price lower)\n",
                         sol.policy_from, mine, measured(cheaper->name), cheaper->name);
    } else {
      out += fmt::format("  (the policy is the {} plan as it is)\n", sol.policy_from);
    }
    return out;
  });
}

std::unique_ptr<View> policy_file() {
  return make_view("policy.json", [](Session& s) -> Result<std::string> {
    auto c = s.solution();
    if (!c) return c.error();
    return optimize::policy_json(**s.problem(), (*c)->solution, s.options().optimize.max_slowdown,
                                 s.options().optimize.reserve)
               .dump(1) +
           "\n";
  });
}

std::unique_ptr<View> evaluate_json() { return json_view("evaluate.json", evaluate_document); }

// The measured plans as a table: name, step time, energy, time and energy against the default clocks;
// then the policy's margin over the best baseline within the bound.
std::string measured_table(const std::vector<EvaluatedPlan>& plans, double max_slowdown, double reserve) {
  std::string out;
  for (const EvaluatedPlan& r : plans) {
    out += fmt::format("  {:<13} {:10.3f} ms  {:10.3f} J  {:+6.2f} % time  {:6.2f} % energy saved\n", r.name,
                       r.measured.mean_step_ns() / 1e6, r.measured.energy_j, r.slowdown_pct, r.saving_pct);
  }
  return out + margin_line(measured_margin(plans, max_slowdown, reserve), "measured");
}

std::unique_ptr<View> evaluate_text() {
  return make_view("evaluate.txt", [](Session& s) -> Result<std::string> {
    auto ev = s.evaluation();
    if (!ev) return ev.error();
    return fmt::format("true behaviour on {} ({} steps each, first left out):\n", s.options().device,
                       s.options().eval_steps) +
           measured_table(**ev, (*s.policy())->max_slowdown, (*s.policy())->reserve);
  });
}

std::unique_ptr<View> run_text() {
  return make_view("run.txt", [](Session& s) -> Result<std::string> {
    auto ev = s.evaluation();
    if (!ev) return ev.error();
    return fmt::format("true behaviour on the emulated GPU ({} steps each, first left out):\n", s.options().eval_steps) +
           measured_table(**ev, s.options().optimize.max_slowdown, s.options().optimize.reserve);
  });
}

std::unique_ptr<View> results_csv() {
  return make_view("results.csv", [](Session& s) -> Result<std::string> {
    auto ev = s.evaluation();
    if (!ev) return ev.error();
    // vs_best_baseline_pts: each plan's saving less that of the best baseline within the bound.
    const Margin m = measured_margin(**ev, s.options().optimize.max_slowdown, s.options().optimize.reserve);
    std::string out =
        "name,predicted_time_us,predicted_energy_j,true_time_us,true_energy_j,saving_pct,slowdown_pct,"
        "vs_best_baseline_pts\n";
    for (const EvaluatedPlan& r : **ev) {
      out += fmt::format("{},{:.3f},{:.6f},{:.3f},{:.6f},{:.3f},{:.3f},{:.3f}\n", r.name, double(r.predicted_time_ns) / 1e3,
                         r.predicted_energy_j, r.measured.mean_step_ns() / 1e3, r.measured.energy_j, r.saving_pct,
                         r.slowdown_pct, r.saving_pct - m.baseline_saving_pct);
    }
    return out;
  });
}

std::unique_ptr<View> summary_json(RunInfo run) {
  return json_view("summary.json", [run = std::move(run)](Session& s) -> Result<json> {
    auto sm = summary_document(s, run);
    if (!sm) return sm.error();
    return json{{"summary", std::move(*sm)}};
  });
}

std::unique_ptr<View> report_html(RunInfo run) {
  return make_view("report.html", [run = std::move(run)](Session& s) -> Result<std::string> {
    auto d = report_data(s, run, true);
    if (!d) return d.error();
    return render_html(*d);
  });
}

std::unique_ptr<View> overlay(uint32_t rank) {
  return make_view("overlay", [rank](Session& s) -> Result<std::string> {
                     auto d = report_data(s, {}, false);
                     if (!d) return d.error();
                     const std::string& path = d->workload->graph.rank_paths[rank];
                     auto text = read_text(path);
                     if (!text) return text.error();
                     return overlay_json(*text, path, *d, rank);
                   });
}

}  // namespace emo::report
