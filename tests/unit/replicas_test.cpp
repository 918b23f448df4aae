// Replicas: data-parallel ranks run the same ops, so their atoms share signatures whatever their slack,
// and the profiling they need does not grow with their number; pipeline stages are not replicas.
#include <gtest/gtest.h>

#include <set>

#include "emo/analysis/analysis.h"
#include "emo/device/profile.h"
#include "emo/pack/pack.h"
#include "synth_workload.h"
#include "test_util.h"

namespace emo::test {
namespace {

pack::Packing packs_of(const analysis::Workload& w) {
  auto p = pack::make_packs(w, analysis::analyze(w), *device::builtin_profile("h100"));
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message());
  return p.ok() ? std::move(*p) : pack::Packing{};
}

TEST(Replicas, DataParallelRanksAreOneSetAndShareTheirSignatures) {
  for (int ranks : {2, 8}) {
    const analysis::Workload w = synth_workload(synth::Workload::kTrainDP, ranks, 4, 3);
    const pack::Packing p = packs_of(w);
    EXPECT_EQ(p.replica_sets, 1) << ranks;
    ASSERT_EQ(p.replica_set.size(), size_t(ranks));
    // Their slack differs (one rank is critical, the others wait in the all-reduce) ...
    std::set<std::pair<uint32_t, int>> sig_slack;
    for (const pack::Atom& at : p.atoms) {
      if (at.first <= at.last) sig_slack.insert({uint32_t(at.signature.index()), int(at.slack)});
    }
    bool shared_across_slack = false;
    for (const auto& [sig, slack] : sig_slack) {
      shared_across_slack |= slack == 0 && sig_slack.count({sig, 1}) > 0;
    }
    EXPECT_TRUE(shared_across_slack) << "no signature is both critical and slack-rich on " << ranks << " ranks";
    // ... and the units profiled are about one GPU's, not `ranks` times as many.
    EXPECT_LT(double(p.profiled_units) * 0.6 * ranks, double(p.per_gpu_units)) << ranks;
  }
  // Four times the replicas: about the same signatures (a few more where atoms split differently).
  const size_t two = packs_of(synth_workload(synth::Workload::kTrainDP, 2, 4, 3)).signatures.size();
  const size_t eight = packs_of(synth_workload(synth::Workload::kTrainDP, 8, 4, 3)).signatures.size();
  EXPECT_LE(4 * eight, 5 * two) << two << " signatures on 2 ranks, " << eight << " on 8";
}

TEST(Replicas, PipelineStagesAreNotReplicas) {
  const pack::Packing p = packs_of(synth_workload(synth::Workload::kTrainPP, 4, 4, 3));
  EXPECT_EQ(p.replica_sets, 4);
  std::set<uint32_t> sets(p.replica_set.begin(), p.replica_set.end());
  EXPECT_EQ(sets.size(), 4u);
}

TEST(Replicas, RealDlrmRanksWithTheirOwnEmbeddingTables) {
  EMO_REQUIRE_SHARED(dir, "traces/param/et_replay/tests/inputs/extracted/dlrm_kineto");
  auto w = analysis::load(files_in(dir), {});
  ASSERT_TRUE(w.ok());
  const pack::Packing p = packs_of(*w);
  EXPECT_GT(p.replica_sets, 1);
  EXPECT_LT(p.replica_sets, 8);
  EXPECT_LT(p.profiled_units * 4, p.per_gpu_units);
}

}  // namespace
}  // namespace emo::test
