// Collectives matched from compact records (graph::match_collectives): the rule the graph builder applies,
// and that processes holding different ranks can apply to the records they exchange. Times in ns; each
// test's right answer is worked out in its comment.
#include <gtest/gtest.h>

#include "emo/graph/collectives.h"

namespace emo {
namespace {

using graph::CommRecord;

CommRecord rec(uint32_t rank, const char* pg, const char* coll, int64_t seq, int64_t start, int64_t end,
               int32_t group_size = 0) {
  CommRecord c;
  c.rank = rank;
  c.process_group = pg;
  c.collective = coll;
  c.seq = seq;
  c.group_size = group_size;
  c.start_ns = start;
  c.end_ns = end;
  return c;
}

// Three ranks, two allreduces by seq. Rank 1's clock runs 500 ahead (its ends 500 later), rank 2's 200
// behind. Offsets: rank 1 median(500, 500) = 500, rank 2 median(-200, -200) = -200.
TEST(CollectiveMatch, OffsetsAreEachRanksMedianEndAgainstRankZerosAndSpansOverlapAligned) {
  std::vector<CommRecord> r = {
      rec(0, "pg0", "allreduce", 1, 100, 1000), rec(0, "pg0", "allreduce", 2, 2000, 3000),
      rec(1, "pg0", "allreduce", 1, 800, 1500), rec(1, "pg0", "allreduce", 2, 2600, 3500),
      rec(2, "pg0", "allreduce", 1, 0, 800),    rec(2, "pg0", "allreduce", 2, 1850, 2800),
  };
  const auto m = graph::match_collectives(r, 3, {0, 1, 2});
  ASSERT_EQ(m.offsets, (std::vector<int64_t>{0, 500, -200}));
  EXPECT_EQ(m.aligned, (std::vector<uint8_t>{1, 1, 1}));
  ASSERT_EQ(m.collectives.size(), 2u);
  // seq 1: aligned starts 100, 800 - 500 = 300, 0 + 200 = 200 -> last arrival 300; ends all 1000.
  EXPECT_EQ(m.collectives[0].members, (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(m.collectives[0].start_ns, 300);
  EXPECT_EQ(m.collectives[0].end_ns, 1000);
  // seq 2: starts 2000, 2100, 2050 -> 2100; ends 3000.
  EXPECT_EQ(m.collectives[1].members, (std::vector<uint32_t>{1, 3, 5}));
  EXPECT_EQ(m.collectives[1].start_ns, 2100);
  EXPECT_EQ(m.collectives[1].end_ns, 3000);
  EXPECT_EQ(m.unmatched, 0);
  EXPECT_EQ(m.inconsistent, 0);
}

// Without seq, the k-th kernel of one kind in one process group goes with the k-th of its peers; a rank
// with a kernel twice under one key counts once; a kernel no peer shares, or one without metadata, stays
// whole; a key whose aligned spans do not overlap (rank 1's ends before rank 0's last arrival) too.
TEST(CollectiveMatch, OccurrencesPairWithoutSeqAndWhatCannotMatchStaysWhole) {
  std::vector<CommRecord> r = {
      rec(0, "pg", "broadcast", -1, 0, 100),   // #0 with rank 1's first
      rec(0, "pg", "broadcast", -1, 500, 600), // #1: rank 1's second ends at 450 < 500: unmatched (2)
      rec(0, "pg", "gather", -1, 700, 800),    // no peer: unmatched (1)
      rec(1, "pg", "broadcast", -1, 50, 100),
      rec(1, "pg", "broadcast", -1, 400, 450),
  };
  CommRecord lost = rec(1, "pg", "allreduce", -1, 900, 950);
  lost.matchable = false;  // unmatched (1)
  r.push_back(lost);
  const auto m = graph::match_collectives(r, 2, {0, 1});
  // Offsets: rank 1's ends less rank 0's over keys with both: 100 - 100 = 0, 450 - 600 = -150 -> upper
  // median of {0, -150} = 0.
  EXPECT_EQ(m.offsets, (std::vector<int64_t>{0, 0}));
  ASSERT_EQ(m.collectives.size(), 1u);
  EXPECT_EQ(m.collectives[0].members, (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(m.collectives[0].start_ns, 50);
  EXPECT_EQ(m.collectives[0].end_ns, 100);
  EXPECT_EQ(m.unmatched, 4);
}

// Members that cannot be one collective are said (the first example kept): more ranks than the declared
// group size; an allreduce against a broadcast. A send and a recv are one kind.
TEST(CollectiveMatch, MembersThatDisagreeAreCountedWithAnExample) {
  std::vector<CommRecord> r = {
      rec(0, "a", "allreduce", 7, 0, 100, 2),  rec(1, "a", "allreduce", 7, 0, 100, 2),
      rec(2, "a", "allreduce", 7, 0, 100, 2),  // three ranks, group size 2
      rec(0, "b", "allreduce", 1, 200, 300),   rec(1, "b", "broadcast", 1, 200, 300),
      rec(0, "p2p", "send", 3, 400, 500),      rec(1, "p2p", "recv", 3, 400, 500),
  };
  const auto m = graph::match_collectives(r, 3, {10, 11, 12});
  EXPECT_EQ(m.inconsistent, 2);
  EXPECT_EQ(m.inconsistent_example, "process group 'a' seq 7: kernels of 3 ranks, group size 2");
  EXPECT_EQ(m.collectives.size(), 3u) << "counted, still matched";
  const auto only_b = graph::match_collectives({r[3], r[4]}, 2, {10, 11});
  EXPECT_EQ(only_b.inconsistent_example, "process group 'b' seq 1: allreduce on rank 10, broadcast on rank 11");
}

// One rank: nothing to match, every kernel whole, no offset.
TEST(CollectiveMatch, OneRankLeavesEveryKernelWhole) {
  const auto m = graph::match_collectives({rec(0, "pg", "allreduce", 1, 0, 10), rec(0, "pg", "allreduce", 2, 20, 30)}, 1, {0});
  EXPECT_TRUE(m.collectives.empty());
  EXPECT_EQ(m.unmatched, 2);
  EXPECT_EQ(m.offsets, (std::vector<int64_t>{0}));
}

}  // namespace
}  // namespace emo
