// The pipeline object: stages run on demand, each once; devices opened once; options checked by flag;
// views built over one session agree with each other and with the stages they show.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "emo/report/views.h"
#include "emo/session/session.h"
#include "synth_workload.h"

namespace emo::session {
namespace {

Options small_options() {
  Options o;
  o.device = "h100";
  o.pack.min_pack_ns = 2000000;
  o.eval_steps = 3;
  return o;
}

Session small_session(Options o = small_options()) {
  auto s = Session::open(std::move(o), test::synth_workload(synth::Workload::kTrainDP, 2, 4, 7));
  if (!s) throw std::runtime_error(s.error().message());
  return std::move(*s);
}

TEST(Session, StagesRunOnDemandAndOnce) {
  Session s = small_session();
  auto p = s.packing();
  ASSERT_TRUE(p.ok()) << p.error().message();
  // Packing alone neither profiles nor optimizes.
  EXPECT_EQ(s.stage_ms().count("profile"), 0u);
  EXPECT_EQ(s.stage_ms().count("optimize"), 0u);
  auto c1 = s.solution();
  ASSERT_TRUE(c1.ok()) << c1.error().message();
  EXPECT_EQ(s.stage_ms().count("profile"), 1u);
  EXPECT_EQ(s.stage_ms().count("fit"), 1u);
  const double optimize_ms = s.stage_ms().at("optimize");
  auto c2 = s.solution();
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(*c1, *c2);                                 // the same result object, not a second solve
  EXPECT_EQ(s.stage_ms().at("optimize"), optimize_ms);  // and no time spent on it
  EXPECT_EQ(*s.packing(), *p);
  // The problem points into the session: its stages' results, not copies.
  auto pr = s.problem();
  ASSERT_TRUE(pr.ok());
  EXPECT_EQ((*pr)->packing, *p);
  EXPECT_EQ((*pr)->workload, *s.workload());
  // Moving the session keeps every result where it was (the problem's pointers stay valid).
  Session moved = std::move(s);
  EXPECT_EQ(*moved.packing(), *p);
  EXPECT_EQ((*moved.problem())->models, *moved.models());
}

TEST(Session, OptionsAreCheckedByTheirFlag) {
  auto name_of = [](Options o) {
    auto s = Session::open(std::move(o));
    return s.ok() ? std::string("ok") : s.error().where;
  };
  Options o = small_options();
  o.optimize.max_slowdown = std::nan("");
  EXPECT_EQ(name_of(o), "--max-slowdown");
  o = small_options();
  o.optimize.max_slowdown = 1.5;
  EXPECT_EQ(name_of(o), "--max-slowdown");
  o = small_options();
  o.eval_steps = 1;
  EXPECT_EQ(name_of(o), "--steps");
  o = small_options();
  o.profiled_dir = "runs";
  o.profile_on = "emulated:h100";
  EXPECT_EQ(name_of(o), "--profiled");
  o = small_options();
  o.device = "emulated:";
  EXPECT_EQ(name_of(o), "--device emulated:");
  o = small_options();
  o.device = "no-such-gpu";
  EXPECT_NE(name_of(o), "ok");
  EXPECT_EQ(name_of(small_options()), "ok");
}

TEST(Session, DevicesAreOpenedOnceAndBenchFollowsTheTarget) {
  // A bare profile: profiled, checked and evaluated on the emulated GPU of that profile.
  auto a = Session::open(small_options());
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->target().emulated());
  EXPECT_TRUE(a->bench().emulated());
  EXPECT_EQ(a->bench().spec_text(), "emulated:h100");
  EXPECT_EQ(a->bench().spec().seed, 1u);
  // An emulated target is its own bench: the same object, GPU number and all.
  Options o = small_options();
  o.device = "emulated:h100@3";
  auto b = Session::open(o);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(&b->bench(), &b->target());
  EXPECT_EQ(b->bench().spec().seed, 3u);
  // --profile-on names another bench.
  o.profile_on = "emulated:h200@2";
  auto c = Session::open(o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(&c->bench(), &c->target());
  EXPECT_EQ(c->bench().profile().name, "h200");
  EXPECT_EQ(c->profile().name, "h100");  // the policy is still for the target
}

TEST(Session, EvaluationRunsEveryPlanOnTheBenchBesideItsPrediction) {
  Session s = small_session();
  auto ev = s.evaluation();
  ASSERT_TRUE(ev.ok()) << ev.error().message();
  const optimize::Solution& sol = (*s.solution())->solution;
  ASSERT_EQ((*ev)->size(), 2 + sol.baselines.size());
  EXPECT_EQ((**ev)[0].name, "default");
  EXPECT_EQ((**ev)[1].name, "policy");
  EXPECT_EQ((**ev)[0].slowdown_pct, 0.0);
  EXPECT_EQ((**ev)[0].saving_pct, 0.0);
  EXPECT_EQ((**ev)[1].predicted_energy_j, sol.policy.energy_j);
  EXPECT_EQ((**ev)[1].predicted_time_ns, sol.policy.time_ns);
  for (size_t i = 2; i < (*ev)->size(); ++i) {  // the baselines, each beside its own prediction
    const EvaluatedPlan& e = (**ev)[i];
    auto b = std::find_if(sol.baselines.begin(), sol.baselines.end(), [&](const auto& pl) { return pl.name == e.name; });
    ASSERT_NE(b, sol.baselines.end()) << e.name;
    EXPECT_TRUE(e.predicted);
    EXPECT_EQ(e.predicted_energy_j, b->energy_j);
    EXPECT_EQ(e.predicted_time_ns, b->time_ns);
  }
  for (const EvaluatedPlan& e : **ev) {
    EXPECT_EQ(e.measured.step_ns.size(), 2u);  // eval_steps 3, the warm-up left out
    EXPECT_GT(e.measured.energy_j, 0);
    EXPECT_NEAR(e.saving_pct, 100 * (1 - e.measured.energy_j / (**ev)[0].measured.energy_j), 1e-9);
  }
  // The policy measured is the solution's: its clocks in the order of the packs with GPU work.
  const optimize::PolicyFile& pf = **s.policy();
  size_t k = 0;
  for (size_t i = 0; i < sol.policy.pack_clock_mhz.size(); ++i) {
    const auto& pk = (*s.packing())->packs[i];
    if (pk.first_op > pk.last_op) continue;
    ASSERT_LT(k, pf.packs.size());
    EXPECT_EQ(pf.packs[k++].clock_mhz, sol.policy.pack_clock_mhz[i]);
  }
  EXPECT_EQ(k, pf.packs.size());
}

TEST(Session, ViewsOfOneSessionAgree) {
  Session s = small_session();
  auto opt = report::optimize_document(s);
  ASSERT_TRUE(opt.ok()) << opt.error().message();
  auto sm = report::summary_document(s, {});
  ASSERT_TRUE(sm.ok()) << sm.error().message();
  // The predicted policy in `emo optimize --json` is the one summary.json reports.
  EXPECT_EQ((*opt)["policy"]["energy_j"], (*sm)["predicted"]["policy"]["energy_j"]);
  EXPECT_EQ((*opt)["policy"]["time_us"], (*sm)["predicted"]["policy"]["time_us"]);
  EXPECT_EQ((*opt)["policy_from"], (*sm)["policy_from"]);
  EXPECT_EQ((*opt)["check"], (*sm)["check"]);
  // results.csv has a row per evaluated plan, in the evaluation's order.
  auto csv = report::results_csv()->render(s);
  ASSERT_TRUE(csv.ok());
  std::istringstream in(*csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("name,", 0), 0u);
  size_t rows = 0;
  while (std::getline(in, line)) {
    EXPECT_EQ(line.substr(0, line.find(',')), (**s.evaluation())[rows].name);
    ++rows;
  }
  EXPECT_EQ(rows, (*s.evaluation())->size());
  // The policy file, read back against the step, gives the policy the session applies from memory.
  auto text = report::policy_file()->render(s);
  ASSERT_TRUE(text.ok());
  auto back = optimize::read_policy("policy.json", *text, **s.workload(), s.profile());
  ASSERT_TRUE(back.ok()) << back.error().message();
  const optimize::PolicyFile& pf = **s.policy();
  ASSERT_EQ(back->packs.size(), pf.packs.size());
  for (size_t i = 0; i < pf.packs.size(); ++i) {
    EXPECT_EQ(back->packs[i].clock_mhz, pf.packs[i].clock_mhz);
    EXPECT_EQ(back->packs[i].issue_at_ns, pf.packs[i].issue_at_ns);
    EXPECT_EQ(back->packs[i].first, pf.packs[i].first);
    EXPECT_EQ(back->packs[i].last, pf.packs[i].last);
    EXPECT_EQ(back->packs[i].rank, pf.packs[i].rank);
  }
  // ... and the same baselines, in the same order, with the same clocks and issue times.
  ASSERT_EQ(back->baselines.size(), pf.baselines.size());
  for (size_t i = 0; i < pf.baselines.size(); ++i) {
    EXPECT_EQ(back->baselines[i].name, pf.baselines[i].name);
    EXPECT_EQ(back->baselines[i].clocks_mhz, pf.baselines[i].clocks_mhz);
    EXPECT_EQ(back->baselines[i].issue_at_ns, pf.baselines[i].issue_at_ns);
  }
  EXPECT_EQ(back->default_clock_mhz, pf.default_clock_mhz);
  EXPECT_EQ(back->max_slowdown, pf.max_slowdown);
  EXPECT_EQ(back->predicted, pf.predicted);
}

TEST(Session, APolicyFileEvaluatesAsTheSolutionItCameFrom) {
  Session s = small_session();
  auto text = report::policy_file()->render(s);
  ASSERT_TRUE(text.ok()) << text.error().message();
  const std::string dir = test::temp_dir("session_policy");
  const std::string path = dir + "/policy.json";
  {
    std::ofstream(path) << *text;
  }
  Options o = small_options();
  o.policy_file = path;
  Session e = small_session(o);
  auto from_file = e.evaluation();
  ASSERT_TRUE(from_file.ok()) << from_file.error().message();
  EXPECT_EQ(e.stage_ms().count("optimize"), 0u);  // nothing solved: the file is the policy
  auto solved = s.evaluation();
  ASSERT_TRUE(solved.ok());
  ASSERT_EQ((*from_file)->size(), (*solved)->size());
  for (size_t i = 0; i < (*solved)->size(); ++i) {
    const EvaluatedPlan &a = (**from_file)[i], &b = (**solved)[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_FALSE(a.predicted);
    EXPECT_EQ(a.measured.step_ns, b.measured.step_ns) << a.name;
    EXPECT_EQ(a.measured.energy_j, b.measured.energy_j) << a.name;
  }
  std::filesystem::remove_all(dir);
}

TEST(Session, WhatIfIsCachedPerScale) {
  Session s = small_session();
  auto scale = analysis::parse_scale("cat:kernel=2");
  ASSERT_TRUE(scale.ok());
  auto a = s.what_if({*scale});
  ASSERT_TRUE(a.ok());
  EXPECT_GT((*a)->predicted_span_ns, (*a)->baseline_span_ns);
  EXPECT_EQ(*s.what_if({*scale}), *a);
  auto half = analysis::parse_scale("cat:kernel=0.5");
  ASSERT_TRUE(half.ok());
  auto b = s.what_if({*half});
  ASSERT_TRUE(b.ok());
  EXPECT_NE(*b, *a);
  EXPECT_LT((*b)->predicted_span_ns, (*a)->predicted_span_ns);
}

}  // namespace
}  // namespace emo::session
