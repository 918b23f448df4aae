// The distributed replay (include/emo/replay/distributed.h) against one process's Replayer on the same
// step, in one run: a data-parallel job of N ranks (emo synth train-dp), its graph cut into P shards by
// rank, each shard's forward replay and slack on its own thread over dist::local_world. Prints, per P, the
// median time of one replay-and-slack over the reps, its ratio to one process's, and what the exchange
// took: batches sent and waits (per process, the most), and the times each process reads from others.
//   dist_replay_bench [--ranks N] [--layers L] [--reps R] [--procs 1,2,4]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/dist/dist.h"
#include "emo/replay/distributed.h"
#include "emo/replay/replay.h"
#include "emo/synth/synth.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

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
  std::printf("one process (Replayer run + slack): %.3f ms\n", base * 1e3);
  for (int P : procs) {
    const auto owner = emo::replay::owners(g, P);
    std::vector<emo::replay::Shard> shards;
    size_t imports = 0;
    for (int p = 0; p < P; ++p) {
      shards.push_back(emo::replay::make_shard(g, owner, p, P));
      imports = std::max(imports, shards.back().forward.imports.size());
    }
    std::vector<double> times;
    int64_t sent = 0, waits = 0;
    bool same = true;
    // The timelines are kept from one replay to the next, as a process that replays many times keeps them.
    std::vector<emo::replay::ShardTimeline> tls(static_cast<size_t>(P));
    std::vector<std::vector<int64_t>> slacks(static_cast<size_t>(P));
    for (int k = 0; k < reps; ++k) {
      auto comms = emo::dist::local_world(P);
      std::vector<int> ok(static_cast<size_t>(P), 0);
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> threads;
      for (int p = 0; p < P; ++p) {
        threads.emplace_back([&, p] {
          const size_t i = static_cast<size_t>(p);
          ok[i] = emo::replay::run_distributed(shards[i], {}, *comms[i], tls[i]).ok() &&
                  emo::replay::slack_distributed(shards[i], {}, tls[i], *comms[i], slacks[i]).ok();
        });
      }
      for (auto& t : threads) t.join();
      times.push_back(seconds_since(t0));
      for (int p = 0; p < P; ++p) {
        const size_t i = static_cast<size_t>(p);
        if (!ok[i]) usage("the distributed replay failed");
        sent = std::max(sent, tls[i].messages_sent);
        waits = std::max(waits, tls[i].waits);
        for (uint32_t lp = 0; lp < shards[i].num_points(); ++lp) same &= tls[i].t_ns[lp] == tl.t_ns[shards[i].global_point(lp)];
        for (uint32_t n = 0; n < shards[i].num_nodes(); ++n) same &= slacks[i][n] == slack[shards[i].nodes[n]];
        same &= tls[i].end_ns == tl.end_ns && tls[i].begin_ns == tl.begin_ns;
      }
    }
    const double t = median(times);
    std::printf("P = %d: %.3f ms, %.2fx one process; per process at most %lld batches sent, %lld waits (forward), "
                "%zu times read from others; same answer: %s\n",
                P, t * 1e3, t / base, static_cast<long long>(sent), static_cast<long long>(waits), imports,
                same ? "yes" : "NO");
    if (!same) return 1;
  }
  return 0;
}
