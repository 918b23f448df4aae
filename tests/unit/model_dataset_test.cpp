// Datasets and the model check: readers name the missing column, the wrong format or the absent fit
// clock; exact synthetic data is predicted exactly; and on the real Perseus stage profiles (from
// ../shared, skipped when absent) the 3-clock fit reaches the accuracy docs/models.md reports.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "emo/model/datasets.h"
#include "test_util.h"

namespace emo::model {
namespace {

using test::write;
using test::run;
using test::slurp;
using test::profile;



// A Perseus-format stage profile generated from a known model: 2 units x clocks 855..1410 step 15.
std::string synthetic_perseus(const std::string& dir, const device::DeviceProfile& p) {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  for (int unit = 0; unit < 2; ++unit) {
    UnitModel u;
    u.time.ref_mhz = 1410;
    u.time.mem_knee_mhz = p.time.mem_knee_frac.value * 1410;
    u.time.mem_gamma = p.time.mem_gamma.value;
    u.time.compute_s = unit == 0 ? 0.05 : 0.02;
    // Ridges at 1356 and 1343 MHz: every parameter shows in the times at 855/1140/1410 (a unit that is
    // memory-bound at all three would hide its compute share, which the power model needs).
    u.time.memory_s = unit == 0 ? 0.052 : 0.021;
    u.time.overhead_s = 0.002;
    u.power.ref_mhz = 1410;
    u.power.clock_frac = p.power.clock_frac.value;
    u.power.mem_w = p.power.mem_w.value;
    u.power.v_knee_mhz = p.voltage.knee_mhz.value;
    u.power.v_floor_rel = p.voltage.floor_rel.value;
    u.power.const_w = 60 + 10 * unit;
    u.power.dynamic_w = 420 - 50 * unit;
    for (int f = 1410; f >= 855; f -= 15) {
      Prediction pr = predict(u, f);
      csv += std::to_string(unit) + ",forward," + std::to_string(f) + "," + std::to_string(pr.time_s) + "," +
             std::to_string(pr.energy_j) + "\n";
    }
  }
  return write(dir, "synthetic_a100.csv", csv);
}

TEST(ModelDataset, ExactSyntheticDataIsPredictedExactly) {
  auto p = profile("a100");
  std::string dir = test::temp_dir("model_dataset_synth");
  auto d = load_dataset(synthetic_perseus(dir, p), Format::kPerseus);
  ASSERT_TRUE(d.ok()) << d.error().message();
  ASSERT_EQ(d->units.size(), 2u);
  EXPECT_EQ(d->units[0].name, "0/forward");
  EXPECT_EQ(d->units[0].samples.size(), 38u);
  EXPECT_EQ(suggest_device(*d), "a100");
  auto fit = auto_fit_clocks(*d);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(*fit, (std::vector<int>{855, 1140, 1410}));
  auto r = model_check(*d, p, {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->fit_clocks_auto);
  EXPECT_EQ(r->overall.n, 2u * 35u);
  // The CSV holds 6 significant digits, so "exact" means to about 1e-4.
  EXPECT_LT(r->overall.time_pct, 0.05);
  EXPECT_LT(r->overall.energy_pct, 0.05);
  EXPECT_EQ(r->clocks.size(), 35u);
}

TEST(ModelDataset, MissingColumnIsNamed) {
  std::string dir = test::temp_dir("model_dataset_cols");
  std::string path = write(dir, "p.csv", "stage,instruction,frequency,time\n0,forward,1410,0.05\n");
  auto d = load_dataset(path, Format::kPerseus);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message(), path + ": missing column 'energy'");
  EXPECT_NE(d.error().note.find("stage,instruction,frequency,time,energy"), std::string::npos);
  std::string nv = write(dir, "nv.csv", "benchmark,arg,kernel,sm_mhz,time_s\nx,a,k,1380,1.0\n");
  auto d2 = load_dataset(nv, Format::kNvDvfs);
  ASSERT_FALSE(d2.ok());
  EXPECT_NE(d2.error().what.find("'energy_j' (or 'avg_power_w')"), std::string::npos);
}

TEST(ModelDataset, WrongFormatFailsOnTheFirstMissingColumn) {
  std::string dir = test::temp_dir("model_dataset_fmt");
  std::string path = write(dir, "p.csv", "stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n");
  auto d = load_dataset(path, Format::kNvDvfs);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().what.find("missing column 'benchmark'"), std::string::npos);
  auto g = load_dataset(path, Format::kGpuDvfs);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().what.find("performance table from the power table"), std::string::npos);
  auto f = parse_format("lowtime");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().note.find("perseus, nvdvfs, gpudvfs"), std::string::npos);
}

TEST(ModelDataset, BadValuesNameTheLineAndColumn) {
  std::string dir = test::temp_dir("model_dataset_vals");
  std::string path = write(dir, "p.csv", "stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n0,forward,1395,abc,24\n");
  auto d = load_dataset(path, Format::kPerseus);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message(), path + ":line 3: column 'time': not a number: 'abc'");
  path = write(dir, "q.csv", "stage,instruction,frequency,time,energy\n0,forward,1410,0.05,-2\n");
  d = load_dataset(path, Format::kPerseus);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find(":line 2: column 'energy': must be > 0"), std::string::npos);
  path = write(dir, "r.csv", "stage,instruction,frequency,time,energy\n0,forward,1410\n");
  d = load_dataset(path, Format::kPerseus);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find(":line 2: expected 5 fields"), std::string::npos);
  auto missing = load_dataset(dir + "/absent.csv", Format::kPerseus);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().what.find("cannot read"), std::string::npos);
}

TEST(ModelDataset, FitClockNotInTheDataIsAnErrorListingTheClocks) {
  auto p = profile("a100");
  std::string dir = test::temp_dir("model_dataset_fitclock");
  auto d = load_dataset(synthetic_perseus(dir, p), Format::kPerseus);
  ASSERT_TRUE(d.ok());
  auto r = model_check(*d, p, {855, 1000, 1410});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("fit clock 1000 MHz is not in the data"), std::string::npos);
  EXPECT_NE(r.error().note.find("855,870,885"), std::string::npos);
  auto twice = model_check(*d, p, {855, 855, 1410});
  ASSERT_FALSE(twice.ok());
  auto one = model_check(*d, p, {1410});
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.error().what.find("at least 2"), std::string::npos);
}

TEST(ModelDataset, GpuDvfsReadsBothTablesFromEitherPath) {
  std::string dir = test::temp_dir("model_dataset_gpudvfs");
  std::string perf = write(dir, "dataset_performance.csv",
                           "frequency(MHz),757,1140,1530\nA,0.5,0.75,1.0\nB,0.9,1.0,1.0\nC,0.6,0.8,1.0\n");
  // No power table yet: the error names the file it looked for.
  auto d0 = load_dataset(perf, Format::kGpuDvfs);
  ASSERT_FALSE(d0.ok());
  EXPECT_NE(d0.error().where.find("dataset_power.csv"), std::string::npos);
  std::string power = write(dir, "dataset_power.csv",
                            "frequency(MHz),757,1140,1530\nA,100,150,200\nB,80,90,100\nC,90,120,160\n");
  for (const std::string& path : {perf, power}) {
    auto d = load_dataset(path, Format::kGpuDvfs);
    ASSERT_TRUE(d.ok()) << d.error().message();
    ASSERT_EQ(d->units.size(), 3u);
    EXPECT_EQ(d->files.size(), 2u);
    // time = 1 / performance; energy = power x time.
    EXPECT_DOUBLE_EQ(d->units[0].samples[0].time_s, 2.0);
    EXPECT_DOUBLE_EQ(d->units[0].samples[0].energy_j, 200.0);
    EXPECT_EQ(suggest_device(*d), "v100");
  }
  write(dir, "dataset_power.csv", "frequency(MHz),757,1140\nA,100,150\n");
  auto bad = load_dataset(perf, Format::kGpuDvfs);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what.find("clock columns differ"), std::string::npos);
}

TEST(ModelDataset, AutoFitClocksSkipTheLowestClocks) {
  Dataset d;
  d.path = "x.csv";
  Unit u;
  u.name = "k";
  for (int f : {405, 502, 600, 705, 802, 945, 1087, 1102, 1237, 1380}) u.samples.push_back(Point{double(f), 1, 1});
  d.units.push_back(u);
  auto c = auto_fit_clocks(d);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (std::vector<int>{705, 1087, 1380}));  // 0.45 x 1380 = 621; middle 1042.5 -> 1087
  d.units[0].samples.resize(2);
  EXPECT_FALSE(auto_fit_clocks(d).ok());
}

// Real data: the Perseus A100 and A40 stage profiles, fitted from 3 clocks. docs/models.md reports
// time 0.23-0.26 % / energy 1.1-1.5 % (A100) and 1.3-2.0 % / 1.5-2.1 % (A40); the bounds leave a
// margin. A40 BLOOM sits at the 2 % goal because its forward-pass time jumps +6.5 % between 1035
// and 1065 MHz (a measurement artifact no clock model follows), hence 2.5 % there.
void check_perseus(const std::string& path, const char* device, double time_max, double energy_max) {
  auto d = load_dataset(path, Format::kPerseus);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->units.size(), 16u);
  EXPECT_EQ(suggest_device(*d), device);
  auto r = model_check(*d, profile(device), {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->units_fitted, 16u);
  EXPECT_LT(r->overall.time_pct, time_max) << path;
  EXPECT_LT(r->overall.energy_pct, energy_max) << path;
  EXPECT_GT(r->overall.n, 500u);
}

TEST(ModelDataset, PerseusA100BloomWithinHalfAPercentTimeAndTwoPercentEnergy) {
  EMO_REQUIRE_SHARED(path, "dvfs/zeus-kronos__emulation__stage_profile__bloom_a100_sxm_bf16.csv");
  check_perseus(path, "a100", 0.5, 2.0);
}

TEST(ModelDataset, PerseusA100Gpt3WithinHalfAPercentTimeAndTwoPercentEnergy) {
  EMO_REQUIRE_SHARED(path, "dvfs/zeus-kronos__emulation__stage_profile__gpt3-175b_a100_sxm_bf16.csv");
  check_perseus(path, "a100", 0.5, 2.0);
}

TEST(ModelDataset, PerseusA40WithinTwoAndAHalfPercentTimeAndThreePercentEnergy) {
  EMO_REQUIRE_SHARED(bloom, "dvfs/zeus-kronos__emulation__stage_profile__bloom_a40_bf16.csv");
  check_perseus(bloom, "a40", 2.5, 3.0);
  EMO_REQUIRE_SHARED(gpt3, "dvfs/zeus-kronos__emulation__stage_profile__gpt3-175b_a40_bf16.csv");
  check_perseus(gpt3, "a40", 2.0, 3.0);
}

TEST(ModelDataset, V100DatasetsLoadWithTheirLayouts) {
  EMO_REQUIRE_SHARED(nv, "dvfs/dvfs_v100pcie_nvdvfsbench_real_slim.csv");
  auto d = load_dataset(nv, Format::kNvDvfs);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->units.size(), 20u);
  EXPECT_EQ(common_clocks(*d).size(), 10u);
  EXPECT_EQ(suggest_device(*d), "v100-pcie");
  EMO_REQUIRE_SHARED(gd, "dvfs/gpudvfsdataset__dataset_performance.csv");
  auto g = load_dataset(gd, Format::kGpuDvfs);
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_EQ(g->units.size(), 33u);
  EXPECT_EQ(common_clocks(*g).size(), 13u);
}

// The CLI contract: exit 1 with an `error:` line on bad input, 2 on usage errors, JSON keys present.


TEST(ModelCli, BadInputExitsOneAndUsageErrorsExitTwo) {
  std::string dir = test::temp_dir("model_cli");
  std::string out = dir + "/out.txt";
  std::string csv = write(dir, "p.csv", "stage,instruction,frequency,time\n0,forward,1410,0.05\n");
  EXPECT_EQ(run("model-check " + csv + " --format perseus", out), 1);
  EXPECT_NE(slurp(out).find("error: " + csv + ": missing column 'energy'"), std::string::npos) << slurp(out);
  EXPECT_NE(slurp(out).find("note: "), std::string::npos);
  EXPECT_EQ(run("model-check " + csv + " --format bogus", out), 1);
  EXPECT_NE(slurp(out).find("unknown format 'bogus'"), std::string::npos);
  EXPECT_EQ(run("model-check " + csv, out), 2);  // --format is required
  EXPECT_EQ(run("model-check " + csv + " --format perseus --fit-clocks 855,x", out), 2);
  EXPECT_EQ(run("devices nosuchgpu", out), 1);
  EXPECT_NE(slurp(out).find("note: built-in profiles: v100, a100, h100, h200"), std::string::npos) << slurp(out);
}

TEST(ModelCli, ModelCheckJsonHasTheContractKeys) {
  auto p = profile("a100");
  std::string dir = test::temp_dir("model_cli_json");
  std::string csv = synthetic_perseus(dir, p);
  std::string json = dir + "/r.json";
  ASSERT_EQ(run("model-check " + csv + " --format perseus --fit-clocks 870,1200,1395 --json " + json, dir + "/o"), 0);
  std::string text = slurp(json);
  for (const char* key : {"\"time_mape_pct\"", "\"energy_mape_pct\"", "\"fit_clocks\"", "\"units\"", "\"clocks\""}) {
    EXPECT_NE(text.find(key), std::string::npos) << key;
  }
  EXPECT_EQ(run("model-check " + csv + " --format perseus --fit-clocks 870,1201,1395", dir + "/o"), 1);
  EXPECT_NE(slurp(dir + "/o").find("fit clock 1201 MHz is not in the data"), std::string::npos);
}

TEST(DeviceCli, DevicesJsonLoadsBackAsAProfile) {
  std::string dir = test::temp_dir("device_cli");
  ASSERT_EQ(run("devices a100 --json " + dir + "/a100.json", dir + "/o"), 0);
  auto p = device::load_profile(dir + "/a100.json");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->sm_clocks.mhz.size(), 81u);
  ASSERT_EQ(run("devices", dir + "/o"), 0);
  for (const char* n : {"v100", "a100", "h100", "h200"}) EXPECT_NE(slurp(dir + "/o").find(n), std::string::npos);
}

}  // namespace
}  // namespace emo::model
