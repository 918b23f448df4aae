// Writes what the emulated GPU "recorded": each traced step of one rank in the modern Kineto layout.
// GPU ops take the times the executed program gave them; every other event is mapped through a
// monotone warp of its lane's time (the lane's runtime calls, thread extent and GPU ops give measured
// -> executed anchors), so nesting and order survive. Correlation ids, External ids and collective Seq numbers are shifted per step so
// several steps in one file stay distinct.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "emo/trace/kineto_out.h"
#include "emulator_detail.h"

namespace emo::emulator::detail {

using trace::EventKind;

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
  s.thread_begin.resize(n_threads);
  s.thread_end.resize(n_threads);
  for (uint32_t i = 0; i < n_threads; ++i) {
    s.thread_begin[i] = p.thread_begin(i);
    s.thread_end[i] = p.thread_end(i);
  }
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
    std::vector<trace::TimeWarp> warps(t.lanes.size());
    for (uint32_t c = 0; c < calls.size(); ++c) {
      if (calls[c].rank != rank || calls[c].lane >= warps.size()) continue;
      warps[calls[c].lane].a.emplace_back(calls[c].measured_start_ns, step.call_start[c]);
      warps[calls[c].lane].a.emplace_back(calls[c].measured_end_ns, step.call_end[c]);
    }
    for (uint32_t h = 0; h < threads.size(); ++h) {
      if (threads[h].rank != rank || threads[h].lane >= warps.size()) continue;
      warps[threads[h].lane].a.emplace_back(threads[h].measured_begin_ns, step.thread_begin[h]);
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
      std::string_view nm = t.name_of(e);
      std::string renamed;
      if (k > 0 && first_step >= 0 && e.kind == EventKind::kUserAnnotation && nm.rfind("ProfilerStep#", 0) == 0) {
        renamed = fmt::format("ProfilerStep#{}", first_step + int64_t(k));
        nm = renamed;
      }
      trace::append_kineto_event(b, t, i, ts, te, nm, trace::IdOffsets{corr_off, ext_off, seq_off});
    }
  }
  b.append(std::string_view("\n]}\n"));
  return fmt::to_string(b);
}

}  // namespace emo::emulator::detail
