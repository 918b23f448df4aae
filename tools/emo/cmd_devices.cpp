// `emo devices [NAME|FILE...]`: the device profiles — a one-line summary each, or, for the profiles
// named, every value with its source. `--json` writes the profiles in the schema that
// `--device FILE` reads back (one element of "devices" per file). The listing is the library's
// (device::load_profiles, profiles_text, profiles_to_json); this file parses flags and writes.
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "emo/base/file_util.h"
#include "emo/device/profile.h"

namespace emo::cli {

namespace {

struct DevicesArgs {
  std::vector<std::string> names;
  std::string json_out;
};

int run(const DevicesArgs& a) {
  auto profiles = device::load_profiles(a.names);
  if (!profiles) return fail(profiles.error());
  if (!a.json_out.empty()) {
    Status s = write_file_atomic(a.json_out, device::profiles_to_json(*profiles) + "\n");
    if (!s.ok()) return fail(s.error());
    if (a.json_out == "-") return kExitOk;
  }
  std::fputs(device::profiles_text(*profiles, !a.names.empty()).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_devices(CLI::App& root, Action& action) {
  auto args = std::make_shared<DevicesArgs>();
  auto* sub = root.add_subcommand(
      "devices", "List the device profiles (built-in: v100, a100, h100, h200, v100-pcie, a40). Name profiles or "
                 "profile JSON files to see every value with its source.");
  sub->add_option("profiles", args->names, "profile names or JSON files (default: all built-in profiles)");
  sub->add_option("--json", args->json_out, "write the profiles as JSON to FILE ('-' = stdout)");
  sub->callback([args, &action] { action = [args] { return run(*args); }; });
}

}  // namespace emo::cli
