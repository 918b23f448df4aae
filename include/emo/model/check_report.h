// One `emo model-check` job as a library call, for the CLI and every other front end: load the
// dataset, pick the device profile, then either the model check (fit from a few clocks, predict the
// rest) or the pooled calibration of the device priors; and the JSON document and the text report
// of the result. Nothing here writes a file or prints.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "emo/base/result.h"
#include "emo/device/profile.h"
#include "emo/model/datasets.h"

namespace emo::model {

// The `emo model-check` options; each field says the flag it comes from. Errors name the flag.
struct CheckJobOptions {
  std::string file;                // the dataset (CSV; gpudvfs: either of its two tables)
  Format format = Format::kPerseus;  // --format (parse_format)
  std::vector<int> fit_clocks;     // --fit-clocks, MHz (empty: 3 chosen from the data, auto_fit_clocks)
  std::string device;              // --device: profile name or JSON file ("": suggest_device)
  bool calibrate = false;          // --calibrate: fit the device priors to the whole sweep instead
  double min_clock_mhz = 0;        // --min-clock: with --calibrate, leave out clocks below this (0 to 1e5)
  int worst = 5;                   // --worst: how many worst units the text report lists (>= 0)
};

struct CheckJobResult {
  CheckJobOptions options;
  Dataset dataset;
  device::DeviceProfile profile;
  std::optional<CheckReport> report;       // without --calibrate
  std::optional<Calibration> calibration;  // with --calibrate
};

// Bad options -> Error naming the flag (--worst, --min-clock, --fit-clocks); a bad file -> the
// loader's Error; a dataset whose GPU is unknown, without --device -> Error naming the file.
Result<CheckJobResult> run_check_job(const CheckJobOptions& options);

// The machine-readable result (what `emo model-check --json` writes, without the final newline).
nlohmann::json check_job_json(const CheckJobResult& result);
// The human report (what `emo model-check` prints), '\n'-terminated lines.
std::string check_job_text(const CheckJobResult& result);

// The pieces: the model check's document and report (its worst `worst` units listed) ...
nlohmann::json check_report_json(const CheckReport& report, const Dataset& dataset);
std::string check_report_text(const CheckReport& report, const Dataset& dataset, int worst);
// ... and the calibration's (`dataset_path` as given, the device profile's name, the --min-clock).
nlohmann::json calibration_json(const Calibration& calibration, const std::string& dataset_path,
                                const std::string& device, double min_clock_mhz);
std::string calibration_text(const Calibration& calibration, const std::string& dataset_path, double min_clock_mhz);

}  // namespace emo::model
