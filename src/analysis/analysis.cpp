// Load → graph → replay → summaries for `emo analyze`, with its JSON and text views.
#include "emo/analysis/analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "emo/trace/runtime_calls.h"

namespace emo::analysis {

using graph::NodeId;
using graph::NodeKind;

Result<Workload> load(const std::vector<std::string>& paths, const LoadOptions& options) {
  if (paths.empty()) return make_error("", "no trace file given");
  if (std::count(paths.begin(), paths.end(), "-") > 1)
    return make_error("-", "standard input is given as more than one trace", "give - for one rank's trace at most");
  std::vector<trace::RankTrace> ranks;
  ranks.reserve(paths.size());
  for (const std::string& p : paths) {
    auto t = trace::read_trace(p);
    if (!t.ok()) return t.error();
    ranks.push_back(std::move(t).value());
  }
  return assemble(std::move(ranks), options);
}

Result<Workload> assemble(std::vector<trace::RankTrace> ranks, const LoadOptions& options) {
  if (ranks.empty()) return make_error("", "no trace given");
  Workload w;
  w.ranks = std::move(ranks);
  // One run: the files that name a world size (distributedInfo.world_size) all name the same one.
  const trace::RankTrace* sized = nullptr;
  for (const auto& t : w.ranks) {
    if (t.world_size < 1) continue;
    if (sized && t.world_size != sized->world_size)
      return make_error(t.path,
                        fmt::format("world_size {} is not the world_size {} of {}", t.world_size, sized->world_size,
                                    sized->path),
                        "give one trace file per rank of the same run");
    if (!sized) sized = &t;
  }
  if (sized && w.ranks.size() > 1) {
    for (const auto& t : w.ranks) {
      if (t.world_size < 1)
        return make_error(t.path,
                          fmt::format("has no distributedInfo.world_size, while {} has world_size {}: not one run",
                                      sized->path, sized->world_size),
                          "give one trace file per rank of the same run");
    }
  }
  // Order by rank: distributedInfo.rank where every file has one, else file order.
  bool all_ranked = std::all_of(w.ranks.begin(), w.ranks.end(), [](const auto& t) { return t.rank >= 0; });
  if (all_ranked && w.ranks.size() > 1) {
    std::stable_sort(w.ranks.begin(), w.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    for (size_t i = 1; i < w.ranks.size(); ++i) {
      if (w.ranks[i].rank == w.ranks[i - 1].rank) {
        return make_error(w.ranks[i].path,
                          fmt::format("rank {} is also the rank of {}", w.ranks[i].rank, w.ranks[i - 1].path),
                          "give one trace file per rank of the same run");
      }
    }
  }
  if (!all_ranked) {
    for (size_t i = 0; i < w.ranks.size(); ++i) w.ranks[i].rank = static_cast<int>(i);
  }
  for (auto& t : w.ranks) {
    auto s = trace::select_step(t, options.step);
    if (!s.ok()) return s.error();
    if (options.cpu_ops_as_kernels) {
      auto k = trace::cpu_ops_as_kernels(t);
      if (!k.ok()) return k.error();
    }
    w.steps.push_back(s.value());
    w.events += static_cast<int64_t>(t.events.size());
  }
  auto g = graph::build_graph(w.ranks, options.build);
  if (!g.ok()) return g.error();
  w.graph = std::move(g).value();
  w.graph.step_of_rank = w.steps;
  return w;
}

Analysis analyze(const Workload& w) {
  const graph::Graph& g = w.graph;
  Analysis a;
  replay::Replayer rp(g);
  replay::Timeline tl;
  rp.run(tl);
  a.measured_span_ns = g.measured_end_ns() - g.measured_begin_ns();
  a.replayed_span_ns = tl.makespan_ns();
  a.replay_error_pct = a.measured_span_ns > 0
                           ? 100.0 * static_cast<double>(a.replayed_span_ns - a.measured_span_ns) /
                                 static_cast<double>(a.measured_span_ns)
                           : 0.0;
  rp.slack({}, tl, a.slack_ns);
  a.critical_path = rp.critical_path({}, tl);

  // Busy time per GPU: union of op intervals, ops sorted by start.
  std::map<std::pair<uint32_t, int32_t>, std::vector<std::pair<int64_t, int64_t>>> per_gpu;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    const auto& lane = g.lanes[g.lane[n]];
    per_gpu[{lane.rank, lane.device}].emplace_back(tl.start(n), tl.end(n));
  }
  for (auto& [key, iv] : per_gpu) {
    std::sort(iv.begin(), iv.end());
    GpuUsage u;
    u.rank = key.first;
    u.device = key.second;
    u.ops = static_cast<int64_t>(iv.size());
    int64_t cur_s = iv[0].first, cur_e = iv[0].second;
    for (const auto& [s, e] : iv) {
      if (s > cur_e) {
        u.busy_ns += cur_e - cur_s;
        cur_s = s;
      }
      cur_e = std::max(cur_e, e);
    }
    u.busy_ns += cur_e - cur_s;
    u.idle_ns = std::max<int64_t>(0, tl.makespan_ns() - u.busy_ns);
    a.gpus.push_back(u);
  }
  return a;
}

std::string node_category(const Workload& w, NodeId n) {
  const graph::Graph& g = w.graph;
  switch (g.kind[n]) {
    case NodeKind::kKernel: return "kernel";
    case NodeKind::kCommKernel:
    case NodeKind::kCollective: return "nccl";
    case NodeKind::kMemcpy: return "gpu_memcpy";
    case NodeKind::kMemset: return "gpu_memset";
    case NodeKind::kCpuGap: return "cpu_gap";
    default: break;
  }
  const auto& t = w.ranks[g.rank[n]];
  switch (t.events[g.event[n]].kind) {
    case trace::EventKind::kUserAnnotation: return "user_annotation";
    case trace::EventKind::kPythonFunction: return "python_function";
    case trace::EventKind::kRuntime: return "cuda_runtime";
    case trace::EventKind::kDriver: return "cuda_driver";
    case trace::EventKind::kOtherCpu: return "cpu_other";
    default: return "cpu_op";
  }
}

int64_t gpu_ops_on_path(const Workload& w, const Analysis& a) {
  const graph::Graph& g = w.graph;
  std::set<NodeId> seen;
  for (NodeId n : a.critical_path.nodes) {
    if (n < g.num_nodes() && graph::is_gpu(g.kind[n])) seen.insert(n);
  }
  return static_cast<int64_t>(seen.size());
}

std::vector<std::string> import_warnings(const Workload& w) {
  std::vector<std::string> out;
  int64_t bad = 0;
  for (const auto& t : w.ranks) bad += t.stats.error_count();
  if (bad > 0) out.push_back(fmt::format("{} malformed events skipped (see import_stats in --json)", bad));
  for (const trace::RankTrace& t : w.ranks) {
    if (t.stats.outside_profiler_window <= 0) continue;
    std::string example = t.stats.outside_profiler_window_example;
    if (example.rfind("name: ", 0) == 0) example = example.substr(6);
    out.push_back(fmt::format(
        "{}{} events outside the profiler window (or crossing its edge) dropped: the trace has no ProfilerStep, so the step is the "
        "profiler's window (its 'Trace' span){} (outside_profiler_window in import_stats of --json)",
        t.path.empty() ? "" : t.path + ": ", t.stats.outside_profiler_window,
        example.empty() ? "" : "; e.g. " + example));
  }
  return out;
}

LostLaunches lost_launches(const Workload& w) {
  LostLaunches out;
  for (const trace::RankTrace& t : w.ranks) {
    std::set<int64_t> done;
    for (const trace::Event& e : t.events)
      if (trace::is_gpu_op(e.kind) && e.correlation != trace::kNone) done.insert(e.correlation);
    for (const trace::Event& e : t.events) {
      if ((e.kind != trace::EventKind::kRuntime && e.kind != trace::EventKind::kDriver) || e.correlation == trace::kNone)
        continue;
      const trace::RuntimeCall call = trace::classify_runtime_call(t.strings.view(e.name));
      if (!trace::launches_gpu_work(call) || call == trace::RuntimeCall::kMemset) continue;
      ++out.launches;
      if (done.count(e.correlation) != 0) continue;
      if (out.lost++ == 0) out.example = fmt::format("{} (correlation {})", t.strings.view(e.name), e.correlation);
    }
  }
  return out;
}

std::vector<std::string> step_warnings(const Workload& w, const Analysis& a) {
  std::vector<std::string> out = import_warnings(w);
  const trace::RankTrace& first = w.ranks.front();
  if (first.world_size > static_cast<int>(w.ranks.size())) {
    out.push_back(fmt::format("{} of the {} ranks of the run (distributedInfo.world_size) given: the step is "
                              "modelled from these ranks alone, their collectives' waits as recorded",
                              w.ranks.size(), first.world_size));
  }
  // Ranks of one run record the same iteration at about the same time: a different ProfilerStep, or
  // captures far apart (kCaptureGapDoubtS), say the files may come from different runs.
  for (size_t i = 1; i < w.ranks.size() && i < w.steps.size(); ++i) {
    if (w.steps[i] < 0 || w.steps[0] < 0 || w.steps[i] == w.steps[0]) continue;
    out.push_back(fmt::format("{} is ProfilerStep#{}, {} ProfilerStep#{}: the ranks' steps are not one iteration "
                              "(give --step N for the one they share)",
                              w.ranks[i].path, w.steps[i], first.path, w.steps[0]));
    break;
  }
  for (const trace::RankTrace& t : w.ranks) {
    const double apart_s = std::abs(double(t.origin_ns - first.origin_ns)) * 1e-9;
    if (t.origin_ns == 0 || first.origin_ns == 0 || !(apart_s > kCaptureGapDoubtS)) continue;
    out.push_back(fmt::format("{} was captured {:.0f} s from {} (more than {:g} s): traces of one run's step are "
                              "recorded together",
                              t.path, apart_s, first.path, kCaptureGapDoubtS));
    break;
  }
  for (const trace::RankTrace& t : w.ranks) {
    if (t.device_name.empty() || first.device_name.empty() || t.device_name == first.device_name) continue;
    out.push_back(fmt::format("{} ran on {}, {} on {}: traces of one run come from one kind of GPU", t.path,
                              t.device_name, first.path, first.device_name));
    break;
  }
  const LostLaunches ll = lost_launches(w);
  if (ll.lost > 0 && ll.pct() >= kLostLaunchDoubtPct) {
    out.push_back(fmt::format("{} of the step's {} launch calls have no GPU activity in the trace (at least {:g} %), "
                              "e.g. {}: the GPU work they started is missing from the step",
                              ll.lost, ll.launches, kLostLaunchDoubtPct, ll.example));
  }
  if (std::abs(a.replay_error_pct) > kReplayDoubtPct) {
    out.push_back(fmt::format("the replay of the step takes {:+.1f} % the time the trace measured (more than "
                              "{:g} % off): what emo predicts rests on a replay that does not reproduce the step",
                              a.replay_error_pct, kReplayDoubtPct));
  }
  return out;
}

std::vector<std::string> device_warnings(const Workload& w, const std::string& profile_name) {
  // Model numbers as products spell them: "v100", "h100", "mi250", "t4" (a letter or three, then digits,
  // at the start of a word).
  auto models = [](const std::string& name) {
    std::vector<std::string> found;
    std::string low;
    for (char c : name) low.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    for (size_t i = 0; i < low.size();) {
      size_t j = i;
      while (j < low.size() && std::isalpha(static_cast<unsigned char>(low[j]))) ++j;
      size_t k = j;
      while (k < low.size() && std::isdigit(static_cast<unsigned char>(low[k]))) ++k;
      const bool word_start = i == 0 || !std::isalnum(static_cast<unsigned char>(low[i - 1]));
      if (word_start && j > i && j - i <= 3 && k > j) found.push_back(low.substr(i, k - i));  // "mi250x": mi250
      i = k > i ? k : i + 1;
    }
    return found;
  };
  const std::vector<std::string> wanted = models(profile_name);
  std::vector<std::string> out;
  for (const trace::RankTrace& t : w.ranks) {
    const std::vector<std::string> got = models(t.device_name);
    if (got.empty() || wanted.empty() || std::find(got.begin(), got.end(), wanted.front()) != got.end()) continue;
    out.push_back(fmt::format("{}was recorded on {}, not the {} of --device: its GPU times are taken as {}'s",
                              t.path.empty() ? "the trace " : t.path + " ", t.device_name, profile_name, profile_name));
    break;
  }
  return out;
}

namespace {

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }
double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

}  // namespace

nlohmann::json to_json(const Workload& w, const Analysis& a, bool per_kernel) {
  const graph::Graph& g = w.graph;
  const int64_t begin = g.measured_begin_ns();
  using nlohmann::json;
  json j;
  j["events"] = w.events;
  j["nodes"] = g.num_nodes();
  j["edges"] = g.edges.size();
  json ranks = json::array();
  for (size_t r = 0; r < w.ranks.size(); ++r) {
    ranks.push_back({{"rank", g.rank_ids[r]},
                     {"file", w.ranks[r].path},
                     {"device", w.ranks[r].device_name},
                     {"step", w.steps[r]},
                     {"events", w.ranks[r].events.size()},
                     {"clock_offset_us", round3(us(g.rank_offset_ns[r]))}});
  }
  j["ranks"] = ranks;
  j["measured_span_us"] = round3(us(a.measured_span_ns));
  j["replayed_span_us"] = round3(us(a.replayed_span_ns));
  j["replay_error_pct"] = std::round(a.replay_error_pct * 1e4) / 1e4;
  json breakdown = json::object();
  for (const auto& part : a.critical_path.breakdown) breakdown[part.category] = round3(us(part.ns));
  // GPU ops on the path: all of them for ordinary steps; the longest kMaxPathOps
  // for huge ones (the full path is in --critical-path-csv).
  constexpr size_t kMaxPathOps = 1000;
  std::vector<NodeId> on_path;
  for (NodeId n : a.critical_path.nodes) {
    if (graph::is_gpu(g.kind[n]) || g.kind[n] == NodeKind::kCollective) on_path.push_back(n);
  }
  const size_t path_ops = on_path.size();
  if (on_path.size() > kMaxPathOps) {
    std::stable_sort(on_path.begin(), on_path.end(),
                     [&](NodeId x, NodeId y) { return g.dur_ns[x] > g.dur_ns[y]; });
    on_path.resize(kMaxPathOps);
    std::sort(on_path.begin(), on_path.end());
  }
  json path = json::array();
  for (NodeId n : on_path) {
    path.push_back({{"name", std::string(g.strings.view(g.name[n]))},
                    {"kind", graph::to_string(g.kind[n])},
                    {"rank", g.rank_ids[g.rank[n]]},
                    {"start_us", round3(us(g.meas_start_ns[n] - begin))},
                    {"dur_us", round3(us(g.dur_ns[n]))}});
  }
  j["critical_path"] = {{"length_us", round3(us(a.critical_path.length_ns))},
                        {"breakdown", breakdown},
                        {"nodes", a.critical_path.nodes.size()},
                        {"gpu_ops_total", path_ops},
                        {"gpu_ops_on_path", gpu_ops_on_path(w, a)},
                        {"gpu_ops", path}};
  json gpus = json::array();
  for (const auto& u : a.gpus) {
    gpus.push_back({{"rank", g.rank_ids[u.rank]},
                    {"device", u.device},
                    {"ops", u.ops},
                    {"busy_us", round3(us(u.busy_ns))},
                    {"idle_us", round3(us(u.idle_ns))}});
  }
  j["gpus"] = gpus;
  // Slack of GPU ops: how many are critical, and a histogram.
  int64_t ops = 0, critical = 0;
  std::vector<int64_t> buckets(6, 0);  // 0, <10µs, <100µs, <1ms, <10ms, more
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    ++ops;
    int64_t s = a.slack_ns[n];
    if (s == 0) ++critical;
    size_t b = s == 0 ? 0 : s < 10'000 ? 1 : s < 100'000 ? 2 : s < 1'000'000 ? 3 : s < 10'000'000 ? 4 : 5;
    ++buckets[b];
  }
  // gpu_ops_on_critical_path is the historical name of the zero-slack count
  // (kept for readers of older output); gpu_ops_with_no_slack says what it is.
  // The ops on the extracted path are critical_path.gpu_ops_on_path.
  j["slack"] = {{"gpu_ops", ops},
                {"gpu_ops_on_critical_path", critical},
                {"gpu_ops_with_no_slack", critical},
                {"histogram", {{"0", buckets[0]}, {"<10us", buckets[1]}, {"<100us", buckets[2]},
                               {"<1ms", buckets[3]}, {"<10ms", buckets[4]}, {">=10ms", buckets[5]}}}};
  json stats = json::array();
  int64_t outside_window = 0;
  for (const auto& t : w.ranks) outside_window += t.stats.outside_profiler_window;
  for (size_t r = 0; r < w.ranks.size(); ++r) {
    for (const auto& row : w.ranks[r].stats.rows) {
      stats.push_back({{"rank", g.rank_ids[r]}, {"what", row.what}, {"count", row.count},
                       {"example", row.example}, {"error", row.is_error}});
    }
  }
  const auto& bs = g.stats;
  j["import_stats"] = {{"events", stats},
                       {"gpu_ops_without_launch", bs.gpu_ops_without_launch},
                       {"edges_dropped_inconsistent", bs.edges_dropped_inconsistent},
                       {"collectives_matched", bs.collectives_matched},
                       {"collective_kernels_unmatched", bs.collectives_unmatched},
                       {"cross_stream_edges_from_sync_events", bs.cross_stream_from_sync_events},
                       {"cross_stream_edges_from_runtime_pairs", bs.cross_stream_from_runtime_pairs},
                       {"cross_stream_edges_inferred", bs.cross_stream_inferred},
                       {"outside_profiler_window", outside_window},
                       // Host waits (docs/replay.md): threads that only wait, left out of the
                       // step's span and critical path; blocked-wait frames on working threads;
                       // host polling loops made GPU -> CPU waits.
                       {"waiting_threads", bs.waiting_threads},
                       {"waiting_thread_nodes", bs.waiting_thread_nodes},
                       {"waiting_thread_span_us", round3(us(bs.waiting_thread_span_ns))},
                       {"waiting_thread_example", bs.waiting_thread_example},
                       {"wait_frames", bs.wait_frames},
                       {"wait_frame_us", round3(us(bs.wait_frame_ns))},
                       {"wait_frame_example", bs.wait_frame_example},
                       {"poll_query_loops", bs.poll_query_loops},
                       {"poll_ranges", bs.poll_ranges},
                       {"poll_wait_us", round3(us(bs.poll_wait_ns))},
                       {"poll_example", bs.poll_example},
                       {"notes", bs.notes}};
  if (per_kernel) {
    json ks = json::array();
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      if (!graph::is_gpu(g.kind[n])) continue;
      ks.push_back({{"name", std::string(g.strings.view(g.name[n]))},
                    {"rank", g.rank_ids[g.rank[n]]},
                    {"stream", g.lanes[g.lane[n]].stream},
                    {"start_us", round3(us(g.meas_start_ns[n] - begin))},
                    {"dur_us", round3(us(g.meas_end_ns[n] - g.meas_start_ns[n]))},
                    {"slack_us", round3(us(a.slack_ns[n]))}});
    }
    j["kernels"] = ks;
  }
  return j;
}

std::string to_text(const Workload& w, const Analysis& a) {
  const graph::Graph& g = w.graph;
  std::string s;
  s += fmt::format("{} rank(s), {} events, {} nodes, {} edges\n", w.ranks.size(), w.events, g.num_nodes(),
                   g.edges.size());
  s += fmt::format("step span: measured {:.3f} ms, replayed {:.3f} ms (error {:+.3f} %)\n",
                   us(a.measured_span_ns) / 1000, us(a.replayed_span_ns) / 1000, a.replay_error_pct);
  s += "critical path:";
  for (const auto& part : a.critical_path.breakdown) {
    if (part.ns > 0) {
      s += fmt::format(" {} {:.1f}%", part.category,
                       100.0 * static_cast<double>(part.ns) / static_cast<double>(std::max<int64_t>(1, a.critical_path.length_ns)));
    }
  }
  s += "\n";
  for (const auto& u : a.gpus) {
    s += fmt::format("rank {} gpu {}: {} ops, busy {:.3f} ms, idle {:.3f} ms\n", g.rank_ids[u.rank], u.device,
                     u.ops, us(u.busy_ns) / 1000, us(u.idle_ns) / 1000);
  }
  int64_t ops = 0, no_slack = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    ++ops;
    no_slack += a.slack_ns[n] == 0;
  }
  // Two different counts: the ops the extracted path runs through, and the ops
  // that cannot grow without moving the step's end (a superset: an op that
  // ends exactly when a blocking CPU call returns has no slack, but the path
  // goes through the CPU call).
  s += fmt::format("GPU ops on the critical path: {} of {}\n", gpu_ops_on_path(w, a), ops);
  s += fmt::format("GPU ops with no slack: {} of {}\n", no_slack, ops);
  if (g.stats.gpu_ops_without_launch > 0) {
    s += fmt::format("note: {} GPU ops have no launch call in the step\n", g.stats.gpu_ops_without_launch);
  }
  const graph::BuildStats& bs = g.stats;
  if (bs.waiting_threads > 0) {
    s += fmt::format(
        "note: {} thread(s) that launch no GPU work (only wait) left out of the step's span and critical path"
        "{}; e.g. {} (waiting_threads in import_stats of --json)\n",
        bs.waiting_threads,
        bs.waiting_thread_span_ns > 0 ? fmt::format(", {:.3f} ms of span", us(bs.waiting_thread_span_ns) / 1000) : "",
        bs.waiting_thread_example);
  }
  if (bs.wait_frames > 0) {
    s += fmt::format("note: {} blocked-wait frame(s) on working threads, {:.3f} ms, counted as waits, not CPU work; "
                     "e.g. {}\n",
                     bs.wait_frames, us(bs.wait_frame_ns) / 1000, bs.wait_frame_example);
  }
  if (bs.poll_query_loops + bs.poll_ranges > 0) {
    s += fmt::format("note: {} host polling loop(s) ({} of event/stream queries, {} annotated ranges) wait on the GPU "
                     "op they poll, {:.3f} ms; e.g. {}\n",
                     bs.poll_query_loops + bs.poll_ranges, bs.poll_query_loops, bs.poll_ranges,
                     us(bs.poll_wait_ns) / 1000, bs.poll_example);
  }
  if (g.stats.edges_dropped_inconsistent > 0) {
    s += fmt::format(
        "note: {} dependencies were left out: the trace's own times contradict them (e.g. a kernel that "
        "starts before its launch; see import_stats in --json)\n",
        g.stats.edges_dropped_inconsistent);
  }
  return s;
}

namespace {
std::string csv_quote(std::string_view text) {
  std::string q = "\"";
  for (char c : text) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + '"';
}
}  // namespace

std::string critical_path_csv(const Workload& w, const Analysis& a) {
  const graph::Graph& g = w.graph;
  std::string s = "segment,kind,rank,name,start_us,dur_us\n";
  const int64_t begin = g.measured_begin_ns();
  for (const auto& seg : a.critical_path.segments) {
    const NodeId n = seg.is_edge ? seg.from : seg.node;
    std::string name(g.strings.view(g.name[n]));
    if (seg.is_edge) name += " -> " + std::string(g.strings.view(g.name[seg.node]));
    s += fmt::format("{},{},{},{},{:.3f},{:.3f}\n", seg.is_edge ? "edge" : "node",
                     seg.is_edge ? graph::to_string(seg.edge) : graph::to_string(g.kind[n]), g.rank_ids[g.rank[n]],
                     csv_quote(name), us(seg.start_ns - begin), us(seg.ns));
  }
  return s;
}

std::string kernels_csv(const Workload& w, const Analysis& a) {
  const graph::Graph& g = w.graph;
  std::string s = "rank,stream,name,start_us,dur_us,slack_us,critical\n";
  const int64_t begin = g.measured_begin_ns();
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    s += fmt::format("{},{},{},{:.3f},{:.3f},{:.3f},{}\n", g.rank_ids[g.rank[n]], g.lanes[g.lane[n]].stream,
                     csv_quote(g.strings.view(g.name[n])), us(g.meas_start_ns[n] - begin),
                     us(g.meas_end_ns[n] - g.meas_start_ns[n]), us(a.slack_ns[n]), a.slack_ns[n] == 0 ? 1 : 0);
  }
  return s;
}

}  // namespace emo::analysis
