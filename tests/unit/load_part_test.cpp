// The step read and analyzed over the processes of a run without assembling it anywhere (analysis::load_part,
// analyze_part, report_part), over dist::local_world (one thread per process): what process 0 reports — the
// analyze JSON with every kernel, the text, the warnings — must be the same bytes as one process's load(),
// analyze() and to_json()/to_text()/step_warnings(), at any number of processes (more than there are
// ranks included), with the files in any order; and every error must be the one one process says.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "emo/analysis/analysis.h"
#include "emo/analysis/deprofile.h"
#include "emo/dist/dist.h"
#include "emo/synth/synth.h"
#include "load_cases.h"
#include "test_util.h"

namespace emo {
namespace {

using test::synth_files;

struct PartsRun {
  std::vector<Status> statuses;  // per process
  analysis::StepReport report;   // process 0's
  std::vector<std::vector<int>> ranks;  // per process, the ranks it built
};

PartsRun run_parts(const std::vector<std::string>& paths, const analysis::LoadOptions& o, int size,
              const Status& before = {}) {
  auto comms = dist::local_world(size);
  PartsRun out;
  out.statuses.resize(size_t(size));
  out.ranks.resize(size_t(size));
  std::vector<std::thread> threads;
  for (int p = 0; p < size; ++p) {
    threads.emplace_back([&, p] {
      dist::Comm& comm = *comms[size_t(p)];
      auto w = analysis::load_part(paths, o, comm, p == 0 ? before : Status{});
      if (!w) {
        out.statuses[size_t(p)] = w.error();
        return;
      }
      for (const auto& t : w->ranks) out.ranks[size_t(p)].push_back(t.rank);
      auto a = analysis::analyze_part(w->part, comm);
      if (!a) {
        out.statuses[size_t(p)] = a.error();
        return;
      }
      auto r = analysis::report_part(*w, *a, {true, true, true}, comm);
      if (!r) {
        out.statuses[size_t(p)] = r.error();
        return;
      }
      if (p == 0) out.report = std::move(*r);
      else if (!r->text.empty() || !r->json.is_null()) out.statuses[size_t(p)] = make_error("", "reported on a process other than 0");
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void expect_reports_of_one_process(const std::vector<std::string>& paths, const std::string& what,
                                   std::initializer_list<int> sizes, const analysis::LoadOptions& o = {}) {
  auto one = analysis::load(paths, o);
  ASSERT_TRUE(one.ok()) << what << ": " << one.error().message();
  const analysis::Analysis a = analysis::analyze(*one);
  const std::string json = analysis::to_json(*one, a, true).dump(1);
  const std::string text = analysis::to_text(*one, a);
  const std::vector<std::string> warnings = analysis::step_warnings(*one, a);
  const std::string kernels_csv = analysis::kernels_csv(*one, a), path_csv = analysis::critical_path_csv(*one, a);
  for (int size : sizes) {
    const PartsRun run = run_parts(paths, o, size);
    for (int p = 0; p < size; ++p) {
      ASSERT_TRUE(run.statuses[size_t(p)].ok()) << what << ", P = " << size << ", process " << p << ": "
                                                << run.statuses[size_t(p)].error().message();
    }
    // Each process builds a contiguous run of the ranks, in rank order, process p's before process p + 1's.
    std::vector<int> all;
    for (const auto& r : run.ranks) all.insert(all.end(), r.begin(), r.end());
    std::vector<int> want;
    for (const auto& t : one->ranks) want.push_back(t.rank);
    EXPECT_EQ(all, want) << what << ", P = " << size;
    EXPECT_EQ(run.report.json.dump(1), json) << what << ", P = " << size;
    EXPECT_EQ(run.report.text, text) << what << ", P = " << size;
    EXPECT_EQ(run.report.warnings, warnings) << what << ", P = " << size;
    EXPECT_EQ(run.report.kernels_csv, kernels_csv) << what << ", P = " << size;
    EXPECT_EQ(run.report.critical_path_csv, path_csv) << what << ", P = " << size;
  }
}

TEST(LoadPart, TheReportsOfTheSyntheticFamiliesAreOneProcesss) {
  for (auto wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    auto files = synth_files(std::string("load_part_") + synth::workload_name(wl), wl, 4);
    ASSERT_EQ(files.size(), 4u);
    std::rotate(files.begin(), files.begin() + 1, files.end());  // file order is not rank order: traces move
    // P = 6: two processes without a rank.
    expect_reports_of_one_process(files, synth::workload_name(wl), {1, 2, 3, 4, 6});
  }
}

// A step with doubts on every rank: rank 2's step another ProfilerStep than the others', and kernels the
// profiler lost on every rank (launch calls without their GPU op): the warnings that compare ranks with the
// first and the example of the first lost launch (rank 0's, not a later process's) are one process's.
TEST(LoadPart, WarningsAcrossRanksAreOneProcesss) {
  auto files = synth_files("load_part_doubts", synth::Workload::kTrainDP, 3);
  ASSERT_EQ(files.size(), 3u);
  const std::string dir = std::filesystem::path(files[0]).parent_path().string();
  auto w = analysis::load({files[2]}, {});
  ASSERT_TRUE(w.ok()) << w.error().message();
  const std::string step = "ProfilerStep#" + std::to_string(w->steps[0]);
  const std::string later = "ProfilerStep#" + std::to_string(w->steps[0] + 7);
  for (size_t r = 0; r < files.size(); ++r) {
    nlohmann::json j = nlohmann::json::parse(test::slurp(files[r]));
    nlohmann::json kept = nlohmann::json::array();
    int kernels = 0;
    for (auto& e : j["traceEvents"]) {
      if (e.value("cat", "") == "kernel" && kernels++ % 4 == int(r) + 1) continue;  // lost: another on each rank
      if (r == 2 && e.value("name", "") == step) e["name"] = later;
      kept.push_back(std::move(e));
    }
    j["traceEvents"] = std::move(kept);
    files[r] = test::write(dir, "doubtful_rank" + std::to_string(r) + ".json", j.dump());
  }
  auto one = analysis::load(files, {});
  ASSERT_TRUE(one.ok()) << one.error().message();
  const std::vector<std::string> said = analysis::step_warnings(*one, analysis::analyze(*one));
  const auto says = [&](const std::string& text) {
    return std::any_of(said.begin(), said.end(), [&](const std::string& x) { return x.find(text) != std::string::npos; });
  };
  ASSERT_TRUE(says("not one iteration")) << "the test's step does not differ";
  ASSERT_TRUE(says("launch calls have no GPU activity")) << "the test's kernels are not missed";
  expect_reports_of_one_process(files, "doubtful ranks", {1, 2, 3});
}

// Five one-rank jobs of different models given as one run (TraceLens's H100 samples): the ranks form groups
// that share no collective, captured hours apart.
TEST(LoadPart, UnrelatedRealRanksWarnAsOneProcess) {
  EMO_REQUIRE_SHARED(dir, "traces/tracelens/tests/traces/h100");
  auto files = analysis::expand_trace_paths({dir});
  ASSERT_TRUE(files.ok()) << files.error().message();
  expect_reports_of_one_process(*files, "tracelens h100", {2, 3, 5});
}

TEST(LoadPart, TheEightRankDlrmStepIsOneProcesss) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  auto files = analysis::expand_trace_paths({dir});
  ASSERT_TRUE(files.ok()) << files.error().message();
  expect_reports_of_one_process(*files, "dlrm", {2, 3, 8});
}

// Real one-rank loops (queued ops; a free GPU tail), with a process that holds no rank.
TEST(LoadPart, RealLoopsAreOneProcesss) {
  EMO_REQUIRE_SHARED(queued, "traces/hta/tests/data/negative_queue_length_values_check/rank0.json.gz");
  EMO_REQUIRE_SHARED(tail, "traces/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz");
  for (const std::string& path : {queued, tail}) expect_reports_of_one_process({path}, path, {1, 2});
}

// what_if_part on every process against one process's what_if(): the spans, the matches, and the errors.
// With `topology`, process 0's report of the collectives' transfers too.
void expect_what_ifs_of_one_process(const std::vector<std::string>& paths, const std::string& what,
                                    const std::vector<std::vector<std::string>>& asks, std::initializer_list<int> sizes,
                                    const analysis::TopologyQuestion* topology = nullptr) {
  auto one = analysis::load(paths, {});
  ASSERT_TRUE(one.ok()) << what << ": " << one.error().message();
  for (const auto& ask : asks) {
    std::vector<analysis::Scale> scales;
    std::string named;
    for (const std::string& text : ask) {
      auto sc = analysis::parse_scale(text);
      ASSERT_TRUE(sc.ok()) << text;
      scales.push_back(*sc);
      named += " " + text;
    }
    auto want = analysis::what_if(*one, scales, topology);
    for (int size : sizes) {
      auto comms = dist::local_world(size);
      std::vector<Result<analysis::WhatIf>> got(size_t(size), make_error("", "not run"));
      std::vector<std::thread> threads;
      for (int p = 0; p < size; ++p) {
        threads.emplace_back([&, p] {
          auto w = analysis::load_part(paths, {}, *comms[size_t(p)]);
          if (!w) {
            got[size_t(p)] = w.error();
            return;
          }
          got[size_t(p)] = analysis::what_if_part(*w, scales, *comms[size_t(p)], topology);
        });
      }
      for (auto& t : threads) t.join();
      for (int p = 0; p < size; ++p) {
        const auto& r = got[size_t(p)];
        const std::string where = what + named + ", P = " + std::to_string(size) + ", process " + std::to_string(p);
        ASSERT_EQ(r.ok(), want.ok()) << where << ": " << (r.ok() ? want.error().message() : r.error().message());
        if (!want.ok()) {
          EXPECT_EQ(r.error().message(), want.error().message()) << where;
          continue;
        }
        EXPECT_EQ(r->baseline_span_ns, want->baseline_span_ns) << where;
        EXPECT_EQ(r->predicted_span_ns, want->predicted_span_ns) << where;
        EXPECT_EQ(r->matched, want->matched) << where;
        ASSERT_EQ(r->topology.has_value(), topology != nullptr) << where;
        if (topology && p == 0) {
          EXPECT_EQ(analysis::to_json(*r->topology).dump(1), analysis::to_json(*want->topology).dump(1)) << where;
          EXPECT_EQ(analysis::topology_warning(*r->topology), analysis::topology_warning(*want->topology)) << where;
        }
      }
    }
  }
}

// Kernels by name, collective kernels (whose transfer lies on a collective another process may hold), a
// stream, categories and the host; overlapping scales (the last that matches a node wins); and the errors
// in their order: a scale that matches nothing before a later malformed one.
TEST(LoadPart, WhatIfsAreOneProcesss) {
  for (auto wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    auto files = synth_files(std::string("load_part_whatif_") + synth::workload_name(wl), wl, 4);
    auto one = analysis::load(files, {});
    ASSERT_TRUE(one.ok());
    ASSERT_GT(one->graph.stats.collectives_matched, 0);
    int stream = -1;
    for (const auto& lane : one->graph.lanes) {
      if (lane.gpu) stream = lane.stream;
    }
    // Ranks 2 and 3's collective kernels renamed: a scale of them alone reaches collectives that rank 0's
    // process holds.
    const std::string dir = std::filesystem::path(files[0]).parent_path().string();
    for (size_t r = 2; r < files.size(); ++r) {
      nlohmann::json j = nlohmann::json::parse(test::slurp(files[r]));
      for (auto& e : j["traceEvents"]) {
        const std::string name = e.value("name", "");
        if (e.value("cat", "") == "kernel" && name.find("nccl") != std::string::npos) e["name"] = name + "_late";
      }
      files[r] = test::write(dir, "renamed_rank" + std::to_string(r) + ".json", j.dump());
    }
    one = analysis::load(files, {});
    ASSERT_TRUE(one.ok());
    ASSERT_GT(one->graph.stats.collectives_matched, 0);
    const std::vector<std::vector<std::string>> asks = {
        {"nccl=3"},
        {"_late$=3"},
        {"nccl=0.5", "_late$=4"},
        {"gemm|Gemm|sm90=1.5", "nccl=0.25", "cat:host=0.5"},
        {".=2", "nccl=1"},  // every GPU op twice as long, the collectives' transfers as measured
        {"stream:" + std::to_string(stream) + "=0.5", "cat:cpu_op=2", "cat:cuda_runtime=0"},
        {"no such kernel anywhere=2", "(unclosed=2"},
        {"nccl=2", "(unclosed=2"},
    };
    expect_what_ifs_of_one_process(files, synth::workload_name(wl), asks, {1, 2, 3, 5});
  }
}

analysis::Topology topology_of(const std::string& text) {
  auto t = analysis::topology_from_json(text, "topology.json");
  EXPECT_TRUE(t.ok()) << t.error().message();
  return t.ok() ? *t : analysis::Topology{};
}

// The collectives' transfers on another machine, each modeled by the process that holds it with its members'
// ranks from the others: the report (each collective, the fitted links, the unmatched kernels' check) and
// the replays, with and without the recorded machine and with scales on top; a topology that does not fit
// the step (its ranks cross hosts it has no link between) is the same error.
TEST(LoadPart, TopologyWhatIfsAreOneProcesss) {
  const analysis::Topology one_host = topology_of(
      R"({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 200, "latency_us": 6}})");
  const analysis::Topology two_hosts = topology_of(
      R"({"gpus_per_host": 2, "intra_host": {"bandwidth_gb_s": 200, "latency_us": 6},
          "inter_host": {"bandwidth_gb_s": 25, "latency_us": 10}})");
  const analysis::Topology no_network = topology_of(
      R"({"gpus_per_host": 1, "intra_host": {"bandwidth_gb_s": 200, "latency_us": 6}})");
  const analysis::TopologyQuestion modeled{two_hosts, std::nullopt}, scaled{two_hosts, one_host},
      unfit{no_network, std::nullopt};
  for (auto wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    auto files = synth_files(std::string("load_part_topology_") + synth::workload_name(wl), wl, 4);
    std::reverse(files.begin(), files.end());
    const std::string what = synth::workload_name(wl);
    expect_what_ifs_of_one_process(files, what + " modeled", {{}, {"nccl=0.5"}}, {1, 2, 3, 5}, &modeled);
    expect_what_ifs_of_one_process(files, what + " scaled", {{}, {"gemm|Gemm|sm90=1.5"}}, {2, 4}, &scaled);
    expect_what_ifs_of_one_process(files, what + " unfit", {{}, {"no such kernel anywhere=2"}}, {1, 3}, &unfit);
  }
  // The last stage pair's process group renamed "0a": its collectives come before the first pairs' in the
  // step's order (collectives are ordered by group name, then seq) but are held by a later process, so they
  // reach process 0 out of the step's order.
  {
    auto files = synth_files("load_part_topology_pg_order", synth::Workload::kTrainPP, 4);
    const std::string dir = std::filesystem::path(files[0]).parent_path().string();
    for (size_t r = 0; r < files.size(); ++r) {
      nlohmann::json j = nlohmann::json::parse(test::slurp(files[r]));
      for (auto& e : j["traceEvents"]) {
        if (e.contains("args") && e["args"].value("Process Group Name", "") == "3") e["args"]["Process Group Name"] = "0a";
      }
      for (auto& pg : j["distributedInfo"]["pg_config"]) {
        if (pg.value("pg_name", "") == "3") pg["pg_name"] = "0a";
      }
      files[r] = test::write(dir, "pg_order_rank" + std::to_string(r) + ".json", j.dump());
    }
    auto w = analysis::load(files, {});
    ASSERT_TRUE(w.ok()) << w.error().message();
    // In the step's order, a collective held by rank 2 or 3 (process 1 at P = 2) comes before one held by
    // rank 0 or 1 (process 0).
    int latest = -1;
    bool out_of_rank_order = false;
    for (graph::NodeId n = 0; n < w->graph.num_nodes(); ++n) {
      if (w->graph.kind[n] != graph::NodeKind::kCollective) continue;
      const int rank = w->graph.rank_id(graph::RankIndex(w->graph.rank[n]));
      out_of_rank_order = out_of_rank_order || (rank < 2 && latest >= 2);
      latest = std::max(latest, rank);
    }
    ASSERT_TRUE(out_of_rank_order);
    expect_what_ifs_of_one_process(files, "train-pp, group 3 renamed 0a", {{}, {"nccl=0.5"}}, {2, 4}, &modeled);
  }
  // Eight pipeline stages, the last three on no host: stage pairs (4, 5) and (5, 6) say rank 5, (6, 7) rank 6,
  // each from another process; the error is the first collective's in the step's order.
  auto pp = synth_files("load_part_topology_pp8", synth::Workload::kTrainPP, 8);
  const analysis::TopologyQuestion short_placement{
      topology_of(R"({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 200, "latency_us": 6},
                      "placement": [0, 0, 0, 0, 0]})"),
      std::nullopt};
  auto one = analysis::load(pp, {});
  ASSERT_TRUE(one.ok());
  auto want = analysis::what_if(*one, {}, &short_placement);
  ASSERT_FALSE(want.ok());
  EXPECT_NE(want.error().message().find("rank 5 is on no host"), std::string::npos) << want.error().message();
  expect_what_ifs_of_one_process(pp, "train-pp 8 ranks, 5 placed", {{}}, {2, 3, 4}, &short_placement);
}

TEST(LoadPart, WhatIfsOnTheEightRankDlrmStepAreOneProcesss) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  auto files = analysis::expand_trace_paths({dir});
  ASSERT_TRUE(files.ok()) << files.error().message();
  expect_what_ifs_of_one_process(*files, "dlrm", {{"nccl=2"}, {".=0.5", "cat:host=2"}}, {2, 8});
  const analysis::TopologyQuestion slower{
      topology_of(R"({"gpus_per_host": 4, "intra_host": {"bandwidth_gb_s": 150, "latency_us": 2},
                      "inter_host": {"bandwidth_gb_s": 12, "latency_us": 8}})"),
      topology_of(R"({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 150, "latency_us": 2}})")};
  expect_what_ifs_of_one_process(*files, "dlrm topology", {{}, {"nccl=2"}}, {2, 3, 8}, &slower);
}

// --deprofile: the profiler's cost found from replays the processes share (each rank's untraced steps
// gathered), each process's ranks written back at that factor and built again; the reports (which say what
// was taken out) are one process's. The H200 training step (one rank: the other processes hold none), and
// train-pp's four stages given untraced steps between the step with no host time and the traced one, each
// rank its own (the median of the ranks' medians), and given one shorter than even no host time can reach.
TEST(LoadPart, DeprofiledStepsAreOneProcesss) {
  analysis::LoadOptions deprofile;
  deprofile.deprofile = true;
  const std::string h200 = std::string(EMO_TEST_DATA_DIR) + "/traces/h200_transformer_train.json.gz";
  auto one = analysis::load({h200}, deprofile);
  ASSERT_TRUE(one.ok()) << one.error().message();
  ASSERT_TRUE(one->deprofiled.has_value());
  expect_reports_of_one_process({h200}, "h200 deprofiled", {1, 2, 3}, deprofile);

  // Each rank its own untraced steps (about `untraced` ns), the files out of rank order.
  const auto with_untraced = [](const std::vector<std::string>& files, double untraced) {
    std::vector<std::string> given;
    for (size_t r = 0; r < files.size(); ++r) {
      nlohmann::json j = nlohmann::json::parse(test::slurp(files[r]));
      const double us = untraced / 1e3 * (1.0 + 0.01 * double(r));
      j["emo_untraced_step_us"] = {us, us * 1.02, us * 0.99};
      given.push_back(test::write(std::filesystem::path(files[r]).parent_path().string(),
                                  "untraced_rank" + std::to_string(r) + ".json", j.dump()));
    }
    std::reverse(given.begin(), given.end());
    return given;
  };
  auto decode = synth_files("load_part_deprofile", synth::Workload::kInferDecode, 4);
  auto traced = analysis::load(decode, {});
  ASSERT_TRUE(traced.ok());
  ASSERT_GT(traced->graph.stats.collectives_matched, 0);
  const int64_t span = analysis::replay_with_host_scale(*traced, 1.0), host0 = analysis::replay_with_host_scale(*traced, 0.0);
  ASSERT_LT(double(host0), 0.8 * double(span)) << "the family's host must explain part of its step";
  for (const double untraced : {0.5 * double(span + host0), 0.9 * double(host0)}) {
    const std::vector<std::string> given = with_untraced(decode, untraced);
    auto d = analysis::load(given, deprofile);
    ASSERT_TRUE(d.ok()) << d.error().message();
    ASSERT_TRUE(d->deprofiled.has_value());
    EXPECT_EQ(d->deprofiled->explained, untraced > double(host0));
    expect_reports_of_one_process(given, "infer-decode deprofiled", {1, 2, 3, 5}, deprofile);
  }
  // A step the profiler slowed by less than the doubt is left as it is, by every process.
  auto pp = synth_files("load_part_deprofile_pp", synth::Workload::kTrainPP, 4);
  auto pp_traced = analysis::load(pp, {});
  ASSERT_TRUE(pp_traced.ok());
  const std::vector<std::string> close = with_untraced(pp, 0.96 * double(analysis::replay_with_host_scale(*pp_traced, 1.0)));
  auto kept = analysis::load(close, deprofile);
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->deprofiled.has_value());
  expect_reports_of_one_process(close, "train-pp slowed within the doubt", {2, 3}, deprofile);
}

// Process 0 says the error one process says, wherever the bad file lies; every other process fails too (a
// file that cannot be read or a check across ranks with the same error; where process 0 stops before the
// reading, at once).
TEST(LoadPart, ErrorsAreOneProcesssOnEveryProcess) {
  auto files = synth_files("load_part_errors", synth::Workload::kTrainDP, 4);
  ASSERT_EQ(files.size(), 4u);
  for (const test::LoadCase& c : test::load_error_cases(files)) {
    auto one = analysis::load(c.paths, c.options);
    ASSERT_FALSE(one.ok()) << c.name;
    for (int size : {1, 2, 3, 5}) {
      const PartsRun run = run_parts(c.paths, c.options, size);
      for (int p = 0; p < size; ++p) ASSERT_FALSE(run.statuses[size_t(p)].ok()) << c.name << " over " << size << ", process " << p;
      EXPECT_EQ(run.statuses[0].error().message(), one.error().message()) << c.name << " over " << size;
      EXPECT_EQ(run.statuses[0].error().note, one.error().note) << c.name << " over " << size;
      if (c.name != "same file twice") {  // read, then checked on every process
        for (int p = 1; p < size; ++p) EXPECT_EQ(run.statuses[size_t(p)].error().message(), one.error().message()) << c.name;
      }
    }
  }
  // Process 0's own check before the reading (an output it cannot write): the others stop without waiting.
  ::setenv("EMO_MPI_TIMEOUT_S", "30", 1);
  const auto t0 = std::chrono::steady_clock::now();
  const PartsRun stopped = run_parts(files, {}, 3, make_error("--json", "cannot be written"));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::unsetenv("EMO_MPI_TIMEOUT_S");
  ASSERT_FALSE(stopped.statuses[0].ok());
  EXPECT_EQ(stopped.statuses[0].error().where, "--json");
  for (int p = 1; p < 3; ++p) {
    ASSERT_FALSE(stopped.statuses[size_t(p)].ok());
    EXPECT_NE(stopped.statuses[size_t(p)].error().what.find("process 0 ended the run"), std::string::npos);
  }
  EXPECT_LT(waited, 30.0) << "the others waited for process 0's plan to the timeout";
}

// Parts given (a profiling run read as the step was, backends::read_profiled_dir_part): each process builds
// the ranks its bounds name, however the events would split them; bounds that do not fit the files (another
// rank count, another process count, not in order) are one error on every process.
TEST(LoadPart, GivenRankBoundsAreKeptOrRefusedEverywhere) {
  auto files = synth_files("load_part_bounds", synth::Workload::kTrainPP, 4);
  ASSERT_EQ(files.size(), 4u);
  const auto load_with = [&](const std::vector<size_t>& bounds, int size) {
    auto comms = dist::local_world(size);
    std::vector<Result<analysis::WorkloadPart>> got;
    for (int p = 0; p < size; ++p) got.emplace_back(make_error("", "not run"));
    std::vector<std::thread> threads;
    for (int p = 0; p < size; ++p)
      threads.emplace_back([&, p] { got[size_t(p)] = analysis::load_part(files, {}, *comms[size_t(p)], {}, &bounds); });
    for (auto& t : threads) t.join();
    return got;
  };
  // Three ranks on the first process, none on the second, one on the third.
  const auto kept = load_with({0, 3, 3, 4}, 3);
  const size_t firsts[] = {0, 3, 3}, counts[] = {3, 0, 1};
  for (size_t p = 0; p < 3; ++p) {
    ASSERT_TRUE(kept[p].ok()) << "process " << p << ": " << kept[p].error().message();
    EXPECT_EQ(kept[p]->part.first_rank, firsts[p]) << "process " << p;
    EXPECT_EQ(kept[p]->ranks.size(), counts[p]) << "process " << p;
    for (size_t r = 0; r < kept[p]->ranks.size(); ++r) EXPECT_EQ(kept[p]->ranks[r].rank, int(firsts[p] + r));
  }
  for (const std::vector<size_t>& bad : {std::vector<size_t>{0, 2, 5}, std::vector<size_t>{0, 4}, std::vector<size_t>{0, 3, 1, 4}}) {
    const auto refused = load_with(bad, bad.size() == 2 ? 2 : int(bad.size()) - 1);
    for (size_t p = 0; p < refused.size(); ++p) {
      ASSERT_FALSE(refused[p].ok()) << "process " << p;
      EXPECT_NE(refused[p].error().what.find("rank file(s), where the step's parts"), std::string::npos)
          << refused[p].error().what;
    }
  }
}

}  // namespace
}  // namespace emo
