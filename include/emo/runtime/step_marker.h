// Steps found in a stream of kernel launches, for a runtime driving a job it cannot change (the CUPTI
// injection, libemo_inject.so): the policy file says, per rank, which kernel starts the step (its name
// and stream), how many launches of it a step makes and how many kernel launches a step makes in all
// (`ranks[].step_start`, written by `emo optimize`). The marker sees every kernel launch of the
// process in API order and says when one starts a step.
//
// It syncs before it anchors: a step is first recognised where two launches of the start kernel,
// `per_step` launches of it apart, enclose exactly the policy's kernel count (warm-up iterations that
// autotune or compile launch other kernels, and are passed over). From then on every `per_step`-th
// launch of the start kernel starts a step, and each step must launch the policy's kernel count: the
// first that does not loses the marker for good (the job changed, or the policy is not its), and the
// runtime drops the policy rather than guess.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "emo/base/result.h"

namespace emo::runtime {

struct StepStart {
  std::string name;           // the start kernel's name, as the trace has it
  int64_t stream = -1;        // its stream id (-1: any stream)
  uint32_t per_step = 1;      // launches of it (on that stream) per step
  uint32_t kernel_launches = 0;  // kernel launches per step, all kernels
  double offset_us = 0;       // its start after the step's first GPU op's (the anchor is earlier by this)
};

// `ranks[]` entry of rank `rank` of a policy file's text: its step_start. Errors name `where`.
Result<StepStart> step_start_from_policy(const std::string& text, int rank, const std::string& where);

class StepMarker {
 public:
  explicit StepMarker(StepStart start) : s_(std::move(start)) {}
  enum class Verdict : uint8_t { kNone, kStep, kLost };
  // One kernel launch, before it is enqueued. kStep: this launch starts a step (anchor before it);
  // kLost: the step that this launch ends did not launch the policy's kernels (said by lost_reason()).
  Verdict on_launch(std::string_view name, int64_t stream);
  bool synced() const { return synced_; }
  bool lost() const { return !lost_reason_.empty(); }
  const std::string& lost_reason() const { return lost_reason_; }
  int64_t steps() const { return steps_; }        // steps started since the sync
  int64_t launches() const { return launches_; }  // kernel launches seen
  const StepStart& start() const { return s_; }

 private:
  StepStart s_;
  bool synced_ = false;
  std::string lost_reason_;
  int64_t steps_ = 0, launches_ = 0;
  int64_t since_ = 0;       // synced: kernel launches since the step's start
  uint32_t starts_in_ = 0;  // synced: launches of the start kernel in this step
  // Not synced yet: the launch counts at the last per_step + 1 launches of the start kernel.
  std::deque<int64_t> candidates_;
};

}  // namespace emo::runtime
