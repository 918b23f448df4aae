// Exact parsing of the number tokens a trace holds. Kineto writes µs with up
// to three decimals ("ts": 1365627862757.064); going through double and
// multiplying by 1000 can land one ns off for 16-digit values, so the decimal
// digits are read as integers instead and rounded half away from zero.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "detail.h"

namespace emo::trace::detail {

namespace {

constexpr uint64_t kMaxI64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_json_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Fallback for exponent forms ("1.5e3"): through double, which is exact enough
// for the rare trace that writes them.
bool parse_double_token(std::string_view s, double* out) {
  char tmp[64];
  if (s.empty() || s.size() >= sizeof tmp) return false;
  std::memcpy(tmp, s.data(), s.size());
  tmp[s.size()] = '\0';
  char* end = nullptr;
  double v = std::strtod(tmp, &end);
  if (end != tmp + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// Reads an optional '-' and at least one digit from s[*i...], accumulating the
// digits into *v while it stays <= limit; false when there is no digit or the
// value exceeds limit. Leaves *i at the first non-digit.
bool read_sign_and_digits(std::string_view s, size_t* i, bool* neg, uint64_t limit, uint64_t* v) {
  *neg = *i < s.size() && s[*i] == '-';
  if (*neg) ++*i;
  if (*i >= s.size() || !is_digit(s[*i])) return false;
  *v = 0;
  for (; *i < s.size() && is_digit(s[*i]); ++*i) {
    const auto d = static_cast<uint64_t>(s[*i] - '0');
    if (*v > (limit - d) / 10) return false;
    *v = *v * 10 + d;
  }
  return true;
}

}  // namespace

std::string_view trim_ws(std::string_view s) {
  while (!s.empty() && is_json_ws(s.back())) s.remove_suffix(1);
  return s;
}

bool parse_us_to_ns(std::string_view tok, int64_t* ns) {
  std::string_view s = trim_ws(tok);
  size_t i = 0;
  bool neg = false;
  uint64_t us = 0;
  if (!read_sign_and_digits(s, &i, &neg, kMaxI64 / 1000, &us)) return false;
  // Example: "12.3456" -> int 12, first three decimals 345, fourth 6 rounds up
  // -> 12346 ns.
  uint64_t frac = 0;
  int nfrac = 0;
  bool round_up = false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || !is_digit(s[i])) return false;
    for (; i < s.size() && is_digit(s[i]); ++i) {
      if (nfrac < 3) {
        frac = frac * 10 + static_cast<uint64_t>(s[i] - '0');
      } else if (nfrac == 3) {
        round_up = s[i] >= '5';
      }
      ++nfrac;
    }
    for (int k = nfrac; k < 3; ++k) frac *= 10;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    double v = 0;
    if (!parse_double_token(s, &v)) return false;
    double x = v * 1000.0;
    if (!(std::fabs(x) < 9.2e18)) return false;
    *ns = std::llround(x);
    return true;
  }
  if (i != s.size()) return false;
  uint64_t v = us * 1000 + frac + (round_up ? 1 : 0);
  if (v > kMaxI64) return false;
  *ns = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

bool parse_int(std::string_view tok, int64_t* out) {
  std::string_view s = trim_ws(tok);
  size_t i = 0;
  bool neg = false;
  uint64_t v = 0;
  if (!read_sign_and_digits(s, &i, &neg, kMaxI64 + 1, &v)) return false;
  // "7.0" is still the integer 7; "7.5" is not an integer.
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size()) return false;
    for (; i < s.size(); ++i) {
      if (s[i] != '0') return false;
    }
  }
  if (i != s.size()) return false;
  if (neg) {
    if (v > kMaxI64 + 1) return false;
    *out = v == kMaxI64 + 1 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(v);
  } else {
    if (v > kMaxI64) return false;
    *out = static_cast<int64_t>(v);
  }
  return true;
}

bool parse_int_text(std::string_view s, int64_t* v) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return parse_int(s, v);
}

}  // namespace emo::trace::detail
