// Idle-dominated packs reach the energy-optimal clock the profiled runs show (issue: an LLM decode step
// on a GPU unlike its profile). The emulated H100 here has its voltage knee 20 % below the profile's
// (1260 against an assumed 1575 MHz), so V(f) keeps falling below the profile's knee and the step's
// energy with it: with three plan clocks (1980, 1485, 990 MHz) the energy at 990 MHz is below that at
// 1485 MHz — still falling at the lowest profiled clock. The session profiles one more clock (the lowest
// the optimizer considers, 900 MHz), the fit then places the knee from the runs, and the policy lands at
// the clock where the emulated GPU's energy is least (within the bound), not at the profile's knee.
// Recorded runs that cannot grow get a warning naming the clock to record.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "emo/backends/evaluation.h"
#include "emo/backends/profiling.h"
#include "emo/device/profile.h"
#include "emo/pack/fit.h"
#include "emo/session/session.h"
#include "synth_workload.h"

namespace emo::session {
namespace {

namespace fs = std::filesystem;

// The h100 profile with its voltage knee at 0.8× — the truth of the emulated GPU, not the models' prior.
std::string low_knee_profile_file() {
  device::DeviceProfile p = *device::builtin_profile("h100");
  p.voltage.knee_mhz.value *= 0.8;
  const fs::path path = fs::temp_directory_path() / ("emo_low_knee_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << device::profiles_to_json({p});
  return path.string();
}

// 64 decode iterations of a 24-layer model: the GPU idles between launches most of the step.
analysis::Workload decode_step() { return test::synth_workload(synth::Workload::kInferDecode, 1, 24, 1, 0, 64); }

Options decode_options(const std::string& truth) {
  Options o;
  o.device = "h100";
  o.profile_on = "emulated:" + truth;
  o.pack.profile_clocks = 3;
  o.optimize.max_slowdown = 0.05;
  o.eval_steps = 3;
  o.refine_profile = false;  // the clock added where the energy still falls, alone (not where the plan runs)
  return o;
}

TEST(EnergyOptimum, IdleDominatedPacksReachTheClockTheProfiledRunsShow) {
  const std::string truth = low_knee_profile_file();
  auto s = Session::open(decode_options(truth), decode_step());
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto p = s->packing();
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ((*p)->plan_clocks_mhz, (std::vector<int>{1980, 1485, 990}));
  auto m = s->models();
  ASSERT_TRUE(m.ok()) << m.error().message();
  // One more clock was profiled, at the lowest candidate, because the plan's energy still fell at 990 MHz.
  const int lowest = pack::lowest_candidate_clock(s->profile());
  EXPECT_EQ(lowest, 900);
  ASSERT_EQ((*m)->clocks_mhz, (std::vector<int>{900, 990, 1485, 1980}));
  for (const pack::GpuCorrection& c : (*m)->gpus) {
    auto at = [&](int f) { return c.measured_j[size_t(std::find(c.clocks_mhz.begin(), c.clocks_mhz.end(), f) - c.clocks_mhz.begin())]; };
    EXPECT_LT(at(990), at(1485));  // the profiled data's energy falls below the plan's middle clock
    EXPECT_LT(c.knee_scale, 0.9);  // the runs place the knee well below the profile's
  }
  EXPECT_EQ(pack::energy_still_falling(**m).profile_mhz, 0);  // nothing left below the lowest candidate

  // The emulated GPU's energy at each static clock, and the least within the bound.
  auto base = s->pack_fidelity(1980);
  ASSERT_TRUE(base.ok()) << base.error().message();
  double best_j = base.value()->true_step_j;
  int best_mhz = 1980;
  for (int f = 900; f < 1980; f += 45) {
    auto fid = s->pack_fidelity(f);
    ASSERT_TRUE(fid.ok()) << fid.error().message();
    if (double(fid.value()->true_step_ns) > 1.05 * double(base.value()->true_step_ns)) continue;
    if (fid.value()->true_step_j < best_j) {
      best_j = fid.value()->true_step_j;
      best_mhz = f;
    }
  }
  EXPECT_LT(best_mhz, 1400);  // below the profile's knee region: the case this test is about

  auto ev = s->evaluation();
  ASSERT_TRUE(ev.ok()) << ev.error().message();
  const EvaluatedPlan& def = (*ev)->at(0);
  const EvaluatedPlan& pol = (*ev)->at(1);
  const double best_saving = 100 * (1 - best_j / def.measured.energy_j);
  std::printf("energy-optimal static clock %d MHz (%.2f %% saved); policy %.2f %% saved at %+.2f %%\n", best_mhz,
              best_saving, pol.saving_pct, pol.slowdown_pct);
  EXPECT_GT(pol.saving_pct, best_saving - 0.5);
  EXPECT_LE(pol.slowdown_pct, 5.0);
  auto pf = s->policy();
  ASSERT_TRUE(pf.ok());
  for (const auto& pk : (*pf)->packs) EXPECT_LT(pk.clock_mhz, 1400);
  fs::remove(truth);
}

// Recorded runs (as from --profiled DIR) cannot grow: the fit's warnings say the energy still falls at
// the lowest profiled clock and name the clock to record; with that run added the warning goes.
TEST(EnergyOptimum, RunsThatStillFallAreWarnedAboutWithTheClockToRecord) {
  const std::string truth = low_knee_profile_file();
  auto s = Session::open(decode_options(truth), decode_step());
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto p = s->packing();
  ASSERT_TRUE(p.ok());
  auto runs = backends::profile_plan(s->bench(), **s->workload(), **p);
  ASSERT_TRUE(runs.ok()) << runs.error().message();
  auto m3 = pack::fit_pack_models(**s->workload(), **p, *runs, s->profile());
  ASSERT_TRUE(m3.ok());
  const pack::StillFalling sf = pack::energy_still_falling(*m3);
  EXPECT_EQ(sf.gpu, 0);
  EXPECT_EQ(sf.lowest_mhz, 990);
  EXPECT_EQ(sf.next_mhz, 1485);
  EXPECT_LT(sf.lowest_j, sf.next_j);
  EXPECT_EQ(sf.profile_mhz, 900);
  const auto w3 = pack::fit_warnings(**p, *m3);
  ASSERT_EQ(w3.size(), 2u);
  EXPECT_NE(w3[0].find("still falls at the lowest profiled clock"), std::string::npos) << w3[0];
  EXPECT_NE(w3[0].find("record one more run at 900 MHz"), std::string::npos) << w3[0];
  // The profile's knee lies above this GPU's, and three runs cannot place it: the fit misses a run.
  EXPECT_GT(std::abs(pack::worst_energy_fit(*m3).gap_pct), pack::kFitDoubtPct);
  EXPECT_NE(w3[1].find("GPU 0's step energy at the profiled"), std::string::npos) << w3[1];
  auto more = backends::profile_plan(s->bench(), **s->workload(), **p, {900});
  ASSERT_TRUE(more.ok());
  for (auto& r : *more) runs->push_back(std::move(r));
  auto m4 = pack::fit_pack_models(**s->workload(), **p, *runs, s->profile());
  ASSERT_TRUE(m4.ok());
  EXPECT_TRUE(pack::fit_warnings(**p, *m4).empty());  // with the fourth run, the fit holds too
  EXPECT_LE(std::abs(pack::worst_energy_fit(*m4).gap_pct), pack::kFitDoubtPct);
  fs::remove(truth);
}

// On the profile's own GPU (a knee where the profile has it) a plan whose energy does not still fall at
// its lowest clock profiles nothing more.
TEST(EnergyOptimum, NoExtraClockWhereTheEnergyRisesAtTheLowest) {
  Options o;
  o.device = "h100";
  o.pack.min_pack_ns = 2000000;
  o.refine_profile = false;  // (the clock added where the plan runs is another rule)
  auto s = Session::open(o, test::synth_workload(synth::Workload::kTrainDP, 1, 6, 5));
  ASSERT_TRUE(s.ok());
  auto m = s->models();
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ((*m)->clocks_mhz.size(), (*s->packing())->plan_clocks_mhz.size());
  EXPECT_EQ(pack::energy_still_falling(**m).profile_mhz, 0);
}

}  // namespace
}  // namespace emo::session
