// The runtime's cost on the job's thread (issue goal: < 20 µs per step, nothing per kernel): one
// step_begin() + step_end() pair with the controller thread live, the anchor taken on the CPU and
// through a host-function launch like cuLaunchHostFunc's (a stand-in that runs the function on
// another thread, as the CUDA driver does), in a dry run (no clock calls). The reference in the same
// process is a std::mutex lock/unlock pair plus a condition-variable notify — the least a hand-off to
// another thread costs — so the ratio is what the runtime adds over the minimum.
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "emo/runtime/runtime.h"

namespace {

using emo::runtime::Change;
using emo::runtime::Runtime;
using emo::runtime::RuntimeOptions;

RuntimeOptions dry_run(int changes) {
  RuntimeOptions o;
  o.program.default_clock_mhz = 1980;
  o.program.max_slowdown = 0.05;
  o.program.ranks.assign(1, {});
  for (int i = 0; i < changes; ++i) o.program.ranks[0].push_back(Change{int64_t(i) * 1000, i % 2 == 0 ? 1200 : 1500, uint32_t(i)});
  o.dry_run = true;
  o.phases = {64, false, 1, 0};
  o.log_to_stderr = false;
  return o;
}

// One step_begin() + step_end() pair per iteration, the controller thread live.
void time_steps(benchmark::State& state, RuntimeOptions o) {
  auto rt = Runtime::start(std::move(o));
  if (!rt) {
    state.SkipWithError(rt.error().message().c_str());
    return;
  }
  for (auto _ : state) {
    (*rt)->step_begin();
    (*rt)->step_end();
  }
  (void)(*rt)->stop();
}

void BM_HandOffReference(benchmark::State& state) {
  std::mutex mu;
  std::condition_variable cv;
  int posted = 0;
  for (auto _ : state) {
    {
      std::lock_guard<std::mutex> lk(mu);
      ++posted;
    }
    cv.notify_one();
  }
  benchmark::DoNotOptimize(posted);
}
BENCHMARK(BM_HandOffReference);

void BM_StepCpuAnchor(benchmark::State& state) {
  time_steps(state, dry_run(int(state.range(0))));
}
BENCHMARK(BM_StepCpuAnchor)->Arg(8)->Arg(64);

// A host-function launch as the driver does it: queued to a driver thread that runs it later.
struct FakeDriver {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<void (*)(void*), void*>> q;
  bool stop = false;
  std::thread th{[this] {
    std::unique_lock<std::mutex> lk(mu);
    while (!stop || !q.empty()) {
      cv.wait(lk, [&] { return stop || !q.empty(); });
      auto items = std::move(q);
      q.clear();
      lk.unlock();
      for (auto& [fn, data] : items) fn(data);
      lk.lock();
    }
  }};
  ~FakeDriver() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv.notify_one();
    th.join();
  }
};
FakeDriver* g_driver = nullptr;

void BM_StepGpuAnchor(benchmark::State& state) {
  FakeDriver driver;
  g_driver = &driver;
  RuntimeOptions o = dry_run(8);
  o.launch = [](void*, void (*fn)(void*), void* data) {
    {
      std::lock_guard<std::mutex> lk(g_driver->mu);
      g_driver->q.emplace_back(fn, data);
    }
    g_driver->cv.notify_one();
    return 0;
  };
  time_steps(state, std::move(o));
}
BENCHMARK(BM_StepGpuAnchor);

}  // namespace

BENCHMARK_MAIN();
