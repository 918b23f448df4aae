// The kernel-name classifier (see emo/model/kernel_names.h).
#include "emo/model/kernel_names.h"

#include "emo/base/comm_kernels.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>

namespace emo::model {

namespace {

bool has_any(const std::string& s, std::initializer_list<const char*> keys) {
  return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.find(k) != std::string::npos; });
}

// `comm`: emo::is_communication_kernel of the original name (emo/base/comm_kernels.h).
KernelRole role_of(const std::string& s, bool comm) {
  if (comm) return KernelRole::kCommunication;
  if (has_any(s, {"gemm", "xmma", "cutlass", "matmul", "flash", "fmha", "attention", "conv", "wgmma", "sm80_", "sm90_"}))
    return KernelRole::kCompute;
  return KernelRole::kMemory;
}

Phase phase_of(const std::string& s, bool comm) {
  if (comm) return Phase::kCommunication;
  if (has_any(s, {"adam", "sgd", "optim", "multi_tensor", "foreach"})) return Phase::kOptimizer;
  if (has_any(s, {"backward", "bwd", "grad", "dgrad", "wgrad"})) return Phase::kBackward;
  return Phase::kForward;
}

}  // namespace

const char* to_string(KernelRole r) {
  switch (r) {
    case KernelRole::kCompute: return "compute";
    case KernelRole::kMemory: return "memory";
    case KernelRole::kCommunication: return "communication";
  }
  return "memory";
}

const char* to_string(Phase p) {
  switch (p) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kCommunication: return "communication";
  }
  return "forward";
}

KernelNameClass classify_kernel_name(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const bool comm = is_communication_kernel(name);
  return {role_of(s, comm), phase_of(s, comm)};
}

}  // namespace emo::model
