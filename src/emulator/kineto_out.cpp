// Writes what the emulated GPU "recorded": each traced step of one rank in the modern Kineto layout.
// GPU ops take the times the emulation gave their nodes; CPU events are mapped through a monotone
// warp of their thread's time (the thread's graph nodes give measured -> emulated anchors), so nesting
// and order survive. Correlation ids, External ids and collective Seq numbers are shifted per step so
// several steps in one file stay distinct.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "emulator_detail.h"

namespace emo::emulator::detail {

using graph::NodeId;
using trace::EventKind;

namespace {

const char* cat_of(EventKind k) {
  switch (k) {
    case EventKind::kCpuOp: return "cpu_op";
    case EventKind::kUserAnnotation: return "user_annotation";
    case EventKind::kPythonFunction: return "python_function";
    case EventKind::kRuntime: return "cuda_runtime";
    case EventKind::kDriver: return "cuda_driver";
    case EventKind::kKernel: return "kernel";
    case EventKind::kMemcpy: return "gpu_memcpy";
    case EventKind::kMemset: return "gpu_memset";
    case EventKind::kCudaSync: return "cuda_sync";
    case EventKind::kGpuAnnotation: return "gpu_user_annotation";
    case EventKind::kOtherCpu: return "cpu_instant_event";
  }
  return "cpu_op";
}

void escape_into(fmt::memory_buffer& b, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"': b.append(std::string_view("\\\"")); break;
      case '\\': b.append(std::string_view("\\\\")); break;
      case '\n': b.append(std::string_view("\\n")); break;
      case '\t': b.append(std::string_view("\\t")); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) fmt::format_to(std::back_inserter(b), "\\u{:04x}", int(c));
        else b.push_back(c);
    }
  }
}

// Monotone piecewise-linear map from measured to emulated time on one lane.
struct Warp {
  std::vector<std::pair<int64_t, int64_t>> a;  // (measured, emulated)
  void finish() {
    std::sort(a.begin(), a.end());
    int64_t run = std::numeric_limits<int64_t>::min();
    for (auto& p : a) p.second = run = std::max(run, p.second);
  }
  int64_t operator()(int64_t x) const {
    if (a.empty()) return x;
    auto it = std::upper_bound(a.begin(), a.end(), std::make_pair(x, std::numeric_limits<int64_t>::max()));
    if (it == a.begin()) return x + (a.front().second - a.front().first);
    const auto& lo = *(it - 1);
    if (it == a.end()) return x + (lo.second - lo.first);
    const auto& hi = *it;
    if (hi.first == lo.first) return lo.second;
    const double frac = double(x - lo.first) / double(hi.first - lo.first);
    return lo.second + int64_t(std::llround(frac * double(hi.second - lo.second)));
  }
};

}  // namespace

std::string write_kineto(const analysis::Workload& w, uint32_t rank,
                         const std::vector<std::pair<int64_t, replay::Timeline>>& steps, int64_t g0,
                         const device::DeviceProfile& profile) {
  const graph::Graph& g = w.graph;
  const trace::RankTrace& t = w.ranks[rank];
  // Event -> its GPU node; graph time = event ts + delta (rank base and alignment).
  std::vector<NodeId> gpu_node(t.events.size(), graph::kNoId);
  std::vector<NodeId> rank_nodes;
  std::vector<int64_t> deltas;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.rank[n] != rank || g.event[n] == graph::kNoId) continue;
    rank_nodes.push_back(n);
    if (graph::is_gpu(g.kind[n])) {
      gpu_node[g.event[n]] = n;
      deltas.push_back(g.meas_start_ns[n] - t.events[g.event[n]].ts_ns);
    }
  }
  int64_t delta = 0;
  if (!deltas.empty()) {
    std::nth_element(deltas.begin(), deltas.begin() + ptrdiff_t(deltas.size() / 2), deltas.end());
    delta = deltas[deltas.size() / 2];
  } else if (!rank_nodes.empty()) {
    delta = g.meas_start_ns[rank_nodes.front()] - t.events[g.event[rank_nodes.front()]].ts_ns;
  }
  int64_t max_corr = 0, max_ext = 0, max_seq = 0;
  for (const auto& e : t.events) {
    max_corr = std::max(max_corr, e.correlation);
    max_ext = std::max(max_ext, e.external_id);
  }
  for (const auto& c : t.collectives) max_seq = std::max(max_seq, c.seq);
  int64_t first_step = -1;
  for (const auto& e : t.events) {
    std::string_view nm = t.name_of(e);
    if (e.kind == EventKind::kUserAnnotation && nm.rfind("ProfilerStep#", 0) == 0) {
      first_step = std::atoll(std::string(nm.substr(13)).c_str());
      break;
    }
  }

  // The rank as the input trace named it, in one world that holds every rank (the reader refuses a
  // rank not below world_size): the inputs' world size, the traces given, or the highest rank + 1,
  // whichever is largest (one rank of a larger run analyzed alone is rank 3 of 8, not of 1).
  const auto rank_id_of = [&](size_t r) { return g.rank_ids.empty() ? int(r) : g.rank_ids[r]; };
  const int rank_id = rank_id_of(rank);
  int world_size = int(g.rank_paths.size());
  for (size_t r = 0; r < w.ranks.size(); ++r)
    world_size = std::max({world_size, w.ranks[r].world_size, rank_id_of(r) + 1});
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b),
                 "{{\"schemaVersion\": 1, \"deviceProperties\": [{{\"id\": 0, \"name\": \"{} (emulated)\"}}],\n"
                 "\"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {}, \"world_size\": {}}},\n"
                 "\"baseTimeNanoseconds\": {}, \"traceName\": \"emo emulated {} rank {}\",\n\"traceEvents\": [\n",
                 profile.model, rank_id, world_size,
                 kTraceOriginOffsetNs, profile.name, rank);
  bool first = true;
  for (size_t k = 0; k < steps.size(); ++k) {
    const int64_t step_start = steps[k].first;
    const replay::Timeline& tl = steps[k].second;
    std::vector<Warp> warps(t.lanes.size());
    for (NodeId n : rank_nodes) {
      const uint32_t lane = t.events[g.event[n]].lane;
      if (lane >= warps.size()) continue;
      warps[lane].a.emplace_back(g.meas_start_ns[n], tl.start(n));
      warps[lane].a.emplace_back(g.meas_end_ns[n], tl.end(n));
    }
    for (auto& wp : warps) wp.finish();
    const int64_t corr_off = int64_t(k) * (max_corr + 1), ext_off = int64_t(k) * (max_ext + 1);
    const int64_t seq_off = int64_t(k) * (max_seq + 1);
    for (size_t i = 0; i < t.events.size(); ++i) {
      const trace::Event& e = t.events[i];
      if (e.lane >= t.lanes.size()) continue;
      const trace::Lane& lane = t.lanes[e.lane];
      int64_t ts, te;
      if (gpu_node[i] != graph::kNoId) {
        ts = tl.start(gpu_node[i]);
        te = tl.end(gpu_node[i]);
      } else {
        ts = warps[e.lane](e.ts_ns + delta);
        te = std::max(ts, warps[e.lane](e.ts_ns + e.dur_ns + delta));
      }
      ts = ts - g0 + step_start;
      te = te - g0 + step_start;
      if (!first) b.append(std::string_view(",\n"));
      first = false;
      fmt::format_to(std::back_inserter(b), "{{\"ph\": \"X\", \"cat\": \"{}\", \"name\": \"", cat_of(e.kind));
      std::string_view nm = t.name_of(e);
      if (k > 0 && first_step >= 0 && e.kind == EventKind::kUserAnnotation && nm.rfind("ProfilerStep#", 0) == 0) {
        fmt::format_to(std::back_inserter(b), "ProfilerStep#{}", first_step + int64_t(k));
      } else {
        escape_into(b, nm);
      }
      fmt::format_to(std::back_inserter(b), "\", \"pid\": {}, \"tid\": {}, \"ts\": {:.3f}, \"dur\": {:.3f}, \"args\": {{",
                     lane.pid, lane.tid, double(ts) / 1e3, double(te - ts) / 1e3);
      bool arg = false;
      auto sep = [&] { if (arg) b.append(std::string_view(", ")); arg = true; };
      if (e.external_id != trace::kNone) { sep(); fmt::format_to(std::back_inserter(b), "\"External id\": {}", e.external_id + ext_off); }
      if (e.correlation != trace::kNone) { sep(); fmt::format_to(std::back_inserter(b), "\"correlation\": {}", e.correlation + corr_off); }
      if (lane.gpu) {
        sep(); fmt::format_to(std::back_inserter(b), "\"device\": {}, \"stream\": {}", e.device >= 0 ? e.device : lane.device,
                              e.stream >= 0 ? e.stream : lane.stream);
      }
      if (e.kind == EventKind::kCudaSync) {
        if (e.wait_on_stream >= 0) { sep(); fmt::format_to(std::back_inserter(b), "\"wait_on_stream\": {}", e.wait_on_stream); }
        if (e.wait_on_event_record_corr != trace::kNone) {
          sep(); fmt::format_to(std::back_inserter(b), "\"wait_on_cuda_event_record_corr_id\": {}", e.wait_on_event_record_corr + corr_off);
        }
      }
      if (e.collective != trace::kNoIndex && e.collective < t.collectives.size()) {
        const trace::CollectiveArgs& c = t.collectives[e.collective];
        sep(); b.append(std::string_view("\"Collective name\": \"")); escape_into(b, t.strings.view(c.collective)); b.push_back('"');
        if (c.process_group != kEmptyStr) {
          b.append(std::string_view(", \"Process Group Name\": \"")); escape_into(b, t.strings.view(c.process_group)); b.push_back('"');
        }
        if (c.seq != trace::kNone) fmt::format_to(std::back_inserter(b), ", \"Seq\": {}", c.seq + seq_off);
        if (c.group_size > 0) fmt::format_to(std::back_inserter(b), ", \"Group size\": {}", c.group_size);
        if (c.in_nelems != trace::kNone) fmt::format_to(std::back_inserter(b), ", \"In msg nelems\": {}", c.in_nelems);
        if (c.out_nelems != trace::kNone) fmt::format_to(std::back_inserter(b), ", \"Out msg nelems\": {}", c.out_nelems);
      }
      b.append(std::string_view("}}"));
    }
  }
  b.append(std::string_view("\n]}\n"));
  return fmt::to_string(b);
}

}  // namespace emo::emulator::detail
