// The injection's test driver: a "CUDA job" whose kernel launches go through the stand-in CUPTI.
// usage: inject_driver LIBEMO_INJECT WARMUP STEPS [CHANGE_AT]
// loads the injection as CUDA would (dlopen + InitializeInjection), then launches WARMUP irregular
// steps and STEPS regular ones (kernel_a(float*) x2, kernel_c, kernel_d on stream 7, 1 ms apart;
// kernel_c through the driver API), the steps from CHANGE_AT on with one more kernel. Prints how many
// host functions (anchors) were enqueued.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

extern "C" int emo_fake_cupti_launch(const char* symbol, unsigned stream, int runtime);
extern "C" int emo_fake_cuda_host_funcs();

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: inject_driver LIBEMO_INJECT WARMUP STEPS [CHANGE_AT]\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (lib == nullptr) {
    std::fprintf(stderr, "inject_driver: %s\n", dlerror());
    return 1;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
  if (init == nullptr) {
    std::fprintf(stderr, "inject_driver: no InitializeInjection\n");
    return 1;
  }
  init();
  const int warmup = std::atoi(argv[2]), steps = std::atoi(argv[3]), change_at = argc > 4 ? std::atoi(argv[4]) : -1;
  const char* a = "_Z8kernel_aPf";  // kernel_a(float*)
  for (int w = 0; w < warmup; ++w) {  // autotuning: other kernels, kernel_a once
    emo_fake_cupti_launch(a, 7, 1);
    for (int k = 0; k < 3 + w; ++k) emo_fake_cupti_launch("autotune_probe", 7, 1);
  }
  for (int s = 0; s < steps; ++s) {
    emo_fake_cupti_launch(a, 7, 1);
    emo_fake_cupti_launch("kernel_b", 9, 1);  // another stream
    emo_fake_cupti_launch(a, 7, 1);
    emo_fake_cupti_launch("kernel_c", 7, 0);
    if (change_at >= 0 && s >= change_at) emo_fake_cupti_launch("kernel_extra", 7, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("anchors %d\n", emo_fake_cuda_host_funcs());
  return 0;  // the injection's atexit handler stops the runtime and writes the report
}
