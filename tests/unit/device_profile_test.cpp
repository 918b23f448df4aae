// Device profiles: the built-in tables match the hardware facts, every value names its source, and
// JSON profiles round-trip and fail with the offending field's name.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "emo/device/profile.h"
#include "test_util.h"

namespace emo::device {
namespace {

DeviceProfile get(const std::string& name) {
  auto p = builtin_profile(name);
  EXPECT_TRUE(p.ok()) << name;
  return *p;
}

TEST(DeviceProfile, A100Has81ClocksFrom210To1410In15MHzSteps) {
  DeviceProfile p = get("a100");
  ASSERT_EQ(p.sm_clocks.mhz.size(), 81u);
  EXPECT_EQ(p.min_clock_mhz(), 210);
  EXPECT_EQ(p.max_clock_mhz(), 1410);
  for (size_t i = 1; i < p.sm_clocks.mhz.size(); ++i) EXPECT_EQ(p.sm_clocks.mhz[i] - p.sm_clocks.mhz[i - 1], 15);
  EXPECT_EQ(p.default_clock_mhz.value, 1410);
  EXPECT_EQ(p.tdp_w.value, 400);
}

TEST(DeviceProfile, V100GridHoldsTheMeasuredClocks) {
  // The NVML lock-latency study and the GPU-DVFS-Dataset sweep used these clocks.
  DeviceProfile p = get("v100");
  for (int f : {135, 412, 690, 757, 825, 952, 975, 1012, 1252, 1530}) {
    EXPECT_TRUE(std::binary_search(p.sm_clocks.mhz.begin(), p.sm_clocks.mhz.end(), f)) << f;
  }
  DeviceProfile pcie = get("v100-pcie");
  for (int f : {405, 502, 600, 705, 802, 945, 1087, 1102, 1237, 1380}) {
    EXPECT_TRUE(std::binary_search(pcie.sm_clocks.mhz.begin(), pcie.sm_clocks.mhz.end(), f)) << f;
  }
  EXPECT_NEAR(p.switch_latency_median_ms.value, 25, 1);
  EXPECT_GT(p.switch_latency_p99_ms.value, 30);
}

TEST(DeviceProfile, EveryBuiltinValueNamesItsSource) {
  for (const auto& name : builtin_profile_names()) {
    auto j = nlohmann::json::parse(profile_to_json(get(name)));
    size_t sources = 0;
    std::function<void(const nlohmann::json&, const std::string&)> walk = [&](const nlohmann::json& v, const std::string& path) {
      if (!v.is_object()) return;
      if (v.contains("value") || v.contains("values")) {
        ASSERT_TRUE(v.contains("source")) << name << ": " << path;
        EXPECT_FALSE(v["source"].get<std::string>().empty()) << name << ": " << path;
        ++sources;
      }
      for (auto it = v.begin(); it != v.end(); ++it) walk(it.value(), path + "." + it.key());
    };
    walk(j, name);
    EXPECT_GE(sources, 17u) << name;
  }
}

TEST(DeviceProfile, RequiredBuiltinsExist) {
  auto names = builtin_profile_names();
  for (const char* n : {"v100", "a100", "h100", "h200"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
  EXPECT_EQ(get("h100").max_clock_mhz(), 1980);
  EXPECT_EQ(get("h200").memory_clock_mhz.value, 3201);
}

TEST(DeviceProfile, UnknownNameListsTheBuiltins) {
  auto p = load_profile("b200");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().what.find("unknown device profile"), std::string::npos);
  EXPECT_NE(p.error().note.find("a100"), std::string::npos);
  EXPECT_NE(p.error().note.find("h200"), std::string::npos);
}

TEST(DeviceProfile, VoltageIsFlatBelowTheKneeAndRisesToOneAtMax) {
  DeviceProfile p = get("a100");
  double knee = p.voltage.knee_mhz.value;
  EXPECT_DOUBLE_EQ(p.voltage_rel(210), p.voltage.floor_rel.value);
  EXPECT_DOUBLE_EQ(p.voltage_rel(knee - 1), p.voltage.floor_rel.value);
  EXPECT_GT(p.voltage_rel(knee + 100), p.voltage.floor_rel.value);
  EXPECT_DOUBLE_EQ(p.voltage_rel(1410), 1.0);
}

TEST(DeviceProfile, JsonRoundTripsEveryField) {
  for (const auto& name : builtin_profile_names()) {
    DeviceProfile p = get(name);
    std::string text = profile_to_json(p);
    auto back = profile_from_json(text, "rt.json");
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_EQ(profile_to_json(*back), text);
  }
  // The list form `emo devices --json` writes is accepted when it holds one device.
  auto one = profile_from_json(profiles_to_json({get("h100")}), "list.json");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->name, "h100");
  auto two = profile_from_json(profiles_to_json({get("h100"), get("a100")}), "list.json");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.error().what.find("exactly one device"), std::string::npos);
}

nlohmann::json a100_json() { return nlohmann::json::parse(profile_to_json(get("a100"))); }

std::string error_of(const nlohmann::json& j) {
  auto p = profile_from_json(j.dump(), "bad.json");
  return p.ok() ? std::string("(accepted)") : p.error().message();
}

TEST(DeviceProfile, MissingFieldIsNamed) {
  auto j = a100_json();
  j["voltage"].erase("knee_mhz");
  EXPECT_NE(error_of(j).find("'voltage.knee_mhz': missing"), std::string::npos) << error_of(j);
  j = a100_json();
  j["tdp_w"].erase("source");
  EXPECT_NE(error_of(j).find("'tdp_w.source': missing"), std::string::npos) << error_of(j);
  j = a100_json();
  j.erase("power_model");
  EXPECT_NE(error_of(j).find("'power_model': missing"), std::string::npos) << error_of(j);
  j = a100_json();
  j["idle_power_w"]["value"] = "68";
  EXPECT_NE(error_of(j).find("'idle_power_w.value': not a number"), std::string::npos) << error_of(j);
}

TEST(DeviceProfile, EmptyOrNonMonotonicClockTableIsRejected) {
  auto j = a100_json();
  j["sm_clocks_mhz"]["values"] = nlohmann::json::array();
  EXPECT_NE(error_of(j).find("'sm_clocks_mhz.values': empty clock table"), std::string::npos) << error_of(j);
  j["sm_clocks_mhz"]["values"] = {210, 225, 240, 235, 1410};
  EXPECT_NE(error_of(j).find("not monotonic (240 then 235 MHz)"), std::string::npos) << error_of(j);
  j["sm_clocks_mhz"]["values"] = {210, 225, 225, 1410};
  EXPECT_NE(error_of(j).find("not monotonic"), std::string::npos) << error_of(j);
  // NVML lists clocks from the top down: a strictly descending table is fine.
  j["sm_clocks_mhz"]["values"] = {1410, 1200, 1000, 210};
  auto p = profile_from_json(j.dump(), "desc.json");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->sm_clocks.mhz.front(), 210);
  EXPECT_EQ(p->max_clock_mhz(), 1410);
}

TEST(DeviceProfile, OutOfRangeValuesAreNamed) {
  auto j = a100_json();
  j["voltage"]["floor_rel"]["value"] = 1.5;
  EXPECT_NE(error_of(j).find("voltage.floor_rel.value"), std::string::npos) << error_of(j);
  j = a100_json();
  j["default_clock_mhz"]["value"] = 2000;
  EXPECT_NE(error_of(j).find("default_clock_mhz.value': outside the clock table"), std::string::npos) << error_of(j);
  EXPECT_NE(error_of(nlohmann::json::array()).find("JSON object"), std::string::npos);
  auto p = profile_from_json("{not json", "x.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message(), "x.json: not valid JSON");
}

TEST(DeviceProfile, LoadsFromAFile) {
  std::string dir = test::temp_dir("device_profile");
  std::string path = dir + "/my_gpu.json";
  auto j = a100_json();
  j["name"] = "my-a100";
  j["tdp_w"]["value"] = 500;
  j["tdp_w"]["source"] = "assumed: 500 W board";
  std::ofstream(path) << j.dump(1);
  auto p = load_profile(path);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->name, "my-a100");
  EXPECT_EQ(p->tdp_w.value, 500);
  auto missing = load_profile(dir + "/absent.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().what.find("cannot read"), std::string::npos);
}

TEST(DeviceProfile, NearestClockSnapsToTheTable) {
  DeviceProfile p = get("a100");
  EXPECT_EQ(p.nearest_clock(1000), 1005);
  EXPECT_EQ(p.nearest_clock(1012.5), 1020);  // tie -> the higher clock
  EXPECT_EQ(p.nearest_clock(5000), 1410);
  EXPECT_EQ(p.nearest_clock(0), 210);
}

}  // namespace
}  // namespace emo::device
