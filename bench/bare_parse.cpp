// The floor for reading a trace: load the file and build simdjson's DOM of it,
// touching nothing. bench_analyze.py compares `emo analyze` against this.
// Usage: bare_parse FILE  -> prints "seconds bytes" (best of the runs given by EMO_BENCH_REPS).
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bare_parse FILE.json\n");
    return 2;
  }
  const char* reps_env = std::getenv("EMO_BENCH_REPS");
  int reps = reps_env ? std::atoi(reps_env) : 1;
  double best = 1e300;
  size_t bytes = 0;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    simdjson::padded_string json;
    if (simdjson::padded_string::load(argv[1]).get(json)) {
      std::fprintf(stderr, "error: %s: cannot read\n", argv[1]);
      return 1;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(json).get(doc)) {
      std::fprintf(stderr, "error: %s: not valid JSON\n", argv[1]);
      return 1;
    }
    bytes = json.size();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < best) best = s;
  }
  std::printf("%.6f %zu\n", best, bytes);
  return 0;
}
