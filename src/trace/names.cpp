// What the strings of a Kineto trace mean: event categories in both spellings
// (modern "kernel" / 2021-era "Kernel"), cuda_sync kinds, NCCL kernel names,
// ProfilerStep#N annotations and what CUDA / HIP runtime calls mean. All comparisons ignore ASCII case where doing so
// cannot confuse two different things.
#include <algorithm>
#include <array>
#include <string>

#include "detail.h"
#include "emo/base/comm_kernels.h"
#include "emo/trace/runtime_calls.h"

namespace emo::trace {

const char* to_string(EventKind k) {
  switch (k) {
    case EventKind::kCpuOp:
      return "cpu_op";
    case EventKind::kUserAnnotation:
      return "user_annotation";
    case EventKind::kPythonFunction:
      return "python_function";
    case EventKind::kRuntime:
      return "cuda_runtime";
    case EventKind::kDriver:
      return "cuda_driver";
    case EventKind::kKernel:
      return "kernel";
    case EventKind::kMemcpy:
      return "gpu_memcpy";
    case EventKind::kMemset:
      return "gpu_memset";
    case EventKind::kCudaSync:
      return "cuda_sync";
    case EventKind::kGpuAnnotation:
      return "gpu_user_annotation";
    case EventKind::kOtherCpu:
      return "other_cpu";
  }
  return "unknown";
}

namespace detail {

namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

struct CategoryName {
  std::string_view name;
  Category category;
};

// Modern names first (they are the common case), then the 2021-era ones.
constexpr std::array<CategoryName, 18> kCategories{{
    {"cpu_op", Category::kCpuOp},
    {"cuda_runtime", Category::kRuntime},
    {"kernel", Category::kKernel},
    {"python_function", Category::kPythonFunction},
    {"user_annotation", Category::kUserAnnotation},
    {"cuda_driver", Category::kDriver},
    {"gpu_memcpy", Category::kMemcpy},
    {"gpu_memset", Category::kMemset},
    {"cuda_sync", Category::kCudaSync},
    {"gpu_user_annotation", Category::kGpuAnnotation},
    {"operator", Category::kCpuOp},
    {"runtime", Category::kRuntime},
    {"memcpy", Category::kMemcpy},
    {"memset", Category::kMemset},
    {"trace", Category::kTrace},
    {"overhead", Category::kOverhead},
    {"gpu_annotation", Category::kGpuAnnotation},
    {"driver", Category::kDriver},
}};

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

Category classify_category(std::string_view cat) {
  for (const CategoryName& c : kCategories) {
    if (c.name.size() == cat.size() && iequals(c.name, cat)) return c.category;
  }
  return Category::kUnknown;
}

EventKind kind_of(Category c) {
  switch (c) {
    case Category::kCpuOp:
      return EventKind::kCpuOp;
    case Category::kUserAnnotation:
      return EventKind::kUserAnnotation;
    case Category::kPythonFunction:
      return EventKind::kPythonFunction;
    case Category::kRuntime:
      return EventKind::kRuntime;
    case Category::kDriver:
      return EventKind::kDriver;
    case Category::kKernel:
      return EventKind::kKernel;
    case Category::kMemcpy:
      return EventKind::kMemcpy;
    case Category::kMemset:
      return EventKind::kMemset;
    case Category::kCudaSync:
      return EventKind::kCudaSync;
    case Category::kGpuAnnotation:
      return EventKind::kGpuAnnotation;
    case Category::kTrace:
    case Category::kOverhead:
    case Category::kUnknown:
      break;
  }
  return EventKind::kOtherCpu;
}

bool is_gpu_lane_kind(EventKind k) {
  return is_gpu_op(k) || k == EventKind::kCudaSync || k == EventKind::kGpuAnnotation;
}

SyncKind classify_sync(std::string_view s) {
  if (iequals(s, "Event Sync")) return SyncKind::kEventSync;
  if (iequals(s, "Stream Wait Event")) return SyncKind::kStreamWaitEvent;
  if (iequals(s, "Stream Sync")) return SyncKind::kStreamSync;
  if (iequals(s, "Context Sync")) return SyncKind::kContextSync;
  return SyncKind::kOther;
}

bool starts_with_nccl(std::string_view name) { return has_nccl_name(name); }

std::string_view collective_from_kernel_name(std::string_view name, std::string* storage) {
  // Names seen: "ncclKernel_AllReduce_RING_LL_Sum_float(...)" (NCCL 2.x),
  // "ncclDevKernel_AllGather_RING_LL(...)" (2.19+), "ncclDevKernel_SendRecv(...)",
  // older "ncclAllReduceRingLLKernel_sum_f32". The collective word follows the
  // prefix; longer words are tried first so "ReduceScatter" is not "Reduce".
  static constexpr std::array<std::string_view, 10> kWords{
      "ReduceScatter", "AllReduce", "AllGather", "AllToAll", "Broadcast",
      "SendRecv",      "Reduce",    "Send",      "Recv",     "Gather"};
  if (!starts_with_nccl(name)) return {};
  std::string_view rest = name.substr(4);  // "nccl" or RCCL's "rccl"
  for (std::string_view prefix : {std::string_view("DevKernel_"), std::string_view("Kernel_")}) {
    if (istarts_with(rest, prefix)) {
      rest.remove_prefix(prefix.size());
      break;
    }
  }
  for (std::string_view w : kWords) {
    if (istarts_with(rest, w)) {
      storage->assign(w);
      for (char& c : *storage) c = lower(c);
      return *storage;
    }
  }
  return {};
}

int64_t profiler_step_number(std::string_view name) {
  // "ProfilerStep#12" -> 12; anything after the digits disqualifies the name.
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.size() <= kPrefix.size() || !istarts_with(name, kPrefix)) return -1;
  int64_t n = 0;
  for (size_t i = kPrefix.size(); i < name.size(); ++i) {
    char c = name[i];
    if (c < '0' || c > '9' || n > 100000000000000) return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

bool is_launch_like(std::string_view name) { return launches_gpu_work(classify_runtime_call(name)); }

}  // namespace detail

const char* to_string(RuntimeCall c) {
  switch (c) {
    case RuntimeCall::kOther: return "other";
    case RuntimeCall::kLaunchKernel: return "launch_kernel";
    case RuntimeCall::kGraphLaunch: return "graph_launch";
    case RuntimeCall::kMemcpyAsync: return "memcpy_async";
    case RuntimeCall::kMemcpy: return "memcpy";
    case RuntimeCall::kMemset: return "memset";
    case RuntimeCall::kDeviceSync: return "device_sync";
    case RuntimeCall::kStreamSync: return "stream_sync";
    case RuntimeCall::kEventSync: return "event_sync";
    case RuntimeCall::kQuery: return "query";
    case RuntimeCall::kEventRecord: return "event_record";
    case RuntimeCall::kStreamWaitEvent: return "stream_wait_event";
    case RuntimeCall::kHostFunc: return "host_func";
  }
  return "other";
}

bool is_autograd_engine_frame(std::string_view name) {
  if (name.starts_with("autograd::engine::evaluate_function") || name == "torch::autograd::AccumulateGrad") return true;
  // An identifier ending in Backward, then digits: the backward function's own name.
  size_t end = name.size();
  while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') --end;
  constexpr std::string_view kBackward = "Backward";
  if (end <= kBackward.size() || name.substr(end - kBackward.size(), kBackward.size()) != kBackward) return false;
  for (size_t i = 0; i < end; ++i) {
    const char c = name[i];
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return !(name[0] >= '0' && name[0] <= '9');
}

RuntimeCall classify_runtime_call(std::string_view name) {
  using detail::istarts_with;
  using detail::lower;
  // The verb after the API prefix: cudaStreamSynchronize, cuStreamSynchronize, hipStreamSynchronize.
  std::string_view verb = name;
  for (std::string_view prefix : {std::string_view("cuda"), std::string_view("hip"), std::string_view("cu")}) {
    if (istarts_with(verb, prefix)) {
      verb.remove_prefix(prefix.size());
      break;
    }
  }
  // Lower-cased once (calls run into the hundreds of thousands per trace); longer names keep their
  // first 96 characters, which hold every verb.
  char buf[96];
  const size_t n = std::min(verb.size(), sizeof buf);
  for (size_t i = 0; i < n; ++i) buf[i] = lower(verb[i]);
  const std::string_view lc(buf, n);
  auto has = [&](std::string_view word) { return lc.find(word) != std::string_view::npos; };
  // Order matters: cudaLaunchHostFunc and cudaGraphLaunch also contain "Launch".
  if (has("hostfunc")) return RuntimeCall::kHostFunc;
  if (has("graphlaunch")) return RuntimeCall::kGraphLaunch;
  if (has("launch")) return RuntimeCall::kLaunchKernel;  // LaunchKernel(ExC), ModuleLaunchKernel, ExtLaunchKernel, ...
  if (has("memcpy")) return has("async") ? RuntimeCall::kMemcpyAsync : RuntimeCall::kMemcpy;
  if (has("memset")) return RuntimeCall::kMemset;
  if (has("devicesynchronize") || has("ctxsynchronize") || has("threadsynchronize")) return RuntimeCall::kDeviceSync;
  if (has("streamsynchronize")) return RuntimeCall::kStreamSync;
  if (has("eventsynchronize")) return RuntimeCall::kEventSync;
  if (has("eventquery") || has("streamquery")) return RuntimeCall::kQuery;
  if (has("eventrecord")) return RuntimeCall::kEventRecord;
  if (has("streamwaitevent")) return RuntimeCall::kStreamWaitEvent;
  return RuntimeCall::kOther;
}

}  // namespace emo::trace
