// Device profiles: what EMO knows about one GPU model before it profiles anything — supported SM
// clocks, power limits, clock-switching latency, the shape of V(f) and the priors of the time and
// power models. Every number carries a `source` (a ../shared/dvfs file, an ANCHORS.md row, or
// "assumed: <why>") so that a reader can check it. Built-in profiles: v100, a100, h100, h200 (plus
// v100-pcie and a40, the GPUs of the measured DVFS datasets); a JSON file of the same schema works too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "emo/base/result.h"

namespace emo::device {

// A number with where it came from.
struct Sourced {
  double value = 0;
  std::string source;
};

// Supported SM clocks, ascending and distinct.
struct ClockTable {
  std::vector<int> mhz;
  std::string source;
};

// Core voltage relative to V(f_max): flat at `floor_rel` up to `knee_mhz`, then rising linearly to
// 1.0 at f_max (the shape of the gpmTOOL fits, dvfs_gpmtool_model_*.csv). Example, A100 (knee 1120,
// floor 0.824, f_max 1410): V(900) = 0.824, V(1265) = 0.824 + 0.176·145/290 = 0.912, V(1410) = 1.
struct VoltageCurve {
  Sourced knee_mhz;
  Sourced floor_rel;
  Sourced floor_mv;  // absolute floor voltage where a dump gives it; value 0 = unknown

  double relative(double clock_mhz, double max_mhz) const;
};

// Priors of the time model T(f) = max(T_c·f_max/f, T_m·g(f)) + T_o (see emo/model/models.h).
struct TimePriors {
  Sourced mem_knee_frac;  // memory-bound time is flat down to this fraction of f_max ...
  Sourced mem_gamma;      // ... and grows as (f_knee/f)^gamma below it (faster than 1/f)
};

// Power model P(f) = P_const + mem_w·u_m + V(f)²·(f/f_max)·dynamic_w·(clock_frac + (1-clock_frac)·u_c),
// u_c / u_m = the share of the unit's time its SMs / its memory are the bottleneck. A profiled unit
// refits P_const and dynamic_w; clock_frac and mem_w stay the device's.
struct PowerCoeffs {
  Sourced const_w;     // leakage + board + idle memory, at the voltage floor
  Sourced dynamic_w;   // dynamic SM power at f_max, V_max, fully busy
  Sourced clock_frac;  // share of dynamic_w a clocked but stalled SM still burns (clock tree, idle warps)
  Sourced mem_w;       // extra DRAM power of a fully memory-bound unit
};

struct DeviceProfile {
  std::string name;   // "a100"
  std::string model;  // "A100-SXM4-80GB"
  ClockTable sm_clocks;
  Sourced default_clock_mhz;  // the clock a job runs at when nobody locks it (max for EMO)
  Sourced memory_clock_mhz;
  Sourced tdp_w;  // default power limit: the GPU lowers its clock to stay under it
  Sourced min_power_limit_w;
  Sourced idle_power_w;
  Sourced switch_latency_median_ms;  // lock call → clock in effect
  Sourced switch_latency_p99_ms;
  VoltageCurve voltage;
  TimePriors time;
  PowerCoeffs power;

  int min_clock_mhz() const { return sm_clocks.mhz.front(); }
  int max_clock_mhz() const { return sm_clocks.mhz.back(); }
  // The supported clock nearest to `clock_mhz` (ties: the higher one).
  int nearest_clock(double clock_mhz) const;
  double voltage_rel(double clock_mhz) const { return voltage.relative(clock_mhz, max_clock_mhz()); }
};

// Names of the built-in profiles, in a fixed order.
std::vector<std::string> builtin_profile_names();
// A built-in profile; unknown name -> Error whose note lists the names.
Result<DeviceProfile> builtin_profile(std::string_view name);
// A built-in name, or the path of a profile JSON file (one device, the schema `emo devices --json`
// writes per device; a {"devices": [one]} document is accepted too).
Result<DeviceProfile> load_profile(const std::string& name_or_path);
// Parses one profile from JSON text; `where` names the source in errors. Missing fields, an empty or
// non-monotonic clock table, or values out of range give an Error naming the field.
Result<DeviceProfile> profile_from_json(std::string_view text, const std::string& where);

// JSON of one profile (the schema profile_from_json reads) and of a list: {"schema", "devices": [...]}.
std::string profile_to_json(const DeviceProfile& profile, int indent = 2);
std::string profiles_to_json(const std::vector<DeviceProfile>& profiles, int indent = 2);

// The listing of `emo devices` (src/device/listing.cpp). The profiles named (built-in names or JSON
// files, in order), or, when none is named, every built-in profile; the first that does not load ->
// its Error.
Result<std::vector<DeviceProfile>> load_profiles(const std::vector<std::string>& names_or_paths);
// One line (with its '\n'): name, model, clock range, default and memory clock, TDP, idle power,
// switch latency and V(f) knee.
std::string profile_summary_line(const DeviceProfile& profile);
// Every value with its unit and source, a line each, under a "NAME (MODEL)" heading.
std::string profile_detail_text(const DeviceProfile& profile);
// Each profile's summary line, or (detail) its detail text.
std::string profiles_text(const std::vector<DeviceProfile>& profiles, bool detail);

}  // namespace emo::device
