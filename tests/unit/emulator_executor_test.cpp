// The emulated GPU times its steps with the independent executor (emo/executor): a kernel slowed by
// a low clock delays what waits for it — an op on another stream through an event, the CPU in a
// blocking cudaDeviceSynchronize, a peer rank's collective — by exactly the executor's rules, with
// each op's duration from the hidden truth at the clock in effect. Hand-made traces, times in µs;
// the expected step is worked out in each test's comment.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../../src/emulator/truth.h"
#include "emo/device/profile.h"
#include "emo/emulator/emulator.h"
#include "emo/executor/executor.h"
#include "trace_json.h"

namespace emo::emulator {
namespace {

using test::ranks_of;
using test::TraceJson;

constexpr uint64_t kSeed = 5;

const device::DeviceProfile& h100() {
  static const device::DeviceProfile p = *device::builtin_profile("h100");
  return p;
}

// The time ratio the emulated GPU (seed kSeed) gives a kernel at clock f, as its run does.
double ratio(std::string_view kernel, double f_mhz, bool collective = false) {
  const detail::GpuTruth g = detail::make_gpu_truth(h100(), kSeed);
  detail::KernelTruth k = collective ? detail::make_kernel_truth("nccl", kSeed ^ detail::mix64(detail::hash_name(kernel)))
                                     : detail::make_kernel_truth(kernel, kSeed);
  g.set_throttle(k);
  return g.time_ratio(k, f_mhz);
}

int64_t ns(double us, double r) { return std::llround(us * 1000.0 * r); }

// An emitted trace's event by name: its start and end in ns on the trace's own clock.
struct Span {
  int64_t ts = -1, te = -1;
};
Span span_of(const std::string& json, const std::string& name) {
  auto t = trace::parse_trace(json, "emulated.json");
  EXPECT_TRUE(t.ok());
  if (!t.ok()) return {};
  for (const auto& e : t->events) {
    if (t->name_of(e) == name) return {e.ts_ns, e.ts_ns + e.dur_ns};
  }
  ADD_FAILURE() << name << " not in the emulated trace";
  return {};
}

RunOptions exact() {
  RunOptions o;
  o.jitter = 0;
  o.energy_log = false;
  return o;
}

// Stream 7 runs gemm_A [10,210]; cudaEventRecord [6,8] captures it, cudaStreamWaitEvent [9,11] makes
// stream 20's next op wait for it: elementwise_B, launched at 12, starts 1 µs after A ends [211,261].
// cudaDeviceSynchronize [18,264] wakes 3 µs after B; `post` [264,284] ends the step.
// Under the executor at clocks giving A and B the time ratios rA, rB: A ends at 10 + 200·rA, B starts
// 1 µs later (the event wait binds with its measured gap) and runs 50·rB, the sync returns 3 µs after
// B, post runs its measured 20: the step is 34 + 200·rA + 50·rB.
std::string event_wait_and_device_sync() {
  return TraceJson()
      .launch("sm90_xmma_gemm_A", 7, 0, 10, 200, 1)
      .runtime("cudaEventRecord", 6, 2, 2)
      .runtime("cudaStreamWaitEvent", 9, 2, 3)
      .launch("vectorized_elementwise_B", 20, 12, 211, 50, 4)
      .runtime("cudaDeviceSynchronize", 18, 246, 5)
      .cpu("post", 264, 20)
      .str();
}

TEST(EmulatorExecutor, ALowClockDelaysTheEventWaitAndTheDeviceSync) {
  const auto ranks = ranks_of({event_wait_and_device_sync()});
  RunOptions o = exact();
  for (int f : {1980, 1200, 705}) {
    SCOPED_TRACE(f);
    auto run = EmulatedGpu(h100(), kSeed).run(ranks, ClockSchedule::locked(f), o);
    ASSERT_TRUE(run.ok()) << run.error().message();
    const int64_t a = ns(200, ratio("sm90_xmma_gemm_A", f)), b = ns(50, ratio("vectorized_elementwise_B", f));
    ASSERT_EQ(run->step_ns.size(), 1u);
    EXPECT_EQ(run->step_ns[0], 34'000 + a + b);
    const std::string& json = run->ranks[0].trace_json;
    const Span sa = span_of(json, "sm90_xmma_gemm_A"), sb = span_of(json, "vectorized_elementwise_B");
    const Span sync = span_of(json, "cudaDeviceSynchronize"), post = span_of(json, "post");
    const int64_t t0 = sa.ts - 10'000;  // the step's start on the emitted trace's clock
    EXPECT_EQ(sa.te - sa.ts, a);
    EXPECT_EQ(sb.ts, sa.te + 1'000);  // waits for A on the other stream
    EXPECT_EQ(sb.te - sb.ts, b);
    EXPECT_EQ(sync.ts, t0 + 18'000);  // the CPU's time stays as measured ...
    EXPECT_EQ(sync.te, sb.te + 3'000);  // ... and the sync returns its wake-up after B
    EXPECT_EQ(post.te - post.ts, 20'000);
  }
  // The gemm slows more than the elementwise kernel: the lower clock costs more than the stream's sum.
  EXPECT_GT(ratio("sm90_xmma_gemm_A", 990), 1.5);
}

// Two ranks, one allreduce. Rank 0: elementwise_P [10,100], its NCCL kernel arrives at 101; rank 1:
// gemm_Q [10,300], arrives at 301; both end at 360 (transfer 59). Rank 1's GPU locked low (the change
// issued long before the run: in effect throughout) and rank 0's at the top clock: rank 1 arrives at
// 11 + 290·rQ(low), the transfer runs at the slower GPU's clock, 59·rN(low), and rank 0's kernel waits
// for it from its own arrival.
std::vector<std::string> two_rank_allreduce() {
  const std::string nccl = R"("Collective name":"allreduce","Process Group Name":"0","Seq":0,"Group size":2)";
  return {TraceJson(0, 2)
              .launch("vectorized_elementwise_P", 7, 0, 10, 90, 1)
              .launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 7, 5, 101, 259, 2, 1, nccl)
              .str(),
          TraceJson(1, 2)
              .launch("sm90_xmma_gemm_Q", 7, 0, 10, 290, 1)
              .launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 7, 5, 301, 59, 2, 1, nccl)
              .str()};
}

TEST(EmulatorExecutor, ACollectiveWaitsForItsSlowestPeerAndTransfersAtItsClock) {
  const auto ranks = ranks_of(two_rank_allreduce());
  const std::string coll = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
  for (int low : {1980, 990}) {
    SCOPED_TRACE(low);
    ClockSchedule s;
    s.initial_mhz = 1980;
    s.ranks = {{}, {{-10'000'000'000, low}}};
    auto run = EmulatedGpu(h100(), kSeed).run(ranks, s, exact());
    ASSERT_TRUE(run.ok()) << run.error().message();
    const int64_t q = ns(290, ratio("sm90_xmma_gemm_Q", low)), transfer = ns(59, ratio(coll, low, true));
    EXPECT_EQ(run->step_ns[0], 11'000 + q + transfer);
    const Span c0 = span_of(run->ranks[0].trace_json, coll), c1 = span_of(run->ranks[1].trace_json, coll);
    const Span p = span_of(run->ranks[0].trace_json, "vectorized_elementwise_P");
    EXPECT_EQ(c0.ts, p.te + 1'000);  // rank 0 arrives on time ...
    EXPECT_EQ(c0.te, c1.te);         // ... and ends with the slow rank's transfer
    EXPECT_EQ(c1.te - c1.ts, transfer);
    EXPECT_EQ(c1.ts - p.ts, 1'000 + q);  // rank 1 arrives after its slowed gemm (both started at 10)
  }
}

// One stream, gemm K1 [10,210000] (200 ms) then K2 queued behind it [210001,410001]. A change to a
// low clock issued at the step's start lands after the switching latency (tens of ms), within K1: K1
// runs its remaining work at the new rate, K2 wholly at it.
TEST(EmulatorExecutor, AClockChangeLandsMidKernel) {
  const auto ranks = ranks_of({TraceJson()
                                   .launch("sm90_xmma_gemm_K1", 7, 0, 10, 200'000, 1)
                                   .launch("sm90_xmma_gemm_K2", 7, 6, 200'011, 200'000, 2)
                                   .str()});
  ClockSchedule s;
  s.initial_mhz = 1980;
  s.ranks = {{{0, 990}}};
  auto run = EmulatedGpu(h100(), kSeed).run(ranks, s, exact());
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(run->ranks[0].clock_changes, 1);
  const double hi = ratio("sm90_xmma_gemm_K1", 1980), lo = ratio("sm90_xmma_gemm_K1", 990);
  const Span k1 = span_of(run->ranks[0].trace_json, "sm90_xmma_gemm_K1");
  const Span k2 = span_of(run->ranks[0].trace_json, "sm90_xmma_gemm_K2");
  const double d1 = double(k1.te - k1.ts), work = 200e6;
  EXPECT_GT(d1, work * hi + 1e6);
  EXPECT_LT(d1, work * lo - 1e6);
  // d1 = x + (work − x/hi)·lo, x the time K1 ran at the old clock: the change landed x into K1,
  // within the profile's switching latency.
  const double x = (work * lo - d1) / (lo / hi - 1);
  EXPECT_GT(x, 0.2 * h100().switch_latency_median_ms.value * 1e6);
  EXPECT_LT(x, 3 * h100().switch_latency_p99_ms.value * 1e6);
  EXPECT_NEAR(double(k2.te - k2.ts), work * ratio("sm90_xmma_gemm_K2", 990), 1.0);
  EXPECT_EQ(k2.ts, k1.te + 1'000);
}

// The run's steps are the executor's: at the clock that slows nothing it reproduces the executor's
// step (and so the measured one), step after step back to back.
TEST(EmulatorExecutor, StepsRunBackToBackAsTheExecutorRunsThem) {
  const auto ranks = ranks_of({event_wait_and_device_sync()});
  auto ex = executor::execute(ranks);
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->span_ns, 284'000);
  RunOptions o = exact();
  o.steps = 3;
  o.trace_steps = 2;
  auto run = EmulatedGpu(h100(), kSeed).run(ranks, ClockSchedule::locked(1980), o);
  ASSERT_TRUE(run.ok());
  const int64_t step = 34'000 + ns(200, ratio("sm90_xmma_gemm_A", 1980)) + ns(50, ratio("vectorized_elementwise_B", 1980));
  EXPECT_EQ(run->step_ns, (std::vector<int64_t>{step, step, step}));
  EXPECT_EQ(run->end_ns, 3 * step);
  // The two traced steps: the second's A starts one step after the first's.
  auto t = trace::parse_trace(run->ranks[0].trace_json, "emulated.json");
  ASSERT_TRUE(t.ok());
  std::vector<int64_t> a;
  for (const auto& e : t->events) {
    if (t->name_of(e) == "sm90_xmma_gemm_A") a.push_back(e.ts_ns);
  }
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1] - a[0], step);
}

}  // namespace
}  // namespace emo::emulator
