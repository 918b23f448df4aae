// `emo model-check FILE --format perseus|nvdvfs|gpudvfs [--fit-clocks A,B,C]`: model fidelity on a
// measured DVFS dataset — fit each unit from a few clocks, predict the others, report time and
// energy MAPE overall, per clock and per unit. `--calibrate` fits the device priors to the whole
// sweep instead (how the fitted values of the built-in profiles were obtained).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "emo/model/datasets.h"

namespace emo::cli {

namespace {

struct ModelCheckArgs {
  std::string file;
  std::string format;
  std::string fit_clocks;
  std::string device;
  std::string json_out;
  bool calibrate = false;
  double min_clock = 0;
  int worst = 5;
};


nlohmann::json mape_json(const model::Mape& m) {
  return {{"time_mape_pct", m.time_pct}, {"energy_mape_pct", m.energy_pct}, {"predictions", m.n}};
}

nlohmann::json report_json(const model::CheckReport& r, const model::Dataset& d) {
  nlohmann::json j;
  j["dataset"] = r.dataset;
  j["files"] = d.files;
  j["format"] = std::string(model::format_name(r.format));
  j["device"] = r.device;
  j["time_unit"] = d.time_unit;
  j["fit_clocks"] = r.fit_clocks;
  j["fit_clocks_auto"] = r.fit_clocks_auto;
  j["time_mape_pct"] = r.overall.time_pct;
  j["energy_mape_pct"] = r.overall.energy_pct;
  j["predictions"] = r.overall.n;
  j["within_fit_range"] = mape_json(r.within_fit);
  j["outside_fit_range"] = mape_json(r.outside_fit);
  j["units_fitted"] = r.units_fitted;
  j["units_skipped"] = r.units_skipped;
  j["units"] = nlohmann::json::array();
  for (const auto& u : r.units) {
    nlohmann::json ju = {{"name", u.name}};
    if (!u.fitted) {
      ju["skipped"] = u.skipped;
    } else {
      ju.update(mape_json(u.mape));
      ju["model"] = {{"compute_s", u.model.time.compute_s}, {"memory_s", u.model.time.memory_s},
                     {"overhead_s", u.model.time.overhead_s}, {"const_w", u.model.power.const_w},
                     {"dynamic_w", u.model.power.dynamic_w}, {"cap_w", u.model.cap_w}};
    }
    j["units"].push_back(std::move(ju));
  }
  j["clocks"] = nlohmann::json::array();
  for (const auto& c : r.clocks) {
    nlohmann::json jc = {{"clock_mhz", c.clock_mhz}};
    jc.update(mape_json(c.mape));
    j["clocks"].push_back(std::move(jc));
  }
  return j;
}

void print_report(const model::CheckReport& r, const model::Dataset& d, int worst) {
  std::string clocks;
  for (int f : r.fit_clocks) {
    if (!clocks.empty()) clocks += ',';
    clocks += std::to_string(f);
  }
  std::string out = fmt::format("{} ({}, {} units, device {})\n", r.dataset, model::format_name(r.format),
                                d.units.size(), r.device);
  out += fmt::format("fit clocks: {} MHz{}\n", clocks,
                     r.fit_clocks_auto ? " (chosen automatically: the highest, the lowest >= 0.45 x highest, and the "
                                         "one nearest their middle; --fit-clocks picks others)"
                                       : "");
  out += fmt::format("time MAPE {:.2f} %, energy MAPE {:.2f} % over {} predicted (unit, clock) pairs\n",
                     r.overall.time_pct, r.overall.energy_pct, r.overall.n);
  if (r.within_fit.n && r.outside_fit.n) {
    out += fmt::format("  within {}..{} MHz: time {:.2f} %, energy {:.2f} % ({}); outside: time {:.2f} %, energy "
                       "{:.2f} % ({})\n",
                       r.fit_clocks.front(), r.fit_clocks.back(), r.within_fit.time_pct, r.within_fit.energy_pct,
                       r.within_fit.n, r.outside_fit.time_pct, r.outside_fit.energy_pct, r.outside_fit.n);
  }
  if (r.units_skipped) out += fmt::format("  {} units skipped (see --json)\n", r.units_skipped);
  out += "per clock (MHz: time % / energy %):";
  for (size_t i = 0; i < r.clocks.size(); ++i) {
    const auto& c = r.clocks[i];
    out += fmt::format("{}{}: {:.1f}/{:.1f}", i % 6 == 0 ? "\n  " : "  ", c.clock_mhz, c.mape.time_pct, c.mape.energy_pct);
  }
  out += "\n";
  std::vector<const model::UnitCheck*> fitted;
  for (const auto& u : r.units) {
    if (u.fitted) fitted.push_back(&u);
  }
  std::sort(fitted.begin(), fitted.end(), [](const model::UnitCheck* a, const model::UnitCheck* b) {
    return std::max(a->mape.time_pct, a->mape.energy_pct) > std::max(b->mape.time_pct, b->mape.energy_pct);
  });
  if (worst > 0 && !fitted.empty()) {
    out += "worst units (time % / energy %):\n";
    size_t shown = std::min(fitted.size(), size_t(worst)), width = 0;
    for (size_t i = 0; i < shown; ++i) width = std::max(width, fitted[i]->name.size());
    for (size_t i = 0; i < shown; ++i) {
      out += fmt::format("  {:<{}} {:5.2f} / {:5.2f}\n", fitted[i]->name, width, fitted[i]->mape.time_pct,
                         fitted[i]->mape.energy_pct);
    }
  }
  std::fputs(out.c_str(), stdout);
}

int run(const ModelCheckArgs& a) {
  auto format = model::parse_format(a.format);
  if (!format) return fail(format.error());
  std::vector<int> fit;
  if (!a.fit_clocks.empty()) {
    auto c = parse_clock_list(a.fit_clocks, "--fit-clocks");
    if (!c) {
      fail(c.error());
      return kExitUsage;
    }
    fit = *c;
  }
  if (a.worst < 0) return fail(make_error("--worst", "must be >= 0"));
  if (!(a.min_clock >= 0 && a.min_clock <= 1e5))
    return fail(make_error("--min-clock", "must be a clock in MHz (0, the default, keeps every clock)"));
  auto data = model::load_dataset(a.file, *format);
  if (!data) return fail(data.error());
  std::string dev = a.device.empty() ? model::suggest_device(*data) : a.device;
  if (dev.empty())
    return fail(make_error(a.file, "cannot tell which GPU measured this dataset", "pass --device NAME or a profile JSON file"));
  auto profile = device::load_profile(dev);
  if (!profile) return fail(profile.error());

  if (a.calibrate) {
    auto cal = model::calibrate(*data, *profile, a.min_clock);
    if (!cal) return fail(cal.error());
    nlohmann::json j = {{"dataset", a.file},
                        {"device", profile->name},
                        {"min_clock_mhz", a.min_clock},
                        {"units", cal->units},
                        {"points", cal->points},
                        {"calibration",
                         {{"v_knee_mhz", cal->v_knee_mhz},
                          {"v_floor_rel", cal->v_floor_rel},
                          {"power_rms_pct", cal->power_rms_pct},
                          {"mem_knee_frac", cal->mem_knee_frac},
                          {"mem_gamma", cal->mem_gamma},
                          {"time_rms_pct", cal->time_rms_pct},
                          {"const_w_median", cal->const_w_median},
                          {"dynamic_w_median", cal->dynamic_w_median}}}};
    if (!a.json_out.empty()) {
      Status s = write_file_atomic(a.json_out, j.dump(1) + "\n");
      if (!s.ok()) return fail(s.error());
      if (a.json_out == "-") return kExitOk;
    }
    std::fputs(fmt::format("{}: calibrated on {} units, {} points (clocks >= {:g} MHz, power-capped points left out)\n"
                           "  V(f): knee {:.0f} MHz, floor {:.3f} x V(f_max)   (power rms {:.2f} %)\n"
                           "  memory: knee {:.3f} x f_max, exponent {:.2f}   (time rms {:.2f} %)\n"
                           "  per-unit median: P_const {:.1f} W, dynamic {:.1f} W\n",
                           a.file, cal->units, cal->points, a.min_clock, cal->v_knee_mhz, cal->v_floor_rel,
                           cal->power_rms_pct, cal->mem_knee_frac, cal->mem_gamma, cal->time_rms_pct,
                           cal->const_w_median, cal->dynamic_w_median)
                   .c_str(),
               stdout);
    return kExitOk;
  }

  auto rep = model::model_check(*data, *profile, fit);
  if (!rep) return fail(rep.error());
  if (!a.json_out.empty()) {
    Status s = write_file_atomic(a.json_out, report_json(*rep, *data).dump(1) + "\n");
    if (!s.ok()) return fail(s.error());
    if (a.json_out == "-") return kExitOk;
  }
  print_report(*rep, *data, a.worst);
  return kExitOk;
}

}  // namespace

void add_model_check(CLI::App& root, Action& action) {
  auto args = std::make_shared<ModelCheckArgs>();
  auto* sub = root.add_subcommand(
      "model-check",
      "Model fidelity on measured DVFS data: fit each unit (pipeline stage, kernel, workload) from a few SM clocks, "
      "predict the other measured clocks, report time and energy MAPE.");
  sub->add_option("file", args->file, "the dataset (CSV)")->required();
  sub->add_option("--format", args->format, "perseus (stage profile), nvdvfs (NV-DVFS-Benchmark slim CSV) or gpudvfs "
                                            "(GPU-DVFS-Dataset performance/power tables)")
      ->required();
  sub->add_option("--fit-clocks", args->fit_clocks, "clocks to fit from, A,B,C in MHz (default: 3 chosen from the data)");
  sub->add_option("--device", args->device, "device profile name or JSON file (default: from the format and file name)");
  sub->add_option("--json", args->json_out, "write the machine-readable result to FILE ('-' = stdout)");
  sub->add_option("--worst", args->worst, "how many worst units to list (default 5)");
  sub->add_flag("--calibrate", args->calibrate, "fit the device priors (V(f) knee/floor, memory knee/exponent) to the "
                                                "whole sweep instead");
  sub->add_option("--min-clock", args->min_clock, "with --calibrate: leave out clocks below this (MHz)");
  sub->callback([args, &action] { action = [args] { return run(*args); }; });
}

}  // namespace emo::cli
