// Time/power/energy models vs SM clock: the roofline shapes, exact recovery of known parameters from
// synthetic data at 3 clocks, the power cap, and rejection of unusable points.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "emo/device/profile.h"
#include "emo/model/models.h"
#include "test_util.h"

namespace emo::model {
namespace {

using test::profile;


TimeModel time_model(const device::DeviceProfile& p, double tc, double tm, double to) {
  TimeModel t;
  t.ref_mhz = p.max_clock_mhz();
  t.mem_knee_mhz = p.time.mem_knee_frac.value * t.ref_mhz;
  t.mem_gamma = p.time.mem_gamma.value;
  t.compute_s = tc, t.memory_s = tm, t.overhead_s = to;
  return t;
}

PowerModel power_model(const device::DeviceProfile& p, double const_w, double dynamic_w) {
  PowerModel m;
  m.ref_mhz = p.max_clock_mhz();
  m.clock_frac = p.power.clock_frac.value;
  m.mem_w = p.power.mem_w.value;
  m.v_knee_mhz = p.voltage.knee_mhz.value;
  m.v_floor_rel = p.voltage.floor_rel.value;
  m.const_w = const_w, m.dynamic_w = dynamic_w;
  return m;
}

std::vector<Point> sample(const UnitModel& u, std::initializer_list<double> clocks) {
  std::vector<Point> pts;
  for (double f : clocks) {
    Prediction pr = predict(u, f);
    pts.push_back(Point{f, pr.time_s, pr.energy_j});
  }
  return pts;
}

// A communication kernel's power follows the fixed activity, not its time model: a collective whose
// measured span (waiting for peers included) fits as compute-bound draws far less than a GEMM.
TEST(ModelPower, FixedActivityIgnoresTheTimeModelsShares) {
  const auto p = profile("h100");
  PowerModel pm = power_model(p, 75, 520);
  const TimeModel compute = time_model(p, 1.0, 0.1, 0.0), memory = time_model(p, 0.1, 1.0, 0.0);
  const double gemm = pm.power_w(1980, compute);
  pm.fixed_activity = kCommunicationActivity;
  EXPECT_DOUBLE_EQ(pm.power_w(1980, compute), pm.power_w(1980, memory));
  EXPECT_DOUBLE_EQ(pm.power_w(1980, compute), 75 + kCommunicationActivity * (p.power.mem_w.value + 520));
  EXPECT_LT(pm.power_w(1980, compute), 0.5 * gemm);
  EXPECT_DOUBLE_EQ(pm.memory_w(1980, compute), kCommunicationActivity * p.power.mem_w.value);
  EXPECT_LT(pm.power_w(990, compute), pm.power_w(1980, compute));  // still clocked: V²·f
}

TEST(ModelTime, ComputeBoundScalesAsOneOverClock) {
  auto p = profile("a100");
  TimeModel t = time_model(p, 1.0, 0.0, 0.0);
  EXPECT_DOUBLE_EQ(t.time_s(1410), 1.0);
  EXPECT_DOUBLE_EQ(t.time_s(705), 2.0);
  EXPECT_NEAR(t.time_s(945) / t.time_s(1410), 1410.0 / 945.0, 1e-12);
  EXPECT_DOUBLE_EQ(t.compute_share(705), 1.0);
}

TEST(ModelTime, MemoryBoundIsFlatAboveTheKneeAndDegradesFasterThanOneOverClockBelow) {
  auto p = profile("a100");
  TimeModel t = time_model(p, 0.3, 1.0, 0.0);
  const double knee = t.mem_knee_mhz;
  EXPECT_DOUBLE_EQ(t.time_s(1410), 1.0);
  EXPECT_DOUBLE_EQ(t.time_s(1200), 1.0);
  EXPECT_DOUBLE_EQ(t.time_s(knee), 1.0);
  // Below the knee: slower than the 1/f a compute-bound unit would show from the knee down.
  EXPECT_GT(t.time_s(0.8 * knee), 1.0 / 0.8);
  EXPECT_LT(t.compute_share(1410), 0.5);
  EXPECT_DOUBLE_EQ(t.memory_share(1410), 1.0);
}

TEST(ModelFit, RecoversTimeAndPowerParametersFromExactDataAtThreeClocks) {
  auto p = profile("a100");
  // Memory-bound at the top (ridge at 1410/1.1 = 1282 MHz), compute-bound at 1140 and 855.
  UnitModel truth;
  truth.time = time_model(p, 1.0, 1.1, 0.05);
  truth.power = power_model(p, 70.0, 400.0);
  auto pts = sample(truth, {855, 1140, 1410});
  auto fit = fit_unit_model(pts, p);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_NEAR(fit->time.compute_s, 1.0, 1e-4);
  EXPECT_NEAR(fit->time.memory_s, 1.1, 1e-4);
  EXPECT_NEAR(fit->time.overhead_s, 0.05, 1e-4);
  EXPECT_NEAR(fit->power.const_w, 70.0, 0.05);
  EXPECT_NEAR(fit->power.dynamic_w, 400.0, 0.05);
  EXPECT_EQ(fit->cap_w, 0.0);  // 460+ W at 1410 is above the 400 W limit: the board allows more
  for (double f : {870.0, 1005.0, 1290.0, 1395.0}) {
    Prediction a = predict(truth, f), b = predict(*fit, f);
    EXPECT_NEAR(b.time_s / a.time_s, 1.0, 1e-5) << f;
    EXPECT_NEAR(b.energy_j / a.energy_j, 1.0, 1e-5) << f;
  }
}

TEST(ModelFit, FittedComputeBoundUnitScalesAsOneOverClock) {
  auto p = profile("v100");
  std::vector<Point> pts;
  for (double f : {757.0, 1140.0, 1530.0}) pts.push_back(Point{f, 2.0 * 1530.0 / f, 100.0 * 1530.0 / f});
  auto t = fit_time_model(pts, p);
  ASSERT_TRUE(t.ok());
  EXPECT_NEAR(t->time_s(952) / t->time_s(1530), 1530.0 / 952.0, 1e-4);
  EXPECT_NEAR(t->time_s(1335) / t->time_s(1530), 1530.0 / 1335.0, 1e-4);
  EXPECT_EQ(t->memory_s, 0.0);  // nothing in the data asks for a memory plateau
}

TEST(ModelFit, FittedMemoryBoundUnitStaysFlatAboveTheKnee) {
  auto p = profile("v100");
  const double knee = p.time.mem_knee_frac.value * p.max_clock_mhz();
  std::vector<Point> pts = {{1140, 1.0, 120}, {1335, 1.0, 140}, {1530, 1.0, 160}};
  auto t = fit_time_model(pts, p);
  ASSERT_TRUE(t.ok());
  for (double f : {knee + 1, 1207.0, 1462.0}) EXPECT_NEAR(t->time_s(f), 1.0, 1e-4) << f;
}

TEST(ModelFit, PowerCapLowersTheEffectiveClock) {
  auto p = profile("a40");  // 300 W limit
  UnitModel truth;
  truth.time = time_model(p, 1.0, 0.0, 0.02);
  truth.power = power_model(p, 90.0, 330.0);
  truth.cap_w = 295.0;
  Prediction top = predict(truth, 1740);
  ASSERT_TRUE(top.capped);
  ASSERT_LT(top.effective_clock_mhz, 1700);
  EXPECT_NEAR(top.power_w, 295.0, 1e-6);
  auto pts = sample(truth, {855, 1305, 1740});
  auto fit = fit_unit_model(pts, p);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_NEAR(fit->cap_w, 295.0, 1e-6);
  for (double f : {1005.0, 1500.0, 1620.0, 1725.0}) {
    Prediction a = predict(truth, f), b = predict(*fit, f);
    EXPECT_NEAR(b.time_s / a.time_s, 1.0, 2e-3) << f;
    EXPECT_NEAR(b.energy_j / a.energy_j, 1.0, 2e-3) << f;
  }
  // Once capped, asking for a higher clock changes nothing.
  EXPECT_NEAR(predict(*fit, 1725).time_s, predict(*fit, 1740).time_s, 1e-9);
}

TEST(ModelFit, RejectsUnusablePoints) {
  auto p = profile("a100");
  std::vector<Point> one = {{1410, 1.0, 400}};
  auto r1 = fit_unit_model(one, p);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.error().what.find("at least 2"), std::string::npos);
  std::vector<Point> dup = {{1410, 1.0, 400}, {1410, 1.1, 380}};
  auto r2 = fit_unit_model(dup, p);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().what.find("twice"), std::string::npos);
  std::vector<Point> zero = {{1410, 1.0, 400}, {855, 0.0, 380}};
  auto r3 = fit_time_model(zero, p);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.error().message().find("855 MHz"), std::string::npos);
  std::vector<Point> no_energy = {{1410, 1.0, 400}, {855, 1.5, -1}};
  EXPECT_FALSE(fit_power_model(no_energy, time_model(p, 1, 0, 0), p).ok());
}

TEST(ModelFit, TwoPointsSuffice) {
  auto p = profile("h100");
  UnitModel truth;
  truth.time = time_model(p, 1.0, 0.0, 0.0);
  truth.power = power_model(p, 80.0, 500.0);
  auto fit = fit_unit_model(sample(truth, {990, 1980}), p);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(predict(*fit, 1500).time_s / predict(truth, 1500).time_s, 1.0, 1e-4);
}

TEST(ModelPrior, ProfileOnlyPredictionHasTheRightShape) {
  auto p = profile("h100");
  UnitModel c = prior_unit_model(p, 1.0, 1.0);
  EXPECT_NEAR(predict(c, 1980).time_s, 1.0, 1e-12);
  EXPECT_NEAR(predict(c, 990).time_s, 0.03 + 2 * 0.97, 1e-9);
  UnitModel m = prior_unit_model(p, 1.0, 0.0);
  EXPECT_NEAR(predict(m, 1600).time_s, 1.0, 1e-12);
  // Lower clocks draw less power; energy of a memory-bound unit falls with the clock above its knee.
  EXPECT_LT(predict(m, 1600).power_w, predict(m, 1980).power_w);
  EXPECT_LT(predict(m, 1600).energy_j, predict(m, 1980).energy_j);
}

}  // namespace
}  // namespace emo::model
