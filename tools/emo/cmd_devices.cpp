// `emo devices [NAME|FILE...]`: the device profiles — a one-line summary each, or, for the profiles
// named, every value with its source. `--json` writes the profiles in the schema that
// `--device FILE` reads back (one element of "devices" per file).
#include <cstdio>

#include <fmt/format.h>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "emo/device/profile.h"

namespace emo::cli {

namespace {

struct DevicesArgs {
  std::vector<std::string> names;
  std::string json_out;
};

void print_summary(const device::DeviceProfile& p) {
  const auto& c = p.sm_clocks.mhz;
  std::fputs(fmt::format("{:<10} {:<16} {:>4} clocks {:>4}..{:<4} MHz  default {:>4}  mem {:>5} MHz  TDP {:>3.0f} W "
                         "(min {:>3.0f})  idle {:>5.1f} W  switch {:.0f}/{:.0f} ms  V knee {:.0f} MHz\n",
                         p.name, p.model, c.size(), c.front(), c.back(), p.default_clock_mhz.value,
                         p.memory_clock_mhz.value, p.tdp_w.value, p.min_power_limit_w.value, p.idle_power_w.value,
                         p.switch_latency_median_ms.value, p.switch_latency_p99_ms.value, p.voltage.knee_mhz.value)
                 .c_str(),
             stdout);
}

void print_detail(const device::DeviceProfile& p) {
  auto line = [](const char* what, const device::Sourced& s, const char* unit) {
    std::fputs(fmt::format("  {:<26} {:>8g} {:<4} {}\n", what, s.value, unit, s.source).c_str(), stdout);
  };
  const auto& c = p.sm_clocks.mhz;
  std::fputs(fmt::format("{} ({})\n  {:<26} {} clocks, {}..{} MHz  {}\n", p.name, p.model, "sm clocks", c.size(),
                         c.front(), c.back(), p.sm_clocks.source)
                 .c_str(),
             stdout);
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
}

}  // namespace

void add_devices(CLI::App& root, Action& action) {
  auto args = std::make_shared<DevicesArgs>();
  auto* sub = root.add_subcommand(
      "devices", "List the device profiles (built-in: v100, a100, h100, h200, v100-pcie, a40). Name profiles or "
                 "profile JSON files to see every value with its source.");
  sub->add_option("profiles", args->names, "profile names or JSON files (default: all built-in profiles)");
  sub->add_option("--json", args->json_out, "write the profiles as JSON to FILE ('-' = stdout)");
  sub->callback([args, &action] {
    action = [args] {
      std::vector<device::DeviceProfile> profiles;
      const bool detail = !args->names.empty();
      std::vector<std::string> names = detail ? args->names : device::builtin_profile_names();
      for (const auto& n : names) {
        auto p = device::load_profile(n);
        if (!p) return fail(p.error());
        profiles.push_back(*p);
      }
      if (!args->json_out.empty()) {
        Status s = write_file_atomic(args->json_out, device::profiles_to_json(profiles) + "\n");
        if (!s.ok()) return fail(s.error());
        if (args->json_out == "-") return kExitOk;
      }
      for (const auto& p : profiles) detail ? print_detail(p) : print_summary(p);
      return kExitOk;
    };
  });
}

}  // namespace emo::cli
