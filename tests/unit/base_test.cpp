// StringTable, AtomicFile, parallel_for and median behaviour.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "emo/base/file_util.h"
#include "emo/base/parallel.h"
#include "emo/base/stats.h"
#include "emo/base/strings.h"
#include "test_util.h"

namespace emo {
namespace {

TEST(ParallelFor, RunsEveryIndexOnceOnSeveralThreads) {
  for (int threads : {1, 2, 4}) {
    std::vector<int> hits(1000, 0);
    std::mutex mu;
    std::set<std::thread::id> ids;
    parallel_for(
        hits.size(),
        [&](size_t i) {
          ++hits[i];  // each index is its own slot
          std::this_thread::sleep_for(std::chrono::microseconds(i % 7 == 0 ? 200 : 0));
          std::lock_guard<std::mutex> lock(mu);
          ids.insert(std::this_thread::get_id());
        },
        threads);
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "index " << i << ", " << threads << " threads";
    EXPECT_LE(ids.size(), size_t(threads));
    if (threads == 1) {
      EXPECT_EQ(ids.size(), 1u);
    } else {
      EXPECT_GE(ids.size(), 2u) << "no second thread took part";
    }
  }
  parallel_for(0, [](size_t) { FAIL() << "no index to run"; }, 4);
}

TEST(ParallelFor, RethrowsATaskException) {
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_for(
                   100,
                   [&](size_t i) {
                     ++ran;
                     if (i == 3) throw std::runtime_error("task 3");
                   },
                   2),
               std::runtime_error);
  EXPECT_GE(ran.load(), 4);
}

TEST(ParallelFor, ThreadsComeFromEmoThreads) {
  const char* old = std::getenv("EMO_THREADS");
  const std::string keep = old ? old : "";
  setenv("EMO_THREADS", "3", 1);
  EXPECT_EQ(worker_threads(), 3);
  setenv("EMO_THREADS", "zero", 1);  // not a number: the hardware's count
  EXPECT_GE(worker_threads(), 1);
  EXPECT_LE(worker_threads(), 8);
  setenv("EMO_THREADS", "0", 1);
  EXPECT_GE(worker_threads(), 1);
  if (old) {
    setenv("EMO_THREADS", keep.c_str(), 1);
  } else {
    unsetenv("EMO_THREADS");
  }
}

TEST(StringTable, InterningIsStableAndDense) {
  StringTable t;
  StrId a = t.intern("aten::mm");
  StrId b = t.intern("aten::add");
  EXPECT_NE(a, b);
  EXPECT_EQ(t.intern("aten::mm"), a);
  EXPECT_EQ(t.view(a), "aten::mm");
  EXPECT_EQ(t.view(kEmptyStr), "");
  for (int i = 0; i < 10000; ++i) t.intern("k" + std::to_string(i));
  EXPECT_EQ(t.view(a), "aten::mm");  // views survive growth
  bool found = true;
  t.find("never", &found);
  EXPECT_FALSE(found);
}

TEST(AtomicFile, UncommittedWriteLeavesNoFile) {
  std::string dir = test::temp_dir("atomic");
  std::string path = dir + "/out.json";
  {
    AtomicFile f;
    ASSERT_TRUE(f.open(path).ok());
    ASSERT_TRUE(f.write("{\"partial\":").ok());
  }  // destroyed without commit, as on an error path
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  ASSERT_TRUE(write_file_atomic(path, "{}").ok());
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(s, "{}");
}

TEST(AtomicFile, UnwritableDirectoryIsAnError) {
  Status s = write_file_atomic("/nonexistent-dir/x.json", "{}");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what.find("cannot write"), std::string::npos);
}

TEST(Stats, MedianTakesTheMeanOfTheTwoMiddleValues) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({7.5}), 7.5);
  EXPECT_EQ(median({5, 1, 3}), 3.0);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);  // (2 + 3) / 2, not the upper 3
  EXPECT_EQ(median({-1, 10, 10, -1, 2, 2}), 2.0);
  const std::vector<double> v = {9, 8, 7, 6};
  EXPECT_EQ(median(v), 7.5);
  EXPECT_EQ(v, (std::vector<double>{9, 8, 7, 6}));  // taken by value: the caller's order stays
}

TEST(Stats, UpperMedianTakesTheUpperMiddleValue) {
  std::vector<int64_t> empty;
  EXPECT_EQ(upper_median(empty, int64_t{-5}), -5);
  std::vector<int64_t> odd = {50, 10, 30};
  EXPECT_EQ(upper_median(odd, int64_t{0}), 30);
  std::vector<int64_t> even = {4, 1, 3, 2};
  EXPECT_EQ(upper_median(even, int64_t{0}), 3);  // the upper of 2 and 3, never their mean
  // Always one of the values: no overflow where a mean of two large ones would.
  const int64_t big = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> large = {big, big - 2};
  EXPECT_EQ(upper_median(large, int64_t{0}), big);
  std::vector<double> d = {1.0, 2.0};
  EXPECT_EQ(upper_median(d, 0.0), 2.0);
}

}  // namespace
}  // namespace emo
