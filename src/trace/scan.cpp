// A structural pre-scan of a JSON buffer: where each top-level value and each
// traceEvents element ends. The reader uses it to hand simdjson one chunk of
// events at a time, so simdjson's structural index covers a chunk, not the file
// (that index is about half the size of the input; a whole-file parse would
// push the reader's peak memory well past the file size).
#include <cstring>

#include "detail.h"

namespace emo::trace::detail {

namespace {

bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

size_t Scanner::skip_ws(size_t i) const {
  while (i < n_ && is_ws(p_[i])) ++i;
  return i;
}

ScanStatus Scanner::skip_string(size_t i, size_t* end) const {
  size_t j = i + 1;
  while (j < n_) {
    const void* q = std::memchr(p_ + j, '"', n_ - j);
    if (q == nullptr) return ScanStatus::kTruncated;
    size_t k = static_cast<size_t>(static_cast<const uint8_t*>(q) - p_);
    // The quote ends the string unless an odd run of backslashes precedes it:
    // "a\"b" continues, "a\\" ends.
    size_t run = 0;
    while (k - run > i + 1 && p_[k - run - 1] == '\\') ++run;
    if (run % 2 == 0) {
      *end = k + 1;
      return ScanStatus::kOk;
    }
    j = k + 1;
  }
  return ScanStatus::kTruncated;
}

ScanStatus Scanner::skip_value(size_t i, size_t* end) const {
  if (i >= n_) return ScanStatus::kTruncated;
  uint8_t c = p_[i];
  if (c == '"') return skip_string(i, end);
  if (c == '{' || c == '[') return match(i, end, [](size_t) {});
  if (c == ',' || c == ':' || c == '}' || c == ']') return ScanStatus::kInvalid;
  // A number or literal runs to the next delimiter.
  size_t j = i;
  while (j < n_ && !is_ws(p_[j]) && p_[j] != ',' && p_[j] != '}' && p_[j] != ']' && p_[j] != ':') ++j;
  *end = j;
  return ScanStatus::kOk;
}

}  // namespace emo::trace::detail
