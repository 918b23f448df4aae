// StringTable, AtomicFile and parallel_for behaviour.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "emo/base/file_util.h"
#include "emo/base/parallel.h"
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

}  // namespace
}  // namespace emo
