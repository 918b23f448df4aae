// Names of host waits: the CPU events that are a thread blocked, not working
// (docs/replay.md, "Threads that only wait" and "Host polling is a GPU→CPU wait").
#pragma once

#include <string_view>

namespace emo::graph {

// A Python frame (python_function event) that blocks its thread until something
// else happens: `threading.py(359): wait`, `multiprocessing/connection.py(379): _recv`,
// `selectors.py(415): select`, `queue.py(171): get`, `<built-in function sleep>`,
// `<built-in method acquire of _thread.lock object at 0x...>`, a DataLoader
// iterator waiting for its workers (`dataloader.py(...): _try_get_data`). Its time,
// and that of every frame inside it, is a wait on whatever thread it runs.
bool is_blocked_wait_frame(std::string_view name);

// A runtime/driver call that asks whether GPU work has finished without blocking
// (cudaEventQuery, cudaStreamQuery, hip*/cu* spellings): a run of them is a host
// polling loop.
bool is_gpu_query(std::string_view name);

// A runtime/driver call that starts GPU work (cudaLaunchKernel, cuLaunchKernelEx,
// cudaGraphLaunch, hipLaunchKernel, cudaMemcpy*, cudaMemset*), whether or not its
// GPU op is in the trace; not cudaLaunchHostFunc, which starts none.
bool is_launch_call(std::string_view name);

}  // namespace emo::graph
