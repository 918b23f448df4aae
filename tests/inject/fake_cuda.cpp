// A stand-in libcuda.so.1 for the injection's tests: a host function enqueued on a stream runs at once
// (the GPU has reached it), and the calls are counted.
#include <atomic>

namespace {
std::atomic<int> g_host_funcs{0};
}

extern "C" {
int cuLaunchHostFunc(void*, void (*fn)(void*), void* data) {
  ++g_host_funcs;
  fn(data);
  return 0;
}
int emo_fake_cuda_host_funcs() { return g_host_funcs.load(); }
}
