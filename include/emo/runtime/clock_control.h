// What the runtime needs to steer one GPU's SM clock, whoever holds the privilege: NVML in this
// process (root), the node's `emo clockd` daemon (emo/runtime/clockd.h), or the emulated GPU.
#pragma once

#include <memory>
#include <string>

#include "emo/base/result.h"
#include "emo/device/device.h"

namespace emo::runtime {

class ClockControl {
 public:
  virtual ~ClockControl() = default;
  // "nvml:0", "clockd:/run/emo/clockd.sock#0", "emulated:h100".
  virtual std::string describe() const = 0;
  // Locks the SM clock to `mhz` (min = max).
  virtual Status lock_sm_clock(int mhz) = 0;
  // The driver's default clock policy again.
  virtual Status reset_sm_clock() = 0;
};

// A ClockControl over a device::Device this process opened (NVML needs root for it). Locks go through
// a device::ClockGuard, so the clock is reset when this object goes, and on INT, TERM, HUP and QUIT.
class DeviceClockControl final : public ClockControl {
 public:
  explicit DeviceClockControl(device::Device& device) : device_(&device), guard_(device) {}
  std::string describe() const override { return device_->spec(); }
  Status lock_sm_clock(int mhz) override { return guard_.lock(mhz); }
  Status reset_sm_clock() override { return guard_.reset(); }

 private:
  device::Device* device_;
  device::ClockGuard guard_;
};

}  // namespace emo::runtime
