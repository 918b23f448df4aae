// Measured DVFS datasets (time and energy of many units at many SM clocks) and the model check on
// them: fit each unit from a few clocks, predict the others, report the mean absolute percentage
// error (MAPE) of time and energy. Three layouts: Perseus/lowtime stage profiles, NV-DVFS-Benchmark
// per-kernel sweeps and GPU-DVFS-Dataset workload tables. Also a pooled calibration of the device
// priors (V(f) knee and floor, memory knee and exponent) from a full sweep.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "emo/base/result.h"
#include "emo/device/profile.h"
#include "emo/model/models.h"

namespace emo::model {

enum class Format { kPerseus, kNvDvfs, kGpuDvfs };

// "perseus" | "nvdvfs" | "gpudvfs"; anything else -> Error listing them.
Result<Format> parse_format(std::string_view name);
std::string_view format_name(Format format);

// One unit: its samples at distinct clocks, ascending. Repeated rows of a clock are averaged.
struct Unit {
  std::string name;
  std::vector<Point> samples;
};

struct Dataset {
  std::string path;
  Format format = Format::kPerseus;
  std::vector<std::string> files;  // every file read (gpudvfs: the performance and the power table)
  std::string time_unit;           // "s", or "relative" where the data is normalized
  std::vector<Unit> units;
  size_t rows = 0;            // data rows read
  size_t merged_rows = 0;     // rows averaged into an earlier row of the same unit and clock
};

// Reads a dataset. Perseus: columns stage,instruction,frequency,time,energy (unit = stage/instruction).
// nvdvfs: benchmark,arg,kernel,sm_mhz,time_s and energy_j (or avg_power_w) (unit = benchmark/arg/kernel).
// gpudvfs: dataset_performance.csv + dataset_power.csv side by side (either path may be given): a row per
// workload, a column per clock; time = 1/performance (relative), energy = power × time (relative).
// A missing column, a non-number or a non-positive time/energy -> Error naming the file, line and column.
Result<Dataset> load_dataset(const std::string& path, Format format);

// The built-in profile that matches the dataset's GPU, from its format and file name ("" if unknown).
std::string suggest_device(const Dataset& dataset);

// Clocks (MHz) present in every unit, ascending.
std::vector<int> common_clocks(const Dataset& dataset);
// Three fit clocks chosen from the common clocks: the highest, the lowest at or above 0.45·highest
// (lower clocks save no energy and some datasets are unreliable there), and the one nearest their
// middle. Error when the data has fewer than 3 common clocks.
Result<std::vector<int>> auto_fit_clocks(const Dataset& dataset);

struct Mape {
  double time_pct = 0;
  double energy_pct = 0;
  size_t n = 0;  // predictions averaged
};

struct UnitCheck {
  std::string name;
  bool fitted = false;
  std::string skipped;  // why not fitted
  UnitModel model;
  Mape mape;
};

struct ClockCheck {
  int clock_mhz = 0;
  Mape mape;
};

struct CheckReport {
  std::string dataset;
  Format format = Format::kPerseus;
  std::string device;
  std::vector<int> fit_clocks;
  bool fit_clocks_auto = false;
  Mape overall;        // every measured clock that was not a fit clock, every fitted unit
  Mape within_fit;     // only clocks between the lowest and the highest fit clock
  Mape outside_fit;    // only clocks outside that range (extrapolation)
  size_t units_fitted = 0;
  size_t units_skipped = 0;
  std::vector<UnitCheck> units;
  std::vector<ClockCheck> clocks;
};

// Fits every unit from `fit_clocks` and predicts its other clocks. An empty `fit_clocks` picks them
// with auto_fit_clocks. A fit clock in no unit -> Error (note: the clocks in the data); a unit that
// lacks one is skipped and counted.
Result<CheckReport> model_check(const Dataset& dataset, const device::DeviceProfile& profile,
                                std::vector<int> fit_clocks);

// Device priors fitted to a whole sweep, pooled over units (clocks >= min_clock_mhz, power-capped
// points left out): the V(f) knee and floor, the memory knee fraction and exponent, and the median
// per-unit P_const and dynamic power.
struct Calibration {
  double v_knee_mhz = 0;
  double v_floor_rel = 0;
  double power_rms_pct = 0;
  double mem_knee_frac = 0;
  double mem_gamma = 0;
  double time_rms_pct = 0;
  double const_w_median = 0;
  double dynamic_w_median = 0;
  size_t units = 0;
  size_t points = 0;
};
Result<Calibration> calibrate(const Dataset& dataset, const device::DeviceProfile& profile, double min_clock_mhz);

}  // namespace emo::model
