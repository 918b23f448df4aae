// The runtime inside a job (emo/runtime/runtime.h) on wall time with a recording clock control, and
// `emo apply`'s emulated job (emo/backends/apply.h) against `emo evaluate`'s measurement.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "emo/backends/apply.h"
#include "emo/runtime/runtime.h"
#include "emo/session/session.h"
#include "synth_workload.h"

namespace emo::runtime {
namespace {

using namespace std::chrono_literals;
constexpr int64_t kMs = 1000000;

// Records every call with its steady-clock time; fails the calls it is told to.
class RecordingClock final : public ClockControl {
 public:
  struct Call {
    std::string op;
    int mhz;
    int64_t t_ns;
  };
  std::string describe() const override { return "recording"; }
  Status lock_sm_clock(int mhz) override { return record("lock", mhz, fail_locks); }
  Status reset_sm_clock() override { return record("reset", 0, fail_resets); }
  std::vector<Call> calls() {
    std::lock_guard<std::mutex> lk(mu);
    return calls_;
  }
  int fail_locks = 0, fail_resets = 0;

 private:
  Status record(const char* op, int mhz, int& fail) {
    std::lock_guard<std::mutex> lk(mu);
    calls_.push_back({op, mhz, std::chrono::steady_clock::now().time_since_epoch().count()});
    if (fail > 0) {
      --fail;
      return make_error("recording", std::string(op) + " failed");
    }
    return {};
  }
  std::mutex mu;
  std::vector<Call> calls_;
};

Program two_changes() {
  Program p;
  p.default_clock_mhz = 1980;
  p.max_slowdown = 0.05;
  p.ranks = {{Change{0, 1200, 0}, Change{4 * kMs, 1500, 1}}};
  return p;
}

RuntimeOptions options(RecordingClock* clock) {
  RuntimeOptions o;
  o.program = two_changes();
  o.clock = clock;
  o.phases = PhaseOptions{2, false, 1, 0};
  o.log_to_stderr = false;
  return o;
}

// Starts a runtime, runs `steps` steps of `each` (step_begin, the step, step_end) and stops it.
Result<RuntimeReport> run_steps(RuntimeOptions o, int steps, std::chrono::milliseconds each) {
  auto rt = Runtime::start(std::move(o));
  if (!rt.ok()) return rt.error();
  for (int k = 0; k < steps; ++k) {
    (*rt)->step_begin();
    std::this_thread::sleep_for(each);
    (*rt)->step_end();
  }
  return (*rt)->stop();
}

TEST(Runtime, IssuesEachStepsChangesFromItsAnchorOnTheControllerThreadAndResetsAtStop) {
  RecordingClock clock;
  auto rep = run_steps(options(&clock), 8, 12ms);
  ASSERT_TRUE(rep.ok()) << rep.error().message();
  const auto calls = clock.calls();
  // Steps 0–1 are the reference (the default clock, already in effect: no call); steps 2–7 run the
  // policy: 1200 then 1500 each (a 1200 the thread woke too late for is superseded), and the stop resets.
  ASSERT_EQ(rep->issues.size() + size_t(rep->skipped_superseded), 12u);
  EXPECT_LE(rep->skipped_superseded, 2);
  ASSERT_EQ(calls.size(), rep->issues.size() + 1);
  for (size_t i = 0; i + 1 < calls.size(); ++i) {
    EXPECT_EQ(calls[i].op, "lock");
    EXPECT_EQ(calls[i].mhz, rep->issues[i].clock_mhz);
    if (i > 0 && rep->issues[i].step == rep->issues[i - 1].step) {
      EXPECT_EQ(rep->issues[i - 1].clock_mhz, 1200);
      EXPECT_EQ(rep->issues[i].clock_mhz, 1500);
    }
  }
  EXPECT_EQ(calls.back().op, "reset");
  for (const IssueRecord& is : rep->issues) {
    EXPECT_GE(is.step, 2);
    EXPECT_GE(is.at_ns, is.due_ns);
    EXPECT_GE(is.returned_ns, is.at_ns);
  }
  // The 1500 changes are issued 4 ms after their step's anchor, never before.
  for (const IssueRecord& is : rep->issues) {
    if (is.clock_mhz == 1500) {
      EXPECT_GE(is.at_ns - is.anchor_ns, 4 * kMs);
    }
  }
  EXPECT_EQ(rep->steps.size(), 8u);
  EXPECT_GT(rep->measured.policy_side.steps, 0);
}

TEST(Runtime, AnchorsOnTheGpuThroughTheHostFunctionItEnqueues) {
  // A stand-in for cuLaunchHostFunc: the "GPU" reaches the host function 3 ms later.
  static std::vector<std::thread> gpu;
  static int launched = 0;
  gpu.clear();
  launched = 0;
  RecordingClock clock;
  RuntimeOptions o = options(&clock);
  o.launch = [](void*, void (*fn)(void*), void* data) {
    ++launched;
    gpu.emplace_back([fn, data] {
      std::this_thread::sleep_for(3ms);
      fn(data);
    });
    return 0;
  };
  auto rt = Runtime::start(std::move(o));
  ASSERT_TRUE(rt.ok());
  std::vector<int64_t> begun;
  for (int k = 0; k < 6; ++k) {
    begun.push_back(std::chrono::steady_clock::now().time_since_epoch().count());
    (*rt)->step_begin();
    std::this_thread::sleep_for(k < 5 ? 10ms : 0ms);
  }
  // stop() waits for the host functions still queued on the stream (they call into the runtime).
  auto rep = (*rt)->stop();
  for (auto& t : gpu) t.join();
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(launched, 6);
  ASSERT_EQ(rep->steps.size(), 6u);
  for (size_t k = 0; k < 6; ++k) EXPECT_GE(rep->steps[k].anchor_ns - begun[k], 3 * kMs) << k;
}

TEST(Runtime, AFailedClockCallDropsThePolicyAndAFailedResetIsTheError) {
  RecordingClock clock;
  clock.fail_locks = 1;
  auto rt = Runtime::start(options(&clock));
  ASSERT_TRUE(rt.ok());
  for (int k = 0; k < 6; ++k) {
    (*rt)->step_begin();
    std::this_thread::sleep_for(8ms);
  }
  auto rep = (*rt)->stop();
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->errors.size(), 1u);
  const auto calls = clock.calls();
  // The failed lock, the reset that drops the policy, nothing more until the stop's reset.
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].op, "lock");
  EXPECT_EQ(calls[1].op, "reset");
  EXPECT_EQ(calls[2].op, "reset");

  RecordingClock stuck;
  stuck.fail_resets = 5;
  auto rt2 = Runtime::start(options(&stuck));
  ASSERT_TRUE(rt2.ok());
  (*rt2)->step_begin();
  auto r2 = (*rt2)->stop();
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().what.find("could not be reset"), std::string::npos);
  EXPECT_EQ(stuck.calls().size(), 2u);  // tried twice
}

TEST(Runtime, ADryRunDecidesEveryChangeAndCallsNothing) {
  RuntimeOptions o = options(nullptr);
  o.dry_run = true;
  auto rt = Runtime::start(std::move(o));
  ASSERT_TRUE(rt.ok());
  for (int k = 0; k < 5; ++k) {
    (*rt)->step_begin();
    std::this_thread::sleep_for(8ms);
  }
  auto rep = (*rt)->stop();
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->issues.size() + size_t(rep->skipped_superseded), 3u * 2);  // steps 2, 3, 4
  const nlohmann::json j = runtime_report_json(*rep, true);
  EXPECT_EQ(j["issues"].size(), rep->issues.size());
  for (const auto& is : j["issues"]) {
    EXPECT_TRUE(is["clock_mhz"] == 1200 || is["clock_mhz"] == 1500);
    EXPECT_GE(is["late_us"].get<double>(), 0.0);
    EXPECT_GE(is["step"].get<int>(), 2);
  }
}

TEST(Runtime, ASlowEnergyCounterNeverDelaysAClockChange) {
  // NVML's energy counter took 3.2 ms a read (p99 13.6 ms) on an H200 (scripts/gpu_dry_run.py): here
  // each read takes 40 ms, longer than a step. The counter is read on a thread of its own, never on
  // the one that sets the clock, so each step's changes go when due, as with no counter at all (a
  // runtime that read it at every anchor would make each step's 1200 too late and supersede it).
  struct Counter {
    std::mutex mu;
    std::set<std::thread::id> threads;
    int reads = 0;
  } counter;
  class ThreadClock final : public ClockControl {
   public:
    std::string describe() const override { return "threads"; }
    Status lock_sm_clock(int) override { return note(); }
    Status reset_sm_clock() override { return note(); }
    std::set<std::thread::id> threads;
    std::mutex mu;

   private:
    Status note() {
      std::lock_guard<std::mutex> lk(mu);
      threads.insert(std::this_thread::get_id());
      return {};
    }
  } clock;
  RuntimeOptions o;
  o.program = two_changes();
  o.clock = &clock;
  o.phases = PhaseOptions{2, false, 1, 0};
  o.log_to_stderr = false;
  o.energy_j = [&counter]() -> Result<double> {
    std::this_thread::sleep_for(40ms);
    std::lock_guard<std::mutex> lk(counter.mu);
    counter.threads.insert(std::this_thread::get_id());
    return double(++counter.reads);
  };
  auto rep = run_steps(std::move(o), 8, 12ms);
  ASSERT_TRUE(rep.ok()) << rep.error().message();
  // Steps 2–7 run the policy: 1200 then 1500 each, as in the test above.
  EXPECT_EQ(rep->issues.size() + size_t(rep->skipped_superseded), 12u);
  EXPECT_LE(rep->skipped_superseded, 2);
  std::lock_guard<std::mutex> lk(counter.mu);
  EXPECT_GE(counter.reads, 2);
  ASSERT_EQ(counter.threads.size(), 1u);
  // The clock is set by the controller thread (and reset by stop()'s caller), never by the meter.
  EXPECT_EQ(clock.threads.count(*counter.threads.begin()), 0u);
  EXPECT_EQ(clock.threads.count(std::this_thread::get_id()), 1u);
  EXPECT_EQ(clock.threads.size(), 2u);
}

TEST(Runtime, TheMeterSpendsAtMostATenthOfItsTimeInReads) {
  // A 5 ms read polled every 2 ms would be read back to back (about 45 times in 300 ms), the driver
  // in an NVML call all the time beside the job (docs/runtime.md): the meter waits ten reads' time
  // between reads instead.
  std::atomic<int> reads{0};
  RecordingClock clock;
  RuntimeOptions o = options(&clock);
  o.energy_j = [&reads]() -> Result<double> {
    std::this_thread::sleep_for(5ms);
    return double(++reads);
  };
  auto rt = Runtime::start(std::move(o));
  ASSERT_TRUE(rt.ok()) << rt.error().message();
  for (int k = 0; k < 20; ++k) {
    (*rt)->step_begin();
    std::this_thread::sleep_for(15ms);
  }
  ASSERT_TRUE((*rt)->stop().ok());
  EXPECT_GE(reads.load(), 2);
  EXPECT_LE(reads.load(), 12);  // 300 ms / 55 ms, the last read at stop(), and room for a slow machine
}

TEST(Runtime, MeasuresTheSavingFromAnEnergyCounterThatMovesEvery10ms) {
  // A GPU drawing 100 W at the default clock and 60 W at 1200 MHz, whose counter moves every 10 ms.
  // The job's steps sleep, and the controller's calls land when the machine lets them: the saving the
  // runtime measures is held to the one this GPU's own power log gives over the same blocks, not to
  // the nominal 40 %, so that a loaded machine moves both alike.
  struct Gpu {
    std::mutex mu;
    int64_t t0 = std::chrono::steady_clock::now().time_since_epoch().count();
    std::vector<std::pair<int64_t, double>> watts{{0, 100.0}};  // (since t0, W)
    double energy(int64_t t) {  // J at t (ns since t0)
      std::lock_guard<std::mutex> lk(mu);
      double j = 0;
      for (size_t i = 0; i < watts.size(); ++i) {
        const int64_t b = watts[i].first, e = std::min(t, i + 1 < watts.size() ? watts[i + 1].first : t);
        if (e > b) j += watts[i].second * double(e - b) / 1e9;
      }
      return j;
    }
  } gpu;
  class MeteredClock final : public ClockControl {
   public:
    explicit MeteredClock(Gpu& g) : g_(g) {}
    std::string describe() const override { return "metered"; }
    Status lock_sm_clock(int mhz) override { return set(mhz == 1200 ? 60 : 100); }
    Status reset_sm_clock() override { return set(100); }

   private:
    Status set(double w) {
      std::lock_guard<std::mutex> lk(g_.mu);
      g_.watts.emplace_back(std::chrono::steady_clock::now().time_since_epoch().count() - g_.t0, w);
      return {};
    }
    Gpu& g_;
  } clock(gpu);
  constexpr int64_t kUpdate = 10 * kMs;
  RuntimeOptions o;
  o.program.default_clock_mhz = 1980;
  o.program.max_slowdown = 0.5;
  o.program.ranks = {{Change{0, 1200, 0}}};
  o.clock = &clock;
  o.energy_update_ms = 10;
  o.phases = PhaseOptions{5, true, 2, 0};
  o.log_to_stderr = false;
  o.energy_j = [&gpu]() -> Result<double> {
    const int64_t t = std::chrono::steady_clock::now().time_since_epoch().count() - gpu.t0;
    return gpu.energy(t / kUpdate * kUpdate);
  };
  auto rt = Runtime::start(std::move(o));
  ASSERT_TRUE(rt.ok());
  for (int k = 0; k < 20; ++k) {
    (*rt)->step_begin();
    std::this_thread::sleep_for(60ms);
  }
  (*rt)->step_begin();  // closes the last step
  auto rep = (*rt)->stop();
  ASSERT_TRUE(rep.ok());
  EXPECT_GE(rep->measured.default_side.energy_windows, 2);
  EXPECT_GE(rep->measured.policy_side.energy_windows, 1);

  // The truth over the same windows: each block's steps after its first, from the power log.
  std::map<int, std::vector<const StepRecord*>> blocks;
  for (const auto& s : rep->steps) blocks[s.block].push_back(&s);
  double j[2] = {0, 0};
  int n[2] = {0, 0};
  for (const auto& [b, ss] : blocks) {
    if (ss.size() != 5 || ss.back()->time_ns <= 0) continue;  // the closing step's block
    const int side = ss.front()->mode == Mode::kPolicy ? 1 : 0;
    const int64_t a0 = ss[1]->anchor_ns - gpu.t0, a1 = ss.back()->anchor_ns + ss.back()->time_ns - gpu.t0;
    j[side] += gpu.energy(a1) - gpu.energy(a0);
    n[side] += 4;
  }
  ASSERT_GT(n[0], 0);
  ASSERT_GT(n[1], 0);
  const double truth_default = j[0] / n[0], truth_saving = 100 * (1 - (j[1] / n[1]) / truth_default);
  EXPECT_GT(truth_saving, 20);  // the policy's clock was really set, and reset between blocks
  // The counter only says where it moved (10 ms apart, seen by 2 ms polls): a few points either way.
  EXPECT_NEAR(rep->measured.saving_pct, truth_saving, 4);
  EXPECT_NEAR(rep->measured.default_side.energy_j, truth_default, 0.04 * truth_default);
}

TEST(Runtime, BadOptionsAreErrors) {
  RuntimeOptions o = options(nullptr);
  EXPECT_FALSE(Runtime::start(o).ok());  // no clock control and not a dry run
  RecordingClock clock;
  o = options(&clock);
  o.rank = 3;
  auto r = Runtime::start(std::move(o));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("rank 3"), std::string::npos);
}

// ---- emo apply on the emulated GPU ----

session::Session open_session(synth::Workload kind, int ranks, int layers, const char* device) {
  session::Options o;
  o.device = device;
  o.eval_steps = 12;
  auto s = session::Session::open(std::move(o), test::synth_workload(kind, ranks, layers, 3));
  if (!s) throw std::runtime_error(s.error().message());
  return std::move(*s);
}

TEST(Apply, TheRuntimesMeasuredSavingMatchesEvaluateWithinTheGoal) {
  struct Case {
    synth::Workload kind;
    int ranks, layers;
    const char* device;
  };
  for (const Case& c : {Case{synth::Workload::kTrainPP, 4, 8, "emulated:h100"}, Case{synth::Workload::kInferDecode, 1, 6, "emulated:a100@2"}}) {
    session::Session s = open_session(c.kind, c.ranks, c.layers, c.device);
    auto pol = s.policy();
    ASSERT_TRUE(pol.ok()) << pol.error().message();
    auto ev = s.evaluation();
    ASSERT_TRUE(ev.ok()) << ev.error().message();
    double ev_saving = 0, ev_slow = 0;
    for (const auto& p : **ev) {
      if (p.name == "policy") {
        ev_saving = p.saving_pct;
        ev_slow = p.slowdown_pct;
      }
    }
    backends::ApplyOptions ao;
    ao.steps = 160;
    auto r = backends::apply_emulated(s.target(), **s.workload(), **pol, ao);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_TRUE(r->fallbacks.empty()) << c.device;
    EXPECT_NEAR(r->measured.saving_pct, ev_saving, 1.5) << c.device;
    EXPECT_LE(r->measured.slowdown_pct, 100 * (*pol)->max_slowdown + 0.5) << c.device;
    EXPECT_NEAR(r->measured.slowdown_pct, ev_slow, 0.5) << c.device;
    EXPECT_GT(r->calls, 0) << c.device << " saving " << ev_saving;
    EXPECT_EQ(r->calls, r->changes_landed);  // every call differs from the clock before it
    // The same run again: the same answer (the draws are the run's seed).
    auto again = backends::apply_emulated(s.target(), **s.workload(), **pol, ao);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->measured.saving_pct, r->measured.saving_pct);
  }
}

TEST(Apply, APolicyRunningOverItsBoundIsDroppedAndSaid) {
  session::Session s = open_session(synth::Workload::kTrainPP, 4, 8, "emulated:h100");
  auto pol = s.policy();
  ASSERT_TRUE(pol.ok());
  optimize::PolicyFile tight = **pol;
  tight.max_slowdown = 0.01;  // the same clocks held to 1 %: they run ≈4 % slower
  backends::ApplyOptions ao;
  ao.steps = 80;
  auto r = backends::apply_emulated(s.target(), **s.workload(), tight, ao);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->fallbacks.size(), 1u);
  EXPECT_GT(r->fallbacks[0].slowdown_pct, 1.0);
  const nlohmann::json j = backends::apply_json(*r);
  EXPECT_EQ(j["fallbacks"].size(), 1u);
  EXPECT_LT(j["measured"]["policy"]["steps"].get<int>(), 80 / 2);
  // Verify mode: both sides measured in alternating blocks, with intervals.
  ao.verify = true;
  ao.steps = 120;
  auto v = backends::apply_emulated(s.target(), **s.workload(), **pol, ao);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->measured.saving_ci_pct.size(), 2u);
  EXPECT_LT(v->measured.saving_ci_pct[0], v->measured.saving_pct);
  EXPECT_GT(v->measured.default_side.energy_windows, 3);
}

TEST(Apply, AJobReadsThePolicyTextAsTheCheckedPolicyGivesIt) {
  session::Session s = open_session(synth::Workload::kTrainPP, 4, 8, "emulated:h100");
  auto sol = s.solution();
  ASSERT_TRUE(sol.ok());
  auto problem = s.problem();
  ASSERT_TRUE(problem.ok());
  const std::string text = optimize::policy_json(**problem, (*sol)->solution, 0.05).dump(2);
  auto from_text = program_from_policy(text, "policy.json");
  ASSERT_TRUE(from_text.ok()) << from_text.error().message();
  const Program from_file = program_of(**s.policy(), 4);
  ASSERT_EQ(from_text->ranks.size(), from_file.ranks.size());
  EXPECT_EQ(from_text->default_clock_mhz, from_file.default_clock_mhz);
  EXPECT_DOUBLE_EQ(from_text->max_slowdown, from_file.max_slowdown);
  EXPECT_NEAR(from_text->predicted_step_ns, from_file.predicted_step_ns, 1.0);
  for (size_t r = 0; r < from_file.ranks.size(); ++r) {
    ASSERT_EQ(from_text->ranks[r].size(), from_file.ranks[r].size()) << r;
    for (size_t i = 0; i < from_file.ranks[r].size(); ++i) {
      EXPECT_EQ(from_text->ranks[r][i].clock_mhz, from_file.ranks[r][i].clock_mhz);
      EXPECT_NEAR(double(from_text->ranks[r][i].issue_at_ns), double(from_file.ranks[r][i].issue_at_ns), 1.0);
    }
  }
  EXPECT_FALSE(program_from_policy("{}", "x.json").ok());
  EXPECT_FALSE(program_from_policy("not json", "x.json").ok());
  auto bad = program_from_policy(R"({"schema": "emo-policy/1", "default_clock_mhz": 1980, "max_slowdown": 0.05,
                                     "packs": [{"rank": -1, "clock_mhz": 1200, "issue_at_us": 0}]})",
                                 "x.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().where.find("packs[0]"), std::string::npos);
}

TEST(Apply, NeedsAnEmulatedGpuAndEnoughSteps) {
  session::Session s = open_session(synth::Workload::kTrainDP, 2, 4, "emulated:h100");
  auto pol = s.policy();
  ASSERT_TRUE(pol.ok());
  backends::ApplyOptions ao;
  ao.steps = 10;
  ao.block_steps = 4;
  auto r = backends::apply_emulated(s.target(), **s.workload(), **pol, ao);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().note.find("--steps 20"), std::string::npos) << r.error().note;
  auto profile_only = backends::Target::open("h100");
  ASSERT_TRUE(profile_only.ok());
  ao.steps = 100;
  EXPECT_FALSE(backends::apply_emulated(*profile_only, **s.workload(), **pol, ao).ok());
}

}  // namespace
}  // namespace emo::runtime
