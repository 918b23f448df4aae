// The fit and the optimizer's first stages over the processes of a run (pack::fit_pack_models_part,
// optimize::solve_start_part: the DP's plan and the baselines) against one process's fit_pack_models and
// solve_start on the same step, in one run: a job of N ranks (emo synth FAMILY), profiled on the emulated
// GPU into a folder as hardware captures are; P processes (threads over dist::local_world) each load,
// analyze and pack their part, read and fit their runs, and search the DP's plan and the baselines with
// every trial replayed over the parts. Prints, per P, the median seconds of the fit (reading the runs
// included) and of the DP and the baselines over the reps, their ratios to one process's whole-step stages,
// and whether the start plan is the whole step's (its time, energy and clocks). Exits 1 where any differs.
// With --moves, the whole optimizer instead of its first stages (optimize_part against optimize: the search
// moves after them, each trial replayed over the parts, and the pricing in issue order), and the policy.
//   dp_part_bench [--family train-dp] [--ranks N] [--reps R] [--procs 1,2,4] [--moves]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "bench_util.h"
#include "emo/analysis/analysis.h"
#include "emo/backends/profiling.h"
#include "emo/backends/target.h"
#include "emo/device/device.h"
#include "emo/dist/dist.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"
#include "emo/synth/synth.h"

namespace {

using namespace emo;

using emo::bench::median;
using emo::bench::seconds_since;

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "error: %s\nusage: dp_part_bench [--family train-dp|train-pp|train-tp] [--ranks N] [--reps R] "
               "[--procs 1,2,4] [--moves]\n",
               why);
  std::exit(1);
}

int positive(const char* s, const char* flag) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 1 || v > 1 << 16) usage((std::string(flag) + " takes a positive integer").c_str());
  return int(v);
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  std::exit(1);
}

// One process's answer and its stages' seconds.
struct Part {
  std::string error;
  optimize::Plan plan;
  double fit_s = 0, dp_s = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string family = "train-dp";
  int ranks = 16, reps = 3;
  std::vector<int> procs{1, 2, 4};
  bool moves = false;
  for (int i = 1; i < argc; ++i) {
    const bool has = i + 1 < argc;
    if (!std::strcmp(argv[i], "--moves")) {
      moves = true;
    } else if (!std::strcmp(argv[i], "--family") && has) {
      family = argv[++i];
    } else if (!std::strcmp(argv[i], "--ranks") && has) {
      ranks = positive(argv[++i], "--ranks");
    } else if (!std::strcmp(argv[i], "--reps") && has) {
      reps = positive(argv[++i], "--reps");
    } else if (!std::strcmp(argv[i], "--procs") && has) {
      procs.clear();
      for (const char* s = argv[++i]; *s;) {
        const char* comma = std::strchr(s, ',');
        const std::string one = comma ? std::string(s, comma) : std::string(s);
        procs.push_back(positive(one.c_str(), "--procs"));
        s = comma ? comma + 1 : s + one.size();
      }
    } else {
      usage((std::string("unknown argument '") + argv[i] + "'").c_str());
    }
  }
  auto wl = synth::parse_workload(family);
  if (!wl) usage(wl.error().message().c_str());

  // The step's files and its profiling runs, in a fresh folder.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("emo_dp_part_bench_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "step");
  synth::Options so;
  so.workload = *wl;
  so.ranks = ranks;
  so.layers = 2;
  std::vector<std::string> files;
  if (Status st = synth::write_traces(so, (dir / "step").string(), &files); !st.ok()) fail(st.error().message());
  const device::DeviceProfile profile = *device::builtin_profile("h100");
  auto target = backends::Target::open("emulated:h100");
  if (!target) fail(target.error().message());
  auto w = analysis::load(files, {});
  if (!w) fail(w.error().message());
  pack::PackOptions po;
  po.min_pack_ns = 2'000'000;
  auto packing = pack::make_packs(*w, analysis::analyze(*w), profile, po);
  if (!packing) fail(packing.error().message());
  const std::string runs_dir = (dir / "runs").string();
  if (Status st = backends::write_profiled_dir(*target, *w, *packing, runs_dir); !st.ok()) fail(st.error().message());

  // One process, the whole step.
  std::vector<double> fit1, dp1;
  optimize::Plan want;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto runs = backends::read_profiled_dir(runs_dir, *w, &*packing);
    if (!runs) fail(runs.error().message());
    auto models = pack::fit_pack_models(*w, *packing, *runs, profile);
    if (!models) fail(models.error().message());
    fit1.push_back(seconds_since(t0));
    optimize::Problem pr;
    pr.workload = &*w;
    pr.packing = &*packing;
    pr.models = &*models;
    pr.default_clock_mhz = int(profile.default_clock_mhz.value);
    t0 = std::chrono::steady_clock::now();
    auto plan = moves ? optimize::optimize(pr, {}) : optimize::solve_start(pr, {});
    if (!plan) fail(plan.error().message());
    dp1.push_back(seconds_since(t0));
    want = plan->policy;
  }
  const char* stages = moves ? "the whole search" : "DP and baselines";
  std::printf("%s, %d ranks, %zu packs: one process: fit %.3f s (reading the runs included), %s %.3f s\n",
              family.c_str(), ranks, packing->packs.size(), median(fit1), stages, median(dp1));
  std::printf("%6s %10s %8s %10s %8s %s\n", "P", "fit s", "x one", moves ? "search s" : "DP+base s", "x one",
              "same plan");
  bool all_same = true;
  for (int P : procs) {
    std::vector<double> fit_s, dp_s;
    bool same = true;
    for (int r = 0; r < reps; ++r) {
      auto comms = dist::local_world(P);
      std::vector<Part> parts(static_cast<size_t>(P));
      std::vector<std::thread> threads;
      for (int p = 0; p < P; ++p) {
        threads.emplace_back([&, p] {
          Part& me = parts[size_t(p)];
          dist::Comm& comm = *comms[size_t(p)];
          auto wp = analysis::load_part(files, {}, comm);
          if (!wp) return void(me.error = wp.error().message());
          replay::ShardTimeline replayed;
          auto a = analysis::analyze_part(wp->part, comm, &replayed);
          if (!a) return void(me.error = a.error().message());
          auto k = pack::make_packs_part(wp->part, *a, replayed, profile, po, comm);
          if (!k) return void(me.error = k.error().message());
          auto t0 = std::chrono::steady_clock::now();
          auto runs = backends::read_profiled_dir_part(runs_dir, wp->part, k->mine, comm);
          if (!runs) return void(me.error = runs.error().message());
          auto models = pack::fit_pack_models_part(k->mine, *runs, profile, comm);
          if (!models) return void(me.error = models.error().message());
          me.fit_s = seconds_since(t0);
          optimize::Problem pr;
          pr.packing = &k->mine;
          pr.models = &*models;
          pr.default_clock_mhz = int(profile.default_clock_mhz.value);
          t0 = std::chrono::steady_clock::now();
          auto plan = moves ? optimize::optimize_part(pr, wp->part, {}, comm)
                            : optimize::solve_start_part(pr, wp->part, {}, comm);
          if (!plan) return void(me.error = plan.error().message());
          me.dp_s = seconds_since(t0);
          me.plan = std::move(plan->policy);
        });
      }
      for (auto& t : threads) t.join();
      double fit_max = 0, dp_max = 0;
      std::vector<int> clocks;
      for (const Part& part : parts) {
        if (!part.error.empty()) fail(part.error);
        fit_max = std::max(fit_max, part.fit_s);
        dp_max = std::max(dp_max, part.dp_s);
        same = same && part.plan.time_ns == want.time_ns && part.plan.energy_j == want.energy_j;
        clocks.insert(clocks.end(), part.plan.pack_clock_mhz.begin(), part.plan.pack_clock_mhz.end());
      }
      same = same && clocks == want.pack_clock_mhz;
      fit_s.push_back(fit_max);
      dp_s.push_back(dp_max);
    }
    all_same = all_same && same;
    std::printf("%6d %10.3f %8.2f %10.3f %8.2f %s\n", P, median(fit_s), median(fit_s) / median(fit1), median(dp_s),
                median(dp_s) / median(dp1), same ? "yes" : "NO");
  }
  fs::remove_all(dir);
  return all_same ? 0 : 1;
}
