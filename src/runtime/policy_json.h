// Reading a policy file (emo-policy/1) as JSON: shared by the runtime's readers of it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "emo/base/result.h"

namespace emo::runtime::detail {

// The document, or an Error at `where`: not JSON, or not a policy file (schema emo-policy/1).
inline Result<nlohmann::json> parse_policy_json(const std::string& text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return make_error(where, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("schema") || j["schema"] != "emo-policy/1")
    return make_error(where, "not a policy file (schema emo-policy/1)", "write one with `emo optimize -o`");
  return j;
}

}  // namespace emo::runtime::detail
