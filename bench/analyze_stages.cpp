// Where `emo analyze`'s time goes on one trace, stage by stage, in one process: read (load and
// gunzip, parse into the event tables), step selection and graph, replay (critical path, slack,
// GPU use), JSON out. Each stage is timed on its own, the best of the runs; the last line gives
// each stage's share of their sum. A process's start (dynamic loading, the CLI's set-up) and its
// first-touch page faults are not in here: bench/peers.py times the whole process.
// Usage: analyze_stages TRACE [RUNS]  (default 5 runs)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/trace/trace.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: analyze_stages TRACE [RUNS]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int runs = argc == 3 ? std::max(1, std::atoi(argv[2])) : 5;
  const char* names[] = {"read", "step+graph", "replay", "json"};
  std::vector<double> best(4, 1e300);
  size_t events = 0, nodes = 0, bytes = 0;
  for (int i = 0; i < runs; ++i) {
    double t0 = now_s();
    auto t = emo::trace::read_trace(path);
    if (!t.ok()) {
      std::fprintf(stderr, "error: %s\n", t.error().message().c_str());
      return 1;
    }
    double t1 = now_s();
    events = t->events.size();
    std::vector<emo::trace::RankTrace> ranks;
    ranks.push_back(std::move(t).value());
    auto w = emo::analysis::assemble(std::move(ranks), {});
    if (!w.ok()) {
      std::fprintf(stderr, "error: %s\n", w.error().message().c_str());
      return 1;
    }
    double t2 = now_s();
    const emo::analysis::Analysis a = emo::analysis::analyze(*w);
    double t3 = now_s();
    const std::string out = emo::analysis::to_json(*w, a, false).dump(1);
    double t4 = now_s();
    nodes = w->graph.num_nodes();
    bytes = out.size();
    const double dt[] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3};
    for (int s = 0; s < 4; ++s) best[s] = std::min(best[s], dt[s]);
  }
  double sum = 0;
  for (double b : best) sum += b;
  std::printf("%s: %zu events read, %zu nodes in the step's graph, %zu bytes of JSON; best of %d runs\n",
              path.c_str(), events, nodes, bytes, runs);
  for (int s = 0; s < 4; ++s) std::printf("%-11s %9.3f ms\n", names[s], best[s] * 1e3);
  std::printf("%-11s %9.3f ms\nshares:", "sum", sum * 1e3);
  for (int s = 0; s < 4; ++s) std::printf(" %s %.0f %%", names[s], 100.0 * best[s] / sum);
  std::printf("\n");
  return 0;
}
