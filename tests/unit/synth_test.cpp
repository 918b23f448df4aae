// Behaviour of `emo synth`: deterministic output, valid JSON in the modern
// Kineto spelling, and a timeline as consistent as a real multi-rank run
// (launch before kernel, serial streams, nested CPU events, collectives that
// end together, comm/compute overlap, a CPU-bound decode loop), and for each
// family the structure it is there for, as emo's own analysis sees it
// (replay matches, pipeline bubbles, communication on the critical path, an
// input-bound step).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/synth/synth.h"
#include "test_util.h"

namespace emo::synth {
namespace {

using nlohmann::json;

Options small(Workload w, int ranks) {
  Options o;
  o.workload = w;
  o.ranks = ranks;
  o.layers = 3;
  o.steps = 2;
  o.decode_tokens = 6;
  o.microbatches = 4;
  o.seed = 7;
  return o;
}

// Complete events in integer nanoseconds, so comparisons are exact.
struct Ev {
  std::string cat, name;
  int64_t ts = 0, dur = 0;
  int64_t pid = 0, tid = 0;
  const json* args = nullptr;
  int64_t end() const { return ts + dur; }
  int64_t arg(const char* key) const { return (*args)[key].get<int64_t>(); }
};

int64_t ns(const json& v) { return std::llround(v.get<double>() * 1000.0); }

struct Trace {
  json doc;
  std::vector<Ev> x;  // ph "X" with numeric pid/tid
  std::vector<const Ev*> of(const std::string& cat) const {
    std::vector<const Ev*> out;
    for (const Ev& e : x) {
      if (e.cat == cat) out.push_back(&e);
    }
    return out;
  }
  std::vector<const Ev*> gpu_ops() const {
    std::vector<const Ev*> out;
    for (const Ev& e : x) {
      if (e.cat == "kernel" || e.cat == "gpu_memcpy" || e.cat == "gpu_memset") out.push_back(&e);
    }
    return out;
  }
  std::map<int64_t, const Ev*> runtime_by_corr() const {
    std::map<int64_t, const Ev*> m;
    for (const Ev* e : of("cuda_runtime")) m[e->arg("correlation")] = e;
    return m;
  }
};

Trace load(const std::string& text) {
  Trace t;
  t.doc = json::parse(text);
  for (const json& e : t.doc["traceEvents"]) {
    if (e["ph"] != "X" || !e["pid"].is_number()) continue;
    Ev ev;
    ev.cat = e["cat"];
    ev.name = e["name"];
    ev.ts = ns(e["ts"]);
    ev.dur = ns(e["dur"]);
    ev.pid = e["pid"];
    ev.tid = e["tid"];
    ev.args = &e["args"];
    t.x.push_back(ev);
  }
  return t;
}

Trace render(const Options& o, int rank) {
  std::string text = render_trace(o, rank);
  EXPECT_FALSE(text.empty());
  return load(text);
}

// Length of the union of [ts, end) intervals clipped to [lo, hi).
int64_t busy_within(std::vector<std::pair<int64_t, int64_t>> iv, int64_t lo, int64_t hi) {
  std::sort(iv.begin(), iv.end());
  int64_t busy = 0, cur_b = lo, cur_e = lo;
  for (auto [b, e] : iv) {
    b = std::max(b, lo);
    e = std::min(e, hi);
    if (e <= b) continue;
    if (b > cur_e) {
      busy += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  return busy + (cur_e - cur_b);
}

TEST(Synth, ParseWorkloadAcceptsTheFamilyNamesOnly) {
  ASSERT_TRUE(parse_workload("train-dp").ok());
  EXPECT_EQ(*parse_workload("train-dp"), Workload::kTrainDP);
  EXPECT_EQ(*parse_workload("infer-decode"), Workload::kInferDecode);
  EXPECT_EQ(*parse_workload("train-pp"), Workload::kTrainPP);
  EXPECT_EQ(*parse_workload("train-tp"), Workload::kTrainTP);
  EXPECT_EQ(*parse_workload("dataloader"), Workload::kDataloader);
  std::set<std::string> names;
  for (Workload w : kAllWorkloads) {
    ASSERT_TRUE(parse_workload(workload_name(w)).ok()) << workload_name(w);
    EXPECT_EQ(*parse_workload(workload_name(w)), w);
    EXPECT_GT(std::string(workload_summary(w)).size(), 20u);
    names.insert(workload_name(w));
  }
  EXPECT_EQ(names.size(), std::size(kAllWorkloads));
  auto bad = parse_workload("train");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what.find("train"), std::string::npos);
  EXPECT_NE(bad.error().note.find("dataloader"), std::string::npos);
  EXPECT_STREQ(workload_name(Workload::kInferDecode), "infer-decode");
}

TEST(Synth, ValidateRejectsOutOfRangeOptions) {
  Options o;
  EXPECT_TRUE(validate(o).ok());
  o.ranks = 0;
  ASSERT_FALSE(validate(o).ok());
  EXPECT_NE(validate(o).error().what.find("--ranks"), std::string::npos);
  o = Options{};
  o.layers = 0;
  EXPECT_FALSE(validate(o).ok());
  o = Options{};
  o.steps = -1;
  EXPECT_FALSE(validate(o).ok());
  o = Options{};
  o.min_events = -5;
  EXPECT_FALSE(validate(o).ok());
  o = Options{};
  o.microbatches = 0;
  ASSERT_FALSE(validate(o).ok());
  EXPECT_NE(validate(o).error().what.find("--microbatches"), std::string::npos);
  o = Options{};
  o.ranks = -2;
  EXPECT_TRUE(render_trace(o, 0).empty());
}

TEST(Synth, SameSeedGivesIdenticalBytesOtherSeedDiffers) {
  Options o = small(Workload::kTrainDP, 2);
  std::string a = render_trace(o, 1);
  std::string b = render_trace(o, 1);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  o.seed = 8;
  EXPECT_NE(render_trace(o, 1), a);
  Options d = small(Workload::kInferDecode, 1);
  EXPECT_EQ(render_trace(d, 0), render_trace(d, 0));
  for (Workload w : {Workload::kTrainPP, Workload::kTrainTP, Workload::kDataloader}) {
    Options n = small(w, 3);
    std::string x = render_trace(n, 2);
    ASSERT_FALSE(x.empty()) << workload_name(w);
    EXPECT_EQ(render_trace(n, 2), x) << workload_name(w);
    n.seed = 8;
    EXPECT_NE(render_trace(n, 2), x) << workload_name(w);
  }
}

TEST(Synth, TraceHasModernKinetoTopLevelKeys) {
  Options o = small(Workload::kTrainDP, 3);
  std::string text = render_trace(o, 2);
  Trace t = load(text);
  const json& d = t.doc;
  EXPECT_EQ(d["schemaVersion"], 1);
  ASSERT_TRUE(d["deviceProperties"].is_array());
  EXPECT_NE(d["deviceProperties"][0]["name"].get<std::string>().find("H100"), std::string::npos);
  EXPECT_EQ(d["deviceProperties"][0]["numSms"], 132);
  EXPECT_EQ(d["distributedInfo"]["backend"], "nccl");
  EXPECT_EQ(d["distributedInfo"]["rank"], 2);
  EXPECT_EQ(d["distributedInfo"]["world_size"], 3);
  ASSERT_TRUE(d["baseTimeNanoseconds"].is_number_integer());
  EXPECT_GT(d["baseTimeNanoseconds"].get<int64_t>(), int64_t{1'600'000'000} * 1'000'000'000);
  ASSERT_TRUE(d["traceEvents"].is_array());
  // ts/dur are µs relative to baseTimeNanoseconds, with exactly three decimals.
  size_t pos = 0;
  int checked = 0;
  while ((pos = text.find("\"ts\": ", pos)) != std::string::npos && checked < 2000) {
    pos += 6;
    size_t end = text.find_first_of(",\n", pos);
    std::string v = text.substr(pos, end - pos);
    size_t dot = v.find('.');
    ASSERT_NE(dot, std::string::npos) << v;
    EXPECT_EQ(v.size() - dot - 1, 3u) << v;
    ++checked;
  }
  EXPECT_GT(checked, 100);
  for (const Ev& e : t.x) EXPECT_LT(e.ts, int64_t{1'000'000'000'000}) << e.name;
  // The categories a reader keys on, spelled as PyTorch 2.x writes them.
  std::set<std::string> cats;
  for (const Ev& e : t.x) cats.insert(e.cat);
  for (const char* c : {"user_annotation", "cpu_op", "cuda_runtime", "kernel", "gpu_memcpy",
                        "gpu_memset", "cuda_sync"}) {
    EXPECT_TRUE(cats.count(c)) << c;
  }
  std::set<std::string> sync_kinds, runtime_names;
  for (const Ev* e : t.of("cuda_sync")) sync_kinds.insert(e->name);
  for (const Ev* e : t.of("cuda_runtime")) runtime_names.insert(e->name);
  EXPECT_TRUE(sync_kinds.count("Stream Wait Event"));
  EXPECT_TRUE(sync_kinds.count("Stream Sync"));
  EXPECT_TRUE(sync_kinds.count("Event Sync"));
  for (const char* n : {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaEventRecord",
                        "cudaStreamWaitEvent", "cudaStreamSynchronize", "cudaEventSynchronize"}) {
    EXPECT_TRUE(runtime_names.count(n)) << n;
  }
}

// Every GPU op: args carry device/stream/correlation/External id, a runtime call
// with the same correlation started before it, and an ac2g s/f flow pair links them.
void expect_launch_links(const Trace& t) {
  auto rt = t.runtime_by_corr();
  std::map<int64_t, int64_t> flow_s, flow_f;
  for (const json& e : t.doc["traceEvents"]) {
    if (e["ph"] == "s" && e["cat"] == "ac2g") flow_s[e["id"]] = ns(e["ts"]);
    if (e["ph"] == "f" && e["cat"] == "ac2g") flow_f[e["id"]] = ns(e["ts"]);
  }
  int n = 0;
  for (const Ev* g : t.gpu_ops()) {
    for (const char* k : {"device", "stream", "correlation", "External id"}) {
      ASSERT_TRUE(g->args->contains(k)) << g->name << " lacks " << k;
    }
    EXPECT_EQ(g->tid, g->arg("stream"));
    EXPECT_EQ(g->pid, g->arg("device"));
    int64_t corr = g->arg("correlation");
    auto it = rt.find(corr);
    ASSERT_NE(it, rt.end()) << g->name << " correlation " << corr;
    const Ev* r = it->second;
    EXPECT_LT(r->ts, g->ts) << g->name;
    EXPECT_EQ(r->arg("External id"), g->arg("External id"));
    EXPECT_TRUE(r->args->contains("cbid"));
    ASSERT_TRUE(flow_s.count(corr));
    ASSERT_TRUE(flow_f.count(corr));
    EXPECT_EQ(flow_s[corr], r->ts);
    EXPECT_EQ(flow_f[corr], g->ts);
    ++n;
  }
  EXPECT_GT(n, 100);
}

TEST(Synth, EveryGpuOpHasAnEarlierLaunchWithTheSameCorrelation) {
  expect_launch_links(render(small(Workload::kTrainDP, 2), 0));
  expect_launch_links(render(small(Workload::kInferDecode, 2), 1));
  expect_launch_links(render(small(Workload::kTrainPP, 3), 1));
  expect_launch_links(render(small(Workload::kTrainTP, 2), 1));
  expect_launch_links(render(small(Workload::kDataloader, 2), 0));
}

void expect_streams_serial(const Trace& t) {
  std::map<int64_t, std::vector<const Ev*>> by_stream;
  for (const Ev* g : t.gpu_ops()) by_stream[g->arg("stream")].push_back(g);
  ASSERT_FALSE(by_stream.empty());
  for (auto& [s, ops] : by_stream) {
    std::sort(ops.begin(), ops.end(), [](const Ev* a, const Ev* b) { return a->ts < b->ts; });
    for (size_t i = 1; i < ops.size(); ++i) {
      EXPECT_GE(ops[i]->ts, ops[i - 1]->end()) << "stream " << s << ": " << ops[i]->name;
    }
  }
}

TEST(Synth, OpsOnOneStreamNeverOverlap) {
  Trace train = render(small(Workload::kTrainDP, 2), 1);
  expect_streams_serial(train);
  std::set<int64_t> streams;
  for (const Ev* g : train.gpu_ops()) streams.insert(g->arg("stream"));
  EXPECT_EQ(streams.size(), 2u);  // compute and NCCL
  expect_streams_serial(render(small(Workload::kInferDecode, 1), 0));
  for (Workload w : {Workload::kTrainPP, Workload::kTrainTP, Workload::kDataloader}) {
    for (int r : {0, 1}) expect_streams_serial(render(small(w, 3), r));
  }
}

void expect_cpu_nesting(const Trace& t) {
  std::map<std::pair<int64_t, int64_t>, std::vector<const Ev*>> threads;
  for (const Ev& e : t.x) {
    if (e.cat == "cpu_op" || e.cat == "user_annotation" || e.cat == "cuda_runtime") {
      threads[{e.pid, e.tid}].push_back(&e);
    }
  }
  ASSERT_EQ(threads.size(), 1u);  // everything on the main thread
  for (auto& [key, evs] : threads) {
    std::sort(evs.begin(), evs.end(), [](const Ev* a, const Ev* b) {
      return a->ts != b->ts ? a->ts < b->ts : a->dur > b->dur;
    });
    std::vector<const Ev*> stack;
    for (const Ev* e : evs) {
      while (!stack.empty() && stack.back()->end() <= e->ts) stack.pop_back();
      if (!stack.empty()) {
        ASSERT_LE(e->end(), stack.back()->end())
            << e->name << " crosses the end of " << stack.back()->name;
      }
      stack.push_back(e);
    }
  }
}

TEST(Synth, CpuEventsOnTheMainThreadNest) {
  expect_cpu_nesting(render(small(Workload::kTrainDP, 2), 0));
  expect_cpu_nesting(render(small(Workload::kInferDecode, 2), 0));
  for (Workload w : {Workload::kTrainPP, Workload::kTrainTP, Workload::kDataloader}) {
    for (int r : {0, 2}) expect_cpu_nesting(render(small(w, 3), r));
  }
}

TEST(Synth, LinearOpsNestTheirLaunches) {
  Trace t = render(small(Workload::kTrainDP, 1), 0);
  // aten::linear > aten::addmm > cudaLaunchKernelExC, the GEMM launched inside.
  int found = 0;
  for (const Ev* addmm : t.of("cpu_op")) {
    if (addmm->name != "aten::addmm") continue;
    bool parent = false;
    for (const Ev* l : t.of("cpu_op")) {
      if (l->name == "aten::linear" && l->ts <= addmm->ts && addmm->end() <= l->end()) parent = true;
    }
    bool launch = false;
    for (const Ev* r : t.of("cuda_runtime")) {
      if (r->ts >= addmm->ts && r->end() <= addmm->end() && r->arg("External id") == addmm->arg("External id")) {
        launch = true;
      }
    }
    EXPECT_TRUE(parent && launch);
    if (++found > 20) break;
  }
  EXPECT_GT(found, 0);
}

TEST(Synth, CollectivesWithEqualSeqEndTogetherOnAllRanks) {
  Options o = small(Workload::kTrainDP, 4);
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_seq;  // seq -> (start, end) per rank
  for (int r = 0; r < o.ranks; ++r) {
    Trace t = render(o, r);
    for (const Ev* k : t.of("kernel")) {
      if (!k->args->contains("Seq")) continue;
      EXPECT_EQ((*k->args)["Collective name"], "allreduce");
      EXPECT_EQ(k->arg("Group size"), 4);
      EXPECT_EQ((*k->args)["Process Group Ranks"], "[0, 1, 2, 3]");
      EXPECT_EQ((*k->args)["dtype"], "BFloat16");
      EXPECT_EQ(k->arg("In msg nelems"), k->arg("Out msg nelems"));
      EXPECT_NE(k->name.find("ncclDevKernel_AllReduce"), std::string::npos);
      by_seq[k->arg("Seq")].push_back({k->ts, k->end()});
    }
  }
  ASSERT_GE(by_seq.size(), 4u);
  bool someone_waited = false;
  for (auto& [seq, spans] : by_seq) {
    ASSERT_EQ(spans.size(), 4u) << "Seq " << seq << " missing on some rank";
    int64_t lo_end = INT64_MAX, hi_end = 0, lo_start = INT64_MAX, hi_start = 0;
    for (auto [s, e] : spans) {
      lo_end = std::min(lo_end, e);
      hi_end = std::max(hi_end, e);
      lo_start = std::min(lo_start, s);
      hi_start = std::max(hi_start, s);
    }
    EXPECT_LE(hi_end - lo_end, 3000) << "Seq " << seq;  // within 3 µs
    // Nobody finishes before the last rank has arrived.
    EXPECT_GT(lo_end, hi_start) << "Seq " << seq;
    if (hi_start - lo_start > 5000) someone_waited = true;
  }
  EXPECT_TRUE(someone_waited);
}

TEST(Synth, AllreduceOverlapsBackwardCompute) {
  Options o = small(Workload::kTrainDP, 2);
  o.layers = 5;  // buckets: last layer, two layers, the rest with the embedding
  Trace t = render(o, 0);
  std::vector<std::pair<int64_t, int64_t>> compute;
  std::vector<const Ev*> nccl;
  for (const Ev* k : t.of("kernel")) {
    if (k->args->contains("Seq")) {
      nccl.push_back(k);
    } else if (k->arg("stream") == 7) {
      compute.push_back({k->ts, k->end()});
    }
  }
  ASSERT_EQ(nccl.size(), 6u);  // three buckets per step, two steps
  for (size_t i = 0; i < nccl.size(); ++i) {
    if (i % 3 == 2) continue;  // the last bucket of a step has no backward left to hide behind
    const Ev* k = nccl[i];
    EXPECT_NE(k->arg("stream"), 7);
    int64_t overlap = busy_within(compute, k->ts, k->end());
    EXPECT_GT(overlap, k->dur / 2) << "allreduce Seq " << k->arg("Seq");
  }
}

TEST(Synth, DecodeLoopLeavesTheGpuIdleMostOfTheTime) {
  Options o = small(Workload::kInferDecode, 1);
  o.decode_tokens = 8;
  Trace t = render(o, 0);
  std::vector<std::pair<int64_t, int64_t>> gpu;
  for (const Ev* g : t.gpu_ops()) gpu.push_back({g->ts, g->end()});
  int steps = 0;
  for (const Ev* st : t.of("user_annotation")) {
    if (st->name.rfind("ProfilerStep#", 0) != 0) continue;
    // The decode loop starts when the prefill's sampled tokens reach the host.
    int64_t decode_begin = INT64_MAX;
    int syncs = 0;
    for (const Ev* r : t.of("cuda_runtime")) {
      if (r->name == "cudaStreamSynchronize" && r->ts >= st->ts && r->end() <= st->end()) {
        decode_begin = std::min(decode_begin, r->end());
        ++syncs;
      }
    }
    EXPECT_EQ(syncs, 1 + o.decode_tokens);  // one blocking copy per forward
    ASSERT_LT(decode_begin, st->end());
    double busy = static_cast<double>(busy_within(gpu, decode_begin, st->end())) /
                  static_cast<double>(st->end() - decode_begin);
    EXPECT_LT(busy, 0.5) << st->name;
    EXPECT_GT(busy, 0.05) << st->name;
    ++steps;
  }
  EXPECT_EQ(steps, o.steps);
}

TEST(Synth, TrainingGpuStaysBusyBecauseTheCpuRunsAhead) {
  Trace t = render(small(Workload::kTrainDP, 1), 0);
  std::vector<std::pair<int64_t, int64_t>> gpu;
  for (const Ev* g : t.gpu_ops()) gpu.push_back({g->ts, g->end()});
  auto rt = t.runtime_by_corr();
  int queued = 0, kernels = 0;
  for (const Ev* k : t.of("kernel")) {
    ++kernels;
    if (k->ts - rt[k->arg("correlation")]->ts > 100'000) ++queued;  // waited > 100 µs in the queue
  }
  EXPECT_GT(queued, kernels / 2);
  for (const Ev* st : t.of("user_annotation")) {
    if (st->name.rfind("ProfilerStep#", 0) != 0) continue;
    double busy = static_cast<double>(busy_within(gpu, st->ts, st->end())) / static_cast<double>(st->dur);
    EXPECT_GT(busy, 0.8) << st->name;
  }
}

TEST(Synth, SyncCallsEndAfterTheWorkTheyWaitFor) {
  Trace t = render(small(Workload::kTrainDP, 2), 0);
  auto rt = t.runtime_by_corr();
  auto gpu = t.gpu_ops();
  int stream_syncs = 0;
  for (const Ev* s : t.of("cuda_runtime")) {
    if (s->name != "cudaStreamSynchronize") continue;
    ++stream_syncs;
    for (const Ev* g : gpu) {
      if (g->arg("stream") == 7 && rt[g->arg("correlation")]->ts < s->ts) {
        ASSERT_GE(s->end(), g->end()) << "sync returns before " << g->name;
      }
    }
  }
  EXPECT_EQ(stream_syncs, 2);
  // Stream Wait Event: names the cudaEventRecord it waits on; the next op on
  // the waiting stream starts after the work recorded before that event.
  int waits = 0;
  for (const Ev* w : t.of("cuda_sync")) {
    if (w->name != "Stream Wait Event") continue;
    ++waits;
    EXPECT_EQ((*w->args)["cuda_sync_kind"], "Stream Wait Event");
    int64_t rec_corr = w->arg("wait_on_cuda_event_record_corr_id");
    ASSERT_TRUE(rt.count(rec_corr));
    const Ev* rec = rt[rec_corr];
    EXPECT_EQ(rec->name, "cudaEventRecord");
    int64_t on = w->arg("wait_on_stream"), stream = w->arg("stream");
    EXPECT_NE(on, stream);
    EXPECT_EQ(w->tid, stream);
    int64_t recorded_until = 0;
    for (const Ev* g : gpu) {
      if (g->arg("stream") == on && rt[g->arg("correlation")]->ts < rec->ts) {
        recorded_until = std::max(recorded_until, g->end());
      }
    }
    const Ev* next = nullptr;
    for (const Ev* g : gpu) {
      if (g->arg("stream") == stream && rt[g->arg("correlation")]->ts > w->ts &&
          (!next || rt[g->arg("correlation")]->ts < rt[next->arg("correlation")]->ts)) {
        next = g;
      }
    }
    if (next) {
      EXPECT_GE(next->ts, recorded_until) << next->name;
    }
  }
  EXPECT_GT(waits, 4);
}

TEST(Synth, ProfilerStepsCoverTheirWork) {
  for (Workload w : kAllWorkloads) {
    SCOPED_TRACE(workload_name(w));
    Options o = small(w, 3);
    Trace t = render(o, 1);
    std::vector<const Ev*> steps;
    for (const Ev* a : t.of("user_annotation")) {
      if (a->name.rfind("ProfilerStep#", 0) == 0) steps.push_back(a);
    }
    ASSERT_EQ(steps.size(), static_cast<size_t>(o.steps));
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_EQ(steps[i]->name, "ProfilerStep#" + std::to_string(i + 1));
      if (i) {
        EXPECT_GE(steps[i]->ts, steps[i - 1]->end());
      }
    }
    auto in_step = [&](int64_t ts) -> const Ev* {
      for (const Ev* s : steps) {
        if (s->ts <= ts && ts < s->end()) return s;
      }
      return nullptr;
    };
    for (const Ev& e : t.x) {
      if (e.cat == "cpu_op" || e.cat == "cuda_runtime") {
        const Ev* s = in_step(e.ts);
        ASSERT_NE(s, nullptr) << e.name;
        EXPECT_LE(e.end(), s->end()) << e.name;
      }
    }
    // GPU work launched in a step has finished when the step ends (the step
    // ends with a blocking sync).
    auto rt = t.runtime_by_corr();
    for (const Ev* g : t.gpu_ops()) {
      const Ev* s = in_step(rt[g->arg("correlation")]->ts);
      ASSERT_NE(s, nullptr);
      EXPECT_LE(g->end(), s->end()) << g->name;
    }
  }
}

TEST(Synth, MinEventsRaisesLayersUntilReached) {
  Options o = small(Workload::kTrainDP, 1);
  o.min_events = 12000;
  int layers = resolve_layers(o);
  EXPECT_GT(layers, o.layers);
  int64_t expected = count_events(o);
  EXPECT_GE(expected, o.min_events);
  Trace t = render(o, 0);
  EXPECT_EQ(static_cast<int64_t>(t.doc["traceEvents"].size()), expected);
  // Not grossly over: one layer less would not have been enough.
  Options fewer = o;
  fewer.min_events = 0;
  fewer.layers = layers - 1;
  EXPECT_LT(count_events(fewer), o.min_events);
  // The same for the decode workload.
  Options d = small(Workload::kInferDecode, 2);
  d.min_events = 20000;
  EXPECT_GE(static_cast<int64_t>(render(d, 1).doc["traceEvents"].size()), 20000);
}

TEST(Synth, MinEventsSizesEveryFamily) {
  for (Workload w : kAllWorkloads) {
    SCOPED_TRACE(workload_name(w));
    Options o = small(w, 3);
    o.min_events = 15000;
    Options sized = resolve(o);
    EXPECT_EQ(sized.min_events, 0);
    // The input pipeline grows by steps (more layers would end the input bound); the rest by layers.
    const bool by_steps = w == Workload::kDataloader;
    EXPECT_EQ(by_steps ? sized.layers : sized.steps, by_steps ? o.layers : o.steps);
    EXPECT_GT(by_steps ? sized.steps : sized.layers, by_steps ? o.steps : o.layers);
    const int64_t expected = count_events(o);
    EXPECT_GE(expected, o.min_events);
    // Every rank's file reaches it; the smallest is what count_events reports.
    int64_t smallest = INT64_MAX;
    for (int r = 0; r < o.ranks; ++r) {
      int64_t n = static_cast<int64_t>(render(sized, r).doc["traceEvents"].size());
      EXPECT_GE(n, o.min_events) << "rank " << r;
      smallest = std::min(smallest, n);
    }
    EXPECT_EQ(smallest, expected);
    // One step of the size knob less would not have been enough.
    Options fewer = sized;
    (by_steps ? fewer.steps : fewer.layers) -= 1;
    EXPECT_LT(count_events(fewer), o.min_events);
  }
}

// The traces written to disk, read back by emo's reader, and the graph of
// their last complete step, replayed.
struct Analyzed {
  std::unique_ptr<analysis::Workload> w;
  analysis::Analysis a;
};

Analyzed analyze_traces(const Options& o, const std::string& tag) {
  Analyzed out;
  std::string dir = test::temp_dir(tag);
  std::vector<std::string> paths;
  Status st = write_traces(o, dir, &paths);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());
  if (!st.ok()) return out;
  auto w = analysis::load(paths, {});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
  if (!w.ok()) return out;
  out.w = std::make_unique<analysis::Workload>(std::move(*w));
  out.a = analysis::analyze(*out.w);
  std::filesystem::remove_all(dir);
  return out;
}

int64_t path_ns(const analysis::Analysis& a, const std::string& category) {
  for (const auto& part : a.critical_path.breakdown) {
    if (part.category == category) return part.ns;
  }
  return 0;
}

TEST(Synth, EveryFamilyReadsBackAndReplaysWithinOnePercent) {
  for (Workload w : kAllWorkloads) {
    for (int ranks : {1, 3}) {
      SCOPED_TRACE(std::string(workload_name(w)) + " ranks " + std::to_string(ranks));
      Analyzed r = analyze_traces(small(w, ranks), "synth_replay");
      ASSERT_TRUE(r.w);
      EXPECT_EQ(r.w->ranks.size(), static_cast<size_t>(ranks));
      EXPECT_LT(std::abs(r.a.replay_error_pct), 1.0);
      EXPECT_GT(r.a.measured_span_ns, 0);
      const auto& stats = r.w->graph.stats;
      EXPECT_EQ(stats.gpu_ops_without_launch, 0);
      EXPECT_EQ(stats.edges_dropped_inconsistent, 0);
      if (ranks > 1) {
        EXPECT_GT(stats.collectives_matched, 0);
        EXPECT_EQ(stats.collectives_unmatched, 0);
      }
    }
  }
}

// Union of the step's compute (non-NCCL) GPU ops on this rank, as a share of the last step.
double compute_busy_share(const Trace& t) {
  const Ev* step = nullptr;
  for (const Ev* a : t.of("user_annotation")) {
    if (a->name.rfind("ProfilerStep#", 0) == 0 && (!step || a->ts > step->ts)) step = a;
  }
  if (!step) return 1.0;
  std::vector<std::pair<int64_t, int64_t>> compute;
  for (const Ev* g : t.gpu_ops()) {
    if (g->name.rfind("nccl", 0) != 0) compute.push_back({g->ts, g->end()});
  }
  return static_cast<double>(busy_within(compute, step->ts, step->end())) / static_cast<double>(step->dur);
}

TEST(Synth, PipelineStagesPairTheirSendRecvAndLeaveBubbles) {
  for (auto [stages, micro] : {std::pair{4, 6}, std::pair{3, 2}, std::pair{2, 1}}) {
    SCOPED_TRACE(std::to_string(stages) + " stages, " + std::to_string(micro) + " microbatches");
    Options o = small(Workload::kTrainPP, stages);
    o.microbatches = micro;
    o.layers = 2;
    Analyzed r = analyze_traces(o, "synth_pp");
    ASSERT_TRUE(r.w);
    EXPECT_LT(std::abs(r.a.replay_error_pct), 1.0);
    // 1F1B moves M activations forward and M gradients backward over each link;
    // the steady phase's send+recv pairs share one kernel, so a link carries
    // M + warmup(s) transfers, warmup(s) = min(stages - s - 1, M). Plus the
    // grad-norm allreduce over all stages.
    int64_t expected = 1;
    for (int s = 0; s + 1 < stages; ++s) expected += micro + std::min(stages - s - 1, micro);
    EXPECT_EQ(r.w->graph.stats.collectives_matched, expected);
    EXPECT_EQ(r.w->graph.stats.collectives_unmatched, 0);
    // Bubbles: the first stage's GPU is idle for part of the step, and it runs
    // no compute for at least half of the ideal 1F1B bubble (S-1)/(M+S-1)
    // (the rest of the wait is spent inside SendRecv kernels, as NCCL does).
    ASSERT_FALSE(r.a.gpus.empty());
    EXPECT_GT(r.a.gpus[0].idle_ns, 0);
    const double bubble = static_cast<double>(stages - 1) / (micro + stages - 1);
    Trace first = render(o, 0);
    EXPECT_LT(compute_busy_share(first), 1.0 - bubble / 2) << "bubble " << bubble;
    // Each SendRecv names the pair's own process group; the pair agrees on Seq.
    std::map<std::pair<std::string, int64_t>, int> pairs;
    for (int rank = 0; rank < stages; ++rank) {
      Trace t = render(o, rank);
      for (const Ev* k : t.of("kernel")) {
        if (k->name.rfind("ncclDevKernel_SendRecv", 0) != 0) continue;
        const std::string pg_ranks = (*k->args)["Process Group Ranks"];
        const std::string coll = (*k->args)["Collective name"];
        EXPECT_TRUE(coll == "send" || coll == "recv" || coll == "coalesced") << coll;
        EXPECT_EQ(k->arg("Group size"), 2);
        EXPECT_TRUE(pg_ranks == "[" + std::to_string(rank - 1) + ", " + std::to_string(rank) + "]" ||
                    pg_ranks == "[" + std::to_string(rank) + ", " + std::to_string(rank + 1) + "]")
            << pg_ranks;
        EXPECT_NE(k->arg("stream"), 7);
        ++pairs[{(*k->args)["Process Group Name"].get<std::string>(), k->arg("Seq")}];
      }
    }
    for (const auto& [key, n] : pairs) EXPECT_EQ(n, 2) << "group " << key.first << " Seq " << key.second;
  }
}

TEST(Synth, PipelineLastStageIsTheSlowest) {
  Options o = small(Workload::kTrainPP, 3);
  // Forward + backward of one microbatch: the loss head makes the last stage the busiest.
  std::vector<double> busy;
  for (int r = 0; r < o.ranks; ++r) busy.push_back(compute_busy_share(render(o, r)));
  EXPECT_GT(busy[2], busy[1]);
  EXPECT_GT(busy[2], busy[0]);
}

TEST(Synth, TensorParallelAllreducesSitOnTheCriticalPath) {
  Options o = small(Workload::kTrainTP, 2);
  Analyzed r = analyze_traces(o, "synth_tp");
  ASSERT_TRUE(r.w);
  EXPECT_LT(std::abs(r.a.replay_error_pct), 1.0);
  EXPECT_GT(path_ns(r.a, "communication"), 0);
  // Two allreduces per layer in the forward, on the compute stream itself, so
  // the next kernel there starts only after the allreduce ends; the backward's
  // input-gradient allreduces run on another stream beside the weight-gradient GEMMs.
  Trace t = render(o, 0);
  int inline_ar = 0, side_ar = 0;
  std::vector<std::pair<int64_t, int64_t>> gemms;
  for (const Ev* k : t.of("kernel")) {
    if (k->name.find("gemm") != std::string::npos) gemms.push_back({k->ts, k->end()});
  }
  for (const Ev* k : t.of("kernel")) {
    if (k->name.rfind("ncclDevKernel_AllReduce", 0) != 0) continue;
    if (k->arg("stream") == 7) {
      ++inline_ar;
    } else if (busy_within(gemms, k->ts, k->end()) > 0) {
      ++side_ar;
    }
  }
  EXPECT_GE(inline_ar, 2 * o.layers * o.steps);
  EXPECT_GE(side_ar, 2 * o.layers * o.steps);
  // With one rank there is nothing to reduce.
  const Trace single = render(small(Workload::kTrainTP, 1), 0);  // kept alive: of() points into it
  for (const Ev* k : single.of("kernel")) {
    EXPECT_EQ(k->name.rfind("nccl", 0), std::string::npos) << k->name;
  }
}

TEST(Synth, DataloaderStepWaitsOnTheCpuWhileTheGpuIdles) {
  for (int ranks : {1, 2}) {
    SCOPED_TRACE("ranks " + std::to_string(ranks));
    Options o = small(Workload::kDataloader, ranks);
    Analyzed r = analyze_traces(o, "synth_dl");
    ASSERT_TRUE(r.w);
    ASSERT_EQ(r.a.gpus.size(), static_cast<size_t>(ranks));
    for (const auto& g : r.a.gpus) {
      EXPECT_GT(static_cast<double>(g.idle_ns) / static_cast<double>(g.idle_ns + g.busy_ns), 0.5) << "rank " << g.rank;
    }
    // The critical path is mostly the main thread: waiting for the loader, pinning, launching.
    const int64_t cpu = path_ns(r.a, "cpu");
    for (const auto& part : r.a.critical_path.breakdown) EXPECT_GE(cpu, part.ns) << part.category;
    EXPECT_GT(static_cast<double>(cpu) / static_cast<double>(r.a.critical_path.length_ns), 0.5);
    // Each step opens with the DataLoader's __next__, longer than all the step's GPU work.
    Trace t = render(o, 0);
    std::vector<std::pair<int64_t, int64_t>> gpu;
    for (const Ev* g : t.gpu_ops()) gpu.push_back({g->ts, g->end()});
    int loads = 0;
    for (const Ev* a : t.of("user_annotation")) {
      if (a->name != "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__") continue;
      ++loads;
      const Ev* step = nullptr;
      for (const Ev* s : t.of("user_annotation")) {
        if (s->name.rfind("ProfilerStep#", 0) == 0 && s->ts <= a->ts && a->end() <= s->end()) step = s;
      }
      ASSERT_NE(step, nullptr);
      EXPECT_GT(a->dur, busy_within(gpu, step->ts, step->end()));
    }
    EXPECT_EQ(loads, o.steps);
  }
}

TEST(Synth, WriteTracesWritesOneCompleteFilePerRank) {
  std::string dir = test::temp_dir("synth_write") + "/nested/out";
  Options o = small(Workload::kInferDecode, 3);
  std::vector<FileInfo> files;
  Status st = write_traces(o, dir, &files);
  ASSERT_TRUE(st.ok()) << st.error().message();
  ASSERT_EQ(files.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const FileInfo& f = files[static_cast<size_t>(r)];
    EXPECT_EQ(std::filesystem::path(f.path).filename().string(),
              "infer-decode_rank" + std::to_string(r) + ".json");
    EXPECT_EQ(f.rank, r);
    EXPECT_EQ(f.layers, o.layers);
    ASSERT_TRUE(std::filesystem::exists(f.path));
    EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(f.path)), f.bytes);
    std::ifstream in(f.path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str(), render_trace(o, r));  // same text as in memory
    EXPECT_EQ(static_cast<int64_t>(json::parse(ss.str())["traceEvents"].size()), f.events);
  }
  // Only the committed files: no temporaries left behind.
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().extension(), ".json") << e.path();
    ++entries;
  }
  EXPECT_EQ(entries, 3);
  std::vector<std::string> paths;
  ASSERT_TRUE(write_traces(o, dir, &paths).ok());
  EXPECT_EQ(paths.size(), 3u);
  // A path that cannot be a directory is an error, not a crash.
  std::string file = dir + "/infer-decode_rank0.json/sub";
  EXPECT_FALSE(write_traces(o, file, &paths).ok());
}

int run_cli(const std::string& args, std::string* err = nullptr) {
  std::string errfile = test::temp_dir("synth_cli_err") + "/stderr.txt";
  std::string cmd = std::string(EMO_BINARY) + " " + args + " > /dev/null 2> " + errfile;
  int rc = std::system(cmd.c_str());
  if (err) {
    std::ifstream in(errfile);
    std::stringstream ss;
    ss << in.rdbuf();
    *err = ss.str();
  }
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(Synth, CliBadValuesExit1AndUsageErrorsExit2) {
  std::string dir = test::temp_dir("synth_cli");
  std::string err;
  EXPECT_EQ(run_cli("synth bogus -o " + dir, &err), 1);
  EXPECT_NE(err.find("error:"), std::string::npos) << err;
  EXPECT_EQ(run_cli("synth train-dp --ranks 0 -o " + dir, &err), 1);
  EXPECT_NE(err.find("--ranks"), std::string::npos) << err;
  EXPECT_EQ(run_cli("synth infer-decode --decode-tokens 0 -o " + dir), 1);
  EXPECT_EQ(run_cli("synth train-pp --microbatches 0 -o " + dir, &err), 1);
  EXPECT_NE(err.find("--microbatches"), std::string::npos) << err;
  EXPECT_EQ(run_cli("synth train-dp"), 2);                         // -o missing
  EXPECT_EQ(run_cli("synth train-dp --ranks two -o " + dir), 2);  // not a number
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(Synth, CliHelpListsEveryFamily) {
  std::string out = test::temp_dir("synth_cli_help") + "/help.txt";
  ASSERT_EQ(std::system((std::string(EMO_BINARY) + " synth --help > " + out + " 2>&1").c_str()), 0);
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  for (Workload w : kAllWorkloads) {
    EXPECT_NE(ss.str().find(workload_name(w)), std::string::npos) << workload_name(w);
    EXPECT_NE(ss.str().find(workload_summary(w)), std::string::npos) << workload_name(w);
  }
  EXPECT_NE(ss.str().find("--microbatches"), std::string::npos);
}

TEST(Synth, CliWritesFilesAndJsonSummary) {
  std::string dir = test::temp_dir("synth_cli_ok");
  std::string json_path = dir + "/summary.json";
  ASSERT_EQ(run_cli("synth train-dp --ranks 2 --layers 2 --steps 1 --seed 3 -o " + dir + "/traces --json " +
                    json_path),
            0);
  std::ifstream in(json_path);
  json j = json::parse(in);
  ASSERT_EQ(j["files"].size(), 2u);
  ASSERT_EQ(j["events"].size(), 2u);
  EXPECT_EQ(j["layers"], 2);
  EXPECT_EQ(j["workload"], "train-dp");
  for (size_t i = 0; i < 2; ++i) {
    std::string path = j["files"][i];
    ASSERT_TRUE(std::filesystem::exists(path));
    std::ifstream f(path);
    EXPECT_EQ(json::parse(f)["traceEvents"].size(), j["events"][i].get<size_t>());
  }
  Options o;
  o.ranks = 2;
  o.layers = 2;
  o.steps = 1;
  o.seed = 3;
  std::ifstream f0(j["files"][0].get<std::string>(), std::ios::binary);
  std::stringstream ss;
  ss << f0.rdbuf();
  EXPECT_EQ(ss.str(), render_trace(o, 0));
}

}  // namespace
}  // namespace emo::synth
