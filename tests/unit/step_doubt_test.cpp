// The doubts about a step (analysis::step_warnings, analysis::device_warnings; docs/replay.md, "When
// emo doubts a step"): missing ranks, files of no one run, launches without GPU activity, synchronize
// calls and GPU ops that wait on work the trace does not show, a replay away from the trace, a trace
// recorded on another GPU than --device. Each is said, and a step
// without them says nothing. Times in µs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "test_util.h"
#include "trace_json.h"

namespace emo {
namespace {

using test::TraceJson;

std::string one_kernel(int rank = -1, int world = -1) { return TraceJson(rank, world).launch("gemm", 7, 0, 10, 100, 1).str(); }

std::vector<std::string> warnings_of(const std::vector<std::string>& jsons) {
  const analysis::Workload w = test::workload_of(jsons);
  if (w.ranks.empty()) return {"(no workload)"};
  return analysis::step_warnings(w, analysis::analyze(w));
}

std::string on_device(std::string json, const std::string& name) {
  const std::string head = "{\"schemaVersion\":1,";
  return json.replace(0, head.size(), head + R"("deviceProperties":[{"id":0,"name":")" + name + "\"}],");
}

TEST(StepDoubt, AStepWithoutDoubtSaysNothing) {
  EXPECT_TRUE(warnings_of({one_kernel()}).empty());
  EXPECT_TRUE(warnings_of({one_kernel(0, 2), one_kernel(1, 2)}).empty());
}

TEST(StepDoubt, FewerRankFilesThanTheWorldSizeAreSaid) {
  const auto w = warnings_of({one_kernel(1, 2)});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("1 of the 2 ranks of the run (distributedInfo.world_size) given", 0), 0u) << w[0];
}

TEST(StepDoubt, ARankedFileBesideOneOfNoRunIsAnError) {
  std::vector<trace::RankTrace> ranks;
  for (const auto& [json, name] : {std::pair{one_kernel(0, 8), "dlrm0.json"}, std::pair{one_kernel(), "resnet.json"}}) {
    auto t = trace::parse_trace(json, name);
    ASSERT_TRUE(t.ok()) << t.error().message();
    ranks.push_back(std::move(t).value());
  }
  auto w = analysis::assemble(std::move(ranks), {});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().message(),
            "resnet.json: has no distributedInfo.world_size, while dlrm0.json has world_size 8: not one run");
}

TEST(StepDoubt, RanksOnDifferentGpusAreSaid) {
  const auto w = warnings_of({on_device(one_kernel(0, 2), "NVIDIA H100 80GB HBM3"), on_device(one_kernel(1, 2), "NVIDIA A100-SXM4-80GB")});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("ran on NVIDIA A100-SXM4-80GB, rank0.json on NVIDIA H100 80GB HBM3"), std::string::npos) << w[0];
}

TEST(StepDoubt, LaunchesWithoutGpuActivityAreSaidButNotMemsets) {
  const std::string lost = TraceJson().launch("gemm", 7, 0, 10, 100, 1).runtime("cudaLaunchKernel", 6, 2, 2).str();
  const auto w = warnings_of({lost});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("1 of the step's 2 launch calls have no GPU activity in the trace (at least 1 %), e.g. "
                       "cudaLaunchKernel (correlation 2)", 0),
            0u)
      << w[0];
  // CUPTI often records no activity for a memset: not a doubt.
  EXPECT_TRUE(warnings_of({TraceJson().launch("gemm", 7, 0, 10, 100, 1).runtime("cudaMemsetAsync", 6, 2, 2).str()}).empty());
}

// A step of 200 µs (ProfilerStep#1) with the job's untraced step periods in the file, as
// emo.torch.capture writes them (`value`: the raw JSON of emo_untraced_step_us).
std::string timed_step(const std::string& value) {
  std::string json = TraceJson().step(1, 0, 200).launch("gemm", 7, 10, 20, 100, 1).str();
  const std::string head = "{\"schemaVersion\":1,";
  return json.replace(0, head.size(), head + "\"emo_untraced_step_us\":" + value + ",");
}

TEST(StepDoubt, AStepTheProfilerSlowedAgainstTheJobsUntracedStepsIsSaid) {
  // 200 µs recorded, 120 µs without the profiler (the median of 110, 120, 130): +67 %.
  const auto w = warnings_of({timed_step("[110, 120.0, 130]")});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("the profiler slowed the step on 1 of 1 ranks by more than 10 % (rank0.json: 0.200 ms under "
                       "the profiler, 0.120 ms without it (the median of 3 steps emo.torch.capture timed, "
                       "emo_untraced_step_us): +67 %)",
                       0),
            0u)
      << w[0];
  // The same periods written as a string (torch.profiler's add_metadata) are read alike.
  EXPECT_EQ(warnings_of({timed_step("\"[110, 120, 130]\"")}), w);
  // Within 10 %: nothing to say.
  EXPECT_TRUE(warnings_of({timed_step("[190, 185]")}).empty());
  // Not a list of positive numbers: ignored, and said as an import stat.
  for (const char* bad : {"[120, -3]", "[120 130]", "[120,]", "{\"a\": 1}", "[\"x\"]", "\"[1, \"", "7"}) {
    auto t = trace::parse_trace(timed_step(bad), "rank0.json");
    ASSERT_TRUE(t.ok()) << t.error().message();
    EXPECT_TRUE(t->untraced_step_ns.empty()) << bad;
    bool said = false;
    for (const auto& r : t->stats.rows) said |= r.what.find("emo_untraced_step_us is not an array") != std::string::npos;
    EXPECT_TRUE(said) << bad;
  }
  auto t = trace::parse_trace(timed_step("[110, 120.5]"), "rank0.json");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->untraced_step_ns, (std::vector<int64_t>{110000, 120500}));
  auto back = trace::from_wire(trace::to_wire(*t));  // a process of an MPI run hands it on
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->untraced_step_ns, t->untraced_step_ns);
}

TEST(StepDoubt, AReplayFarFromTheTraceIsSaid) {
  // Two kernels recorded at once on one stream: the replay runs them one after the other, 210 µs
  // against the 110 measured (+90.9 %).
  const std::string both = TraceJson().launch("a", 7, 0, 10, 100, 1).launch("b", 7, 5, 10, 100, 2).str();
  const auto w = warnings_of({both});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("the replay of the step takes +90.9 % the time the trace measured (more than 5 % off)", 0), 0u)
      << w[0];
}

// A rank with one NCCL kernel of process group `pg`, seq 1, of `group` ranks, running [ts, ts + dur],
// then a kernel that ends its step at `end`.
std::string with_collective(int rank, int world, const std::string& pg, const std::string& coll, int group, double ts,
                            double dur, double end) {
  const std::string args = fmt::format(R"("Collective name":"{}","Process Group Name":"{}","Seq":1,"Group size":{})",
                                       coll, pg, group);
  return TraceJson(rank, world)
      .launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 7, 0, ts, dur, 1, 1,
              args)
      .launch("gemm", 7, 1, ts + dur, end - ts - dur, 2)
      .str();
}

// One warning, which begins with `prefix`.
void expect_one_warning_starting(const std::vector<std::string>& w, const std::string& prefix) {
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind(prefix, 0), 0u) << w[0];
}

TEST(StepDoubt, CollectivesWhoseMatchedKernelsDisagreeAreSaid) {
  // One job: two ranks of one allreduce of two, then two of the same group of two: no doubt.
  EXPECT_TRUE(warnings_of({with_collective(0, 2, "0", "allreduce", 2, 10, 50, 200),
                           with_collective(1, 2, "0", "allreduce", 2, 20, 40, 200)})
                  .empty());
  // Two jobs' files renumbered into one world, each with its process group "0" of two ranks: four
  // kernels matched as one collective of a group of two.
  std::vector<std::string> four;
  for (int r = 0; r < 4; ++r) four.push_back(with_collective(r, 4, "0", "allreduce", 2, 10, 50, 200));
  auto w = warnings_of(four);
  expect_one_warning_starting(w, "1 collective(s) matched across ranks disagree, e.g. process group '0' seq 1: "
                                 "kernels of 4 ranks, group size 2: the files may come from different jobs");
  // An allreduce matched with a broadcast.
  w = warnings_of({with_collective(0, 2, "0", "allreduce", 2, 10, 50, 200),
                   with_collective(1, 2, "0", "broadcast", 2, 20, 40, 200)});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("process group '0' seq 1: allreduce on rank 0, broadcast on rank 1"), std::string::npos) << w[0];
  // A send matches its recv.
  EXPECT_TRUE(warnings_of({with_collective(0, 2, "p2p", "send", 2, 10, 50, 200),
                           with_collective(1, 2, "p2p", "recv", 2, 20, 40, 200)})
                  .empty());
}

TEST(StepDoubt, GroupsOfRanksThatShareNoCollectiveWithStepsOfDifferentLengthsAreSaid) {
  // Ranks 0-1 and 2-3 are two jobs (process groups "a" and "b"): steps of 200 and 1000 µs.
  std::vector<std::string> jobs = {with_collective(0, 4, "a", "allreduce", 2, 10, 50, 200),
                                   with_collective(1, 4, "a", "allreduce", 2, 20, 40, 200),
                                   with_collective(2, 4, "b", "allreduce", 2, 10, 50, 1000),
                                   with_collective(3, 4, "b", "allreduce", 2, 20, 40, 1000)};
  expect_one_warning_starting(warnings_of(jobs),
                              "the ranks form 2 groups that share no collective, with steps of different lengths "
                              "(ranks 0..1 (2): 0.200 ms; ranks 2..3 (2): 1.000 ms)");
  // The same two jobs with steps within 5 % of each other: the longest step stands for both.
  jobs[2] = with_collective(2, 4, "b", "allreduce", 2, 10, 50, 205);
  jobs[3] = with_collective(3, 4, "b", "allreduce", 2, 20, 40, 205);
  EXPECT_TRUE(warnings_of(jobs).empty());
  // Their graph counts the groups.
  const analysis::Workload both = test::workload_of(jobs);
  EXPECT_EQ(both.graph.stats.rank_groups, 2);
  EXPECT_EQ(both.graph.stats.collectives_matched, 2);
}

// A synchronize call that goes on blocking after the GPU work the trace shows has ended waited for work
// the trace does not record. Times in µs: a 100 µs kernel, then cudaStreamSynchronize from 120 µs.
TEST(StepDoubt, ASyncThatBlocksAfterTheRecordedGpuWorkEndedIsSaid) {
  auto with_sync = [](double sync_ts, double sync_dur) {
    return TraceJson().launch("gemm", 7, 0, 10, 100, 1).runtime("cudaStreamSynchronize", sync_ts, sync_dur, 2).str();
  };
  // Blocks 2 ms after the kernel ended: 2,000 of a 2,120 µs step.
  {
    const auto w = warnings_of({with_sync(120, 2000)});
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].rfind("synchronize calls blocked 2.000 ms (94 % of the step on the rank with the most) after the "
                         "GPU work the trace shows had ended, e.g. cudaStreamSynchronize on thread 1, 2.000 ms of its "
                         "2.000 ms after the last GPU op it could wait for ended: the GPU ran work the trace does not "
                         "record",
                         0),
              0u)
        << w[0];
    const analysis::Workload wl = test::workload_of({with_sync(120, 2000)});
    const analysis::UnrecordedWaits uw = analysis::unrecorded_waits(wl, analysis::analyze(wl));
    EXPECT_EQ(uw.calls, 1);
    EXPECT_EQ(uw.wait_ns, 2'000'000);
  }
  // Waits for the kernel, then wakes 5 µs after it ends: the GPU work it waited for is in the trace.
  EXPECT_TRUE(warnings_of({with_sync(20, 95)}).empty());
  // Blocks past the kernel's end by 2 ms: the part after the kernel ended counts (2,000 of 2,110 µs).
  {
    const auto w = warnings_of({with_sync(20, 2090)});
    ASSERT_EQ(w.size(), 1u);
    EXPECT_NE(w[0].find("2.000 ms of its 2.090 ms after the last GPU op it could wait for ended"), std::string::npos) << w[0];
  }
  // Below the per-call floor (150 µs) or under 5 % of the step: nothing said.
  EXPECT_TRUE(warnings_of({with_sync(120, 150)}).empty());
  {
    const std::string long_step =
        TraceJson().launch("gemm", 7, 0, 10, 100, 1).runtime("cudaStreamSynchronize", 120, 300, 2).launch("gemm", 7, 430, 440, 9000, 3).str();
    EXPECT_TRUE(warnings_of({long_step}).empty());
  }
}

// A GPU op that starts long after its launch, with nothing of the step on its GPU meanwhile, waited for
// work the step does not show; the replay keeps the gap as a fixed launch delay. Times in µs: a kernel
// launched at 0 that starts at 2,000, then a second one launched right after it.
TEST(StepDoubt, AGpuOpThatStartsLongAfterItsLaunchOnAnIdleGpuIsSaid) {
  const std::string late = TraceJson().launch("late_kernel", 7, 0, 2000, 100, 1).launch("gemm", 7, 10, 2100, 100, 2).str();
  {
    const auto w = warnings_of({late});
    ASSERT_EQ(w.size(), 1u);
    // From the launch call's return (its own 5 µs are the host's).
    EXPECT_EQ(w[0].rfind("1 GPU op(s) on the critical path started 1.995 ms (91 % of the step) after their launch while "
                         "their GPU ran nothing of the step, e.g. late_kernel launched by cudaLaunchKernel on stream 7, "
                         "2.000 ms after its launch, its GPU idle in the step for 1.995 ms of it: the GPU was busy with "
                         "work the step does not show",
                         0),
              0u)
        << w[0];
    const analysis::Workload wl = test::workload_of({late});
    const analysis::LateGpuStarts ls = analysis::late_gpu_starts(wl, analysis::analyze(wl));
    EXPECT_EQ(ls.ops, 1);
    EXPECT_EQ(ls.wait_ns, 1'995'000);
    EXPECT_NEAR(ls.pct, 100.0 * 1995 / 2200, 1e-9);
  }
  // The same gap while another stream of the step keeps the GPU busy: the op waited for the GPU, whose
  // work the step shows. Busy for 1,900 of the 2,000 µs: the 100 µs left is under the floor.
  EXPECT_TRUE(warnings_of({TraceJson()
                               .launch("busy", 9, 0, 50, 1900, 3)
                               .launch("late_kernel", 7, 1, 2000, 100, 1)
                               .launch("gemm", 7, 10, 2100, 100, 2)
                               .str()})
                  .empty());
  // Busy for the first 1,000 µs only: the idle 1,000 µs count.
  {
    const analysis::Workload wl = test::workload_of(
        {TraceJson().launch("busy", 9, 0, 0, 1000, 3).launch("late_kernel", 7, 1, 2000, 100, 1).launch("gemm", 7, 10, 2100, 100, 2).str()});
    const analysis::LateGpuStarts ls = analysis::late_gpu_starts(wl, analysis::analyze(wl));
    EXPECT_EQ(ls.ops, 1);
    EXPECT_EQ(ls.wait_ns, 1'000'000);
  }
  // A short launch delay (150 µs, under the floor), or a long one under 5 % of a long step: nothing said.
  EXPECT_TRUE(warnings_of({TraceJson().launch("k", 7, 0, 150, 100, 1).str()}).empty());
  EXPECT_TRUE(warnings_of({TraceJson().launch("k", 7, 0, 300, 100, 1).launch("long", 7, 10, 400, 9000, 2).str()}).empty());
}

// A first call's one-time cost: a cudaLaunchKernel that keeps the host 60 ms (inside the operator that
// made it) while the GPU runs nothing, as CUDA loads the kernel's module on its first launch: 92 % of the
// 65.11 ms step.
TEST(StepDoubt, AFirstCallsOneTimeCostIsSaid) {
  const std::string first = TraceJson()
                                .cpu("aten::cudnn_convolution", 0, 60200)
                                .runtime("cudaLaunchKernel", 100, 60000, 1)
                                .kernel("conv_kernel", 7, 60110, 5000, 1)
                                .str();
  {
    const analysis::Workload wl = test::workload_of({first});
    const analysis::OneTimeCalls ot = analysis::one_time_calls(wl, analysis::analyze(wl));
    EXPECT_EQ(ot.calls, 1);
    EXPECT_EQ(ot.ns, 60'000'000);
    EXPECT_NEAR(ot.pct, 100.0 * 60000 / 65110, 1e-9);
    EXPECT_EQ(ot.example, "cudaLaunchKernel inside aten::cudnn_convolution on thread 1, 60.000 ms");
    const auto w = warnings_of({first});
    ASSERT_EQ(w.size(), 1u) << w[0];
    EXPECT_EQ(w[0].rfind("1 runtime call(s) that do not wait on the GPU kept the host 60.000 ms (92 % of the step on "
                         "the rank with the most) while its GPU ran nothing, e.g. cudaLaunchKernel inside "
                         "aten::cudnn_convolution on thread 1, 60.000 ms: a first call's one-time cost",
                         0),
              0u)
        << w[0];
  }
  // A launch that blocks on a full launch queue blocks while the GPU runs: busy for all but 10 µs of its
  // 29.98 ms, it is not counted.
  {
    const analysis::Workload wl = test::workload_of({TraceJson()
                                                         .launch("busy", 7, 0, 10, 29990, 2)
                                                         .runtime("cudaLaunchKernel", 10, 29980, 1)
                                                         .kernel("next", 7, 30001, 100, 1)
                                                         .str()});
    EXPECT_EQ(analysis::one_time_calls(wl, analysis::analyze(wl)).calls, 0);
  }
  // A synchronize call that blocks on an idle GPU is another doubt's (unrecorded waits); a call under
  // 10 ms is no first call's cost.
  for (const std::string& other : {TraceJson().launch("k", 7, 0, 10, 100, 1).runtime("cudaStreamSynchronize", 10, 60000, 2).str(),
                                   TraceJson().runtime("cudaLaunchKernel", 0, 9000, 1).kernel("k", 7, 9010, 100, 1).str()}) {
    const analysis::Workload wl = test::workload_of({other});
    EXPECT_EQ(analysis::one_time_calls(wl, analysis::analyze(wl)).calls, 0);
  }
}


// GPU ops whose launch the trace does not hold (an earlier, unprofiled step's work still queued) that
// run in the step are counted in its GPU time: said from 5 % of it. Times in µs: "tail" (correlation 1,
// no call) runs 1,000-1,600 in ProfilerStep#2 (1,000-2,000), whose own kernel follows it on the stream.
TEST(StepDoubt, GpuOpsLaunchedBeforeTheStepAreSaid) {
  auto one_step = [](double tail_ts, double tail_dur) {
    return TraceJson().step(2, 1000, 1000).kernel("tail", 7, tail_ts, tail_dur, 1).launch("gemm", 7, 1010, 1600, 100, 2).str();
  };
  {
    const analysis::Workload w = test::workload_of({one_step(1000, 600)});
    ASSERT_EQ(w.steps.size(), 1u);
    EXPECT_EQ(w.steps[0], 2);
    const analysis::EarlierLaunches el = analysis::earlier_launches(w);
    EXPECT_EQ(el.ops, 1);
    EXPECT_EQ(el.ns, 600'000);
    EXPECT_EQ(el.gpu_ns, 700'000);
    const auto warnings = analysis::step_warnings(w, analysis::analyze(w));
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0].rfind("1 GPU op(s), 0.600 ms of the step's 0.700 ms of GPU op time (86 %), have no launch call "
                                "in the step, e.g. tail on stream 7, 0.600 ms: launched before it",
                                0),
              0u)
        << warnings[0];
  }
  // A short tail, 4 of the step's 104 µs of GPU op time (under 5 %): counted, not said.
  {
    const analysis::Workload w = test::workload_of({one_step(1000, 4)});
    EXPECT_EQ(analysis::earlier_launches(w).ops, 1);
    EXPECT_NEAR(analysis::earlier_launches(w).pct(), 100.0 * 4 / 104, 1e-9);
    EXPECT_TRUE(analysis::step_warnings(w, analysis::analyze(w)).empty());
  }
}

// A real capture of one ProfilerStep (TraceLens's H100 Qwen1.5-0.5B chat step in ../shared): the GPU is
// still running the unprofiled step before it when it begins, 501 ops whose launches the trace lacks,
// 13.4 ms of its 45.3 ms of GPU op time.
TEST(StepDoubt, ARealStepThatBeginsOnTheQueuedWorkOfTheOneBeforeIsSaid) {
  EMO_REQUIRE_SHARED(path, "traces/tracelens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz");
  const analysis::Workload w = test::workload_of_files({path});
  ASSERT_FALSE(w.ranks.empty());
  const analysis::EarlierLaunches el = analysis::earlier_launches(w);
  EXPECT_EQ(el.ops, 501);
  EXPECT_NEAR(double(el.ns) / 1e6, 13.441, 0.001);
  EXPECT_NEAR(double(el.gpu_ns) / 1e6, 45.347, 0.001);
  const auto warnings = analysis::step_warnings(w, analysis::analyze(w));
  EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(), [](const std::string& s) {
    return s.rfind("501 GPU op(s), 13.441 ms of the step's 45.347 ms of GPU op time (30 %)", 0) == 0;
  }));
}

analysis::Workload data_trace(const std::string& name) {
  return test::workload_of_files({std::string(EMO_TEST_DATA_DIR) + "/traces/" + name});
}

// Real captures of this kind (tests/data/traces/README.md): HIP graphs replayed on an MI300X and an
// MI350 whose kernels the profiler did not wholly record. On the MI300X hipStreamSynchronize begins
// after the 57 recorded kernels ended and blocks 29 ms; on the MI350 it waits for the 1,522 recorded
// ones and blocks 9.3 ms past the last.
TEST(StepDoubt, GraphReplaysWhoseKernelsTheTraceLacksAreSaid) {
  struct Case {
    const char* file;
    double wait_ms, min_pct, max_pct;
    const char* said;
  };
  for (const Case& c : {Case{"mi300x_pi0_graph_replay_partial.json.gz", 29.006, 90, 95, "synchronize calls blocked 29.006 ms (93 %"},
                        Case{"mi350_pi0_compiled_graph_replay.json.gz", 9.301, 37, 39, "synchronize calls blocked 9.301 ms (38 %"}}) {
    SCOPED_TRACE(c.file);
    const analysis::Workload w = data_trace(c.file);
    if (w.ranks.empty()) continue;
    const analysis::Analysis a = analysis::analyze(w);
    const analysis::UnrecordedWaits uw = analysis::unrecorded_waits(w, a);
    EXPECT_EQ(uw.calls, 1);
    EXPECT_NEAR(double(uw.wait_ns) / 1e6, c.wait_ms, 0.001);
    EXPECT_GT(uw.pct, c.min_pct);
    EXPECT_LT(uw.pct, c.max_pct);
    const auto warnings = analysis::step_warnings(w, a);
    EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(), [&](const std::string& s) {
      return s.rfind(c.said, 0) == 0 && s.find("hipStreamSynchronize") != std::string::npos;
    })) << (warnings.empty() ? std::string("(none)") : warnings[0]);
  }
}

// Public ROCm inference captures (tests/data/traces/README.md) whose first GPU op waits on work the trace
// does not show: on the SGLang decode step a kernel starts 463.3 ms after its launch (98 % of the step, a
// blocking hipMemcpyWithStream meanwhile), on the vLLM decode step a device-to-device copy 7.8 ms after
// its hipMemcpyAsync (41 %). Neither has a synchronize call that blocks past the recorded work.
TEST(StepDoubt, InferenceStepsWhoseFirstGpuOpWaitsOnUnrecordedWorkAreSaid) {
  struct Case {
    const char* file;
    double wait_ms, min_pct, max_pct;
    const char* op;
  };
  for (const Case& c : {Case{"mi300x_sglang_qwen3_decode.json.gz", 463.252, 97, 98.5, "resolve_future_token_ids_kernel"},
                        Case{"rocm_vllm_decode_graph_execution.json.gz", 7.826, 40, 42, "Memcpy DtoD (Device -> Device) launched by hipMemcpyAsync"}}) {
    SCOPED_TRACE(c.file);
    const analysis::Workload w = data_trace(c.file);
    if (w.ranks.empty()) continue;
    const analysis::Analysis a = analysis::analyze(w);
    EXPECT_EQ(analysis::unrecorded_waits(w, a).calls, 0);  // the synchronize rule does not see these
    const analysis::LateGpuStarts ls = analysis::late_gpu_starts(w, a);
    EXPECT_EQ(ls.ops, 1);
    EXPECT_NEAR(double(ls.wait_ns) / 1e6, c.wait_ms, 0.001);
    EXPECT_GT(ls.pct, c.min_pct);
    EXPECT_LT(ls.pct, c.max_pct);
    EXPECT_NE(ls.example.find(c.op), std::string::npos) << ls.example;
    const auto warnings = analysis::step_warnings(w, a);
    EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(), [&](const std::string& s) {
      return s.rfind("1 GPU op(s) on the critical path started", 0) == 0;
    })) << (warnings.empty() ? std::string("(none)") : warnings[0]);
  }
  // The project's own H200 captures (a training and an inference step) wait on nothing unrecorded.
  for (const char* f : {"h200_transformer_train.json.gz", "h200_transformer_infer.json.gz"}) {
    SCOPED_TRACE(f);
    const analysis::Workload w = data_trace(f);
    if (w.ranks.empty()) continue;
    EXPECT_EQ(analysis::late_gpu_starts(w, analysis::analyze(w)).ops, 0);
  }
}

// Public captures of a first iteration: a particle-transformer forward on an A100 (tests/data/traces),
// whose first cuDNN launch holds the host 626 ms of the 1,020 ms step while the GPU runs nothing; and
// HTA's AlexNet benchmark (../shared), whose 43.4 s step is the run's start-up, a
// cudaDeviceGetStreamPriorityRange inside aten::empty_strided alone keeping the host 29.9 s.
TEST(StepDoubt, RealStepsThatAreTheRunsStartUpAreSaid) {
  {
    const analysis::Workload w = data_trace("a100_particle_transformer_first_forward.json.gz");
    ASSERT_FALSE(w.ranks.empty());
    const analysis::Analysis a = analysis::analyze(w);
    const analysis::OneTimeCalls ot = analysis::one_time_calls(w, a);
    EXPECT_EQ(ot.calls, 1);
    EXPECT_NEAR(double(ot.ns) / 1e6, 626.335, 0.001);
    EXPECT_NEAR(ot.pct, 61.4, 0.1);
    EXPECT_EQ(ot.example.rfind("cudaLaunchKernel inside aten::cudnn_convolution", 0), 0u) << ot.example;
    EXPECT_EQ(analysis::late_gpu_starts(w, a).ops, 0);  // the kernel started as its launch returned
  }
  EMO_REQUIRE_SHARED(path, "traces/hta/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz");
  const analysis::Workload wl = test::workload_of_files({path});
  const analysis::OneTimeCalls ot = analysis::one_time_calls(wl, analysis::analyze(wl));
  EXPECT_GT(ot.pct, 90.0);
  EXPECT_EQ(ot.example.rfind("cudaDeviceGetStreamPriorityRange inside aten::empty_strided", 0), 0u) << ot.example;
}

TEST(StepDoubt, ATraceOfAnotherGpuThanTheDeviceIsSaid) {
  const analysis::Workload v100 = test::workload_of({on_device(one_kernel(), "Tesla V100-SXM2-32GB")});
  const auto w = analysis::device_warnings(v100, "h100");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "rank0.json was recorded on Tesla V100-SXM2-32GB, not the h100 of --device: its GPU times are taken as h100's");
  EXPECT_TRUE(analysis::device_warnings(v100, "v100").empty());
  EXPECT_TRUE(analysis::device_warnings(v100, "v100-pcie").empty());
  // Names without a model number are not judged; nor is a trace without deviceProperties.
  EXPECT_TRUE(analysis::device_warnings(test::workload_of({on_device(one_kernel(), "Tiny GPU")}), "h100").empty());
  EXPECT_TRUE(analysis::device_warnings(test::workload_of({one_kernel()}), "h100").empty());
  EXPECT_EQ(analysis::device_warnings(test::workload_of({on_device(one_kernel(), "AMD Instinct MI250X")}), "a100").size(), 1u);
  // No model in the name, but HIP's runtime calls: an AMD GPU's trace (not judged against an AMD profile).
  const analysis::Workload rocm =
      test::workload_of({on_device(TraceJson().runtime("hipLaunchKernel", 0, 5, 1).kernel("k", 7, 10, 100, 1).str(), "")});
  const auto amd = analysis::device_warnings(rocm, "h100");
  ASSERT_EQ(amd.size(), 1u);
  EXPECT_EQ(amd[0], "rank0.json was recorded on an AMD GPU (its runtime calls are HIP's; its deviceProperties name no "
                    "model), not the h100 of --device: its GPU times are taken as h100's");
  EXPECT_TRUE(analysis::device_warnings(rocm, "mi250").empty());
  EXPECT_TRUE(analysis::device_warnings(test::workload_of({on_device(one_kernel(), "")}), "h100").empty());
  // vLLM's ROCm decode capture (tests/data/traces/README.md) names no GPU.
  const analysis::Workload vllm = data_trace("rocm_vllm_decode_graph_execution.json.gz");
  if (!vllm.ranks.empty()) {
    EXPECT_EQ(analysis::device_warnings(vllm, "h100").size(), 1u);
  }
}

}  // namespace
}  // namespace emo
