// `emo pipeline` as a library call (include/emo/pipeline/job.h): run_job chooses the point the CLI
// used to choose (the least-energy point within --plan-at / --max-slowdown, else the least-energy
// point of all), its errors name the flag, and job_json holds the keys the CLI contract reads. On a
// published Perseus profile from ../shared (skipped when absent) and on a small synthetic one.
#include "emo/pipeline/job.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace emo::pipeline {
namespace {

// A 2-stage profile at 3 clocks, each slower clock cheaper.
std::string small_profile(const std::string& dir) {
  std::string path = dir + "/prof.csv";
  std::ofstream out(path);
  out << "stage,instruction,frequency,time,energy\n";
  for (int s = 0; s < 2; ++s) {
    out << s << ",forward,1410,0.0105,3.0\n" << s << ",forward,1300,0.0115,2.7\n" << s << ",forward,1200,0.0130,2.5\n";
    out << s << ",backward,1410,0.0205,6.0\n" << s << ",backward,1300,0.0225,5.5\n" << s
        << ",backward,1200,0.0250,5.1\n";
  }
  return path;
}

JobOptions small_job(const std::string& dir) {
  JobOptions o;
  o.profile = small_profile(dir);
  o.microbatches = 4;
  o.blocking_power_w = 80;
  return o;
}

// The least energy among the frontier's points that finish within limit_s (on the unit grid).
double least_energy_within(const Frontier& f, double unit_s, double limit_s) {
  double best = 1e300;
  for (const auto& p : f.points) {
    if (double(p.time_units) <= limit_s / unit_s + 1e-9) best = std::min(best, p.energy_j);
  }
  return best;
}

TEST(PipelineJob, PlanAtPicksTheLeastEnergyPointWithinTheLimitOnPerseusGpt3) {
  EMO_REQUIRE_SHARED(prof, "dvfs/zeus-kronos__emulation__stage_profile__gpt3-175b_a100_sxm_bf16.csv");
  EMO_REQUIRE_SHARED(pub,
                     "dvfs/zeus-kronos__emulation__iteration_time_energy__a100_sxm__gpt3-175b_bf16_mb12.csv");
  JobOptions o;
  o.profile = prof;
  o.microbatches = 12;
  o.blocking_power_w = 83.64;
  o.compare = pub;
  o.plan_file = "freqs.py";
  o.plan_at_s = 3.0;  // the fastest plan takes 2.818 s
  auto r = run_job(o);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_DOUBLE_EQ(r->unit_s, 0.001);  // inferred from the compared file
  ASSERT_TRUE(r->plan);
  const auto& pts = r->frontier.points;
  ASSERT_GT(pts.size(), 2u);
  const auto& chosen = pts[r->plan->point];
  EXPECT_DOUBLE_EQ(r->plan->limit_s, 3.0);
  EXPECT_LE(chosen.time_s, 3.0 + 1e-12);
  EXPECT_DOUBLE_EQ(chosen.energy_j, least_energy_within(r->frontier, r->unit_s, 3.0));
  EXPECT_LT(chosen.energy_j, pts.front().energy_j);  // a saving over the fastest
  // A later point is slower than the limit (the choice is not just the slowest point).
  ASSERT_LT(r->plan->point + 1, pts.size());
  EXPECT_GT(pts[r->plan->point + 1].time_s, 3.0);
  // The schedule: 8 stages of 2 x 12 instructions; the .py text is Perseus' list.
  ASSERT_EQ(r->plan->schedule.size(), 8u);
  EXPECT_EQ(r->plan->schedule[0].size(), 24u);
  EXPECT_EQ(r->plan->file_text.substr(0, 4), "[\n[(");
  EXPECT_NE(r->plan->file_text.find("# emo pipeline: " + prof + ", 8 stages x 12 microbatches"), std::string::npos);
  EXPECT_EQ(plan_file_text(*r, PlanFileFormat::kCsv).substr(0, 6), "stage,");
  EXPECT_TRUE(r->warnings.empty());  // the same problem as the published file

  const nlohmann::json j = job_json(*r);
  for (const char* key : {"profile", "stages", "microbatches", "nodes", "edges", "blocking_power_w", "unit_time_s",
                          "accounting", "solve_ms", "phases", "plans", "min_time_s", "max_time_s", "frontier",
                          "frontier_measured", "instructions", "comparison", "plan"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["frontier"].size(), pts.size());
  EXPECT_EQ(j["frontier"][0].size(), 2u);
  EXPECT_EQ(j["frontier_measured"].size(), pts.size());
  EXPECT_EQ(j["nodes"], 8 * 2 * 12);
  EXPECT_TRUE(j["solve_ms"].is_number());
  EXPECT_DOUBLE_EQ(j["unit_time_s"].get<double>(), 0.001);
  EXPECT_EQ(j["accounting"], "lowtime");
  EXPECT_EQ(j["comparison"]["published"], pub);
  EXPECT_TRUE(j["comparison"]["same_fastest"].get<bool>());
  EXPECT_TRUE(j["comparison"]["vs_their_step"].contains("max_rel_diff"));
  EXPECT_EQ(j["plan"]["point"], r->plan->point);
  EXPECT_DOUBLE_EQ(j["plan"]["energy_j"].get<double>(), chosen.energy_j);
  EXPECT_EQ(j["plan"]["file"], "freqs.py");
  ASSERT_EQ(j["plan"]["stages"].size(), 8u);
  EXPECT_EQ(j["plan"]["stages"][0][0][0], "forward");
  EXPECT_EQ(j["plan"]["stages"][0][0][1], r->plan->schedule[0][0].clock_mhz);

  const std::string text = job_text(*r);
  EXPECT_NE(text.find("frontier (lowtime accounting): "), std::string::npos) << text;
  EXPECT_NE(text.find("vs " + pub + ": at "), std::string::npos) << text;
  EXPECT_NE(text.find("plan within 3 s: "), std::string::npos) << text;
  EXPECT_NE(text.find("; written to freqs.py\n"), std::string::npos) << text;
}

TEST(PipelineJob, ChoosesLikeTheCli) {
  std::string dir = test::temp_dir("pipeline_job");
  JobOptions o = small_job(dir);
  // No plan asked for: none chosen, and no plan in the document.
  auto none = run_job(o);
  ASSERT_TRUE(none) << none.error().message();
  EXPECT_FALSE(none->plan);
  EXPECT_FALSE(job_json(*none).contains("plan"));
  EXPECT_FALSE(job_json(*none).contains("comparison"));
  EXPECT_EQ(job_json(*none)["nodes"], 2 * 2 * 4);
  const auto& pts = none->frontier.points;
  ASSERT_GT(pts.size(), 2u);

  // --plan alone: the least-energy point of all, limited by its own time.
  o.plan_file = dir + "/plan.csv";
  auto all = run_job(o);
  ASSERT_TRUE(all);
  ASSERT_TRUE(all->plan);
  EXPECT_EQ(all->plan->point, pts.size() - 1);
  EXPECT_DOUBLE_EQ(all->plan->limit_s, pts.back().time_s);
  EXPECT_EQ(all->plan->file_text.substr(0, 6), "stage,");
  EXPECT_EQ(job_json(*all)["plan"]["file"], o.plan_file);

  // --max-slowdown 0.05: within 5 % of the fastest.
  o.plan_file.clear();
  o.max_slowdown = 0.05;
  auto slow = run_job(o);
  ASSERT_TRUE(slow);
  ASSERT_TRUE(slow->plan);
  const double limit = pts.front().time_s * 1.05;
  EXPECT_DOUBLE_EQ(slow->plan->limit_s, limit);
  EXPECT_DOUBLE_EQ(slow->frontier.points[slow->plan->point].energy_j,
                   least_energy_within(slow->frontier, slow->unit_s, limit));
  EXPECT_TRUE(slow->plan->file_text.empty());
  EXPECT_TRUE(job_json(*slow)["plan"]["file"].is_null());

  // --plan-at between two points: the last point that meets it.
  o.max_slowdown.reset();
  const double at = (pts[1].time_s + pts[2].time_s) / 2;
  o.plan_at_s = at;
  auto within = run_job(o);
  ASSERT_TRUE(within);
  ASSERT_TRUE(within->plan);
  EXPECT_EQ(within->plan->point, 1u);
  EXPECT_DOUBLE_EQ(within->frontier.points[1].energy_j, least_energy_within(within->frontier, within->unit_s, at));

  // Clocks accounting, named in the document and the text.
  o.plan_at_s.reset();
  o.accounting = "clocks";
  auto clocks = run_job(o);
  ASSERT_TRUE(clocks);
  EXPECT_EQ(clocks->accounting, Accounting::kClocks);
  EXPECT_EQ(job_json(*clocks)["accounting"], "clocks");
  EXPECT_NE(job_text(*clocks).find("frontier (clocks accounting)"), std::string::npos);
}

TEST(PipelineJob, ErrorsNameTheFlag) {
  std::string dir = test::temp_dir("pipeline_job_errors");
  auto where = [](const JobOptions& o) {
    auto r = run_job(o);
    return r ? std::string("(ok)") : r.error().where;
  };
  JobOptions base = small_job(dir);

  JobOptions o = base;
  o.plan_at_s = 1e-9;  // faster than the fastest plan
  auto r = run_job(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().where, "--plan-at");
  EXPECT_EQ(r.error().message(), "--plan-at: no plan finishes within 1e-09 s");
  EXPECT_NE(r.error().note.find("the fastest plan takes"), std::string::npos) << r.error().note;

  o = base;
  o.max_slowdown = 0;  // the fastest point itself meets it
  EXPECT_EQ(where(o), "(ok)");
  o.max_slowdown = -0.1;
  EXPECT_EQ(where(o), "--max-slowdown");

  o = base;
  o.microbatches = 0;
  r = run_job(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "--microbatches: must be >= 1");
  o.microbatches = kMaxJobMicrobatches + 1;
  EXPECT_EQ(where(o), "--microbatches");

  o = base;
  o.accounting = "x";
  r = run_job(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "--accounting: unknown accounting 'x'");
  EXPECT_EQ(r.error().note, "use lowtime or clocks");

  o = base;
  o.blocking_power_w = std::nan("");
  EXPECT_EQ(where(o), "--blocking-power");
  o = base;
  o.plan_file = dir + "/plan.txt";
  EXPECT_EQ(where(o), "--plan");
  o = base;
  o.plan_at_s = 0;
  EXPECT_EQ(where(o), "--plan-at");
  o = base;
  o.stages = -1;
  EXPECT_EQ(where(o), "--stages");
  o = base;
  o.unit_time_s = -1;
  EXPECT_EQ(where(o), "--unit-time");
  o = base;
  o.tolerance = -1;
  EXPECT_EQ(where(o), "--tolerance");
  // The flags are checked before any file is read, in the CLI's order.
  o = base;
  o.profile = dir + "/absent.csv";
  o.microbatches = 0;
  o.accounting = "x";
  EXPECT_EQ(where(o), "--microbatches");
  o.microbatches = 4;
  EXPECT_EQ(where(o), "--accounting");
  o.accounting = "lowtime";
  EXPECT_EQ(where(o), dir + "/absent.csv");
}

TEST(PipelineJob, AComparisonOfTwoProblemsWarns) {
  std::string dir = test::temp_dir("pipeline_job_warn");
  JobOptions o = small_job(dir);
  o.compare = dir + "/pub.csv";
  std::ofstream(o.compare) << "time,energy\n0.5,1000\n0.501,900\n";  // far slower than our fastest
  auto r = run_job(o);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_TRUE(r->comparison);
  EXPECT_FALSE(r->comparison->same_fastest);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find(o.compare + ": its fastest point takes 0.5 s"), std::string::npos) << r->warnings[0];
  EXPECT_EQ(job_json(*r)["comparison"]["points"], 2);
  EXPECT_DOUBLE_EQ(job_json(*r)["unit_time_s"].get<double>(), 0.001);  // inferred from the compared file
}

}  // namespace
}  // namespace emo::pipeline
