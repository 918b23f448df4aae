// Built-in device profiles and their JSON form. Each value names its source; values fitted from the
// measured DVFS data say which file and which command (docs/models.md lists the commands), values
// with no measurement behind them say "assumed: <why>". JSON loading checks every field, so a
// hand-edited profile fails with the field's name instead of producing odd clocks later.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "emo/device/profile.h"

namespace emo::device {

namespace {

using ojson = nlohmann::ordered_json;

Sourced S(double value, std::string source) { return Sourced{value, std::move(source)}; }

constexpr const char* kFacts = "../shared/dvfs/dvfs_gpu_clock_power_facts.csv";
constexpr const char* kLatency = "../shared/dvfs/dvfs_v100sxm2_nvml_lock_latency_summary.csv";

// V100 clocks step by 7.5 MHz, alternating 7 and 8: f_i = 135 + floor(7.5·i). Example: i = 37 gives
// 135 + floor(277.5) = 412, one of the clocks of the NVML lock-latency study; i = 83 gives 757, the
// lowest clock of the GPU-DVFS-Dataset sweep.
std::vector<int> v100_grid(int max_mhz) {
  std::vector<int> out;
  for (int i = 0;; ++i) {
    int f = 135 + (15 * i) / 2;
    if (f > max_mhz) break;
    out.push_back(f);
  }
  return out;
}

std::vector<int> step_grid(int lo, int hi, int step) {
  std::vector<int> out;
  for (int f = lo; f <= hi; f += step) out.push_back(f);
  return out;
}

// Settle time from the lock call to the clock in effect, V100 SXM2: the median over the six workload
// modes of settle_total_p50_ms (24.57..25.29 ms) and the worst settle_total_p99_ms (36.66 ms).
void v100_latency(DeviceProfile& p, const std::string& note) {
  p.switch_latency_median_ms = S(24.8, std::string(kLatency) + ": median over the 6 workload modes of settle_total_p50_ms" + note);
  p.switch_latency_p99_ms = S(36.7, std::string(kLatency) + ": worst settle_total_p99_ms over the 6 modes" + note);
}

// Memory-bound kernels: flat down to ~0.68·f_max, faster than 1/f below (ANCHORS.md, "Real data
// here"). The V100 microbenchmarks (memory-bound mixbench/cachebench variants, clocks >= 500 MHz)
// put the knee at 0.717·f_max and the exponent at 1.81 (`emo model-check ... --calibrate`).
void mem_priors(DeviceProfile& p, const std::string& note) {
  p.time.mem_knee_frac = S(0.717, note + " (ANCHORS.md: ~0.68·f_max)");
  p.time.mem_gamma = S(1.81, note);
}

DeviceProfile make_v100() {
  DeviceProfile p;
  p.name = "v100";
  p.model = "V100-SXM2-16GB";
  p.sm_clocks = {v100_grid(1530), std::string(kFacts) + ", V100 SXM2 row: 135..1530 MHz, ~7.5 MHz steps (alternating 7/8); "
                                  "grid 135+floor(7.5·i) matches the clocks of the lock-latency study and of gpudvfsdataset"};
  p.default_clock_mhz = S(1530, std::string(kFacts) + ", max_sm_mhz (EMO's default is the max clock; the app clock is 1312)");
  p.memory_clock_mhz = S(877, std::string(kFacts) + ", V100 SXM2 row");
  p.tdp_w = S(300, "ANCHORS.md, Hardware facts, V100-SXM2 row");
  p.min_power_limit_w = S(150, "ANCHORS.md, Hardware facts, V100-SXM2 row");
  p.idle_power_w = S(44.5, "ANCHORS.md, Hardware facts, V100-SXM2 row");
  v100_latency(p, "");
  p.voltage.knee_mhz = S(472, "fitted: `emo model-check` --calibrate --min-clock 500 on the V100 microbenchmarks, "
                              "../shared/dvfs/dvfs_v100pcie_nvdvfsbench_micro_slim.csv (same GV100 chip): no voltage floor "
                              "shows above 500 MHz, V rises linearly over the whole range used");
  p.voltage.floor_rel = S(0.689, "fitted on the same microbenchmarks (0.721·V(1380)), the line extended to 1530 MHz");
  p.voltage.floor_mv = S(0, "unknown: no V100 voltage reading in ../shared");
  mem_priors(p, "fitted: `emo model-check` --calibrate --min-clock 500 on ../shared/dvfs/dvfs_v100pcie_nvdvfsbench_micro_slim.csv");
  p.power.const_w = S(40, "assumed: near the idle power (44.5 W) less the idle clock's dynamic power");
  p.power.dynamic_w = S(230, "assumed: TDP 300 W - const 40 W - memory 30 W at a fully busy max clock");
  p.power.clock_frac = S(0.3, "assumed: a stalled but clocked SM still burns ~30 % of its busy dynamic power (clock tree, "
                              "schedulers); the Perseus A100/A40 stage profiles fit 0.0..0.5 about equally");
  p.power.mem_w = S(30, "assumed: HBM2 at full bandwidth, ~10 % of TDP");
  return p;
}

DeviceProfile make_v100_pcie() {
  DeviceProfile p = make_v100();
  p.name = "v100-pcie";
  p.model = "V100-PCIE-16GB";
  p.sm_clocks = {v100_grid(1380), std::string(kFacts) + ", V100 PCIE row: 135..1380 MHz, ~7.5 MHz steps; grid 135+floor(7.5·i) "
                                  "matches the clocks of dvfs_v100pcie_nvdvfsbench_*"};
  p.default_clock_mhz = S(1380, std::string(kFacts) + ", V100 PCIE max_sm_mhz");
  p.memory_clock_mhz = S(877, std::string(kFacts) + ", V100 PCIE row");
  p.tdp_w = S(250, std::string(kFacts) + ", V100 PCIE row");
  p.min_power_limit_w = S(100, std::string(kFacts) + ", V100 PCIE row");
  p.idle_power_w = S(25.1, std::string(kFacts) + ", V100 PCIE row");
  v100_latency(p, " (SXM2 measurement; assumed the same for PCIe)");
  p.voltage.knee_mhz = S(472, "fitted: `emo model-check` --calibrate --min-clock 500 on "
                              "../shared/dvfs/dvfs_v100pcie_nvdvfsbench_micro_slim.csv (no floor above 500 MHz)");
  p.voltage.floor_rel = S(0.721, "fitted on the same microbenchmarks");
  p.power.const_w = S(25, "assumed: the idle power (25.1 W)");
  p.power.dynamic_w = S(200, "assumed: TDP 250 W - const - memory at a fully busy max clock");
  return p;
}

DeviceProfile make_a100() {
  DeviceProfile p;
  p.name = "a100";
  p.model = "A100-SXM4-80GB";
  p.sm_clocks = {step_grid(210, 1410, 15), "ANCHORS.md, Hardware facts, A100-SXM4-80GB row: 210..1410 MHz in 15 MHz steps (81 clocks)"};
  p.default_clock_mhz = S(1410, std::string(kFacts) + ", A100 max_sm_mhz (EMO's default is the max clock; the app clock is 1155)");
  p.memory_clock_mhz = S(1593, "ANCHORS.md, Hardware facts, A100-SXM4-80GB row");
  p.tdp_w = S(400, "ANCHORS.md, Hardware facts, A100-SXM4-80GB row (some 80GB boards allow 500 W; a higher power seen in "
                   "the data overrides the limit)");
  p.min_power_limit_w = S(100, "ANCHORS.md, Hardware facts, A100-SXM4-80GB row");
  p.idle_power_w = S(68.4, std::string(kFacts) + ", A100 SXM4-80GB row");
  v100_latency(p, " (V100 measurement; no A100 measurement in ../shared, assumed similar)");
  p.voltage.knee_mhz = S(1120, "fitted: `emo model-check` --calibrate on "
                               "../shared/dvfs/zeus-kronos__emulation__stage_profile__bloom_a100_sxm_bf16.csv (all 38 clocks; "
                               "the GPT-3 profile gives 1114)");
  p.voltage.floor_rel = S(0.824, "fitted on the same BLOOM A100 profile (the GPT-3 profile gives 0.847)");
  p.voltage.floor_mv = S(0, "unknown: no A100 voltage reading in ../shared");
  mem_priors(p, "assumed: the V100 microbenchmark value (no A100 memory-bound sweep in ../shared)");
  p.power.const_w = S(13, "fitted: median per-unit P_const of the same calibration (BLOOM A100; it trades off against "
                          "the voltage floor, so it sits below the 68 W idle power)");
  p.power.dynamic_w = S(437, "fitted: median per-unit dynamic power of the same calibration (BLOOM A100)");
  p.power.clock_frac = S(0.3, "assumed: see v100 (the Perseus stage profiles fit 0.0..0.5 about equally)");
  p.power.mem_w = S(40, "assumed: HBM2e at full bandwidth, ~10 % of TDP");
  return p;
}

DeviceProfile make_a40() {
  DeviceProfile p;
  p.name = "a40";
  p.model = "A40-48GB";
  p.sm_clocks = {step_grid(210, 1740, 15), "assumed: 210 MHz floor and 15 MHz steps as on other Ampere parts; "
                                            "../shared/dvfs/PROVENANCE.md gives the measured range 855..1740 step 15"};
  p.default_clock_mhz = S(1740, "../shared/dvfs/PROVENANCE.md (Perseus A40 stage profile: 1740 → 855 MHz)");
  p.memory_clock_mhz = S(7251, "assumed: A40 GDDR6 data sheet value; not in ../shared");
  p.tdp_w = S(300, "../shared/dvfs/zeus__summary_power_a40.csv: highest power limit 300 W; the Perseus A40 profile's power "
                   "saturates at 290..300 W above ~1470 MHz");
  p.min_power_limit_w = S(100, "../shared/dvfs/zeus__summary_power_a40.csv: lowest power limit 100 W");
  p.idle_power_w = S(30, "assumed: typical A40 idle reading; no measurement in ../shared");
  v100_latency(p, " (V100 measurement; assumed similar)");
  p.voltage.knee_mhz = S(1130, "fitted: `emo model-check` --calibrate on "
                               "../shared/dvfs/zeus-kronos__emulation__stage_profile__bloom_a40_bf16.csv (clocks below the "
                               "power cap; the GPT-3 profile gives 1116)");
  p.voltage.floor_rel = S(0.783, "fitted on the same BLOOM A40 profile (the GPT-3 profile gives 0.795)");
  p.voltage.floor_mv = S(0, "unknown: no A40 voltage reading in ../shared");
  mem_priors(p, "assumed: the V100 microbenchmark value (no A40 memory-bound sweep in ../shared)");
  p.power.const_w = S(71, "fitted: median per-unit P_const of the same calibration (BLOOM A40)");
  p.power.dynamic_w = S(276, "fitted: median per-unit dynamic power of the same calibration (BLOOM A40)");
  p.power.clock_frac = S(0.3, "assumed: see v100");
  p.power.mem_w = S(30, "assumed: GDDR6 at full bandwidth, ~10 % of TDP");
  return p;
}

// H100/H200: no DVFS sweep in ../shared and no public measured power-vs-SM-clock sweep found (searched
// 2026-12-01, docs/models.md §3), so the V(f) shape is A100's (knee at 0.79·f_max, floor 0.824),
// anchored to the idle core voltage the nvidia-smi dumps report. How much the savings move when the
// knee, floor, static or dynamic power is off by ±20 %: docs/optimize.md, "Sensitivity to the
// emulator's power parameters" (scripts/power_sensitivity.py).
DeviceProfile make_hopper(const std::string& name, const std::string& model, double mem_mhz, double idle_w,
                          double floor_mv, const std::string& row) {
  DeviceProfile p;
  p.name = name;
  p.model = model;
  p.sm_clocks = {step_grid(345, 1980, 15), "ANCHORS.md, Hardware facts, " + row + " row: up to 1980 MHz, idle 345; 15 MHz steps "
                                           "assumed as in " + kFacts};
  p.default_clock_mhz = S(1980, std::string(kFacts) + ", " + row + " row: default app clock == max on Hopper");
  p.memory_clock_mhz = S(mem_mhz, "ANCHORS.md, Hardware facts, " + row + " row");
  p.tdp_w = S(700, "ANCHORS.md, Hardware facts, " + row + " row");
  p.min_power_limit_w = S(200, "ANCHORS.md, Hardware facts, " + row + " row");
  p.idle_power_w = S(idle_w, std::string(kFacts) + ", " + row + " row");
  v100_latency(p, " (V100 measurement; no Hopper measurement in ../shared, assumed similar)");
  p.voltage.knee_mhz = S(1575, "assumed: A100's knee fraction (1120/1410 = 0.794) of f_max; no Hopper DVFS "
                               "sweep in ../shared or in public data found (sensitivity ±20 %: docs/optimize.md)");
  p.voltage.floor_rel = S(0.824, "assumed: A100's fitted floor ratio (sensitivity ±20 %: docs/optimize.md)");
  p.voltage.floor_mv = S(floor_mv, std::string(kFacts) + ", " + row + " idle_core_voltage_mv (at 345 MHz)");
  mem_priors(p, "assumed: the V100 microbenchmark value (no Hopper memory-bound sweep in ../shared)");
  p.power.const_w = S(idle_w, "assumed: the idle power (sensitivity ±20 %: docs/optimize.md)");
  p.power.dynamic_w = S(520, "assumed: TDP 700 W - const - memory at a fully busy max clock "
                            "(sensitivity ±20 %: docs/optimize.md)");
  p.power.clock_frac = S(0.3, "assumed: see v100");
  p.power.mem_w = S(name == "h200" ? 105 : 90, "assumed: HBM at full bandwidth, ~2.5x its idle share (H200 idle HBM 41.8 W)");
  return p;
}

const std::vector<DeviceProfile>& builtins() {
  static const std::vector<DeviceProfile> all = [] {
    std::vector<DeviceProfile> v;
    v.push_back(make_v100());
    v.push_back(make_a100());
    v.push_back(make_hopper("h100", "H100-SXM", 2619, 74.7, 725, "H100-SXM"));
    v.push_back(make_hopper("h200", "H200", 3201, 74.6, 685, "H200"));
    v.push_back(make_v100_pcie());
    v.push_back(make_a40());
    return v;
  }();
  return all;
}

// ---- JSON -------------------------------------------------------------------------------------

ojson sourced_json(const Sourced& s) { return ojson{{"value", s.value}, {"source", s.source}}; }

ojson to_ojson(const DeviceProfile& p) {
  ojson j;
  j["name"] = p.name;
  j["model"] = p.model;
  j["sm_clocks_mhz"] = ojson{{"values", p.sm_clocks.mhz}, {"source", p.sm_clocks.source}};
  j["default_clock_mhz"] = sourced_json(p.default_clock_mhz);
  j["memory_clock_mhz"] = sourced_json(p.memory_clock_mhz);
  j["tdp_w"] = sourced_json(p.tdp_w);
  j["min_power_limit_w"] = sourced_json(p.min_power_limit_w);
  j["idle_power_w"] = sourced_json(p.idle_power_w);
  j["switch_latency_ms"] = ojson{{"median", sourced_json(p.switch_latency_median_ms)},
                                 {"p99", sourced_json(p.switch_latency_p99_ms)}};
  j["voltage"] = ojson{{"knee_mhz", sourced_json(p.voltage.knee_mhz)},
                       {"floor_rel", sourced_json(p.voltage.floor_rel)},
                       {"floor_mv", sourced_json(p.voltage.floor_mv)}};
  j["time_model"] = ojson{{"mem_knee_frac", sourced_json(p.time.mem_knee_frac)},
                          {"mem_gamma", sourced_json(p.time.mem_gamma)}};
  j["power_model"] = ojson{{"const_w", sourced_json(p.power.const_w)},
                           {"dynamic_w", sourced_json(p.power.dynamic_w)},
                           {"clock_frac", sourced_json(p.power.clock_frac)},
                           {"mem_w", sourced_json(p.power.mem_w)}};
  return j;
}

// Reads JSON fields with the dotted path of each field in the error, e.g.
// "profile.json: field 'voltage.knee_mhz.value': missing".
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  Error err(const std::string& field, const std::string& what) const {
    return make_error(where_, "field '" + field + "': " + what,
                      "a profile has the fields `emo devices --json` writes per device");
  }

  Result<const nlohmann::json*> member(const nlohmann::json& obj, const std::string& path, const std::string& key) const {
    std::string field = path.empty() ? key : path + "." + key;
    if (!obj.is_object()) return err(path, "not an object");
    auto it = obj.find(key);
    if (it == obj.end()) return err(field, "missing");
    return &*it;
  }

  Result<std::string> str(const nlohmann::json& obj, const std::string& path, const std::string& key) const {
    auto m = member(obj, path, key);
    if (!m) return m.error();
    const nlohmann::json& v = **m;
    if (!v.is_string()) return err(path.empty() ? key : path + "." + key, "not a string");
    return v.get<std::string>();
  }

  Result<Sourced> sourced(const nlohmann::json& obj, const std::string& path, const std::string& key) const {
    std::string field = path.empty() ? key : path + "." + key;
    auto m = member(obj, path, key);
    if (!m) return m.error();
    const nlohmann::json& v = **m;
    auto val = member(v, field, "value");
    if (!val) return val.error();
    if (!(*val)->is_number()) return err(field + ".value", "not a number");
    double x = (*val)->get<double>();
    if (!std::isfinite(x)) return err(field + ".value", "not finite");
    auto src = str(v, field, "source");
    if (!src) return src.error();
    if (src->empty()) return err(field + ".source", "empty (every value names where it came from)");
    return Sourced{x, *src};
  }

 private:
  std::string where_;
};

Result<DeviceProfile> parse_profile(const nlohmann::json& j, const std::string& where) {
  Reader r(where);
  DeviceProfile p;
  auto name = r.str(j, "", "name");
  if (!name) return name.error();
  if (name->empty()) return r.err("name", "empty");
  p.name = *name;
  auto model = r.str(j, "", "model");
  if (!model) return model.error();
  p.model = *model;

  auto clocks = r.member(j, "", "sm_clocks_mhz");
  if (!clocks) return clocks.error();
  auto values = r.member(**clocks, "sm_clocks_mhz", "values");
  if (!values) return values.error();
  if (!(*values)->is_array()) return r.err("sm_clocks_mhz.values", "not an array");
  if ((*values)->empty()) return r.err("sm_clocks_mhz.values", "empty clock table");
  for (size_t i = 0; i < (*values)->size(); ++i) {
    const auto& v = (**values)[i];
    if (!v.is_number()) return r.err("sm_clocks_mhz.values[" + std::to_string(i) + "]", "not a number");
    double x = v.get<double>();
    if (!(x > 0) || x > 1e5 || x != std::floor(x))
      return r.err("sm_clocks_mhz.values[" + std::to_string(i) + "]", "not a positive whole MHz value");
    p.sm_clocks.mhz.push_back(static_cast<int>(x));
  }
  // NVML lists clocks from the highest down; accept either direction, but strictly monotonic.
  auto& m = p.sm_clocks.mhz;
  if (m.size() > 1 && m.front() > m.back()) std::reverse(m.begin(), m.end());
  for (size_t i = 1; i < m.size(); ++i) {
    if (m[i] <= m[i - 1])
      return r.err("sm_clocks_mhz.values",
                   "not monotonic (" + std::to_string(m[i - 1]) + " then " + std::to_string(m[i]) + " MHz)");
  }
  auto csrc = r.str(**clocks, "sm_clocks_mhz", "source");
  if (!csrc) return csrc.error();
  p.sm_clocks.source = *csrc;

  struct Field {
    Sourced* dst;
    const char* path;
    const char* key;
  };
  const Field fields[] = {
      {&p.default_clock_mhz, "", "default_clock_mhz"},
      {&p.memory_clock_mhz, "", "memory_clock_mhz"},
      {&p.tdp_w, "", "tdp_w"},
      {&p.min_power_limit_w, "", "min_power_limit_w"},
      {&p.idle_power_w, "", "idle_power_w"},
      {&p.switch_latency_median_ms, "switch_latency_ms", "median"},
      {&p.switch_latency_p99_ms, "switch_latency_ms", "p99"},
      {&p.voltage.knee_mhz, "voltage", "knee_mhz"},
      {&p.voltage.floor_rel, "voltage", "floor_rel"},
      {&p.voltage.floor_mv, "voltage", "floor_mv"},
      {&p.time.mem_knee_frac, "time_model", "mem_knee_frac"},
      {&p.time.mem_gamma, "time_model", "mem_gamma"},
      {&p.power.const_w, "power_model", "const_w"},
      {&p.power.dynamic_w, "power_model", "dynamic_w"},
      {&p.power.clock_frac, "power_model", "clock_frac"},
      {&p.power.mem_w, "power_model", "mem_w"},
  };
  for (const Field& f : fields) {
    const nlohmann::json* obj = &j;
    std::string path = f.path;
    if (!path.empty()) {
      auto sub = r.member(j, "", path);
      if (!sub) return sub.error();
      obj = *sub;
    }
    auto s = r.sourced(*obj, path, f.key);
    if (!s) return s.error();
    *f.dst = *s;
  }

  // Range checks: each names the field, so a typo in a hand-written profile is found at once.
  auto positive = [&](const Sourced& s, const std::string& field) -> Status {
    if (!(s.value > 0)) return r.err(field + ".value", "must be > 0");
    return {};
  };
  EMO_RETURN_IF_ERROR(positive(p.default_clock_mhz, "default_clock_mhz"));
  EMO_RETURN_IF_ERROR(positive(p.memory_clock_mhz, "memory_clock_mhz"));
  EMO_RETURN_IF_ERROR(positive(p.tdp_w, "tdp_w"));
  EMO_RETURN_IF_ERROR(positive(p.idle_power_w, "idle_power_w"));
  EMO_RETURN_IF_ERROR(positive(p.switch_latency_median_ms, "switch_latency_ms.median"));
  EMO_RETURN_IF_ERROR(positive(p.time.mem_gamma, "time_model.mem_gamma"));
  EMO_RETURN_IF_ERROR(positive(p.power.dynamic_w, "power_model.dynamic_w"));
  if (p.default_clock_mhz.value < m.front() || p.default_clock_mhz.value > m.back())
    return r.err("default_clock_mhz.value", "outside the clock table");
  if (p.min_power_limit_w.value < 0 || p.min_power_limit_w.value > p.tdp_w.value)
    return r.err("min_power_limit_w.value", "must be within 0..tdp_w");
  if (p.switch_latency_p99_ms.value < p.switch_latency_median_ms.value)
    return r.err("switch_latency_ms.p99.value", "below the median");
  if (!(p.voltage.floor_rel.value > 0 && p.voltage.floor_rel.value <= 1))
    return r.err("voltage.floor_rel.value", "must be in (0, 1] (voltage relative to V(f_max))");
  if (p.voltage.knee_mhz.value < m.front() || p.voltage.knee_mhz.value > m.back())
    return r.err("voltage.knee_mhz.value", "outside the clock table");
  if (p.voltage.floor_mv.value < 0) return r.err("voltage.floor_mv.value", "must be >= 0 (0 = unknown)");
  if (!(p.time.mem_knee_frac.value > 0 && p.time.mem_knee_frac.value <= 1))
    return r.err("time_model.mem_knee_frac.value", "must be in (0, 1]");
  if (p.power.const_w.value < 0) return r.err("power_model.const_w.value", "must be >= 0");
  if (p.power.mem_w.value < 0) return r.err("power_model.mem_w.value", "must be >= 0");
  if (!(p.power.clock_frac.value >= 0 && p.power.clock_frac.value <= 1))
    return r.err("power_model.clock_frac.value", "must be in [0, 1]");
  return p;
}

}  // namespace

double VoltageCurve::relative(double clock_mhz, double max_mhz) const {
  double knee = knee_mhz.value, floor = floor_rel.value;
  if (clock_mhz <= knee || max_mhz <= knee) return floor;
  return floor + (1.0 - floor) * (clock_mhz - knee) / (max_mhz - knee);
}

int DeviceProfile::nearest_clock(double clock_mhz) const {
  int best = sm_clocks.mhz.front();
  for (int f : sm_clocks.mhz) {
    if (std::abs(f - clock_mhz) <= std::abs(best - clock_mhz)) best = f;
  }
  return best;
}

std::vector<std::string> builtin_profile_names() {
  std::vector<std::string> names;
  for (const auto& p : builtins()) names.push_back(p.name);
  return names;
}

Result<DeviceProfile> builtin_profile(std::string_view name) {
  for (const auto& p : builtins()) {
    if (p.name == name) return p;
  }
  std::string list;
  for (const auto& n : builtin_profile_names()) {
    if (!list.empty()) list += ", ";
    list += n;
  }
  return make_error(std::string(name), "unknown device profile",
                    "built-in profiles: " + list + "; or pass a profile JSON file (see `emo devices --json`)");
}

Result<DeviceProfile> profile_from_json(std::string_view text, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error(where, "not valid JSON");
  if (j.is_object() && j.contains("devices")) {
    const auto& d = j["devices"];
    if (!d.is_array() || d.size() != 1)
      return make_error(where, "field 'devices': a profile file holds exactly one device",
                        "write one element of `emo devices --json`'s \"devices\" list");
    return parse_profile(d[0], where);
  }
  if (!j.is_object()) return make_error(where, "a profile is a JSON object");
  return parse_profile(j, where);
}

Result<DeviceProfile> load_profile(const std::string& name_or_path) {
  for (const auto& p : builtins()) {
    if (p.name == name_or_path) return p;
  }
  std::ifstream in(name_or_path, std::ios::binary);
  if (!in) {
    bool looks_like_path = name_or_path.find('/') != std::string::npos || name_or_path.find(".json") != std::string::npos;
    if (looks_like_path) return make_error(name_or_path, "cannot read the profile file");
    return builtin_profile(name_or_path).error();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return profile_from_json(ss.str(), name_or_path);
}

std::string profile_to_json(const DeviceProfile& profile, int indent) { return to_ojson(profile).dump(indent); }

std::string profiles_to_json(const std::vector<DeviceProfile>& profiles, int indent) {
  ojson j;
  j["schema"] = "emo-devices/1";
  j["devices"] = ojson::array();
  for (const auto& p : profiles) j["devices"].push_back(to_ojson(p));
  return j.dump(indent);
}

}  // namespace emo::device
