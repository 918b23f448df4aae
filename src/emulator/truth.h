// The emulated GPU's hidden truth: how each kernel's time and power respond to the SM clock. Only the
// emulator library includes this header (it is not under include/), and model/, pack/ and optimize/
// do not link the emulator (the build checks it), so the optimizer sees what it would on hardware:
// traces and energy-counter logs, never these numbers.
//
// A kernel's class (GEMM / attention / elementwise / reduction / communication / copy / other) comes
// from its name; its parameters are drawn from the class's range by a hash of (name, seed), so the
// same kernel behaves the same everywhere in a run and a different seed gives a different GPU.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "emo/device/profile.h"

namespace emo::emulator::detail {

enum class KernelClass : uint8_t { kGemm, kAttention, kElementwise, kReduction, kCommunication, kCopy, kOther };
const char* to_string(KernelClass c);
KernelClass classify_kernel(std::string_view name);

// Time at clock f relative to its time at f_max:
//   r(f) = o + (1 − o) · S(c·f_max/f, m·g(f)) / S(c, m),   S(a, b) = (a^p + b^p)^(1/p)
// a smooth roofline (p = `sharpness`, not the model's hard max), c + m = 1 the compute and memory
// shares at f_max, g(f) = (knee/f)^gamma below the memory knee. Example, GEMM c 0.9, o 0.02:
// r(f_max/2) ≈ 0.02 + 0.98·1.8/0.9 = 1.98.
struct KernelTruth {
  KernelClass cls = KernelClass::kOther;
  double compute = 0.5;     // c
  double overhead = 0.02;   // o: clock-independent share (launch tail, sync)
  double mem_knee = 0;      // offset from the GPU's memory knee (fraction of f_max)
  double mem_gamma = 1.8;
  double sharpness = 6;     // p
  double activity = 1.0;    // dynamic-power activity of the SMs when compute-bound (tensor cores > 1)
  double mem_activity = 1;  // DRAM power when memory-bound, relative to the device's mem_w
  double comm = 0;          // 1 for communication: SMs mostly spin on flags
  // The clock the GPU runs this kernel at when a higher one is set: where its power meets the board's
  // limit (the GPU lowers its clock to stay under it, as the hardware's power brake does). Set for a
  // GPU by GpuTruth::set_throttle; the default never throttles.
  double throttle_mhz = 1e12;
};

// Per-GPU constants drawn once per emulated GPU (seeded) around the device profile.
struct GpuTruth {
  double f_max = 0;
  double v_knee = 0;       // MHz
  double v_floor = 0.8;    // relative
  double static_w = 0;     // leakage + board at the voltage floor
  double dynamic_w = 0;    // dynamic SM power at f_max, fully busy, activity 1
  double clock_frac = 0.3; // stalled-SM share of dynamic power
  double mem_w = 0;
  double mem_knee = 0.7;   // memory-bound kernels flat down to this fraction of f_max (± per kernel)
  double idle_w = 0;       // nothing running, at f_max
  double tdp_w = 0;
  double leak_slope = 0.15;  // static power grows with voltage: static·(1 + leak_slope·(V−V_floor)/(1−V_floor))

  double voltage(double f) const;
  // At clock f set, the kernel runs at min(f, k.throttle_mhz): these are its time and power there.
  // T(f)/T(f_max), both as run (a throttled kernel takes as long at every clock above its throttle clock).
  double time_ratio(const KernelTruth& k, double f) const;
  double power_w(const KernelTruth& k, double f) const;      // busy power of this kernel alone
  double dynamic_part_w(const KernelTruth& k, double f) const;  // power_w minus static
  double idle_power_w(double f) const;                       // nothing running, clock f locked
  // Sets k.throttle_mhz: the highest clock at which the kernel alone draws at most tdp_w.
  void set_throttle(KernelTruth& k) const;

 private:
  double raw_time_ratio(const KernelTruth& k, double f) const;  // at clock f, whatever its power
  double raw_dynamic_w(const KernelTruth& k, double f) const;
  double raw_power_w(const KernelTruth& k, double f) const;
};

// The truths of one run's kernels, evaluated once per (kernel, clock): a run sees a few clocks, and
// each evaluation costs a handful of pow() calls (the emulator's hot spot before). The values are
// the GpuTruth's own, bit for bit. Not shared between threads.
class TruthMemo {
 public:
  TruthMemo(const GpuTruth& gpu, const std::vector<KernelTruth>& truths)
      : gpu_(gpu), truths_(truths), at_(truths.size()) {}
  const GpuTruth& gpu() const { return gpu_; }
  double time_ratio(uint32_t k, double f) const { return entry(k, f).time_ratio; }
  double power_w(uint32_t k, double f) const { return entry(k, f).power_w; }
  double dynamic_part_w(uint32_t k, double f) const { return entry(k, f).dynamic_w; }

 private:
  struct Entry {
    double f, time_ratio, power_w, dynamic_w;
  };
  const Entry& entry(uint32_t k, double f) const {
    std::vector<Entry>& e = at_[k];
    for (const Entry& x : e) {
      if (x.f == f) return x;
    }
    const KernelTruth& t = truths_[k];
    e.push_back(Entry{f, gpu_.time_ratio(t, f), gpu_.power_w(t, f), gpu_.dynamic_part_w(t, f)});
    return e.back();
  }
  const GpuTruth& gpu_;
  const std::vector<KernelTruth>& truths_;
  mutable std::vector<std::vector<Entry>> at_;
};

GpuTruth make_gpu_truth(const device::DeviceProfile& profile, uint64_t seed);
KernelTruth make_kernel_truth(std::string_view name, uint64_t seed);
// The microbenchmarks' truths (calibration): compute FMA loop, stream copy, intensity sweep, GEMM.
KernelTruth fma_truth();
KernelTruth stream_truth();
KernelTruth intensity_truth(double flops_per_byte, const GpuTruth& gpu);
KernelTruth gemm_truth();

uint64_t mix64(uint64_t x);
uint64_t hash_name(std::string_view s);  // FNV-1a
// Uniform in [0, 1) from a hash.
double unit_hash(uint64_t h);

}  // namespace emo::emulator::detail
