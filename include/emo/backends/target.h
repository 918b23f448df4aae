// Devices as users name them, opened once. A spec is "nvml:0" (a real GPU through NVML),
// "emulated:h100" (the emulated GPU with the built-in h100 profile; any built-in name or a profile JSON
// file; "emulated:h100@7" draws emulated GPU number 7), or a bare profile name/file where only the
// profile is needed (pack, optimize). `Target::open` parses the spec, loads the profile and builds the
// emulated GPU (or opens the NVML device) once; every later stage takes the `Target`, never the text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "emo/base/result.h"
#include "emo/device/device.h"
#include "emo/device/profile.h"

namespace emo::emulator {
class EmulatedGpu;
}

namespace emo::backends {

struct DeviceSpec {
  enum class Kind { kProfile, kEmulated, kNvml } kind = Kind::kProfile;
  std::string profile;  // built-in name or profile file (kProfile, kEmulated)
  int index = 0;        // kNvml
  uint64_t seed = 1;    // kEmulated: "emulated:h100@7" draws GPU number 7
  // kEmulated: "emulated:h100@7:host=0.5" runs every step with each CPU thread's own time x0.5 (the
  // executor's cpu factor): the job as it runs without the profiler's cost on the host.
  double host_scale = 1.0;
};

// Parses "nvml:N", "emulated:NAME[@SEED][:host=X]" or "NAME"; bad forms -> Error with a note listing them.
Result<DeviceSpec> parse_device_spec(const std::string& text);

class Target {
 public:
  // Parses `spec`, loads its profile and opens what it names (NVML: the GPU, whose product name picks
  // the profile; emulated: the emulated GPU of that profile and seed; a profile: nothing to run on).
  static Result<Target> open(const std::string& spec);
  // The emulated GPU of `profile`'s name (seed 1): where a bare profile's steps are profiled and checked.
  static Result<Target> emulated_of(const device::DeviceProfile& profile);

  Target(Target&&) noexcept;
  Target& operator=(Target&&) noexcept;
  ~Target();

  const std::string& spec_text() const { return text_; }  // as the user wrote it (messages, logs)
  const DeviceSpec& spec() const { return spec_; }
  const device::DeviceProfile& profile() const { return profile_; }
  bool emulated() const { return spec_.kind == DeviceSpec::Kind::kEmulated; }
  // The emulated GPU; an Error naming the spec and `what` needs it (e.g. "profiling runs") otherwise.
  Result<const emulator::EmulatedGpu*> emulated_gpu(const std::string& what, const std::string& note) const;
  // The measurable device (microbenchmarks, clock locks, energy counter), owned by the Target: the NVML
  // GPU, or the emulated one in virtual time (made on first use). A bare profile is an Error: nothing
  // to measure.
  Result<device::Device*> device();

 private:
  Target() = default;
  std::string text_;
  DeviceSpec spec_;
  device::DeviceProfile profile_;
  std::unique_ptr<emulator::EmulatedGpu> gpu_;
  std::unique_ptr<device::Device> device_;  // NVML: opened with the Target; emulated: on first use
};

}  // namespace emo::backends
