// The NVML backend: a real NVIDIA GPU, steered through libnvidia-ml.so.1, which is loaded with dlopen
// when a device is opened (nothing NVIDIA is needed to build EMO). Microbenchmarks run in a child
// process, `emo-microbench` (gpu/microbench.cu), found next to the running binary or on PATH; the
// energy of a run is the NVML energy-counter delta between the child's "start" line and its result.
// Only lock_sm_clock / reset_sm_clock change anything on the GPU, and they need root.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "emo/base/result.h"
#include "emo/device/device.h"
#include "emo/device/profile.h"

namespace emo::device {

// What NVML saw while the last benchmark ran (sampled about every 100 ms).
struct BenchTelemetry {
  uint64_t throttle_reasons = 0;  // OR of nvmlClocksThrottleReason* bits over the run
  double mean_sm_clock_mhz = 0;   // mean of the sampled SM clock; 0 when nothing was sampled
  int samples = 0;
  // "power cap", "thermal slowdown", ...: the reasons that lower the clock below a lock; empty if none.
  std::string slowdown() const;
};

class NvmlDevice : public Device {
 public:
  struct Library;  // the loaded libnvidia-ml.so.1 and its entry points (nvml.cpp)

  NvmlDevice(std::shared_ptr<Library> lib, void* handle, int index, std::string name, DeviceProfile profile);
  ~NvmlDevice() override;

  std::string spec() const override { return "nvml:" + std::to_string(index_); }
  std::string model_name() const override { return name_; }
  const DeviceProfile& profile() const override { return profile_; }
  Result<std::vector<int>> supported_sm_clocks() override;
  Status lock_sm_clock(int mhz) override;
  Status reset_sm_clock() override;
  Result<double> energy_j() override;
  Result<BenchRun> run_benchmark(const BenchSpec& spec) override;

  const BenchTelemetry& last_telemetry() const { return telemetry_; }
  // How the profile was chosen from the product name (empty when the name matched directly).
  const std::string& profile_note() const { return profile_note_; }
  void set_profile_note(std::string note) { profile_note_ = std::move(note); }

 private:
  std::shared_ptr<Library> lib_;
  void* handle_;  // nvmlDevice_t
  int index_;
  std::string name_;
  std::string uuid_;
  DeviceProfile profile_;
  std::string profile_note_;
  BenchTelemetry telemetry_;
};

// Opens GPU `index` (NVML's numbering, the one nvidia-smi shows). Errors name "nvml:INDEX": no
// libnvidia-ml.so.1, no driver, no such GPU, or a product name no built-in profile resembles.
Result<std::unique_ptr<Device>> open_nvml_device(int index);

// "NVIDIA H100 80GB HBM3" -> the h100 profile. Matched by substring (h200, h100, a100, v100 — PCIe
// boards get v100-pcie —, a40); otherwise the built-in of the same family letter with the nearest
// model number ("NVIDIA H800" -> h100), with `note` saying so; no such family -> Error.
struct ProfileMatch {
  DeviceProfile profile;
  std::string note;  // empty for a direct match
};
Result<ProfileMatch> match_profile(std::string_view product_name);

// ---- the microbenchmark child process (used by NvmlDevice; exposed for tests) ----------------------

// emo-microbench's command line for one run. `uuid` (NVML's "GPU-..." string) selects the GPU when
// given, else `--device index` with CUDA_DEVICE_ORDER=PCI_BUS_ID, which matches NVML's numbering.
std::vector<std::string> microbench_args(const BenchSpec& spec, int index, const std::string& uuid);

// The executable: `emo-microbench` beside the running binary (/proc/self/exe), else on PATH.
Result<std::string> find_microbench();

// One line of emo-microbench output: {"phase":"start"} (returns kind "start") or the result
// {"kind":"fma_loop","seconds":2.01,"iterations":1234}.
struct MicrobenchLine {
  std::string kind;
  double seconds = 0;
  int64_t iterations = 0;
};
Result<MicrobenchLine> parse_microbench_line(std::string_view line);

// Runs `argv` (argv[0] = the executable), reads the energy counter when the child prints its start
// line and again at its result line, calls `sample` about every 100 ms while it runs, and kills it
// after `timeout_s`. Errors carry the child's last stderr line.
Result<BenchRun> run_microbench(const std::vector<std::string>& argv,
                                const std::function<Result<double>()>& energy_j,
                                const std::function<void()>& sample, double timeout_s);

}  // namespace emo::device
