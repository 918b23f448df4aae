// StringTable: intern strings once, hand out dense 32-bit ids.
#include "emo/base/strings.h"

namespace emo {

StringTable::StringTable() { intern(""); }

StrId StringTable::intern(std::string_view s) {
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  storage_.emplace_back(s);
  std::string_view v = storage_.back();
  auto id = static_cast<StrId>(views_.size());
  views_.push_back(v);
  index_.emplace(v, id);
  return id;
}

StrId StringTable::find(std::string_view s, bool* found) const {
  auto it = index_.find(s);
  if (found) *found = it != index_.end();
  return it == index_.end() ? kEmptyStr : it->second;
}

}  // namespace emo
