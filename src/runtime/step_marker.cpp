// Steps from kernel launches. See emo/runtime/step_marker.h.
#include "emo/runtime/step_marker.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "policy_json.h"

namespace emo::runtime {

Result<StepStart> step_start_from_policy(const std::string& text, int rank, const std::string& where) {
  using nlohmann::json;
  auto parsed = detail::parse_policy_json(text, where);
  if (!parsed) return parsed.error();
  json j = std::move(*parsed);
  if (!j.contains("ranks") || !j["ranks"].is_array())
    return make_error(where, "no ranks array", "write the policy with `emo optimize -o`");
  for (size_t i = 0; i < j["ranks"].size(); ++i) {
    const json& r = j["ranks"][i];
    if (!r.is_object() || !r.contains("rank") || !r["rank"].is_number_integer() || r["rank"].get<int64_t>() != rank) continue;
    const std::string at = fmt::format("{}: ranks[{}]", where, i);
    if (!r.contains("step_start"))
      return make_error(at, "has no step_start: the policy predates launch-driven runtimes, or the rank's step launches no kernel",
                        "rerun `emo optimize -o` on the trace");
    const json& s = r["step_start"];
    if (!s.is_object() || !s.contains("name") || !s["name"].is_string() || s["name"].get<std::string>().empty())
      return make_error(at + ".step_start", "name must be a kernel name");
    auto count = [&](const char* key, uint32_t& out) -> Status {
      if (!s.contains(key) || !s[key].is_number_integer() || s[key].get<int64_t>() < 1 || s[key].get<int64_t>() > (int64_t(1) << 31))
        return make_error(at + ".step_start", std::string(key) + " must be a whole number from 1");
      out = uint32_t(s[key].get<int64_t>());
      return {};
    };
    StepStart out;
    out.name = s["name"].get<std::string>();
    EMO_RETURN_IF_ERROR(count("per_step", out.per_step));
    EMO_RETURN_IF_ERROR(count("kernel_launches", out.kernel_launches));
    if (out.per_step > out.kernel_launches)
      return make_error(at + ".step_start", "per_step is more than kernel_launches");
    if (s.contains("stream")) {
      if (!s["stream"].is_number_integer()) return make_error(at + ".step_start", "stream must be an integer");
      out.stream = s["stream"].get<int64_t>();
    }
    if (s.contains("offset_us")) {
      if (!s["offset_us"].is_number() || !(s["offset_us"].get<double>() >= 0))
        return make_error(at + ".step_start", "offset_us must be a number, 0 or more");
      out.offset_us = s["offset_us"].get<double>();
    }
    return out;
  }
  return make_error(where, fmt::format("has no rank {}", rank), "the policy was made for other ranks");
}

StepMarker::Verdict StepMarker::on_launch(std::string_view name, int64_t stream) {
  const int64_t at = launches_++;
  if (lost()) return Verdict::kNone;
  const bool start = name == s_.name && (s_.stream < 0 || stream == s_.stream);
  if (synced_) {
    if (start && starts_in_ == s_.per_step) {  // the next step's start: the step before must be whole
      if (since_ != int64_t(s_.kernel_launches)) {
        lost_reason_ = fmt::format("step {} launched {} kernels, the policy's step launches {} (launch {})", steps_, since_,
                                   s_.kernel_launches, at);
        return Verdict::kLost;
      }
      ++steps_;
      since_ = 1;
      starts_in_ = 1;
      return Verdict::kStep;
    }
    ++since_;
    if (start) ++starts_in_;
    if (since_ > int64_t(s_.kernel_launches)) {
      lost_reason_ = fmt::format("step {} launched more than the policy's {} kernels (launch {})", steps_, s_.kernel_launches, at);
      return Verdict::kLost;
    }
    return Verdict::kNone;
  }
  if (!start) return Verdict::kNone;
  // A whole step behind this launch: the launch of the start kernel per_step launches of it ago,
  // exactly kernel_launches kernel launches ago.
  candidates_.push_back(at);
  if (candidates_.size() > s_.per_step + 1) candidates_.pop_front();
  if (candidates_.size() == s_.per_step + 1 && at - candidates_.front() == int64_t(s_.kernel_launches)) {
    synced_ = true;
    candidates_.clear();
    steps_ = 1;
    since_ = 1;
    starts_in_ = 1;
    return Verdict::kStep;
  }
  return Verdict::kNone;
}

}  // namespace emo::runtime
