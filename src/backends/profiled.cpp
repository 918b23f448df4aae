// Profiling runs on disk (read from a hardware capture, or written from the emulated GPU) and the
// fidelity of the pack models against the emulated GPU's truth. See emo/backends/backends.h.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <map>

#include "emo/backends/backends.h"
#include "emo/base/file_util.h"
#include "emo/emulator/emulator.h"
#include "emulated_runs.h"

namespace emo::backends {

namespace fs = std::filesystem;
using graph::NodeId;

namespace {

int rank_id(const analysis::Workload& w, size_t r) {
  return w.graph.rank_ids.empty() ? int(r) : w.graph.rank_ids[r];
}

// "1980mhz" -> 1980; anything else -> 0.
int clock_of_dir_name(const std::string& name) {
  if (name.size() < 4 || name.substr(name.size() - 3) != "mhz") return 0;
  int v = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size() - 3, v);
  if (ec != std::errc() || p != name.data() + name.size() - 3 || v <= 0) return 0;
  return v;
}

}  // namespace

Result<std::vector<device::EnergySample>> parse_energy_log(std::string_view text, const std::string& name) {
  std::vector<device::EnergySample> out;
  size_t pos = 0;
  int line_no = 0;
  bool header = false;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = fmt::format("{}:{}", name, line_no);
    if (!header) {
      if (line != "t_ns,energy_mj")
        return make_error(where, "expected the header 't_ns,energy_mj'", "see docs/profiling.md for the energy log format");
      header = true;
      continue;
    }
    const size_t comma = line.find(',');
    if (comma == std::string_view::npos) return make_error(where, "expected two columns: t_ns,energy_mj");
    device::EnergySample s;
    auto field = [&](std::string_view f, int64_t& v, const char* col) -> Status {
      auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
      if (ec != std::errc() || p != f.data() + f.size())
        return make_error(where, fmt::format("{} '{}' is not an integer", col, f));
      return {};
    };
    EMO_RETURN_IF_ERROR(field(line.substr(0, comma), s.t_ns, "t_ns"));
    EMO_RETURN_IF_ERROR(field(line.substr(comma + 1), s.energy_mj, "energy_mj"));
    if (!out.empty() && s.t_ns <= out.back().t_ns) return make_error(where, "t_ns must increase from row to row");
    if (!out.empty() && s.energy_mj < out.back().energy_mj)
      return make_error(where, "the energy counter went down (it is cumulative)");
    out.push_back(s);
  }
  if (!header) return make_error(name, "empty energy log (no 't_ns,energy_mj' header)");
  if (out.size() < 2) return make_error(name, "the energy log has fewer than 2 readings", "record for long enough (seconds)");
  return out;
}

Result<std::vector<pack::ProfiledRun>> read_profiled_dir(const std::string& dir, const analysis::Workload& w) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return make_error(dir, "no such folder of profiling runs");
  std::vector<std::pair<int, fs::path>> clock_dirs;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_directory()) continue;
    const int c = clock_of_dir_name(e.path().filename().string());
    if (c > 0) clock_dirs.emplace_back(c, e.path());
  }
  if (ec) return make_error(dir, "cannot list the folder: " + ec.message());
  std::sort(clock_dirs.begin(), clock_dirs.end());
  if (clock_dirs.size() < 2) {
    return make_error(dir, fmt::format("has {} clock folder(s) named <MHz>mhz; at least 2 are needed", clock_dirs.size()),
                      "record the step at each clock of the profiling plan (emo pack lists it)");
  }
  std::vector<pack::ProfiledRun> out;
  const size_t n_ranks = w.graph.rank_paths.size();
  for (const auto& [clock, path] : clock_dirs) {
    pack::ProfiledRun run;
    run.clock_mhz = clock;
    for (size_t r = 0; r < n_ranks; ++r) {
      const std::string stem = (path / fmt::format("rank{}", rank_id(w, r))).string();
      std::string trace_path = stem + ".json";
      if (!fs::exists(trace_path, ec) && fs::exists(stem + ".json.gz", ec)) trace_path = stem + ".json.gz";
      if (!fs::exists(trace_path, ec))
        return make_error(trace_path, "missing: every clock folder needs a trace per rank of the step");
      auto t = trace::read_trace(trace_path);
      if (!t) return t.error();
      auto text = read_file(stem + ".energy.csv");
      if (!text) return text.error();
      auto log = parse_energy_log(*text, stem + ".energy.csv");
      if (!log) return log.error();
      run.traces.push_back(std::move(*t));
      run.energy.push_back(std::move(*log));
    }
    out.push_back(std::move(run));
  }
  return out;
}

Status write_profiled_dir(const std::string& spec_text, const analysis::Workload& w, const pack::Packing& packing,
                          const std::string& dir) {
  auto runs = detail::emulated_plan_runs(spec_text, w, packing);
  if (!runs) return runs.error();
  AtomicDir out;
  EMO_RETURN_IF_ERROR(out.open(dir, "profiling folder"));
  for (const auto& [clock, run] : *runs) {
    for (size_t r = 0; r < run.ranks.size(); ++r) {
      const std::string stem = fmt::format("{}mhz/rank{}", clock, rank_id(w, r));
      EMO_RETURN_IF_ERROR(out.write(stem + ".json", run.ranks[r].trace_json));
      EMO_RETURN_IF_ERROR(out.write(stem + ".energy.csv", emulator::energy_log_csv(run.ranks[r], spec_text)));
    }
  }
  return out.commit();
}

// ---------------------------------------------------------------------------------------------


Result<PackFidelity> pack_fidelity(const std::string& spec_text, const analysis::Workload& w,
                                   const pack::Packing& packing, const pack::PackModels& models, int clock_mhz) {
  auto spec = parse_device_spec(spec_text);
  if (!spec) return spec.error();
  if (spec->kind != DeviceSpec::Kind::kEmulated)
    return make_error("--device " + spec_text, "the fidelity check needs the emulated GPU's truth", "use emulated:NAME");
  auto profile = device::load_profile(spec->profile);
  if (!profile) return profile.error();
  if (std::find(profile->sm_clocks.mhz.begin(), profile->sm_clocks.mhz.end(), clock_mhz) == profile->sm_clocks.mhz.end())
    return make_error(fmt::format("{} MHz", clock_mhz), "not a supported clock of " + profile->name);
  emulator::EmulatedGpu gpu(*profile, spec->seed);
  emulator::RunOptions o;
  o.steps = 3;
  o.trace_steps = 1;
  o.energy_log = false;
  o.seed = 0xf1de11;  // not one of the profiling runs' seeds
  o.probe_period_ns = 10000;
  auto run = gpu.run(w, emulator::ClockSchedule::locked(clock_mhz), o);
  if (!run) return run.error();

  // The traced (last) step, read back as a user's trace would be.
  std::vector<trace::RankTrace> traces;
  int64_t min_origin = std::numeric_limits<int64_t>::max();
  for (const auto& rr : run->ranks) {
    auto t = trace::parse_trace(rr.trace_json, fmt::format("emulated {} MHz rank {}", clock_mhz, rr.rank));
    if (!t) return t.error();
    min_origin = std::min(min_origin, t->origin_ns);
    traces.push_back(std::move(*t));
  }
  auto pw = analysis::assemble(std::move(traces), {});
  if (!pw) return pw.error();
  const graph::Graph& pg = pw->graph;
  const graph::Graph& g = w.graph;
  const pack::ProfiledOps index(pg);
  PackFidelity f;
  f.clock_mhz = clock_mhz;
  for (uint32_t k = 0; k < packing.packs.size(); ++k) {
    const pack::Pack& pk = packing.packs[k];
    if (pk.first_op > pk.last_op) continue;
    const pack::GpuOps& go = packing.gpus[pk.gpu];
    PackFidelityRow row;
    row.pack = k;
    row.rank = rank_id(w, go.rank);
    row.first_name = std::string(g.strings.view(g.name[go.ops[pk.first_op]]));
    int64_t win_b = std::numeric_limits<int64_t>::max(), win_e = std::numeric_limits<int64_t>::min();
    double busy_ns = 0;
    for (uint32_t a = pk.first_atom; a <= pk.last_atom; ++a) {
      const pack::Atom& at = packing.atoms[a];
      if (at.first > at.last) continue;
      std::vector<std::pair<int64_t, int64_t>> iv;
      for (uint32_t i = at.first; i <= at.last; ++i) {
        const auto* span = index.find(g, packing, pk.gpu, i);
        if (span == nullptr) {
          return make_error("fidelity run", fmt::format("op '{}' of pack {} is missing from the emulated trace",
                                                        g.strings.view(g.name[go.ops[i]]), k));
        }
        // Absolute, on the trace clock (where the energy probes are).
        const int64_t shift = pg.rank_offset_ns[pk.gpu] + min_origin;
        iv.emplace_back(span->first + shift, span->second + shift);
      }
      std::sort(iv.begin(), iv.end());
      int64_t cb = iv[0].first, ce = iv[0].second;
      for (const auto& [b, e] : iv) {
        if (b > ce) {
          busy_ns += double(ce - cb);
          cb = b;
          ce = e;
        } else {
          ce = std::max(ce, e);
        }
        win_b = std::min(win_b, b);
        win_e = std::max(win_e, e);
      }
      busy_ns += double(ce - cb);
    }
    const auto& rr = run->ranks[pk.gpu];
    row.true_busy_s = busy_ns * 1e-9;
    row.true_energy_j = rr.probe_energy_at(win_e) - rr.probe_energy_at(win_b);
    const pack::PackCost pc = pack::predict_pack(packing, models, k, clock_mhz);
    row.predicted_busy_s = pc.busy_s;
    row.predicted_energy_j = pc.energy_j;
    f.packs.push_back(std::move(row));
  }
  optimize::Problem pr;
  pr.workload = &w;
  pr.packing = &packing;
  pr.models = &models;
  pr.default_clock_mhz = int(models.profile.default_clock_mhz.value);
  const optimize::Plan plan = optimize::predict(pr, std::vector<int>(packing.packs.size(), clock_mhz));
  f.predicted_step_s = double(plan.time_ns) * 1e-9;
  f.predicted_step_j = plan.energy_j;
  f.true_step_s = run->mean_step_ns() * 1e-9;
  f.true_step_j = run->energy_per_step_j();
  return f;
}

std::string pack_fidelity_csv(const PackFidelity& f) {
  std::string out =
      "pack,rank,first_name,clock_mhz,predicted_busy_us,true_busy_us,time_error_pct,predicted_energy_j,true_energy_j,"
      "energy_error_pct\n";
  auto pct = [](double p, double t) { return t > 0 ? 100.0 * (p / t - 1) : 0.0; };
  for (const auto& r : f.packs) {
    std::string name = r.first_name;
    std::replace(name.begin(), name.end(), '"', '\'');
    out += fmt::format("{},{},\"{}\",{},{:.3f},{:.3f},{:.3f},{:.6f},{:.6f},{:.3f}\n", r.pack, r.rank, name, f.clock_mhz,
                       r.predicted_busy_s * 1e6, r.true_busy_s * 1e6, pct(r.predicted_busy_s, r.true_busy_s),
                       r.predicted_energy_j, r.true_energy_j, pct(r.predicted_energy_j, r.true_energy_j));
  }
  return out;
}

}  // namespace emo::backends
