// What a CUDA runtime, CUDA driver or HIP runtime call means for the dependency graph. Kineto records
// all three under cat "cuda_runtime" / "cuda_driver" (ROCm traces too); the HIP calls have the CUDA
// semantics they share. docs/replay.md "AMD (ROCm/HIP) runtime calls" holds the table of names.
#pragma once

#include <cstdint>
#include <string_view>

namespace emo::trace {

enum class RuntimeCall : uint8_t {
  kOther,            // a plain call: allocation, attribute query, graph capture, ... (CPU time only)
  kLaunchKernel,     // puts one kernel on a stream (cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel, ...)
  kGraphLaunch,      // puts a whole graph's kernels on a stream (cudaGraphLaunch, hipGraphLaunch)
  kMemcpyAsync,      // puts a copy on a stream (cudaMemcpyAsync, hipMemcpyAsync, ...)
  kMemcpy,           // a copy that returns after it finished (cudaMemcpy, hipMemcpyWithStream, ...)
  kMemset,           // puts a memset on a stream (cudaMemsetAsync, hipMemsetAsync, cuMemsetD32, ...)
  kDeviceSync,       // waits for every stream of the device (cudaDeviceSynchronize, cuCtxSynchronize, ...)
  kStreamSync,       // waits for one stream (cudaStreamSynchronize, hipStreamSynchronize)
  kEventSync,        // waits for an event (cudaEventSynchronize, hipEventSynchronize)
  kQuery,            // polls an event or stream without blocking (cudaEventQuery, cudaStreamQuery)
  kEventRecord,      // records an event on a stream (cudaEventRecord, hipEventRecord)
  kStreamWaitEvent,  // makes a stream wait for an event (cudaStreamWaitEvent, hipStreamWaitEvent)
  kHostFunc,         // enqueues a host callback (cudaLaunchHostFunc): no GPU operation
};

const char* to_string(RuntimeCall c);  // "launch_kernel", "graph_launch", ..., "other"

// Case-insensitive, by the call's verb after its API prefix (cuda / cu / hip), so that versioned and
// per-thread-stream spellings (cuLaunchKernelEx, cudaMemcpyAsync_ptsz, cuMemsetD32Async_v2) mean
// what their base call means.
RuntimeCall classify_runtime_call(std::string_view name);

// Calls that put work on a GPU stream, linked to it by correlation.
inline bool launches_gpu_work(RuntimeCall c) {
  return c == RuntimeCall::kLaunchKernel || c == RuntimeCall::kGraphLaunch || c == RuntimeCall::kMemcpyAsync ||
         c == RuntimeCall::kMemcpy || c == RuntimeCall::kMemset;
}

}  // namespace emo::trace
