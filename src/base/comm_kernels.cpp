// The communication-kernel classifier (see emo/base/comm_kernels.h).
#include "emo/base/comm_kernels.h"

#include <array>
#include <string>

namespace emo {

namespace {

bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_lower(c) || is_upper(c) || is_digit(c); }

// The name's words, lower-case, each followed by '_' and the whole preceded by '_': "_nccl_dev_kernel_".
void words_of(std::string_view name, std::string* out) {
  out->assign(1, '_');
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!is_alnum(c)) {
      if (out->back() != '_') out->push_back('_');
      continue;
    }
    if (is_upper(c) && i > 0 && out->back() != '_') {
      const char prev = name[i - 1];
      const bool next_lower = i + 1 < name.size() && is_lower(name[i + 1]);
      // "allReduce" -> all reduce; "EPDispatch" -> ep dispatch (an upper-case run ends before the
      // capital that starts the next word).
      if (is_lower(prev) || is_digit(prev) || (is_upper(prev) && next_lower)) out->push_back('_');
    }
    out->push_back(is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c);
  }
  if (out->back() != '_') out->push_back('_');
}

bool has(const std::string& s, std::string_view needle) { return s.find(needle) != std::string::npos; }

struct Rule {
  std::string_view words;  // searched in the word string
  CommLibrary library;
};

// Libraries first (a word starting with the library's name, or its namespace), then collective words.
constexpr std::array<Rule, 23> kRules{{
    {"_nccl", CommLibrary::kNccl},
    {"_rccl", CommLibrary::kRccl},
    {"_msccl", CommLibrary::kMsccl},
    {"_nvshmem", CommLibrary::kNvshmem},
    {"_deep_ep_", CommLibrary::kDeepEp},
    {"_deepep_", CommLibrary::kDeepEp},
    {"_dpsk_ep_", CommLibrary::kDeepEp},  // DeepSeek's in-house build: dpsk::ep::internode::dispatch
    {"_uccl", CommLibrary::kUccl},
    {"_c10d_", CommLibrary::kTorch},
    {"_symm_mem_", CommLibrary::kTorch},
    {"_cross_device_reduce_", CommLibrary::kCustomAllReduce},
    {"_all_reduce_", CommLibrary::kOther},
    {"_allreduce_", CommLibrary::kOther},
    {"_all_gather_", CommLibrary::kOther},
    {"_allgather_", CommLibrary::kOther},
    {"_reduce_scatter_", CommLibrary::kOther},
    {"_reducescatter_", CommLibrary::kOther},
    {"_all_to_all_", CommLibrary::kOther},
    {"_all_to_allv_", CommLibrary::kOther},
    {"_alltoall_", CommLibrary::kOther},
    {"_alltoallv_", CommLibrary::kOther},
    {"_send_recv_", CommLibrary::kOther},
    {"_sendrecv_", CommLibrary::kOther},
}};

}  // namespace

const char* to_string(CommLibrary l) {
  switch (l) {
    case CommLibrary::kNone: return "none";
    case CommLibrary::kNccl: return "nccl";
    case CommLibrary::kRccl: return "rccl";
    case CommLibrary::kMsccl: return "msccl";
    case CommLibrary::kNvshmem: return "nvshmem";
    case CommLibrary::kDeepEp: return "deepep";
    case CommLibrary::kUccl: return "uccl";
    case CommLibrary::kTorch: return "c10d";
    case CommLibrary::kCustomAllReduce: return "custom_all_reduce";
    case CommLibrary::kOther: return "other";
  }
  return "none";
}

CommLibrary communication_library(std::string_view name) {
  thread_local std::string w;
  words_of(name, &w);
  // Triton kernels are generated code around the ops (fused copies named after the collective they
  // feed); the first word after an optional return type says so.
  const size_t first = w.compare(0, 6, "_void_") == 0 ? 5 : 0;
  if (w.compare(first, 7, "_triton") == 0) return CommLibrary::kNone;
  if (has(w, "_get_dispatch_layout_")) return CommLibrary::kNone;  // DeepEP's local token count
  // The leftmost match names the library: "rcclGenericKernel(ncclDevComm*)" is RCCL's,
  // "c10d::nvshmem_extension::allToAllV" PyTorch's; at one position, the first rule. Every rule
  // starts at a word's '_', so only those positions are tried, in order.
  const std::string_view ws = w;
  for (size_t pos = ws.find('_'); pos != std::string_view::npos; pos = ws.find('_', pos + 1)) {
    if (pos + 1 == ws.size()) break;
    const char next = ws[pos + 1];
    for (const Rule& r : kRules) {
      if (r.words[1] == next && ws.compare(pos, r.words.size(), r.words) == 0) return r.library;
    }
  }
  return CommLibrary::kNone;
}

bool has_nccl_name(std::string_view name) {
  auto lower = [](char c) { return is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c; };
  if (name.size() < 4) return false;
  const std::string p{lower(name[0]), lower(name[1]), lower(name[2]), lower(name[3])};
  return p == "nccl" || p == "rccl";
}

}  // namespace emo
