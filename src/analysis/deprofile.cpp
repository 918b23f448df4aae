// The profiler's own cost on the host, taken out of a step; see emo/analysis/deprofile.h.
#include "emo/analysis/deprofile.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <set>
#include <cmath>
#include <map>
#include <tuple>

#include "emo/base/file_util.h"
#include "emo/base/stats.h"
#include "emo/dist/dist.h"
#include "emo/replay/distributed.h"
#include "emo/replay/replay.h"
#include "internal.h"
#include "emo/trace/kineto_out.h"

namespace emo::analysis {

using graph::NodeId;
using graph::NodeKind;

namespace {

std::vector<int64_t> host_scaled(const graph::Graph& g, double host_scale) {
  std::vector<int64_t> d = g.dur_ns;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (is_host_time(g, n)) d[n] = std::llround(static_cast<double>(d[n]) * host_scale);
  }
  return d;
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// "trace.json.gz" -> "trace".
std::string stem_of(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const std::string e : {".gz", ".json"}) {
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) name.resize(name.size() - e.size());
  }
  return name.empty() || name == "-" ? std::string("trace") : name;
}

}  // namespace

bool is_host_time(const Workload& w, NodeId n) { return is_host_time(w.graph, n); }

bool is_host_time(const graph::Graph& g, NodeId n) {
  switch (g.kind[n]) {
    case NodeKind::kCpuOp:
    case NodeKind::kCpuGap:
    case NodeKind::kRuntime:
    case NodeKind::kSyncCall: return true;  // a blocking call's own time: what is left after its wait
    default: return false;                  // GPU work, collectives, and waits (kCpuWait)
  }
}

int64_t replay_with_host_scale(const Workload& w, double host_scale) {
  replay::Replayer r(w.graph);
  replay::Timeline tl;
  r.run(host_scaled(w.graph, host_scale), tl);
  return tl.makespan_ns();
}

namespace {

// The factor on host time of `c` (its untraced and traced steps set, the traced one longer), from the step
// replayed at a factor (`replayed`): 0 where even no host time is too long, else the largest factor whose
// step is no longer than the untraced one, to 1e-4 (the replay is monotone in the host's durations).
template <class Replayed>
void find_host_scale(ProfilerCost& c, Replayed&& replayed) {
  c.host0_ns = replayed(0.0);
  if (c.host0_ns >= c.untraced_ns) {
    c.host_scale = 0;
    c.replayed_ns = c.host0_ns;
    c.explained = false;
    return;
  }
  double lo = 0, hi = 1;
  while (hi - lo > 1e-4) {
    const double mid = 0.5 * (lo + hi);
    (replayed(mid) <= c.untraced_ns ? lo : hi) = mid;
  }
  c.host_scale = std::floor(lo * 1e4) / 1e4;
  c.replayed_ns = replayed(c.host_scale);
}

}  // namespace

Result<ProfilerCost> estimate_profiler_cost(const Workload& w, std::optional<int64_t> untraced_ns) {
  // Each rank's median as the doubt check (step_warnings) takes it, then their median.
  std::vector<double> per_rank;
  for (const trace::RankTrace& t : w.ranks) {
    if (!t.untraced_step_ns.empty())
      per_rank.push_back(median(std::vector<double>(t.untraced_step_ns.begin(), t.untraced_step_ns.end())));
  }
  const std::string where = w.ranks.empty() ? std::string() : w.ranks[0].path;
  if (untraced_ns && *untraced_ns <= 0) return make_error("--untraced-step-ms", "must be a step time above 0");
  if (per_rank.empty() && !untraced_ns) {
    return make_error(where, "the trace does not say how long the job's steps take without the profiler",
                      "record it with emo.torch.capture or EnergyOptimizer (they time the job's untraced steps into "
                      "emo_untraced_step_us), or give the job's step time (--untraced-step-ms) or the factor "
                      "(--host-scale)");
  }
  ProfilerCost c;
  c.untraced_ns = untraced_ns ? *untraced_ns : std::llround(median(per_rank));
  c.traced_ns = replay_with_host_scale(w, 1.0);
  if (c.traced_ns <= c.untraced_ns) {
    return make_error(where,
                      fmt::format("the profiler did not slow this step: {:.3f} ms traced, {:.3f} ms without the profiler",
                                  ms(c.traced_ns), ms(c.untraced_ns)),
                      "there is no profiler cost to take out; use the trace as it is");
  }
  find_host_scale(c, [&](double host_scale) { return replay_with_host_scale(w, host_scale); });
  return c;
}

namespace {

// Rank `r` of `g` (its trace `t`) written back as a Kineto trace with its nodes at [start(n), end(n)).
template <class Start, class End>
std::string rank_trace_at(const graph::Graph& g, const trace::RankTrace& t, uint32_t r, Start&& start, End&& end,
                          double host_scale, const ProfilerCost* cost) {
  // The rank's trace time against the graph's timeline, from a node that starts where its event does
  // (a GPU op or a runtime call: never cut).
  int64_t offset = 0;
  bool have_offset = false;
  // Trace lane -> graph lane, by what names a lane.
  std::map<std::tuple<bool, int64_t, int64_t>, uint32_t> lane_of;
  for (uint32_t l = 0; l < g.lanes.size(); ++l) {
    const graph::Lane& gl = g.lanes[l];
    if (gl.rank != r) continue;
    lane_of[{gl.gpu, gl.gpu ? gl.device : gl.pid, gl.gpu ? gl.stream : gl.tid}] = l;
  }
  std::vector<uint32_t> graph_lane(t.lanes.size(), graph::kNoId);
  for (uint32_t l = 0; l < t.lanes.size(); ++l) {
    const trace::Lane& tl_ = t.lanes[l];
    auto it = lane_of.find({tl_.gpu, tl_.gpu ? tl_.device : tl_.pid, tl_.gpu ? tl_.stream : tl_.tid});
    if (it != lane_of.end()) graph_lane[l] = it->second;
  }
  std::vector<trace::TimeWarp> warps(g.lanes.size());
  std::vector<NodeId> node_of(t.events.size(), graph::kNoId);  // GPU ops: their node
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.rank[n] != r || g.lane[n] == graph::kNoId) continue;
    warps[g.lane[n]].a.emplace_back(g.meas_start_ns[n], start(n));
    warps[g.lane[n]].a.emplace_back(g.meas_end_ns[n], end(n));
    if (g.event[n] == graph::kNoId) continue;
    if (graph::is_gpu(g.kind[n])) node_of[g.event[n]] = n;
    if (!have_offset && (graph::is_gpu(g.kind[n]) || g.kind[n] == NodeKind::kRuntime)) {
      offset = g.meas_start_ns[n] - t.events[g.event[n]].ts_ns;
      have_offset = true;
    }
  }
  for (auto& wp : warps) wp.finish();

  fmt::memory_buffer b;
  b.append(std::string_view("{\"schemaVersion\": 1"));
  if (!t.device_name.empty()) {
    b.append(std::string_view(", \"deviceProperties\": [{\"id\": 0, \"name\": \""));
    trace::append_json_escaped(b, t.device_name);
    b.append(std::string_view("\"}]"));
  }
  if (t.rank >= 0) {
    fmt::format_to(std::back_inserter(b), ",\n\"distributedInfo\": {{\"rank\": {}", t.rank);
    if (t.world_size > 0) fmt::format_to(std::back_inserter(b), ", \"world_size\": {}", t.world_size);
    b.push_back('}');
  }
  fmt::format_to(std::back_inserter(b), ",\n\"baseTimeNanoseconds\": {}", t.origin_ns);
  if (!t.untraced_step_ns.empty()) {
    b.append(std::string_view(",\n\"emo_untraced_step_us\": ["));
    for (size_t i = 0; i < t.untraced_step_ns.size(); ++i) {
      fmt::format_to(std::back_inserter(b), "{}{:.3f}", i > 0 ? ", " : "", static_cast<double>(t.untraced_step_ns[i]) / 1e3);
    }
    b.push_back(']');
  }
  fmt::format_to(std::back_inserter(b), ",\n\"emo_deprofiled\": {{\"host_scale\": {:.4f}", host_scale);
  if (cost != nullptr) {
    fmt::format_to(std::back_inserter(b), ", \"traced_step_us\": {:.3f}, \"untraced_step_us\": {:.3f}, \"replayed_step_us\": {:.3f}",
                   static_cast<double>(cost->traced_ns) / 1e3, static_cast<double>(cost->untraced_ns) / 1e3,
                   static_cast<double>(cost->replayed_ns) / 1e3);
  }
  b.append(std::string_view("},\n\"traceEvents\": [\n"));
  bool first = true;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const trace::Event& e = t.events[i];
    if (e.lane >= t.lanes.size()) continue;
    int64_t ts = 0, te = 0;
    if (node_of[i] != graph::kNoId) {
      ts = start(node_of[i]);
      te = end(node_of[i]);
    } else if (graph_lane[e.lane] != graph::kNoId) {
      const trace::TimeWarp& wp = warps[graph_lane[e.lane]];
      ts = wp(e.ts_ns + offset);
      te = std::max(ts, wp(e.ts_ns + e.dur_ns + offset));
    } else {
      ts = e.ts_ns + offset;
      te = ts + e.dur_ns;
    }
    ts -= offset;
    te -= offset;
    if (!first) b.append(std::string_view(",\n"));
    first = false;
    trace::append_kineto_event(b, t, i, ts, te, t.name_of(e));
    // The fwdbwd flows, at their ops' starts (the reader binds them there again).
    const trace::Lane& lane = t.lanes[e.lane];
    if (e.flow_out != 0) {
      fmt::format_to(std::back_inserter(b),
                     ",\n{{\"ph\": \"s\", \"id\": {}, \"pid\": {}, \"tid\": {}, \"ts\": {:.3f}, \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"}}",
                     e.flow_out, lane.pid, lane.tid, static_cast<double>(ts) / 1e3);
    }
    if (e.flow_in != 0) {
      fmt::format_to(std::back_inserter(b),
                     ",\n{{\"ph\": \"f\", \"id\": {}, \"pid\": {}, \"tid\": {}, \"ts\": {:.3f}, \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\", \"bp\": \"e\"}}",
                     e.flow_in, lane.pid, lane.tid, static_cast<double>(ts) / 1e3);
    }
  }
  b.append(std::string_view("\n]}\n"));
  return fmt::to_string(b);
}

}  // namespace

std::vector<std::string> traces_with_host_scale(const Workload& w, double host_scale, const ProfilerCost* cost) {
  replay::Replayer rp(w.graph);
  replay::Timeline tl;
  rp.run(host_scaled(w.graph, host_scale), tl);
  std::vector<std::string> out;
  for (uint32_t r = 0; r < w.ranks.size(); ++r) {
    out.push_back(rank_trace_at(
        w.graph, w.ranks[r], r, [&](NodeId n) { return tl.start(n); }, [&](NodeId n) { return tl.end(n); }, host_scale,
        cost));
  }
  return out;
}

Result<Workload> without_profiler_cost(Workload w, const LoadOptions& options) {
  auto c = estimate_profiler_cost(w);
  if (!c) return w;  // no untraced step times, or a step the profiler did not slow
  if (100.0 * (static_cast<double>(c->traced_ns) / static_cast<double>(c->untraced_ns) - 1.0) <= kProfilerSlowdownDoubtPct) {
    return w;
  }
  const std::vector<std::string> texts = traces_with_host_scale(w, c->host_scale, &*c);
  std::vector<trace::RankTrace> ranks;
  for (size_t r = 0; r < texts.size(); ++r) {
    auto t = trace::parse_trace(texts[r], w.ranks[r].path);
    if (!t) return t.error();
    ranks.push_back(std::move(*t));
  }
  LoadOptions again = options;
  again.deprofile = false;
  again.cpu_ops_as_kernels = false;  // stand-in kernels are GPU ops of the written step
  again.step.reset();                // the written trace holds the one step
  auto d = assemble(std::move(ranks), again);
  if (!d) return d.error();
  d->deprofiled = *c;
  return d;
}

namespace {
// Each rank's median untraced step (every process's, in rank order); the first error of the traces written
// back (process order).
constexpr int kTagUntraced = 27, kTagRewritten = 28, kTagEvents = 29;
}  // namespace

Result<WorkloadPart> detail::without_profiler_cost_part(WorkloadPart w, const LoadOptions& options, dist::Comm& comm) {
  const graph::Graph& g = w.part.graph;
  std::vector<int64_t> mine;
  for (const trace::RankTrace& t : w.ranks) {
    if (t.untraced_step_ns.empty()) continue;
    const double m = median(std::vector<double>(t.untraced_step_ns.begin(), t.untraced_step_ns.end()));
    mine.push_back(std::bit_cast<int64_t>(m));
  }
  auto all = dist::all_gather(comm, kTagUntraced, dist::to_bytes(mine));
  if (!all) return all.error();
  std::vector<double> per_rank;
  for (size_t q = 0; q < all->size(); ++q) {
    auto v = dist::from_bytes((*all)[q], int(q));
    if (!v) return v.error();
    for (int64_t bits : *v) per_rank.push_back(std::bit_cast<double>(bits));
  }
  // estimate_profiler_cost()'s steps, each replay shared by the processes.
  if (per_rank.empty()) return w;
  const replay::Shard shard = replay::make_shard(w.part);
  replay::ShardTimeline tl;
  Status failed;
  const auto replayed = [&](double host_scale) -> int64_t {
    if (failed.ok()) failed = replay::run_distributed(shard, host_scaled(g, host_scale), comm, tl);
    return failed.ok() ? tl.makespan_ns() : 0;
  };
  ProfilerCost c;
  c.untraced_ns = std::llround(median(per_rank));
  c.traced_ns = replayed(1.0);
  if (!failed.ok()) return failed.error();
  if (c.traced_ns <= c.untraced_ns) return w;
  find_host_scale(c, replayed);
  if (!failed.ok()) return failed.error();
  if (100.0 * (static_cast<double>(c.traced_ns) / static_cast<double>(c.untraced_ns) - 1.0) <= kProfilerSlowdownDoubtPct) {
    return w;
  }
  // This process's ranks written back at the factor (`tl` holds its replay) and read again, restricted to
  // their step as one process restricts them.
  WorkloadPart out;
  std::optional<Error> error;
  int64_t events = 0;
  for (uint32_t r = 0; r < w.ranks.size() && !error; ++r) {
    const std::string text = rank_trace_at(
        g, w.ranks[r], r, [&](NodeId n) { return tl.t_ns[2 * size_t(n)]; },
        [&](NodeId n) { return tl.t_ns[2 * size_t(n) + 1]; }, c.host_scale, &c);
    auto t = trace::parse_trace(text, w.ranks[r].path);
    if (!t) {
      error = t.error();
      break;
    }
    auto step = trace::select_step(*t, std::nullopt);
    if (!step) {
      error = step.error();
      break;
    }
    events += int64_t(t->events.size());
    out.steps.push_back(*step);
    out.ranks.push_back(std::move(*t));
  }
  w.ranks.clear();
  auto verdicts = dist::all_gather(comm, kTagRewritten,
                                   error ? dist::frame({error->where, error->what, error->note}) : std::string());
  if (!verdicts) return verdicts.error();
  for (const std::string& v : *verdicts) {
    if (v.empty()) continue;
    auto f = dist::unframe(v);
    if (!f || f->size() != 3) return make_error("", "a process's error arrived cut short");
    return make_error(std::string((*f)[0]), std::string((*f)[1]), std::string((*f)[2]));
  }
  auto total = dist::all_combine(comm, kTagEvents, {events}, [](const std::vector<std::vector<int64_t>>& parts) {
    int64_t sum = 0;
    for (const auto& p : parts) sum += p.empty() ? 0 : p[0];
    return std::vector<int64_t>{sum};
  });
  if (!total) return total.error();
  out.events = total->at(0);
  auto part = graph::build_part(out.ranks, comm, options.build);
  if (!part) return part.error();
  out.part = std::move(*part);
  out.part.graph.step_of_rank = out.steps;
  out.deprofiled = c;
  return out;
}

Result<Deprofiled> deprofile(const Workload& w, const std::string& out_dir, std::optional<double> host_scale,
                             std::optional<int64_t> untraced_ns) {
  if (host_scale && !(*host_scale >= 0 && *host_scale <= 1)) {
    return make_error("--host-scale", fmt::format("{} is not a factor from 0 to 1", *host_scale));
  }
  Deprofiled d;
  if (host_scale) {
    d.host_scale = *host_scale;
    d.replayed_ns = replay_with_host_scale(w, d.host_scale);
  } else {
    auto c = estimate_profiler_cost(w, untraced_ns);
    if (!c) return c.error();
    d.cost = *c;
    d.host_scale = c->host_scale;
    d.replayed_ns = c->replayed_ns;
    if (!c->explained) {
      d.warnings.push_back(fmt::format(
          "even with no host time the step takes {:.3f} ms, longer than the job's untraced {:.3f} ms: the profiler's "
          "cost on the host does not explain the whole difference (the GPU ran slower too, or the job's steps differ); "
          "written with no host time at all",
          ms(c->host0_ns), ms(c->untraced_ns)));
    }
  }
  const std::vector<std::string> texts = traces_with_host_scale(w, d.host_scale, d.cost ? &*d.cost : nullptr);
  AtomicDir dir;
  EMO_RETURN_IF_ERROR(dir.open(out_dir, "output folder"));
  std::set<std::string> used;
  std::vector<std::string> names;
  for (size_t r = 0; r < texts.size(); ++r) {
    std::string name = stem_of(w.ranks[r].path);
    if (!used.insert(name).second) name += fmt::format("_rank{}", w.graph.rank_id(graph::RankIndex(static_cast<uint32_t>(r))));
    used.insert(name);
    name += ".json";
    EMO_RETURN_IF_ERROR(dir.write(name, texts[r]));
    names.push_back(name);
  }
  EMO_RETURN_IF_ERROR(dir.commit());
  for (const std::string& n : names) d.files.push_back((std::filesystem::path(dir.final_path()) / n).string());
  return d;
}

}  // namespace emo::analysis
