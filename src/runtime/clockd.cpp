// `emo clockd`'s admin config: read, validated, every error naming FILE:KEY.
#include <set>

#include <nlohmann/json.hpp>

#include "emo/base/file_util.h"
#include "emo/runtime/clockd.h"

namespace emo::runtime {

namespace {

using nlohmann::json;

constexpr const char* kTopKeys = "socket, group, lease_ms, log, max_clients, gpus";
constexpr const char* kGpuKeys = "device, min_mhz, max_mhz";

// `keypath` names the value in errors ("clockd.json:lease_ms", "clockd.json:gpus[0].min_mhz").
Result<int> get_int(const json& v, const std::string& keypath, int lo, int hi) {
  if (!v.is_number_integer()) return make_error(keypath, "must be an integer");
  // nlohmann keeps a non-negative integer as unsigned, a negative one as signed.
  const bool out = v.is_number_unsigned() ? (v.get<uint64_t>() > uint64_t(hi) || v.get<uint64_t>() < uint64_t(lo))
                                          : (v.get<int64_t>() > hi || v.get<int64_t>() < lo);
  if (out)
    return make_error(keypath, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return int(v.get<int64_t>());
}

Result<std::string> get_string(const json& v, const std::string& keypath) {
  if (!v.is_string()) return make_error(keypath, "must be a string");
  std::string s = v.get<std::string>();
  if (s.empty()) return make_error(keypath, "must not be empty", "leave the key out for its default");
  return s;
}

}  // namespace

Result<ClockdConfig> parse_clockd_config(const std::string& text, const std::string& where) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded())
    return make_error(where, "not valid JSON", "the config is one JSON object; docs/clockd.md shows one");
  if (!root.is_object()) return make_error(where, "must be a JSON object", "docs/clockd.md shows one");
  ClockdConfig c;
  c.source = where;
  for (const auto& [key, value] : root.items()) {
    (void)value;
    static const std::set<std::string> known = {"socket", "group", "lease_ms", "log", "max_clients", "gpus"};
    if (!known.count(key)) return make_error(where + ":" + key, "unknown key", std::string("the keys are: ") + kTopKeys);
  }
  if (root.contains("socket")) {
    auto s = get_string(root.at("socket"), where + ":socket");
    if (!s) return s.error();
    if ((*s)[0] != '/') return make_error(where + ":socket", "must be an absolute path", "e.g. /run/emo/clockd.sock");
    // sun_path holds 108 bytes with the terminating NUL.
    if (s->size() > 107) return make_error(where + ":socket", "longer than a Unix socket path may be (107 bytes)");
    c.socket = *s;
  }
  if (root.contains("group")) {
    auto s = get_string(root.at("group"), where + ":group");
    if (!s) return s.error();
    c.group = *s;
  }
  if (root.contains("log")) {
    auto s = get_string(root.at("log"), where + ":log");
    if (!s) return s.error();
    c.log = *s;
  }
  if (root.contains("lease_ms")) {
    auto v = get_int(root.at("lease_ms"), where + ":lease_ms", 100, 3600 * 1000);
    if (!v) return v.error();
    c.lease_ms = *v;
  }
  if (root.contains("max_clients")) {
    auto v = get_int(root.at("max_clients"), where + ":max_clients", 1, 4096);
    if (!v) return v.error();
    c.max_clients = *v;
  }
  if (!root.contains("gpus"))
    return make_error(where + ":gpus", "missing", "name the GPUs: \"gpus\": [{\"device\": \"nvml:0\", \"min_mhz\": 1005, \"max_mhz\": 1980}]");
  const json& gpus = root.at("gpus");
  if (!gpus.is_array() || gpus.empty())
    return make_error(where + ":gpus", "must be a non-empty array", "e.g. \"gpus\": [{\"device\": \"nvml:0\", \"min_mhz\": 1005, \"max_mhz\": 1980}]");
  std::set<std::string> seen;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string at = where + ":gpus[" + std::to_string(i) + "]";
    const json& g = gpus[i];
    if (!g.is_object()) return make_error(at, "must be an object", std::string("with the keys ") + kGpuKeys);
    for (const auto& [key, value] : g.items()) {
      (void)value;
      if (key != "device" && key != "min_mhz" && key != "max_mhz")
        return make_error(at + "." + key, "unknown key", std::string("the keys are: ") + kGpuKeys);
    }
    ClockdGpuConfig gc;
    if (!g.contains("device")) return make_error(at + ".device", "missing", "e.g. \"device\": \"nvml:0\"");
    auto dev = get_string(g.at("device"), at + ".device");
    if (!dev) return dev.error();
    gc.device = *dev;
    if (!seen.insert(gc.device).second)
      return make_error(at + ".device", "'" + gc.device + "' is named twice", "one entry per GPU");
    for (const char* key : {"min_mhz", "max_mhz"}) {
      if (!g.contains(key)) return make_error(at + "." + key, "missing", "the admin's clock range, in MHz");
      auto v = get_int(g.at(key), at + "." + key, 1, 100000);
      if (!v) return v.error();
      (std::string(key) == "min_mhz" ? gc.min_mhz : gc.max_mhz) = *v;
    }
    if (gc.min_mhz > gc.max_mhz)
      return make_error(at, "min_mhz " + std::to_string(gc.min_mhz) + " is above max_mhz " + std::to_string(gc.max_mhz));
    c.gpus.push_back(std::move(gc));
  }
  return c;
}

Result<ClockdConfig> read_clockd_config(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  return parse_clockd_config(*text, path);
}

}  // namespace emo::runtime
