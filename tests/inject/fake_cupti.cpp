// A stand-in libcupti.so.13 for the injection's tests: it keeps the subscriber's callback and lets the
// test driver play kernel launches into it, as CUPTI would on a GPU (API enter, then exit). A stream
// handle is its stream id.
#include <cupti.h>

#include <cstdint>
#include <set>
#include <utility>

namespace {
CUpti_CallbackFunc g_callback = nullptr;
void* g_user = nullptr;
std::set<std::pair<int, CUpti_CallbackId>> g_enabled;
}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  if (g_callback != nullptr) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_callback = callback;
  g_user = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_callback);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle) {
  g_callback = nullptr;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (enable != 0) g_enabled.insert({int(domain), cbid});
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetStreamIdEx(CUcontext, CUstream stream, uint8_t, uint32_t* id) {
  *id = uint32_t(reinterpret_cast<uintptr_t>(stream));
  return CUPTI_SUCCESS;
}

// One launch of kernel `symbol` on stream `stream`: through cudaLaunchKernel (runtime = 1; the
// runtime's own cuLaunchKernel follows inside it, as on hardware) or cuLaunchKernel alone (runtime = 0).
// Returns how many callbacks were made (0 when nothing subscribed).
int emo_fake_cupti_launch(const char* symbol, uint32_t stream, int runtime) {
  if (g_callback == nullptr) return 0;
  int made = 0;
  CUstream s = reinterpret_cast<CUstream>(uintptr_t(stream));
  cudaLaunchKernel_v7000_params rp{};
  rp.stream = reinterpret_cast<cudaStream_t>(s);
  cuLaunchKernel_params dp{};
  dp.hStream = s;
  auto call = [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params, CUpti_ApiCallbackSite site) {
    if (g_enabled.count({int(domain), cbid}) == 0) return;
    CUpti_CallbackData d{};
    d.callbackSite = site;
    d.symbolName = symbol;
    d.functionParams = params;
    g_callback(g_user, domain, cbid, &d);
    ++made;
  };
  auto driver = [&] {
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, CUPTI_API_ENTER);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, CUPTI_API_EXIT);
  };
  if (runtime != 0) {
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rp, CUPTI_API_ENTER);
    driver();
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rp, CUPTI_API_EXIT);
  } else {
    driver();
  }
  return made;
}

}  // extern "C"
