// The strong ids that cross stages (include/emo/base/ids.h): one kind cannot stand for another, and
// the ids the packing hands on name the entries they index.
#include <gtest/gtest.h>

#include <type_traits>

#include "emo/pack/fit.h"
#include "emo/pack/pack.h"
#include "synth_workload.h"
#include "test_util.h"

namespace emo {
namespace {

// No implicit conversion from a plain number, nor between kinds.
static_assert(!std::is_convertible_v<uint32_t, graph::RankIndex>);
static_assert(!std::is_convertible_v<uint32_t, pack::SignatureIndex>);
static_assert(!std::is_convertible_v<uint32_t, pack::PackIndex>);
static_assert(!std::is_convertible_v<pack::PackIndex, pack::SignatureIndex>);
static_assert(!std::is_convertible_v<pack::SignatureIndex, graph::RankIndex>);
static_assert(!std::is_convertible_v<graph::RankIndex, uint32_t>);
// The models' entry points take the typed ids only.
static_assert(!std::is_invocable_v<decltype(&pack::PackModels::idle_power_w), const pack::PackModels&, uint32_t, double>);
static_assert(std::is_invocable_v<decltype(&pack::PackModels::idle_power_w), const pack::PackModels&, graph::RankIndex,
                                  double>);
static_assert(!std::is_invocable_v<decltype(&pack::PackModels::time_ratio), const pack::PackModels&, graph::RankIndex,
                                   double>);

TEST(StrongIds, CompareAndIndexLikeTheirValue) {
  EXPECT_LT(pack::PackIndex(2), pack::PackIndex(3));
  EXPECT_EQ(pack::SignatureIndex(7).index(), size_t(7));
  EXPECT_EQ(graph::RankIndex(1), graph::RankIndex(1));
  EXPECT_NE(graph::RankIndex(1), graph::RankIndex(0));
}

// A two-rank data-parallel step: every atom's and pack's rank names the GpuOps it indexes, and every atom's
// signature lies inside the signature table.
TEST(StrongIds, PackingIdsNameTheirEntries) {
  const analysis::Workload w = test::synth_workload(synth::Workload::kTrainDP, 2, 6, 5);
  auto p = pack::make_packs(w, analysis::analyze(w), test::profile("h100"));
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->gpus.size(), size_t(2));
  for (size_t r = 0; r < p->gpus.size(); ++r) EXPECT_EQ(p->gpus[r].rank, graph::RankIndex(uint32_t(r)));
  bool saw[2] = {false, false};
  for (const pack::Atom& at : p->atoms) {
    ASSERT_LT(at.rank.index(), p->gpus.size());
    ASSERT_LT(at.signature.index(), p->signatures.size());
    if (at.first <= at.last) {
      EXPECT_LT(at.last, p->gpus[at.rank.index()].ops.size());
    }
  }
  for (const pack::Pack& pk : p->packs) {
    ASSERT_LT(pk.rank.index(), p->gpus.size());
    EXPECT_EQ(p->atoms[pk.first_atom].rank, pk.rank);
    EXPECT_EQ(p->atoms[pk.last_atom].rank, pk.rank);
    saw[pk.rank.index()] = true;
  }
  EXPECT_TRUE(saw[0] && saw[1]);
}

}  // namespace
}  // namespace emo
