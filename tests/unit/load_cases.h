// Rank files of a synthetic job written for the tests of loads over several processes, and the bad inputs
// those loads must say as one process does.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/synth/synth.h"
#include "test_util.h"

namespace emo::test {

// `emo synth WL --ranks N --layers 2` written to a fresh folder: its files in rank order.
inline std::vector<std::string> synth_files(const std::string& tag, synth::Workload wl, int ranks) {
  synth::Options o;
  o.workload = wl;
  o.ranks = ranks;
  o.layers = 2;
  std::vector<std::string> files;
  Status st = synth::write_traces(o, temp_dir(tag), &files);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());
  return files;
}

struct LoadCase {
  std::string name;
  std::vector<std::string> paths;
  analysis::LoadOptions options;
};

// Bad inputs made of a job's rank `files` (4 or more): a missing file in the last shard; an earlier one that
// is not JSON besides it (the earlier is said); the same rank in two files; one file named twice; a step
// none of them has.
inline std::vector<LoadCase> load_error_cases(const std::vector<std::string>& files) {
  const std::string dir = std::filesystem::path(files[0]).parent_path().string();
  std::vector<LoadCase> cases;
  cases.push_back({"missing", {files[0], files[1], files[2], dir + "/absent.json"}, {}});
  cases.push_back({"two bad", {files[0], write(dir, "bad.json", "{\"traceEvents\": [oops"), files[2], dir + "/absent.json"}, {}});
  cases.push_back({"same rank", {files[0], files[1], files[2], write(dir, "rank1_copy.json", slurp(files[1]))}, {}});
  cases.push_back({"same file twice", {files[0], files[1], files[2], files[3], files[2]}, {}});
  analysis::LoadOptions no_step;
  no_step.step = 999;
  cases.push_back({"no such step", files, no_step});
  return cases;
}

}  // namespace emo::test
