// Thread count for parallel_for; see emo/base/parallel.h.
#include "emo/base/parallel.h"

#include <cstdlib>

namespace emo {

int worker_threads() {
  if (const char* env = std::getenv("EMO_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1) return int(std::min<long>(v, 64));
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return int(std::clamp<unsigned>(hw, 1, 8));
}

}  // namespace emo
