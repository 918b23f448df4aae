// `emo calibrate`: run the project's microbenchmarks at several locked SM clocks and fit a device
// profile to what they measure — the V(f) knee and floor, the power-model coefficients, the memory
// knee of the time model and the idle power — starting from the built-in profile the device
// resembles. Clocks are locked through a ClockGuard, so they are reset on success, on an error and on
// SIGINT/SIGTERM. The fit itself (`fit_profile`) takes measurements only and has no I/O.
// docs/calibrate.md describes the method.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "emo/base/result.h"
#include "emo/device/device.h"
#include "emo/device/profile.h"

namespace emo::calibrate {

// One microbenchmark run at one locked clock, and how the fitted power model reproduces it.
struct Measurement {
  int clock_mhz = 0;
  device::BenchKind kind = device::BenchKind::kFmaLoop;
  double flops_per_byte = 0;  // kIntensity only
  device::BenchRun run;
  // Filled by the fit.
  bool in_power_fit = false;   // false: idle, or left out as throttled (see `excluded`)
  std::string excluded;        // why a busy run was left out of the power fit; empty otherwise
  double fitted_power_w = 0;   // the fitted model's power here (0: idle, not modelled)
  double power_error_pct = 0;  // 100·(fitted − measured)/measured
};

struct CalibrateOptions {
  std::vector<int> clocks_mhz;  // empty: default_clocks(supported, num_clocks)
  int num_clocks = 6;
  double min_seconds = 2.0;                      // per run: energy counters update every 10–100 ms
  std::vector<double> intensities = {2, 8, 32};  // FMA flops per byte of the roofline sweep
  std::string date;                              // written into the sources; empty = today (UTC)
  // Called after every run, e.g. to print progress; may be empty.
  std::function<void(const Measurement&)> progress;
};

struct FitSummary {
  int power_points = 0;             // busy runs in the power fit
  double power_rms_pct = 0;         // relative rms error of the fitted power over those runs
  double power_max_pct = 0;         // the largest one
  double copy_time_rms_pct = 0;     // stream-copy time vs the fitted memory knee and exponent
  double fma_time_rms_pct = 0;      // FMA-loop time vs c/f: near 0 when every lock took effect
  double gemm_dynamic_w = 0;        // tensor-core GEMM's dynamic power at f_max (dynamic_w is the FMA loop's)
  bool mem_knee_seen = false;       // the copy slowed down within the calibrated clocks
  bool voltage_floor_seen = false;  // the V(f) knee lies within the calibrated clocks
};

struct CalibrationResult {
  std::string device_spec;   // "nvml:0"
  std::string model_name;    // what the device reports
  std::string base_profile;  // the built-in profile the fit started from
  std::string date;
  std::vector<int> clocks_mhz;  // calibrated clocks, ascending
  std::vector<Measurement> measurements;
  FitSummary fit;
  device::DeviceProfile profile;  // the fitted profile
  std::vector<std::string> warnings;
};

// `count` clocks from the table, evenly spaced from max(lowest, 0.3·highest) to the highest, each
// snapped to a supported clock (fewer when the table is short). Example, A100 (210..1410 step 15),
// count 6: 420, 615, 825, 1020, 1215, 1410.
std::vector<int> default_clocks(const std::vector<int>& supported_mhz, int count = 6);

// Measures and fits. The clock is reset before this returns, whatever happens.
Result<CalibrationResult> calibrate(device::Device& device, const CalibrateOptions& options);

// The fit alone: `base` supplies what the measurements do not determine; `supported_mhz` becomes the
// profile's clock table; `provenance` ("emo calibrate on nvml:0, 2026-12-01") goes into every source.
// Needs FMA-loop and stream-copy runs at 3 or more distinct clocks.
Result<CalibrationResult> fit_profile(const device::DeviceProfile& base,
                                      const std::vector<int>& supported_mhz,
                                      std::vector<Measurement> measurements, const std::string& provenance);

// {"schema": "emo-calibration/1", "device", "model", "base_profile", "date", "clocks_mhz",
//  "measurements": [...], "fit": {...}, "warnings": [...], "profile": {the profile_to_json schema}}.
std::string to_json(const CalibrationResult& result, int indent = 2);
// What `emo calibrate` prints: the device, the clocks and runs, and the fitted V(f), power, memory and idle.
std::string to_text(const CalibrationResult& result);

}  // namespace emo::calibrate
