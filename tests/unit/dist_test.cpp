// The processes of an MPI run without a launcher (dist::local_world: one thread per process): rank traces
// as bytes and back, shards, and the sharded load, whose workload and errors must be those of one process.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>

#include "emo/analysis/analysis.h"
#include "emo/base/stats.h"
#include "emo/dist/dist.h"
#include "emo/synth/synth.h"
#include "load_cases.h"
#include "test_util.h"

namespace emo {
namespace {

using test::synth_files;

// The analyze JSON with every kernel: what the step is, as one string.
std::string fingerprint(const analysis::Workload& w) {
  return analysis::to_json(w, analysis::analyze(w), true).dump();
}

// load() on process 0 of a local world of `size`, the others serving their shards on threads; the
// others' statuses into *served.
Result<analysis::Workload> sharded_load(const std::vector<std::string>& paths, const analysis::LoadOptions& o,
                                        int size, std::vector<Status>* served = nullptr) {
  auto comms = dist::local_world(size);
  std::vector<Status> statuses(static_cast<size_t>(size));
  std::vector<std::thread> workers;
  for (int p = 1; p < size; ++p) {
    workers.emplace_back([&, p] { statuses[size_t(p)] = analysis::serve_shard(paths, o, *comms[size_t(p)]); });
  }
  auto w = analysis::load(paths, o, *comms[0]);
  for (auto& t : workers) t.join();
  if (served) *served = statuses;
  return w;
}

TEST(Dist, ShardsCoverTheItemsInOrderWithSizesWithinOne) {
  for (size_t n : {0u, 1u, 5u, 8u, 13u}) {
    for (int size : {1, 2, 3, 4, 8}) {
      size_t next = 0, smallest = n, largest = 0;
      for (int p = 0; p < size; ++p) {
        auto [b, e] = dist::shard(n, p, size);
        EXPECT_EQ(b, next) << n << " items, process " << p << " of " << size;
        next = e;
        smallest = std::min(smallest, e - b);
        largest = std::max(largest, e - b);
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1u);
    }
  }
}

TEST(Dist, ShardsByWeightAreContiguousAndWeighAboutTheSame) {
  const std::vector<std::vector<uint64_t>> cases = {
      {}, {5}, {1, 1, 1, 1}, {100, 1, 1, 1, 1, 1, 1, 1}, {10, 10, 10, 10, 1, 1, 1, 1, 1, 1, 1, 1},
      {3, 9, 4, 4, 8, 1, 7, 2, 6, 5, 5, 5, 9, 1, 1}};
  for (const auto& w : cases) {
    for (int size : {1, 2, 3, 4, 8}) {
      auto b = dist::shard_by_weight(w, size);
      ASSERT_EQ(b.size(), size_t(size) + 1);
      EXPECT_EQ(b.front(), 0u);
      EXPECT_EQ(b.back(), w.size());
      uint64_t total = 0, largest = 0;
      for (uint64_t x : w) {
        total += x;
        largest = std::max(largest, x);
      }
      for (int p = 0; p < size; ++p) {
        ASSERT_LE(b[size_t(p)], b[size_t(p) + 1]);
        uint64_t part = 0;
        for (size_t i = b[size_t(p)]; i < b[size_t(p) + 1]; ++i) part += w[i];
        EXPECT_LE(double(part), double(total) / size + double(largest)) << "part " << p << " of " << size;
      }
    }
  }
  // Half the bytes in the first of 8 files: two processes split there, not at the fourth file.
  auto b = dist::shard_by_weight({700, 100, 100, 100, 100, 100, 100, 100}, 2);
  EXPECT_EQ(b[1], 1u);
}

TEST(Dist, FramesRoundTripAndCutFramesAreErrors) {
  const std::string f = dist::frame({"T", "", std::string("a\0b", 3)});
  auto back = dist::unframe(f);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[2], std::string_view("a\0b", 3));
  for (size_t cut = 0; cut < f.size(); ++cut) EXPECT_FALSE(dist::unframe(f.substr(0, cut)).ok()) << cut;
  EXPECT_FALSE(dist::unframe(f + "x").ok());
}

TEST(Dist, ARankTraceAsBytesComesBackTheSame) {
  auto files = synth_files("dist_wire", synth::Workload::kTrainDP, 1);
  ASSERT_EQ(files.size(), 1u);
  auto t = trace::read_trace(files[0]);
  ASSERT_TRUE(t.ok()) << t.error().message();
  t->stats.add("event without ts", "{\"ph\": \"X\"}");
  const std::string bytes = trace::to_wire(*t);
  auto back = trace::from_wire(bytes);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(trace::to_wire(*back), bytes);
  EXPECT_EQ(back->events.size(), t->events.size());
  EXPECT_EQ(back->strings.size(), t->strings.size());
  ASSERT_FALSE(back->stats.rows.empty());
  EXPECT_EQ(back->stats.rows.back().example, "{\"ph\": \"X\"}");
  std::vector<trace::RankTrace> one, two;
  one.push_back(std::move(t).value());
  two.push_back(std::move(back).value());
  auto a = analysis::assemble(std::move(one), {});
  auto b = analysis::assemble(std::move(two), {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(fingerprint(*a), fingerprint(*b));
  // Cut anywhere, or an index past its table: an Error, never a trace.
  for (size_t cut : {size_t{0}, size_t{3}, bytes.size() / 2, bytes.size() - 1})
    EXPECT_FALSE(trace::from_wire(std::string_view(bytes).substr(0, cut)).ok()) << cut;
  auto bad = trace::read_trace(files[0]);
  ASSERT_TRUE(bad.ok());
  ASSERT_FALSE(bad->events.empty());
  bad->events[0].name = static_cast<StrId>(bad->strings.size() + 7);
  auto refused = trace::from_wire(trace::to_wire(*bad));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().what.find("index"), std::string::npos) << refused.error().what;
  // A bool byte that is neither 0 nor 1, or an event kind past the last: refused before anything reads it.
  auto odd = trace::read_trace(files[0]);
  ASSERT_TRUE(odd.ok());
  ASSERT_FALSE(odd->lanes.empty());
  const uint8_t not_a_bool = 2;
  std::memcpy(reinterpret_cast<char*>(&odd->lanes[0]) + offsetof(trace::Lane, gpu), &not_a_bool, 1);
  EXPECT_FALSE(trace::from_wire(trace::to_wire(*odd)).ok());
  auto kind = trace::read_trace(files[0]);
  ASSERT_TRUE(kind.ok());
  kind->events[0].kind = static_cast<trace::EventKind>(200);
  EXPECT_FALSE(trace::from_wire(trace::to_wire(*kind)).ok());
}

TEST(Dist, TheShardedLoadIsTheLoadOfOneProcess) {
  for (auto wl : {synth::Workload::kTrainDP, synth::Workload::kTrainPP, synth::Workload::kTrainTP}) {
    auto files = synth_files(std::string("dist_load_") + synth::workload_name(wl), wl, 4);
    ASSERT_EQ(files.size(), 4u);
    std::reverse(files.begin(), files.end());  // file order is not rank order
    analysis::LoadOptions o;
    auto one = analysis::load(files, o);
    ASSERT_TRUE(one.ok()) << one.error().message();
    const std::string want = fingerprint(*one);
    for (int size : {1, 2, 3, 4, 6}) {
      std::vector<Status> served;
      auto w = sharded_load(files, o, size, &served);
      ASSERT_TRUE(w.ok()) << w.error().message();
      EXPECT_EQ(fingerprint(*w), want) << synth::workload_name(wl) << " over " << size << " processes";
      EXPECT_EQ(w->steps, one->steps);
      for (int p = 1; p < size; ++p) EXPECT_TRUE(served[size_t(p)].ok()) << p;
    }
  }
}

TEST(Dist, AProcessOtherThanTheFirstServesItsShardAndAssemblesNothing) {
  auto files = synth_files("dist_worker", synth::Workload::kTrainDP, 2);
  auto comms = dist::local_world(2);
  Status served;
  std::thread worker([&] {
    auto w = analysis::load(files, {}, *comms[1]);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.error().what, analysis::kShardHandedOver);
  });
  auto w = analysis::load(files, {}, *comms[0]);
  worker.join();
  ASSERT_TRUE(w.ok()) << w.error().message();
  EXPECT_EQ(w->ranks.size(), 2u);
}

// The error of the sharded load is the error one process says, wherever the bad file lies.
TEST(Dist, ShardedErrorsAreTheErrorsOfOneProcess) {
  auto files = synth_files("dist_errors", synth::Workload::kTrainDP, 4);
  ASSERT_EQ(files.size(), 4u);
  for (const test::LoadCase& c : test::load_error_cases(files)) {
    auto one = analysis::load(c.paths, c.options);
    ASSERT_FALSE(one.ok()) << c.name;
    for (int size : {2, 3, 4}) {
      auto w = sharded_load(c.paths, c.options, size);
      ASSERT_FALSE(w.ok()) << c.name << " over " << size;
      EXPECT_EQ(w.error().message(), one.error().message()) << c.name << " over " << size;
      EXPECT_EQ(w.error().note, one.error().note) << c.name << " over " << size;
    }
  }
}

TEST(Dist, AProcessThatSendsNothingEndsTheWaitWithAnError) {
  auto files = synth_files("dist_silent", synth::Workload::kTrainDP, 2);
  ::setenv("EMO_MPI_TIMEOUT_S", "0.2", 1);
  auto comms = dist::local_world(2);
  auto w = analysis::load(files, {}, *comms[0]);  // process 1 never serves
  ::unsetenv("EMO_MPI_TIMEOUT_S");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().what.find("process 1 sent nothing"), std::string::npos) << w.error().what;
  EXPECT_FALSE(analysis::shards_collected());
}

}  // namespace
}  // namespace emo

namespace emo {
namespace {

// The upper median of sets whose values lie with several processes, found by bisection over counts, is the
// one of all the values together (emo::upper_median), at any number of processes and any deal.
TEST(Dist, UpperMediansOfValuesSpreadOverProcessesAreThoseOfAllTheValues) {
  uint64_t x = 88172645463325252ull;
  const auto next = [&] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
  std::vector<std::vector<int64_t>> sets(6);
  for (int i = 0; i < 1001; ++i) sets[0].push_back(int64_t(next() % 2000000) - 1000000);  // odd count, negatives
  for (int i = 0; i < 600; ++i) sets[1].push_back(int64_t(next() % 50));                   // even count, many alike
  sets[2].assign(17, 4242);                                                                  // all alike
  // sets[3] empty everywhere: the fallback
  sets[4] = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0, -1};  // the whole range
  sets[5] = {7};
  for (int size : {1, 2, 3, 5}) {
    // Each value to a process at random (set 5's one value, to the last process).
    std::vector<std::vector<std::vector<int64_t>>> parts(size_t(size), std::vector<std::vector<int64_t>>(sets.size()));
    for (size_t k = 0; k < sets.size(); ++k) {
      for (int64_t v : sets[k]) parts[k == 5 ? size_t(size - 1) : size_t(next() % uint64_t(size))][k].push_back(v);
    }
    auto comms = dist::local_world(size);
    std::vector<Result<std::vector<int64_t>>> got(size_t(size), std::vector<int64_t>{});
    std::vector<std::thread> threads;
    for (int p = 0; p < size; ++p) {
      threads.emplace_back([&, p] { got[size_t(p)] = dist::upper_medians(*comms[size_t(p)], 30, parts[size_t(p)], -99); });
    }
    for (auto& t : threads) t.join();
    for (int p = 0; p < size; ++p) {
      ASSERT_TRUE(got[size_t(p)].ok()) << got[size_t(p)].error().message();
      ASSERT_EQ(got[size_t(p)]->size(), sets.size());
      for (size_t k = 0; k < sets.size(); ++k) {
        std::vector<int64_t> all = sets[k];
        EXPECT_EQ((*got[size_t(p)])[k], upper_median(all, int64_t{-99})) << "set " << k << ", P = " << size << ", process " << p;
      }
    }
  }
}

// A process that never takes part ends the others' medians with an error, not a hang.
TEST(Dist, UpperMediansWithAProcessMissingEndWithAnError) {
  auto comms = dist::local_world(2);
  std::vector<std::vector<int64_t>> values{{1, 2, 3}};
  setenv("EMO_MPI_TIMEOUT_S", "0.2", 1);
  auto r = dist::upper_medians(*comms[0], 30, values, 0);
  unsetenv("EMO_MPI_TIMEOUT_S");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("process 1 sent nothing"), std::string::npos) << r.error().message();
}

}  // namespace
}  // namespace emo
