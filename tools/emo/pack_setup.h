// The flags and steps that `emo pack`, `emo profile` and `emo optimize` share: load one step of the
// traces, analyze it, pack it for a device, and get the profiling runs (from the emulated GPU or from a
// folder recorded on hardware).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/base/result.h"
#include "emo/device/profile.h"
#include "emo/pack/fit.h"
#include "emo/pack/pack.h"

namespace emo::cli {

struct PackFlags {
  std::vector<std::string> traces;
  std::string device = "h100";
  int64_t step = -1;
  double min_pack = 1.0;
  double min_pack_ms = -1;  // (only read when --min-pack-ms was given)
  CLI::Option* min_pack_ms_option = nullptr;
  double critical_us = 50;
  int clocks = 4;
  bool per_kernel = false;
  // Registers the flags on `sub` (the traces positional included).
  void add_to(CLI::App* sub, const std::string& device_help);
};

struct PackedStep {
  device::DeviceProfile profile;
  analysis::Workload workload;
  pack::Packing packing;
};
Result<PackedStep> load_and_pack(const PackFlags& f);

// Profiling runs for the packing: read from `profiled_dir` when given, else run on `profile_on`
// (default: the emulated GPU of the step's device profile).
Result<std::vector<pack::ProfiledRun>> profiling_runs(const PackedStep& s, const std::string& profile_on,
                                                      const std::string& profiled_dir);

}  // namespace emo::cli
