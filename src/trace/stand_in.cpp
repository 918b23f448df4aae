// A CPU-only trace as the trace of a GPU job whose kernels mirror its CPU operators (see trace.h,
// cpu_ops_as_kernels): for trying EMO end to end on a laptop or in CI, with the GPU side emulated.
#include <fmt/format.h>

#include <algorithm>

#include "emo/trace/trace.h"

namespace emo::trace {

Result<int> cpu_ops_as_kernels(RankTrace& t) {
  for (const Event& e : t.events) {
    if (is_gpu_op(e.kind))
      return make_error(t.path, "has GPU operations: only a trace of a CPU-only run stands in for a GPU job",
                        "leave out the CPU-ops-as-kernels option (emulated GPUs run the trace's own kernels)");
  }
  // Leaf operators: a cpu_op with no cpu_op inside it on its thread (events are sorted parents first).
  std::vector<size_t> leaves;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (e.kind != EventKind::kCpuOp || e.dur_ns < kStandInMinOpNs) continue;
    bool has_child = false;
    for (size_t j = i + 1; j < t.events.size() && t.events[j].ts_ns < e.ts_ns + e.dur_ns; ++j) {
      const Event& c = t.events[j];
      if (c.lane == e.lane && c.kind == EventKind::kCpuOp && c.ts_ns + c.dur_ns <= e.ts_ns + e.dur_ns) {
        has_child = true;
        break;
      }
    }
    if (!has_child) leaves.push_back(i);
  }
  if (leaves.empty()) return make_error(t.path, "has no CPU operator to stand in for a kernel");
  Lane gpu;
  gpu.gpu = true;
  gpu.pid = 0;
  gpu.tid = 7;
  gpu.device = 0;
  gpu.stream = 7;
  const uint32_t gpu_lane = uint32_t(t.lanes.size());
  t.lanes.push_back(gpu);
  const StrId launch = t.strings.intern("cudaLaunchKernel");
  const StrId sync = t.strings.intern("cudaDeviceSynchronize");
  int64_t corr = 1;
  for (const Event& e : t.events) corr = std::max(corr, e.correlation + 1);
  std::vector<Event> added;
  added.reserve(2 * leaves.size() + t.steps.size());
  for (size_t i : leaves) {
    const Event op = t.events[i];
    const int64_t launch_ns = std::min<int64_t>(kStandInLaunchNs, op.dur_ns / 4);
    Event call;
    call.ts_ns = op.ts_ns;
    call.dur_ns = launch_ns;
    call.name = launch;
    call.kind = EventKind::kRuntime;
    call.lane = op.lane;
    call.correlation = corr;
    call.external_id = op.external_id;
    added.push_back(call);
    Event k;
    k.ts_ns = op.ts_ns + launch_ns;
    k.dur_ns = op.dur_ns - launch_ns;
    k.name = op.name;
    k.kind = EventKind::kKernel;
    k.lane = gpu_lane;
    k.correlation = corr;
    k.external_id = op.external_id;
    k.device = 0;
    k.stream = 7;
    added.push_back(k);
    ++corr;
  }
  // Each step ends by waiting for the GPU (as a loss.item() or an optimizer step does).
  for (const Step& s : t.steps) {
    const Event* last = nullptr;
    for (size_t i : leaves) {
      const Event& op = t.events[i];
      if (op.ts_ns >= s.ts_ns && op.ts_ns + op.dur_ns <= s.ts_ns + s.dur_ns) last = &op;
    }
    if (last == nullptr) continue;
    Event w;
    w.ts_ns = last->ts_ns + last->dur_ns;
    w.dur_ns = std::max<int64_t>(0, std::min<int64_t>(1000, s.ts_ns + s.dur_ns - w.ts_ns));
    w.name = sync;
    w.kind = EventKind::kRuntime;
    w.lane = last->lane;
    w.correlation = corr++;
    added.push_back(w);
  }
  t.events.insert(t.events.end(), added.begin(), added.end());
  std::stable_sort(t.events.begin(), t.events.end(), [](const Event& a, const Event& b) {
    if (a.ts_ns != b.ts_ns) return a.ts_ns < b.ts_ns;
    if (a.dur_ns != b.dur_ns) return a.dur_ns > b.dur_ns;
    return a.lane < b.lane;
  });
  if (t.device_name.empty()) t.device_name = "emulated (CPU operators as kernels)";
  return int(leaves.size());
}

}  // namespace emo::trace
