// Internals shared by the trace reader's files (not part of the public API):
// category and name classification, number parsing of raw JSON tokens, the
// structural scanner that splits traceEvents into chunks, and the table
// clean-up steps that both read_trace and select_step run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "emo/trace/trace.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// Big buffers are mmap'd with huge pages on Linux, except under
// AddressSanitizer, which watches only malloc'd memory.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMO_TRACE_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(EMO_TRACE_UNDER_ASAN)
#define EMO_TRACE_UNDER_ASAN 1
#endif
#if defined(__linux__) && !defined(EMO_TRACE_UNDER_ASAN)
#define EMO_TRACE_MAP_BUFFERS 1
#else
#define EMO_TRACE_MAP_BUFFERS 0
#endif

namespace emo::trace::detail {

// ---- names.cpp ------------------------------------------------------------

// What an event's "cat" says, before lanes are known.
enum class Category : uint8_t {
  kCpuOp,
  kUserAnnotation,
  kPythonFunction,
  kRuntime,
  kDriver,
  kKernel,
  kMemcpy,
  kMemset,
  kCudaSync,
  kGpuAnnotation,
  kTrace,     // the profiler's own "Trace" span: skipped
  kOverhead,  // profiler "overhead" spans (Buffer Flush, ...): skipped
  kUnknown,   // anything else (kOtherCpu on a CPU process)
};

// Case-insensitive: "Kernel" and "kernel" are the same category.
Category classify_category(std::string_view cat);
EventKind kind_of(Category c);               // kUnknown -> kOtherCpu; kTrace/kOverhead are never asked
bool is_gpu_lane_kind(EventKind k);          // kernel, memcpy, memset, cuda_sync, gpu annotation
SyncKind classify_sync(std::string_view s);  // "Event Sync" -> kEventSync, ...
// "ncclKernel_AllReduce_RING_LL_Sum_float(...)" -> "allreduce"; "" when the name
// names no known collective (e.g. ncclDevKernel_Generic).
std::string_view collective_from_kernel_name(std::string_view name, std::string* storage);
// NCCL-structured kernel names: "nccl*" and RCCL's "rccl*" (emo::has_nccl_name).
bool starts_with_nccl(std::string_view name);
// "ProfilerStep#12" -> 12; -1 when the name is not a ProfilerStep.
int64_t profiler_step_number(std::string_view name);
// Runtime/driver calls that put work on a GPU stream (cudaLaunchKernel,
// cuLaunchKernelEx, cudaGraphLaunch, cudaMemcpyAsync, cudaMemsetAsync, their
// HIP spellings, ...): launches_gpu_work(classify_runtime_call(name)).
bool is_launch_like(std::string_view name);
bool iequals(std::string_view a, std::string_view b);
bool istarts_with(std::string_view s, std::string_view prefix);

// ---- numbers.cpp ----------------------------------------------------------

// Strips trailing JSON whitespace.
std::string_view trim_ws(std::string_view s);
// µs as a JSON number token -> ns, rounded half away from zero, exactly
// ("12.3456" -> 12346, "7" -> 7000, "-0.0005" -> -1). False when the token is
// not a number or does not fit.
bool parse_us_to_ns(std::string_view tok, int64_t* ns);
// An integer token ("42", "-1", also "42.0"); false otherwise.
bool parse_int(std::string_view tok, int64_t* v);
// A string that holds an integer, with optional surrounding spaces: "25738", " 7 ".
bool parse_int_text(std::string_view s, int64_t* v);

// ---- scan.cpp -------------------------------------------------------------

inline constexpr size_t kNpos = static_cast<size_t>(-1);

enum class ScanStatus : uint8_t { kOk, kTruncated, kInvalid };

// Finds the extent of JSON values without parsing them: strings are skipped
// with their escapes, brackets are matched 64 bytes at a time. It trusts the
// input to be JSON; simdjson validates every byte that EMO reads afterwards.
class Scanner {
 public:
  Scanner(const char* data, size_t size) : p_(reinterpret_cast<const uint8_t*>(data)), n_(size) {}
  size_t size() const { return n_; }
  uint8_t at(size_t i) const { return p_[i]; }
  size_t skip_ws(size_t i) const;
  // i at the opening quote; returns the offset just past the closing quote.
  ScanStatus skip_string(size_t i, size_t* end) const;
  // Any value starting at i; *end = offset just past it.
  ScanStatus skip_value(size_t i, size_t* end) const;
  // i at '[' or '{': offset just past the matching bracket. Calls
  // on_element_end(offset of the closing bracket) each time a bracket closes
  // back to depth 1 (the end of an object or array element of this value).
  template <class F>
  ScanStatus match(size_t i, size_t* end, F&& on_element_end) const;

 private:
  // Bit masks of one 64-byte block starting at `i` (spaces past the end).
  void block(size_t i, uint64_t* quote, uint64_t* backslash, uint64_t* open, uint64_t* close) const;
  const uint8_t* p_;
  size_t n_;
};

// Inline: it runs once per 64 bytes of the whole file.
inline void Scanner::block(size_t i, uint64_t* quote, uint64_t* backslash, uint64_t* open,
                           uint64_t* close) const {
  const uint8_t* src = p_ + i;
  alignas(16) uint8_t tail[64];
  if (n_ - i < 64) {
    // The last partial block: pad with spaces, which are never structural.
    std::memset(tail, ' ', sizeof tail);
    std::memcpy(tail, src, n_ - i);
    src = tail;
  }
  uint64_t q = 0, b = 0, o = 0, c = 0;
#if defined(__SSE2__)
  // '[' (0x5B) and '{' (0x7B) differ only in bit 0x20, as do ']' and '}', so
  // OR-ing 0x20 turns each pair into one comparison.
  const __m128i k20 = _mm_set1_epi8(0x20);
  for (int k = 0; k < 4; ++k) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * k));
    __m128i folded = _mm_or_si128(v, k20);
    auto mask = [&](__m128i eq) {
      return static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(eq))) << (16 * k);
    };
    q |= mask(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')));
    b |= mask(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
    o |= mask(_mm_cmpeq_epi8(folded, _mm_set1_epi8('{')));
    c |= mask(_mm_cmpeq_epi8(folded, _mm_set1_epi8('}')));
  }
#else
  for (int k = 0; k < 64; ++k) {
    uint64_t bit = uint64_t{1} << k;
    uint8_t ch = src[k];
    if (ch == '"') q |= bit;
    if (ch == '\\') b |= bit;
    if (ch == '{' || ch == '[') o |= bit;
    if (ch == '}' || ch == ']') c |= bit;
  }
#endif
  *quote = q;
  *backslash = b;
  *open = o;
  *close = c;
}

template <class F>
ScanStatus Scanner::match(size_t i, size_t* end, F&& on_element_end) const {
  int64_t depth = 0;
  uint64_t escape_carry = 0;     // 1: the first byte of the next block is escaped
  uint64_t in_string_carry = 0;  // all ones: the next block starts inside a string
  for (size_t base = i; base < n_; base += 64) {
    uint64_t quote, backslash, open, close;
    block(base, &quote, &backslash, &open, &close);
    // Escaped bytes: a backslash escapes the next byte unless it is itself
    // escaped. Backslashes are rare in traces, so a bit loop is fine.
    uint64_t escaped = escape_carry;
    escape_carry = 0;
    for (uint64_t b = backslash; b != 0; b &= b - 1) {
      int bit = __builtin_ctzll(b);
      if ((escaped >> bit) & 1) continue;
      if (bit == 63) {
        escape_carry = 1;
      } else {
        escaped |= uint64_t{1} << (bit + 1);
      }
    }
    // Inside-string mask by prefix XOR of the real quotes: bit k is set when an
    // odd number of quotes precede or sit at k (opening quote and contents).
    uint64_t x = quote & ~escaped;
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    uint64_t in_string = x ^ in_string_carry;
    in_string_carry = static_cast<uint64_t>(-static_cast<int64_t>(in_string >> 63));
    for (uint64_t s = (open | close) & ~in_string; s != 0; s &= s - 1) {
      int bit = __builtin_ctzll(s);
      size_t pos = base + static_cast<size_t>(bit);
      if ((open >> bit) & 1) {
        ++depth;
      } else {
        --depth;
        if (depth == 1) on_element_end(pos);
        if (depth <= 0) {
          *end = pos + 1;
          return depth == 0 ? ScanStatus::kOk : ScanStatus::kInvalid;
        }
      }
    }
    if (depth <= 0) return ScanStatus::kInvalid;  // `i` was not an opening bracket
  }
  return ScanStatus::kTruncated;
}

// ---- tables.cpp -----------------------------------------------------------

// Drops events whose `keep` flag is 0, then lanes and collectives that no
// event refers to any more, renumbering the survivors in order.
void compact(RankTrace& t, const std::vector<uint8_t>& keep);
// Shifts times so that the earliest event starts at 0 (adjusting origin_ns).
void rebase(RankTrace& t);
// Stable sort by (ts_ns asc, dur_ns desc, lane asc): parents before children.
void sort_events(RankTrace& t);
// Rebuilds t.steps from the ProfilerStep#N events on CPU threads.
void rebuild_steps(RankTrace& t);
// 2023-era traces give a collective's message size only on its `nccl:<collective>` annotation ("Input
// Dims", "Input type"), which the reader holds as that CPU event's CollectiveArgs. Each communication
// kernel without "In msg nelems" takes the size and dtype of the innermost such annotation around its
// launch (same thread, by correlation); then the annotations drop their args. Needs sorted events.
void attach_annotated_sizes(RankTrace& t);
// "[[394241]]" -> 394241, "[[2, 3], [4]]" -> 10 (each tensor's dims multiplied, the tensors summed;
// "[[]]", a scalar, is 1); kNone when malformed, empty or too large.
int64_t elements_of_input_dims(std::string_view dims);
// The first string of a JSON list: "[\"float\", \"\"]" -> float; "" when none.
std::string_view first_string_of(std::string_view list);
// Advises transparent huge pages for the whole 2 MiB pages inside [p, p+bytes)
// (a no-op for smaller ranges and where unsupported): fewer page faults when a
// big table is first written.
void advise_huge_pages(const void* p, size_t bytes);

}  // namespace emo::trace::detail
