// The graph built per process (include/emo/graph/part.h) and the distributed replay
// (include/emo/replay/distributed.h) against one process's build_graph and Replayer on the same step, in
// one run: a data-parallel job of N ranks (emo synth train-dp); P processes (threads over
// dist::local_world) each build the part of their ranks (graph::build_part) and replay its shard (forward
// and slack). Prints, per P, the median time of the build and of one replay-and-slack over the reps, their
// ratios to one process's, the largest part's share of the nodes, and what the replay's exchange took:
// batches sent and waits (per process, the most), and the times each process reads from others; then the
// critical path walked over the processes (replay::critical_path_distributed) against Replayer's, and how
// often the path's consecutive nodes lie with different processes. Exits 1 where any answer differs.
//   dist_replay_bench [--ranks N] [--layers L] [--reps R] [--procs 1,2,4]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "emo/analysis/analysis.h"
#include "emo/dist/dist.h"
#include "emo/graph/part.h"
#include "emo/replay/distributed.h"
#include "emo/replay/replay.h"
#include "emo/synth/synth.h"

namespace {

using emo::bench::median;
using emo::bench::seconds_since;

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "error: %s\nusage: dist_replay_bench [--ranks N] [--layers L] [--reps R] [--procs 1,2,4]\n", why);
  std::exit(1);
}

int positive(const char* s, const char* flag) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 1 || v > 1 << 20) usage((std::string(flag) + " takes a positive integer").c_str());
  return int(v);
}

// Runs `fn(process, its comm)` on P threads over a fresh dist::local_world; the seconds it took. Exits
// with `failed` where a process's fn returns false.
template <class Fn>
double on_threads(int P, const char* failed, Fn&& fn) {
  auto comms = emo::dist::local_world(P);
  std::vector<int> ok(static_cast<size_t>(P), 0);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int p = 0; p < P; ++p) {
    threads.emplace_back([&, p] { ok[size_t(p)] = fn(size_t(p), *comms[size_t(p)]) ? 1 : 0; });
  }
  for (auto& t : threads) t.join();
  const double t = seconds_since(t0);
  for (int v : ok) {
    if (!v) usage(failed);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 64, layers = 4, reps = 5;
  std::vector<int> procs{1, 2};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    if (a == "--ranks") ranks = positive(argv[++i], "--ranks");
    else if (a == "--layers") layers = positive(argv[++i], "--layers");
    else if (a == "--reps") reps = positive(argv[++i], "--reps");
    else if (a == "--procs") {
      procs.clear();
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        procs.push_back(positive(list.substr(at, comma - at).c_str(), "--procs"));
        at = comma + 1;
      }
    } else usage(("unknown argument " + a).c_str());
  }
  emo::synth::Options o;
  o.workload = emo::synth::Workload::kTrainDP;
  o.ranks = ranks;
  o.layers = layers;
  o.steps = 1;
  std::vector<emo::trace::RankTrace> traces;
  for (int r = 0; r < ranks; ++r) {
    auto t = emo::trace::parse_trace(emo::synth::render_trace(o, r), "rank" + std::to_string(r) + ".json");
    if (!t.ok()) usage(t.error().message().c_str());
    traces.push_back(std::move(t).value());
  }
  auto w = emo::analysis::assemble(std::move(traces), {});
  if (!w.ok()) usage(w.error().message().c_str());
  const emo::graph::Graph& g = w->graph;
  std::printf("ranks %d, nodes %zu, edges %zu, collectives matched %lld\n", ranks, g.num_nodes(), g.edges.size(),
              static_cast<long long>(g.stats.collectives_matched));

  std::vector<double> whole_build;
  for (int k = 0; k < reps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    auto again = emo::graph::build_graph(w->ranks);
    whole_build.push_back(seconds_since(t0));
    if (!again.ok() || again->num_nodes() != g.num_nodes()) usage("the graph built again differs");
  }
  const double build_base = median(whole_build);
  emo::replay::Replayer r(g);
  emo::replay::Timeline tl;
  std::vector<int64_t> slack;
  std::vector<double> one;
  for (int k = 0; k < reps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    r.run(tl);
    r.slack({}, tl, slack);
    one.push_back(seconds_since(t0));
  }
  const double base = median(one);
  std::printf("one process: build_graph %.3f ms, Replayer run + slack %.3f ms\n", build_base * 1e3, base * 1e3);
  emo::replay::CriticalPath path;
  std::vector<double> one_path;
  for (int k = 0; k < reps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    path = r.critical_path({}, tl);
    one_path.push_back(seconds_since(t0));
  }
  const double path_base = median(one_path);
  std::printf("one process: critical path %.3f ms (%zu nodes)\n", path_base * 1e3, path.nodes.size());
  for (int P : procs) {
    // Each process's ranks, moved to it for the builds and back after.
    std::vector<std::vector<emo::trace::RankTrace>> slices(static_cast<size_t>(P));
    for (int p = 0; p < P; ++p) {
      const auto [b, e] = emo::dist::shard(w->ranks.size(), p, P);
      for (size_t i = b; i < e; ++i) slices[size_t(p)].push_back(std::move(w->ranks[i]));
    }
    std::vector<emo::graph::GraphPart> parts(static_cast<size_t>(P));
    std::vector<double> build_times;
    for (int k = 0; k < reps; ++k) {
      build_times.push_back(on_threads(P, "a process's build failed", [&](size_t i, emo::dist::Comm& comm) {
        auto part = emo::graph::build_part(slices[i], comm);
        if (part.ok()) parts[i] = std::move(part).value();
        return part.ok();
      }));
    }
    size_t r_at = 0;
    for (auto& slice : slices) {
      for (auto& t : slice) w->ranks[r_at++] = std::move(t);
    }
    std::vector<emo::replay::Shard> shards;
    size_t imports = 0, largest = 0;
    for (int p = 0; p < P; ++p) {
      shards.push_back(emo::replay::make_shard(parts[size_t(p)]));
      imports = std::max(imports, shards.back().forward.imports.size());
      largest = std::max(largest, parts[size_t(p)].graph.num_nodes());
    }
    const double bt = median(build_times);
    std::printf("P = %d: build_part %.3f ms, %.2fx one process's build_graph; largest part %zu nodes (%.0f %%)\n", P,
                bt * 1e3, bt / build_base, largest, 100.0 * double(largest) / double(g.num_nodes()));
    std::vector<double> times;
    int64_t sent = 0, waits = 0;
    bool same = true;
    // The timelines are kept from one replay to the next, as a process that replays many times keeps them.
    std::vector<emo::replay::ShardTimeline> tls(static_cast<size_t>(P));
    std::vector<std::vector<int64_t>> slacks(static_cast<size_t>(P));
    for (int k = 0; k < reps; ++k) {
      times.push_back(on_threads(P, "the distributed replay failed", [&](size_t i, emo::dist::Comm& comm) {
        return emo::replay::run_distributed(shards[i], {}, comm, tls[i]).ok() &&
               emo::replay::slack_distributed(shards[i], {}, tls[i], comm, slacks[i]).ok();
      }));
      for (int p = 0; p < P; ++p) {
        const size_t i = static_cast<size_t>(p);
        sent = std::max(sent, tls[i].messages_sent);
        waits = std::max(waits, tls[i].waits);
        for (uint32_t lp = 0; lp < shards[i].num_points(); ++lp) same &= tls[i].t_ns[lp] == tl.t_ns[shards[i].global_point(lp)];
        for (uint32_t n = 0; n < shards[i].num_nodes(); ++n) same &= slacks[i][n] == slack[shards[i].nodes[n]];
        same &= tls[i].end_ns == tl.end_ns && tls[i].begin_ns == tl.begin_ns;
      }
    }
    const double t = median(times);
    std::printf("P = %d: replay %.3f ms, %.2fx one process; per process at most %lld batches sent, %lld waits (forward), "
                "%zu times read from others; same answer: %s\n",
                P, t * 1e3, t / base, static_cast<long long>(sent), static_cast<long long>(waits), imports,
                same ? "yes" : "NO");
    if (!same) return 1;
    // The critical path walked over the processes, from the last replay's timelines.
    std::vector<double> path_times;
    std::vector<emo::replay::CriticalPath> paths(static_cast<size_t>(P));
    for (int k = 0; k < reps; ++k) {
      path_times.push_back(on_threads(P, "the distributed critical path failed", [&](size_t i, emo::dist::Comm& comm) {
        auto got = emo::replay::critical_path_distributed(shards[i], {}, tls[i], comm);
        if (got.ok()) paths[i] = std::move(got).value();
        return got.ok();
      }));
      for (const auto& got : paths) same &= got == path;
    }
    // How many times the walk went from one process to another.
    std::vector<int> holder(g.num_nodes(), 0);
    for (int p = 0; p < P; ++p) {
      for (emo::graph::NodeId n : shards[size_t(p)].nodes) holder[n] = p;
    }
    int crossings = 0;
    for (size_t k = 1; k < path.nodes.size(); ++k) crossings += holder[path.nodes[k]] != holder[path.nodes[k - 1]];
    const double pt = median(path_times);
    std::printf("P = %d: critical path %.3f ms, %.2fx one process; the walk crossed processes %d times; same path: %s\n",
                P, pt * 1e3, pt / path_base, crossings, same ? "yes" : "NO");
    if (!same) return 1;
  }
  return 0;
}
