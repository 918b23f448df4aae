// A loop whose GPU runs behind its host (docs/replay.md): the step's GPU op waits on the step before's,
// still queued on the GPU, and the step is the loop's period, max(host span, end - the queued op's start).
// Times in µs. ProfilerStep#1 [0,1000] launches K1 at 10 (it runs [20,1520]); #2 [1000,2000] launches K2
// at 1010, which waits for K1 and runs [1520,3020]: the host's period 1000, the GPU's 1500.
#include <gtest/gtest.h>

#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/backends/profiling.h"
#include "emo/device/profile.h"
#include "emo/emulator/emulator.h"
#include "emo/executor/executor.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"
#include "emo/replay/replay.h"
#include "test_util.h"
#include "trace_json.h"

namespace emo {
namespace {

using test::TraceJson;

// Three host steps of 500 µs each launching a 1,500 µs kernel: the GPU runs two steps behind its host when
// the last one launches K3 at 1010 (it starts at 3020, after K1 [20,1520] and K2 [1520,3020]).
std::string three_short_steps() {
  return TraceJson()
      .step(1, 0, 500)
      .launch("K1", 7, 10, 20, 1500, 1)
      .step(2, 500, 500)
      .launch("K2", 7, 510, 1520, 1500, 2)
      .step(3, 1000, 500)
      .launch("K3", 7, 1010, 3020, 1500, 3)
      .str();
}

std::string two_steps() {
  return TraceJson()
      .step(1, 0, 1000)
      .launch("K1", 7, 10, 20, 1500, 1)
      .step(2, 1000, 1000)
      .launch("K2", 7, 1010, 1520, 1500, 2)
      .str();
}

// The step's span as analyze measures it and as the executor measures and runs it, and whether the
// executor takes it for a loop of overlapping steps.
void expect_step(const analysis::Workload& w, bool pipelined, int64_t span_ns) {
  EXPECT_EQ(analysis::analyze(w).measured_span_ns, span_ns);
  auto ex = executor::execute(w.ranks);
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  EXPECT_EQ(ex->pipelined, pipelined);
  EXPECT_EQ(ex->measured_span_ns, span_ns);
  EXPECT_EQ(ex->span_ns, span_ns);
}

TEST(GpuPeriod, AStepQueuedBehindTheOneBeforeIsTheLoopsPeriod) {
  const analysis::Workload w = test::workload_of({two_steps()});
  ASSERT_FALSE(w.ranks.empty());
  const graph::Graph& g = w.graph;
  ASSERT_EQ(g.queued_ops.size(), 1u);
  EXPECT_EQ(g.strings.view(g.name[g.queued_ops[0]]), "K2");
  // K1's time in step 2 (from its start at 1,000 to its end at 1,520), kept by select_step and handed on
  // by an MPI process as it is.
  const std::vector<trace::PriorGpuBusy>& prior = w.ranks[0].prior_gpu_busy;
  ASSERT_EQ(prior.size(), 1u);
  EXPECT_EQ(prior[0].end_ns - prior[0].begin_ns, 520'000);
  auto back = trace::from_wire(trace::to_wire(w.ranks[0]));
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_EQ(back->prior_gpu_busy.size(), 1u);
  EXPECT_EQ(back->prior_gpu_busy[0].device, prior[0].device);
  EXPECT_EQ(back->prior_gpu_busy[0].stream, 7);
  EXPECT_EQ(back->prior_gpu_busy[0].begin_ns, prior[0].begin_ns);
  EXPECT_EQ(back->prior_gpu_busy[0].end_ns, prior[0].end_ns);
  const analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(a.measured_span_ns, 1'500'000);  // the GPU's period, not the host's start to K2's end (2,020)
  EXPECT_EQ(a.replayed_span_ns, 1'500'000);
  EXPECT_EQ(analysis::late_gpu_starts(w, a).ops, 0);  // its wait is the step before's work, not unrecorded

  // K2 twice as long: the period doubles; halved: the host's 1,000 bound it.
  replay::Replayer rp(g);
  std::vector<int64_t> dur = g.dur_ns;
  replay::Timeline base, tl;
  rp.run(base);
  for (int64_t f : {2, 0}) {
    dur = g.dur_ns;
    for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
      if (graph::is_gpu(g.kind[n])) dur[n] = f == 2 ? 2 * g.dur_ns[n] : g.dur_ns[n] / 2;
    }
    rp.run(dur, tl);
    EXPECT_EQ(tl.makespan_ns(), f == 2 ? 3'000'000 : 1'000'000) << f;
    // The Rereplayer gives run()'s answer.
    replay::Timeline re = base;
    replay::Rereplayer(g).update(g.dur_ns, dur, re);
    EXPECT_EQ(re.makespan_ns(), tl.makespan_ns()) << f;
    EXPECT_EQ(re.t_ns, tl.t_ns) << f;
  }
}

TEST(GpuPeriod, TheExecutorRunsTheSameStepAsTheLoopsPeriod) {
  const analysis::Workload w = test::workload_of({two_steps()});
  ASSERT_FALSE(w.ranks.empty());
  auto p = executor::Program::compile(w.ranks);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->pipelined());
  ASSERT_TRUE(p->run([&](uint32_t i, int64_t) { return p->gpu_ops()[i].dur_ns; }).ok());
  EXPECT_EQ(p->period_ns(), 1'500'000);
  ASSERT_TRUE(p->run([&](uint32_t i, int64_t) { return 2 * p->gpu_ops()[i].dur_ns; }).ok());
  EXPECT_EQ(p->period_ns(), 3'000'000);

  // execute() (emo-execute) reports the same period, measured and executed, and its what-ifs move it.
  auto ex = executor::execute(w.ranks);
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  EXPECT_TRUE(ex->pipelined);
  // The queued op's 510 µs wait is the earlier step's work, not its launch latency: a typical launch
  // latency that long would pin every op to its launch plus its measured delay.
  ASSERT_EQ(ex->stats.launch_latency_ns.size(), 1u);
  EXPECT_LT(ex->stats.launch_latency_ns[0], 100'000);
  EXPECT_EQ(ex->measured_span_ns, 1'500'000);
  EXPECT_EQ(ex->span_ns, 1'500'000);
  executor::Scenario slow;
  ASSERT_TRUE(executor::parse_scale("stream:7=2", slow).ok());
  auto doubled = executor::execute(w.ranks, slow);
  ASSERT_TRUE(doubled.ok()) << doubled.error().message();
  EXPECT_EQ(doubled->span_ns, 3'000'000);
  EXPECT_EQ(doubled->measured_span_ns, 1'500'000);
  executor::Scenario fast;
  ASSERT_TRUE(executor::parse_scale("stream:7=0.5", fast).ok());
  auto halved = executor::execute(w.ranks, fast);
  ASSERT_TRUE(halved.ok()) << halved.error().message();
  EXPECT_EQ(halved->span_ns, 1'000'000);  // the host's period bounds it
}

// Four steps of the loop on an emulated H100 (no jitter), the last `trace_steps` traced.
Result<emulator::RunResult> emulate(const analysis::Workload& w, int trace_steps,
                                    const emulator::ClockSchedule& schedule = {}) {
  const emulator::EmulatedGpu gpu(*device::builtin_profile("h100"), 5);
  emulator::RunOptions o;
  o.steps = 4;
  o.trace_steps = trace_steps;
  o.jitter = 0;
  return gpu.run(w.ranks, schedule, o);
}

// The emulated GPU runs such a loop in its steady state: as many unmeasured steps first as its GPU lags
// periods, so that every measured step (the first too) is the period and spends the same energy; its traces
// hold those steps before the traced one, so that they read back as the same loop (the profiled runs'
// digest sees the queue too).
TEST(GpuPeriod, TheEmulatorRunsTheLoopInItsSteadyState) {
  // One step behind (the GPU's lag under a period), and two (a GPU 2,020 µs behind a 500 µs host step).
  for (const std::string& json : {two_steps(), three_short_steps()}) {
    const analysis::Workload w = test::workload_of({json});
    ASSERT_FALSE(w.ranks.empty());
    ASSERT_EQ(w.graph.queued_ops.size(), 1u);
    EXPECT_EQ(analysis::analyze(w).measured_span_ns, 1'500'000);
    auto run = emulate(w, 1);
    ASSERT_TRUE(run.ok()) << run.error().what;
    ASSERT_EQ(run->step_ns.size(), 4u);
    ASSERT_EQ(run->step_energy_j.size(), 4u);
    double sum = 0;
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_NEAR(double(run->step_ns[i]), 1.5e6, 0.01 * 1.5e6) << i;  // the GPU's period, the first step too
      EXPECT_NEAR(run->step_energy_j[i], run->step_energy_j[3], 0.01 * run->step_energy_j[3]) << i;
      sum += run->step_energy_j[i];
    }
    EXPECT_NEAR(sum, run->energy_j, 1e-9 * run->energy_j);
    // A step's energy is its GPU busy for the period: between idle and TDP power for 1.5 ms.
    const device::DeviceProfile p = *device::builtin_profile("h100");
    EXPECT_GT(run->step_energy_j[3], p.idle_power_w.value * 1.5e-3);
    EXPECT_LT(run->step_energy_j[3], p.tdp_w.value * 1.5e-3);

    // At a lower clock the period grows, and the trace reads back as a queued loop of that period.
    auto slow = emulate(w, 1, emulator::ClockSchedule::locked(990));
    ASSERT_TRUE(slow.ok()) << slow.error().what;
    EXPECT_GT(slow->step_ns.back(), run->step_ns.back() * 11 / 10);
    const analysis::Workload back = test::workload_of({slow->ranks[0].trace_json});
    ASSERT_FALSE(back.ranks.empty());
    EXPECT_EQ(back.graph.queued_ops.size(), 1u);
    const analysis::Analysis a = analysis::analyze(back);
    EXPECT_NEAR(double(a.measured_span_ns), double(slow->step_ns.back()), 0.01 * double(slow->step_ns.back()));
    EXPECT_NEAR(double(a.replayed_span_ns), double(slow->step_ns.back()), 0.01 * double(slow->step_ns.back()));
  }
}

// The energy counter of such a run reads the measured steps alone: the fit takes its mean power for the
// loop's (its warm-up step begins on an idle GPU, 51 ms of a 150 ms period here, that the loop never sees).
TEST(GpuPeriod, TheEmulatorsEnergyCounterReadsTheSteadyState) {
  const analysis::Workload w = test::workload_of({TraceJson()
                                                      .step(1, 0, 100'000)
                                                      .launch("K1", 7, 1'000, 2'000, 150'000, 1)
                                                      .step(2, 100'000, 100'000)
                                                      .launch("K2", 7, 101'000, 152'000, 150'000, 2)
                                                      .str()});
  ASSERT_FALSE(w.ranks.empty());
  ASSERT_EQ(w.graph.queued_ops.size(), 1u);
  auto run = emulate(w, 0);
  ASSERT_TRUE(run.ok()) << run.error().what;
  const auto& log = run->ranks[0].energy;
  ASSERT_GT(log.size(), 10u);
  const double watts = double(log.back().energy_mj - log.front().energy_mj) * 1e-3 /
                       (double(log.back().t_ns - log.front().t_ns) * 1e-9);
  const double step_j = run->step_energy_j.back();
  EXPECT_NEAR(watts * double(run->step_ns.back()) * 1e-9, step_j, 0.01 * step_j);
}

// A stream that the step before still holds, on a GPU mostly idle meanwhile (its work waits on something
// else: peers, another stream): K1b of step 1 runs [1400,1500] on stream 7, and step 2's K2, launched at
// 1010, starts as it ends. Queued all the same; the host's 1,000 µs bound the period.
TEST(GpuPeriod, AStreamTheStepBeforeHoldsQueuesTheOpOnIt) {
  const analysis::Workload w = test::workload_of({TraceJson()
                                                      .step(1, 0, 1000)
                                                      .launch("K1a", 7, 10, 20, 100, 1)
                                                      .launch("K1b", 7, 15, 1400, 100, 2)
                                                      .step(2, 1000, 1000)
                                                      .launch("K2", 7, 1010, 1500, 100, 3)
                                                      .str()});
  ASSERT_FALSE(w.ranks.empty());
  ASSERT_EQ(w.graph.queued_ops.size(), 1u);
  const analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(a.measured_span_ns, 1'000'000);
  EXPECT_EQ(a.replayed_span_ns, 1'000'000);
  EXPECT_EQ(analysis::late_gpu_starts(w, a).ops, 0);
  expect_step(w, true, 1'000'000);
}

// The same loop from a trace whose GPU ops carry no args.stream: the reader takes their tid for it, and the
// graph and the executor both key the step before's work by that stream and find the queue.
TEST(GpuPeriod, OpsWithoutAStreamIdAreQueuedAlike) {
  const auto kernel = [](const char* name, double ts, double dur, long corr) {
    return fmt::format(
        R"({{"ph":"X","cat":"kernel","name":"{}","pid":0,"tid":7,"ts":{},"dur":{},"args":{{"device":0,"correlation":{},"External id":{}}}}})",
        name, ts, dur, corr, corr);
  };
  const analysis::Workload w = test::workload_of({TraceJson()
                                                      .step(1, 0, 1000)
                                                      .runtime("cudaLaunchKernel", 10, 5, 1)
                                                      .raw(kernel("K1a", 20, 100, 1))
                                                      .runtime("cudaLaunchKernel", 15, 5, 2)
                                                      .raw(kernel("K1b", 1400, 100, 2))
                                                      .step(2, 1000, 1000)
                                                      .runtime("cudaLaunchKernel", 1010, 5, 3)
                                                      .raw(kernel("K2", 1500, 100, 3))
                                                      .str()});
  ASSERT_FALSE(w.ranks.empty());
  ASSERT_EQ(w.graph.queued_ops.size(), 1u);
  expect_step(w, true, 1'000'000);
}

// Which earlier work holds an op (trace::waited_on_prior_work; µs): an op bound at 0 that starts at 10,000.
TEST(GpuPeriod, OnlyItsOwnStreamsEarlierWorkHoldsAnOp) {
  using trace::PriorGpuBusy;
  const auto held = [](std::vector<PriorGpuBusy> busy, int64_t start_us = 10'000) {
    for (PriorGpuBusy& b : busy) b.begin_ns *= 1000, b.end_ns *= 1000;
    return trace::waited_on_prior_work(busy, 0, 7, 0, start_us * 1000);
  };
  EXPECT_TRUE(held({{0, 7, 9'000, 9'990}}));                  // its stream's work ends as it starts
  EXPECT_TRUE(held({{0, 7, 9'000, 9'500}}));                  // 500 µs before: 5 % of the wait
  EXPECT_FALSE(held({{0, 7, 9'000, 9'400}}));                 // 600 µs before, and it ran 9 % of the wait
  EXPECT_TRUE(held({{0, 7, 9'000, 10'300}}));                 // 300 µs after it starts (clocks, rounding)
  EXPECT_FALSE(held({{0, 7, 9'000, 10'600}}));                // 600 µs after: no queue held it
  EXPECT_TRUE(held({{0, 7, 0, 4'000}, {0, 7, 4'050, 9'100}}));  // it ran 90.5 % of the wait
  EXPECT_FALSE(held({{0, 3, 0, 9'999}}));                     // another stream's work: side by side
  EXPECT_FALSE(held({{1, 7, 0, 9'999}}));                     // another GPU's
  EXPECT_FALSE(held({{0, 7, 0, 150}}, 150));                  // a wait under 200 µs is no queue
}

// HTA's negative_queue_length_values_check rank 0 (A100): ProfilerStep#554's copy on its compute stream
// starts 155 ms after its launch, as the step before's work on that stream ends; the step is the host's
// 216 ms. The emulated loop keeps the copy's recorded wait, while the step before's work on its stream
// (this step's, a period earlier) ends 3.7 ms sooner: the recorded loop's steps differ by that much
// (2.4 % of the wait). Its traced step reads back as the same queued loop of that period at the default
// clock and at one that makes the GPU the loop's bound (the profiled runs' digest takes that step, not
// the 374 ms from host start to GPU end).
TEST(GpuPeriod, AnEmulatedLoopOfARealStreamQueueReadsBackAsItsPeriod) {
  EMO_REQUIRE_SHARED(path, "traces/hta/tests/data/negative_queue_length_values_check/rank0.json.gz");
  const analysis::Workload w = test::workload_of_files({path});
  ASSERT_FALSE(w.ranks.empty());
  ASSERT_EQ(w.graph.queued_ops.size(), 1u);
  const analysis::Analysis a = analysis::analyze(w);
  EXPECT_NEAR(double(a.measured_span_ns), 216.2e6, 0.1e6);
  // As a profiling run at each clock on emulated:h100@4 (its seed, jitter): at 1575 MHz the step before's
  // work on the stream ends 3.5 µs after the copy starts (the steps' jitter).
  const emulator::EmulatedGpu gpu(*device::builtin_profile("h100"), 4);
  for (int clock : {0, 1320, 1575, 1680}) {
    emulator::RunOptions o;
    o.steps = 4;
    o.trace_steps = 1;
    o.seed = uint64_t(clock) * 7919u + 1;
    auto run = gpu.run(w.ranks, clock ? emulator::ClockSchedule::locked(clock) : emulator::ClockSchedule{}, o);
    ASSERT_TRUE(run.ok()) << run.error().what;
    const double step = double(run->step_ns.back());
    const analysis::Workload back = test::workload_of({run->ranks[0].trace_json});
    ASSERT_FALSE(back.ranks.empty());
    EXPECT_EQ(back.graph.queued_ops.size(), 1u) << clock;
    EXPECT_NEAR(double(analysis::analyze(back).measured_span_ns), step, 0.01 * step) << clock;
  }
}

// Without the step before's work in the file (one step recorded), the same wait is GPU work the trace
// does not show: no period is taken, and the late-start doubt says it.
TEST(GpuPeriod, AWaitTheTraceDoesNotExplainIsNoPeriod) {
  const analysis::Workload w =
      test::workload_of({TraceJson().step(2, 1000, 1000).launch("K2", 7, 1010, 1520, 1500, 2).str()});
  ASSERT_FALSE(w.ranks.empty());
  EXPECT_TRUE(w.graph.queued_ops.empty());
  const analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(a.measured_span_ns, 2'020'000);
  EXPECT_EQ(analysis::late_gpu_starts(w, a).ops, 1);
}

// A loop whose GPU tail runs free into the next step's host time (docs/replay.md): three host steps of
// 1,000 µs, each reading its data for 400 µs (12 ops), then launching Ka at +500 (it runs [+510, +900]) and Kb at
// +600 (it runs [+900, +1400]), 400 µs into the next step's host time, which launches nothing before +500.
// `host_waits`: each step after the first begins with a cudaStreamSynchronize that ends as the step
// before's Kb does (the host waits on the tail: no free loop).
// `side`: each step also launches a short kernel K0 on stream 8 at +20 (it runs [+30, +60], beside the step
// before's tail on stream 7). `x`: every span that many times longer (not the 10 µs from launch to start).
std::string free_tail_steps(int steps = 3, bool host_waits = false, bool side = false, double x = 1) {
  TraceJson t;
  for (int k = 0; k < steps; ++k) {
    const double b = 1000.0 * k * x;
    const long c = 10L * k;
    t.step(k + 1, b, 1000 * x);
    for (int i = 0; i < 12; ++i) t.cpu("data", b + (1 + 33 * i) * x, 30 * x);
    if (host_waits && k > 0) t.runtime("cudaStreamSynchronize", b + 5 * x, 395 * x, c + 9);
    // Each kernel starts 10 µs after its launch, or as the one before it on its stream ends.
    if (side) t.launch("K0", 8, b + 20 * x, b + 20 * x + 10, 30 * x, c + 3);
    t.launch("Ka", 7, b + 500 * x, b + 500 * x + 10, 390 * x, c + 1)
        .launch("Kb", 7, b + 600 * x, b + 890 * x + 10, 500 * x, c + 2);
  }
  return t.str();
}

TEST(GpuPeriod, AGpuTailThatRunsFreeIsTheLoopsPeriod) {
  const analysis::Workload w = test::workload_of({free_tail_steps()});
  ASSERT_FALSE(w.ranks.empty());
  const graph::Graph& g = w.graph;
  EXPECT_TRUE(g.queued_ops.empty());
  ASSERT_TRUE(g.gpu_tail_loop);
  EXPECT_EQ(g.stats.gpu_tail_ns, 400'000);
  EXPECT_EQ(g.measured_end_ns() - g.measured_begin_ns(), 1'400'000);  // the hull
  const analysis::Analysis a = analysis::analyze(w);
  EXPECT_EQ(a.measured_span_ns, 1'000'000);  // the host's period
  EXPECT_EQ(a.replayed_span_ns, 1'000'000);
  // The host's work is the path; the tail has slack: the stream's span (890 µs) may grow to the period.
  replay::Replayer rp(g);
  replay::Timeline base;
  rp.run(base);
  std::vector<int64_t> slack;
  rp.slack(g.dur_ns, base, slack);
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.strings.view(g.name[n]) == "Kb") {
      EXPECT_EQ(slack[n], 110'000);
    }
  }
  // Kernels x1.1: the stream's span is 979 µs, the period holds; x1.5: the stream's 1,335 µs is the period.
  for (const auto& [f, want] : std::vector<std::pair<double, int64_t>>{{1.1, 1'000'000}, {1.5, 1'335'000}}) {
    std::vector<int64_t> dur = g.dur_ns;
    for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
      if (graph::is_gpu(g.kind[n])) dur[n] = int64_t(double(g.dur_ns[n]) * f);
    }
    replay::Timeline tl;
    rp.run(dur, tl);
    EXPECT_EQ(tl.makespan_ns(), want) << f;
    replay::Timeline re = base;  // the Rereplayer gives run()'s answer
    replay::Rereplayer(g).update(g.dur_ns, dur, re);
    EXPECT_EQ(re.makespan_ns(), tl.makespan_ns()) << f;
  }
  // Kb alone x1.2 (the Rereplayer's incremental path): it ends 100 µs later, the stream's span is 990 µs.
  std::vector<int64_t> dur = g.dur_ns;
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.strings.view(g.name[n]) == "Kb") dur[n] = g.dur_ns[n] * 6 / 5;
  }
  replay::Timeline re = base;
  replay::Rereplayer(g).update(g.dur_ns, dur, re);
  EXPECT_EQ(re.makespan_ns(), 1'000'000);
  // The executor finds the same loop by the same rule and runs the same periods.
  expect_step(w, true, 1'000'000);
  executor::Scenario slow;
  ASSERT_TRUE(executor::parse_scale("stream:7=1.5", slow).ok());
  auto slowed = executor::execute(w.ranks, slow);
  ASSERT_TRUE(slowed.ok()) << slowed.error().message();
  EXPECT_EQ(slowed->span_ns, 1'335'000);
}

// No free tail: a host that waited on the step before's tail (the loop's period is then the hull's), and a
// trace of one step (nothing tells what the next step did).
TEST(GpuPeriod, ATailTheHostWaitedOnOrNoStepBeforeShowsIsTheHull) {
  for (const std::string& json : {free_tail_steps(3, true), free_tail_steps(1)}) {
    const analysis::Workload w = test::workload_of({json});
    ASSERT_FALSE(w.ranks.empty());
    EXPECT_FALSE(w.graph.gpu_tail_loop);
    expect_step(w, false, 1'400'000);
  }
}

// The rule's cases (trace::runs_free_gpu_tail; µs): a step whose host runs [0, 1000], its GPU to 1,400.
TEST(GpuPeriod, WhichTailRunsFree) {
  const auto free = [](std::vector<trace::PriorGpuBusy> prior, int64_t gpu_end = 1400,
                       std::vector<std::pair<int64_t, int64_t>> calls = {}) {
    trace::RankTrace t;
    for (trace::PriorGpuBusy& b : prior) b.begin_ns *= 1000, b.end_ns *= 1000;
    t.prior_gpu_busy = prior;
    for (const auto& [ts, dur] : calls) {
      trace::Event e;
      e.kind = trace::EventKind::kRuntime;
      e.ts_ns = ts * 1000;
      e.dur_ns = dur * 1000;
      t.events.push_back(e);
    }
    return trace::runs_free_gpu_tail(t, 0, 1'000'000, gpu_end * 1000);
  };
  EXPECT_TRUE(free({{0, 7, 0, 400}}));
  EXPECT_FALSE(free({{0, 7, 0, 400}}, 1150));              // its own tail under 200 µs
  EXPECT_FALSE(free({{0, 7, 0, 150}}));                    // the step before's ran 150 µs into it
  EXPECT_FALSE(free({}));                                  // nothing of the step before's
  EXPECT_FALSE(free({{0, 7, 0, 400}}, 1400, {{5, 400}}));  // a call that ended as it ended: the host waited
  EXPECT_FALSE(free({{0, 7, 0, 400}}, 1400, {{5, 380}}));  // 15 µs before it ended
  EXPECT_TRUE(free({{0, 7, 0, 400}}, 1400, {{5, 300}}));   // a call that ended 95 µs before
  EXPECT_TRUE(free({{0, 7, 0, 400}}, 1400, {{395, 10}}));  // one that began 5 µs before it ended

  // A kernel on stream 7 launched by a call that ends at 500 µs and started `start` µs in; `other_end`: a
  // kernel of stream 3 ends then (the wait an event wait on it).
  const auto launched = [](int64_t start, int64_t other_end = -1) {
    trace::RankTrace t;
    t.prior_gpu_busy = {{0, 7, 0, 400'000}};
    const auto add = [&](trace::EventKind kind, int32_t stream, int64_t ts, int64_t dur, int64_t corr) {
      trace::Event e;
      e.kind = kind;
      e.device = kind == trace::EventKind::kKernel ? 0 : -1;
      e.stream = stream;
      e.ts_ns = ts * 1000;
      e.dur_ns = dur * 1000;
      e.correlation = corr;
      t.events.push_back(e);
    };
    add(trace::EventKind::kRuntime, -1, 490, 10, 1);
    add(trace::EventKind::kKernel, 7, start, 1400 - start, 1);
    if (other_end >= 0) add(trace::EventKind::kKernel, 3, other_end - 100, 100, trace::kNone);
    return trace::runs_free_gpu_tail(t, 0, 1'000'000, 1'400'000);
  };
  EXPECT_TRUE(launched(650));        // 150 µs after its launch
  EXPECT_FALSE(launched(900));       // 400 µs after it, bound by nothing the trace shows
  EXPECT_TRUE(launched(900, 890));   // as another stream's kernel ended (an event wait)
  EXPECT_FALSE(launched(900, 850));  // 50 µs after it
}

// The emulated GPU runs such a loop by its period (the host's, the tail of each step in the next one's),
// every step alike; at a clock where the stream's span passes the host's, that span is the period, and its
// traces read back as the same free loop.
TEST(GpuPeriod, TheEmulatorRunsAFreeTailLoopByItsPeriod) {
  const analysis::Workload w = test::workload_of({free_tail_steps()});
  ASSERT_FALSE(w.ranks.empty());
  ASSERT_TRUE(w.graph.gpu_tail_loop);
  auto run = emulate(w, 1);
  ASSERT_TRUE(run.ok()) << run.error().what;
  ASSERT_EQ(run->step_ns.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(double(run->step_ns[i]), 1.0e6, 0.01e6) << i;
    EXPECT_NEAR(run->step_energy_j[i], run->step_energy_j[3], 0.01 * run->step_energy_j[3]) << i;
  }
  const analysis::Workload back = test::workload_of({run->ranks[0].trace_json});
  ASSERT_FALSE(back.ranks.empty());
  EXPECT_TRUE(back.graph.gpu_tail_loop);
  EXPECT_NEAR(double(analysis::analyze(back).measured_span_ns), 1.0e6, 0.01e6);
  auto slow = emulate(w, 1, emulator::ClockSchedule::locked(600));
  ASSERT_TRUE(slow.ok()) << slow.error().what;
  EXPECT_GT(slow->step_ns.back(), 1'100'000);
  const analysis::Workload slow_back = test::workload_of({slow->ranks[0].trace_json});
  ASSERT_FALSE(slow_back.ranks.empty());
  const analysis::Analysis a = analysis::analyze(slow_back);
  EXPECT_NEAR(double(a.measured_span_ns), double(slow->step_ns.back()), 0.01 * double(slow->step_ns.back()));
}

// A policy for such a loop issues no change of clock before the step before's tail on its GPU ends (400 µs
// into the step, 39 ms with the loop's spans ×100, so that packs are longer than the switching latency):
// issued at the step's start or wrapped around into the step before's end, it would run that tail at this
// step's clock. With K0 beside the tail in its own pack at the lowest clock and the rest at the highest,
// K0's change (a lowering one) is due before the step's start.
TEST(GpuPeriod, APolicyChangesNoClockUnderTheStepBeforesTail) {
  const analysis::Workload w = test::workload_of({free_tail_steps(3, false, true, 100)});
  ASSERT_TRUE(w.graph.gpu_tail_loop);
  const device::DeviceProfile profile = *device::builtin_profile("h100");
  auto p = pack::make_packs(w, analysis::analyze(w), profile);
  ASSERT_TRUE(p.ok()) << p.error().message();
  auto runs = backends::profile_plan(test::target("emulated:h100"), w, *p);
  ASSERT_TRUE(runs.ok()) << runs.error().message();
  auto m = pack::fit_pack_models(w, *p, *runs, profile);
  ASSERT_TRUE(m.ok()) << m.error().message();
  optimize::Problem pr;
  pr.workload = &w;
  pr.packing = &*p;
  pr.models = &*m;
  pr.default_clock_mhz = int(profile.default_clock_mhz.value);
  std::vector<int> clocks(p->packs.size(), profile.max_clock_mhz());
  clocks.front() = profile.min_clock_mhz();
  optimize::Solution sol;
  sol.default_plan = optimize::predict(pr, std::vector<int>(p->packs.size(), pr.default_clock_mhz), "default");
  sol.policy = optimize::predict(pr, clocks, "policy");
  auto pf = optimize::applied_policy(pr, sol, 0.05);
  ASSERT_TRUE(pf.ok()) << pf.error().message();
  ASSERT_GE(pf->packs.size(), 2u);
  ASSERT_NE(pf->packs.front().clock_mhz, pf->packs.back().clock_mhz);
  // The step before's tail ends 39.01 ms in (Kb's end less the period): K0's change is issued then, not
  // 12.9 ms (the lowering lead) before K0's start at 2.01 ms, wrapped around to 89.1 ms: under this step's
  // own tail. The next pack's (Ka's, at 50 ms) comes after it.
  EXPECT_GE(pf->packs.front().issue_at_ns, 39'000'000);
  EXPECT_LT(pf->packs.front().issue_at_ns, 50'000'000);
  EXPECT_GE(pf->packs[1].issue_at_ns, pf->packs.front().issue_at_ns);
}

}  // namespace
}  // namespace emo
