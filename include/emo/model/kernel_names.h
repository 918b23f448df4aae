// What a GPU kernel's name says about it, for the model side (packing, the per-phase baseline): its
// role (compute-, memory- or communication-bound) and the training phase it belongs to. A public
// heuristic over the names PyTorch, cuBLAS/CUTLASS, FlashAttention and the communication libraries give their kernels;
// profiling refines the role. (The emulated GPU keeps its own classifier, except for communication, which
// both take from emo/base/comm_kernels.h.)
#pragma once

#include <cstdint>
#include <string_view>

namespace emo::model {

// communication (emo::is_communication_kernel, emo/base/comm_kernels.h: NCCL, RCCL, MSCCL(++), NVSHMEM,
// DeepEP, c10d / symmetric memory, custom all-reduce, ...) -> communication; gemm, xmma, cutlass, matmul, flash, fmha, attention, conv, wgmma, sm80_, sm90_
// -> compute; anything else (elementwise, reductions, copies) -> memory.
enum class KernelRole : uint8_t { kCompute, kMemory, kCommunication };

// communication -> communication; adam, sgd, optim, multi_tensor, foreach -> optimizer; backward, bwd, grad
// (dgrad, wgrad) -> backward; anything else -> forward. The values index per-phase tables (0 … 3).
enum class Phase : uint8_t { kForward = 0, kBackward = 1, kOptimizer = 2, kCommunication = 3 };
inline constexpr int kPhases = 4;

const char* to_string(KernelRole r);
const char* to_string(Phase p);

struct KernelNameClass {
  KernelRole role = KernelRole::kMemory;
  Phase phase = Phase::kForward;
};

// Both classes of a kernel name, matched case-insensitively (the name is lowercased once).
KernelNameClass classify_kernel_name(std::string_view name);

}  // namespace emo::model
