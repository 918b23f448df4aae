// The model side's kernel-name classifier (emo/model/kernel_names.h) on names as real traces give
// them, and pack::boundness_of_name built on it.
#include <gtest/gtest.h>

#include <string>

#include "emo/model/kernel_names.h"
#include "emo/pack/pack.h"

namespace emo::model {
namespace {

void expect_class(const std::string& name, KernelRole role, Phase phase) {
  const KernelNameClass c = classify_kernel_name(name);
  EXPECT_EQ(to_string(c.role), std::string(to_string(role))) << name;
  EXPECT_EQ(to_string(c.phase), std::string(to_string(phase))) << name;
}

TEST(KernelNames, NcclKernelsAreCommunicationInEveryNaming) {
  // NCCL 2.4–2.18: one kernel per collective, algorithm, protocol, op and type.
  expect_class("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", KernelRole::kCommunication,
               Phase::kCommunication);
  expect_class("ncclAllReduceRingLLKernel_sum_f32(ncclColl)", KernelRole::kCommunication, Phase::kCommunication);
  expect_class("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", KernelRole::kCommunication,
               Phase::kCommunication);
  // NCCL 2.19+: ncclDevKernel_*, taking the device communicator.
  expect_class("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
               KernelRole::kCommunication, Phase::kCommunication);
  expect_class("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
               KernelRole::kCommunication, Phase::kCommunication);
  expect_class("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", KernelRole::kCommunication,
               Phase::kCommunication);
  // "nccl" wins over every other keyword (a gradient allreduce is communication, not backward).
  expect_class("ncclDevKernel_AllReduce_Sum_f16_RING_LL_grad_bucket", KernelRole::kCommunication,
               Phase::kCommunication);
}

TEST(KernelNames, GemmsAreComputeWhateverTheLibrary) {
  // cuBLAS on Hopper (sm90 warpgroup MMA) and Ampere.
  expect_class("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
               "kernel__5x_cublas",
               KernelRole::kCompute, Phase::kForward);
  expect_class("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn", KernelRole::kCompute, Phase::kForward);
  // CUTLASS templates.
  expect_class("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_bf16_128x128_32x3_nn_align4>(cutlass_80_tensorop_"
               "s1688gemm_bf16_128x128_32x3_nn_align4::Params)",
               KernelRole::kCompute, Phase::kForward);
  expect_class("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, "
               "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized> > >(Params)",
               KernelRole::kCompute, Phase::kForward);
  // Name prefixes alone (sm80_/sm90_ kernels without "gemm" in the name) and matching in any case.
  expect_class("sm80_xmma_fprop_implicit_precomp_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32", KernelRole::kCompute,
               Phase::kForward);
  expect_class("SM90_WGMMA_KERNEL", KernelRole::kCompute, Phase::kForward);
  expect_class("void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int)",
               KernelRole::kCompute, Phase::kForward);
}

TEST(KernelNames, AttentionKernelsAreCompute) {
  expect_class("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
               "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, "
               "false>(Flash_fwd_params)",
               KernelRole::kCompute, Phase::kForward);
  expect_class("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, "
               "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
               KernelRole::kCompute, Phase::kForward);
  expect_class("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, "
               "8, 2, 4, 2, false, false, cutlass::bfloat16_t> >(Flash_bwd_params)",
               KernelRole::kCompute, Phase::kBackward);
}

TEST(KernelNames, ElementwiseAndReductionsAreMemory) {
  expect_class("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
               "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, "
               "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl, at::detail::Array<char*, 2>)",
               KernelRole::kMemory, Phase::kForward);
  expect_class("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
               "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
               KernelRole::kMemory, Phase::kForward);
  expect_class("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>, "
               "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float>, unsigned int, "
               "float, 4>)",
               KernelRole::kMemory, Phase::kForward);
  expect_class("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
               "::{lambda()#3}::operator()() const::{lambda(float)#1}>(int)",
               KernelRole::kMemory, Phase::kForward);
}

TEST(KernelNames, BackwardKernels) {
  expect_class("void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl("
               "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}>(int)",
               KernelRole::kMemory, Phase::kBackward);
  expect_class("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<float, float>(float const*, "
               "float const*, float const*, float const*, float const*, float*, int)",
               KernelRole::kMemory, Phase::kBackward);
  expect_class("void at::native::embedding_backward_feature_kernel<float, float, long>(long const*, float const*, "
               "float*, int, long, int)",
               KernelRole::kMemory, Phase::kBackward);
  // Convolution's data and weight gradients: compute-bound backward work.
  expect_class("sm80_xmma_dgrad_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize64x64x64_stage4_"
               "warpsize2x2x1_g1_tensor16x8x16_kernel",
               KernelRole::kCompute, Phase::kBackward);
  expect_class("sm90_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", KernelRole::kCompute,
               Phase::kBackward);
}

TEST(KernelNames, OptimizerKernels) {
  // torch.optim's fused and foreach paths (multi_tensor_apply), and the AMP unscale.
  expect_class("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
               "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
               "(at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, float*, "
               "float*>(at::native::(anonymous namespace)::TensorListMetadata<4>)",
               KernelRole::kMemory, Phase::kOptimizer);
  expect_class("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
               "TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, "
               "std::multiplies<float>, float>(...)",
               KernelRole::kMemory, Phase::kOptimizer);
  expect_class("void at::native::(anonymous namespace)::_amp_foreach_non_finite_check_and_unscale_cuda_kernel(float*)",
               KernelRole::kMemory, Phase::kOptimizer);
  expect_class("FusedSgdMathFunctor<float, 2>", KernelRole::kMemory, Phase::kOptimizer);
  // The optimizer wins over backward where a name has both (a fused step reading the gradients).
  expect_class("void multi_tensor_apply_kernel<TensorListMetadata<4>, FusedAdamMathFunctor<float, 4> >(float const* "
               "grad_scale_ptr)",
               KernelRole::kMemory, Phase::kOptimizer);
}

TEST(KernelNames, EmptyAndPlainNames) {
  expect_class("", KernelRole::kMemory, Phase::kForward);
  expect_class("Memset (Device)", KernelRole::kMemory, Phase::kForward);
  expect_class("kernel", KernelRole::kMemory, Phase::kForward);
}

TEST(KernelNames, PhaseValuesIndexPerPhaseTables) {
  EXPECT_EQ(static_cast<int>(Phase::kForward), 0);
  EXPECT_EQ(static_cast<int>(Phase::kBackward), 1);
  EXPECT_EQ(static_cast<int>(Phase::kOptimizer), 2);
  EXPECT_EQ(static_cast<int>(Phase::kCommunication), 3);
  EXPECT_EQ(kPhases, 4);
}

TEST(KernelNames, BoundnessOfNameFollowsTheRole) {
  using pack::Boundness;
  EXPECT_EQ(pack::boundness_of_name("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", false),
            Boundness::kCommunication);
  EXPECT_EQ(pack::boundness_of_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", false),
            Boundness::kCompute);
  EXPECT_EQ(pack::boundness_of_name("void at::native::vectorized_elementwise_kernel<4, AddFunctor<float> >(int)", false),
            Boundness::kMemory);
  // A copy is memory-bound whatever its name says.
  EXPECT_EQ(pack::boundness_of_name("Memcpy DtoD (Device -> Device) gemm", true), Boundness::kMemory);
  EXPECT_EQ(pack::boundness_of_name("ncclDevKernel_SendRecv", true), Boundness::kMemory);
}

}  // namespace
}  // namespace emo::model
