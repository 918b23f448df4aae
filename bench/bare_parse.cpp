// The floor for reading a trace: load the file (inflate it, for a .gz) and build simdjson's DOM of it,
// touching nothing. scripts/bench_analyze.py compares `emo analyze` against this.
// Usage: bare_parse FILE  -> prints "seconds bytes" (best of the runs given by EMO_BENCH_REPS; bytes of
// JSON), and for a gzip'd file a third field: the best time of the inflating alone, part of the first.
// A .gz inflates with libdeflate where emo's reader uses it (the fastest whole-buffer inflater), else zlib.
#include <simdjson.h>
#include <zlib.h>

#ifdef EMO_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string_view>
#include <utility>

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 18 && static_cast<unsigned char>(bytes[0]) == 0x1f && static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// The text of one gzip member (its size from the trailer); false where it does not inflate.
bool inflate(std::string_view gz, simdjson::padded_string& out) {
  uint32_t isize = 0;
  std::memcpy(&isize, gz.data() + gz.size() - 4, 4);  // little-endian, as every machine this runs on
  out = simdjson::padded_string(isize);
#ifdef EMO_HAVE_LIBDEFLATE
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  size_t got = 0;
  const auto rc = libdeflate_gzip_decompress(d, gz.data(), gz.size(), out.data(), out.size(), &got);
  libdeflate_free_decompressor(d);
  return rc == LIBDEFLATE_SUCCESS && got == isize;
#else
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return false;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = ::inflate(&zs, Z_FINISH);
  inflateEnd(&zs);
  return rc == Z_STREAM_END && zs.total_out == isize;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bare_parse FILE.json[.gz]\n");
    return 2;
  }
  const char* reps_env = std::getenv("EMO_BENCH_REPS");
  int reps = reps_env ? std::atoi(reps_env) : 1;
  double best = 1e300, best_inflate = 1e300;
  size_t bytes = 0;
  bool gz = false;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    simdjson::padded_string json;
    if (simdjson::padded_string::load(argv[1]).get(json)) {
      std::fprintf(stderr, "error: %s: cannot read\n", argv[1]);
      return 1;
    }
    gz = is_gzip(std::string_view(json.data(), json.size()));
    if (gz) {
      auto t1 = std::chrono::steady_clock::now();
      const simdjson::padded_string raw = std::move(json);
      if (!inflate(std::string_view(raw.data(), raw.size()), json)) {
        std::fprintf(stderr, "error: %s: does not inflate (one gzip member under 4 GiB)\n", argv[1]);
        return 1;
      }
      best_inflate = std::min(best_inflate, since(t1));
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(json).get(doc)) {
      std::fprintf(stderr, "error: %s: not valid JSON\n", argv[1]);
      return 1;
    }
    bytes = json.size();
    best = std::min(best, since(t0));
  }
  if (gz) {
    std::printf("%.6f %zu %.6f\n", best, bytes, best_inflate);
  } else {
    std::printf("%.6f %zu\n", best, bytes);
  }
  return 0;
}
