// Power integration of one emulated GPU over a run, swept step by step as the run goes (see
// EnergySweep in emulator_detail.h).
#include <algorithm>
#include <limits>

#include "emulator_detail.h"

namespace emo::emulator::detail {

void EnergySweep::add_op(int64_t begin, int64_t end, uint32_t truth) {
  const uint64_t i = ops_++;
  pending_.push_back({begin, i, truth, 2});
  pending_.push_back({end, i, truth, 0});
}

size_t EnergySweep::ask(int64_t when) {
  const size_t slot = answers_.size();
  answers_.push_back(0.0);
  if (when > 0) questions_.emplace_back(when, slot);  // at or before 0: no energy yet
  return slot;
}

void EnergySweep::point(int64_t t, double e) {
  // The integral is linear between breakpoints: a question between the last one and this is answered
  // on that segment.
  for (; next_question_ < questions_.size() && questions_[next_question_].first < t; ++next_question_) {
    const auto& [when, slot] = questions_[next_question_];
    const double span = double(t - last_t_);
    answers_[slot] = last_e_ + (e - last_e_) * (span > 0 ? double(when - last_t_) / span : 0.0);
  }
  last_t_ = t;
  last_e_ = e;
}

void EnergySweep::recompute() {
  const GpuTruth& gpu = truths_->gpu();
  if (running_.empty()) {
    power_ = gpu.idle_power_w(f_);
    return;
  }
  double sum = 0, mx = 0;
  for (const auto& [truth, op] : running_) {
    const double d = truths_->dynamic_part_w(truth, f_);
    sum += d;
    mx = std::max(mx, d);
  }
  const uint32_t front = running_.front().first;
  const double stat = truths_->power_w(front, f_) - truths_->dynamic_part_w(front, f_);
  power_ = std::min(gpu.tdp_w, stat + mx + 0.25 * (sum - mx));
}

void EnergySweep::sweep(int64_t safe, int64_t end, bool final) {
  const std::vector<int64_t>& ct = *clock_t_;
  if (!started_) {
    // The clock at time 0 is the last change that takes effect by then: every such change is known once
    // nothing added later may come before a time past 0.
    if (!final && safe <= 0) return;
    started_ = true;
    f_ = clock_f_->front();
    for (size_t i = 1; i < ct.size() && ct[i] <= 0; ++i) f_ = (*clock_f_)[i];
    power_ = truths_->gpu().idle_power_w(f_);
  }
  for (; next_clock_ < ct.size() && (final || ct[next_clock_] < safe); ++next_clock_)
    pending_.push_back({ct[next_clock_], next_clock_, 0, 1});
  std::sort(pending_.begin(), pending_.end(), [](const Event& a, const Event& b) {
    if (a.t != b.t) return a.t < b.t;
    if (a.type != b.type) return a.type < b.type;
    return a.idx < b.idx;
  });
  // The questions not answered yet (the last sweep dropped the answered ones), in time order.
  std::sort(questions_.begin(), questions_.end());
  const int64_t last = final ? end : std::numeric_limits<int64_t>::max();
  size_t k = 0;
  for (; k < pending_.size() && (final || pending_[k].t < safe); ++k) {
    const Event& x = pending_[k];
    const int64_t at = std::clamp<int64_t>(x.t, 0, last);
    if (at > now_) {
      e_ += power_ * double(at - now_) * 1e-9;
      now_ = at;
      point(now_, e_);
    }
    if (x.type == 2) {
      if (running_.empty()) busy_since_ = at;
      running_.emplace_back(x.truth, x.idx);
    } else if (x.type == 0) {
      auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& r) { return r.second == x.idx; });
      if (it != running_.end()) running_.erase(it);
      if (running_.empty() && busy_since_ >= 0) busy_ns_ += at - busy_since_;
    } else {
      f_ = (*clock_f_)[x.idx];
    }
    recompute();
  }
  pending_.erase(pending_.begin(), pending_.begin() + std::ptrdiff_t(k));
  questions_.erase(questions_.begin(), questions_.begin() + std::ptrdiff_t(next_question_));
  next_question_ = 0;
  if (!final) return;
  if (end > now_) {
    e_ += power_ * double(end - now_) * 1e-9;
    now_ = end;
    point(now_, e_);
  }
  for (size_t q = next_question_; q < questions_.size(); ++q)
    answers_[questions_[q].second] = last_e_;  // at or past the last breakpoint
  questions_.clear();
  next_question_ = 0;
}

}  // namespace emo::emulator::detail
