// What the benchmarks that time stages by hand share: seconds since a moment, the median of the reps.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace emo::bench {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The upper median (the value at index n/2 of the sorted values); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace emo::bench
