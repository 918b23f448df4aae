// The step packed over the processes of a run without assembling it anywhere (pack::make_packs_part after
// analysis::load_part and analyze_part), over dist::local_world (one thread per process): process 0's whole
// Packing must give the same JSON (every pack), text and CSV as one process's make_packs(), at any number of
// processes (more than there are ranks included), with the files in any order; each process's own part
// must be the whole step's packs of its ranks (the same ops, by their ids in the whole graph); and every
// error must be one process's, on every process.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "emo/analysis/analysis.h"
#include "emo/dist/dist.h"
#include "emo/pack/pack.h"
#include "emo/synth/synth.h"
#include "load_cases.h"
#include "test_util.h"

namespace emo {
namespace {

using test::synth_files;

struct Parts {
  std::vector<Status> statuses;              // per process
  std::vector<pack::PackingPart> packings;   // per process
  std::vector<std::vector<graph::NodeId>> global;  // per process: its part's node ids in the whole graph
  std::vector<size_t> first_rank;            // per process
};

Parts pack_parts(const std::vector<std::string>& paths, const analysis::LoadOptions& lo,
                 const device::DeviceProfile& profile, const pack::PackOptions& po, int size) {
  auto comms = dist::local_world(size);
  Parts out;
  out.statuses.resize(size_t(size));
  out.packings.resize(size_t(size));
  out.global.resize(size_t(size));
  out.first_rank.resize(size_t(size));
  std::vector<std::thread> threads;
  for (int p = 0; p < size; ++p) {
    threads.emplace_back([&, p] {
      dist::Comm& comm = *comms[size_t(p)];
      auto w = analysis::load_part(paths, lo, comm);
      if (!w) {
        out.statuses[size_t(p)] = w.error();
        return;
      }
      replay::ShardTimeline replayed;
      auto a = analysis::analyze_part(w->part, comm, &replayed);
      if (!a) {
        out.statuses[size_t(p)] = a.error();
        return;
      }
      auto k = pack::make_packs_part(w->part, *a, replayed, profile, po, comm);
      if (!k) {
        out.statuses[size_t(p)] = k.error();
        return;
      }
      if (k->whole.has_value() != (p == 0)) out.statuses[size_t(p)] = make_error("", "the whole packing is not process 0's alone");
      out.packings[size_t(p)] = std::move(*k);
      out.global[size_t(p)] = w->part.global;
      out.first_rank[size_t(p)] = w->part.first_rank;
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Process `p`'s own packing against the whole step's: its GPUs' ops (as whole-graph ids), atoms and packs,
// and the step's signatures, replicas, plan and units.
void expect_part_of(const pack::Packing& one, const pack::Packing& mine, const std::vector<graph::NodeId>& global,
                    size_t first_rank, const std::string& what) {
  EXPECT_EQ(mine.step_ns, one.step_ns) << what;
  EXPECT_EQ(mine.kernel_ops, one.kernel_ops) << what;
  EXPECT_EQ(mine.profiled_units, one.profiled_units) << what;
  EXPECT_EQ(mine.per_gpu_units, one.per_gpu_units) << what;
  EXPECT_EQ(mine.replica_sets, one.replica_sets) << what;
  EXPECT_EQ(mine.plan_steps, one.plan_steps) << what;
  EXPECT_EQ(mine.profiling_gpu_ns, one.profiling_gpu_ns) << what;
  ASSERT_EQ(mine.signatures.size(), one.signatures.size()) << what;
  for (size_t i = 0; i < one.signatures.size(); ++i) {
    EXPECT_EQ(mine.signatures[i].hash, one.signatures[i].hash) << what << ", signature " << i;
    EXPECT_EQ(mine.signatures[i].members, one.signatures[i].members) << what << ", signature " << i;
  }
  ASSERT_LE(first_rank + mine.gpus.size(), one.gpus.size()) << what;
  for (size_t r = 0; r < mine.gpus.size(); ++r) {
    const pack::GpuOps& want = one.gpus[first_rank + r];
    const pack::GpuOps& got = mine.gpus[r];
    EXPECT_EQ(got.rank_id, want.rank_id) << what;
    EXPECT_EQ(got.occurrence, want.occurrence) << what << ", rank " << want.rank_id;
    std::vector<graph::NodeId> ops;
    for (graph::NodeId n : got.ops) ops.push_back(global[n]);
    EXPECT_EQ(ops, want.ops) << what << ", rank " << want.rank_id;
    EXPECT_EQ(mine.replica_set[r], one.replica_set[first_rank + r]) << what << ", rank " << want.rank_id;
  }
  // The atoms and packs of its GPUs, in order.
  std::vector<const pack::Atom*> atoms;
  for (const pack::Atom& at : one.atoms) {
    if (at.rank.index() >= first_rank && at.rank.index() < first_rank + mine.gpus.size()) atoms.push_back(&at);
  }
  ASSERT_EQ(mine.atoms.size(), atoms.size()) << what;
  for (size_t i = 0; i < atoms.size(); ++i) {
    EXPECT_EQ(mine.atoms[i].rank.index() + first_rank, atoms[i]->rank.index()) << what;
    EXPECT_EQ(mine.atoms[i].first, atoms[i]->first) << what;
    EXPECT_EQ(mine.atoms[i].begin_ns, atoms[i]->begin_ns) << what;
    EXPECT_EQ(mine.atoms[i].busy_ns, atoms[i]->busy_ns) << what;
    EXPECT_EQ(mine.atoms[i].signature, atoms[i]->signature) << what << ", atom " << i;
  }
  std::vector<const pack::Pack*> packs;
  for (const pack::Pack& pk : one.packs) {
    if (pk.rank.index() >= first_rank && pk.rank.index() < first_rank + mine.gpus.size()) packs.push_back(&pk);
  }
  ASSERT_EQ(mine.packs.size(), packs.size()) << what;
  for (size_t i = 0; i < packs.size(); ++i) {
    EXPECT_EQ(mine.packs[i].first_op, packs[i]->first_op) << what;
    EXPECT_EQ(mine.packs[i].last_op, packs[i]->last_op) << what;
    EXPECT_EQ(mine.packs[i].end_ns, packs[i]->end_ns) << what;
    EXPECT_EQ(mine.packs[i].signature, packs[i]->signature) << what;
    EXPECT_EQ(mine.packs[i].slack, packs[i]->slack) << what;
  }
}

void expect_packing_of_one_process(const std::vector<std::string>& paths, const std::string& what,
                                   std::initializer_list<int> sizes, const pack::PackOptions& po = {},
                                   const analysis::LoadOptions& lo = {}) {
  const device::DeviceProfile profile = test::profile("h100");
  auto w = analysis::load(paths, lo);
  ASSERT_TRUE(w.ok()) << what << ": " << w.error().message();
  auto one = pack::make_packs(*w, analysis::analyze(*w), profile, po);
  ASSERT_TRUE(one.ok()) << what << ": " << one.error().message();
  const std::string json = pack::to_json(*one, true).dump(1), text = pack::to_text(*one), csv = pack::packs_csv(*one);
  for (int size : sizes) {
    const std::string at = what + ", P = " + std::to_string(size);
    const Parts run = pack_parts(paths, lo, profile, po, size);
    for (int p = 0; p < size; ++p) {
      ASSERT_TRUE(run.statuses[size_t(p)].ok()) << at << ", process " << p << ": " << run.statuses[size_t(p)].error().message();
    }
    const pack::Packing& whole = *run.packings[0].whole;
    EXPECT_EQ(pack::to_json(whole, true).dump(1), json) << at;
    EXPECT_EQ(pack::to_text(whole), text) << at;
    EXPECT_EQ(pack::packs_csv(whole), csv) << at;
    EXPECT_EQ(whole.replica_set, one->replica_set) << at;
    for (int p = 0; p < size; ++p) {
      expect_part_of(*one, run.packings[size_t(p)].mine, run.global[size_t(p)], run.first_rank[size_t(p)],
                     at + ", process " + std::to_string(p));
    }
  }
}

TEST(PackPart, TheSyntheticFamiliesPackAsOneProcess) {
  for (auto wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    auto files = synth_files(std::string("pack_part_") + synth::workload_name(wl), wl, 4);
    ASSERT_EQ(files.size(), 4u);
    std::rotate(files.begin(), files.begin() + 1, files.end());  // file order is not rank order
    // P = 6: two processes without a rank.
    expect_packing_of_one_process(files, synth::workload_name(wl), {1, 2, 3, 4, 6});
  }
}

// Data-parallel replicas on different processes share signatures (the members add up across processes) and
// one replica set; a pipeline's stages do not.
TEST(PackPart, ReplicasAcrossProcessesAreFound) {
  const device::DeviceProfile profile = test::profile("h100");
  auto dp = synth_files("pack_part_replicas", synth::Workload::kTrainDP, 4);
  const Parts run = pack_parts(dp, {}, profile, {}, 4);
  for (const Status& st : run.statuses) ASSERT_TRUE(st.ok()) << st.error().message();
  const pack::Packing& whole = *run.packings[0].whole;
  EXPECT_EQ(whole.replica_sets, 1);
  EXPECT_EQ(whole.replica_set, std::vector<uint32_t>(4, 0));
  EXPECT_LT(whole.profiled_units * 2, whole.per_gpu_units);
  for (const pack::PackingPart& k : run.packings) EXPECT_EQ(k.mine.replica_set, std::vector<uint32_t>{0});
  auto pp = synth_files("pack_part_stages", synth::Workload::kTrainPP, 4);
  const Parts stages = pack_parts(pp, {}, profile, {}, 2);
  for (const Status& st : stages.statuses) ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_GT(stages.packings[0].whole->replica_sets, 1);
}

// Kernel-level packing (every op a pack) and a fixed minimum pack length.
TEST(PackPart, PackOptionsAreOneProcesss) {
  auto files = synth_files("pack_part_options", synth::Workload::kTrainTP, 3);
  pack::PackOptions per_kernel;
  per_kernel.per_kernel = true;
  expect_packing_of_one_process(files, "per kernel", {2, 3}, per_kernel);
  pack::PackOptions long_packs;
  long_packs.min_pack_ns = 3'000'000;
  long_packs.critical_slack_ns = 0;
  long_packs.profile_clocks = 6;
  expect_packing_of_one_process(files, "3 ms packs", {2, 4}, long_packs);
}

TEST(PackPart, TheEightRankDlrmStepPacksAsOneProcess) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  auto files = analysis::expand_trace_paths({dir});
  ASSERT_TRUE(files.ok()) << files.error().message();
  expect_packing_of_one_process(*files, "dlrm", {2, 3, 8});
}

TEST(PackPart, RealLoopsPackAsOneProcess) {
  EMO_REQUIRE_SHARED(queued, "traces/hta/tests/data/negative_queue_length_values_check/rank0.json.gz");
  EMO_REQUIRE_SHARED(tail, "traces/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz");
  for (const std::string& path : {queued, tail}) expect_packing_of_one_process({path}, path, {1, 2});
}

// Traces of other GPU models than --device on two ranks held by two processes: process 0 says the first
// rank's (in rank order), as one process, and no other process says anything.
TEST(PackPart, DeviceWarningsAreTheFirstRanks) {
  auto files = synth_files("pack_part_devices", synth::Workload::kTrainDP, 6);
  ASSERT_EQ(files.size(), 6u);
  const std::string dir = std::filesystem::path(files[0]).parent_path().string();
  for (size_t r = 0; r < files.size(); ++r) {
    nlohmann::json j = nlohmann::json::parse(test::slurp(files[r]));
    for (auto& d : j["deviceProperties"]) d["name"] = r == 4 ? "Tesla V100-SXM2-16GB" : r == 5 ? "NVIDIA A10G" : "";
    files[r] = test::write(dir, "device_rank" + std::to_string(r) + ".json", j.dump());
  }
  auto one = analysis::load(files, {});
  ASSERT_TRUE(one.ok()) << one.error().message();
  const std::vector<std::string> want = analysis::device_warnings(*one, "h100");
  ASSERT_EQ(want.size(), 1u);
  ASSERT_NE(want[0].find("V100"), std::string::npos) << want[0];
  for (int size : {2, 4, 6}) {
    auto comms = dist::local_world(size);
    std::vector<Result<std::vector<std::string>>> said(size_t(size), std::vector<std::string>{});
    std::vector<std::thread> threads;
    for (int p = 0; p < size; ++p) {
      threads.emplace_back([&, p] {
        auto w = analysis::load_part(files, {}, *comms[size_t(p)]);
        if (!w) {
          said[size_t(p)] = w.error();
          return;
        }
        said[size_t(p)] = analysis::device_warnings_part(*w, "h100", *comms[size_t(p)]);
      });
    }
    for (auto& t : threads) t.join();
    for (int p = 0; p < size; ++p) {
      ASSERT_TRUE(said[size_t(p)].ok()) << "P = " << size << ": " << said[size_t(p)].error().message();
      EXPECT_EQ(*said[size_t(p)], p == 0 ? want : std::vector<std::string>{}) << "P = " << size << ", process " << p;
    }
  }
}

// What one process refuses, every process refuses with the same error: a step without GPU ops (named by its
// file, which one process of three holds), and a plan with more clocks than the device has.
TEST(PackPart, ErrorsAreOneProcesssOnEveryProcess) {
  const device::DeviceProfile profile = test::profile("h100");
  const std::string dir = test::temp_dir("pack_part_errors");
  const std::string cpu_only = test::write(dir, "cpuonly.json", R"({"traceEvents":[
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":400},
{"ph":"X","cat":"cpu_op","name":"aten::relu","pid":1,"tid":1,"ts":420,"dur":300}]})");
  auto files = synth_files("pack_part_error_files", synth::Workload::kTrainDP, 2);
  pack::PackOptions too_many;
  too_many.profile_clocks = 1000;
  const struct {
    std::vector<std::string> paths;
    pack::PackOptions po;
    const char* says;
  } cases[] = {{{cpu_only}, {}, "no GPU operations"}, {files, too_many, "--profile-clocks"}};
  for (const auto& c : cases) {
    auto w = analysis::load(c.paths, {});
    ASSERT_TRUE(w.ok()) << w.error().message();
    auto one = pack::make_packs(*w, analysis::analyze(*w), profile, c.po);
    ASSERT_FALSE(one.ok()) << c.says;
    EXPECT_NE(one.error().message().find(c.says), std::string::npos) << one.error().message();
    for (int size : {2, 3}) {
      const Parts run = pack_parts(c.paths, {}, profile, c.po, size);
      for (int p = 0; p < size; ++p) {
        ASSERT_FALSE(run.statuses[size_t(p)].ok()) << c.says << ", P = " << size << ", process " << p;
        EXPECT_EQ(run.statuses[size_t(p)].error().message(), one.error().message()) << "P = " << size << ", process " << p;
        EXPECT_EQ(run.statuses[size_t(p)].error().note, one.error().note) << "P = " << size << ", process " << p;
      }
    }
  }
}

}  // namespace
}  // namespace emo
