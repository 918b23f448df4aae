// Profiling runs: the plan run on the emulated GPU (parsed in memory, or written as a hardware capture
// would be) and recorded runs read from disk. See emo/backends/profiling.h.
#include "emo/backends/profiling.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include "emo/base/file_util.h"
#include "emo/base/parallel.h"
#include "emo/dist/dist.h"
#include "emo/emulator/emulator.h"

namespace emo::backends {

namespace fs = std::filesystem;

namespace {

// The plan's runs on the emulated GPU, one per plan clock. Each rank's trace is handed to
// `rank(i, clock, rank_run)` on the thread that runs it as soon as it is written, so that no run holds
// every rank's trace text at once; then the run to `done(i, clock, run)` (may be empty). Either returns
// an error to stop.
using ConsumeRank = std::function<Status(size_t, int, emulator::RankRun&)>;
using ConsumeRun = std::function<Status(size_t, int, emulator::RunResult&)>;
Status emulated_plan_runs(const Target& on, const analysis::Workload& w, const pack::Packing& packing,
                          const std::vector<int>& clocks, const ConsumeRank& rank, const ConsumeRun& done) {
  auto gpu_or = on.emulated_gpu("profiling runs need a device that can run the workload",
                                "use emulated:NAME here; on hardware, record the step at each plan clock "
                                "(docs/profiling.md) and pass the folder with --profiled");
  if (!gpu_or) return gpu_or.error();
  const emulator::EmulatedGpu& gpu = **gpu_or;
  static_assert(pack::PackOptions{}.max_plan_node_steps == emulator::kMaxRunNodeSteps,
                "the packing bounds its plan by the emulator's run bound");
  // A step with so many nodes that even the shortest window is more than a run replays: name the cause.
  const int64_t nodes = int64_t(w.graph.num_nodes());
  if (int64_t(packing.plan_steps) * nodes > emulator::kMaxRunNodeSteps ||
      (packing.plan_steps_bounded && packing.plan_window_ns < pack::kMinProfileWindowNs)) {
    return make_error(
        "profiling plan",
        fmt::format("the step lasts {:.3f} ms and has {} graph nodes ({:.1f} ns of step per node): a run replays at "
                    "most {} node-steps, so a profiled clock gets {} steps, {:.3f} s, less than the {:.1f} s an "
                    "energy counter needs; are the trace's timestamps in microseconds? On hardware, record the runs "
                    "and pass them with --profiled (docs/profiling.md)",
                    double(packing.step_ns) / 1e6, nodes, double(packing.step_ns) / double(std::max<int64_t>(1, nodes)),
                    emulator::kMaxRunNodeSteps, packing.plan_steps, double(packing.plan_window_ns) / 1e9,
                    double(pack::kMinProfileWindowNs) / 1e9));
  }
  // The runs are independent (each has its own seed): one per thread. The first error in clock order
  // is the one said.
  std::vector<Status> status(clocks.size());
  parallel_for(clocks.size(), [&](size_t i) {
    emulator::RunOptions o;
    o.steps = packing.plan_steps;
    o.trace_steps = 1;
    o.seed = uint64_t(clocks[i]) * 7919u + 1;
    o.take_trace = [&, i](emulator::RankRun& rr) { return rank(i, clocks[i], rr); };
    auto run = gpu.run(w.ranks, emulator::ClockSchedule::locked(clocks[i]), o);
    status[i] = !run ? Status(run.error()) : done ? done(i, clocks[i], *run) : Status{};
  });
  for (Status& st : status) EMO_RETURN_IF_ERROR(std::move(st));
  return {};
}


// "1980mhz" -> 1980; anything else -> 0.
int clock_of_dir_name(const std::string& name) {
  if (name.size() < 4 || name.substr(name.size() - 3) != "mhz") return 0;
  int v = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size() - 3, v);
  if (ec != std::errc() || p != name.data() + name.size() - 3 || v <= 0) return 0;
  return v;
}

// A folder of profiling runs' clock folders ("<MHz>mhz"), ascending by clock; at least 2.
Result<std::vector<std::pair<int, fs::path>>> clock_dirs_of(const std::string& dir) {
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
  return clock_dirs;
}

// Rank `id`'s trace in a clock folder: rank<id>.json, else rank<id>.json.gz.
Result<std::string> rank_trace_path(const fs::path& clock_dir, int id) {
  std::error_code ec;
  const std::string stem = (clock_dir / fmt::format("rank{}", id)).string();
  std::string trace_path = stem + ".json";
  if (!fs::exists(trace_path, ec) && fs::exists(stem + ".json.gz", ec)) trace_path = stem + ".json.gz";
  if (!fs::exists(trace_path, ec))
    return make_error(trace_path, "missing: every clock folder needs a trace per rank of the step");
  return trace_path;
}

Result<std::vector<device::EnergySample>> read_energy_log(const fs::path& clock_dir, int id) {
  const std::string path = (clock_dir / fmt::format("rank{}.energy.csv", id)).string();
  auto text = read_file(path);
  if (!text) return text.error();
  return parse_energy_log(*text, path);
}

// read_profiled_dir_part's messages: every process's rank ids, process 0's listing (its status, then the
// clocks and every rank's trace), each process's energy logs' status.
constexpr int kTagProfiledRanks = 35, kTagProfiledListed = 38, kTagProfiledList = 39, kTagEnergyLogs = 46;

}  // namespace

Result<std::vector<pack::ProfiledRun>> profile_plan(const Target& on, const analysis::Workload& w,
                                                    const pack::Packing& packing, const std::vector<int>& clocks) {
  const std::vector<int>& plan = clocks.empty() ? packing.plan_clocks_mhz : clocks;
  // Each run's rank traces parsed on its thread as it ends, each text freed once parsed.
  std::vector<pack::ProfiledRun> out(plan.size());
  const ConsumeRank parse = [&](size_t i, int clock, emulator::RankRun& rr) -> Status {
    pack::ProfiledRun& pr = out[i];
    pr.clock_mhz = clock;
    auto t = trace::parse_trace(rr.trace_json, fmt::format("emulated {} MHz rank {}", clock, rr.rank));
    std::string().swap(rr.trace_json);
    if (!t) return t.error();
    pr.traces.push_back(std::move(*t));
    pr.energy.push_back(std::move(rr.energy));
    return {};
  };
  // The run's traces freed once what the fit reads is taken.
  const ConsumeRun digest = [&](size_t i, int, emulator::RunResult&) { return pack::digest_run(w, packing, out[i]); };
  EMO_RETURN_IF_ERROR(emulated_plan_runs(on, w, packing, plan, parse, digest));
  return out;
}

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

Result<std::vector<pack::ProfiledRun>> read_profiled_dir(const std::string& dir, const analysis::Workload& w,
                                                         const pack::Packing* packing) {
  auto clock_dirs = clock_dirs_of(dir);
  if (!clock_dirs) return clock_dirs.error();
  std::vector<pack::ProfiledRun> out;
  const size_t n_ranks = w.graph.rank_paths.size();
  for (const auto& [clock, path] : *clock_dirs) {
    pack::ProfiledRun run;
    run.clock_mhz = clock;
    for (size_t r = 0; r < n_ranks; ++r) {
      const int id = w.graph.rank_id(graph::RankIndex(uint32_t(r)));
      auto trace_path = rank_trace_path(path, id);
      if (!trace_path) return trace_path.error();
      auto t = trace::read_trace(*trace_path);
      if (!t) return t.error();
      auto log = read_energy_log(path, id);
      if (!log) return log.error();
      run.traces.push_back(std::move(*t));
      run.energy.push_back(std::move(*log));
    }
    if (packing != nullptr) EMO_RETURN_IF_ERROR(pack::digest_run(w, *packing, run));
    out.push_back(std::move(run));
  }
  return out;
}

Status write_profiled_dir(const Target& on, const analysis::Workload& w, const pack::Packing& packing,
                          const std::string& dir, const std::vector<int>& clocks) {
  AtomicDir out;
  EMO_RETURN_IF_ERROR(out.open(dir, "profiling folder"));
  std::mutex writing;
  const std::vector<int>& plan = clocks.empty() ? packing.plan_clocks_mhz : clocks;
  std::vector<uint32_t> next_rank(plan.size(), 0);  // per run: the ranks come in order
  const ConsumeRank write = [&](size_t i, int clock, emulator::RankRun& rr) -> Status {
    std::lock_guard<std::mutex> lock(writing);
    const uint32_t r = next_rank[i]++;
    const std::string stem = fmt::format("{}mhz/rank{}", clock, w.graph.rank_id(graph::RankIndex(r)));
    EMO_RETURN_IF_ERROR(out.write(stem + ".json", rr.trace_json));
    std::string().swap(rr.trace_json);
    return out.write(stem + ".energy.csv", emulator::energy_log_csv(rr, on.spec_text()));
  };
  EMO_RETURN_IF_ERROR(emulated_plan_runs(on, w, packing, plan, write, nullptr));
  return out.commit();
}

Result<std::vector<pack::ProfiledRun>> read_profiled_dir_part(const std::string& dir, const graph::GraphPart& part,
                                                              const pack::Packing& mine, dist::Comm& comm) {
  // Every process's ranks, in rank order: the step's ranks and where each process's begin.
  std::vector<int64_t> ids;
  for (uint32_t r = 0; r < part.graph.num_ranks(); ++r) ids.push_back(part.graph.rank_id(graph::RankIndex(r)));
  auto gathered = dist::all_gather(comm, kTagProfiledRanks, dist::to_bytes(ids));
  if (!gathered) return make_error(dir, "the ranks of the processes' parts: " + gathered.error().message());
  std::vector<size_t> bounds{0};
  std::vector<int> all_ids;
  for (size_t q = 0; q < gathered->size(); ++q) {
    auto v = dist::from_bytes((*gathered)[q], int(q));
    if (!v) return v.error();
    for (int64_t id : *v) all_ids.push_back(int(id));
    bounds.push_back(all_ids.size());
  }
  if (bounds[size_t(comm.rank())] != part.first_rank || all_ids.size() != part.total_ranks)
    return make_error(dir, "the processes' parts of the step do not follow one another in rank order");
  // Process 0 lists the folder and finds every rank's trace at every clock, so that each process reads the
  // same runs and one error is said.
  std::vector<std::string> listing;  // per clock: the clock, its folder, then every rank's trace
  Status listed;
  if (comm.is_root()) {
    auto clock_dirs = clock_dirs_of(dir);
    if (!clock_dirs) listed = clock_dirs.error();
    for (size_t c = 0; listed.ok() && c < clock_dirs->size(); ++c) {
      const auto& [clock, path] = (*clock_dirs)[c];
      listing.push_back(std::to_string(clock));
      listing.push_back(path.string());
      for (int id : all_ids) {
        auto trace_path = rank_trace_path(path, id);
        if (!trace_path) {
          listed = trace_path.error();
          break;
        }
        listing.push_back(std::move(*trace_path));
      }
    }
  }
  EMO_RETURN_IF_ERROR(dist::first_error(comm, kTagProfiledListed, listed));
  auto sent = dist::all_gather(comm, kTagProfiledList,
                               comm.is_root() ? dist::frame({listing.begin(), listing.end()}) : std::string());
  if (!sent) return make_error(dir, "the folder's listing: " + sent.error().message());
  auto fields = dist::unframe((*sent)[0]);
  const size_t per_clock = 2 + all_ids.size();
  if (!fields || fields->empty() || fields->size() % per_clock != 0)
    return make_error(dir, "process 0's listing of the folder arrived cut short");
  std::vector<pack::ProfiledRun> out;
  for (size_t at = 0; at < fields->size(); at += per_clock) {
    pack::ProfiledRun run;
    run.clock_mhz = std::atoi(std::string((*fields)[at]).c_str());
    const fs::path clock_dir((*fields)[at + 1]);
    const std::vector<std::string> paths((*fields).begin() + long(at + 2), (*fields).begin() + long(at + per_clock));
    auto profiled = analysis::load_part(paths, analysis::LoadOptions{}, comm, {}, &bounds);
    if (!profiled) return profiled.error();
    Status logs;
    for (size_t r = 0; r < ids.size() && logs.ok(); ++r) {
      auto log = read_energy_log(clock_dir, int(ids[r]));
      if (!log) logs = log.error();
      else run.energy.push_back(std::move(*log));
    }
    EMO_RETURN_IF_ERROR(dist::first_error(comm, kTagEnergyLogs, logs));
    EMO_RETURN_IF_ERROR(pack::digest_run_part(part, mine, profiled->part, run, comm));
    out.push_back(std::move(run));
  }
  return out;
}

}  // namespace emo::backends
