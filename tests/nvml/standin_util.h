// The fixture of the tests over the stand-in libnvidia-ml.so.1 (tests/nvml_standin/nvml_standin.cpp):
// every test gets its own state and log file, set in the environment the stand-in reads at each call,
// and refuses to run unless the libnvidia-ml.so.1 that dlopen finds is the stand-in (never a real GPU).
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace emo::test {

inline const char* const kStandinVars[] = {"EMO_NVML_STANDIN_STATE", "EMO_NVML_STANDIN_GPUS",
                                           "EMO_NVML_STANDIN_NAME",  "EMO_NVML_STANDIN_LOG",
                                           "EMO_NVML_STANDIN_FAIL",  "EMO_NVML_STANDIN_LATENCY_MS"};

// One logged call: pid, function, args, rc.
struct LoggedCall {
  long pid = 0;
  std::string fn;
  std::vector<std::string> args;
  int rc = 0;
};

class StandinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kStandinVars) ::unsetenv(v);
    // The same search as nvml.cpp's dlopen: LD_LIBRARY_PATH (ctest sets it) before the system's.
    lib_ = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << "no libnvidia-ml.so.1: run through ctest, or with LD_LIBRARY_PATH="
                             << EMO_NVML_STANDIN_DIR;
    init_count_ = reinterpret_cast<int (*)()>(::dlsym(lib_, "emo_nvml_standin_init_count"));
    ASSERT_NE(init_count_, nullptr) << "the libnvidia-ml.so.1 found is not the stand-in (a real driver's?): "
                                       "run with LD_LIBRARY_PATH="
                                    << EMO_NVML_STANDIN_DIR;
    ASSERT_EQ(init_count_(), 0) << "an earlier test left NVML initialized";
    std::string tmpl = (std::filesystem::temp_directory_path() / "emo-nvml-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    state_ = dir_ + "/state";
    log_ = dir_ + "/log";
    ::setenv("EMO_NVML_STANDIN_STATE", state_.c_str(), 1);
    ::setenv("EMO_NVML_STANDIN_LOG", log_.c_str(), 1);
  }

  void TearDown() override {
    // Every open_nvml_device is undone by the device's destructor (or the open's own error path).
    if (init_count_) {
      EXPECT_EQ(init_count_(), 0) << "NVML inits not paired with shutdowns";
    }
    for (const char* v : kStandinVars) ::unsetenv(v);
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
    if (lib_) ::dlclose(lib_);
  }

  // A stand-in entry point, to call NVML directly (as a clock daemon would).
  template <class F>
  F sym(const char* name) {
    return reinterpret_cast<F>(::dlsym(lib_, name));
  }

  // GPU `gpu`'s `key` in the state file ("locked_mhz", "energy_uj"), or -1 without such a line.
  long long state_value(int gpu, const std::string& key = "locked_mhz") const {
    std::ifstream in(state_);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string word;
      int idx = -1;
      if (!(ls >> word) || word == "end") break;
      if (word != "gpu" || !(ls >> idx) || idx != gpu) continue;
      std::string k;
      long long v = 0;
      while (ls >> k >> v) {
        if (k == key) return v;
      }
    }
    return -1;
  }
  long long locked_mhz(int gpu = 0) const { return state_value(gpu, "locked_mhz"); }

  // nvmlDeviceGetClockInfo(SM) of GPU `gpu`, called straight into the stand-in (its own init and
  // shutdown); 0 when a call fails.
  unsigned sm_clock(unsigned gpu = 0) {
    auto init = sym<int (*)()>("nvmlInit_v2");
    auto shutdown = sym<int (*)()>("nvmlShutdown");
    auto handle = sym<int (*)(unsigned, void**)>("nvmlDeviceGetHandleByIndex_v2");
    auto info = sym<int (*)(void*, int, unsigned*)>("nvmlDeviceGetClockInfo");
    if (!init || !shutdown || !handle || !info || init() != 0) return 0;
    void* h = nullptr;
    unsigned mhz = 0;
    if (handle(gpu, &h) != 0 || info(h, /*NVML_CLOCK_SM*/ 1, &mhz) != 0) mhz = 0;
    shutdown();
    return mhz;
  }

  std::vector<LoggedCall> calls(const std::string& fn = "") const {
    std::vector<LoggedCall> out;
    std::ifstream in(log_);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      LoggedCall c;
      if (!(ls >> c.pid >> c.fn)) continue;
      std::string w;
      while (ls >> w) c.args.push_back(w);
      if (c.args.empty()) continue;
      c.rc = std::stoi(c.args.back());
      c.args.pop_back();
      if (fn.empty() || c.fn == fn) out.push_back(std::move(c));
    }
    return out;
  }

  std::string log_text() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  void* lib_ = nullptr;
  int (*init_count_)() = nullptr;
  std::string dir_, state_, log_;
};

}  // namespace emo::test
