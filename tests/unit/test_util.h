// Helpers shared by the unit tests: where the real data is, temp dirs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace emo::test {

// Absolute path of a file under ../shared, or "" when ../shared is absent.
inline std::string shared_path(const std::string& rel) {
  std::filesystem::path p = std::filesystem::path(EMO_SHARED_DIR) / rel;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

// Inside a TEST: skip with a clear message when the shared file is missing.
#define EMO_REQUIRE_SHARED(var, rel)                                                   \
  std::string var = ::emo::test::shared_path(rel);                                     \
  if (var.empty()) GTEST_SKIP() << "../shared/" << (rel)                               \
                                << " is absent (real data lives beside the checkout)"

// The files in a directory, sorted by path (one file per rank of a step, e.g. ../shared's DLRM set).
inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A fresh empty directory under the system temp dir, removed by the caller if wanted.
inline std::string temp_dir(const std::string& tag) {
  auto base = std::filesystem::temp_directory_path() /
              ("emo_test_" + tag + "_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  return base.string();
}

}  // namespace emo::test
