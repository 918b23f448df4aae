// Device specs parsed and opened once (see emo/backends/target.h). Only this library (and the CLI above
// it) links both the NVML backend and the emulator, so the optimizer's libraries never see the
// emulator's truth.
#include "emo/backends/target.h"

#include <charconv>
#include <cstdlib>

#include "emo/device/nvml.h"
#include "emo/emulator/emulator.h"

namespace emo::backends {

namespace {
constexpr const char* kForms = "accepted forms: a built-in profile name (`emo devices` lists them), a profile JSON file, "
                               "emulated:NAME (e.g. emulated:h100, emulated:h100@2 for another emulated GPU, emulated:h100@2:host=0.5 "
                               "for it in a job whose host takes half the trace's time), nvml:INDEX";

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}
}  // namespace

Result<DeviceSpec> parse_device_spec(const std::string& text) {
  DeviceSpec s;
  if (text.empty()) return make_error("--device", "empty device", kForms);
  if (text.rfind("nvml:", 0) == 0) {
    int64_t idx = 0;
    if (!parse_int(std::string_view(text).substr(5), idx) || idx < 0 || idx > 1024)
      return make_error("--device " + text, "expected nvml:INDEX with a GPU index such as nvml:0", kForms);
    s.kind = DeviceSpec::Kind::kNvml;
    s.index = int(idx);
    return s;
  }
  if (text.rfind("emulated:", 0) == 0) {
    std::string rest = text.substr(9);
    const size_t host = rest.rfind(":host=");
    if (host != std::string::npos) {
      const std::string num = rest.substr(host + 6);
      char* end = nullptr;
      const double x = std::strtod(num.c_str(), &end);
      if (num.empty() || end != num.c_str() + num.size() || !(x >= 0 && x <= 100))
        return make_error("--device " + text, "the part after :host= must be a factor from 0 to 100", kForms);
      s.host_scale = x;
      rest = rest.substr(0, host);
    }
    const size_t at = rest.rfind('@');
    if (at != std::string::npos) {
      int64_t seed = 0;
      if (!parse_int(std::string_view(rest).substr(at + 1), seed) || seed < 0)
        return make_error("--device " + text, "the part after @ must be a non-negative seed", kForms);
      s.seed = uint64_t(seed);
      rest = rest.substr(0, at);
    }
    if (rest.empty()) return make_error("--device " + text, "no profile after emulated:", kForms);
    s.kind = DeviceSpec::Kind::kEmulated;
    s.profile = rest;
    return s;
  }
  if (text.find(':') != std::string::npos && text.find('/') == std::string::npos && text.find('.') == std::string::npos)
    return make_error("--device " + text, "unknown device backend", kForms);
  s.profile = text;
  return s;
}

Target::Target(Target&&) noexcept = default;
Target& Target::operator=(Target&&) noexcept = default;
Target::~Target() = default;

Result<Target> Target::open(const std::string& text) {
  auto spec = parse_device_spec(text);
  if (!spec) return spec.error();
  Target t;
  t.text_ = text;
  t.spec_ = *spec;
  if (spec->kind == DeviceSpec::Kind::kNvml) {
    auto dev = device::open_nvml_device(spec->index);
    if (!dev) return dev.error();
    t.profile_ = (*dev)->profile();
    t.device_ = std::move(*dev);
    return t;
  }
  auto profile = device::load_profile(spec->profile);
  if (!profile) return profile.error();
  t.profile_ = std::move(*profile);
  if (spec->kind == DeviceSpec::Kind::kEmulated)
    t.gpu_ = std::make_unique<emulator::EmulatedGpu>(t.profile_, spec->seed, spec->host_scale);
  return t;
}

Result<Target> Target::emulated_of(const device::DeviceProfile& profile) {
  Target t;
  t.text_ = "emulated:" + profile.name;
  t.spec_.kind = DeviceSpec::Kind::kEmulated;
  t.spec_.profile = profile.name;
  t.profile_ = profile;
  t.gpu_ = std::make_unique<emulator::EmulatedGpu>(t.profile_, t.spec_.seed);
  return t;
}

Result<const emulator::EmulatedGpu*> Target::emulated_gpu(const std::string& what, const std::string& note) const {
  if (!gpu_) return make_error("--device " + text_, what, note);
  return gpu_.get();
}

Result<device::Device*> Target::device() {
  if (device_) return device_.get();
  if (spec_.kind == DeviceSpec::Kind::kEmulated) {
    device_ = emulator::open_emulated_device(profile_, spec_.seed);
    return device_.get();
  }
  return make_error("--device " + text_, "a profile alone cannot be measured",
                    "use emulated:" + text_ + " for the emulated GPU or nvml:INDEX for a real one");
}

}  // namespace emo::backends
