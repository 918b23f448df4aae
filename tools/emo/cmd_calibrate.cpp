// `emo calibrate --device DEV [--clocks A,B,C] [--min-seconds S] [--json FILE] [-o PROFILE.json]`:
// run the microbenchmarks at several locked SM clocks and fit a device profile (docs/calibrate.md).
// The clock is reset afterwards whatever happens, Ctrl-C included. `-o` writes the fitted profile in
// the schema `--device FILE` reads.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "emo/backends/target.h"
#include "emo/base/file_util.h"
#include "emo/calibrate/calibrate.h"
#include "emo/device/nvml.h"

namespace emo::cli {

namespace {

struct CalibrateArgs {
  std::string device;
  std::string clocks;
  double min_seconds = 2.0;
  std::string json_out;
  std::string profile_out;
};

constexpr const char* kAcceptedSpecs =
    "calibrate a device that runs benchmarks: nvml:N (GPU N as nvidia-smi numbers it) or emulated:NAME "
    "(NAME = a built-in profile)";

// DEV -> the opened device (nvml:N or emulated:NAME), which can lock clocks and run the microbenchmarks.
Result<backends::Target> open_for_calibration(const std::string& spec) {
  auto t = backends::Target::open(spec);
  if (!t) {
    auto profile = device::load_profile(spec);
    if (profile) return make_error(spec, "a device profile cannot run benchmarks", kAcceptedSpecs);
    if (spec.rfind("nvml:", 0) == 0 || spec.rfind("emulated:", 0) == 0) return t.error();
    return make_error(spec, "unknown device", kAcceptedSpecs);
  }
  if (t->spec().kind == backends::DeviceSpec::Kind::kProfile)
    return make_error(spec, "a device profile cannot run benchmarks", kAcceptedSpecs);
  return t;
}

int run(const CalibrateArgs& a) {
  if (Status st = check_outputs({}, {{"--json", a.json_out}, {"-o", a.profile_out}}); !st.ok()) return fail(st.error());
  calibrate::CalibrateOptions opt;
  opt.min_seconds = a.min_seconds;
  if (!a.clocks.empty()) {
    auto c = parse_clock_list(a.clocks, "--clocks");
    if (!c) {
      fail(c.error());
      return kExitUsage;
    }
    opt.clocks_mhz = *c;
  }
  if (!(a.min_seconds > 0 && a.min_seconds <= 3600)) {
    fail(make_error("--min-seconds", "must be more than 0 and at most 3600 seconds"));
    return kExitUsage;
  }
  auto target = open_for_calibration(a.device);
  if (!target) return fail(target.error());
  auto dev = target->device();
  if (!dev) return fail(dev.error());
  auto* nvml = dynamic_cast<device::NvmlDevice*>(*dev);
  if (nvml && !nvml->profile_note().empty()) warn(nvml->profile_note());
  opt.progress = [nvml](const calibrate::Measurement& m) {
    std::string what = device::to_string(m.kind);
    if (m.kind == device::BenchKind::kIntensity) what += fmt::format(" {:g}", m.flops_per_byte);
    std::fputs(fmt::format("  {:>5} MHz  {:<16} {:7.2f} s  {:7.1f} W\n", m.clock_mhz, what, m.run.seconds,
                           m.run.power_w())
                   .c_str(),
               stderr);
    if (nvml) {
      std::string why = nvml->last_telemetry().slowdown();
      if (!why.empty()) warn(fmt::format("{} at {} MHz: the GPU reported {}", what, m.clock_mhz, why));
    }
  };
  std::fputs(fmt::format("calibrating {} ({}): the SM clock is locked during the runs and reset afterwards\n",
                         (*dev)->spec(), (*dev)->model_name())
                 .c_str(),
             stderr);
  auto res = calibrate::calibrate(**dev, opt);
  if (!res) return fail(res.error());

  if (!a.profile_out.empty()) {
    Status s = write_file_atomic(a.profile_out, device::profile_to_json(res->profile) + "\n");
    if (!s.ok()) return fail(s.error());
  }
  if (!a.json_out.empty()) {
    Status s = write_file_atomic(a.json_out, calibrate::to_json(*res) + "\n");
    if (!s.ok()) return fail(s.error());
  }
  if (a.json_out == "-") return kExitOk;
  std::fputs(calibrate::to_text(*res).c_str(), stdout);
  for (const auto& w : res->warnings) warn(w);
  if (!a.profile_out.empty() && a.profile_out != "-")
    std::fputs(fmt::format("wrote {} (use it as --device {})\n", a.profile_out, a.profile_out).c_str(),
               stdout);
  return kExitOk;
}

}  // namespace

void add_calibrate(CLI::App& root, Action& action) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* sub =
      root.add_subcommand("calibrate",
                          "Run the microbenchmarks (FMA loop, stream copy, an arithmetic-intensity sweep, "
                          "tensor-core GEMM, idle) at "
                          "several locked SM clocks and fit a device profile: V(f) knee and floor, power "
                          "coefficients, memory knee, "
                          "idle power. Locking clocks needs root; the clock is always reset afterwards.");
  sub->add_option("--device", args->device, "the GPU: nvml:N or emulated:NAME")->required();
  sub->add_option("--clocks", args->clocks,
                  "SM clocks to calibrate at, A,B,C in MHz (default: 6 spread from 0.3 x "
                  "the highest supported clock to the highest)");
  sub->add_option("--min-seconds", args->min_seconds, "how long each benchmark runs, at least (default 2, at most 3600)");
  sub->add_option("--json", args->json_out, "write the measurements, fit and profile to FILE ('-' = stdout)");
  sub->add_option("-o,--output", args->profile_out,
                  "write the fitted profile (the schema --device FILE reads)");
  sub->callback([args, &action] { action = [args] { return run(*args); }; });
}

}  // namespace emo::cli
