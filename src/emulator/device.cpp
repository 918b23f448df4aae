// The emulated GPU as a `device::Device`, in virtual time: locking a clock takes effect after a drawn
// switching latency, microbenchmarks advance the virtual clock by their true duration, and the energy
// counter is read as hardware reports it (integer mJ, updated every ~20 ms).
#include <cmath>

#include "emo/emulator/emulator.h"
#include "truth.h"

namespace emo::emulator {

namespace {

using detail::GpuTruth;
using detail::KernelTruth;

class EmulatedDevice final : public device::Device {
 public:
  EmulatedDevice(device::DeviceProfile profile, uint64_t seed)
      : profile_(std::move(profile)), gpu_(detail::make_gpu_truth(profile_, seed)), seed_(seed) {
    clock_ = profile_.default_clock_mhz.value;
  }
  std::string spec() const override { return "emulated:" + profile_.name; }
  std::string model_name() const override { return profile_.model + " (emulated)"; }
  const device::DeviceProfile& profile() const override { return profile_; }
  Result<std::vector<int>> supported_sm_clocks() override { return profile_.sm_clocks.mhz; }

  Status lock_sm_clock(int mhz) override {
    if (!std::binary_search(profile_.sm_clocks.mhz.begin(), profile_.sm_clocks.mhz.end(), mhz))
      return make_error(spec(), std::to_string(mhz) + " MHz is not a supported clock",
                        "`emo devices " + profile_.name + "` lists the clocks");
    set_clock(mhz);
    return {};
  }
  Status reset_sm_clock() override {
    set_clock(int(profile_.default_clock_mhz.value));
    return {};
  }
  Result<double> energy_j() override {
    // The counter holds the energy at its last update (every 20 ms here), in whole mJ.
    const double period = 0.020;
    const double last_update = std::floor(now_s_ / period) * period;
    const double e = energy_j_ - power_now_ * (now_s_ - last_update);
    return std::floor(std::max(0.0, e) * 1e3) / 1e3;
  }

  Result<device::BenchRun> run_benchmark(const device::BenchSpec& spec_in) override {
    if (spec_in.min_seconds <= 0) return make_error(spec(), "benchmark min_seconds must be positive");
    KernelTruth k;
    double iter_s = 1e-3;  // one iteration at f_max
    switch (spec_in.kind) {
      case device::BenchKind::kFmaLoop: k = detail::fma_truth(); break;
      case device::BenchKind::kStreamCopy: k = detail::stream_truth(); iter_s = 2e-3; break;
      case device::BenchKind::kIntensity:
        if (spec_in.flops_per_byte <= 0) return make_error(spec(), "intensity benchmark needs flops_per_byte > 0");
        k = detail::intensity_truth(spec_in.flops_per_byte, gpu_);
        break;
      case device::BenchKind::kTensorGemm: k = detail::gemm_truth(); iter_s = 4e-3; break;
      case device::BenchKind::kIdle: break;
    }
    gpu_.set_throttle(k);
    // As a host does with a coarse counter: start right after an update, stop at an update, so the
    // counter delta covers exactly the measured window.
    const double period = 0.020;
    auto to_next_update = [&](auto&& power) {
      const double next = (std::floor(now_s_ / period + 1e-9) + 1) * period;
      advance(next - now_s_, power);
    };
    auto idle = [&](double f) { return gpu_.idle_power_w(f); };
    to_next_update(idle);
    const double e0 = energy_j().value();
    const double t0 = now_s_;
    device::BenchRun run;
    if (spec_in.kind == device::BenchKind::kIdle) {
      advance(spec_in.min_seconds, idle);
      to_next_update(idle);
      run.iterations = 1;
      run.seconds = now_s_ - t0;
      run.energy_j = energy_j().value() - e0;
      return run;
    }
    auto busy = [&](double f) { return gpu_.power_w(k, f); };
    double t_full = t0;
    double window_end = 0;
    while (true) {
      // Run-to-run noise of 0.3 % on each iteration, as repeated kernels show on hardware.
      const double noise = 1 + 0.003 * (2 * detail::unit_hash(seed_ * 977 + uint64_t(++draws_)) - 1);
      const double f = effective_clock();
      const double before = now_s_;
      advance(iter_s * gpu_.time_ratio(k, f) * noise, busy);
      if (now_s_ - t0 >= spec_in.min_seconds && window_end == 0) {
        window_end = (std::floor(before / period + 1e-9) + 1) * period;  // first update after
      }
      if (window_end > 0 && now_s_ >= window_end) break;
      ++run.iterations;
      t_full = now_s_;
    }
    // The counter at `window_end` (the current reading, since the last iteration crosses it).
    const double window_j = energy_j().value() - e0;
    run.seconds = t_full - t0;
    run.energy_j = window_j * run.seconds / (window_end - t0);
    return run;
  }

 private:
  double effective_clock() {
    if (pending_ && now_s_ >= pending_at_s_) {
      clock_ = pending_mhz_;
      pending_ = false;
    }
    return clock_;
  }
  void set_clock(int mhz) {
    const double med = profile_.switch_latency_median_ms.value / 1e3;
    const double sigma = std::log(std::max(1.0001, profile_.switch_latency_p99_ms.value / profile_.switch_latency_median_ms.value)) / 2.326;
    const double u = std::clamp(detail::unit_hash(seed_ * 131 + uint64_t(++draws_)), 1e-6, 1 - 1e-6);
    // Inverse normal CDF by a logistic approximation is plenty for a latency draw.
    const double z = std::log(u / (1 - u)) / 1.702;
    pending_ = true;
    pending_mhz_ = mhz;
    pending_at_s_ = now_s_ + med * std::exp(sigma * z);
  }
  template <class PowerFn>
  void advance(double seconds, PowerFn&& power) {
    // Split at the pending clock change so each part uses the clock in effect.
    double left = seconds;
    while (left > 0) {
      const double f = effective_clock();
      double part = left;
      if (pending_ && pending_at_s_ > now_s_) part = std::min(part, pending_at_s_ - now_s_);
      power_now_ = power(f);
      energy_j_ += power_now_ * part;
      now_s_ += part;
      left -= part;
    }
  }

  device::DeviceProfile profile_;
  GpuTruth gpu_;
  uint64_t seed_;
  double clock_ = 0;
  bool pending_ = false;
  int pending_mhz_ = 0;
  double pending_at_s_ = 0;
  double now_s_ = 0;
  double energy_j_ = 0;
  double power_now_ = 0;
  int64_t draws_ = 0;
};

}  // namespace

Result<std::unique_ptr<device::Device>> open_emulated_device(const std::string& profile_name, uint64_t seed) {
  auto profile = device::load_profile(profile_name);
  if (!profile) return profile.error();
  return open_emulated_device(std::move(*profile), seed);
}

std::unique_ptr<device::Device> open_emulated_device(device::DeviceProfile profile, uint64_t seed) {
  return std::make_unique<EmulatedDevice>(std::move(profile), seed);
}

std::string energy_log_csv(const RankRun& run, const std::string& device) {
  std::string out = "# emo-energy-log/1 device=" + device + " rank=" + std::to_string(run.rank) + "\nt_ns,energy_mj\n";
  for (const EnergySample& s : run.energy) out += std::to_string(s.t_ns) + "," + std::to_string(s.energy_mj) + "\n";
  return out;
}

}  // namespace emo::emulator
