// Kernel classes and the clock response of time and power for the emulated GPU (see truth.h). The
// class ranges are set so that the curves look like the measured ones in ../shared/dvfs: GEMMs scale
// almost as 1/f (V100 matrixMul 1.44× at 945 vs 1380 MHz), memory-bound kernels stay flat to ~0.7·f_max
// and degrade faster than 1/f below, power follows V(f)²·f above the voltage knee;
// tests/unit/emulator_test.cpp fits these curves to the V100 sweeps and the Perseus A100 stages.
#include "truth.h"

#include "emo/base/comm_kernels.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace emo::emulator::detail {

const char* to_string(KernelClass c) {
  switch (c) {
    case KernelClass::kGemm: return "gemm";
    case KernelClass::kAttention: return "attention";
    case KernelClass::kElementwise: return "elementwise";
    case KernelClass::kReduction: return "reduction";
    case KernelClass::kCommunication: return "communication";
    case KernelClass::kCopy: return "copy";
    case KernelClass::kOther: return "other";
  }
  return "other";
}

namespace {
bool has(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }
}  // namespace

KernelClass classify_kernel(std::string_view raw) {
  std::string s(raw);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (is_communication_kernel(raw)) return KernelClass::kCommunication;  // the shared classifier
  if (has(s, "memcpy") || has(s, "memset") || has(s, "copy_kernel")) return KernelClass::kCopy;
  if (has(s, "flash") || has(s, "fmha") || has(s, "attention") || has(s, "attn") || has(s, "sdpa"))
    return KernelClass::kAttention;
  if (has(s, "gemm") || has(s, "xmma") || has(s, "cutlass") || has(s, "matmul") || has(s, "wgmma") ||
      has(s, "cublas") || has(s, "conv") || has(s, "sm80_") || has(s, "sm90_") || has(s, "ampere_") ||
      has(s, "volta_"))
    return KernelClass::kGemm;
  if (has(s, "reduce") || has(s, "norm") || has(s, "softmax") || has(s, "sum") || has(s, "mean") ||
      has(s, "argmax") || has(s, "topk") || has(s, "cross_entropy") || has(s, "nll"))
    return KernelClass::kReduction;
  if (has(s, "elementwise") || has(s, "vectorized") || has(s, "unrolled") || has(s, "fill") ||
      has(s, "gelu") || has(s, "relu") || has(s, "silu") || has(s, "dropout") || has(s, "add") ||
      has(s, "mul") || has(s, "adam") || has(s, "foreach") || has(s, "cat") || has(s, "index") ||
      has(s, "embedding") || has(s, "rotary"))
    return KernelClass::kElementwise;
  return KernelClass::kOther;
}

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double unit_hash(uint64_t h) { return static_cast<double>(mix64(h) >> 11) * 0x1.0p-53; }

uint64_t hash_name(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

namespace {
double lerp(double lo, double hi, double u) { return lo + (hi - lo) * u; }
}  // namespace

KernelTruth make_kernel_truth(std::string_view name, uint64_t seed) {
  KernelTruth k;
  k.cls = classify_kernel(name);
  const uint64_t h = hash_name(name) ^ mix64(seed);
  auto u = [&](uint64_t salt) { return unit_hash(h + salt * 0x632be59bd9b4e019ull); };
  switch (k.cls) {
    case KernelClass::kGemm:
      k.compute = lerp(0.86, 0.97, u(1)); k.overhead = lerp(0.005, 0.02, u(2));
      k.activity = lerp(1.05, 1.25, u(3)); k.mem_activity = 0.6;
      break;
    case KernelClass::kAttention:
      k.compute = lerp(0.62, 0.85, u(1)); k.overhead = lerp(0.01, 0.03, u(2));
      k.activity = lerp(0.95, 1.15, u(3)); k.mem_activity = 0.8;
      break;
    case KernelClass::kElementwise:
      k.compute = lerp(0.08, 0.25, u(1)); k.overhead = lerp(0.02, 0.06, u(2));
      k.activity = lerp(0.5, 0.7, u(3)); k.mem_activity = lerp(0.9, 1.1, u(4));
      break;
    case KernelClass::kReduction:
      k.compute = lerp(0.2, 0.45, u(1)); k.overhead = lerp(0.02, 0.06, u(2));
      k.activity = lerp(0.6, 0.8, u(3)); k.mem_activity = lerp(0.8, 1.0, u(4));
      break;
    case KernelClass::kCommunication:
      k.compute = lerp(0.02, 0.08, u(1)); k.overhead = lerp(0.3, 0.6, u(2));
      k.activity = 0.35; k.mem_activity = 0.3; k.comm = 1;
      break;
    case KernelClass::kCopy:
      k.compute = lerp(0.0, 0.05, u(1)); k.overhead = lerp(0.3, 0.5, u(2));
      k.activity = 0.2; k.mem_activity = lerp(0.6, 0.9, u(4));
      break;
    case KernelClass::kOther:
      k.compute = lerp(0.3, 0.7, u(1)); k.overhead = lerp(0.02, 0.05, u(2));
      k.activity = lerp(0.7, 0.9, u(3)); k.mem_activity = 0.8;
      break;
  }
  k.mem_knee = lerp(-0.04, 0.04, u(5));  // offset, added to the GPU's knee in time_ratio
  k.mem_gamma = lerp(1.6, 2.0, u(6));
  k.sharpness = lerp(4.0, 8.0, u(7));
  return k;
}

KernelTruth fma_truth() {
  KernelTruth k; k.cls = KernelClass::kOther; k.compute = 0.995; k.overhead = 0.002; k.activity = 1.0;
  k.mem_activity = 0; k.mem_knee = 0; return k;
}
KernelTruth stream_truth() {
  KernelTruth k; k.cls = KernelClass::kCopy; k.compute = 0.06; k.overhead = 0.003; k.activity = 0.45;
  k.mem_activity = 1.0; k.mem_knee = 0; return k;
}
KernelTruth gemm_truth() {
  KernelTruth k; k.cls = KernelClass::kGemm; k.compute = 0.93; k.overhead = 0.004; k.activity = 1.2;
  k.mem_activity = 0.5; k.mem_knee = 0; return k;
}
// A kernel doing `fpb` FMAs per byte: compute share = fpb / (fpb + ridge), ridge where both take as
// long at f_max (the device's flop:byte balance, ~10 FMA/B on these GPUs).
KernelTruth intensity_truth(double fpb, const GpuTruth&) {
  KernelTruth k; k.cls = KernelClass::kOther;
  const double ridge = 10.0;
  k.compute = std::clamp(fpb / (fpb + ridge), 0.01, 0.995);
  k.overhead = 0.003; k.activity = 1.0; k.mem_activity = 1.0; k.mem_knee = 0;
  return k;
}

double GpuTruth::voltage(double f) const {
  if (f <= v_knee) return v_floor;
  return v_floor + (1 - v_floor) * std::min(1.0, (f - v_knee) / (f_max - v_knee));
}

namespace {
struct Shares { double a, b, s; };
Shares shares(const KernelTruth& k, double f, double f_max, double knee_frac) {
  const double x = f / f_max;
  const double knee = std::clamp(knee_frac + k.mem_knee, 0.3, 0.95);
  const double g = x < knee ? std::pow(knee / x, k.mem_gamma) : 1.0;
  const double a = k.compute / x, b = (1 - k.compute) * g;
  const double s = std::pow(std::pow(a, k.sharpness) + std::pow(b, k.sharpness), 1.0 / k.sharpness);
  return {a, b, s};
}
}  // namespace

double GpuTruth::raw_time_ratio(const KernelTruth& k, double f) const {
  const Shares sh = shares(k, f, f_max, mem_knee);
  const Shares ref = shares(k, f_max, f_max, mem_knee);
  return k.overhead + (1 - k.overhead) * sh.s / ref.s;
}

double GpuTruth::raw_dynamic_w(const KernelTruth& k, double f) const {
  const Shares sh = shares(k, f, f_max, mem_knee);
  const double busy = 1 - k.overhead * (1 / raw_time_ratio(k, f));  // share of time the SMs are doing the kernel
  const double uc = std::min(1.0, sh.a / sh.s), um = std::min(1.0, sh.b / sh.s);
  const double v = voltage(f) / voltage(f_max);
  double sm = v * v * (f / f_max) * dynamic_w * k.activity * (clock_frac + (1 - clock_frac) * uc);
  if (k.comm > 0) sm = v * v * (f / f_max) * dynamic_w * k.activity * 0.6;  // spinning on flags
  return std::max(0.0, busy) * (sm + mem_w * k.mem_activity * um) +
         (1 - std::max(0.0, busy)) * v * v * (f / f_max) * dynamic_w * clock_frac * 0.3;
}

double GpuTruth::raw_power_w(const KernelTruth& k, double f) const {
  const double v = voltage(f) / voltage(f_max);
  const double vf = voltage(v_knee) / voltage(f_max);
  const double leak = static_w * (1 + leak_slope * (v - vf) / std::max(1e-9, 1 - vf));
  return leak + raw_dynamic_w(k, f);
}

// The trace's durations are this GPU's at f_max as it runs there, throttled where the kernel draws more
// than the limit (as a trace recorded at the default clocks is): the ratio is relative to that, so a
// throttled kernel takes as long at every clock from its throttle clock up, and longer below it.
double GpuTruth::time_ratio(const KernelTruth& k, double f) const {
  return raw_time_ratio(k, std::min(f, k.throttle_mhz)) / raw_time_ratio(k, std::min(f_max, k.throttle_mhz));
}
double GpuTruth::dynamic_part_w(const KernelTruth& k, double f) const {
  return raw_dynamic_w(k, std::min(f, k.throttle_mhz));
}
double GpuTruth::power_w(const KernelTruth& k, double f) const {
  return std::min(tdp_w, raw_power_w(k, std::min(f, k.throttle_mhz)));
}

void GpuTruth::set_throttle(KernelTruth& k) const {
  k.throttle_mhz = 1e12;
  if (tdp_w <= 0 || raw_power_w(k, f_max) <= tdp_w) return;
  // The power rises with the clock (voltage and frequency): bisect for the clock where it meets the limit.
  double lo = 0.1 * f_max, hi = f_max;
  if (raw_power_w(k, lo) > tdp_w) {
    k.throttle_mhz = lo;
    return;
  }
  for (int i = 0; i < 40; ++i) {
    const double mid = 0.5 * (lo + hi);
    (raw_power_w(k, mid) > tdp_w ? hi : lo) = mid;
  }
  k.throttle_mhz = lo;
}

double GpuTruth::idle_power_w(double f) const {
  const double v = voltage(f) / voltage(f_max);
  return idle_w * (0.82 + 0.18 * v * v * (f / f_max));
}

GpuTruth make_gpu_truth(const device::DeviceProfile& p, uint64_t seed) {
  GpuTruth g;
  auto u = [&](uint64_t salt) { return unit_hash(mix64(seed) + salt * 0x9e3779b97f4a7c15ull); };
  g.f_max = p.max_clock_mhz();
  g.v_knee = p.voltage.knee_mhz.value * lerp(0.97, 1.03, u(1));
  g.v_floor = std::clamp(p.voltage.floor_rel.value * lerp(0.98, 1.02, u(2)), 0.5, 0.99);
  g.static_w = p.power.const_w.value * lerp(0.95, 1.05, u(3));
  g.dynamic_w = p.power.dynamic_w.value * lerp(0.93, 1.07, u(4));
  g.clock_frac = std::clamp(p.power.clock_frac.value * lerp(0.9, 1.1, u(5)), 0.05, 0.9);
  g.mem_w = p.power.mem_w.value * lerp(0.9, 1.1, u(6));
  g.idle_w = p.idle_power_w.value * lerp(0.97, 1.03, u(7));
  g.tdp_w = p.tdp_w.value;
  g.mem_knee = std::clamp(p.time.mem_knee_frac.value * lerp(0.96, 1.04, u(9)), 0.4, 0.9);
  g.leak_slope = lerp(0.1, 0.2, u(8));
  return g;
}

}  // namespace emo::emulator::detail
