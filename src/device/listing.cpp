// The `emo devices` listing (include/emo/device/profile.h): which profiles, and their text.
#include <fmt/format.h>

#include "emo/device/profile.h"

namespace emo::device {

Result<std::vector<DeviceProfile>> load_profiles(const std::vector<std::string>& names_or_paths) {
  std::vector<DeviceProfile> profiles;
  const std::vector<std::string> names = names_or_paths.empty() ? builtin_profile_names() : names_or_paths;
  for (const auto& n : names) {
    auto p = load_profile(n);
    if (!p) return p.error();
    profiles.push_back(std::move(*p));
  }
  return profiles;
}

std::string profile_summary_line(const DeviceProfile& p) {
  const auto& c = p.sm_clocks.mhz;
  return fmt::format("{:<10} {:<16} {:>4} clocks {:>4}..{:<4} MHz  default {:>4}  mem {:>5} MHz  TDP {:>3.0f} W "
                     "(min {:>3.0f})  idle {:>5.1f} W  switch {:.0f}/{:.0f} ms  V knee {:.0f} MHz\n",
                     p.name, p.model, c.size(), c.front(), c.back(), p.default_clock_mhz.value,
                     p.memory_clock_mhz.value, p.tdp_w.value, p.min_power_limit_w.value, p.idle_power_w.value,
                     p.switch_latency_median_ms.value, p.switch_latency_p99_ms.value, p.voltage.knee_mhz.value);
}

std::string profile_detail_text(const DeviceProfile& p) {
  const auto& c = p.sm_clocks.mhz;
  std::string out = fmt::format("{} ({})\n  {:<26} {} clocks, {}..{} MHz  {}\n", p.name, p.model, "sm clocks",
                                c.size(), c.front(), c.back(), p.sm_clocks.source);
  auto line = [&out](const char* what, const Sourced& s, const char* unit) {
    out += fmt::format("  {:<26} {:>8g} {:<4} {}\n", what, s.value, unit, s.source);
  };
  line("default clock", p.default_clock_mhz, "MHz");
  line("memory clock", p.memory_clock_mhz, "MHz");
  line("TDP (power limit)", p.tdp_w, "W");
  line("min power limit", p.min_power_limit_w, "W");
  line("idle power", p.idle_power_w, "W");
  line("switch latency median", p.switch_latency_median_ms, "ms");
  line("switch latency p99", p.switch_latency_p99_ms, "ms");
  line("V(f) knee", p.voltage.knee_mhz, "MHz");
  line("V(f) floor / V(f_max)", p.voltage.floor_rel, "");
  line("V floor", p.voltage.floor_mv, "mV");
  line("memory knee / f_max", p.time.mem_knee_frac, "");
  line("below-knee exponent", p.time.mem_gamma, "");
  line("P_const", p.power.const_w, "W");
  line("dynamic power at f_max", p.power.dynamic_w, "W");
  line("stalled-SM power share", p.power.clock_frac, "");
  line("memory power", p.power.mem_w, "W");
  return out;
}

std::string profiles_text(const std::vector<DeviceProfile>& profiles, bool detail) {
  std::string out;
  for (const auto& p : profiles) out += detail ? profile_detail_text(p) : profile_summary_line(p);
  return out;
}

}  // namespace emo::device
