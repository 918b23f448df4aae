// One `emo model-check` job (include/emo/model/check_report.h): the dataset and device, the model
// check or the calibration, and the JSON document and the text report of the result.
#include "emo/model/check_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace emo::model {

namespace {

nlohmann::json mape_json(const Mape& m) {
  return {{"time_mape_pct", m.time_pct}, {"energy_mape_pct", m.energy_pct}, {"predictions", m.n}};
}

}  // namespace

Result<CheckJobResult> run_check_job(const CheckJobOptions& o) {
  if (o.worst < 0) return make_error("--worst", "must be >= 0");
  if (!(o.min_clock_mhz >= 0 && o.min_clock_mhz <= 1e5))
    return make_error("--min-clock", "must be a clock in MHz (0, the default, keeps every clock)");
  auto data = load_dataset(o.file, o.format);
  if (!data) return data.error();
  std::string dev = o.device.empty() ? suggest_device(*data) : o.device;
  if (dev.empty())
    return make_error(o.file, "cannot tell which GPU measured this dataset",
                      "pass --device NAME or a profile JSON file");
  auto profile = device::load_profile(dev);
  if (!profile) return profile.error();
  CheckJobResult r;
  r.options = o;
  r.dataset = std::move(*data);
  r.profile = std::move(*profile);
  if (o.calibrate) {
    auto cal = calibrate(r.dataset, r.profile, o.min_clock_mhz);
    if (!cal) return cal.error();
    r.calibration = std::move(*cal);
  } else {
    auto rep = model_check(r.dataset, r.profile, o.fit_clocks);
    if (!rep) return rep.error();
    r.report = std::move(*rep);
  }
  return r;
}

nlohmann::json check_report_json(const CheckReport& r, const Dataset& d) {
  nlohmann::json j;
  j["dataset"] = r.dataset;
  j["files"] = d.files;
  j["format"] = std::string(format_name(r.format));
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

std::string check_report_text(const CheckReport& r, const Dataset& d, int worst) {
  std::string clocks;
  for (int f : r.fit_clocks) {
    if (!clocks.empty()) clocks += ',';
    clocks += std::to_string(f);
  }
  std::string out =
      fmt::format("{} ({}, {} units, device {})\n", r.dataset, format_name(r.format), d.units.size(), r.device);
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
    out += fmt::format("{}{}: {:.1f}/{:.1f}", i % 6 == 0 ? "\n  " : "  ", c.clock_mhz, c.mape.time_pct,
                       c.mape.energy_pct);
  }
  out += "\n";
  std::vector<const UnitCheck*> fitted;
  for (const auto& u : r.units) {
    if (u.fitted) fitted.push_back(&u);
  }
  std::sort(fitted.begin(), fitted.end(), [](const UnitCheck* a, const UnitCheck* b) {
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
  return out;
}

nlohmann::json calibration_json(const Calibration& cal, const std::string& dataset_path, const std::string& device,
                                double min_clock_mhz) {
  return {{"dataset", dataset_path},
          {"device", device},
          {"min_clock_mhz", min_clock_mhz},
          {"units", cal.units},
          {"points", cal.points},
          {"calibration",
           {{"v_knee_mhz", cal.v_knee_mhz},
            {"v_floor_rel", cal.v_floor_rel},
            {"power_rms_pct", cal.power_rms_pct},
            {"mem_knee_frac", cal.mem_knee_frac},
            {"mem_gamma", cal.mem_gamma},
            {"time_rms_pct", cal.time_rms_pct},
            {"const_w_median", cal.const_w_median},
            {"dynamic_w_median", cal.dynamic_w_median}}}};
}

std::string calibration_text(const Calibration& cal, const std::string& dataset_path, double min_clock_mhz) {
  return fmt::format(
      "{}: calibrated on {} units, {} points (clocks >= {:g} MHz, power-capped points left out)\n"
      "  V(f): knee {:.0f} MHz, floor {:.3f} x V(f_max)   (power rms {:.2f} %)\n"
      "  memory: knee {:.3f} x f_max, exponent {:.2f}   (time rms {:.2f} %)\n"
      "  per-unit median: P_const {:.1f} W, dynamic {:.1f} W\n",
      dataset_path, cal.units, cal.points, min_clock_mhz, cal.v_knee_mhz, cal.v_floor_rel, cal.power_rms_pct,
      cal.mem_knee_frac, cal.mem_gamma, cal.time_rms_pct, cal.const_w_median, cal.dynamic_w_median);
}

nlohmann::json check_job_json(const CheckJobResult& r) {
  if (r.calibration)
    return calibration_json(*r.calibration, r.options.file, r.profile.name, r.options.min_clock_mhz);
  return check_report_json(*r.report, r.dataset);
}

std::string check_job_text(const CheckJobResult& r) {
  if (r.calibration) return calibration_text(*r.calibration, r.options.file, r.options.min_clock_mhz);
  return check_report_text(*r.report, r.dataset, r.options.worst);
}

}  // namespace emo::model
