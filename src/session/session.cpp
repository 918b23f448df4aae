// The pipeline object; see emo/session/session.h.
#include "emo/session/session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <optional>

#include "emo/backends/profiling.h"
#include "emo/base/file_util.h"
#include "emo/base/parallel.h"
#include "emo/emulator/emulator.h"

namespace emo::session {

struct Session::State {
  Options o;
  std::unique_ptr<backends::Target> target;
  std::unique_ptr<backends::Target> bench;  // null: the target itself
  std::optional<analysis::Workload> workload;
  std::optional<analysis::Analysis> analysis;
  std::optional<pack::Packing> packing;
  std::optional<std::vector<pack::ProfiledRun>> runs;
  std::optional<pack::PackModels> models;
  std::optional<optimize::Problem> problem;
  std::optional<optimize::Checked> solution;
  // The solve that chose no clock to refine (Options::refine_profile): the models it ran on are the
  // final ones, so solution() checks it instead of solving again.
  std::optional<optimize::Solution> first_solve;
  // Where it did refine: the first solve's policy, one more start for the second solve
  // (OptimizeOptions::start_clocks).
  std::vector<int> start_clocks;
  std::optional<optimize::PolicyFile> policy;
  std::optional<std::vector<EvaluatedPlan>> evaluation;
  std::optional<backends::EmulatedMeter> meter;
  std::map<int, backends::PackFidelity> fidelity;
  std::map<std::string, analysis::WhatIf> what_ifs;
  std::map<std::string, double> stage_ms;
};

namespace {

// The optimizer's problem over a step, its packing and these models.
optimize::Problem problem_of(const analysis::Workload& w, const pack::Packing& p, const pack::PackModels& models,
                             int default_clock_mhz) {
  optimize::Problem pr;
  pr.workload = &w;
  pr.packing = &p;
  pr.models = &models;
  pr.default_clock_mhz = default_clock_mhz;
  return pr;
}

// Adds the wall-clock time from construction to destruction to `ms[key]`.
class StageTimer {
 public:
  StageTimer(std::map<std::string, double>& ms, std::string key)
      : ms_(ms), key_(std::move(key)), t0_(std::chrono::steady_clock::now()) {}
  ~StageTimer() {
    ms_[key_] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  std::map<std::string, double>& ms_;
  std::string key_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

Status validate(const Options& o) {
  if (!(o.optimize.max_slowdown >= 0 && o.optimize.max_slowdown <= 1))
    return make_error("--max-slowdown", "must be between 0 and 1", "0.05 allows 5 % more step time");
  if (o.eval_steps < 2 || o.eval_steps > emulator::kMaxRunSteps)
    return make_error("--steps", fmt::format("must be from 2 (the first is a warm-up) to {}", emulator::kMaxRunSteps));
  if (!o.profiled_dir.empty() && !o.profile_on.empty())
    return make_error("--profiled", "give either --profiled DIR (recorded runs) or --profile-on DEVICE, not both");
  return {};
}

Session::Session(std::unique_ptr<State> s) : s_(std::move(s)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

Result<Session> Session::open(Options options) {
  EMO_RETURN_IF_ERROR(validate(options));
  auto st = std::make_unique<State>();
  auto target = backends::Target::open(options.device);
  if (!target) return target.error();
  st->target = std::make_unique<backends::Target>(std::move(*target));
  if (!options.profile_on.empty()) {
    auto bench = backends::Target::open(options.profile_on);
    if (!bench) return bench.error();
    st->bench = std::make_unique<backends::Target>(std::move(*bench));
  } else if (!st->target->emulated()) {
    auto bench = backends::Target::emulated_of(st->target->profile());
    if (!bench) return bench.error();
    st->bench = std::make_unique<backends::Target>(std::move(*bench));
  }
  st->o = std::move(options);
  return Session(std::move(st));
}

Result<Session> Session::open(Options options, analysis::Workload workload) {
  auto s = open(std::move(options));
  if (!s) return s.error();
  s->s_->workload = std::move(workload);
  return s;
}

const Options& Session::options() const { return s_->o; }
const backends::Target& Session::target() const { return *s_->target; }
const backends::Target& Session::bench() const { return s_->bench ? *s_->bench : *s_->target; }
int Session::default_clock_mhz() const { return int(profile().default_clock_mhz.value); }
bool Session::checks() const { return s_->o.check && s_->o.profiled_dir.empty(); }
const std::map<std::string, double>& Session::stage_ms() const { return s_->stage_ms; }

void Session::say(const std::string& line) const {
  if (s_->o.progress) s_->o.progress(line);
}

Result<const analysis::Workload*> Session::workload() {
  if (!s_->workload) {
    say("loading and analyzing " + std::to_string(s_->o.traces.size()) + " trace(s)");
    StageTimer t(s_->stage_ms, "analyze");
    auto w = analysis::load(s_->o.traces, s_->o.load, s_->o.comm ? *s_->o.comm : dist::world());
    if (!w) return w.error();
    s_->workload = std::move(*w);
  }
  return &*s_->workload;
}

Result<const analysis::Analysis*> Session::analysis() {
  if (!s_->analysis) {
    auto w = workload();
    if (!w) return w.error();
    StageTimer t(s_->stage_ms, "analyze");
    s_->analysis = analysis::analyze(**w);
  }
  return &*s_->analysis;
}

Result<const pack::Packing*> Session::packing() {
  if (!s_->packing) {
    auto an = analysis();
    if (!an) return an.error();
    say("packing");
    StageTimer t(s_->stage_ms, "pack");
    auto p = pack::make_packs(*s_->workload, **an, profile(), s_->o.pack);
    if (!p) return p.error();
    s_->packing = std::move(*p);
  }
  return &*s_->packing;
}

Result<const std::vector<pack::ProfiledRun>*> Session::profiled_runs() {
  if (!s_->runs) {
    auto p = packing();
    if (!p) return p.error();
    const std::string& dir = s_->o.profiled_dir;
    if (dir.empty()) {
      say(fmt::format("profiling {} signature(s) at {} clocks on {}", (*p)->signatures.size(),
                      (*p)->plan_clocks_mhz.size(), bench().spec_text()));
    } else {
      say("reading the profiling runs in " + dir);
    }
    StageTimer t(s_->stage_ms, "profile");
    auto runs = dir.empty() ? backends::profile_plan(bench(), *s_->workload, **p)
                            : backends::read_profiled_dir(dir, *s_->workload, *p);
    if (!runs) return runs.error();
    s_->runs = std::move(*runs);
  }
  return &*s_->runs;
}

Result<const pack::PackModels*> Session::models() {
  if (!s_->models) {
    auto runs = profiled_runs();
    if (!runs) return runs.error();
    say("fitting pack models");
    StageTimer t(s_->stage_ms, "fit");
    auto m = pack::fit_pack_models(*s_->workload, *s_->packing, **runs, profile());
    if (!m) return m.error();
    // Where a GPU's step energy still falls at the lowest profiled clock, the energy-optimal clock may lie
    // below it: profile one more clock there (the lowest the optimizer considers) and fit again. Recorded
    // runs (--profiled) cannot grow: fit_warnings names the clock to record.
    if (const pack::StillFalling sf = pack::energy_still_falling(*m); sf.profile_mhz > 0 && s_->o.profiled_dir.empty()) {
      say(fmt::format("GPU {}'s step energy still falls at {} MHz (the lowest profiled clock): profiling {} MHz too",
                      sf.gpu, sf.lowest_mhz, sf.profile_mhz));
      auto more = backends::profile_plan(bench(), *s_->workload, *s_->packing, {sf.profile_mhz});
      if (!more) return more.error();
      for (pack::ProfiledRun& r : *more) s_->runs->push_back(std::move(r));
      m = pack::fit_pack_models(*s_->workload, *s_->packing, *s_->runs, profile());
      if (!m) return m.error();
    }
    // Where the plan runs away from every profiled clock, the fitted curve between them decides its
    // energy: profile the clock it mostly runs at and fit again. A first solve finds it (a whole one: the
    // DP's plan before the polishing searches mostly runs elsewhere, docs/profiling.md).
    if (s_->o.refine_profile && s_->o.profiled_dir.empty()) {
      auto first = optimize::optimize(problem_of(*s_->workload, *s_->packing, *m, default_clock_mhz()), s_->o.optimize);
      std::vector<int> refine;
      std::vector<std::string> where;
      if (first) {
        for (const optimize::RefineClock& r :
             optimize::clocks_to_refine(*s_->packing, *first, m->clocks_mhz, profile().max_clock_mhz())) {
          refine.push_back(r.clock_mhz);
          where.push_back(fmt::format("{} MHz ({})", r.clock_mhz, r.plan));
        }
      }
      if (!refine.empty()) {
        say(fmt::format("the first plans run mostly between the profiled clocks: profiling {} too",
                        fmt::join(where, ", ")));
        auto more = backends::profile_plan(bench(), *s_->workload, *s_->packing, refine);
        if (!more) return more.error();
        for (pack::ProfiledRun& r : *more) s_->runs->push_back(std::move(r));
        m = pack::fit_pack_models(*s_->workload, *s_->packing, *s_->runs, profile());
        if (!m) return m.error();
        s_->start_clocks = first->policy.pack_clock_mhz;
      } else if (first) {
        s_->first_solve = std::move(*first);
      }
    }
    s_->models = std::move(*m);
  }
  return &*s_->models;
}

Result<const optimize::Problem*> Session::problem() {
  if (!s_->problem) {
    auto m = models();
    if (!m) return m.error();
    s_->problem = problem_of(*s_->workload, *s_->packing, **m, default_clock_mhz());
  }
  return &*s_->problem;
}

Result<const optimize::Checked*> Session::solution() {
  if (!s_->solution) {
    auto pr = problem();
    if (!pr) return pr.error();
    say("optimizing the clock policy");
    StageTimer t(s_->stage_ms, "optimize");
    optimize::OptimizeOptions oo = s_->o.optimize;
    if (oo.start_clocks.empty()) oo.start_clocks = s_->start_clocks;
    if (checks()) {
      if (!s_->meter) {
        auto m = backends::EmulatedMeter::make(bench(), *s_->workload, default_clock_mhz());
        if (!m) return m.error();
        s_->meter.emplace(std::move(*m));
      }
      auto c = optimize::optimize_checked(**pr, oo, *s_->meter, s_->o.check_options,
                                          s_->first_solve ? &*s_->first_solve : nullptr);
      if (!c) return c.error();
      s_->solution = std::move(*c);
    } else if (s_->first_solve) {
      s_->solution = optimize::Checked{std::move(*s_->first_solve), {}, false};
    } else {
      auto sol = optimize::optimize(**pr, oo);
      if (!sol) return sol.error();
      s_->solution = optimize::Checked{std::move(*sol), {}, false};
    }
    s_->first_solve.reset();
  }
  return &*s_->solution;
}

Result<const optimize::PolicyFile*> Session::policy() {
  if (!s_->policy && !s_->o.policy_file.empty()) {
    const std::string& path = s_->o.policy_file;
    auto text = read_file(path);
    if (!text) return text.error();
    auto w = workload();
    if (!w) return w.error();
    auto pf = optimize::read_policy(path, *text, **w, profile());
    if (!pf) return pf.error();
    s_->policy = std::move(*pf);
  }
  if (!s_->policy) {
    auto c = solution();
    if (!c) return c.error();
    auto pf = optimize::applied_policy(*s_->problem, (*c)->solution, s_->o.optimize.max_slowdown);
    if (!pf) return pf.error();
    s_->policy = std::move(*pf);
  }
  return &*s_->policy;
}

Result<std::vector<EvaluatedPlan>> Session::measure_all(const optimize::PolicyFile& pf, int steps,
                                                        const optimize::Solution* predicted) {
  auto w = workload();
  if (!w) return w.error();
  auto meter = backends::EmulatedMeter::make(bench(), **w, pf.default_clock_mhz);
  if (!meter) return meter.error();
  struct Job {
    std::vector<int> clocks;
    std::string name;
    std::vector<int64_t> issues;
  };
  std::vector<Job> jobs{{{}, "default", {}}, {{}, "policy", {}}};
  for (const auto& ap : pf.packs) jobs[1].clocks.push_back(ap.clock_mhz);
  for (const auto& b : pf.baselines) jobs.push_back({b.clocks_mhz, b.name, b.issue_at_ns});
  say(fmt::format("evaluating the policy and {} baseline(s) on {}", pf.baselines.size(), bench().spec_text()));
  StageTimer t(s_->stage_ms, "evaluate");
  // The runs are independent (each starts from its own seed): one per thread.
  std::vector<std::optional<Result<optimize::Measured>>> runs(jobs.size());
  parallel_for(jobs.size(), [&](size_t i) {
    runs[i] = meter->measure(pf.packs, jobs[i].clocks, jobs[i].issues, steps, jobs[i].name);
  });
  std::vector<EvaluatedPlan> out;
  for (auto& r : runs) {
    if (!*r) return r->error();
    EvaluatedPlan e;
    e.measured = std::move(**r);
    e.name = e.measured.name;
    out.push_back(std::move(e));
  }
  const double def_ns = out.front().measured.mean_step_ns(), def_j = out.front().measured.energy_j;
  for (EvaluatedPlan& e : out) {
    if (predicted) {
      const optimize::Plan* pl = e.name == "default"  ? &predicted->default_plan
                                 : e.name == "policy" ? &predicted->policy
                                                      : nullptr;
      for (const auto& b : predicted->baselines) {
        if (!pl && b.name == e.name) pl = &b;
      }
      if (pl) {
        e.predicted = true;
        e.predicted_time_ns = pl->time_ns;
        e.predicted_energy_j = pl->energy_j;
      }
    }
    // In µs, as the figures are shown.
    e.slowdown_pct = def_ns > 0 ? 100.0 * ((e.measured.mean_step_ns() / 1e3) / (def_ns / 1e3) - 1) : 0;
    e.saving_pct = def_j > 0 ? 100.0 * (1 - e.measured.energy_j / def_j) : 0;
  }
  return out;
}

Result<const std::vector<EvaluatedPlan>*> Session::evaluation() {
  if (!s_->evaluation) {
    auto pf = policy();
    if (!pf) return pf.error();
    auto e = measure_all(**pf, s_->o.eval_steps, s_->o.policy_file.empty() ? &s_->solution->solution : nullptr);
    if (!e) return e.error();
    s_->evaluation = std::move(*e);
  }
  return &*s_->evaluation;
}

Result<const analysis::WhatIf*> Session::what_if(const std::vector<analysis::Scale>& scales,
                                                 const analysis::TopologyQuestion* topology) {
  std::string key;
  for (const auto& sc : scales) key += fmt::format("{}={:a};", sc.selector, sc.factor);
  // A topology is named by its file; the same file twice in one session is the same topology.
  if (topology) key += "@" + topology->asked.source + "|" + (topology->recorded ? topology->recorded->source : "");
  if (auto it = s_->what_ifs.find(key); it != s_->what_ifs.end()) return &it->second;
  auto w = workload();
  if (!w) return w.error();
  auto r = analysis::what_if(**w, scales, topology);
  if (!r) return r.error();
  return &s_->what_ifs.emplace(key, std::move(*r)).first->second;
}

Result<const backends::PackFidelity*> Session::pack_fidelity(int clock_mhz) {
  if (auto it = s_->fidelity.find(clock_mhz); it != s_->fidelity.end()) return &it->second;
  auto m = models();
  if (!m) return m.error();
  auto f = backends::pack_fidelity(bench(), *s_->workload, *s_->packing, **m, clock_mhz);
  if (!f) return f.error();
  return &s_->fidelity.emplace(clock_mhz, std::move(*f)).first->second;
}

Status Session::write_profiled_dir(const std::string& dir) {
  auto p = packing();
  if (!p) return p.error();
  // The clocks profiling in memory ends with: the plan's, and one more where the energy still falls.
  auto m = models();
  if (!m) return m.error();
  return backends::write_profiled_dir(bench(), *s_->workload, **p, dir, (*m)->clocks_mhz);
}

}  // namespace emo::session
