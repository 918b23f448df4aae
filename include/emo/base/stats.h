// Order statistics shared by the stages (the model check, calibration, the graph builder).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace emo {

// The median: the middle value, or the mean of the two middle values for an even count; 0 when empty.
double median(std::vector<double> v);

// The upper median: the value at index n/2 of the sorted values (for an even count the upper of the two
// middle ones, never a mean, so it is always one of the values); `fallback` when empty. Partially
// reorders `v` in place (std::nth_element) rather than copying it.
template <class T>
T upper_median(std::vector<T>& v, T fallback) {
  if (v.empty()) return fallback;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace emo
