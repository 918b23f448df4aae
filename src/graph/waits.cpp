// Name predicates of host waits (include/emo/graph/waits.h).
#include "emo/graph/waits.h"

#include <array>

namespace emo::graph {

namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// (file, function) of the Python frames that block: the file is matched by its
// base name, so `multiprocessing/connection.py` and `connection.py` both count.
struct WaitFrame {
  std::string_view file;
  std::string_view function;
};
constexpr std::array<WaitFrame, 16> kWaitFrames{{
    {"threading.py", "wait"},
    {"threading.py", "join"},
    {"threading.py", "_wait_for_tstate_lock"},
    {"connection.py", "_recv"},
    {"connection.py", "_recv_bytes"},
    {"connection.py", "recv"},
    {"connection.py", "recv_bytes"},
    {"connection.py", "_poll"},
    {"connection.py", "poll"},
    {"connection.py", "wait"},
    {"selectors.py", "select"},
    {"queue.py", "get"},
    {"queues.py", "get"},
    {"queues.py", "_poll"},
    // A DataLoader iterator waiting for a batch from its workers (idle until one arrives).
    {"dataloader.py", "_try_get_data"},
    {"dataloader.py", "_get_data"},
}};

}  // namespace

bool is_blocked_wait_frame(std::string_view name) {
  // Built-ins: "<built-in function sleep>", "<built-in method acquire of _thread.lock
  // object at 0x7f...>", "<method 'acquire' of '_thread.lock' objects>",
  // "<built-in method poll of select.epoll object at ...>", "<built-in function select>".
  if (starts_with(name, "<built-in function sleep>") || starts_with(name, "<built-in function select>") ||
      starts_with(name, "time.sleep")) {
    return true;
  }
  if (starts_with(name, "<built-in method acquire of _thread.") || starts_with(name, "<method 'acquire' of '_thread.")) {
    return true;
  }
  if (starts_with(name, "<built-in method ") && contains(name, " of select.")) {
    return true;  // poll / select / wait of select.poll, select.epoll, select.kqueue
  }
  // Python frames: "path/file.py(LINE): function".
  const size_t paren = name.rfind(".py(");
  if (paren == std::string_view::npos) return false;
  const size_t colon = name.find("): ", paren);
  if (colon == std::string_view::npos) return false;
  std::string_view file = name.substr(0, paren + 3);
  const size_t slash = file.find_last_of("/\\");
  if (slash != std::string_view::npos) file = file.substr(slash + 1);
  const std::string_view function = name.substr(colon + 3);
  for (const WaitFrame& w : kWaitFrames) {
    if (file == w.file && function == w.function) return true;
  }
  return false;
}

bool is_gpu_query(std::string_view name) {
  return name == "cudaEventQuery" || name == "cudaStreamQuery" || name == "hipEventQuery" ||
         name == "hipStreamQuery" || name == "cuEventQuery" || name == "cuStreamQuery";
}

bool is_launch_call(std::string_view name) {
  if (contains(name, "HostFunc")) return false;
  return contains(name, "Launch") || contains(name, "Memcpy") || contains(name, "Memset");
}

}  // namespace emo::graph
