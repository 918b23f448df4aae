// Profiling runs read and fitted over the processes of a run (backends::read_profiled_dir_part,
// pack::fit_pack_models_part after load_part, analyze_part and make_packs_part), over dist::local_world (one
// thread per process): each process's runs must be the whole step's digests for its GPUs (the same spans,
// the same step time, its ranks' energy logs) and its models the whole step's fit (every signature's, and
// its GPUs' corrections and overlaps) at any number of processes; and every error must be one process's,
// said on every process.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "emo/analysis/analysis.h"
#include "emo/backends/profiling.h"
#include "emo/base/file_util.h"
#include "emo/dist/dist.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"
#include "emo/synth/synth.h"
#include "load_cases.h"
#include "test_util.h"

namespace emo {
namespace {

namespace fs = std::filesystem;
using test::synth_files;

// One process's answer.
struct Part {
  Status status;
  std::vector<pack::ProfiledRun> runs;
  pack::PackModels models;
  size_t first_rank = 0;
  size_t atoms = 0;  // its GPUs' atoms
  std::vector<optimize::Plan> plans;  // optimize::predict_part of each plan asked
  std::optional<optimize::Solution> start;  // optimize::solve_start_part (or optimize_part), where asked
  std::string policy;  // after optimize_part: optimize::policy_json_part's file (process 0) or null
};

// The plans to price: per plan, a clock per pack of the process's GPUs (the part's packing and its first
// rank given).
using Plans = std::function<std::vector<std::vector<int>>(const pack::Packing& mine, size_t first_rank)>;

std::vector<Part> fit_parts(const std::vector<std::string>& files, const std::string& dir,
                            const device::DeviceProfile& profile, const pack::PackOptions& po, int size,
                            const Plans& plans = {}, const optimize::OptimizeOptions* dp = nullptr,
                            bool moves = false) {
  auto comms = dist::local_world(size);
  std::vector<Part> out(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int p = 0; p < size; ++p) {
    threads.emplace_back([&, p] {
      dist::Comm& comm = *comms[size_t(p)];
      Part& me = out[size_t(p)];
      auto w = analysis::load_part(files, {}, comm);
      if (!w) {
        me.status = w.error();
        return;
      }
      replay::ShardTimeline replayed;
      auto a = analysis::analyze_part(w->part, comm, &replayed);
      if (!a) {
        me.status = a.error();
        return;
      }
      auto k = pack::make_packs_part(w->part, *a, replayed, profile, po, comm);
      if (!k) {
        me.status = k.error();
        return;
      }
      me.first_rank = w->part.first_rank;
      me.atoms = k->mine.atoms.size();
      auto runs = backends::read_profiled_dir_part(dir, w->part, k->mine, comm);
      if (!runs) {
        me.status = runs.error();
        return;
      }
      auto m = pack::fit_pack_models_part(k->mine, *runs, profile, comm);
      if (!m) {
        me.status = m.error();
        return;
      }
      me.runs = std::move(*runs);
      me.models = std::move(*m);
      optimize::Problem pr;
      pr.packing = &k->mine;
      pr.models = &me.models;
      pr.default_clock_mhz = int(profile.default_clock_mhz.value);
      if (dp != nullptr) {
        auto sol = moves ? optimize::optimize_part(pr, w->part, *dp, comm)
                         : optimize::solve_start_part(pr, w->part, *dp, comm);
        if (!sol) {
          me.status = sol.error();
          return;
        }
        if (moves) {
          auto file = optimize::policy_json_part(pr, w->part, *sol, dp->max_slowdown, dp->reserve, comm);
          if (!file) {
            me.status = file.error();
            return;
          }
          me.policy = file->dump();
        }
        me.start = std::move(*sol);
      }
      if (!plans) return;
      for (std::vector<int>& clocks : plans(k->mine, me.first_rank)) {
        auto plan = optimize::predict_part(pr, w->part, std::move(clocks), comm);
        if (!plan) {
          me.status = plan.error();
          return;
        }
        me.plans.push_back(std::move(*plan));
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// A synthetic step, packed and profiled on the emulated GPU into a folder as hardware captures are, and
// what one process reads and fits of that folder.
struct Profiled {
  std::vector<std::string> files;
  std::string dir;
  device::DeviceProfile profile = test::profile("h100");
  pack::PackOptions po;
  pack::Packing packing;
  std::vector<pack::ProfiledRun> runs;
  pack::PackModels models;
  analysis::Workload w;

  Profiled(const std::string& tag, synth::Workload wl, int ranks)
      : Profiled(tag, synth_files("fit_part_" + tag, wl, ranks)) {}
  // The same of a job's rank files.
  Profiled(const std::string& tag, std::vector<std::string> rank_files) {
    files = std::move(rank_files);
    dir = test::temp_dir("fit_part_runs_" + tag) + "/runs";
    po.min_pack_ns = 2'000'000;
    auto loaded = analysis::load(files, {});
    EXPECT_TRUE(loaded.ok()) << loaded.error().message();
    w = std::move(*loaded);
    auto p = pack::make_packs(w, analysis::analyze(w), profile, po);
    EXPECT_TRUE(p.ok()) << p.error().message();
    packing = std::move(*p);
    Status st = backends::write_profiled_dir(test::target("emulated:h100"), w, packing, dir);
    EXPECT_TRUE(st.ok()) << st.error().message();
    auto r = backends::read_profiled_dir(dir, w, &packing);
    EXPECT_TRUE(r.ok()) << r.error().message();
    runs = std::move(*r);
    auto m = pack::fit_pack_models(w, packing, runs, profile);
    EXPECT_TRUE(m.ok()) << m.error().message();
    models = std::move(*m);
  }
  // The whole step's problem, as one process optimizes it.
  optimize::Problem problem() const {
    optimize::Problem pr;
    pr.workload = &w;
    pr.packing = &packing;
    pr.models = &models;
    pr.default_clock_mhz = int(profile.default_clock_mhz.value);
    return pr;
  }
};

// The search moves' budgets cut so that a test stays short (each trial over the parts replays the whole
// step); the same budgets in one process.
optimize::OptimizeOptions short_search() {
  optimize::OptimizeOptions opt;
  opt.kick_replays = 1500;
  opt.polish_replays = 600;
  opt.block_replays = 600;
  return opt;
}

// Process `part`'s runs and models against one process's, for its GPUs: equal, bit for bit.
void expect_part_of(const Profiled& one, const Part& part, const std::string& what) {
  ASSERT_EQ(part.runs.size(), one.runs.size()) << what;
  const size_t gpus = part.models.gpus.size(), first = part.first_rank;
  ASSERT_LE(first + gpus, one.models.gpus.size()) << what;
  for (size_t i = 0; i < one.runs.size(); ++i) {
    const pack::ProfiledRun& want = one.runs[i];
    const pack::ProfiledRun& got = part.runs[i];
    EXPECT_EQ(got.clock_mhz, want.clock_mhz) << what;
    ASSERT_TRUE(got.digest.has_value()) << what;
    EXPECT_EQ(got.digest->step_s, want.digest->step_s) << what << ", " << want.clock_mhz << " MHz";
    ASSERT_EQ(got.digest->spans.size(), gpus) << what;
    ASSERT_EQ(got.energy.size(), gpus) << what;
    for (size_t r = 0; r < gpus; ++r) {
      EXPECT_EQ(got.digest->spans[r], want.digest->spans[first + r]) << what << ", rank " << first + r;
      ASSERT_EQ(got.energy[r].size(), want.energy[first + r].size()) << what;
      for (size_t k = 0; k < got.energy[r].size(); ++k) {
        EXPECT_EQ(got.energy[r][k].t_ns, want.energy[first + r][k].t_ns) << what;
        EXPECT_EQ(got.energy[r][k].energy_mj, want.energy[first + r][k].energy_mj) << what;
      }
    }
  }
  const pack::PackModels& m = part.models;
  const pack::PackModels& o = one.models;
  EXPECT_EQ(m.clocks_mhz, o.clocks_mhz) << what;
  ASSERT_EQ(m.signatures.size(), o.signatures.size()) << what;
  const std::vector<double> clocks{705, 1095, 1410, 1755, 1980};
  for (size_t s = 0; s < o.signatures.size(); ++s) {
    const std::string sig = what + ", signature " + std::to_string(s);
    EXPECT_EQ(m.signatures[s].fitted, o.signatures[s].fitted) << sig;
    EXPECT_EQ(m.signatures[s].fit_failed, o.signatures[s].fit_failed) << sig;
    EXPECT_EQ(m.signatures[s].communication, o.signatures[s].communication) << sig;
    EXPECT_EQ(m.signatures[s].ref_time_s, o.signatures[s].ref_time_s) << sig;
    EXPECT_EQ(m.signatures[s].compute_share, o.signatures[s].compute_share) << sig;
    EXPECT_EQ(m.signatures[s].op_ref_s, o.signatures[s].op_ref_s) << sig;
    for (double f : clocks) {
      const auto si = pack::SignatureIndex(uint32_t(s));
      EXPECT_EQ(m.time_ratio(si, f), o.time_ratio(si, f)) << sig << " at " << f;
      for (size_t r = 0; r < gpus; ++r) {
        EXPECT_EQ(m.busy_power_w(si, graph::RankIndex(uint32_t(r)), f),
                  o.busy_power_w(si, graph::RankIndex(uint32_t(first + r)), f))
            << sig << " on rank " << first + r << " at " << f;
      }
    }
  }
  ASSERT_EQ(m.gpus.size(), gpus) << what;
  for (size_t r = 0; r < gpus; ++r) {
    const pack::GpuCorrection& got = m.gpus[r];
    const pack::GpuCorrection& want = o.gpus[first + r];
    const std::string gpu = what + ", rank " + std::to_string(first + r);
    EXPECT_EQ(got.static_scale, want.static_scale) << gpu;
    EXPECT_EQ(got.dynamic_scale, want.dynamic_scale) << gpu;
    EXPECT_EQ(got.floor_scale, want.floor_scale) << gpu;
    EXPECT_EQ(got.knee_scale, want.knee_scale) << gpu;
    EXPECT_EQ(got.limit_scale, want.limit_scale) << gpu;
    EXPECT_EQ(got.concurrent_share, want.concurrent_share) << gpu;
    EXPECT_EQ(got.measured_j, want.measured_j) << gpu;
    EXPECT_EQ(got.predicted_j, want.predicted_j) << gpu;
    EXPECT_EQ(got.residual, want.residual) << gpu;
    for (double f : clocks) {
      EXPECT_EQ(m.idle_power_w(graph::RankIndex(uint32_t(r)), f), o.idle_power_w(graph::RankIndex(uint32_t(first + r)), f))
          << gpu << " at " << f;
    }
  }
  // Its GPUs' overlaps, by its own atom indices.
  size_t atom_base = 0;
  for (const pack::Atom& a : one.packing.atoms) atom_base += a.rank.index() < first;
  std::vector<pack::PackModels::Overlap> want;
  for (const pack::PackModels::Overlap& ov : o.overlaps) {
    if (ov.first >= atom_base && ov.first < atom_base + part.atoms)
      want.push_back({uint32_t(ov.first - atom_base), uint32_t(ov.second - atom_base), ov.ns});
  }
  ASSERT_EQ(m.overlaps.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(m.overlaps[i].first, want[i].first) << what;
    EXPECT_EQ(m.overlaps[i].second, want[i].second) << what;
    EXPECT_EQ(m.overlaps[i].ns, want[i].ns) << what;
  }
  EXPECT_EQ(m.overlap_clocks_mhz, o.overlap_clocks_mhz) << what;
}

void expect_fit_of_one_process(const Profiled& one, const std::string& what, std::initializer_list<int> sizes) {
  for (int size : sizes) {
    const std::string at = what + ", P = " + std::to_string(size);
    const std::vector<Part> parts = fit_parts(one.files, one.dir, one.profile, one.po, size);
    size_t gpus = 0;
    for (int p = 0; p < size; ++p) {
      const Part& part = parts[size_t(p)];
      ASSERT_TRUE(part.status.ok()) << at << ", process " << p << ": " << part.status.error().message();
      expect_part_of(one, part, at + ", process " + std::to_string(p));
      gpus += part.models.gpus.size();
    }
    EXPECT_EQ(gpus, one.models.gpus.size()) << at;
  }
}

TEST(FitPart, TheSyntheticFamiliesFitAsOneProcess) {
  size_t overlaps = 0;
  for (auto wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    const Profiled one(synth::workload_name(wl), wl, 4);
    ASSERT_GE(one.runs.size(), 2u);
    // Signatures with members on several processes: data-parallel replicas share every one.
    size_t shared = 0;
    for (const pack::Signature& s : one.packing.signatures) shared += s.members > 1;
    if (wl == synth::Workload::kTrainDP) {
      EXPECT_GT(shared, 0u);
    }
    expect_fit_of_one_process(one, synth::workload_name(wl), {1, 2, 3, 4, 6});
    overlaps += one.models.overlaps.size();
  }
  EXPECT_GT(overlaps, 0u) << "no family's atoms ran at once: the overlaps are not compared";
}

// A plan's name, time, energy and feasibility: one process's.
void expect_plan(const optimize::Plan& want, const optimize::Plan& got, const std::string& what) {
  EXPECT_EQ(got.name, want.name) << what;
  EXPECT_EQ(got.time_ns, want.time_ns) << what;
  EXPECT_EQ(got.energy_j, want.energy_j) << what;
  EXPECT_EQ(got.feasible, want.feasible) << what;
}

// Every process's Solution against one process's `want`: the default plan, the policy and where it came from,
// the targets, the replays and every baseline, and each plan's clocks the processes' slices of its clocks.
void expect_solution_of_one_process(const optimize::Solution& want, const std::vector<Part>& parts,
                                    const std::string& at) {
  std::vector<int> policy;
  std::vector<std::vector<int>> baselines(want.baselines.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    const Part& part = parts[p];
    const std::string in = at + ", process " + std::to_string(p);
    ASSERT_TRUE(part.status.ok()) << in << ": " << part.status.error().message();
    ASSERT_TRUE(part.start.has_value()) << in;
    const optimize::Solution& got = *part.start;
    expect_plan(want.default_plan, got.default_plan, in + ", default");
    expect_plan(want.policy, got.policy, in + ", policy");
    EXPECT_EQ(got.policy_from, want.policy_from) << in;
    EXPECT_EQ(got.target_ns, want.target_ns) << in;
    EXPECT_EQ(got.plan_target_ns, want.plan_target_ns) << in;
    EXPECT_EQ(got.replays, want.replays) << in;
    ASSERT_EQ(got.baselines.size(), want.baselines.size()) << in;
    for (size_t b = 0; b < got.baselines.size(); ++b) {
      expect_plan(want.baselines[b], got.baselines[b], in + ", " + want.baselines[b].name);
      baselines[b].insert(baselines[b].end(), got.baselines[b].pack_clock_mhz.begin(),
                          got.baselines[b].pack_clock_mhz.end());
    }
    policy.insert(policy.end(), got.policy.pack_clock_mhz.begin(), got.policy.pack_clock_mhz.end());
  }
  EXPECT_EQ(policy, want.policy.pack_clock_mhz) << at;
  for (size_t b = 0; b < baselines.size(); ++b)
    EXPECT_EQ(baselines[b], want.baselines[b].pack_clock_mhz) << at << ", " << want.baselines[b].name;
}

// A real step: ../shared's 8-rank DLRM (its collectives matched across processes), profiled on the emulated
// GPU: fitted at P = 2, 3 and 8, and optimized at P = 3 (optimize_part, the moves'
// budgets cut, the same in one process): optimize()'s Solution on every process, and its policy file.
TEST(FitPart, TheEightRankDlrmStepFitsAndOptimizesAsOneProcess) {
  EMO_REQUIRE_SHARED(dlrm, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  auto files = analysis::expand_trace_paths({dlrm});
  ASSERT_TRUE(files.ok()) << files.error().message();
  const Profiled one("dlrm", *files);
  ASSERT_GE(one.runs.size(), 2u);
  expect_fit_of_one_process(one, "dlrm", {2, 3, 8});
  const optimize::Problem whole = one.problem();
  const optimize::OptimizeOptions opt = short_search();
  auto want = optimize::optimize(whole, opt);
  ASSERT_TRUE(want.ok()) << want.error().message();
  EXPECT_LT(want->policy.energy_j, want->default_plan.energy_j);
  const std::vector<Part> parts = fit_parts(one.files, one.dir, one.profile, one.po, 3, {}, &opt, true);
  expect_solution_of_one_process(*want, parts, "dlrm, P = 3");
  EXPECT_EQ(parts[0].policy, optimize::policy_json(whole, *want, opt.max_slowdown, opt.reserve).dump());
}

// Every error is the first failing process's, said on every process: the folder's (process 0's listing),
// an energy log of the last rank cut short (read by the last process), a trace missing for the last rank at
// one clock, and that trace without a kernel (its ops are not the step's: found by the last process).
TEST(FitPart, ErrorsAreOneProcesss) {
  const Profiled one("errors", synth::Workload::kTrainDP, 4);
  ASSERT_GE(one.runs.size(), 2u);
  const int clock = one.runs.back().clock_mhz;
  const fs::path clock_dir = fs::path(one.dir) / (std::to_string(clock) + "mhz");
  const auto expect_error = [&](const std::string& dir, const std::string& what, const std::string& needle) {
    auto whole = backends::read_profiled_dir(dir, one.w, &one.packing);
    ASSERT_FALSE(whole.ok()) << what;
    for (int size : {1, 3}) {
      const std::vector<Part> parts = fit_parts(one.files, dir, one.profile, one.po, size);
      for (int p = 0; p < size; ++p) {
        const Status& st = parts[size_t(p)].status;
        ASSERT_FALSE(st.ok()) << what << ", P = " << size << ", process " << p;
        EXPECT_EQ(st.error().message(), whole.error().message()) << what << ", P = " << size << ", process " << p;
        EXPECT_NE(st.error().message().find(needle), std::string::npos) << st.error().message();
      }
    }
  };
  expect_error(one.dir + "/none", "no folder", "no such folder");
  // A copy of the folder with one clock only.
  const std::string single = test::temp_dir("fit_part_single");
  fs::copy(clock_dir, fs::path(single) / clock_dir.filename(), fs::copy_options::recursive);
  expect_error(single, "one clock", "at least 2 are needed");
  // Rank 1's and the last rank's energy logs at the top clock: one reading, and no header (two processes
  // fail at P = 3; rank 1's is said, as one process reads rank 1 first).
  const std::string energy = (clock_dir / "rank3.energy.csv").string(), energy1 = (clock_dir / "rank1.energy.csv").string();
  const std::string energy_text = *read_file(energy), energy1_text = *read_file(energy1);
  {
    std::ofstream(energy1) << "t_ns,energy_mj\n1000,5\n";
    std::ofstream(energy) << "1000,5\n2000,6\n";
  }
  expect_error(one.dir, "short energy logs", "fewer than 2 readings");
  {
    std::ofstream(energy1) << energy1_text;
  }
  expect_error(one.dir, "an energy log without its header", "expected the header");
  {
    std::ofstream(energy) << energy_text;
  }
  // The last rank's trace at that clock: missing, then without its last kernel (not the step's ops).
  const std::string trace = (clock_dir / "rank3.json").string();
  const std::string trace_text = *read_file(trace);
  fs::remove(trace);
  expect_error(one.dir, "missing trace", "missing");
  nlohmann::json j = nlohmann::json::parse(trace_text);
  auto& events = j["traceEvents"];
  for (size_t i = events.size(); i-- > 0;) {
    if (events[i].value("cat", "") == "kernel") {
      events.erase(i);
      break;
    }
  }
  {
    std::ofstream(trace) << j.dump();
  }
  expect_error(one.dir, "a kernel fewer", "GPU ops in its step");
  {
    std::ofstream(trace) << trace_text;
  }
}

// A plan priced over the parts (optimize::predict_part): the step time and energy of predict() of the whole
// step, bit for bit, for the default clocks, one lower clock everywhere and a mix that changes clock from
// pack to pack (switches priced on every GPU); and clocks that do not fit a process's packs are one error.
TEST(PredictPart, PlansArePricedAsOneProcess) {
  for (auto wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    const Profiled one(std::string("predict_") + synth::workload_name(wl), wl, 4);
    const int fdef = int(one.profile.default_clock_mhz.value);
    std::vector<int> candidates;
    for (int c : one.profile.sm_clocks.mhz) {
      if (c >= 0.45 * one.profile.max_clock_mhz() && c <= fdef) candidates.push_back(c);
    }
    ASSERT_GE(candidates.size(), 3u);
    // Pack k of the step: its clock in each plan.
    const auto clock_of = [&](size_t plan, size_t k) {
      if (plan == 0) return fdef;
      if (plan == 1) return candidates[candidates.size() / 3];
      return candidates[(k * 7 + 3) % candidates.size()];
    };
    const size_t n_plans = 3;
    const optimize::Problem whole = one.problem();
    std::vector<optimize::Plan> want;
    for (size_t i = 0; i < n_plans; ++i) {
      std::vector<int> clocks;
      for (size_t k = 0; k < one.packing.packs.size(); ++k) clocks.push_back(clock_of(i, k));
      want.push_back(optimize::predict(whole, clocks));
    }
    EXPECT_LT(want[1].energy_j, want[0].energy_j);
    EXPECT_GT(want[1].time_ns, want[0].time_ns);
    const Plans plans = [&](const pack::Packing& mine, size_t first_rank) {
      size_t base = 0;  // the step's index of this process's first pack
      for (const pack::Pack& pk : one.packing.packs) base += pk.rank.index() < first_rank;
      std::vector<std::vector<int>> out(n_plans);
      for (size_t i = 0; i < n_plans; ++i) {
        for (size_t k = 0; k < mine.packs.size(); ++k) out[i].push_back(clock_of(i, base + k));
      }
      return out;
    };
    for (int size : {1, 2, 3, 4, 6}) {
      const std::string at = std::string(synth::workload_name(wl)) + ", P = " + std::to_string(size);
      const std::vector<Part> parts = fit_parts(one.files, one.dir, one.profile, one.po, size, plans);
      for (int p = 0; p < size; ++p) {
        const Part& part = parts[size_t(p)];
        ASSERT_TRUE(part.status.ok()) << at << ", process " << p << ": " << part.status.error().message();
        ASSERT_EQ(part.plans.size(), n_plans) << at;
        for (size_t i = 0; i < n_plans; ++i) {
          EXPECT_EQ(part.plans[i].time_ns, want[i].time_ns) << at << ", process " << p << ", plan " << i;
          EXPECT_EQ(part.plans[i].energy_j, want[i].energy_j) << at << ", process " << p << ", plan " << i;
        }
      }
    }
    // One clock too few on the last process: its error, on every process.
    const Plans short_plans = [&](const pack::Packing& mine, size_t first_rank) {
      std::vector<int> clocks(mine.packs.size(), fdef);
      if (first_rank + mine.gpus.size() == one.packing.gpus.size() && !clocks.empty()) clocks.pop_back();
      return std::vector<std::vector<int>>{clocks};
    };
    const std::vector<Part> bad = fit_parts(one.files, one.dir, one.profile, one.po, 3, short_plans);
    for (int p = 0; p < 3; ++p) {
      ASSERT_FALSE(bad[size_t(p)].status.ok()) << "process " << p;
      EXPECT_NE(bad[size_t(p)].status.error().message().find("of process 2's GPUs"), std::string::npos)
          << bad[size_t(p)].status.error().message();
    }
  }
}

// The optimizer's first stages over the parts (optimize::solve_start_part: each GPU's DP where its packs
// live, every plan of the budget search and of the baselines replayed over the parts): solve_start()'s
// Solution of the whole step — the default plan, the targets, the DP's plan or the baseline it starts
// from, every baseline, the replays — with each plan's clocks the processes' slices of its clocks; with each
// GPU's share searched on its own, with the shares of a replica set searched together across processes
// (shares_per_gpu_max below the GPUs), and at a larger slowdown.
TEST(SolveStartPart, TheFirstStagesAreOneProcesss) {
  for (auto wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    const Profiled one(std::string("dp_") + synth::workload_name(wl), wl, 4);
    const optimize::Problem whole = one.problem();
    for (int variant = 0; variant < 3; ++variant) {
      optimize::OptimizeOptions opt;
      if (variant == 1) opt.shares_per_gpu_max = 2;  // 4 GPUs: shares by replica set
      if (variant == 2) opt.max_slowdown = 0.12;
      auto want = optimize::solve_start(whole, opt);
      ASSERT_TRUE(want.ok()) << want.error().message();
      EXPECT_TRUE(want->policy.feasible);
      EXPECT_LT(want->policy.energy_j, want->default_plan.energy_j) << synth::workload_name(wl);
      ASSERT_EQ(want->baselines.size(), 3u);
      // Across 4 processes for the replica set's shares (one GPU each), 3 at the larger slowdown, 2 and 6
      // (two processes without a GPU) at the default one.
      for (int size : variant == 1 ? std::vector<int>{4} : variant == 2 ? std::vector<int>{3} : std::vector<int>{2, 6}) {
        const std::string at = std::string(synth::workload_name(wl)) + ", variant " + std::to_string(variant) +
                               ", P = " + std::to_string(size);
        expect_solution_of_one_process(*want, fit_parts(one.files, one.dir, one.profile, one.po, size, {}, &opt), at);
      }
    }
  }
}

// The whole optimizer over the parts (optimize::optimize_part: the first stages, then every search move's
// trial priced over the parts and the plans priced again in issue order): optimize()'s Solution of the whole
// step — the policy after the moves, its clocks, the replays they took — on every process, and its policy
// file from process 0 (optimize::policy_json_part), for the three families at P = 2 and 3 (and 6 on train-dp:
// two processes without a GPU) (the moves'
// budgets cut so that the test stays short: the same budgets in one process), and from a given start
// (OptimizeOptions::start_clocks).
TEST(OptimizePart, TheSearchMovesAreOneProcesss) {
  for (auto wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    const Profiled one(std::string("opt_") + synth::workload_name(wl), wl, 4);
    const optimize::Problem whole = one.problem();
    optimize::OptimizeOptions opt = short_search();
    // ... and bounded by the step's replayed points below that: 400 and 300 replays.
    opt.polish_point_visits = 400.0 * double(one.w.graph.num_points());
    opt.block_point_visits = 300.0 * double(one.w.graph.num_points());
    auto start = optimize::solve_start(whole, opt);
    ASSERT_TRUE(start.ok()) << start.error().message();
    auto want = optimize::optimize(whole, opt);
    ASSERT_TRUE(want.ok()) << want.error().message();
    // The moves ran and moved the policy off its start.
    EXPECT_GT(want->replays, start->replays + 300) << synth::workload_name(wl);
    EXPECT_NE(want->policy.pack_clock_mhz, start->policy.pack_clock_mhz) << synth::workload_name(wl);
    std::printf("%s: %zu packs, %d replays (first stages %d)\n", synth::workload_name(wl), one.packing.packs.size(), want->replays, start->replays);
    // The policy file: process 0's, the same JSON as one process's; null on the others.
    const std::string file = optimize::policy_json(whole, *want, opt.max_slowdown, opt.reserve).dump();
    EXPECT_NE(file.find("\"issue_at_us\""), std::string::npos);
    // Train-dp also over 6 processes: two without a GPU take part in every trial and round.
    for (int size : wl == synth::Workload::kTrainDP ? std::vector<int>{2, 3, 6} : std::vector<int>{2, 3}) {
      const std::string at = std::string(synth::workload_name(wl)) + ", P = " + std::to_string(size);
      const std::vector<Part> parts = fit_parts(one.files, one.dir, one.profile, one.po, size, {}, &opt, true);
      expect_solution_of_one_process(*want, parts, at);
      EXPECT_EQ(parts[0].policy, file) << at;
      for (size_t p = 1; p < parts.size(); ++p) EXPECT_EQ(parts[p].policy, "null") << at;
    }
    if (wl != synth::Workload::kTrainDP) continue;
    // From a start the caller gives (the whole step's clocks: the policy found).
    opt.start_clocks = want->policy.pack_clock_mhz;
    auto from = optimize::optimize(whole, opt);
    ASSERT_TRUE(from.ok()) << from.error().message();
    EXPECT_EQ(from->policy_from, "first_solve");
    expect_solution_of_one_process(*from, fit_parts(one.files, one.dir, one.profile, one.po, 2, {}, &opt, true),
                                   "train-dp from a start, P = 2");
  }
}

}  // namespace
}  // namespace emo
