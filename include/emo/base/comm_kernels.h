// Which GPU kernels are communication: the one classifier that the trace reader (which kernels are
// collective kernels), the graph (their node kind), the analysis breakdown, packing (boundness and
// phase) and the emulated GPU (its truth class) all use. docs/replay.md "Communication beyond NCCL"
// lists the names and what is matched across ranks.
//
// A name is split into lower-case words at every non-alphanumeric character, at each lower-case or
// digit → upper-case step and before the last capital of a capital run that a lower-case letter
// follows ("ncclDevKernel_AllReduce" → nccl dev kernel all reduce, "DeepEPDispatch" → deep ep
// dispatch, "deep_ep::intranode::dispatch<8>" → deep ep intranode dispatch 8). It is communication when
//   - a word starts with a communication library's name: nccl, rccl, msccl (MSCCL and MSCCL++),
//     nvshmem, uccl; or the words hold the namespaces deep_ep / DeepEP, c10d, symm_mem;
//   - or the words hold a collective: all reduce / allreduce, all gather / allgather,
//     reduce scatter / reducescatter, all to all / alltoall(v), send recv / sendrecv, and vLLM's and
//     SGLang's custom all-reduce (cross_device_reduce_1stage / _2stage);
// except Triton kernels ("triton_…": code generated from the ops around a collective, e.g. a fused
// copy named after all_gather_copy_in) and DeepEP's get_dispatch_layout (a local count of tokens).
// Words must match whole, so "small_gather" is not "all gather". The leftmost match names the library
// ("rcclGenericKernel(ncclDevComm*)" is RCCL's).
#pragma once

#include <cstdint>
#include <string_view>

namespace emo {

enum class CommLibrary : uint8_t {
  kNone,          // not communication
  kNccl,          // nccl* (NCCL; RCCL keeps NCCL's kernel names)
  kRccl,          // rccl*
  kMsccl,         // msccl*, mscclpp* (MSCCL, MSCCL++)
  kNvshmem,       // nvshmem*
  kDeepEp,        // deep_ep:: / DeepEP (intranode, internode, internode_ll dispatch / combine / notify)
  kUccl,          // uccl* (UCCL-EP)
  kTorch,         // c10d:: and symm_mem (PyTorch's symmetric-memory and intra-node collectives)
  kCustomAllReduce,  // cross_device_reduce_* (vLLM / SGLang custom all-reduce)
  kOther,         // a collective word in another library's kernel (e.g. multimem_all_reduce_kernel)
};

const char* to_string(CommLibrary l);  // "nccl", "deepep", ..., "none"

// The communication library a kernel name belongs to, kNone when it is not communication.
CommLibrary communication_library(std::string_view kernel_name);

inline bool is_communication_kernel(std::string_view kernel_name) {
  return communication_library(kernel_name) != CommLibrary::kNone;
}

// NCCL-structured names (nccl* / rccl*): the name itself says which collective it is, so such a
// kernel is matched across ranks by occurrence even without the trace's collective metadata.
bool has_nccl_name(std::string_view kernel_name);

}  // namespace emo
