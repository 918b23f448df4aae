// Reads one rank's Kineto (PyTorch profiler) trace, .json or .json.gz, into
// the RankTrace tables. The file is loaded (inflated) into one padded buffer; a
// structural pre-scan splits traceEvents into ~1 MB chunks that simdjson On
// Demand walks in place, turning each complete event into one compact Event
// row. Malformed events are counted with an example; only a broken file is fatal.
#include <simdjson.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#if EMO_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "detail.h"
#include "emo/base/comm_kernels.h"
#include "emo/base/parallel.h"
#include "emo/trace/trace.h"

#if EMO_TRACE_MAP_BUFFERS
#include <sys/mman.h>
#endif

namespace emo::trace {

void ImportStats::add(std::string_view what, std::string_view example, bool is_error) {
  for (ImportStat& r : rows) {
    if (r.what == what && r.is_error == is_error) {
      ++r.count;
      return;
    }
  }
  rows.push_back(ImportStat{std::string(what), 1, std::string(example), is_error});
}

int64_t ImportStats::error_count() const {
  int64_t n = 0;
  for (const ImportStat& r : rows) {
    if (r.is_error) n += r.count;
  }
  return n;
}

namespace {

namespace od = simdjson::ondemand;
using detail::Category;
using detail::kNpos;
using detail::Scanner;
using detail::ScanStatus;

// Chunk of traceEvents handed to simdjson at once: big enough that per-chunk
// setup vanishes, small enough that its structural index stays in cache. The
// fuzz build makes it tiny so that small inputs cross chunk boundaries.
#ifndef EMO_TRACE_CHUNK_BYTES
#define EMO_TRACE_CHUNK_BYTES (size_t{1} << 20)
#endif
constexpr size_t kChunkBytes = EMO_TRACE_CHUNK_BYTES;
constexpr size_t kExampleChars = 200;
// |ts| and dur beyond 3e18 ns (µs since 1970 up to year 2065) are rejected:
// then ts - min_ts <= 6e18 and that plus dur stays below INT64_MAX, so later
// stages may add ts_ns + dur_ns without overflow.
constexpr int64_t kMaxAbsNs = 3'000'000'000'000'000'000;
// Non-numeric pid/tid strings ("Spans") get ids far from real ones: base + string id.
constexpr int64_t kSyntheticIdBase = std::numeric_limits<int64_t>::min() / 2;
// Newer Kineto puts "Stream Sync" records on tid = stream + 1000000.
constexpr int64_t kSyncTidOffset = 1000000;

// ---- loading ---------------------------------------------------------------

// The text buffer, followed by simdjson's padding. A big one is mapped
// directly, 2 MiB-aligned, with transparent huge pages advised: first-touching
// 55 MB in 4 KiB pages costs more page faults than simdjson spends parsing it
// (measured here: ~90 ms against ~20 ms with huge pages). Small ones, and all
// under AddressSanitizer (which does not watch mmap'd memory), use malloc.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : p_(o.p_), size_(o.size_), cap_(o.cap_), map_len_(o.map_len_) {
    o.p_ = nullptr;
    o.size_ = o.cap_ = o.map_len_ = 0;
  }
  ~Buffer() { release(); }

  // Room for n bytes plus padding; false when out of memory.
  bool reserve(size_t n) {
    if (p_ != nullptr && n <= cap_) return true;
    const size_t bytes = n + simdjson::SIMDJSON_PADDING;
#if EMO_TRACE_MAP_BUFFERS
    if (bytes >= kMapBytes) return map(bytes);
#endif
    if (map_len_ != 0) return false;  // never shrinks back to malloc
    void* q = std::realloc(p_, bytes);
    if (q == nullptr) return false;
    p_ = static_cast<char*>(q);
    cap_ = n;
    return true;
  }
  char* data() { return p_; }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  // Bytes simdjson may read from data(): the text and its padding.
  size_t allocated() const { return cap_ + simdjson::SIMDJSON_PADDING; }
  void set_size(size_t n) {
    size_ = n;
    std::memset(p_ + n, 0, simdjson::SIMDJSON_PADDING);
  }
  void release() {
#if EMO_TRACE_MAP_BUFFERS
    if (map_len_ != 0) {
      munmap(p_, map_len_);
    } else {
      std::free(p_);
    }
#else
    std::free(p_);
#endif
    p_ = nullptr;
    size_ = cap_ = map_len_ = 0;
  }

 private:
#if EMO_TRACE_MAP_BUFFERS
  static constexpr size_t kHuge = size_t{2} << 20;
  static constexpr size_t kMapBytes = size_t{4} << 20;

  // A fresh 2 MiB-aligned mapping; the old text is copied over (growth is
  // rare: only gzip files whose size trailer is off).
  bool map(size_t bytes) {
    const size_t len = (bytes + kHuge - 1) / kHuge * kHuge;
    void* m = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    const auto raw = reinterpret_cast<uintptr_t>(m);
    const uintptr_t aligned = (raw + kHuge - 1) / kHuge * kHuge;
    const size_t head = aligned - raw;
    if (head != 0) munmap(m, head);
    if (kHuge - head != 0) munmap(reinterpret_cast<char*>(aligned) + len, kHuge - head);
    char* q = reinterpret_cast<char*>(aligned);
    madvise(q, len, MADV_HUGEPAGE);  // advice only: failure just means 4 KiB pages
    if (p_ != nullptr) {
      // All of the old capacity: while inflating, size_ is not yet set.
      std::memcpy(q, p_, cap_);
      const size_t keep = size_;
      release();
      size_ = keep;
    }
    p_ = q;
    map_len_ = len;
    cap_ = len - simdjson::SIMDJSON_PADDING;
    return true;
  }
#endif

  char* p_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
  size_t map_len_ = 0;  // > 0: p_ is an mmap'd region of this length
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

Error read_error(const std::string& path, int err) {
  return make_error(path, std::string("cannot read: ") + std::strerror(err));
}

Result<Buffer> load_plain(const std::string& path, std::FILE* f, size_t size) {
  Buffer buf;
  if (!buf.reserve(size)) return make_error(path, "out of memory reading the file");
  size_t got = std::fread(buf.data(), 1, size, f);
  if (got != size && std::ferror(f)) return read_error(path, errno);
  buf.set_size(got);
  return buf;
}

#if EMO_HAVE_LIBDEFLATE
// The fast path: the whole compressed file in memory, libdeflate inflating it
// into `buf` (already sized by the trailer) in one call per gzip member, about
// twice zlib's speed. False, with `buf` and `f`'s position unspecified, where
// zlib should take over: a size trailer that is off (a member past 4 GiB, or
// several members), and every damaged file, so that the zlib path alone says
// what is wrong with one.
bool inflate_whole(std::FILE* f, size_t file_size, Buffer& buf) {
  std::unique_ptr<unsigned char[]> in(new (std::nothrow) unsigned char[file_size]);
  if (!in || std::fseek(f, 0, SEEK_SET) != 0 || std::fread(in.get(), 1, file_size, f) != file_size) return false;
  struct Freer {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  std::unique_ptr<libdeflate_decompressor, Freer> d(libdeflate_alloc_decompressor());
  if (!d) return false;
  size_t in_used = 0, out_size = 0;
  if (libdeflate_gzip_decompress_ex(d.get(), in.get(), file_size, buf.data(), buf.capacity(), &in_used,
                                    &out_size) != LIBDEFLATE_SUCCESS)
    return false;
  // Another member after the first: zlib's path reads the concatenation. Anything else after the
  // first member is ignored, as gzip (and the zlib path) ignore trailing garbage.
  const size_t rest = file_size - in_used;
  if (rest >= 2 && in[in_used] == 0x1f && in[in_used + 1] == 0x8b) return false;
  buf.set_size(out_size);
  return true;
}
#endif

// With zlib, inflates straight into the growing text buffer, 256 KiB of input
// at a time, so the compressed bytes are never all in memory.
Result<Buffer> load_gzip(const std::string& path, std::FILE* f, size_t file_size) {
  // The gzip trailer stores the text size mod 2^32: an exact first guess for
  // any trace below 4 GiB. Deflate cannot expand more than ~1032x, which bounds
  // what a corrupt trailer can make us reserve.
  size_t guess = file_size * 4;
  unsigned char trailer[4];
  if (file_size >= 18 && std::fseek(f, -4, SEEK_END) == 0 && std::fread(trailer, 1, 4, f) == 4) {
    size_t isize =
        size_t{trailer[0]} | size_t{trailer[1]} << 8 | size_t{trailer[2]} << 16 | size_t{trailer[3]} << 24;
    if (isize <= file_size * 1032) guess = isize;
  }
  if (std::fseek(f, 0, SEEK_SET) != 0) return read_error(path, errno);
  Buffer buf;
  if (!buf.reserve(std::max<size_t>(guess, 4096)))
    return make_error(path, "out of memory inflating the file");
#if EMO_HAVE_LIBDEFLATE
  if (inflate_whole(f, file_size, buf)) return buf;
  if (std::fseek(f, 0, SEEK_SET) != 0) return read_error(path, errno);
#endif

  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return make_error(path, "cannot start zlib");
  struct Ender {
    z_stream* z;
    ~Ender() { inflateEnd(z); }
  } ender{&zs};

  std::vector<unsigned char> in(256 * 1024);
  size_t out = 0;
  bool stream_end = false;
  bool eof = false;
  while (!eof) {
    size_t n = std::fread(in.data(), 1, in.size(), f);
    if (n < in.size()) {
      if (std::ferror(f)) return read_error(path, errno);
      eof = true;
    }
    zs.next_in = in.data();
    zs.avail_in = static_cast<uInt>(n);
    while (zs.avail_in > 0) {
      if (stream_end) {
        // Concatenated gzip members continue the text; anything else after
        // the first member is ignored, as gzip does with trailing garbage.
        if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b) {
          inflateReset(&zs);
          stream_end = false;
        } else {
          zs.avail_in = 0;
          eof = true;
          break;
        }
      }
      if (out == buf.capacity()) {
        if (!buf.reserve(buf.capacity() + buf.capacity() / 2 + (1 << 20))) {
          return make_error(path, "out of memory inflating the file");
        }
      }
      size_t room = std::min<size_t>(buf.capacity() - out, std::numeric_limits<uInt>::max());
      zs.next_out = reinterpret_cast<Bytef*>(buf.data() + out);
      zs.avail_out = static_cast<uInt>(room);
      int rc = inflate(&zs, Z_NO_FLUSH);
      out += room - zs.avail_out;
      if (rc == Z_STREAM_END) {
        stream_end = true;
      } else if (rc == Z_BUF_ERROR && zs.avail_out != 0) {
        break;  // needs more input
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return make_error(
            path, std::string("not a valid gzip file: ") + (zs.msg != nullptr ? zs.msg : "corrupt data"));
      }
    }
  }
  if (!stream_end) {
    return make_error(path, "truncated gzip file",
                      "the file ends before its compressed data does; copy it again");
  }
  buf.set_size(out);
  return buf;
}

// A pipe, FIFO or socket (standard input as a rule): read to its end, its size unknown.
Result<Buffer> load_stream(const std::string& path, int fd) {
  Buffer buf;
  size_t n = 0;
  for (;;) {
    if (n == buf.capacity() && !buf.reserve(buf.capacity() + buf.capacity() / 2 + (size_t{1} << 20)))
      return make_error(path, "out of memory reading the file");
    const ssize_t got = ::read(fd, buf.data() + n, buf.capacity() - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return read_error(path, errno);
    if (got == 0) break;
    n += static_cast<size_t>(got);
  }
  buf.set_size(n);
  if (n < 2 || static_cast<unsigned char>(buf.data()[0]) != 0x1f || static_cast<unsigned char>(buf.data()[1]) != 0x8b)
    return buf;
  FilePtr f(::fmemopen(buf.data(), n, "rb"));
  if (!f) return read_error(path, errno);
  return load_gzip(path, f.get(), n);
}

// "-" is standard input. A FIFO nothing has been written to yet says that emo waits for its writer
// (reading blocks until one writes or closes it).
int open_trace(const std::string& path) {
  if (path == "-") return ::dup(STDIN_FILENO);
  struct stat named {};
  if (::stat(path.c_str(), &named) != 0 || !S_ISFIFO(named.st_mode)) return ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fd;
  pollfd ready{fd, POLLIN, 0};
  if (::poll(&ready, 1, 0) == 0) {
    std::fprintf(stderr, "note: %s is a FIFO and nothing has been written to it yet: waiting for a writer\n", path.c_str());
    while (::poll(&ready, 1, -1) < 0 && errno == EINTR) {
    }
  }
  ::fcntl(fd, F_SETFL, O_RDONLY);  // blocking again: read to the writer's end
  return fd;
}

Result<Buffer> load(const std::string& path) {
  const int fd = open_trace(path);
  if (fd < 0) return read_error(path, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return read_error(path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    const bool device = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode), dir = S_ISDIR(st.st_mode);
    Result<Buffer> buf = device ? Result<Buffer>(make_error(path, "is a device, not a trace file",
                                                            "give a trace file (.json or .json.gz), or - for standard input"))
                         : dir  ? Result<Buffer>(read_error(path, EISDIR))
                                : load_stream(path, fd);
    ::close(fd);
    return buf;
  }
  FilePtr f(::fdopen(fd, "rb"));
  if (!f) {
    const int err = errno;
    ::close(fd);
    return read_error(path, err);
  }
  size_t size = static_cast<size_t>(st.st_size);
  unsigned char magic[2] = {0, 0};
  size_t got = std::fread(magic, 1, 2, f.get());
  if (got < 2 && std::ferror(f.get())) return read_error(path, errno);
  // Gzip is recognized by its magic bytes, not by the file name.
  if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) return load_gzip(path, f.get(), size);
  if (std::fseek(f.get(), 0, SEEK_SET) != 0) return read_error(path, errno);
  return load_plain(path, f.get(), size);
}

// ---- one event as read from JSON -------------------------------------------

// pid / tid: Kineto writes numbers (25738), numeric strings ("25738") or
// labels ("stream 7", "Spans").
struct IdVal {
  bool present = false;
  bool is_num = false;
  int64_t num = 0;
  std::string_view str;
};

struct RawEvent {
  std::string_view ph, cat, name, ts, dur;
  bool has_ph = false, has_cat = false, has_name = false, has_ts = false, has_dur = false;
  bool bad_ts_type = false, bad_dur_type = false, bad_name_type = false;
  IdVal pid, tid;
  std::string_view id;  // flow events: the flow's id (raw token)
  bool has_id = false;
  // args
  int64_t correlation = kNone;
  int64_t external_id = kNone;
  int64_t device = 0, stream = 0;
  bool has_device = false, has_stream = false;
  std::string_view sync_kind;
  bool has_sync_kind = false;
  int64_t wait_on_stream = -1;
  int64_t wait_corr = kNone;
  bool nccl = false;
  std::string_view coll_name, pg_name, pg_ranks, dtype;
  int64_t seq = kNone, group_size = -1, in_nelems = kNone, out_nelems = kNone;
  std::string_view meta_name, meta_labels;
  // "Input Dims" / "Input type" (raw JSON), read only on `nccl:<collective>` CPU events: 2023-era traces
  // give a collective's message size there and not on its kernel.
  std::string_view input_dims, input_type;
  std::string_view bad_arg;  // first args key whose value had the wrong type
};

// Equality with a literal, unrolled by the compiler (string_view's operator==
// calls memcmp, which shows in profiles at one call per JSON key).
template <size_t N>
bool is(std::string_view s, const char (&lit)[N]) {
  if (s.size() != N - 1) return false;
  for (size_t i = 0; i + 1 < N; ++i) {
    if (s[i] != lit[i]) return false;
  }
  return true;
}

std::string_view key_of(od::raw_json_string k) {
  // Keys are short and end at the first quote; a key with an escaped quote
  // matches none of ours, which is all that matters here.
  const char* s = k.raw();
  size_t n = 0;
  while (s[n] != '"') ++n;
  return {s, n};
}

// String content without unescaping when it has no backslash (the common case).
bool read_string(od::value& v, std::string_view* out) {
  std::string_view tok = detail::trim_ws(v.raw_json_token());
  if (tok.size() < 2 || tok.front() != '"' || tok.back() != '"') return false;
  std::string_view body = tok.substr(1, tok.size() - 2);
  if (body.find('\\') == std::string_view::npos) {
    *out = body;
    return true;
  }
  return v.get_string().get(*out) == simdjson::SUCCESS;
}

enum class Read : uint8_t { kOk, kAbsent, kBad };

// An integer written as a number or a numeric string; null reads as absent.
Read read_int(od::value& v, int64_t* out) {
  std::string_view tok = detail::trim_ws(v.raw_json_token());
  if (tok.empty()) return Read::kBad;
  if (tok.front() == '"') {
    std::string_view s;
    if (!read_string(v, &s)) return Read::kBad;
    return detail::parse_int_text(s, out) ? Read::kOk : Read::kBad;
  }
  if (is(tok, "null")) return Read::kAbsent;
  return detail::parse_int(tok, out) ? Read::kOk : Read::kBad;
}

bool read_id(od::value& v, IdVal* id) {
  std::string_view tok = detail::trim_ws(v.raw_json_token());
  if (tok.empty() || is(tok, "null")) return true;
  id->present = true;
  if (tok.front() == '"') {
    if (!read_string(v, &id->str)) return false;
    id->is_num = detail::parse_int_text(id->str, &id->num);
    return true;
  }
  id->is_num = detail::parse_int(tok, &id->num);
  return id->is_num;
}

// A number token, or a string holding one ("ts": "12.5" is accepted).
bool read_number_token(od::value& v, std::string_view* out) {
  std::string_view tok = detail::trim_ws(v.raw_json_token());
  if (!tok.empty() && tok.front() == '"') return read_string(v, out);
  *out = tok;
  return !tok.empty() && tok != "null";
}

// One line of at most ~200 characters of the event's JSON, for stats examples.
std::string snippet(const char* p, const char* end) {
  std::string out;
  if (p < end && *p != '{' && *p != '[' && *p != '"') {
    // A number or literal: up to its delimiter.
    while (p < end && out.size() < kExampleChars && std::strchr(",]} \t\r\n", *p) == nullptr)
      out.push_back(*p++);
    return out;
  }
  int depth = 0;
  bool in_str = false, esc = false, space = false;
  for (; p < end; ++p) {
    char c = *p;
    if (!in_str && (c == ' ' || c == '\n' || c == '\r' || c == '\t')) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    if (out.size() >= kExampleChars) {
      out += "...";
      break;
    }
    out.push_back(c);
    if (in_str) {
      if (esc) {
        esc = false;
      } else if (c == '\\') {
        esc = true;
      } else if (c == '"') {
        in_str = false;
        if (depth == 0) break;  // the value was a string
      }
    } else if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth <= 0) {
      break;
    }
  }
  return out;
}

// A number the parser could not hold ("1e300", 25 digits) rather than text.
bool looks_numeric(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (std::strchr("0123456789.-+eE", c) == nullptr || c == '\0') return false;
  }
  return true;
}

int32_t wrap_u32(int64_t v) {
  // CUPTI writes stream -1 as the unsigned 4294967295.
  if (v >= (int64_t{1} << 31) && v < (int64_t{1} << 32)) v -= int64_t{1} << 32;
  return static_cast<int32_t>(v);
}
bool fits_i32(int64_t v) { return v >= std::numeric_limits<int32_t>::min() && v < (int64_t{1} << 32); }

struct LaneKey {
  bool gpu;
  int64_t a, b;  // CPU: pid, tid; GPU: device, stream
  bool operator==(const LaneKey& o) const { return gpu == o.gpu && a == o.a && b == o.b; }
};
struct LaneKeyHash {
  size_t operator()(const LaneKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.a) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(k.b) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h ^ (k.gpu ? 0x5bd1e995u : 0u));
  }
};

// Informational counters of skipped events, kept as numbers during the walk
// (flow events alone are a third of a trace) and turned into stats rows once.
enum Skip : uint8_t {
  kSkipTrace,
  kSkipOverhead,
  kSkipPython,
  kSkipUnknownGpuStream,
  kSkipUnknownGpuProcess,
  kSkipCount
};
constexpr std::array<const char*, kSkipCount> kSkipWhat{
    "profiler 'Trace' spans skipped",
    "profiler overhead spans skipped",
    "python_function events not kept (ReadOptions)",
    "events of unknown category on GPU streams skipped",
    "events of unknown category on GPU processes skipped",
};

std::string ph_what(std::string_view ph) {
  if (ph == "s" || ph == "f" || ph == "t") return "flow events (ph '" + std::string(ph) + "') skipped";
  if (ph == "i" || ph == "I") return "instant events (ph '" + std::string(ph) + "') skipped";
  if (ph == "M") return "metadata events (ph 'M') read for names, not kept";
  if (ph == "C") return "counter events (ph 'C') skipped";
  if (ph == "B" || ph == "E") return "begin/end events (ph '" + std::string(ph) + "') skipped, not supported";
  if (ph == "b" || ph == "e" || ph == "n") return "async events (ph '" + std::string(ph) + "') skipped";
  std::string shown(ph.substr(0, 8));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return "events with ph '" + shown + "' skipped";
}

// ---- the importer ------------------------------------------------------------

// One chunk of traceEvents as simdjson walked it, before Importer::handle turns its events into
// rows. The parser keeps the unescaped strings the events' views point into (the rest point into
// the text), so a Walked is reused only after its events were handled.
struct Walked {
  od::parser parser;
  std::vector<RawEvent> events;
  std::vector<const char*> starts;  // each event's first byte
  std::vector<uint8_t> objects;     // 0: the entry is not a JSON object
  Status status;                    // a JSON error ends the walk; the events before it are kept
};

class Importer {
 public:
  Importer(const std::string& name, const ReadOptions& options) : opt_(options) { t_.path = name; }

  // Walks the text; the buffer may be freed afterwards (names are interned).
  Status parse(char* data, size_t size, size_t allocated);
  Status parse_pipelined(const std::vector<std::pair<size_t, size_t>>& chunks, int walkers,
                         const std::function<void(Walked&)>& sized);
  // Sorts and indexes the tables.
  Result<RankTrace> finish();

 private:
  Error fatal(size_t byte, std::string what, std::string note = {}) const {
    std::string where = t_.path;
    if (byte != kNpos) where += ":byte " + std::to_string(byte);
    return make_error(std::move(where), std::move(what), std::move(note));
  }
  Error scan_error(ScanStatus s, size_t byte, const char* context) const {
    if (s == ScanStatus::kTruncated) {
      return make_error(t_.path, std::string("truncated JSON (the file ends inside ") + context + ")",
                        "the trace was cut short: was the profiler interrupted, or the copy incomplete?");
    }
    return fatal(byte, std::string("not valid JSON: malformed ") + context);
  }
  Error json_error(size_t byte, simdjson::error_code e) const {
    return fatal(byte, std::string("not valid JSON: ") + simdjson::error_message(e));
  }
  size_t offset(const char* p) const { return static_cast<size_t>(p - data_); }

  void walk_chunk(size_t open, size_t close, Walked& w) const;
  Status handle_chunk(const Walked& w, size_t close);
  Status read_fields(od::object& obj, RawEvent& r, const char* start) const;
  Status read_args(od::object& args, RawEvent& r, const char* start) const;
  void handle(const RawEvent& r, const char* start, const char* end);
  void handle_meta(const RawEvent& r);
  void bad(std::string_view what, const char* start, const char* end);
  void skip(Skip s, const char* start, const char* end);
  void note_window(const RawEvent& r);
  void note_fwdbwd(const RawEvent& r, const char* start, const char* end);
  void link_fwdbwd();
  bool cpu_id(const IdVal& v, int64_t* key);
  uint32_t lane_for(const LaneKey& key, const RawEvent& r);
  uint32_t add_collective(const RawEvent& r);
  bool communication_name(std::string_view name);
  Status read_distributed_info(size_t b, size_t e);
  Status read_device_properties(size_t b, size_t e);
  void read_untraced_steps(size_t b, size_t e);

  RankTrace t_;
  ReadOptions opt_;
  od::parser parser_;  // the top-level distributedInfo and deviceProperties
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t allocated_ = 0;
  int64_t index_ = 0;                // position in traceEvents of the event being read
  const char* cur_start_ = nullptr;  // its first byte

  bool has_base_ = false;
  int64_t base_ns_ = 0;

  // Hull of the profiler's "Trace" spans (ns as read); empty when none.
  bool has_window_ = false;
  int64_t window_begin_ns_ = 0, window_end_ns_ = 0;
  int64_t bad_windows_ = 0;

  std::unordered_map<LaneKey, uint32_t, LaneKeyHash> lane_index_;
  LaneKey last_key_{false, 0, 0};
  uint32_t last_lane_ = kNoIndex;
  std::vector<uint8_t> lane_known_cpu_;   // lane holds events of a known CPU category
  bool size_annotations_ = false;         // some `nccl:` annotation carries a message size
  std::unordered_set<int64_t> gpu_pids_;  // labelled "GPU n" by process_labels

  struct ThreadName {
    int64_t pid, tid;
    StrId name;
  };
  std::vector<ThreadName> thread_names_;

  // One end of a fwdbwd flow as read (ts in ns as read, before re-basing): `source` is the forward op's
  // end ('s'), else the backward op's ('f'). Bound to the ops they stand on in finish (link_fwdbwd).
  struct FlowEnd {
    std::string id;
    bool source = false;
    int64_t pid = 0, tid = 0, ts_ns = 0;
    int64_t index = 0;  // position in traceEvents, for the stats' example
  };
  std::vector<FlowEnd> fwdbwd_;
  int64_t fwdbwd_bad_ = 0;
  std::string fwdbwd_bad_example_;

  std::array<int64_t, kSkipCount> skip_count_{};
  std::array<std::string, kSkipCount> skip_example_;
  std::array<int64_t, 256> ph1_count_{};
  std::array<std::string, 256> ph1_example_;
  std::unordered_map<std::string, int64_t> ph_count_;
  std::unordered_map<std::string, std::string> ph_example_;
  std::string coll_tmp_;
  // is_communication_kernel of each interned name, by StrId: 0 not asked yet, 1 no, 2 yes. A step
  // launches the same few hundred kernels over and over, under names of hundreds of characters.
  std::vector<uint8_t> comm_name_;
};

Status Importer::parse(char* data, size_t size, size_t allocated) {
  data_ = data;
  size_ = size;
  allocated_ = allocated;
  Scanner sc(data, size);
  size_t i = sc.skip_ws(0);
  if (size - i >= 3 && std::memcmp(data + i, "\xEF\xBB\xBF", 3) == 0) i = sc.skip_ws(i + 3);  // BOM
  if (i >= size) return make_error(t_.path, "not valid JSON: the file is empty");
  if (data[i] == '[') {
    return make_error(t_.path, "not a PyTorch profiler trace: the top-level JSON value is an array",
                      "EMO reads Kineto traces (torch.profiler export_chrome_trace or "
                      "tensorboard_trace_handler): a JSON object with a traceEvents array");
  }
  if (data[i] != '{') {
    unsigned char c = static_cast<unsigned char>(data[i]);
    char shown[16];
    if (c >= 0x20 && c < 0x7f) {
      std::snprintf(shown, sizeof shown, "'%c'", c);
    } else {
      std::snprintf(shown, sizeof shown, "byte 0x%02x", c);
    }
    return fatal(i, std::string("not valid JSON: expected '{' at the start, found ") + shown);
  }

  // The top-level object, by hand: its keys may come in any order and only
  // traceEvents is big. Each value's extent is found by the scanner.
  size_t events_open = kNpos, events_close = kNpos;
  std::vector<size_t> seps;  // chunk separators inside traceEvents (',' between events)
  size_t events_seen = 0;
  size_t dist_b = kNpos, dist_e = 0, dev_b = kNpos, dev_e = 0, base_b = kNpos, base_e = 0, untraced_b = kNpos,
         untraced_e = 0;
  bool et_nodes = false, et_schema = false;  // the keys of an execution trace (ExecutionTraceObserver)
  ++i;
  for (bool first = true;; first = false) {
    i = sc.skip_ws(i);
    if (i >= size) return scan_error(ScanStatus::kTruncated, i, "the top-level object");
    if (first && data[i] == '}') {
      ++i;
      break;
    }
    size_t end = 0;
    if (data[i] != '"') return fatal(i, "not valid JSON: expected a key in the top-level object");
    ScanStatus s = sc.skip_string(i, &end);
    if (s != ScanStatus::kOk) return scan_error(s, i, "a key of the top-level object");
    std::string_view key(data + i + 1, end - i - 2);
    i = sc.skip_ws(end);
    if (i >= size) return scan_error(ScanStatus::kTruncated, i, "the top-level object");
    if (data[i] != ':') return fatal(i, "not valid JSON: expected ':' after a key");
    i = sc.skip_ws(i + 1);
    if (i >= size) return scan_error(ScanStatus::kTruncated, i, "the top-level object");
    if (key == "traceEvents" && events_open == kNpos) {
      if (data[i] != '[') {
        return make_error(t_.path, "no traceEvents array",
                          "traceEvents is not an array here; EMO reads Kineto traces whose "
                          "traceEvents is the array of events");
      }
      events_open = i;
      size_t chunk_begin = i;
      s = sc.match(i, &end, [&](size_t close) {
        ++events_seen;
        if (close - chunk_begin < kChunkBytes) return;
        size_t j = sc.skip_ws(close + 1);
        if (j < size && data[j] == ',') {
          seps.push_back(j);
          chunk_begin = j;
        }
      });
      if (s != ScanStatus::kOk) return scan_error(s, i, "traceEvents");
      if (data[end - 1] != ']') return fatal(end - 1, "not valid JSON: traceEvents ends with '}'");
      events_close = end - 1;
    } else {
      s = sc.skip_value(i, &end);
      if (s != ScanStatus::kOk) return scan_error(s, i, "a top-level value");
      if (key == "distributedInfo") {
        dist_b = i;
        dist_e = end;
      } else if (key == "deviceProperties") {
        dev_b = i;
        dev_e = end;
      } else if (key == "baseTimeNanoseconds") {
        base_b = i;
        base_e = end;
      } else if (key == "emo_untraced_step_us") {
        untraced_b = i;
        untraced_e = end;
      } else if (key == "nodes" && data[i] == '[') {
        et_nodes = true;
      } else if (key == "schema") {
        et_schema = true;
      }
    }
    i = sc.skip_ws(end);
    if (i >= size) return scan_error(ScanStatus::kTruncated, i, "the top-level object");
    if (data[i] == ',') {
      ++i;
      continue;
    }
    if (data[i] == '}') {
      ++i;
      break;
    }
    return fatal(i, "not valid JSON: expected ',' or '}' in the top-level object");
  }
  i = sc.skip_ws(i);
  if (i < size) return fatal(i, "not valid JSON: content after the top-level object");

  if (events_open == kNpos && et_nodes && et_schema) {
    return make_error(t_.path, "a PyTorch execution trace (schema and nodes, no traceEvents), not a Kineto trace",
                      "an execution trace (ExecutionTraceObserver) holds the ops without their times: give the "
                      "Kineto trace torch.profiler wrote beside it");
  }
  if (events_open == kNpos) {
    return make_error(t_.path, "no traceEvents array",
                      "EMO reads Kineto traces (torch.profiler export_chrome_trace or "
                      "tensorboard_trace_handler): a JSON object with a traceEvents array");
  }
  if (sc.skip_ws(events_open + 1) == events_close) {
    return make_error(t_.path, "traceEvents is empty",
                      "the profiler recorded nothing: check its schedule (wait/warmup/active) and "
                      "that the trace was exported after profiling stopped");
  }

  if (base_b != kNpos) {
    std::string_view tok(data + base_b, base_e - base_b);
    int64_t v = 0;
    if (detail::parse_int(tok, &v)) {
      has_base_ = true;
      base_ns_ = v;
    } else {
      t_.stats.add("baseTimeNanoseconds is not an integer (ignored)", std::string(tok.substr(0, 64)));
    }
  }
  if (dist_b != kNpos) EMO_RETURN_IF_ERROR(read_distributed_info(dist_b, dist_e));
  if (dev_b != kNpos) EMO_RETURN_IF_ERROR(read_device_properties(dev_b, dev_e));
  if (untraced_b != kNpos) read_untraced_steps(untraced_b, untraced_e);

  // Untouched reserved pages cost no memory, so reserving one row per
  // element (flows and metadata included) is free where it is too much.
  t_.events.reserve(events_seen);
  detail::advise_huge_pages(t_.events.data(), t_.events.capacity() * sizeof(Event));
  std::vector<std::pair<size_t, size_t>> chunks;  // each chunk's opening and closing separator
  // A chunk opens at the whitespace after its separator where there is some (Kineto writes "},\n  {"),
  // so that neighbours share no byte and may be walked at once; else at the separator itself.
  bool disjoint = true;
  size_t open = events_open;
  for (size_t sep : seps) {
    chunks.emplace_back(open, sep);
    const char c = data[sep + 1];
    const bool ws = c == ' ' || c == '\n' || c == '\r' || c == '\t';
    disjoint = disjoint && ws;
    open = ws ? sep + 1 : sep;
  }
  chunks.emplace_back(open, events_close);
  // Each Walked is sized once for the longest chunk, here on the calling thread: grown chunk by chunk
  // (a chunk is a little longer than the last), simdjson's index and the rows were reallocated and their
  // fresh pages faulted in again, in the walkers' own 4 KiB-page arenas: most of a 15 MB trace's faults.
  size_t longest = 0;
  for (const auto& [b, e] : chunks) longest = std::max(longest, e - b + 1);
  const size_t per_chunk = events_seen * longest / std::max<size_t>(1, events_close - events_open) + 64;
  auto sized = [&](Walked& w) {
    if (w.parser.allocate(longest) != simdjson::SUCCESS) return;  // met again, and said, by the walk's iterate
    w.events.reserve(per_chunk);
    w.starts.reserve(per_chunk);
    w.objects.reserve(per_chunk);
  };
  const int threads = worker_threads();
  if (chunks.size() < 2 || threads < 2) {
    Walked w;
    sized(w);
    for (const auto& [b, e] : chunks) {
      walk_chunk(b, e, w);
      EMO_RETURN_IF_ERROR(handle_chunk(w, e));
    }
    return {};
  }
  return parse_pipelined(chunks, disjoint ? std::min(threads, 4) : 1, sized);
}

// `walkers` threads walk chunks (simdjson's structural index and the fields' values), chunk k on
// walker k % walkers, while this thread handles them (rows, interned names, lanes) strictly in
// order, so the tables are the same as from one thread. 2 × walkers Walked slots: chunk k is walked
// into slot k % slots once chunk k - slots has been handled. walk_chunk overwrites its chunk's
// first and last byte for the time of its walk: with more than one walker the chunks share no
// byte, and handling reads none of those bytes.
Status Importer::parse_pipelined(const std::vector<std::pair<size_t, size_t>>& chunks, int walkers,
                                 const std::function<void(Walked&)>& sized) {
  const size_t nw = size_t(std::max(1, walkers)), nslots = 2 * nw;
  std::vector<Walked> slots(nslots);
  for (Walked& w : slots) sized(w);
  std::vector<uint8_t> walked(chunks.size(), 0);
  std::mutex mu;
  std::condition_variable cv;
  size_t handled = 0;
  bool stop = false;
  auto walk_some = [&](size_t first) {
    for (size_t k = first; k < chunks.size(); k += nw) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || k < handled + nslots; });
        if (stop) return;
      }
      Walked& w = slots[k % nslots];
      walk_chunk(chunks[k].first, chunks[k].second, w);
      const bool failed = !w.status.ok();
      {
        std::lock_guard<std::mutex> lock(mu);
        walked[k] = 1;
      }
      cv.notify_all();
      if (failed) return;  // chunks after it are never handled
    }
  };
  std::vector<std::thread> pool;
  struct Joiner {  // also when handling throws (out of memory)
    std::vector<std::thread>& ts;
    std::mutex& m;
    std::condition_variable& c;
    bool& s;
    ~Joiner() {
      {
        std::lock_guard<std::mutex> lock(m);
        s = true;
      }
      c.notify_all();
      for (std::thread& t : ts) t.join();
    }
  } joiner{pool, mu, cv, stop};
  for (size_t t = 0; t < nw; ++t) pool.emplace_back(walk_some, t);
  for (size_t k = 0; k < chunks.size(); ++k) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return walked[k] != 0; });
    }
    Status st = handle_chunk(slots[k % nslots], chunks[k].second);
    {
      std::lock_guard<std::mutex> lock(mu);
      handled = k + 1;
    }
    cv.notify_all();
    if (!st.ok()) return st;
  }
  return {};
}

// Events open..close (exclusive separators) walked as one JSON array: the
// separators are overwritten with '[' and ']' for the time of the walk.
void Importer::walk_chunk(size_t open, size_t close, Walked& w) const {
  w.events.clear();
  w.starts.clear();
  w.objects.clear();
  w.status = {};
  char saved_open = data_[open], saved_close = data_[close];
  data_[open] = '[';
  data_[close] = ']';
  struct Restore {
    char* d;
    size_t o, c;
    char so, sc;
    ~Restore() {
      d[o] = so;
      d[c] = sc;
    }
  } restore{data_, open, close, saved_open, saved_close};

  od::document doc;
  simdjson::error_code err = w.parser.iterate(data_ + open, close - open + 1, allocated_ - open).get(doc);
  if (err) {
    w.status = json_error(open, err);
    return;
  }
  od::array arr;
  if ((err = doc.get_array().get(arr))) {
    w.status = json_error(open, err);
    return;
  }
  const char* last_start = data_ + open;
  for (auto item : arr) {
    od::value v;
    if ((err = std::move(item).get(v))) {
      w.status = json_error(offset(last_start), err);
      return;
    }
    std::string_view tok = v.raw_json_token();
    const char* start = tok.data();
    last_start = start;
    RawEvent& r = w.events.emplace_back();
    w.starts.push_back(start);
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) {
      w.objects.push_back(0);
    } else {
      w.objects.push_back(1);
      Status st = read_fields(obj, r, start);
      if (!st.ok()) {
        // The event's entry is counted, as before; its row is not made.
        w.objects.back() = 2;
        w.status = std::move(st);
        return;
      }
    }
  }
}

// Turns a walked chunk's events into rows, in order; then its walk's error, if any.
Status Importer::handle_chunk(const Walked& w, size_t close) {
  const char* chunk_end = data_ + close;
  for (size_t i = 0; i < w.events.size(); ++i) {
    const char* start = w.starts[i];
    cur_start_ = start;
    ++t_.stats.events_total;
    if (w.objects[i] == 2) break;  // the event the walk stopped at
    if (w.objects[i] == 0) {
      bad("traceEvents entry is not an object", start, chunk_end);
    } else {
      handle(w.events[i], start, chunk_end);
    }
    ++index_;
  }
  return w.status;
}

Status Importer::read_fields(od::object& obj, RawEvent& r, const char* start) const {
  for (auto item : obj) {
    od::field f;
    simdjson::error_code err = std::move(item).get(f);
    if (err) return json_error(offset(start), err);
    std::string_view key = key_of(f.key());
    od::value& v = f.value();
    switch (key.size()) {
      case 2:
        if (is(key, "ph")) {
          r.has_ph = read_string(v, &r.ph);
        } else if (is(key, "id")) {
          r.has_id = read_number_token(v, &r.id);
        } else if (is(key, "ts")) {
          r.has_ts = true;
          r.bad_ts_type = !read_number_token(v, &r.ts);
        }
        break;
      case 3:
        if (is(key, "cat")) {
          r.has_cat = read_string(v, &r.cat);
        } else if (is(key, "pid")) {
          if (!read_id(v, &r.pid)) r.pid = IdVal{};
        } else if (is(key, "tid")) {
          if (!read_id(v, &r.tid)) r.tid = IdVal{};
        } else if (is(key, "dur")) {
          r.has_dur = true;
          r.bad_dur_type = !read_number_token(v, &r.dur);
        }
        break;
      case 4:
        if (is(key, "name")) {
          r.has_name = true;
          r.bad_name_type = !read_string(v, &r.name);
        } else if (is(key, "args")) {
          // Flow and instant events carry args EMO never reads.
          if (r.has_ph && !is(r.ph, "X") && !is(r.ph, "M")) break;
          od::object args;
          if (v.get_object().get(args) != simdjson::SUCCESS) break;
          EMO_RETURN_IF_ERROR(read_args(args, r, start));
        }
        break;
      default:
        break;
    }
  }
  return {};
}

// The args keys EMO reads. Dispatch is by length first: most args (Input
// Dims, Ev Idx, Python id, ...) are rejected by one comparison.
enum class ArgKey : uint8_t {
  kOther,
  kCorrelation,
  kExternalId,
  kDevice,
  kStream,
  kSyncKind,
  kWaitOnStream,
  kWaitCorr,
  kCollective,
  kGroupName,
  kGroupRanks,
  kSeq,
  kGroupSize,
  kInNelems,
  kOutNelems,
  kDtype,
  kName,
  kLabels,
  kInputDims,
  kInputType,
};

ArgKey classify_arg(std::string_view k) {
  using detail::iequals;
  switch (k.size()) {
    case 3:
      return iequals(k, "Seq") ? ArgKey::kSeq : ArgKey::kOther;
    case 4:
      return iequals(k, "name") ? ArgKey::kName : ArgKey::kOther;
    case 5:
      return iequals(k, "dtype") ? ArgKey::kDtype : ArgKey::kOther;
    case 6:
      if (iequals(k, "device")) return ArgKey::kDevice;
      if (iequals(k, "stream")) return ArgKey::kStream;
      return iequals(k, "labels") ? ArgKey::kLabels : ArgKey::kOther;
    case 10:
      if (iequals(k, "Group size")) return ArgKey::kGroupSize;
      if (iequals(k, "Input Dims")) return ArgKey::kInputDims;
      return iequals(k, "Input type") ? ArgKey::kInputType : ArgKey::kOther;
    case 11:
      if (iequals(k, "correlation")) return ArgKey::kCorrelation;
      // Modern "External id", 2021-era "external id".
      return iequals(k, "External id") ? ArgKey::kExternalId : ArgKey::kOther;
    case 13:
      return iequals(k, "In msg nelems") ? ArgKey::kInNelems : ArgKey::kOther;
    case 14:
      if (iequals(k, "cuda_sync_kind")) return ArgKey::kSyncKind;
      if (iequals(k, "wait_on_stream")) return ArgKey::kWaitOnStream;
      return iequals(k, "Out msg nelems") ? ArgKey::kOutNelems : ArgKey::kOther;
    case 15:
      return iequals(k, "Collective name") ? ArgKey::kCollective : ArgKey::kOther;
    case 18:
      return iequals(k, "Process Group Name") ? ArgKey::kGroupName : ArgKey::kOther;
    case 19:
      return iequals(k, "Process Group Ranks") ? ArgKey::kGroupRanks : ArgKey::kOther;
    case 33:
      return iequals(k, "wait_on_cuda_event_record_corr_id") ? ArgKey::kWaitCorr : ArgKey::kOther;
    default:
      return ArgKey::kOther;
  }
}

Status Importer::read_args(od::object& args, RawEvent& r, const char* start) const {
  for (auto item : args) {
    od::field f;
    simdjson::error_code err = std::move(item).get(f);
    if (err) return json_error(offset(start), err);
    std::string_view key = key_of(f.key());
    ArgKey ak = classify_arg(key);
    if (ak == ArgKey::kOther) continue;
    od::value& v = f.value();
    if (ak == ArgKey::kInputDims || ak == ArgKey::kInputType) {
      // Every CPU op has them; only a collective's annotation ("nccl:all_to_all") is read (the name
      // comes before args in every Kineto writer; an event that puts it after is not read).
      if (!r.has_name || !r.name.starts_with("nccl:")) continue;
      od::array a;
      std::string_view raw;
      if (v.get_array().get(a) == simdjson::SUCCESS && a.raw_json().get(raw) == simdjson::SUCCESS) {
        (ak == ArgKey::kInputDims ? r.input_dims : r.input_type) = detail::trim_ws(raw);
      }
      continue;
    }
    int64_t* target = nullptr;         // integer-valued keys
    std::string_view* text = nullptr;  // string-valued keys
    bool* flag = nullptr;
    switch (ak) {
      case ArgKey::kCorrelation:
        target = &r.correlation;
        break;
      case ArgKey::kExternalId:
        target = &r.external_id;
        break;
      case ArgKey::kDevice:
        target = &r.device;
        flag = &r.has_device;
        break;
      case ArgKey::kStream:
        target = &r.stream;
        flag = &r.has_stream;
        break;
      case ArgKey::kSyncKind:
        text = &r.sync_kind;
        flag = &r.has_sync_kind;
        break;
      case ArgKey::kWaitOnStream:
        target = &r.wait_on_stream;
        break;
      case ArgKey::kWaitCorr:
        target = &r.wait_corr;
        break;
      case ArgKey::kCollective:
        text = &r.coll_name;
        break;
      case ArgKey::kGroupName:
        text = &r.pg_name;
        break;
      case ArgKey::kGroupRanks:
        text = &r.pg_ranks;
        break;
      case ArgKey::kSeq:
        target = &r.seq;
        break;
      case ArgKey::kGroupSize:
        target = &r.group_size;
        break;
      case ArgKey::kInNelems:
        target = &r.in_nelems;
        break;
      case ArgKey::kOutNelems:
        target = &r.out_nelems;
        break;
      case ArgKey::kDtype:
        text = &r.dtype;
        break;
      case ArgKey::kName:
        text = &r.meta_name;
        break;
      case ArgKey::kLabels:
        text = &r.meta_labels;
        break;
      case ArgKey::kInputDims:
      case ArgKey::kInputType:
      case ArgKey::kOther:
        break;
    }
    if (ak >= ArgKey::kCollective && ak <= ArgKey::kDtype) r.nccl = true;
    if (target != nullptr) {
      int64_t x = 0;
      Read rd = read_int(v, &x);
      if (rd == Read::kOk) {
        *target = x;
        if (flag != nullptr) *flag = true;
      } else if (rd == Read::kBad && r.bad_arg.empty()) {
        r.bad_arg = key;
      }
      continue;
    }
    std::string_view tok = detail::trim_ws(v.raw_json_token());
    if (is(tok, "null")) continue;
    if (ak == ArgKey::kGroupRanks && !tok.empty() && tok.front() == '[') {
      // A string "[0, 1]" in current Kineto, an array in some versions: keep the text.
      od::array a;
      std::string_view raw;
      if (v.get_array().get(a) == simdjson::SUCCESS && a.raw_json().get(raw) == simdjson::SUCCESS) {
        r.pg_ranks = detail::trim_ws(raw);
      } else if (r.bad_arg.empty()) {
        r.bad_arg = key;
      }
      continue;
    }
    if (read_string(v, text)) {
      if (flag != nullptr) *flag = true;
    } else if (r.bad_arg.empty()) {
      r.bad_arg = key;
    }
  }
  return {};
}

void Importer::bad(std::string_view what, const char* start, const char* end) {
  for (ImportStat& row : t_.stats.rows) {
    if (row.is_error && row.what == what) {
      ++row.count;
      return;
    }
  }
  t_.stats.add(what, "event " + std::to_string(index_) + ": " + snippet(start, end), true);
}

void Importer::skip(Skip s, const char* start, const char* end) {
  if (skip_count_[s]++ == 0)
    skip_example_[s] = "event " + std::to_string(index_) + ": " + snippet(start, end);
}

// A "Trace" span (the profiler's own window) is not kept as an event, but its
// extent is: select_step uses it as the step of traces without ProfilerStep.
// Kineto links each forward op to the backward op the autograd engine ran for it with a flow of
// category "fwdbwd": 's' at the forward op's start, 'f' (binding point "e": the enclosing slice) at the
// backward op's start, usually on the engine's own thread. Kept until finish binds them to the ops.
void Importer::note_fwdbwd(const RawEvent& r, const char* start, const char* end) {
  FlowEnd f;
  f.source = is(r.ph, "s");
  f.index = index_;
  if (!r.has_id || r.id.empty() || !r.has_ts || r.bad_ts_type || !detail::parse_us_to_ns(r.ts, &f.ts_ns) ||
      !cpu_id(r.pid, &f.pid) || !cpu_id(r.tid, &f.tid)) {
    if (fwdbwd_bad_++ == 0) fwdbwd_bad_example_ = "event " + std::to_string(index_) + ": " + snippet(start, end);
    return;
  }
  f.id = std::string(r.id);
  fwdbwd_.push_back(std::move(f));
}

// Binds each fwdbwd flow with both ends to the ops it stands on: the outermost CPU op (cpu_op or
// annotation) on the end's thread that starts at the end's ts (within 1 µs: the flow and the op are
// written from one timestamp). Flow k (from 1) sets flow_out = k on the forward op and flow_in = k on
// the backward op; a flow whose ops are not found, or whose backward op starts before its forward op
// does, is counted and not used.
void Importer::link_fwdbwd() {
  if (fwdbwd_.empty() && fwdbwd_bad_ == 0) return;
  constexpr int64_t kTolNs = 1000;
  // Per CPU lane: (ts, -dur, event) of its ops, sorted.
  std::unordered_map<uint32_t, std::vector<std::tuple<int64_t, int64_t, uint32_t>>> ops;
  for (uint32_t i = 0; i < t_.events.size(); ++i) {
    const Event& e = t_.events[i];
    if (e.kind != EventKind::kCpuOp && e.kind != EventKind::kUserAnnotation) continue;
    ops[e.lane].emplace_back(e.ts_ns, -e.dur_ns, i);
  }
  for (auto& [lane, v] : ops) std::sort(v.begin(), v.end());
  auto find_op = [&](const FlowEnd& f) -> uint32_t {
    auto lane = lane_index_.find(LaneKey{false, f.pid, f.tid});
    if (lane == lane_index_.end()) return kNoIndex;
    auto it = ops.find(lane->second);
    if (it == ops.end()) return kNoIndex;
    const auto& v = it->second;
    auto lo = std::lower_bound(v.begin(), v.end(), std::make_tuple(f.ts_ns - kTolNs, std::numeric_limits<int64_t>::min(), 0u));
    uint32_t best = kNoIndex;
    int64_t best_dist = kTolNs + 1;
    for (; lo != v.end() && std::get<0>(*lo) <= f.ts_ns + kTolNs; ++lo) {
      const int64_t d = std::abs(std::get<0>(*lo) - f.ts_ns);
      if (d < best_dist) {  // the first at the nearest ts is the outermost (longest) there
        best_dist = d;
        best = std::get<2>(*lo);
      }
    }
    return best;
  };
  std::unordered_map<std::string_view, std::pair<const FlowEnd*, const FlowEnd*>> by_id;
  for (const FlowEnd& f : fwdbwd_) {
    auto& slot = by_id[f.id];
    (f.source ? slot.first : slot.second) = &f;
  }
  std::vector<std::pair<int64_t, std::pair<const FlowEnd*, const FlowEnd*>>> pairs;  // in file order
  for (const auto& [id, ends] : by_id) {
    if (ends.first != nullptr && ends.second != nullptr) pairs.push_back({ends.first->index, ends});
  }
  std::sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t linked = 0, unbound = 0;
  std::string unbound_example;
  uint32_t next = 1;
  for (const auto& [index, ends] : pairs) {
    const uint32_t src = find_op(*ends.first), dst = find_op(*ends.second);
    if (src == kNoIndex || dst == kNoIndex || src == dst || t_.events[src].flow_out != 0 ||
        t_.events[dst].flow_in != 0 || t_.events[dst].ts_ns < t_.events[src].ts_ns) {
      if (unbound++ == 0) unbound_example = "flow id " + ends.first->id + " (event " + std::to_string(index) + ")";
      continue;
    }
    t_.events[src].flow_out = next;
    t_.events[dst].flow_in = next;
    ++next;
    ++linked;
  }
  const int64_t open_ends = static_cast<int64_t>(fwdbwd_.size()) - 2 * static_cast<int64_t>(pairs.size());
  if (linked > 0) {
    t_.stats.rows.push_back(ImportStat{"fwdbwd flows read (forward op -> its backward op, across threads)", linked, "", false});
  }
  if (unbound > 0) {
    t_.stats.rows.push_back(ImportStat{"fwdbwd flows not used (no op at an end, or backward before forward)", unbound,
                                       unbound_example, false});
  }
  if (open_ends > 0) {
    t_.stats.rows.push_back(ImportStat{"fwdbwd flow ends without their other end (not used)", open_ends, "", false});
  }
  if (fwdbwd_bad_ > 0) {
    t_.stats.rows.push_back(ImportStat{"fwdbwd flow events without a usable id, ts, pid or tid (not used)", fwdbwd_bad_,
                                       fwdbwd_bad_example_, false});
  }
  fwdbwd_.clear();
  fwdbwd_.shrink_to_fit();
}

void Importer::note_window(const RawEvent& r) {
  int64_t ts = 0, dur = 0;
  if (!r.has_ts || !r.has_dur || r.bad_ts_type || r.bad_dur_type || !detail::parse_us_to_ns(r.ts, &ts) ||
      !detail::parse_us_to_ns(r.dur, &dur) || dur < 0 || ts > kMaxAbsNs || ts < -kMaxAbsNs || dur > kMaxAbsNs) {
    ++bad_windows_;
    return;
  }
  if (!has_window_) {
    has_window_ = true;
    window_begin_ns_ = ts;
    window_end_ns_ = ts + dur;
  } else {
    window_begin_ns_ = std::min(window_begin_ns_, ts);
    window_end_ns_ = std::max(window_end_ns_, ts + dur);
  }
}

bool Importer::cpu_id(const IdVal& v, int64_t* key) {
  if (!v.present) return false;
  if (v.is_num) {
    *key = v.num;
  } else {
    *key = kSyntheticIdBase + static_cast<int64_t>(t_.strings.intern(v.str));
  }
  return true;
}

uint32_t Importer::lane_for(const LaneKey& key, const RawEvent& r) {
  if (last_lane_ != kNoIndex && key == last_key_) return last_lane_;
  auto [it, inserted] = lane_index_.try_emplace(key, static_cast<uint32_t>(t_.lanes.size()));
  if (inserted) {
    Lane lane;
    lane.gpu = key.gpu;
    if (key.gpu) {
      lane.pid = r.pid.is_num ? r.pid.num : key.a;
      lane.tid = r.tid.is_num ? r.tid.num : key.b;
      lane.device = static_cast<int32_t>(key.a);
      lane.stream = static_cast<int32_t>(key.b);
    } else {
      lane.pid = key.a;
      lane.tid = key.b;
      // A thread known only by a label ("PyTorch Profiler") is named by it.
      if (key.b >= kSyntheticIdBase && key.b < kSyntheticIdBase + (int64_t{1} << 32)) {
        lane.name = static_cast<StrId>(key.b - kSyntheticIdBase);
      }
    }
    t_.lanes.push_back(lane);
    lane_known_cpu_.push_back(0);
  }
  last_key_ = key;
  last_lane_ = it->second;
  return it->second;
}

bool Importer::communication_name(std::string_view name) {
  // find, not intern: the name is interned with its event, after the collective's own strings.
  bool known = false;
  const StrId id = t_.strings.find(name, &known);
  if (known && id < comm_name_.size() && comm_name_[id] != 0) return comm_name_[id] == 2;
  const bool comm = is_communication_kernel(name);
  if (known) {
    if (comm_name_.size() <= id) comm_name_.resize(t_.strings.size(), 0);
    comm_name_[id] = comm ? 2 : 1;
  }
  return comm;
}

uint32_t Importer::add_collective(const RawEvent& r) {
  CollectiveArgs c;
  if (!r.coll_name.empty()) {
    c.collective = t_.strings.intern(r.coll_name);
  } else {
    std::string_view from_name = detail::collective_from_kernel_name(r.name, &coll_tmp_);
    if (!from_name.empty()) c.collective = t_.strings.intern(from_name);
  }
  if (!r.pg_name.empty()) {
    c.process_group = t_.strings.intern(r.pg_name);
  } else if (!r.pg_ranks.empty()) {
    c.process_group = t_.strings.intern(r.pg_ranks);
  }
  c.seq = r.seq;
  c.group_size = fits_i32(r.group_size) ? static_cast<int32_t>(r.group_size) : -1;
  c.in_nelems = r.in_nelems;
  c.out_nelems = r.out_nelems;
  if (!r.dtype.empty()) c.dtype = t_.strings.intern(r.dtype);
  // Group/sequence metadata, or an NCCL-structured name, says which kernels of the ranks belong
  // together; any other communication kernel stays whole (docs/replay.md "Communication beyond NCCL").
  c.matchable = r.nccl || detail::starts_with_nccl(r.name);
  if (!c.matchable) {
    t_.stats.add("communication kernels without collective metadata (kept whole, not matched across ranks)",
                 r.name.substr(0, 200), false);
  }
  t_.collectives.push_back(c);
  return static_cast<uint32_t>(t_.collectives.size() - 1);
}

void Importer::handle_meta(const RawEvent& r) {
  if (!r.has_name) return;
  if (r.name == "thread_name" && !r.meta_name.empty()) {
    int64_t pid = 0, tid = 0;
    if (!cpu_id(r.pid, &pid) || !cpu_id(r.tid, &tid)) return;
    // 2021-era GPU rows: tid "stream 7" names stream 7.
    if (!r.tid.is_num && detail::istarts_with(r.tid.str, "stream")) {
      detail::parse_int_text(r.tid.str.substr(6), &tid);
    }
    std::string_view n = r.meta_name;
    while (!n.empty() && n.back() == ' ') n.remove_suffix(1);  // "stream 7 " -> "stream 7"
    thread_names_.push_back(ThreadName{pid, tid, t_.strings.intern(n)});
  } else if (r.name == "process_labels" && r.pid.is_num && detail::istarts_with(r.meta_labels, "GPU")) {
    gpu_pids_.insert(r.pid.num);
  }
}

void Importer::handle(const RawEvent& r, const char* start, const char* end) {
  if (!r.has_ph) return bad("event without ph", start, end);
  if (!is(r.ph, "X")) {
    if (is(r.ph, "M")) handle_meta(r);
    if ((is(r.ph, "s") || is(r.ph, "f")) && r.has_cat && is(r.cat, "fwdbwd")) return note_fwdbwd(r, start, end);
    // One-letter phases (all real ones) are counted in an array: flow events
    // alone are a third of a trace.
    if (r.ph.size() == 1) {
      auto c = static_cast<unsigned char>(r.ph[0]);
      if (ph1_count_[c]++ == 0)
        ph1_example_[c] = "event " + std::to_string(index_) + ": " + snippet(start, end);
      return;
    }
    std::string ph(r.ph.substr(0, 8));
    if (++ph_count_[ph] == 1)
      ph_example_[ph] = "event " + std::to_string(index_) + ": " + snippet(start, end);
    return;
  }
  Category cat = r.has_cat ? detail::classify_category(r.cat) : Category::kUnknown;
  if (cat == Category::kTrace) {
    note_window(r);
    return skip(kSkipTrace, start, end);
  }
  if (cat == Category::kOverhead) return skip(kSkipOverhead, start, end);
  if (cat == Category::kPythonFunction && !opt_.keep_python_functions) return skip(kSkipPython, start, end);
  if (!r.has_name) return bad("event without name", start, end);
  if (r.bad_name_type) return bad("event whose name is not a string", start, end);
  if (!r.has_ts) return bad("event without ts", start, end);
  if (!r.has_dur) return bad("complete event without dur", start, end);
  Event e;
  constexpr std::string_view kOutOfRange = "event with ts or dur out of range";
  if (r.bad_ts_type || !detail::parse_us_to_ns(r.ts, &e.ts_ns)) {
    return bad(looks_numeric(r.ts) ? kOutOfRange : "event with non-numeric ts", start, end);
  }
  if (r.bad_dur_type || !detail::parse_us_to_ns(r.dur, &e.dur_ns)) {
    return bad(looks_numeric(r.dur) ? kOutOfRange : "event with non-numeric dur", start, end);
  }
  if (e.dur_ns < 0) return bad("event with negative dur", start, end);
  if (e.ts_ns > kMaxAbsNs || e.ts_ns < -kMaxAbsNs || e.dur_ns > kMaxAbsNs)
    return bad(kOutOfRange, start, end);
  if (cat == Category::kUnknown && r.has_stream) return skip(kSkipUnknownGpuStream, start, end);
  e.kind = detail::kind_of(cat);
  e.correlation = r.correlation;
  e.external_id = r.external_id;

  if (detail::is_gpu_lane_kind(e.kind)) {
    // GPU events: device from args.device, else pid; stream from args.stream,
    // else tid (7, "7" or "stream 7"; sync records on tid 1000007 are stream 7).
    int64_t device = 0, stream = 0;
    if (r.has_device) {
      device = r.device;
    } else if (r.pid.is_num) {
      device = r.pid.num;
    } else {
      return bad(std::string(to_string(e.kind)) + " event without device", start, end);
    }
    if (r.has_stream) {
      stream = r.stream;
    } else if (r.tid.is_num) {
      stream = r.tid.num;
      if (e.kind == EventKind::kCudaSync && stream >= kSyncTidOffset) stream -= kSyncTidOffset;
    } else if (r.tid.present && detail::istarts_with(r.tid.str, "stream") &&
               detail::parse_int_text(r.tid.str.substr(6), &stream)) {
    } else {
      return bad(std::string(to_string(e.kind)) + " event without stream", start, end);
    }
    if (!fits_i32(device) || !fits_i32(stream)) {
      return bad(std::string(to_string(e.kind)) + " event with device or stream out of range", start, end);
    }
    e.device = wrap_u32(device);
    e.stream = wrap_u32(stream);
    if (e.kind == EventKind::kCudaSync) {
      e.sync = detail::classify_sync(r.has_sync_kind ? r.sync_kind : r.name);
      e.wait_on_stream = fits_i32(r.wait_on_stream) ? wrap_u32(r.wait_on_stream) : -1;
      e.wait_on_event_record_corr = r.wait_corr < 0 ? kNone : r.wait_corr;
    }
    e.lane = lane_for(LaneKey{true, e.device, e.stream}, r);
    if (e.kind == EventKind::kKernel && (r.nccl || communication_name(r.name))) {
      e.collective = add_collective(r);
    }
  } else {
    int64_t pid = 0, tid = 0;
    if (!cpu_id(r.pid, &pid) || !cpu_id(r.tid, &tid)) return bad("event without pid or tid", start, end);
    e.lane = lane_for(LaneKey{false, pid, tid}, r);
    if (cat != Category::kUnknown) lane_known_cpu_[e.lane] = 1;
    // 2021-era traces record ProfilerStep#N as an "Operator"; it is the same
    // annotation that modern traces call user_annotation.
    if (e.kind == EventKind::kCpuOp && detail::profiler_step_number(r.name) >= 0) {
      e.kind = EventKind::kUserAnnotation;
    }
    if (!r.input_dims.empty()) {
      // Held on the annotation until finish() hands it to the kernels launched inside it.
      const int64_t nelems = detail::elements_of_input_dims(r.input_dims);
      if (nelems != kNone) {
        CollectiveArgs c;
        c.collective = t_.strings.intern(r.name.substr(5));
        c.in_nelems = nelems;
        std::string_view dtype = detail::first_string_of(r.input_type);
        if (!dtype.empty()) c.dtype = t_.strings.intern(dtype);
        t_.collectives.push_back(c);
        e.collective = static_cast<uint32_t>(t_.collectives.size() - 1);
        size_annotations_ = true;
      }
    }
  }
  if (!r.bad_arg.empty()) {
    bad("event with an args field of the wrong type (field ignored)", start, end);
  }
  e.name = t_.strings.intern(r.name);
  t_.events.push_back(e);
}

Status Importer::read_distributed_info(size_t b, size_t e) {
  od::document doc;
  simdjson::error_code err = parser_.iterate(data_ + b, e - b, allocated_ - b).get(doc);
  if (err) return json_error(b, err);
  od::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS) {
    t_.stats.add("distributedInfo is not an object (ignored)", "");
    return {};
  }
  // A rank or world size that is there is used or refused: one that is not a whole number (or out
  // of range) is an error naming the file, never "no rank" (which would renumber the ranks by file
  // order). null reads as absent.
  const std::string where = t_.path + ":distributedInfo";
  for (auto item : obj) {
    od::field f;
    if ((err = std::move(item).get(f))) return json_error(b, err);
    std::string_view key = key_of(f.key());
    const bool is_rank = key == "rank";
    int* target = is_rank ? &t_.rank : key == "world_size" ? &t_.world_size : nullptr;
    if (target == nullptr) continue;
    od::value& val = f.value();
    std::string tok(detail::trim_ws(val.raw_json_token()).substr(0, 64));
    if (!tok.empty() && tok.front() == '[') tok = "an array";
    if (!tok.empty() && tok.front() == '{') tok = "an object";
    int64_t v = 0;
    Read rd = read_int(val, &v);
    if (rd == Read::kAbsent) continue;
    const int64_t lowest = is_rank ? 0 : 1;
    if (rd != Read::kOk || v < lowest || v > std::numeric_limits<int>::max()) {
      return make_error(where,
                        std::string(key) + ": must be a whole number >= " + std::to_string(lowest) +
                            ", got " + tok,
                        is_rank ? "distributedInfo.rank counts from 0 to world_size - 1"
                                : "distributedInfo.world_size is the number of ranks of the run");
    }
    *target = static_cast<int>(v);
  }
  if (t_.rank >= 0 && t_.world_size >= 1 && t_.rank >= t_.world_size) {
    return make_error(where,
                      "rank " + std::to_string(t_.rank) + " is not below world_size " +
                          std::to_string(t_.world_size),
                      "distributedInfo.rank counts from 0 to world_size - 1: is the file edited, or "
                      "from another run?");
  }
  return {};
}

// "emo_untraced_step_us": [p0, p1, ...] (emo.torch.capture, through torch.profiler's add_metadata_json),
// or the same array in a string (add_metadata). Anything else is said in the import stats and ignored.
void Importer::read_untraced_steps(size_t b, size_t e) {
  auto bad = [&] {
    t_.stats.add("emo_untraced_step_us is not an array of positive numbers (ignored)",
                 std::string(data_ + b, std::min<size_t>(e - b, 64)));
  };
  const char* p = data_ + b;
  size_t len = e - b, cap = allocated_ - b;
  simdjson::padded_string inner;  // a string's array, unescaped and padded
  if (data_[b] == '"') {
    od::document sdoc;
    std::string_view s;
    if (parser_.iterate(p, len, cap).get(sdoc) != simdjson::SUCCESS || sdoc.get_string().get(s) != simdjson::SUCCESS)
      return bad();
    inner = simdjson::padded_string(s);
    p = inner.data();
    len = inner.size();
    cap = len + simdjson::SIMDJSON_PADDING;
  }
  od::document doc;
  od::array arr;
  if (parser_.iterate(p, len, cap).get(doc) != simdjson::SUCCESS || doc.get_array().get(arr) != simdjson::SUCCESS)
    return bad();
  std::vector<int64_t> out;
  for (auto item : arr) {
    double v = 0;
    if (item.get_double().get(v) != simdjson::SUCCESS || !(v > 0) || !(v < 1e12) || out.size() >= 4096) return bad();
    out.push_back(static_cast<int64_t>(v * 1000.0 + 0.5));
  }
  t_.untraced_step_ns = std::move(out);
}

Status Importer::read_device_properties(size_t b, size_t e) {
  od::document doc;
  simdjson::error_code err = parser_.iterate(data_ + b, e - b, allocated_ - b).get(doc);
  if (err) return json_error(b, err);
  od::array arr;
  if (doc.get_array().get(arr) != simdjson::SUCCESS) return {};
  for (auto item : arr) {
    od::value v;
    if ((err = std::move(item).get(v))) return json_error(b, err);
    od::object dev;
    if (v.get_object().get(dev) != simdjson::SUCCESS) return {};
    for (auto fi : dev) {
      od::field f;
      if ((err = std::move(fi).get(f))) return json_error(b, err);
      std::string_view name;
      if (key_of(f.key()) == "name" && read_string(f.value(), &name)) {
        t_.device_name = std::string(name);
        return {};
      }
    }
    return {};  // only deviceProperties[0] is read
  }
  return {};
}

Result<RankTrace> Importer::finish() {
  RankTrace& t = t_;
  link_fwdbwd();
  // Unknown categories on a process that is a GPU (by its process_labels, or
  // by the GPU events written under its pid) are not CPU work: e.g. CUPTI's
  // "cuda_profiler_range" on pid 0. Known CPU categories win: Qwen traces put
  // python_function events on pid 0 too.
  std::unordered_set<int64_t> gpu_pids = gpu_pids_, cpu_pids;
  for (size_t l = 0; l < t.lanes.size(); ++l) {
    if (t.lanes[l].gpu) gpu_pids.insert(t.lanes[l].pid);
    if (!t.lanes[l].gpu && lane_known_cpu_[l]) cpu_pids.insert(t.lanes[l].pid);
  }
  std::vector<uint8_t> keep(t.events.size(), 1);
  bool dropped = false;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (e.kind != EventKind::kOtherCpu) continue;
    int64_t pid = t.lanes[e.lane].pid;
    if (gpu_pids.count(pid) != 0 && cpu_pids.count(pid) == 0) {
      keep[i] = 0;
      dropped = true;
      if (skip_count_[kSkipUnknownGpuProcess]++ == 0) {
        skip_example_[kSkipUnknownGpuProcess] = "name: " + std::string(t.strings.view(e.name));
      }
    }
  }
  if (dropped) detail::compact(t, keep);

  // Canonical lane order, whatever order the file wrote events in: CPU
  // threads by (pid, tid), then GPU streams by (device, stream).
  std::vector<uint32_t> order(t.lanes.size());
  for (uint32_t l = 0; l < order.size(); ++l) order[l] = l;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Lane& x = t.lanes[a];
    const Lane& y = t.lanes[b];
    if (x.gpu != y.gpu) return !x.gpu;
    if (x.gpu) return std::tie(x.device, x.stream) < std::tie(y.device, y.stream);
    return std::tie(x.pid, x.tid) < std::tie(y.pid, y.tid);
  });
  std::vector<uint32_t> new_index(order.size());
  std::vector<Lane> lanes(order.size());
  for (uint32_t k = 0; k < order.size(); ++k) {
    new_index[order[k]] = k;
    lanes[k] = t.lanes[order[k]];
  }
  t.lanes.swap(lanes);
  for (Event& e : t.events) e.lane = new_index[e.lane];

  // thread_name metadata: CPU threads by (pid, tid); GPU rows are written
  // under pid = device and tid = stream.
  if (!thread_names_.empty()) {
    std::unordered_map<LaneKey, StrId, LaneKeyHash> names;
    for (const ThreadName& n : thread_names_) names[LaneKey{false, n.pid, n.tid}] = n.name;
    for (Lane& lane : t.lanes) {
      auto it = names.find(LaneKey{false, lane.pid, lane.gpu ? lane.stream : lane.tid});
      if (it == names.end() && lane.gpu) it = names.find(LaneKey{false, lane.pid, lane.tid});
      if (it != names.end()) lane.name = it->second;
    }
  }

  if (has_window_) t.window = ProfilerWindow{window_begin_ns_, window_end_ns_ - window_begin_ns_};
  if (bad_windows_ > 0) {
    t.stats.rows.push_back(ImportStat{"profiler 'Trace' spans without a usable ts and dur (not used as the window)",
                                      bad_windows_, "", false});
  }

  // Times: ts_ns = 0 is the earliest kept event; origin_ns is its absolute time.
  t.origin_ns = 0;
  if (has_base_) {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (const Event& e : t.events) {
      lo = std::min(lo, e.ts_ns);
      hi = std::max(hi, e.ts_ns);
    }
    int64_t tmp = 0;
    if (!t.events.empty() &&
        (__builtin_add_overflow(base_ns_, lo, &tmp) || __builtin_add_overflow(base_ns_, hi, &tmp))) {
      t.stats.add("baseTimeNanoseconds + ts overflows (baseTimeNanoseconds ignored)",
                  std::to_string(base_ns_));
    } else {
      t.origin_ns = base_ns_;
    }
  }
  detail::rebase(t);
  detail::sort_events(t);
  detail::rebuild_steps(t);
  if (size_annotations_) detail::attach_annotated_sizes(t);

  for (size_t s = 0; s < kSkipCount; ++s) {
    if (skip_count_[s] == 0) continue;
    t.stats.rows.push_back(ImportStat{kSkipWhat[s], skip_count_[s], skip_example_[s], false});
  }
  for (size_t c = 0; c < 256; ++c) {
    if (ph1_count_[c] == 0) continue;
    std::string ph(1, static_cast<char>(c));
    t.stats.rows.push_back(ImportStat{ph_what(ph), ph1_count_[c], ph1_example_[c], false});
  }
  for (const auto& [ph, count] : ph_count_) {
    t.stats.rows.push_back(ImportStat{ph_what(ph), count, ph_example_[ph], false});
  }
  t.stats.events_kept = static_cast<int64_t>(t.events.size());
  return std::move(t_);
}

}  // namespace

Result<RankTrace> read_trace(const std::string& path, const ReadOptions& options) {
  Result<Buffer> buf = load(path);
  if (!buf.ok()) return buf.error();
  Importer importer(path, options);
  Status st = importer.parse(buf->data(), buf->size(), buf->allocated());
  // The text is no longer needed: free it before the tables are sorted, so
  // the peak is the text plus the event table, not more.
  buf->release();
  if (!st.ok()) return st.error();
  return importer.finish();
}

Result<RankTrace> parse_trace(std::string_view json, const std::string& name, const ReadOptions& options) {
  Buffer buf;
  if (!buf.reserve(json.size())) return make_error(name, "out of memory");
  if (!json.empty()) std::memcpy(buf.data(), json.data(), json.size());
  buf.set_size(json.size());
  Importer importer(name, options);
  Status st = importer.parse(buf.data(), buf.size(), buf.allocated());
  buf.release();
  if (!st.ok()) return st.error();
  return importer.finish();
}

}  // namespace emo::trace
