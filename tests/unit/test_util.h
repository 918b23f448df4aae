// Helpers shared by the unit tests: where the real data is, temp dirs, devices opened once.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/backends/evaluation.h"
#include "emo/backends/target.h"
#include "emo/device/profile.h"

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

// `text` written to DIR/NAME; returns the path.
inline std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The whole file ("" when it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `emo ARGS` with stdout and stderr into `out`; its exit status (-1 when it did not exit).
inline int run(const std::string& args, const std::string& out) {
  std::string cmd = std::string(EMO_BINARY) + " " + args + " > " + out + " 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// A built-in device profile (the test fails where the name is not one).
inline device::DeviceProfile profile(const char* name) {
  auto p = device::builtin_profile(name);
  EXPECT_TRUE(p.ok()) << name;
  return p.ok() ? *p : device::DeviceProfile{};
}

// The step of trace texts (one per rank, parsed as "rank<i>.json"), assembled as `emo analyze` would;
// the test fails (and an empty workload comes back) where one does not parse or assemble.
inline analysis::Workload workload_of(const std::vector<std::string>& jsons) {
  std::vector<trace::RankTrace> ranks;
  for (size_t i = 0; i < jsons.size(); ++i) {
    auto t = trace::parse_trace(jsons[i], "rank" + std::to_string(i) + ".json");
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message());
    if (!t.ok()) return {};
    ranks.push_back(std::move(t).value());
  }
  auto w = analysis::assemble(std::move(ranks), {});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
  return w.ok() ? std::move(w).value() : analysis::Workload{};
}

// The step of trace files (one per rank), loaded as `emo analyze` loads them; the test fails (and an
// empty workload comes back) where they do not load.
inline analysis::Workload workload_of_files(const std::vector<std::string>& paths) {
  auto w = analysis::load(paths, {});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
  return w.ok() ? std::move(w).value() : analysis::Workload{};
}

// The step span (µs) `emo whatif` predicts for the workload with the given scales ("gemm=1.5", ...);
// -1 (and a failed test) where a scale does not parse or the what-if fails.
inline double predicted_span_us(const analysis::Workload& w, const std::vector<std::string>& scales) {
  std::vector<analysis::Scale> ss;
  for (const auto& s : scales) {
    auto sc = analysis::parse_scale(s);
    EXPECT_TRUE(sc.ok()) << s;
    if (!sc.ok()) return -1;
    ss.push_back(*sc);
  }
  auto r = analysis::what_if(w, ss);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
  return r.ok() ? static_cast<double>(r->predicted_span_ns) / 1000.0 : -1;
}

// The device `spec` names ("emulated:h100", "h100", ...), opened once for the test binary's life;
// a spec that does not open throws (the test fails with its message).
inline const backends::Target& target(const std::string& spec) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<backends::Target>> opened;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = opened[spec];
  if (!slot) {
    auto t = backends::Target::open(spec);
    if (!t) throw std::runtime_error("cannot open " + spec + ": " + t.error().message());
    slot = std::make_unique<backends::Target>(std::move(*t));
  }
  return *slot;
}

// Plans of `w` run on the emulated device `spec`, as the check and the evaluation run them.
inline backends::EmulatedMeter meter(const std::string& spec, const analysis::Workload& w, int default_clock_mhz) {
  auto m = backends::EmulatedMeter::make(target(spec), w, default_clock_mhz);
  if (!m) throw std::runtime_error("cannot measure on " + spec + ": " + m.error().message());
  return std::move(*m);
}
inline backends::EmulatedMeter meter(const std::string& spec, const optimize::Problem& pr) {
  return meter(spec, *pr.workload, pr.default_clock_mhz);
}

}  // namespace emo::test
