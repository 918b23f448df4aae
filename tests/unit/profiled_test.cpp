// Profiling runs on disk (the layout a hardware capture writes) give the same pack models as the
// in-memory runs; bad folders and energy logs are clear errors; the pack models' per-pack and step
// predictions at an unprofiled clock match the emulated GPU's truth; kernel-level packing is one op a pack.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "emo/backends/evaluation.h"
#include "emo/backends/profiling.h"
#include "emo/optimize/check.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"
#include "synth_workload.h"

namespace emo::backends {
namespace {

namespace fs = std::filesystem;

struct TmpDir {
  std::string path;
  TmpDir() : path((fs::temp_directory_path() / ("emo_profiled_" + std::to_string(::getpid()))).string()) {
    fs::remove_all(path);
  }
  ~TmpDir() { fs::remove_all(path); }
};

struct Small {
  analysis::Workload w = test::synth_workload(synth::Workload::kTrainDP, 2, 3, 5);
  device::DeviceProfile profile = *device::builtin_profile("h100");
  pack::Packing packing;
  Small() {
    pack::PackOptions po;
    po.min_pack_ns = 2000000;
    auto p = pack::make_packs(w, analysis::analyze(w), profile, po);
    EXPECT_TRUE(p.ok());
    packing = std::move(*p);
  }
};

TEST(Profiled, FolderGivesTheSameModelsAsInMemoryRuns) {
  Small s;
  TmpDir dir;
  ASSERT_TRUE(write_profiled_dir(test::target("emulated:h100"), s.w, s.packing, dir.path).ok());
  for (int c : s.packing.plan_clocks_mhz) {
    EXPECT_TRUE(fs::exists(fs::path(dir.path) / (std::to_string(c) + "mhz") / "rank0.json")) << c;
    EXPECT_TRUE(fs::exists(fs::path(dir.path) / (std::to_string(c) + "mhz") / "rank1.energy.csv")) << c;
  }
  auto from_disk = read_profiled_dir(dir.path, s.w);
  ASSERT_TRUE(from_disk.ok()) << from_disk.error().what;
  auto in_memory = profile_plan(test::target("emulated:h100"), s.w, s.packing);
  ASSERT_TRUE(in_memory.ok());
  std::sort(in_memory->begin(), in_memory->end(), [](const auto& a, const auto& b) { return a.clock_mhz < b.clock_mhz; });
  for (size_t i = 0; i < in_memory->size(); ++i) EXPECT_EQ((*from_disk)[i].clock_mhz, (*in_memory)[i].clock_mhz);
  ASSERT_EQ(from_disk->size(), in_memory->size());
  auto m1 = pack::fit_pack_models(s.w, s.packing, *from_disk, s.profile);
  auto m2 = pack::fit_pack_models(s.w, s.packing, *in_memory, s.profile);
  ASSERT_TRUE(m1.ok() && m2.ok());
  ASSERT_EQ(m1->gpus.size(), m2->gpus.size());
  for (size_t g = 0; g < m1->gpus.size(); ++g) {
    for (size_t i = 0; i < m1->gpus[g].measured_j.size(); ++i)
      EXPECT_NEAR(m1->gpus[g].measured_j[i], m2->gpus[g].measured_j[i], 1e-9 * m2->gpus[g].measured_j[i]);
  }
  for (int f : {1200, 1500}) {
    for (uint32_t k = 0; k < s.packing.packs.size(); ++k) {
      EXPECT_NEAR(pack::predict_pack(s.packing, *m1, pack::PackIndex(k), f).energy_j, pack::predict_pack(s.packing, *m2, pack::PackIndex(k), f).energy_j, 1e-9);
    }
  }
  // Read with the packing, each run is digested as it is read: its traces freed, the very same models.
  auto digested = read_profiled_dir(dir.path, s.w, &s.packing);
  ASSERT_TRUE(digested.ok()) << digested.error().what;
  for (const pack::ProfiledRun& r : *digested) {
    EXPECT_TRUE(r.digest.has_value());
    EXPECT_TRUE(r.traces.empty());
  }
  EXPECT_FALSE((*from_disk)[0].digest.has_value());
  auto m3 = pack::fit_pack_models(s.w, s.packing, *digested, s.profile);
  ASSERT_TRUE(m3.ok()) << m3.error().what;
  for (size_t g = 0; g < m1->gpus.size(); ++g) {
    EXPECT_EQ(m3->gpus[g].predicted_j, m1->gpus[g].predicted_j) << g;
    EXPECT_EQ(m3->gpus[g].dynamic_scale, m1->gpus[g].dynamic_scale) << g;
  }
  for (uint32_t k = 0; k < s.packing.packs.size(); ++k)
    EXPECT_EQ(pack::predict_pack(s.packing, *m3, pack::PackIndex(k), 1200).energy_j,
              pack::predict_pack(s.packing, *m1, pack::PackIndex(k), 1200).energy_j) << k;
}

TEST(Profiled, BadFoldersAreClearErrors) {
  Small s;
  TmpDir dir;
  auto missing = read_profiled_dir(dir.path, s.w);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().what.find("no such folder"), std::string::npos);
  ASSERT_TRUE(write_profiled_dir(test::target("emulated:h100"), s.w, s.packing, dir.path).ok());
  const std::string c0 = std::to_string(s.packing.plan_clocks_mhz[0]) + "mhz";
  // A rank's energy log missing.
  fs::rename(fs::path(dir.path) / c0 / "rank1.energy.csv", fs::path(dir.path) / "aside.csv");
  auto no_log = read_profiled_dir(dir.path, s.w);
  ASSERT_FALSE(no_log.ok());
  EXPECT_NE(no_log.error().where.find("rank1.energy.csv"), std::string::npos);
  fs::rename(fs::path(dir.path) / "aside.csv", fs::path(dir.path) / c0 / "rank1.energy.csv");
  ASSERT_TRUE(read_profiled_dir(dir.path, s.w).ok());
  // Traces of another program: the fit names the mismatch.
  auto other = test::synth_workload(synth::Workload::kTrainDP, 2, 4, 5);
  auto runs = read_profiled_dir(dir.path, other);
  ASSERT_TRUE(runs.ok());
  pack::PackOptions po;
  auto op = pack::make_packs(other, analysis::analyze(other), s.profile, po);
  ASSERT_TRUE(op.ok());
  EXPECT_FALSE(pack::fit_pack_models(other, *op, *runs, s.profile).ok());
  // Digested as they are read, the runs say it at once, naming the run.
  auto digest_other = read_profiled_dir(dir.path, other, &*op);
  ASSERT_FALSE(digest_other.ok());
  EXPECT_NE(digest_other.error().where.find("profiling run at"), std::string::npos) << digest_other.error().where;
  EXPECT_NE(digest_other.error().what.find("GPU ops in its step"), std::string::npos) << digest_other.error().what;
  // Only one clock folder left.
  for (size_t i = 1; i < s.packing.plan_clocks_mhz.size(); ++i)
    fs::remove_all(fs::path(dir.path) / (std::to_string(s.packing.plan_clocks_mhz[i]) + "mhz"));
  auto one = read_profiled_dir(dir.path, s.w);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.error().what.find("at least 2"), std::string::npos);
}

TEST(Profiled, EnergyLogParsing) {
  auto ok = parse_energy_log("# emo-energy-log/1 device=x\r\nt_ns,energy_mj\r\n10,5\r\n20,7\n", "e.csv");
  ASSERT_TRUE(ok.ok()) << ok.error().what;
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].t_ns, 20);
  EXPECT_EQ((*ok)[1].energy_mj, 7);
  struct Bad {
    const char* text;
    const char* what;
    const char* where;
  };
  for (const Bad& b : {Bad{"", "empty", "e.csv"}, Bad{"time,energy\n1,2\n", "header", "e.csv:1"},
                       Bad{"t_ns,energy_mj\n1,2\n2,x\n", "not an integer", "e.csv:3"},
                       Bad{"t_ns,energy_mj\n5,2\n5,3\n", "increase", "e.csv:3"},
                       Bad{"t_ns,energy_mj\n1,9\n2,3\n", "went down", "e.csv:3"},
                       Bad{"t_ns,energy_mj\n1 2\n", "two columns", "e.csv:2"},
                       Bad{"t_ns,energy_mj\n1,2\n", "fewer than 2", "e.csv"}}) {
    auto r = parse_energy_log(b.text, "e.csv");
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_NE(r.error().what.find(b.what), std::string::npos) << b.text << " -> " << r.error().what;
    EXPECT_EQ(r.error().where, b.where) << b.text;
  }
}

TEST(Profiled, PackPredictionsAtAnUnprofiledClockMatchTheEmulator) {
  Small s;
  auto runs = profile_plan(test::target("emulated:h100"), s.w, s.packing);
  ASSERT_TRUE(runs.ok());
  auto m = pack::fit_pack_models(s.w, s.packing, *runs, s.profile);
  ASSERT_TRUE(m.ok());
  const int f = 1305;  // not a plan clock
  ASSERT_EQ(std::count(s.packing.plan_clocks_mhz.begin(), s.packing.plan_clocks_mhz.end(), f), 0);
  auto fid = pack_fidelity(test::target("emulated:h100"), s.w, s.packing, *m, f);
  ASSERT_TRUE(fid.ok()) << fid.error().what;
  ASSERT_FALSE(fid->packs.empty());
  double pred_e = 0, true_e = 0, worst_t = 0;
  std::vector<double> t_err, e_err;
  for (const auto& r : fid->packs) {
    t_err.push_back(std::abs(r.predicted_busy_ns / double(r.true_busy_ns) - 1));
    e_err.push_back(std::abs(r.predicted_energy_j / r.true_energy_j - 1));
    ASSERT_GT(r.true_busy_ns, 0);
    ASSERT_GT(r.true_energy_j, 0);
    pred_e += r.predicted_energy_j;
    true_e += r.true_energy_j;
    worst_t = std::max(worst_t, std::abs(r.predicted_busy_ns / double(r.true_busy_ns) - 1));
    std::printf("  pack %u rank %d %-40.40s busy %.1f/%.1f us energy %.4f/%.4f J\n", r.pack.value(), r.rank_id, r.first_name.c_str(),
                r.predicted_busy_ns / 1e3, double(r.true_busy_ns) / 1e3, r.predicted_energy_j, r.true_energy_j);
  }
  std::printf("%zu packs at %d MHz: worst pack time error %.2f %%, pack energy total error %.2f %%, step %.2f %% / %.2f %%\n",
              fid->packs.size(), f, 100 * worst_t, 100 * (pred_e / true_e - 1),
              100 * (double(fid->predicted_step_ns) / fid->true_step_ns - 1), 100 * (fid->predicted_step_j / fid->true_step_j - 1));
  // Time per pack is fitted from the profiled traces: close everywhere. Energy per pack comes from the
  // profile's power predictors (the counter only sees whole steps), corrected per GPU: the sum is close,
  // single packs less so (docs/optimize.md reports the spread).
  std::sort(t_err.begin(), t_err.end());
  std::sort(e_err.begin(), e_err.end());
  EXPECT_LT(t_err[t_err.size() / 2], 0.02);
  EXPECT_LT(worst_t, 0.10);
  EXPECT_LT(e_err[e_err.size() / 2], 0.15);
  EXPECT_LT(std::abs(pred_e / true_e - 1), 0.03);
  EXPECT_LT(std::abs(double(fid->predicted_step_ns) / fid->true_step_ns - 1), 0.02);
  EXPECT_LT(std::abs(fid->predicted_step_j / fid->true_step_j - 1), 0.03);
  // The truth is a measurement: the same packs at a lower clock take longer on the emulator.
  auto slow = pack_fidelity(test::target("emulated:h100"), s.w, s.packing, *m, 1005);
  ASSERT_TRUE(slow.ok());
  double t_hi = 0, t_lo = 0;
  for (size_t i = 0; i < fid->packs.size(); ++i) t_hi += double(fid->packs[i].true_busy_ns), t_lo += double(slow->packs[i].true_busy_ns);
  EXPECT_GT(t_lo, t_hi * 1.02);
  EXPECT_FALSE(pack_fidelity(test::target("emulated:h100"), s.w, s.packing, *m, 1234).ok());  // not a supported clock
  EXPECT_FALSE(pack_fidelity(test::target("h100"), s.w, s.packing, *m, f).ok());               // no truth without the emulator
}

TEST(Profiled, KernelLevelPackingIsOneOpPerPack) {
  Small s;
  pack::PackOptions po;
  po.per_kernel = true;
  auto p = pack::make_packs(s.w, analysis::analyze(s.w), s.profile, po);
  ASSERT_TRUE(p.ok());
  size_t with_ops = 0;
  for (const auto& pk : p->packs) {
    if (pk.first_op > pk.last_op) continue;  // an idle gap
    EXPECT_EQ(pk.first_op, pk.last_op);
    ++with_ops;
  }
  EXPECT_EQ(int64_t(with_ops), p->kernel_ops);
  EXPECT_GT(p->packs.size(), s.packing.packs.size());
}

}  // namespace
}  // namespace emo::backends
