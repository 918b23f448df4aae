// Communication beyond NCCL (docs/replay.md "Communication beyond NCCL"): the shared classifier
// (emo/base/comm_kernels.h) on the kernel names the libraries give, the same answer in every place
// that decides "communication" (model roles and phases, pack boundness, the emulated GPU's truth
// class, the graph's node kind), matching across ranks with and without collective metadata, and
// tracelens' B200 trace whose symmetric-memory all-reduce kernels used to count as compute.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../../src/emulator/truth.h"
#include "emo/analysis/analysis.h"
#include "emo/base/comm_kernels.h"
#include "emo/model/kernel_names.h"
#include "emo/pack/pack.h"
#include "test_util.h"
#include "trace_json.h"

namespace emo {
namespace {

using test::TraceJson;

void expect_library(const std::string& name, CommLibrary want) {
  EXPECT_EQ(std::string(to_string(communication_library(name))), to_string(want)) << name;
}

TEST(CommKernels, EveryLibrarysKernelsAreCommunication) {
  // NCCL and RCCL (RCCL keeps NCCL's names; rccl* is its own prefix).
  expect_library("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", CommLibrary::kNccl);
  expect_library("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", CommLibrary::kNccl);
  expect_library("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", CommLibrary::kNccl);
  expect_library("rcclGenericKernel<1, false>(ncclDevComm*, unsigned long, ncclWork*)", CommLibrary::kRccl);
  // MSCCL and MSCCL++.
  expect_library("mscclKernel_Sum_float_LL128(ncclDevComm*, mscclAlgo*, mscclWork*)", CommLibrary::kMsccl);
  expect_library("void mscclpp::executionKernel<__nv_bfloat16>(int, __nv_bfloat16*, __nv_bfloat16*)",
                 CommLibrary::kMsccl);
  // NVSHMEM's own kernels.
  expect_library("nvshmemi_init_array_kernel(unsigned long*, int)", CommLibrary::kNvshmem);
  expect_library("void nvshmemx_barrier_all_on_stream_kernel()", CommLibrary::kNvshmem);
  // DeepEP: normal (intranode / internode) and low-latency kernels, and their notify steps.
  expect_library("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*)",
                 CommLibrary::kDeepEp);
  expect_library("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*)",
                 CommLibrary::kDeepEp);
  expect_library("void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*)",
                 CommLibrary::kDeepEp);
  expect_library("void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int, int, int**, int)",
                 CommLibrary::kDeepEp);
  expect_library("void deep_ep::internode::dispatch<false, 2, 8, 1, 10, 8, 16>(int4*, float*, long*)",
                 CommLibrary::kDeepEp);
  expect_library("void deep_ep::internode::combine<2, 8, 1, 10, 8, 16>(int4*, float*, bool const*)",
                 CommLibrary::kDeepEp);
  expect_library("void deep_ep::internode_ll::dispatch<true, 3, 7168>(void*, float*, int*, long*)",
                 CommLibrary::kDeepEp);
  expect_library("void deep_ep::internode_ll::combine<3, 7168, 128>(void*, void*, int*, void const*)",
                 CommLibrary::kDeepEp);
  expect_library("DeepEPDispatchKernel", CommLibrary::kDeepEp);
  // DeepSeek's in-house build of DeepEP (deepseek-ai/profile-data, train.json: DualPipe on H800).
  expect_library("void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*, int, int const*)",
                 CommLibrary::kDeepEp);
  expect_library("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*, float*)",
                 CommLibrary::kDeepEp);
  expect_library("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*)",
                 CommLibrary::kDeepEp);
  expect_library("void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int)",
                 CommLibrary::kDeepEp);
  expect_library("void uccl::intranode::notify_dispatch<8>(int const*, int*, int)", CommLibrary::kUccl);
  // PyTorch: c10d's symmetric-memory, NVSHMEM all-to-all and intra-node kernels.
  expect_library("void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 16, 8>(float**, unsigned long)",
                 CommLibrary::kTorch);
  expect_library("c10d::nvshmem_extension::allToAllV(void*, void*, long*, long*, long, long)", CommLibrary::kTorch);
  expect_library("void c10d::intra_node_comm::twoShotAllReduceKernel<8>(at::BFloat16*, unsigned long)",
                 CommLibrary::kTorch);
  // Custom all-reduce of vLLM / SGLang.
  expect_library("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
                 CommLibrary::kCustomAllReduce);
  expect_library("void sglang::cross_device_reduce_2stage<float, 4>(sglang::RankData*)",
                 CommLibrary::kCustomAllReduce);
  // Collective words in other libraries' kernels (camelCase or snake_case).
  expect_library("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)",
                 CommLibrary::kOther);
  expect_library("void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(AllReduceParams)",
                 CommLibrary::kOther);
  expect_library("allreduce_fusion_kernel_oneshot_lamport<float, 8>", CommLibrary::kOther);
  expect_library("void all_to_all_v_kernel(float*, int*)", CommLibrary::kOther);
  expect_library("reduce_scatter_kernel<float>", CommLibrary::kOther);
}

TEST(CommKernels, LookalikesAreNotCommunication) {
  for (const std::string name : {
           // "small_gather" holds "all_gather" only across a word boundary.
           "void at::native::(anonymous namespace)::index_select_small_gather_kernel<float>(float*)",
           "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t>>",
           "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
           "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas",
           // Triton code generated around a collective is local work.
           "triton_poi_fused_all_gather_copy_in_0",
           "triton_red_fused__to_copy_all_reduce_sum_1",
           // DeepEP's layout kernel only counts tokens on this GPU.
           "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*)",
           "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*)",
           // DeepSeek's other in-house kernels are compute.
           "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>(dpsk::Params)",
           "Memcpy DtoD (Device -> Device)",
           "",
           "::<>()",
           "nccl",  // too short to be anything but the library's word: still communication below
       }) {
    if (name == "nccl") {
      EXPECT_TRUE(is_communication_kernel(name));
      continue;
    }
    EXPECT_FALSE(is_communication_kernel(name)) << name;
  }
  // A very long template name is scanned without trouble.
  std::string huge = "void cutlass::Kernel<" + std::string(100000, 'x') + "_all_reduce>";
  EXPECT_TRUE(is_communication_kernel(huge));
  EXPECT_FALSE(is_communication_kernel(std::string(100000, 'y')));
}

TEST(CommKernels, NcclStructuredNamesAreOnlyNcclAndRccl) {
  EXPECT_TRUE(has_nccl_name("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"));
  EXPECT_TRUE(has_nccl_name("NCCLKERNEL"));
  EXPECT_TRUE(has_nccl_name("rcclGenericKernel"));
  EXPECT_FALSE(has_nccl_name("void deep_ep::intranode::dispatch<8>"));
  EXPECT_FALSE(has_nccl_name("ncc"));
  EXPECT_FALSE(has_nccl_name(""));
}

TEST(CommKernels, EveryPlaceThatDecidesCommunicationAgrees) {
  const std::vector<std::string> names = {
      "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)",
      "void deep_ep::internode_ll::combine<3, 7168, 128>(void*)",
      "nvshmemi_init_array_kernel(unsigned long*, int)",
      "void mscclpp::executionKernel<float>(int, float*)",
      "void vllm::cross_device_reduce_1stage<float, 8>(vllm::RankData*)",
      "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)",
      "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
  };
  for (const std::string& n : names) {
    SCOPED_TRACE(n);
    const model::KernelNameClass c = model::classify_kernel_name(n);
    EXPECT_EQ(c.role, model::KernelRole::kCommunication);
    EXPECT_EQ(c.phase, model::Phase::kCommunication);
    EXPECT_EQ(pack::boundness_of_name(n, false), pack::Boundness::kCommunication);
    EXPECT_EQ(emulator::detail::classify_kernel(n), emulator::detail::KernelClass::kCommunication);
  }
  // And none of them calls a GEMM communication.
  const std::string gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas";
  EXPECT_NE(model::classify_kernel_name(gemm).role, model::KernelRole::kCommunication);
  EXPECT_NE(emulator::detail::classify_kernel(gemm), emulator::detail::KernelClass::kCommunication);
}

// Two ranks run a DeepEP dispatch. Rank 0 computes P [10,100] and arrives at 101; rank 1 computes
// Q [10,300] and arrives at 301; both dispatch kernels end at 360 (transfer 59 µs).
const char* kDispatch = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)";

std::vector<std::string> two_rank_dispatch(const std::string& meta) {
  return {TraceJson(0, 2).launch("P", 7, 0, 10, 90, 1).launch(kDispatch, 7, 5, 101, 259, 2, 1, meta).str(),
          TraceJson(1, 2).launch("Q", 7, 0, 10, 290, 1).launch(kDispatch, 7, 5, 301, 59, 2, 1, meta).str()};
}

int64_t comm_kernels(const graph::Graph& g) {
  int64_t n = 0;
  for (auto k : g.kind) n += k == graph::NodeKind::kCommKernel;
  return n;
}

int64_t kept_whole_row(const trace::RankTrace& t) {
  for (const auto& row : t.stats.rows) {
    if (row.what.find("communication kernels without collective metadata") != std::string::npos) {
      EXPECT_FALSE(row.is_error);
      return row.count;
    }
  }
  return 0;
}

TEST(CommKernels, NonNcclKernelsWithGroupMetadataAreMatchedAcrossRanks) {
  auto w = test::workload_of(two_rank_dispatch(R"("Collective name":"all_to_all","Process Group Name":"ep","Seq":3)"));
  EXPECT_EQ(comm_kernels(w.graph), 2);
  EXPECT_EQ(w.graph.stats.collectives_matched, 1);
  EXPECT_EQ(w.graph.stats.collectives_unmatched, 0);
  EXPECT_EQ(kept_whole_row(w.ranks[0]) + kept_whole_row(w.ranks[1]), 0);
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, 360'000);
  // Matched: rank 0's long kernel is mostly wait, so P may grow by 200 µs; the transfer (59 µs)
  // is communication on the critical path.
  int64_t comm_ns = -1;
  for (const auto& p : a.critical_path.breakdown) {
    if (p.category == "communication") comm_ns = p.ns;
  }
  EXPECT_EQ(comm_ns, 59'000);
  std::vector<analysis::Scale> faster{*analysis::parse_scale("^Q$=0.5")};
  auto r = analysis::what_if(w, faster);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->predicted_span_ns, 215'000);  // rank 1 arrives at 156, transfer [156,215]
}

TEST(CommKernels, NonNcclKernelsWithoutMetadataStayWholeAndAreCounted) {
  auto w = test::workload_of(two_rank_dispatch(""));
  // Still communication kernels (node kind, breakdown, packing) ...
  EXPECT_EQ(comm_kernels(w.graph), 2);
  // ... but nothing says which kernels of the two ranks belong together: not matched, counted.
  EXPECT_EQ(w.graph.stats.collectives_matched, 0);
  EXPECT_EQ(w.graph.stats.collectives_unmatched, 2);
  EXPECT_EQ(kept_whole_row(w.ranks[0]), 1);
  EXPECT_EQ(kept_whole_row(w.ranks[1]), 1);
  auto a = analysis::analyze(w);
  EXPECT_EQ(a.replayed_span_ns, 360'000);
  // Kept whole: rank 0's kernel keeps its measured 259 µs, so a slower P delays the step.
  for (graph::NodeId n = 0; n < w.graph.num_nodes(); ++n) {
    if (w.graph.kind[n] == graph::NodeKind::kCommKernel) {
      EXPECT_EQ(w.graph.dur_ns[n], w.graph.meas_end_ns[n] - w.graph.meas_start_ns[n]);
    }
  }
  // The critical path runs through a whole dispatch kernel: that time is communication, not compute.
  int64_t comm_ns = 0, compute_ns = 0;
  for (const auto& p : a.critical_path.breakdown) {
    if (p.category == "communication") comm_ns = p.ns;
    if (p.category == "gpu_compute") compute_ns = p.ns;
  }
  EXPECT_GE(comm_ns, 59'000);
  EXPECT_LE(compute_ns, 290'000);
  const nlohmann::json j = analysis::to_json(w, a, false);
  int64_t rows = 0;
  for (const auto& row : j["import_stats"]["events"]) {
    if (row["what"].get<std::string>().find("without collective metadata") != std::string::npos) {
      rows += row["count"].get<int64_t>();
    }
  }
  EXPECT_EQ(rows, 2);
}

TEST(CommKernels, NcclNamedKernelsWithoutMetadataAreStillMatchedByOccurrence) {
  const std::string k = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
  auto w = test::workload_of({TraceJson(0, 2).launch("P", 7, 0, 10, 90, 1).launch(k, 7, 5, 101, 259, 2).str(),
                              TraceJson(1, 2).launch("Q", 7, 0, 10, 290, 1).launch(k, 7, 5, 301, 59, 2).str()});
  EXPECT_EQ(w.graph.stats.collectives_matched, 1);
  EXPECT_EQ(kept_whole_row(w.ranks[0]), 0);
}

TEST(CommKernels, SymmetricMemoryAllReduceOnB200IsCommunication) {
  EMO_REQUIRE_SHARED(path, "traces/tracelens/tests/traces/b200/eager_trace.json.gz");
  auto w = analysis::load({path}, {});
  ASSERT_TRUE(w.ok()) << w.error().message();
  const graph::Graph& g = w->graph;
  int64_t multimem = 0, nccl = 0;
  for (graph::NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!graph::is_gpu(g.kind[n])) continue;
    const std::string_view name = g.strings.view(g.name[n]);
    const bool mm = name.find("multimem_all_reduce_kernel") != std::string_view::npos;
    const bool nc = name.starts_with("nccl");
    multimem += mm;
    nccl += nc;
    if (mm || nc) {
      EXPECT_EQ(g.kind[n], graph::NodeKind::kCommKernel) << name;
      EXPECT_EQ(pack::boundness_of_name(name, false), pack::Boundness::kCommunication) << name;
    } else if (g.kind[n] == graph::NodeKind::kCommKernel) {
      ADD_FAILURE() << "unexpected communication kernel " << name;
    }
  }
  ASSERT_GT(multimem, 0) << "the trace's symmetric-memory all-reduce kernels";
  // One rank of eight: every communication kernel stays whole; the multimem ones (no collective
  // metadata in the trace) are the import-stats row.
  EXPECT_EQ(g.stats.collectives_matched, 0);
  EXPECT_EQ(g.stats.collectives_unmatched, multimem + nccl);
  EXPECT_EQ(kept_whole_row(w->ranks[0]), multimem);
  auto a = analysis::analyze(*w);
  EXPECT_LE(std::abs(a.replay_error_pct), 1.0);
  // Packing sees communication where these kernels run.
  auto p = pack::make_packs(*w, a, test::profile("h100"));
  ASSERT_TRUE(p.ok()) << p.error().message();
  int comm_atoms = 0;
  for (const auto& at : p->atoms) comm_atoms += at.bound == pack::Boundness::kCommunication;
  EXPECT_GT(comm_atoms, 0);
}

}  // namespace
}  // namespace emo
