// A GPU EMO can measure and steer: its supported SM clocks, locking and resetting the SM clock, its
// cumulative energy counter, and running the project's microbenchmarks. Two backends implement it:
// NVML on real NVIDIA GPUs (emo/device/nvml.h, libnvidia-ml.so.1 loaded at run time) and the
// emulated GPU (emo/emulator/emulator.h), whose time is virtual. `open_device` (emo/backends) maps
// a spec such as "nvml:0" or "emulated:h100" to one of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emo/base/result.h"
#include "emo/device/profile.h"

namespace emo::device {

// The project's microbenchmarks (gpu/microbench.cu on hardware; the emulator's truth otherwise).
enum class BenchKind : uint8_t {
  kFmaLoop,     // compute-bound: a register-resident FMA loop, no memory traffic
  kStreamCopy,  // memory-bound: a streaming copy of a buffer far larger than L2
  kIntensity,   // a kernel with `flops_per_byte` FMAs per byte moved (the roofline sweep)
  kTensorGemm,  // tensor-core GEMM (bf16/fp16 inputs, fp32 accumulate)
  kIdle,        // nothing launched: the GPU idles at the locked clock (idle power)
};
const char* to_string(BenchKind k);

struct BenchSpec {
  BenchKind kind = BenchKind::kFmaLoop;
  double flops_per_byte = 0;  // kIntensity only
  double min_seconds = 1.0;   // run repeatedly for at least this long (energy counters are coarse)
};

// One microbenchmark run at the clock in effect: wall time, how many kernel iterations, and the
// energy-counter delta over exactly that window.
struct BenchRun {
  double seconds = 0;
  int64_t iterations = 0;
  double energy_j = 0;
  double seconds_per_iteration() const { return iterations > 0 ? seconds / double(iterations) : 0; }
  double power_w() const { return seconds > 0 ? energy_j / seconds : 0; }
};

// A reading of a GPU's cumulative energy counter, as logged beside a trace.
struct EnergySample {
  int64_t t_ns = 0;       // absolute, on the trace's clock: baseTimeNanoseconds + ts (RankTrace::origin_ns + ts_ns)
  int64_t energy_mj = 0;  // counter value (integer mJ, as NVML reports it)
};

class Device {
 public:
  virtual ~Device() = default;
  // "nvml:0", "emulated:h100".
  virtual std::string spec() const = 0;
  // The product name the device reports ("NVIDIA H100 80GB HBM3").
  virtual std::string model_name() const = 0;
  // The built-in profile this device is (emulated) or resembles (NVML: matched by product name).
  virtual const DeviceProfile& profile() const = 0;
  // Supported SM clocks, ascending, distinct.
  virtual Result<std::vector<int>> supported_sm_clocks() = 0;
  // Locks the SM clock to `mhz` (min = max). Only `emo calibrate` and the runtime call this.
  virtual Status lock_sm_clock(int mhz) = 0;
  // Undoes every lock: the driver's default clock policy again.
  virtual Status reset_sm_clock() = 0;
  // The cumulative energy counter, joules since an arbitrary origin (updates every 10–100 ms on
  // hardware: measure deltas over long windows).
  virtual Result<double> energy_j() = 0;
  // Runs a microbenchmark at the clock in effect.
  virtual Result<BenchRun> run_benchmark(const BenchSpec& spec) = 0;
};

// Locks the SM clock on request and always resets it: on destruction, and (once installed) when
// the process receives SIGINT, SIGTERM, SIGHUP or SIGQUIT. One guard is active per process. Call
// reset() to get a failed reset as an error; the destructor and the signal handler, which cannot
// return one, try again, then say so on stderr ("error: ... could not be reset") and count it in
// clock_reset_failures(), so that the process can still exit non-zero — a failed reset is never
// swallowed.
// Failed resets that no caller could be told of (a ClockGuard's destructor, its signal handler).
int clock_reset_failures();

class ClockGuard {
 public:
  explicit ClockGuard(Device& device);
  ~ClockGuard();
  ClockGuard(const ClockGuard&) = delete;
  ClockGuard& operator=(const ClockGuard&) = delete;
  Status lock(int mhz);
  Status reset();
  bool locked() const { return locked_; }

 private:
  Device& device_;
  bool locked_ = false;
};

}  // namespace emo::device
