// The runtime inside a job. See emo/runtime/runtime.h.
#include "emo/runtime/runtime.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

namespace emo::runtime {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::chrono::steady_clock::time_point at_time(int64_t ns) {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

}  // namespace

Result<CudaLaunch> cuda_launch_host_func() {
  void* dl = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (dl == nullptr) dl = ::dlopen("libcuda.so.1", RTLD_NOW);
  if (dl == nullptr) {
    return make_error("libcuda.so.1", "cannot be loaded: " + std::string(::dlerror()),
                      "GPU anchors need the NVIDIA driver; without a stream the CPU time of step_begin() anchors the step");
  }
  void* sym = ::dlsym(dl, "cuLaunchHostFunc");
  if (sym == nullptr) return make_error("libcuda.so.1", "has no cuLaunchHostFunc (CUDA 10.0 or later is needed)");
  return CudaLaunch{reinterpret_cast<LaunchHostFunc>(sym)};
}

struct Runtime::Impl {
  RuntimeOptions o;
  std::mutex mu;
  std::condition_variable cv;
  mutable std::mutex state_mu;  // the monitor, the controller and the report (the controller thread writes)
  std::deque<std::pair<int, int64_t>> anchors;  // (step, anchor) posted, not yet taken
  int reached = 0;      // anchors posted (the GPU's host functions, or the CPU)
  int launched = 0;     // host functions enqueued on the stream
  int gpu_reached = 0;  // ... and run
  bool stopping = false;
  bool stopped = false;
  std::thread thread;
  // The controller thread's own state (read by stop() after the join).
  Monitor monitor;
  Controller controller;
  RuntimeReport report;
  bool failed = false;

  explicit Impl(RuntimeOptions opts)
      : o(std::move(opts)), monitor(o.program.max_slowdown, o.phases), controller(o.program.default_clock_mhz) {}

  void post(int64_t t, bool from_gpu = false) {
    {
      std::lock_guard<std::mutex> lk(mu);
      anchors.emplace_back(reached++, t);
      if (from_gpu) ++gpu_reached;
    }
    cv.notify_all();
  }
  static void on_gpu(void* self) { static_cast<Impl*>(self)->post(now_ns(), true); }

  void say(const std::string& line) const {
    if (o.log_to_stderr) std::fprintf(stderr, "%s\n", line.c_str());
  }

  Status call(int mhz) {
    if (o.dry_run || o.clock == nullptr) return {};
    return mhz == o.program.default_clock_mhz ? o.clock->reset_sm_clock() : o.clock->lock_sm_clock(mhz);
  }

  // The meter: reads the energy counter every counter_poll_ms on a thread of its own and feeds the
  // monitor's update log, each reading stamped at the middle of its call. A read can be slow (NVML's
  // energy counter took 3.2 ms a read, p99 13.6 ms, on an H200 on 2026-12-04: scripts/gpu_dry_run.py),
  // so the thread that issues clock changes never makes one: a change is never late by a read.
  std::thread meter_thread;
  static constexpr int64_t kMeterDutyInverse = 10;
  void meter() {
    const int64_t period = std::max<int64_t>(int64_t(o.counter_poll_ms * 1e6), 100'000);
    for (;;) {
      bool last = false;
      {
        std::lock_guard<std::mutex> lk(mu);
        last = stopping;  // one more read once asked to stop: after the last anchor, for its window
      }
      const int64_t t0 = now_ns();
      auto e = o.energy_j();
      const int64_t t1 = now_ns();
      {
        std::lock_guard<std::mutex> state(state_mu);
        if (!e) {
          if (report.errors.size() < 16) report.errors.push_back(e.error());
        } else {
          monitor.counter(0, t0 + (t1 - t0) / 2, *e);
        }
      }
      if (last) return;
      // At most a tenth of the time in reads: with a read of 3 ms every 2 ms, the driver would be in an
      // NVML call all the time beside the job. So capped, a job on that H200 ran its steps in 12.37 ms
      // with the counter read beside it and 12.38 ms without (the CUPTI injection, a dry run).
      const int64_t next = t0 + std::max(period, kMeterDutyInverse * (t1 - t0));
      std::unique_lock<std::mutex> lk(mu);
      cv.wait_until(lk, at_time(next), [&] { return stopping; });
    }
  }

  // Waits (holding `lk` on return) until `deadline_ns` or `pred`.
  template <class Pred>
  void wait(std::unique_lock<std::mutex>& lk, int64_t deadline_ns, Pred pred) {
    while (!pred()) {
      if (deadline_ns == INT64_MAX) {
        cv.wait(lk);
      } else {
        if (now_ns() >= deadline_ns) return;
        cv.wait_until(lk, at_time(deadline_ns));
      }
    }
  }

  void run() {
    const std::vector<Change> to_default{Change{0, o.program.default_clock_mhz, 0}};
    std::unique_lock<std::mutex> lk(mu);
    while (true) {
      wait(lk, INT64_MAX, [&] { return stopping || !anchors.empty(); });
      if (anchors.empty()) break;  // stopping, nothing left
      const auto [step, anchor] = anchors.front();
      anchors.pop_front();
      lk.unlock();
      std::unique_lock<std::mutex> state(state_mu);
      monitor.anchor(step, anchor, std::nullopt);  // the energy at the anchor: from the meter's updates
      if (auto fb = monitor.check(step)) {
        report.fallbacks.push_back(*fb);
        say(fmt::format("warning: emo runtime: the policy is dropped for the default clock from step {}: measured "
                        "slowdown {:.2f} % (SE {:.2f} %) is over the bound {:.1f} %",
                        fb->step, fb->slowdown_pct, fb->slowdown_se_pct, 100 * o.program.max_slowdown));
      }
      const Mode mode = failed ? Mode::kDefault : monitor.mode_of(step);
      state.unlock();
      const auto& changes = mode == Mode::kPolicy ? o.program.ranks[o.rank] : to_default;
      lk.lock();
      bool stop_now = stopping;  // steps anchored before the stop are measured, their changes not made
      lk.unlock();
      for (size_t i = 0; i < changes.size() && !stop_now; ++i) {
        std::optional<Issue> d;
        {
          std::lock_guard<std::mutex> state_lk(state_mu);
          d = controller.decide(anchor, changes, i);
        }
        if (!d) continue;
        lk.lock();
        wait(lk, d->at_ns, [&] { return stopping; });
        stop_now = stopping;
        lk.unlock();
        if (stop_now && now_ns() < d->at_ns) break;  // stopped before it was due
        IssueRecord rec;
        rec.step = step;
        rec.pack = d->pack;
        rec.clock_mhz = d->clock_mhz;
        rec.anchor_ns = anchor;
        rec.due_ns = anchor + changes[i].issue_at_ns;
        rec.at_ns = std::max(d->at_ns, now_ns());
        Status st = call(d->clock_mhz);
        rec.returned_ns = now_ns();
        rec.ok = st.ok();
        d->at_ns = rec.at_ns;
        std::lock_guard<std::mutex> state_lk(state_mu);
        controller.issued(*d, rec.returned_ns);
        ++report.calls;
        if (report.issues.size() < RuntimeReport::kKeptIssues) report.issues.push_back(rec);
        if (!st.ok()) {
          report.errors.push_back(st.error());
          say("error: emo runtime: " + st.error().message() + "; the policy is dropped for the default clock");
          failed = true;
          const int64_t t = now_ns();
          (void)call(o.program.default_clock_mhz);
          controller.issued(Issue{t, o.program.default_clock_mhz, 0, 0}, now_ns());  // state_lk held
          break;
        }
      }
      lk.lock();
    }
  }
};

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Runtime>> Runtime::start(RuntimeOptions o) {
  if (o.rank >= o.program.ranks.size())
    return make_error("runtime", fmt::format("rank {} is not in the policy ({} ranks)", o.rank, o.program.ranks.size()));
  if (o.program.default_clock_mhz <= 0) return make_error("runtime", "the policy has no default clock");
  if (!o.dry_run && o.clock == nullptr)
    return make_error("runtime", "no clock control", "give a ClockControl (NVML, emo clockd) or ask for a dry run");
  if (o.phases.block_steps <= 0)
    o.phases.block_steps = auto_block_steps(o.program.predicted_step_ns, 25 * o.energy_update_ms * 1e6);
  auto impl = std::make_unique<Impl>(std::move(o));
  impl->report.block_steps = impl->o.phases.block_steps;
  impl->report.realtime_minus_steady_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count() -
      now_ns();
  if (impl->o.energy_j) impl->monitor.expect_gpus(1);
  Impl* raw = impl.get();
  raw->thread = std::thread([raw] { raw->run(); });
  if (raw->o.energy_j) raw->meter_thread = std::thread([raw] { raw->meter(); });
  return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

Runtime::~Runtime() {
  if (impl_ && !impl_->stopped) {
    auto r = stop();
    if (!r) std::fprintf(stderr, "error: emo runtime: %s\n", r.error().message().c_str());
  }
}

void Runtime::step_begin() {
  Impl& m = *impl_;
  if (m.o.launch != nullptr) {
    {
      std::lock_guard<std::mutex> lk(m.mu);
      ++m.launched;
    }
    if (m.o.launch(m.o.stream, &Impl::on_gpu, &m) == 0) return;
    std::lock_guard<std::mutex> lk(m.mu);
    --m.launched;
  }
  m.post(now_ns());
}

void Runtime::step_end() {}

Result<RuntimeReport> Runtime::stop() {
  Impl& m = *impl_;
  if (m.stopped) return make_error("runtime", "already stopped");
  {
    // Host functions still in the stream call back into this object: wait for them (the GPU
    // finishing its queue), and if it does not within 30 s, keep the object alive for good.
    std::unique_lock<std::mutex> lk(m.mu);
    const bool drained = m.cv.wait_for(lk, std::chrono::seconds(30), [&] { return m.gpu_reached >= m.launched; });
    if (!drained) {
      (void)impl_.release();  // deliberately leaked: the stream may still run its host functions
      m.say("warning: emo runtime: the GPU did not reach the last step anchors within 30 s; the runtime's "
            "state is kept alive for them");
    }
    m.stopping = true;
  }
  m.cv.notify_all();
  if (m.thread.joinable()) m.thread.join();
  if (m.meter_thread.joinable()) m.meter_thread.join();
  m.stopped = true;
  m.report.measured = m.monitor.report();
  m.report.steps.assign(m.monitor.steps().begin(), m.monitor.steps().end());
  m.report.steps_seen = m.monitor.steps_seen();
  m.report.skipped_redundant = m.controller.skipped_redundant();
  m.report.skipped_superseded = m.controller.skipped_superseded();
  if (!m.o.dry_run && m.o.clock != nullptr) {
    Status st = m.o.clock->reset_sm_clock();
    if (!st.ok()) st = m.o.clock->reset_sm_clock();
    if (!st.ok()) {
      return make_error(m.o.clock->describe(), "the SM clock could not be reset: " + st.error().message(),
                        "reset it by hand (`nvidia-smi -rgc`, as root) or through emo clockd");
    }
  }
  return m.report;
}

RuntimeReport Runtime::snapshot() const {
  const Impl& m = *impl_;
  std::lock_guard<std::mutex> lk(m.state_mu);
  RuntimeReport r = m.report;
  r.measured = m.monitor.report();
  r.steps.assign(m.monitor.steps().begin(), m.monitor.steps().end());
  r.steps_seen = m.monitor.steps_seen();
  r.skipped_redundant = m.controller.skipped_redundant();
  r.skipped_superseded = m.controller.skipped_superseded();
  return r;
}

nlohmann::json runtime_report_json(const RuntimeReport& r, bool with_issues) {
  using nlohmann::json;
  json j;
  j["measured"] = measured_json(r.measured);
  j["block_steps"] = r.block_steps;
  j["steps"] = r.steps_seen;
  json fb = json::array();
  for (const auto& f : r.fallbacks)
    fb.push_back({{"step", f.step}, {"slowdown_pct", f.slowdown_pct}, {"slowdown_se_pct", f.slowdown_se_pct}, {"reason", f.reason}});
  j["fallbacks"] = fb;
  j["clock_changes"] = {{"calls", r.calls},
                        {"skipped_redundant", r.skipped_redundant},
                        {"skipped_superseded", r.skipped_superseded}};
  json errs = json::array();
  for (const auto& e : r.errors) errs.push_back(e.message());
  j["errors"] = errs;
  if (with_issues) {
    json is = json::array();
    for (const auto& x : r.issues) {
      is.push_back({{"step", x.step}, {"pack", x.pack}, {"clock_mhz", x.clock_mhz},
                    {"due_us", double(x.due_ns - x.anchor_ns) / 1e3}, {"late_us", double(x.at_ns - x.due_ns) / 1e3},
                    {"call_us", double(x.returned_ns - x.at_ns) / 1e3}, {"ok", x.ok}});
    }
    j["issues"] = is;
    // Each step's anchor on the realtime clock (Kineto's), the last kept steps.
    json anchors = json::array();
    for (const auto& st : r.steps) anchors.push_back({{"step", st.step}, {"anchor_realtime_ns", st.anchor_ns + r.realtime_minus_steady_ns}});
    j["anchors"] = anchors;
    json abs = json::array();
    for (const auto& x : r.issues) abs.push_back(x.at_ns + r.realtime_minus_steady_ns);
    j["issue_realtime_ns"] = abs;
  }
  return j;
}

}  // namespace emo::runtime
