// Coarse-grained parallel loops over independent tasks (profiling runs, evaluation runs, replays of
// trial plans). Each task writes only its own output slot, so results do not depend on the number
// of threads; callers combine them in index order afterwards.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace emo {

// Threads a parallel loop may use: EMO_THREADS when set to a positive number, else the hardware's
// (at most 8).
int worker_threads();

// Runs fn(i) for every i in [0, n), on up to `max_threads` threads (the caller's among them), and
// returns once all have run. An exception thrown by a task is rethrown here (the first one).
template <class F>
void parallel_for(size_t n, F&& fn, int max_threads = worker_threads()) {
  const size_t threads = std::min<size_t>(n, size_t(std::max(1, max_threads)));
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace emo
