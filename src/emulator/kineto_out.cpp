// Writes what the emulated GPU "recorded": each traced step of one rank in the modern Kineto layout.
// GPU ops take the times the executed program gave them; every other event is mapped through a
// monotone warp of its lane's time (the lane's runtime calls, thread extent and GPU ops give measured
// -> executed anchors), so nesting and order survive. Correlation ids, External ids and collective Seq numbers are shifted per step so
// several steps in one file stay distinct.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "emulator_detail.h"

namespace emo::emulator::detail {

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

TracedStep TracedStep::of(const executor::Program& p, int64_t start_ns) {
  TracedStep s;
  s.start_ns = start_ns;
  const auto n_ops = uint32_t(p.gpu_ops().size());
  const auto n_calls = uint32_t(p.calls().size());
  const auto n_threads = uint32_t(p.threads().size());
  s.op_start.resize(n_ops);
  s.op_end.resize(n_ops);
  for (uint32_t i = 0; i < n_ops; ++i) {
    s.op_start[i] = p.op_start(i);
    s.op_end[i] = p.op_end(i);
  }
  s.call_start.resize(n_calls);
  s.call_end.resize(n_calls);
  for (uint32_t i = 0; i < n_calls; ++i) {
    s.call_start[i] = p.call_start(i);
    s.call_end[i] = p.call_end(i);
  }
  s.thread_end.resize(n_threads);
  for (uint32_t i = 0; i < n_threads; ++i) s.thread_end[i] = p.thread_end(i);
  return s;
}

std::string write_kineto(const std::vector<trace::RankTrace>& ranks, uint32_t rank, const executor::Program& program,
                         const std::vector<TracedStep>& steps, const device::DeviceProfile& profile) {
  const trace::RankTrace& t = ranks[rank];
  // Event -> its GPU op in the program.
  constexpr uint32_t kNoOp = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> op_of(t.events.size(), kNoOp);
  const auto& gops = program.gpu_ops();
  for (uint32_t i = 0; i < gops.size(); ++i) {
    if (gops[i].rank == rank && gops[i].event < op_of.size()) op_of[gops[i].event] = i;
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
  const auto rank_id_of = [&](size_t r) { return ranks[r].rank >= 0 ? ranks[r].rank : int(r); };
  const int rank_id = rank_id_of(rank);
  int world_size = int(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r)
    world_size = std::max({world_size, ranks[r].world_size, rank_id_of(r) + 1});
  fmt::memory_buffer b;
  fmt::format_to(std::back_inserter(b),
                 "{{\"schemaVersion\": 1, \"deviceProperties\": [{{\"id\": 0, \"name\": \"{} (emulated)\"}}],\n"
                 "\"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {}, \"world_size\": {}}},\n"
                 "\"baseTimeNanoseconds\": {}, \"traceName\": \"emo emulated {} rank {}\",\n\"traceEvents\": [\n",
                 profile.model, rank_id, world_size,
                 kTraceOriginOffsetNs, profile.name, rank);
  bool first = true;
  const auto& calls = program.calls();
  const auto& threads = program.threads();
  for (size_t k = 0; k < steps.size(); ++k) {
    const TracedStep& step = steps[k];
    const int64_t step_start = step.start_ns;
    std::vector<Warp> warps(t.lanes.size());
    for (uint32_t c = 0; c < calls.size(); ++c) {
      if (calls[c].rank != rank || calls[c].lane >= warps.size()) continue;
      warps[calls[c].lane].a.emplace_back(calls[c].measured_start_ns, step.call_start[c]);
      warps[calls[c].lane].a.emplace_back(calls[c].measured_end_ns, step.call_end[c]);
    }
    for (uint32_t h = 0; h < threads.size(); ++h) {
      if (threads[h].rank != rank || threads[h].lane >= warps.size()) continue;
      warps[threads[h].lane].a.emplace_back(threads[h].measured_begin_ns, threads[h].measured_begin_ns);
      warps[threads[h].lane].a.emplace_back(threads[h].measured_end_ns, step.thread_end[h]);
    }
    for (uint32_t i = 0; i < gops.size(); ++i) {
      if (gops[i].rank != rank) continue;
      const trace::Event& e = t.events[gops[i].event];
      if (e.lane >= warps.size()) continue;
      warps[e.lane].a.emplace_back(program.to_run(rank, e.ts_ns), step.op_start[i]);
      warps[e.lane].a.emplace_back(program.to_run(rank, e.ts_ns + e.dur_ns), step.op_end[i]);
    }
    for (auto& wp : warps) wp.finish();
    const int64_t corr_off = int64_t(k) * (max_corr + 1), ext_off = int64_t(k) * (max_ext + 1);
    const int64_t seq_off = int64_t(k) * (max_seq + 1);
    for (size_t i = 0; i < t.events.size(); ++i) {
      const trace::Event& e = t.events[i];
      if (e.lane >= t.lanes.size()) continue;
      const trace::Lane& lane = t.lanes[e.lane];
      int64_t ts, te;
      if (op_of[i] != kNoOp) {
        ts = step.op_start[op_of[i]];
        te = step.op_end[op_of[i]];
      } else {
        ts = warps[e.lane](program.to_run(rank, e.ts_ns));
        te = std::max(ts, warps[e.lane](program.to_run(rank, e.ts_ns + e.dur_ns)));
      }
      ts += step_start;
      te += step_start;
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
        if (c.dtype != kEmptyStr) {
          b.append(std::string_view(", \"dtype\": \"")); escape_into(b, t.strings.view(c.dtype)); b.push_back('"');
        }
      }
      b.append(std::string_view("}}"));
    }
  }
  b.append(std::string_view("\n]}\n"));
  return fmt::to_string(b);
}

}  // namespace emo::emulator::detail
