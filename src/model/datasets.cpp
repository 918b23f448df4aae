// Loading the measured DVFS datasets into units × clocks of (time, energy), and choosing fit clocks.
// Each format's reader checks its columns first, so a file given with the wrong --format fails
// naming the column it lacks rather than producing a nonsense fit.
#include "emo/model/datasets.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "csv.h"

namespace emo::model {

namespace {

using detail::CsvTable;
using detail::number_at;
using detail::read_csv;

// Collects rows into units in first-seen order; a repeated (unit, clock) is averaged.
class Builder {
 public:
  void add(const std::string& unit, double clock_mhz, double time_s, double energy_j) {
    auto [it, fresh] = index_.try_emplace(unit, acc_.size());
    if (fresh) acc_.push_back({unit, {}});
    auto& cell = acc_[it->second].second[static_cast<int>(std::lround(clock_mhz))];
    if (cell.n > 0) ++merged_;
    cell.t += time_s, cell.e += energy_j, ++cell.n;
  }
  void finish(Dataset& d) {
    for (auto& [name, clocks] : acc_) {
      Unit u;
      u.name = name;
      for (auto& [f, c] : clocks) u.samples.push_back(Point{double(f), c.t / c.n, c.e / c.n});
      d.units.push_back(std::move(u));
    }
    d.merged_rows = merged_;
  }

 private:
  struct Cell {
    double t = 0, e = 0;
    int n = 0;
  };
  std::vector<std::pair<std::string, std::map<int, Cell>>> acc_;
  std::unordered_map<std::string, size_t> index_;
  size_t merged_ = 0;
};

Result<int> require_column(const CsvTable& t, const char* name, const char* note) {
  int c = t.column(name);
  if (c < 0) return make_error(t.path, std::string("missing column '") + name + "'", note);
  return c;
}

Status positive(const CsvTable& t, size_t row, int col, double v) {
  if (!(v > 0)) return make_error(t.where(row), "column '" + t.header[size_t(col)] + "': must be > 0, got " + t.rows[row][size_t(col)]);
  return {};
}

Result<Dataset> load_perseus(const std::string& path) {
  auto t = read_csv(path);
  if (!t) return t.error();
  const char* note = "--format perseus reads a Perseus/lowtime stage profile: columns stage,instruction,frequency,time,energy";
  int cols[5];
  const char* names[5] = {"stage", "instruction", "frequency", "time", "energy"};
  for (int i = 0; i < 5; ++i) {
    auto c = require_column(*t, names[i], note);
    if (!c) return c.error();
    cols[i] = *c;
  }
  Dataset d;
  d.path = path;
  d.format = Format::kPerseus;
  d.files = {path};
  d.time_unit = "s";
  Builder b;
  for (size_t r = 0; r < t->rows.size(); ++r) {
    auto f = number_at(*t, r, cols[2]);
    if (!f) return f.error();
    auto ts = number_at(*t, r, cols[3]);
    if (!ts) return ts.error();
    auto e = number_at(*t, r, cols[4]);
    if (!e) return e.error();
    EMO_RETURN_IF_ERROR(positive(*t, r, cols[2], *f));
    EMO_RETURN_IF_ERROR(positive(*t, r, cols[3], *ts));
    EMO_RETURN_IF_ERROR(positive(*t, r, cols[4], *e));
    b.add(t->rows[r][size_t(cols[0])] + "/" + t->rows[r][size_t(cols[1])], *f, *ts, *e);
  }
  d.rows = t->rows.size();
  b.finish(d);
  return d;
}

Result<Dataset> load_nvdvfs(const std::string& path) {
  auto t = read_csv(path);
  if (!t) return t.error();
  const char* note =
      "--format nvdvfs reads the slim NV-DVFS-Benchmark CSV: columns benchmark,arg,kernel,sm_mhz,time_s and energy_j "
      "(or avg_power_w)";
  int cols[5];
  const char* names[5] = {"benchmark", "arg", "kernel", "sm_mhz", "time_s"};
  for (int i = 0; i < 5; ++i) {
    auto c = require_column(*t, names[i], note);
    if (!c) return c.error();
    cols[i] = *c;
  }
  int energy = t->column("energy_j"), power = t->column("avg_power_w");
  if (energy < 0 && power < 0) return make_error(path, "missing column 'energy_j' (or 'avg_power_w')", note);
  Dataset d;
  d.path = path;
  d.format = Format::kNvDvfs;
  d.files = {path};
  d.time_unit = "s";
  Builder b;
  for (size_t r = 0; r < t->rows.size(); ++r) {
    auto f = number_at(*t, r, cols[3]);
    if (!f) return f.error();
    auto ts = number_at(*t, r, cols[4]);
    if (!ts) return ts.error();
    EMO_RETURN_IF_ERROR(positive(*t, r, cols[3], *f));
    EMO_RETURN_IF_ERROR(positive(*t, r, cols[4], *ts));
    double e = 0;
    if (energy >= 0) {
      auto v = number_at(*t, r, energy);
      if (!v) return v.error();
      EMO_RETURN_IF_ERROR(positive(*t, r, energy, *v));
      e = *v;
    } else {
      auto v = number_at(*t, r, power);
      if (!v) return v.error();
      EMO_RETURN_IF_ERROR(positive(*t, r, power, *v));
      e = *v * *ts;
    }
    const auto& row = t->rows[r];
    b.add(row[size_t(cols[0])] + "/" + row[size_t(cols[1])] + "/" + row[size_t(cols[2])], *f, *ts, e);
  }
  d.rows = t->rows.size();
  b.finish(d);
  return d;
}

// One GPU-DVFS-Dataset table: header "frequency(MHz),757,825,...", then "NAME,v1,v2,...".
struct Table {
  std::vector<double> clocks;
  std::vector<std::string> names;
  std::vector<std::vector<double>> values;
};

Result<Table> read_wide(const std::string& path) {
  auto t = read_csv(path);
  if (!t) return t.error();
  const char* note = "--format gpudvfs reads dataset_performance.csv / dataset_power.csv: header "
                     "'frequency(MHz),<clock>,...', then one row per workload";
  std::string first = t->header.empty() ? "" : t->header[0];
  std::transform(first.begin(), first.end(), first.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (first.rfind("frequency", 0) != 0) return make_error(path, "missing column 'frequency(MHz)' (first header cell)", note);
  if (t->header.size() < 2) return make_error(path, "no clock columns after 'frequency(MHz)'", note);
  Table out;
  for (size_t i = 1; i < t->header.size(); ++i) {
    const std::string& h = t->header[i];
    char* end = nullptr;
    double f = std::strtod(h.c_str(), &end);
    if (h.empty() || *end != '\0' || !(f > 0))
      return make_error(path + ":line 1", "column " + std::to_string(i + 1) + ": header '" + h + "' is not a clock in MHz", note);
    out.clocks.push_back(f);
  }
  for (size_t r = 0; r < t->rows.size(); ++r) {
    out.names.push_back(t->rows[r][0]);
    std::vector<double> vals;
    for (size_t c = 1; c < t->header.size(); ++c) {
      auto v = number_at(*t, r, int(c));
      if (!v) return v.error();
      EMO_RETURN_IF_ERROR(positive(*t, r, int(c), *v));
      vals.push_back(*v);
    }
    out.values.push_back(std::move(vals));
  }
  return out;
}

Result<Dataset> load_gpudvfs(const std::string& path) {
  // Either table may be given; the other sits beside it with "performance" <-> "power" swapped.
  std::string dir, base = path;
  if (auto slash = path.find_last_of('/'); slash != std::string::npos) dir = path.substr(0, slash + 1), base = path.substr(slash + 1);
  std::string perf_path, power_path;
  if (auto k = base.find("performance"); k != std::string::npos) {
    perf_path = path;
    power_path = dir + base.substr(0, k) + "power" + base.substr(k + 11);
  } else if (auto k2 = base.find("power"); k2 != std::string::npos) {
    power_path = path;
    perf_path = dir + base.substr(0, k2) + "performance" + base.substr(k2 + 5);
  } else {
    return make_error(path, "cannot tell the performance table from the power table by the file name",
                      "--format gpudvfs reads dataset_performance.csv and dataset_power.csv (give either; the other "
                      "must sit beside it)");
  }
  auto perf = read_wide(perf_path);
  if (!perf) return perf.error();
  auto power = read_wide(power_path);
  if (!power) return power.error();
  if (perf->clocks != power->clocks)
    return make_error(power_path + ":line 1", "clock columns differ from " + perf_path);
  Dataset d;
  d.path = path;
  d.format = Format::kGpuDvfs;
  d.files = {perf_path, power_path};
  d.time_unit = "relative (1 = the time at the highest clock)";
  Builder b;
  for (size_t r = 0; r < perf->names.size(); ++r) {
    auto it = std::find(power->names.begin(), power->names.end(), perf->names[r]);
    if (it == power->names.end())
      return make_error(power_path, "workload '" + perf->names[r] + "' of " + perf_path + " is missing");
    size_t pr = size_t(it - power->names.begin());
    for (size_t c = 0; c < perf->clocks.size(); ++c) {
      // performance is speed relative to the highest clock: time = 1/performance; energy = W × time.
      double t = 1.0 / perf->values[r][c];
      b.add(perf->names[r], perf->clocks[c], t, power->values[pr][c] * t);
    }
  }
  d.rows = perf->names.size() * perf->clocks.size();
  b.finish(d);
  return d;
}

bool contains(const std::string& s, const char* what) {
  std::string low = s;
  std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return low.find(what) != std::string::npos;
}

}  // namespace

Result<Format> parse_format(std::string_view name) {
  if (name == "perseus") return Format::kPerseus;
  if (name == "nvdvfs") return Format::kNvDvfs;
  if (name == "gpudvfs") return Format::kGpuDvfs;
  return make_error("--format", "unknown format '" + std::string(name) + "'", "formats: perseus, nvdvfs, gpudvfs");
}

std::string_view format_name(Format format) {
  switch (format) {
    case Format::kPerseus: return "perseus";
    case Format::kNvDvfs: return "nvdvfs";
    case Format::kGpuDvfs: return "gpudvfs";
  }
  return "?";
}

Result<Dataset> load_dataset(const std::string& path, Format format) {
  Result<Dataset> d = [&]() -> Result<Dataset> {
    switch (format) {
      case Format::kPerseus: return load_perseus(path);
      case Format::kNvDvfs: return load_nvdvfs(path);
      case Format::kGpuDvfs: return load_gpudvfs(path);
    }
    return make_error(path, "unknown format");
  }();
  if (d && d->units.empty()) return make_error(path, "no data rows");
  return d;
}

std::string suggest_device(const Dataset& d) {
  switch (d.format) {
    case Format::kPerseus:
      if (contains(d.path, "a100")) return "a100";
      if (contains(d.path, "a40")) return "a40";
      if (contains(d.path, "h100")) return "h100";
      if (contains(d.path, "h200")) return "h200";
      if (contains(d.path, "v100")) return "v100";
      return "";
    case Format::kNvDvfs: return "v100-pcie";  // NV-DVFS-Benchmark's sweeps: V100 PCIe (max 1380 MHz)
    case Format::kGpuDvfs: return "v100";      // GPU-DVFS-Dataset: V100 SXM2 (300 W, max 1530 MHz)
  }
  return "";
}

std::vector<int> common_clocks(const Dataset& d) {
  std::map<int, size_t> count;
  for (const Unit& u : d.units) {
    for (const Point& p : u.samples) ++count[static_cast<int>(std::lround(p.clock_mhz))];
  }
  std::vector<int> out;
  for (auto [f, n] : count) {
    if (n == d.units.size()) out.push_back(f);
  }
  return out;
}

Result<std::vector<int>> auto_fit_clocks(const Dataset& d) {
  std::vector<int> c = common_clocks(d);
  if (c.size() < 3)
    return make_error(d.path, "fewer than 3 clocks are common to all units (" + std::to_string(c.size()) +
                                  "): nothing to fit and predict", "pass --fit-clocks");
  int hi = c.back();
  // The lowest clock at or above 0.45·f_max. Example: 405..1380 MHz -> 705 (621 is the bound).
  int lo = c.front();
  for (int f : c) {
    if (f >= 0.45 * hi) {
      lo = f;
      break;
    }
  }
  if (lo == hi) lo = c.front();
  double target = 0.5 * (lo + hi);
  int mid = 0;
  double best = INFINITY;
  for (int f : c) {
    if (f == lo || f == hi) continue;
    double dist = std::abs(f - target);
    if (dist <= best) best = dist, mid = f;  // ties: the higher clock
  }
  if (mid == 0) return make_error(d.path, "no clock between the lowest and highest fit clock", "pass --fit-clocks");
  return std::vector<int>{lo, mid, hi};
}

}  // namespace emo::model
