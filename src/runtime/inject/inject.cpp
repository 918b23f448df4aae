// libemo_inject.so: a policy applied to a CUDA process that was not changed for it. CUDA loads the
// library named by CUDA_INJECTION64_PATH at its initialisation and calls InitializeInjection(); the
// library subscribes to CUPTI's kernel-launch callbacks, finds the steps in the launches
// (emo/runtime/step_marker.h) and drives the runtime (emo/runtime/runtime.h) as a job's own
// step_begin() calls would: the anchor is a host function enqueued just before the step's start
// kernel, on its stream. Settings come from the environment (docs/runtime.md, "An unmodified job"):
//   EMO_POLICY  the policy file (required)
//   EMO_RANK    this process's rank in the policy (default: $RANK, else 0)
//   EMO_GPU     the NVML index of its GPU (default: $LOCAL_RANK, else 0)
//   EMO_CLOCK   nvml (default, needs root) | clockd:SOCKET | dry-run
//   EMO_REPORT  where to write the runtime's report (JSON) at exit
//   EMO_BLOCK_STEPS  steps per measurement block (default 0: from the policy's step time)
//   EMO_VERIFY  1: alternate default-clock and policy blocks for the whole run (`emo apply --verify`)
// Every failure is said on stderr as "emo inject: error: ..." and leaves the job running untouched.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unordered_map>

#include "emo/base/file_util.h"
#include "emo/device/nvml.h"
#include "emo/runtime/clock_control.h"
#include "emo/runtime/clockd.h"
#include "emo/runtime/runtime.h"
#include "emo/runtime/step_marker.h"

namespace {

using emo::runtime::StepMarker;

void say(const std::string& line) { std::fprintf(stderr, "emo inject: %s\n", line.c_str()); }

std::string env_or(const char* name, const char* fallback_name, const char* fallback) {
  if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return v;
  if (fallback_name != nullptr) {
    if (const char* v = std::getenv(fallback_name); v != nullptr && *v != '\0') return v;
  }
  return fallback;
}

struct Injection {
  std::mutex mu;  // launches from any thread, in API order
  std::unique_ptr<StepMarker> marker;
  emo::runtime::RuntimeOptions options;  // the runtime, started at the first step
  std::unique_ptr<emo::device::Device> device;
  std::unique_ptr<emo::runtime::ClockControl> clock;
  std::unique_ptr<emo::runtime::Runtime> runtime;
  std::unordered_map<std::string, std::string> demangled;
  std::string report_path;
  CUpti_SubscriberHandle subscriber = nullptr;
  bool done = false;

  const std::string& name_of(const char* symbol) {
    auto it = demangled.find(symbol);
    if (it != demangled.end()) return it->second;
    int status = 0;
    char* d = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
    std::string name = status == 0 && d != nullptr ? std::string(d) : std::string(symbol);
    std::free(d);
    return demangled.emplace(symbol, std::move(name)).first->second;
  }

  // The runtime's end: the clock reset, the report said and written. Holding `mu`.
  void finish(const std::string& why) {
    if (done) return;
    done = true;
    if (!runtime) {
      say(why.empty() ? "no step was found in the job's launches; nothing applied" : why);
      return;
    }
    auto rep = runtime->stop();
    runtime.reset();
    if (!rep) {
      say("error: " + rep.error().message());
      return;
    }
    if (!why.empty()) say(why + "; the policy is dropped, the clock reset");
    say("steps " + std::to_string(rep->steps_seen) + ", clock calls " + std::to_string(rep->calls));
    if (!report_path.empty()) {
      nlohmann::json j = emo::runtime::runtime_report_json(*rep, true);
      if (marker && marker->lost()) j["lost"] = marker->lost_reason();
      if (auto st = emo::write_file_atomic(report_path, j.dump(1) + "\n"); !st.ok()) say("error: " + st.error().message());
    }
  }

  // One kernel launch, before it is enqueued.
  void on_launch(const char* symbol, CUcontext ctx, CUstream stream, bool per_thread) {
    std::lock_guard<std::mutex> lk(mu);
    if (done || !marker || symbol == nullptr) return;
    uint32_t id = 0;
    const int64_t sid = cuptiGetStreamIdEx(ctx, stream, per_thread ? 1 : 0, &id) == CUPTI_SUCCESS ? int64_t(id) : -1;
    switch (marker->on_launch(name_of(symbol), sid)) {
      case StepMarker::Verdict::kNone:
        return;
      case StepMarker::Verdict::kLost:
        finish("the job's steps no longer match the policy: " + marker->lost_reason());
        return;
      case StepMarker::Verdict::kStep:
        break;
    }
    if (!runtime) {
      options.stream = stream;
      auto rt = emo::runtime::Runtime::start(options);
      if (!rt) {
        say("error: " + rt.error().message());
        done = true;
        return;
      }
      runtime = std::move(*rt);
      say("synced after " + std::to_string(marker->launches()) + " kernel launches; applying the policy");
    }
    runtime->step_begin();
  }
};

Injection* g_injection = nullptr;
thread_local int t_in_runtime_launch = 0;  // a runtime launch's own driver calls are not counted twice

void CUPTIAPI on_callback(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  auto* inj = static_cast<Injection*>(user);
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool enter = cb->callbackSite == CUPTI_API_ENTER;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (!enter) {
      --t_in_runtime_launch;
      return;
    }
    ++t_in_runtime_launch;
    CUstream stream = nullptr;
    bool ptsz = false;
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
        ptsz = true;
        [[fallthrough]];
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        stream = reinterpret_cast<CUstream>(static_cast<const cudaLaunchKernel_v7000_params*>(cb->functionParams)->stream);
        break;
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
        ptsz = true;
        [[fallthrough]];
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
        stream = reinterpret_cast<CUstream>(static_cast<const cudaLaunchKernelExC_v11060_params*>(cb->functionParams)->config->stream);
        break;
      default:
        return;
    }
    if (t_in_runtime_launch == 1) inj->on_launch(cb->symbolName, cb->context, stream, ptsz);
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || !enter || t_in_runtime_launch > 0) return;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      inj->on_launch(cb->symbolName, cb->context, static_cast<const cuLaunchKernel_params*>(cb->functionParams)->hStream,
                     cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz);
      return;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      inj->on_launch(cb->symbolName, cb->context, static_cast<const cuLaunchKernelEx_params*>(cb->functionParams)->config->hStream,
                     cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz);
      return;
    default:
      return;
  }
}

void at_exit() {
  if (g_injection == nullptr) return;
  {
    std::lock_guard<std::mutex> lk(g_injection->mu);
    g_injection->finish("");
  }
  if (g_injection->subscriber != nullptr) cuptiUnsubscribe(g_injection->subscriber);
}

emo::Status setup(Injection& inj) {
  const std::string policy_path = env_or("EMO_POLICY", nullptr, "");
  if (policy_path.empty()) return emo::make_error("EMO_POLICY", "is not set", "name the policy file of `emo optimize -o`");
  auto text = emo::read_file(policy_path);
  if (!text) return text.error();
  const std::string rank_s = env_or("EMO_RANK", "RANK", "0"), gpu_s = env_or("EMO_GPU", "LOCAL_RANK", "0");
  char* end = nullptr;
  const long rank = std::strtol(rank_s.c_str(), &end, 10);
  if (*end != '\0' || rank < 0) return emo::make_error("EMO_RANK", "must be a rank number, not '" + rank_s + "'");
  const long gpu = std::strtol(gpu_s.c_str(), &end, 10);
  if (*end != '\0' || gpu < 0) return emo::make_error("EMO_GPU", "must be an NVML index, not '" + gpu_s + "'");
  auto program = emo::runtime::program_from_policy(*text, policy_path);
  if (!program) return program.error();
  auto start = emo::runtime::step_start_from_policy(*text, int(rank), policy_path);
  if (!start) return start.error();
  // The anchor is the start kernel's, offset_us after the step's start: the changes move as much earlier.
  if (size_t(rank) < program->ranks.size()) {
    const int64_t off = std::llround(start->offset_us * 1e3);
    for (auto& c : program->ranks[size_t(rank)]) {
      c.issue_at_ns -= off;
      if (c.issue_at_ns < 0 && program->predicted_step_ns > 0) c.issue_at_ns += std::llround(program->predicted_step_ns);
    }
    std::stable_sort(program->ranks[size_t(rank)].begin(), program->ranks[size_t(rank)].end(),
                     [](const auto& a, const auto& b) { return a.issue_at_ns < b.issue_at_ns; });
  }
  inj.marker = std::make_unique<StepMarker>(*start);
  auto& o = inj.options;
  o.program = std::move(*program);
  o.rank = size_t(rank);
  const std::string clock = env_or("EMO_CLOCK", nullptr, "nvml");
  auto launch = emo::runtime::cuda_launch_host_func();
  if (!launch) return launch.error();
  o.launch = launch->fn;
  if (clock == "dry-run") {
    o.dry_run = true;
    auto dev = emo::device::open_nvml_device(int(gpu));  // the energy counter, read only: measured, nothing set
    if (dev) inj.device = std::move(*dev);
  } else if (clock == "nvml") {
    auto dev = emo::device::open_nvml_device(int(gpu));
    if (!dev) return dev.error();
    inj.device = std::move(*dev);
    inj.clock = std::make_unique<emo::runtime::DeviceClockControl>(*inj.device);
  } else if (clock.rfind("clockd:", 0) == 0) {
    auto c = emo::runtime::ClockdClient::connect(clock.substr(7), int(gpu));
    if (!c) return c.error();
    inj.clock = std::move(*c);
    auto dev = emo::device::open_nvml_device(int(gpu));  // the energy counter needs no privilege
    if (dev) inj.device = std::move(*dev);
  } else {
    return emo::make_error("EMO_CLOCK", "must be nvml, clockd:SOCKET or dry-run, not '" + clock + "'");
  }
  o.clock = inj.clock.get();
  if (inj.device) {
    emo::device::Device* d = inj.device.get();
    o.energy_j = [d] { return d->energy_j(); };
  }
  const std::string block_s = env_or("EMO_BLOCK_STEPS", nullptr, "0"), verify_s = env_or("EMO_VERIFY", nullptr, "0");
  const long block = std::strtol(block_s.c_str(), &end, 10);
  if (*end != '\0' || block < 0 || block > 100000)
    return emo::make_error("EMO_BLOCK_STEPS", "must be 0 (from the step time) or a number of steps, not '" + block_s + "'");
  o.phases.block_steps = int(block);
  if (verify_s != "0" && verify_s != "1") return emo::make_error("EMO_VERIFY", "must be 0 or 1, not '" + verify_s + "'");
  o.phases.verify = verify_s == "1";
  inj.report_path = env_or("EMO_REPORT", nullptr, "");
  return {};
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> once{false};
  if (once.exchange(true)) return 1;
  auto* inj = new Injection();  // lives to the process's end: CUPTI may call back until then
  if (auto st = setup(*inj); !st.ok()) {
    say("error: " + st.error().message() + "; the job runs without the policy");
    delete inj;
    return 1;
  }
  if (cuptiSubscribe(&inj->subscriber, on_callback, inj) != CUPTI_SUCCESS) {
    say("error: cuptiSubscribe failed (another CUPTI client, such as a profiler, holds the subscription); the job runs without the policy");
    delete inj;
    return 1;
  }
  for (CUpti_CallbackId id : {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                              CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060})
    cuptiEnableCallback(1, inj->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  for (CUpti_CallbackId id : {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                              CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz})
    cuptiEnableCallback(1, inj->subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  g_injection = inj;
  std::atexit(at_exit);
  say("watching kernel launches for the policy's steps (rank " + std::to_string(inj->options.rank) + ")");
  return 1;
}
