// String interning: every name in a trace is stored once and referred to by a
// 32-bit StrId, so hot structs hold no std::string. Id 0 is the empty string.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace emo {

using StrId = uint32_t;
inline constexpr StrId kEmptyStr = 0;

class StringTable {
 public:
  StringTable();
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;
  StringTable(StringTable&&) = default;
  StringTable& operator=(StringTable&&) = default;

  StrId intern(std::string_view s);
  // Returns kEmptyStr and sets *found=false when `s` was never interned.
  StrId find(std::string_view s, bool* found = nullptr) const;
  std::string_view view(StrId id) const { return views_[id]; }
  size_t size() const { return views_.size(); }

 private:
  std::deque<std::string> storage_;  // deque: views stay valid on growth
  std::vector<std::string_view> views_;
  std::unordered_map<std::string_view, StrId> index_;
};

}  // namespace emo
