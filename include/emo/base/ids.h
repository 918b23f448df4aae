// Strong id types for the ids that cross stage boundaries, so that one kind of number cannot be passed
// where another is meant: a rank's position in the step (graph::RankIndex, what indexes per-rank
// vectors) is not its rank number in the job (the trace's distributedInfo.rank, graph::Graph::rank_id).
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>

namespace emo {

template <class Tag, class T = uint32_t>
class StrongId {
 public:
  constexpr StrongId() = default;
  constexpr explicit StrongId(T v) : v_(v) {}
  constexpr T value() const { return v_; }
  constexpr size_t index() const { return size_t(v_); }  // for indexing the vectors this id names
  friend constexpr auto operator<=>(StrongId, StrongId) = default;

 private:
  T v_ = 0;
};

}  // namespace emo
