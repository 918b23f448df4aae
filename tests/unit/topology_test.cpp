// Collectives' transfer times from a topology: the file's checks, the alpha-beta model, and the
// what-if on synthetic multi-rank steps whose collectives the simulator times at a known bandwidth.
#include <gtest/gtest.h>

#include <cmath>

#include "emo/analysis/analysis.h"
#include "emo/analysis/topology.h"
#include "synth_workload.h"

namespace emo::test {
namespace {

using analysis::CollectiveKind;
using analysis::CollectiveShape;
using analysis::Topology;

Topology topo(const std::string& text) {
  auto t = analysis::topology_from_json(text, "t.json");
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message());
  return t.ok() ? *t : Topology{};
}

std::string error_of(const std::string& text) {
  auto t = analysis::topology_from_json(text, "t.json");
  return t.ok() ? "" : t.error().message();
}

// The bus bandwidth the simulator moves collectives at (src/synth/simulator.cpp: 3.5e5 bytes/µs).
constexpr double kSynthBusGbS = 350.0;
const char* kOneHost =
    R"({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 350, "latency_us": 1}, "algorithm": "ring"})";
const char* kFourPerHost =
    R"({"gpus_per_host": 4, "intra_host": {"bandwidth_gb_s": 350, "latency_us": 1},
        "inter_host": {"bandwidth_gb_s": 25, "latency_us": 10}, "algorithm": "ring"})";

TEST(Topology, FileErrorsNameTheField) {
  EXPECT_NE(error_of("[1]").find("a topology is a JSON object"), std::string::npos);
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"intra_host": {"bandwidth_gb_s": 1, "latency_us": 1}})").find("'gpus_per_host'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"gpus_per_host": 0, "intra_host": {"bandwidth_gb_s": 1, "latency_us": 1}})")
                .find("'gpus_per_host': expected a whole number"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 0, "latency_us": 1}})")
                .find("'intra_host.bandwidth_gb_s'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 5, "latency_us": -1}})")
                .find("'intra_host.latency_us'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"gpus_per_host": 8, "hosts": 2, "intra_host": {"bandwidth_gb_s": 5, "latency_us": 1}})")
                .find("'inter_host'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"gpus_per_host": 8, "intra": {}})").find("unknown field 'intra'"), std::string::npos);
  EXPECT_NE(error_of(R"({"gpus_per_host": 1, "intra_host": {"bandwidth_gb_s": 5, "latency_us": 1},
                         "inter_host": {"bandwidth_gb_s": 5, "latency_us": 1}, "placement": [0, 0]})")
                .find("host 0 is given more than gpus_per_host = 1"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 5, "latency_us": 1},
                         "algorithm": "mesh"})")
                .find("'algorithm'"),
            std::string::npos);
}

TEST(Topology, KindsAndDtypesFromTheTrace) {
  EXPECT_EQ(analysis::collective_kind("allreduce", ""), CollectiveKind::kAllReduce);
  EXPECT_EQ(analysis::collective_kind("_reduce_scatter_base", ""), CollectiveKind::kReduceScatter);
  EXPECT_EQ(analysis::collective_kind("all_gather_into_tensor_coalesced", ""), CollectiveKind::kAllGather);
  EXPECT_EQ(analysis::collective_kind("all_to_allv", ""), CollectiveKind::kAllToAll);
  EXPECT_EQ(analysis::collective_kind("", "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*)"),
            CollectiveKind::kBroadcast);
  EXPECT_EQ(analysis::collective_kind("", "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"), CollectiveKind::kReduceScatter);
  EXPECT_EQ(analysis::collective_kind("", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"), CollectiveKind::kPointToPoint);
  EXPECT_EQ(analysis::collective_kind("", "volta_sgemm_128x64_nn"), CollectiveKind::kUnknown);
  EXPECT_EQ(analysis::dtype_bytes("BFloat16"), 2);
  EXPECT_EQ(analysis::dtype_bytes("Float"), 4);
  EXPECT_EQ(analysis::dtype_bytes("long int"), 8);
  EXPECT_EQ(analysis::dtype_bytes("Float8_e4m3fn"), 1);
  EXPECT_EQ(analysis::dtype_bytes("Quaternion"), 0);
}

TEST(Topology, RingTreeAndTheLinkCrossed) {
  const Topology t = topo(R"({"gpus_per_host": 4, "intra_host": {"bandwidth_gb_s": 100, "latency_us": 2},
                              "inter_host": {"bandwidth_gb_s": 10, "latency_us": 20}, "algorithm": "ring"})");
  CollectiveShape c{CollectiveKind::kAllReduce, 8'000'000, {0, 1, 2, 3}};
  // Ring: 2(n−1) steps of 2 µs, 2(n−1)/n of the buffer at 100 bytes/ns.
  EXPECT_DOUBLE_EQ(*analysis::transfer_ns(t, c), 2 * 3 * 2000.0 + 2 * 3.0 / 4 * 8e6 / 100);
  // Across two hosts the network bounds it.
  c.members = {0, 1, 4, 5};
  EXPECT_DOUBLE_EQ(*analysis::transfer_ns(t, c), 2 * 3 * 20000.0 + 2 * 3.0 / 4 * 8e6 / 10);
  // Tree: 2·log2(n) steps; auto takes the faster, which for a small message is the tree on 64 ranks.
  Topology wide = t;
  wide.gpus_per_host = 64;
  wide.algorithm = analysis::Algorithm::kAuto;
  CollectiveShape small{CollectiveKind::kAllReduce, 1024, {}};
  for (int r = 0; r < 64; ++r) small.members.push_back(r);
  const double tree = 2 * 6 * 2000.0 + 2 * 1024 / 100.0;
  EXPECT_DOUBLE_EQ(*analysis::transfer_ns(wide, small), tree);
  // An all-gather moves (n−1)/n of its output; a broadcast all of it.
  EXPECT_DOUBLE_EQ(*analysis::transfer_ns(t, {CollectiveKind::kAllGather, 4000, {0, 1, 2, 3}}), 3 * 2000.0 + 3000 / 100.0);
  EXPECT_DOUBLE_EQ(*analysis::transfer_ns(t, {CollectiveKind::kBroadcast, 4000, {0, 1}}), 2000.0 + 40.0);
  // An all-to-all across hosts: 2 of 4 peers' shares over the network, the slower part.
  EXPECT_DOUBLE_EQ(*analysis::transfer_ns(t, {CollectiveKind::kAllToAll, 4000, {0, 1, 4, 5}}), 20000.0 + 2000 / 10.0);
  // A base latency is paid once per collective, whatever the algorithm's steps.
  Topology based = topo(R"({"gpus_per_host": 4, "intra_host": {"bandwidth_gb_s": 100, "latency_us": 2},
                            "base_latency_us": 7, "algorithm": "ring"})");
  EXPECT_DOUBLE_EQ(*analysis::transfer_ns(based, {CollectiveKind::kBroadcast, 4000, {0, 1}}), 7000.0 + 2000.0 + 40.0);
  EXPECT_NE(error_of(R"({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 5, "latency_us": 1}, "base_latency_us": -2})")
                .find("'base_latency_us'"),
            std::string::npos);
  // A rank outside the topology is an error.
  Topology small_host = t;
  small_host.hosts = 1;
  auto out = analysis::transfer_ns(small_host, c);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message().find("rank 4 is on no host"), std::string::npos);
}

TEST(Topology, TheModelOfTheSimulatorsMachineFitsItsTransfers) {
  analysis::Workload w = synth_workload(synth::Workload::kTrainDP, 8, 4, 3);
  analysis::TopologyQuestion q{topo(kOneHost), std::nullopt};
  auto r = analysis::what_if(w, {}, &q);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_TRUE(r->topology);
  const auto& rep = *r->topology;
  ASSERT_FALSE(rep.collectives.empty());
  EXPECT_EQ(rep.without_size, 0);
  EXPECT_LT(rep.median_error_pct, 10.0);
  // The bandwidth fitted from the measured transfers is the simulator's.
  ASSERT_EQ(rep.fitted.size(), 1u);
  EXPECT_EQ(rep.fitted[0].link, "intra_host");
  EXPECT_NEAR(rep.fitted[0].fitted.bandwidth_gb_s, kSynthBusGbS, 0.05 * kSynthBusGbS);
  // The same machine asked about: a replay close to the baseline.
  EXPECT_NEAR(double(r->predicted_span_ns), double(r->baseline_span_ns), 0.02 * double(r->baseline_span_ns));
}

TEST(Topology, ASlowerNetworkLengthensTheStepAndTheRecordedMachineIsTheIdentity) {
  analysis::Workload w = synth_workload(synth::Workload::kTrainDP, 8, 4, 3);
  // Asked = recorded: every transfer keeps its measured time, the replay is the baseline's.
  analysis::TopologyQuestion same{topo(kOneHost), topo(kOneHost)};
  auto id = analysis::what_if(w, {}, &same);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->predicted_span_ns, id->baseline_span_ns);
  for (const auto& c : id->topology->collectives) EXPECT_DOUBLE_EQ(c.predicted_ns, c.measured_ns);
  // Two hosts of four over a 25 GB/s network: each all-reduce's measured transfer × 14 (350 / 25).
  analysis::TopologyQuestion split{topo(kFourPerHost), topo(kOneHost)};
  auto slow = analysis::what_if(w, {}, &split);
  ASSERT_TRUE(slow.ok()) << slow.error().message();
  EXPECT_GT(slow->predicted_span_ns, slow->baseline_span_ns);
  for (const auto& c : slow->topology->collectives) {
    EXPECT_GT(c.predicted_ns, 5 * c.measured_ns);
    EXPECT_LT(c.predicted_ns, 16 * c.measured_ns);
  }
  // A --scale on top applies to the new transfers.
  auto both = analysis::what_if(w, {*analysis::parse_scale("cat:nccl=0.5")}, &split);
  ASSERT_TRUE(both.ok());
  EXPECT_LT(both->predicted_span_ns, slow->predicted_span_ns);
}

TEST(Topology, AFarModelIsWarnedAboutAndAStepWithoutSizesChangesNothing) {
  analysis::Workload w = synth_workload(synth::Workload::kTrainDP, 8, 4, 3);
  analysis::TopologyQuestion slow_link{
      topo(R"({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 10, "latency_us": 1}})"), std::nullopt};
  auto r = analysis::what_if(w, {}, &slow_link);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->topology->median_error_pct, analysis::kTopologyDoubtPct);
  EXPECT_NE(analysis::topology_warning(*r->topology).find("does not describe the machine"), std::string::npos);
  analysis::TopologyQuestion right{topo(kOneHost), std::nullopt};
  auto ok = analysis::what_if(w, {}, &right);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(analysis::topology_warning(*ok->topology), "");
}

// Real traces: the 8-rank DLRM step (V100, 2023) gives its collectives' sizes on their `nccl:` annotations;
// the alpha-beta model fitted to its measured transfers holds them within 15 % in the median, and a
// slower link lengthens the step. A single rank without sizes (trace_diff) changes nothing, and says so;
// nccl_data (rank 0 of 2, A100) has sizes but no peer to match, and its kernels, waits included, are
// never shorter than a 2-GPU NVLink transfer.
TEST(Topology, RealTracesAgainstTheirMeasuredTransfers) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  auto w = analysis::load(files_in(dir), {});
  ASSERT_TRUE(w.ok());
  analysis::TopologyQuestion q{topo(kOneHost), std::nullopt};
  auto r = analysis::what_if(*w, {}, &q);
  ASSERT_TRUE(r.ok());
  const analysis::TopologyReport& rep = *r->topology;
  ASSERT_EQ(rep.collectives.size(), 8u);
  EXPECT_EQ(rep.without_size, 0);
  int all_reduce = 0, all_to_all = 0;
  for (const auto& c : rep.collectives) {
    EXPECT_EQ(c.shape.members.size(), 8u);
    EXPECT_GT(c.measured_ns, 0);
    all_reduce += c.shape.kind == CollectiveKind::kAllReduce;
    all_to_all += c.shape.kind == CollectiveKind::kAllToAll;
  }
  EXPECT_EQ(all_reduce, 3);
  EXPECT_EQ(all_to_all, 5);
  EXPECT_EQ(rep.collectives.front().shape.bytes, 394241 * 4);  // nccl:all_reduce, Input Dims [[394241]], float
  ASSERT_EQ(rep.fitted.size(), 1u);
  EXPECT_LT(rep.fitted[0].median_error_pct, 15.0);
  EXPECT_GT(rep.fitted[0].fitted.bandwidth_gb_s, 10.0);   // a V100 NVLink box, small messages
  EXPECT_LT(rep.fitted[0].fitted.bandwidth_gb_s, 300.0);
  EXPECT_GT(rep.fitted[0].base_latency_us, 1.0);          // NCCL's per-call latency is microseconds
  // The same machine with its NVLink cut to a 2 GB/s network: the step grows.
  analysis::TopologyQuestion slow{
      topo(R"({"gpus_per_host": 1, "intra_host": {"bandwidth_gb_s": 350, "latency_us": 1},
               "inter_host": {"bandwidth_gb_s": 2, "latency_us": 10}})"),
      analysis::Topology{}};
  slow.recorded = topo(kOneHost);
  auto grown = analysis::what_if(*w, {}, &slow);
  ASSERT_TRUE(grown.ok());
  EXPECT_GT(grown->predicted_span_ns, grown->baseline_span_ns);

  EMO_REQUIRE_SHARED(single, "traces/hta/tests/data/trace_diff/test/test.json.gz");
  auto one_rank = analysis::load({single}, {});
  ASSERT_TRUE(one_rank.ok());
  auto none = analysis::what_if(*one_rank, {}, &q);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->topology->collectives.empty());
  EXPECT_EQ(none->predicted_span_ns, none->baseline_span_ns);
  EXPECT_NE(analysis::topology_warning(*none->topology).find("changes nothing"), std::string::npos);

  EMO_REQUIRE_SHARED(nccl, "traces/hta/tests/data/nccl_parser_config/nccl_data.json.gz");
  auto one = analysis::load({nccl}, {});
  ASSERT_TRUE(one.ok());
  auto u = analysis::what_if(*one, {}, &q);
  ASSERT_TRUE(u.ok());
  EXPECT_GT(u->topology->unmatched_modeled, 0);
  EXPECT_EQ(u->topology->unmatched_faster_than_model, 0);
  // A 1 GB/s link is slower than what the kernels took: said.
  analysis::TopologyQuestion pcie{topo(R"({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 1, "latency_us": 1}})"),
                                  std::nullopt};
  auto far = analysis::what_if(*one, {}, &pcie);
  ASSERT_TRUE(far.ok());
  EXPECT_GT(far->topology->unmatched_faster_than_model * 2, far->topology->unmatched_modeled);
  EXPECT_NE(analysis::topology_warning(*far->topology).find("took less time than topology"), std::string::npos);
}

}  // namespace
}  // namespace emo::test
