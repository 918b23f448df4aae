// The workload programs (train-dp, train-pp, train-tp, infer-decode,
// dataloader). Operator names, nesting and kernel
// names follow what PyTorch 2.x eager mode records on an H100; durations come
// from a roofline (bf16 GEMMs at ~650 TFLOP/s, memory-bound kernels at
// ~2.8 TB/s) so that they scale with the tensor sizes the way real ones do.
#include "workloads.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace emo::synth::detail {
namespace {

enum Kernel : int {
  kIndexSelect,
  kLayerNormFwd,
  kGemmTn256,
  kGemmTn128,
  kGemmNn,
  kGemmNt,
  kGemmTn64,
  kCopy,
  kFlashFwd,
  kDropout,
  kAdd,
  kGelu,
  kLogSoftmaxFwd,
  kNllFwd,
  kNllBwd,
  kLogSoftmaxBwd,
  kFill,
  kDropoutBwd,
  kSumReduce,
  kGeluBwd,
  kLayerNormBwdInput,
  kLayerNormBwdGammaBeta,
  kFlashBwdDot,
  kFlashBwd,
  kFlashBwdConvert,
  kEmbeddingBwd,
  kMul,
  kNcclAllReduce,
  kAdamW,
  kRmsNorm,
  kFusedAddRmsNorm,
  kSiluAndMul,
  kFlashDecode,
  kArgmax,
  kNcclSendRecv,
  kNcclBroadcast,
  kForeachNorm,
  kForeachMul,
  kMaxReduce,
  kExp,
  kToBf16,
  kConvFprop,
  kConvDgrad,
  kConvWgrad,
  kBnStats,
  kBnTransform,
  kBnBwdReduce,
  kBnBwdElemt,
  kRelu,
  kReluBwd,
  kMaxPool,
  kMaxPoolBwd,
  kMeanReduce,
  kNumKernels
};

// Launch geometry as CUPTI reports it; blocks/warps per SM follow from grid and block on 132 SMs.
std::string geometry(int regs, int smem, int gx, int gy, int gz, int bx, int occupancy) {
  double blocks = static_cast<double>(gx) * gy * gz;
  double blocks_per_sm = blocks / 132.0;
  double warps_per_sm = blocks_per_sm * (bx / 32.0);
  return fmt::format(
      "\"registers per thread\": {},      \"shared memory\": {},      \"blocks per SM\": {:.6f},"
      "      \"warps per SM\": {:.6f},      \"grid\": [{}, {}, {}],      \"block\": [{}, 1, 1],"
      "      \"est. achieved occupancy %\": {}",
      regs, smem, blocks_per_sm, warps_per_sm, gx, gy, gz, bx, occupancy);
}

// ---- roofline durations (µs) ------------------------------------------------
double gemm_us(double m, double n, double k) { return 2.0 * m * n * k / 6.5e8 + 4.0; }
double mem_us(double bytes) { return bytes / 2.8e6 + 2.5; }
double attn_us(double batch, double seq, double hidden, bool causal) {
  double flops = 4.0 * batch * seq * seq * hidden * (causal ? 0.5 : 1.0);
  return flops / 3.5e8 + 5.0;
}

// ---- record_shapes args -----------------------------------------------------
constexpr const char* kBf16 = "c10::BFloat16";
constexpr const char* kLong = "long int";
constexpr const char* kScalar = "Scalar";
constexpr const char* kEmpty = "";

struct Input {
  std::initializer_list<int64_t> dims;
  const char* type = kBf16;
  const char* concrete = kEmpty;
};

// As PyTorch writes them: "Concrete Inputs", "Input type", "Input Strides"
// (contiguous), "Input Dims".
std::string shape_text(std::initializer_list<Input> inputs) {
  fmt::memory_buffer b;
  auto out = fmt::appender(b);
  auto list = [&](auto&& one) {
    b.push_back('[');
    bool first = true;
    for (const Input& in : inputs) {
      if (!first) fmt::format_to(out, ", ");
      first = false;
      one(in);
    }
    b.push_back(']');
  };
  fmt::format_to(out, "\"Concrete Inputs\": ");
  list([&](const Input& in) { fmt::format_to(out, "\"{}\"", in.concrete); });
  fmt::format_to(out, ", \"Input type\": ");
  list([&](const Input& in) { fmt::format_to(out, "\"{}\"", in.type); });
  fmt::format_to(out, ", \"Input Strides\": ");
  list([&](const Input& in) {
    std::vector<int64_t> dims(in.dims), strides(dims.size());
    int64_t acc = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      strides[i] = acc;
      acc *= dims[i];
    }
    fmt::format_to(out, "[{}]", fmt::join(strides, ", "));
  });
  fmt::format_to(out, ", \"Input Dims\": ");
  list([&](const Input& in) { fmt::format_to(out, "[{}]", fmt::join(in.dims, ", ")); });
  return fmt::to_string(b);
}

// ---- program helpers -------------------------------------------------------
class Prog {
 public:
  Prog(Sim& s, Catalog& c) : s_(s), c_(c) {}
  Sim& sim() { return s_; }
  uint32_t name(std::string_view literal) { return c_.names.id(literal); }

  template <class F>
  void op(std::string_view n, double pre, F&& body, double post, int args = kNoArgs) {
    s_.push(RangeCat::kCpuOp, name(n), pre, args);
    body();
    s_.pop(post);
  }
  template <class F>
  void annotation(uint32_t id, double pre, F&& body, double post) {
    s_.push(RangeCat::kUserAnnotation, id, pre);
    body();
    s_.pop(post);
  }
  template <class F>
  void annotation(std::string_view n, double pre, F&& body, double post) {
    annotation(name(n), pre, body, post);
  }
  void leaf(std::string_view n, double pre, double post, int args = kNoArgs) {
    s_.push(RangeCat::kCpuOp, name(n), pre, args);
    s_.pop(post);
  }
  // An op whose only GPU work is one kernel.
  void kop(std::string_view n, double pre, int kernel, double us, double post, int args = kNoArgs) {
    op(n, pre, [&] { s_.launch(kernel, us); }, post, args);
  }
  void cpu(double us) { s_.cpu(us); }
  // record_shapes arguments of an op, interned: the texts are built once per
  // distinct input list (the key hashes the literal pointers and the dims).
  int shapes(std::initializer_list<Input> inputs) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (const Input& in : inputs) {
      mix(reinterpret_cast<uintptr_t>(in.type));
      mix(reinterpret_cast<uintptr_t>(in.concrete));
      mix(in.dims.size());
      for (int64_t d : in.dims) mix(static_cast<uint64_t>(d));
    }
    auto it = c_.shape_ids.find(h);
    if (it != c_.shape_ids.end()) return it->second;
    int id = static_cast<int>(c_.args.size());
    c_.args.push_back(shape_text(inputs));
    c_.shape_ids.emplace(h, id);
    return id;
  }
  void gemm(int kernel, double us) { s_.launch(kernel, us, kComputeStream, LaunchApi::kLaunchKernelExC); }

 private:
  Sim& s_;
  Catalog& c_;
};

// ---- train-dp: GPT-style decoder, hidden 2048, FFN 8192, 2 x 2048 tokens, bf16 ----
constexpr double kH = 2048, kFfn = 8192, kTokens = 4096, kVocab = 32000;
constexpr int64_t kLayerParams = static_cast<int64_t>(12 * kH * kH + 13 * kH);
constexpr int64_t kEmbedParams = static_cast<int64_t>(kVocab * kH);
constexpr double kAct = kTokens * kH * 2;  // bytes of one [tokens, hidden] bf16 activation

// Slots of the CUDA events the program records.
constexpr int kSlotGradsReady = 0;  // compute stream, before each bucket's allreduce
constexpr int kSlotTimer = 1;       // end-of-step timing event
constexpr int kSlotBucketBase = 2;  // comm stream, after bucket b's allreduce

void linear_fwd(Prog& p, int kernel, double m, double n, double k, bool bias) {
  const int64_t M = static_cast<int64_t>(m), N = static_cast<int64_t>(n), K = static_cast<int64_t>(k);
  const int64_t B = 2, S = M / B;
  int lin = bias ? p.shapes({{{B, S, K}}, {{N, K}}, {{N}}}) : p.shapes({{{B, S, K}}, {{N, K}}, {{}, kEmpty}});
  p.op("aten::linear", 3.0, [&] {
    p.op("aten::t", 1.5, [&] { p.leaf("aten::transpose", 1.2, 0.8); }, 0.6, p.shapes({{{N, K}}}));
    if (bias) {
      int addmm = p.shapes({{{N}}, {{M, K}}, {{K, N}}, {{}, kScalar, "1"}, {{}, kScalar, "1"}});
      p.op("aten::addmm", 5.0, [&] { p.gemm(kernel, gemm_us(m, n, k)); }, 2.0, addmm);
    } else {
      p.op("aten::matmul", 3.0, [&] {
        p.op("aten::mm", 4.0, [&] { p.gemm(kernel, gemm_us(m, n, k)); }, 2.0, p.shapes({{{M, K}}, {{K, N}}}));
      }, 1.5, p.shapes({{{B, S, K}}, {{K, N}}}));
    }
  }, 1.0, lin);
}

int add_shape(Prog& p) {
  return p.shapes({{{2, 2048, 2048}}, {{2, 2048, 2048}}, {{}, kScalar, "1"}});
}

void layer_norm_fwd(Prog& p) {
  int args = p.shapes({{{2, 2048, 2048}}, {{}, "ScalarList", "[2048]"}, {{2048}}, {{2048}}, {{}, kScalar, "1e-05"}});
  p.op("aten::layer_norm", 3.0, [&] {
    p.kop("aten::native_layer_norm", 5.0, kLayerNormFwd, mem_us(2 * kAct), 2.0, args);
  }, 1.0, args);
}

void dropout_fwd(Prog& p) {
  int args = p.shapes({{{2, 2048, 2048}}, {{}, kScalar, "0.1"}, {{}, kScalar, "True"}});
  p.op("aten::dropout", 2.0, [&] {
    p.kop("aten::native_dropout", 5.0, kDropout, mem_us(2.5 * kAct), 2.0, args);
  }, 1.0, args);
}

void train_layer_fwd(Prog& p) {
  layer_norm_fwd(p);
  linear_fwd(p, kGemmTn256, kTokens, 3 * kH, kH, true);
  p.op("aten::contiguous", 2.0, [&] {
    p.op("aten::clone", 3.0, [&] {
      p.leaf("aten::empty_like", 2.0, 1.0);
      p.kop("aten::copy_", 4.0, kCopy, mem_us(2 * kAct), 2.0,
            p.shapes({{{2, 16, 2048, 128}}, {{2, 16, 2048, 128}}, {{}, kScalar, "False"}}));
    }, 1.0, p.shapes({{{2, 16, 2048, 128}}, {{}, kEmpty}}));
  }, 1.0, p.shapes({{{2, 16, 2048, 128}}, {{}, kScalar, "0"}}));
  const int qkv = p.shapes({{{2, 16, 2048, 128}}, {{2, 16, 2048, 128}}, {{2, 16, 2048, 128}},
                           {{}, kScalar, "0.1"}, {{}, kScalar, "True"}});
  p.op("aten::scaled_dot_product_attention", 4.0, [&] {
    p.op("aten::_scaled_dot_product_flash_attention", 4.0, [&] {
      p.kop("aten::_flash_attention_forward", 6.0, kFlashFwd, attn_us(2, 2048, kH, true), 3.0, qkv);
    }, 1.5, qkv);
  }, 1.0, qkv);
  linear_fwd(p, kGemmTn128, kTokens, kH, kH, true);
  dropout_fwd(p);
  p.kop("aten::add", 4.0, kAdd, mem_us(3 * kAct), 1.5, add_shape(p));
  layer_norm_fwd(p);
  linear_fwd(p, kGemmTn256, kTokens, kFfn, kH, true);
  p.kop("aten::gelu", 4.0, kGelu, mem_us(2 * kAct * kFfn / kH), 1.5,
        p.shapes({{{2, 2048, 8192}}, {{}, "std::string_view", "none"}}));
  linear_fwd(p, kGemmTn256, kTokens, kH, kFfn, true);
  dropout_fwd(p);
  p.kop("aten::add", 4.0, kAdd, mem_us(3 * kAct), 1.5, add_shape(p));
  p.cpu(6.0);  // Python between modules
}

template <class F>
void autograd_node(Prog& p, std::string_view engine_name, std::string_view node, F&& body) {
  p.op(engine_name, 4.0, [&] { p.op(node, 2.0, body, 1.5); }, 2.0);
}

void accumulate_grad(Prog& p) {
  p.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 3.0, [&] {
    p.op("torch::autograd::AccumulateGrad", 2.0, [&] {
      p.op("aten::detach", 1.5, [&] { p.leaf("detach", 1.0, 0.5); }, 0.5);
    }, 1.0);
  }, 1.0);
}

// dgrad = dY·W, wgrad = dYᵀ·X, bias grad = sum over tokens.
void addmm_bwd(Prog& p, double m, double n, double k) {
  const int64_t M = static_cast<int64_t>(m), N = static_cast<int64_t>(n), K = static_cast<int64_t>(k);
  autograd_node(p, "autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0", [&] {
    p.leaf("aten::t", 1.5, 0.8, p.shapes({{{K, N}}}));
    p.op("aten::mm", 4.0, [&] { p.gemm(kGemmNn, gemm_us(m, k, n)); }, 2.0, p.shapes({{{M, N}}, {{N, K}}}));
    p.leaf("aten::t", 1.5, 0.8, p.shapes({{{M, N}}}));
    p.op("aten::mm", 4.0, [&] { p.gemm(kGemmNt, gemm_us(n, k, m)); }, 2.0, p.shapes({{{N, M}}, {{M, K}}}));
    p.kop("aten::sum", 5.0, kSumReduce, mem_us(m * n * 2), 2.0,
          p.shapes({{{M, N}}, {{}, "ScalarList", "[0]"}, {{}, kScalar, "True"}, {{}, kEmpty}}));
  });
  accumulate_grad(p);
}

void dropout_bwd(Prog& p) {
  autograd_node(p, "autograd::engine::evaluate_function: NativeDropoutBackward0",
                "NativeDropoutBackward0",
                [&] {
                  p.kop("aten::native_dropout_backward", 4.0, kDropoutBwd, mem_us(2.5 * kAct), 1.5,
                        p.shapes({{{2, 2048, 2048}}, {{2, 2048, 2048}, "bool"}, {{}, kScalar, "1.1111"}}));
                });
}

void layer_norm_bwd(Prog& p) {
  autograd_node(p, "autograd::engine::evaluate_function: NativeLayerNormBackward0",
                "NativeLayerNormBackward0", [&] {
                  p.op("aten::native_layer_norm_backward", 5.0, [&] {
                    p.sim().launch(kLayerNormBwdInput, mem_us(3 * kAct));
                    p.sim().launch(kLayerNormBwdGammaBeta, mem_us(1.2 * kAct));
                  }, 2.0, p.shapes({{{2, 2048, 2048}}, {{2, 2048, 2048}}, {{}, "ScalarList", "[2048]"},
                                    {{2, 2048, 1}, "float"}, {{2, 2048, 1}, "float"}, {{2048}}, {{2048}},
                                    {{}, "ScalarList", "[True, True, True]"}}));
                });
}

void residual_grad_add(Prog& p) {
  // The engine sums the two gradients that meet at a residual connection.
  p.kop("aten::add", 4.0, kAdd, mem_us(3 * kAct), 1.5, add_shape(p));
}

void train_layer_bwd(Prog& p) {
  p.op("autograd::engine::evaluate_function: AddBackward0", 3.0, [&] { p.leaf("AddBackward0", 2.0, 1.0); }, 1.0);
  dropout_bwd(p);
  addmm_bwd(p, kTokens, kH, kFfn);
  autograd_node(p, "autograd::engine::evaluate_function: GeluBackward0", "GeluBackward0", [&] {
    p.kop("aten::gelu_backward", 4.0, kGeluBwd, mem_us(3 * kAct * kFfn / kH), 1.5,
          p.shapes({{{2, 2048, 8192}}, {{2, 2048, 8192}}, {{}, "std::string_view", "none"}}));
  });
  addmm_bwd(p, kTokens, kFfn, kH);
  layer_norm_bwd(p);
  residual_grad_add(p);
  dropout_bwd(p);
  addmm_bwd(p, kTokens, kH, kH);
  autograd_node(p, "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0",
                "ScaledDotProductFlashAttentionBackward0", [&] {
                  p.op("aten::_scaled_dot_product_flash_attention_backward", 4.0, [&] {
                    p.op("aten::_flash_attention_backward", 6.0, [&] {
                      p.sim().launch(kFlashBwdDot, mem_us(2 * kAct));
                      p.op("aten::zero_", 2.0, [&] { p.sim().memset(static_cast<int64_t>(2 * kAct)); }, 1.0);
                      p.sim().launch(kFlashBwd, 2.5 * attn_us(2, 2048, kH, true));
                      p.sim().launch(kFlashBwdConvert, mem_us(1.5 * kAct));
                    }, 3.0);
                  }, 1.5);
                });
  p.op("autograd::engine::evaluate_function: CloneBackward0", 3.0, [&] { p.leaf("CloneBackward0", 2.0, 1.0); }, 1.0);
  addmm_bwd(p, kTokens, 3 * kH, kH);
  layer_norm_bwd(p);
  residual_grad_add(p);
}

// Token embedding of the 2 x 2048 input ids.
void embedding_fwd(Prog& p) {
  p.op("aten::embedding", 4.0, [&] {
    p.kop("aten::index_select", 5.0, kIndexSelect, mem_us(2 * kAct), 2.0,
          p.shapes({{{32000, 2048}}, {{}, kScalar, "0"}, {{4096}, kLong}}));
  }, 1.0, p.shapes({{{32000, 2048}}, {{2, 2048}, kLong}, {{}, kScalar, "-1"}, {{}, kScalar, "False"}, {{}, kScalar, "False"}}));
}

void embedding_bwd(Prog& p) {
  Sim& s = p.sim();
  autograd_node(p, "autograd::engine::evaluate_function: EmbeddingBackward0", "EmbeddingBackward0", [&] {
    p.op("aten::embedding_backward", 3.0, [&] {
      p.op("aten::embedding_dense_backward", 5.0, [&] {
        s.memset(static_cast<int64_t>(kVocab * kH * 4));
        s.launch(kEmbeddingBwd, mem_us(4 * kAct));
      }, 2.0);
    }, 1.0);
  });
  accumulate_grad(p);
}

constexpr double kLogits = kTokens * kVocab * 2;  // bytes of the [tokens, vocab] bf16 logits

void cross_entropy_fwd(Prog& p) {
  p.op("aten::cross_entropy_loss", 3.0, [&] {
    p.op("aten::log_softmax", 2.0, [&] {
      p.kop("aten::_log_softmax", 4.0, kLogSoftmaxFwd, mem_us(2 * kLogits), 1.5);
    }, 1.0);
    p.op("aten::nll_loss_nd", 2.0, [&] {
      p.op("aten::nll_loss", 2.0, [&] {
        p.kop("aten::nll_loss_forward", 4.0, kNllFwd, 8.0, 1.5);
      }, 1.0);
    }, 1.0);
  }, 1.0);
}

// Loss, LM head and final layer norm, backward.
void loss_head_bwd(Prog& p) {
  Sim& s = p.sim();
  autograd_node(p, "autograd::engine::evaluate_function: NllLossBackward0", "NllLossBackward0", [&] {
    p.op("aten::nll_loss_backward", 4.0, [&] {
      p.op("aten::zero_", 2.0, [&] { p.kop("aten::fill_", 3.0, kFill, mem_us(kLogits), 1.0); }, 1.0);
      s.launch(kNllBwd, 10.0);
    }, 2.0);
  });
  autograd_node(p, "autograd::engine::evaluate_function: LogSoftmaxBackward0", "LogSoftmaxBackward0", [&] {
    p.kop("aten::_log_softmax_backward_data", 4.0, kLogSoftmaxBwd, mem_us(3 * kLogits), 1.5);
  });
  autograd_node(p, "autograd::engine::evaluate_function: MmBackward0", "MmBackward0", [&] {
    p.op("aten::mm", 4.0, [&] { p.gemm(kGemmNn, gemm_us(kTokens, kH, kVocab)); }, 2.0);
    p.op("aten::mm", 4.0, [&] { p.gemm(kGemmNt, gemm_us(kVocab, kH, kTokens)); }, 2.0);
  });
  layer_norm_bwd(p);
}

// DDP's reducer once a bucket's gradients are ready: scale by 1/world, then an
// allreduce on the NCCL stream after it has waited for the compute stream.
void allreduce_bucket(Prog& p, int bucket, int64_t nelems) {
  Sim& s = p.sim();
  const double bytes = static_cast<double>(nelems) * 2;
  p.op("torch::distributed::reducer::mul_out", 3.0, [&] {
    p.kop("aten::mul", 4.0, kMul, mem_us(2 * bytes), 2.0, p.shapes({{{nelems}}, {{}, kScalar, "0.5"}}));
  }, 1.0);
  p.op("c10d::allreduce_", 6.0, [&] {
    s.push_comms(p.name("record_param_comms"), 4.0, nelems);
    s.record(kComputeStream, kSlotGradsReady);
    s.wait(kCommStream, kSlotGradsReady);
    p.annotation("nccl:all_reduce", 3.0, [&] {
      s.collective(kNcclAllReduce, kCommStream, nelems, static_cast<int64_t>(bytes));
    }, 2.0);
    s.record(kCommStream, kSlotBucketBase + bucket);
    s.pop(3.0);
  }, 4.0);
}

void train_step(Prog& p, Catalog& cat, int step, int layers) {
  Sim& s = p.sim();
  p.annotation(cat.names.add(fmt::format("ProfilerStep#{}", step)), 4.0, [&] {
    p.annotation("Optimizer.zero_grad#AdamW.zero_grad", 3.0, [&] { p.cpu(25.0); }, 2.0);
    for (int i = 0; i < 2; ++i) {  // input ids and labels to the GPU
      p.op("aten::to", 2.0, [&] {
        p.op("aten::_to_copy", 3.0, [&] {
          p.leaf("aten::empty_strided", 2.5, 1.0);
          p.op("aten::copy_", 3.0, [&] { s.memcpy(CopyKind::kHtoD, static_cast<int64_t>(kTokens * 8)); }, 2.0);
        }, 1.0);
      }, 1.0);
    }
    p.cpu(15.0);
    p.annotation("DistributedDataParallel.forward", 20.0, [&] {
      embedding_fwd(p);
      for (int l = 0; l < layers; ++l) train_layer_fwd(p);
      layer_norm_fwd(p);
      linear_fwd(p, kGemmTn256, kTokens, kVocab, kH, false);
    }, 8.0);
    cross_entropy_fwd(p);
    p.cpu(25.0);  // loss.backward() from Python
    loss_head_bwd(p);

    // Buckets: the last layer alone, then two layers each; the final one also
    // holds the (tied) embedding, whose gradient is ready last.
    int buckets = 0;
    int64_t pending = 0;
    for (int l = layers - 1; l >= 0; --l) {
      train_layer_bwd(p);
      pending += kLayerParams;
      if ((layers - 1 - l) % 2 == 0 && l != 0) {
        allreduce_bucket(p, buckets++, pending);
        pending = 0;
      }
    }
    embedding_bwd(p);
    allreduce_bucket(p, buckets++, pending + kEmbedParams);

    // Reducer::finalize_backward: the compute stream waits for every bucket.
    for (int b = 0; b < buckets; ++b) s.wait(kComputeStream, kSlotBucketBase + b);
    p.cpu(20.0);

    p.annotation("Optimizer.step#AdamW.step", 12.0, [&] {
      p.op("aten::_fused_adamw_", 20.0, [&] {
        // One multi_tensor_apply launch per chunk of ~2 layers of parameters;
        // each reads and writes fp32 params, grads and both moments (~26 B/param).
        int64_t total = kLayerParams * layers + kEmbedParams;
        int64_t chunk = 2 * kLayerParams;
        for (int64_t done = 0; done < total; done += chunk) {
          int64_t n = std::min(chunk, total - done);
          s.launch(kAdamW, mem_us(static_cast<double>(n) * 26));
          p.cpu(2.0);
        }
      }, 8.0);
    }, 5.0);
    p.cpu(10.0);
    // Step timing with a CUDA event, then loss.item().
    s.record(kComputeStream, kSlotTimer);
    s.event_sync(kSlotTimer);
    p.op("aten::item", 3.0, [&] {
      p.op("aten::_local_scalar_dense", 4.0, [&] {
        s.memcpy(CopyKind::kDtoH, 4);
        s.stream_sync(kComputeStream);
      }, 2.0);
    }, 1.0);
    p.cpu(40.0);
  }, 3.0);
  p.cpu(2.0);
}

// ---- infer-decode: Llama-style decoder, hidden 2048, FFN 5632, tensor parallel ----
constexpr double kIH = 2048, kIFfn = 5632, kIVocab = 32000, kPrompt = 2048, kBatch = 8;

void tp_allreduce(Prog& p, double tokens) {
  Sim& s = p.sim();
  if (s.ranks() == 1) return;
  const int64_t nelems = static_cast<int64_t>(tokens * kIH);
  p.op("c10d::allreduce_", 5.0, [&] {
    s.push_comms(p.name("record_param_comms"), 3.0, nelems);
    p.annotation("nccl:all_reduce", 2.0, [&] {
      s.collective(kNcclAllReduce, kComputeStream, nelems, nelems * 2);
    }, 1.5);
    s.pop(2.0);
  }, 3.0);
}

void infer_linear(Prog& p, double tokens, double n, double k, int kernel) {
  // Decode GEMMs are weight-bandwidth bound; prefill ones compute bound.
  double us = std::max(gemm_us(tokens, n, k), mem_us(n * k * 2));
  const int64_t T = static_cast<int64_t>(tokens), N = static_cast<int64_t>(n), K = static_cast<int64_t>(k);
  const int64_t B = T == static_cast<int64_t>(kPrompt) ? 1 : T, S = T / B;
  p.op("aten::linear", 4.0, [&] {
    p.leaf("aten::t", 2.0, 1.0, p.shapes({{{N, K}}}));
    p.op("aten::matmul", 3.0, [&] {
      p.op("aten::mm", 5.0, [&] { p.gemm(kernel, us); }, 2.0, p.shapes({{{T, K}}, {{K, N}}}));
    }, 1.5, p.shapes({{{B, S, K}}, {{K, N}}}));
  }, 1.5, p.shapes({{{B, S, K}}, {{N, K}}, {{}, kEmpty}}));
}

void infer_layer(Prog& p, bool prefill, bool first, int tp) {
  const double tokens = prefill ? kPrompt : kBatch;
  const double act = tokens * kIH * 2;
  const int gemm = prefill ? kGemmTn128 : kGemmTn64;
  if (first) {
    p.kop("_C::rms_norm", 6.0, kRmsNorm, mem_us(2 * act), 2.0);
  } else {
    p.kop("_C::fused_add_rms_norm", 6.0, kFusedAddRmsNorm, mem_us(4 * act), 2.0);
  }
  infer_linear(p, tokens, 3 * kIH / tp, kIH, gemm);
  p.op("aten::scaled_dot_product_attention", 5.0, [&] {
    p.op("aten::_scaled_dot_product_flash_attention", 4.0, [&] {
      if (prefill) {
        p.kop("aten::_flash_attention_forward", 6.0, kFlashFwd, attn_us(1, kPrompt, kIH / tp, true), 3.0);
      } else {
        // Reads the KV cache of every sequence: kBatch x ~2k tokens x (K,V).
        p.kop("aten::_flash_attention_forward", 6.0, kFlashDecode,
              mem_us(kBatch * (kPrompt + 64) * 2 * kIH / tp * 2 / 4), 3.0);
      }
    }, 1.5);
  }, 1.5);
  infer_linear(p, tokens, kIH, kIH / tp, gemm);
  tp_allreduce(p, tokens);
  p.kop("_C::fused_add_rms_norm", 6.0, kFusedAddRmsNorm, mem_us(4 * act), 2.0);
  infer_linear(p, tokens, 2 * kIFfn / tp, kIH, gemm);
  p.kop("_C::silu_and_mul", 5.0, kSiluAndMul, mem_us(3 * tokens * kIFfn / tp * 2), 2.0);
  infer_linear(p, tokens, kIH, kIFfn / tp, gemm);
  tp_allreduce(p, tokens);
  p.cpu(5.0);
}

// Embedding, layers, final norm, LM head on the last position, greedy sample,
// and the blocking copy of the sampled tokens to the host.
void infer_forward(Prog& p, bool prefill, int layers, int tp) {
  Sim& s = p.sim();
  const double tokens = prefill ? kPrompt : kBatch;
  p.op("aten::to", 2.0, [&] {
    p.op("aten::_to_copy", 3.0, [&] {
      p.leaf("aten::empty_strided", 2.5, 1.0);
      p.op("aten::copy_", 3.0, [&] { s.memcpy(CopyKind::kHtoD, static_cast<int64_t>(tokens * 8)); }, 2.0);
    }, 1.0);
  }, 1.0);
  p.op("aten::embedding", 4.0, [&] {
    p.kop("aten::index_select", 5.0, kIndexSelect, mem_us(2 * tokens * kIH * 2), 2.0);
  }, 1.0);
  for (int l = 0; l < layers; ++l) infer_layer(p, prefill, l == 0, tp);
  p.kop("_C::fused_add_rms_norm", 6.0, kFusedAddRmsNorm, mem_us(4 * kBatch * kIH * 2), 2.0);
  infer_linear(p, kBatch, kIVocab, kIH, kGemmTn64);
  p.kop("aten::argmax", 5.0, kArgmax, mem_us(kBatch * kIVocab * 2), 2.0);
  p.op("aten::to", 2.0, [&] {
    p.op("aten::_to_copy", 3.0, [&] {
      p.leaf("aten::empty_strided", 2.5, 1.0);
      p.op("aten::copy_", 3.0, [&] {
        s.memcpy(CopyKind::kDtoH, static_cast<int64_t>(kBatch * 8));
        s.stream_sync(kComputeStream);
      }, 2.0);
    }, 1.0);
  }, 1.0);
}


// ---- train-tp: Megatron-style tensor parallelism over all ranks; GPT decoder, hidden 4096,
// FFN 16384, 2 x 2048 tokens, bf16. QKV and FC1 are split by columns, the attention output
// projection and FC2 by rows, so each attention and MLP block ends with an allreduce of its
// [tokens, hidden] output that the next kernels wait for (issued on the compute stream). In
// the backward, the column-parallel layers' input-gradient allreduce runs on the NCCL stream
// while their weight-gradient GEMM runs (Megatron's asynchronous gradient allreduce).
constexpr double kTH = 4096, kTFfn = 16384, kTTokens = 4096;
constexpr double kTAct = kTTokens * kTH * 2;
constexpr int64_t kTLayerParams = static_cast<int64_t>(12 * kTH * kTH + 13 * kTH);
constexpr int kTpSlotReady = 0, kTpSlotDone = 1, kTpSlotTimer = 2;

// An allreduce the compute stream runs in order: the kernels after it wait.
void allreduce_inline(Prog& p, int64_t nelems, int64_t bytes) {
  Sim& s = p.sim();
  if (s.ranks() == 1) return;
  p.op("c10d::allreduce_", 5.0, [&] {
    s.push_comms(p.name("record_param_comms"), 3.0, nelems);
    p.annotation("nccl:all_reduce", 2.0, [&] { s.collective(kNcclAllReduce, kComputeStream, nelems, bytes); }, 1.5);
    s.pop(2.0);
  }, 3.0);
}

// Starts an allreduce on the NCCL stream after the compute stream's work so
// far; tp_allreduce_wait() makes the compute stream wait for it.
void tp_allreduce_async(Prog& p, int64_t nelems) {
  Sim& s = p.sim();
  if (s.ranks() == 1) return;
  p.op("c10d::allreduce_", 6.0, [&] {
    s.push_comms(p.name("record_param_comms"), 4.0, nelems);
    s.record(kComputeStream, kTpSlotReady);
    s.wait(kCommStream, kTpSlotReady);
    p.annotation("nccl:all_reduce", 3.0, [&] { s.collective(kNcclAllReduce, kCommStream, nelems, nelems * 2); }, 2.0);
    s.record(kCommStream, kTpSlotDone);
    s.pop(3.0);
  }, 4.0);
}

void tp_allreduce_wait(Prog& p) {
  if (p.sim().ranks() > 1) p.sim().wait(kComputeStream, kTpSlotDone);
}

// Y[tokens, n] = X[tokens, k] · W[n, k]ᵀ, this rank's shard.
void tp_linear_fwd(Prog& p, int kernel, double n, double k) {
  const int64_t M = static_cast<int64_t>(kTTokens), N = static_cast<int64_t>(n), K = static_cast<int64_t>(k);
  p.leaf("aten::t", 1.5, 0.8, p.shapes({{{N, K}}}));
  p.op("aten::matmul", 3.0, [&] {
    p.op("aten::mm", 4.0, [&] { p.gemm(kernel, gemm_us(kTTokens, n, k)); }, 2.0, p.shapes({{{M, K}}, {{K, N}}}));
  }, 1.5, p.shapes({{{2, M / 2, K}}, {{K, N}}}));
}

// dgrad = dY·W, then (column-parallel) its allreduce overlapping wgrad = dYᵀ·X.
void tp_linear_bwd(Prog& p, double n, double k, bool column_parallel) {
  const int64_t M = static_cast<int64_t>(kTTokens), N = static_cast<int64_t>(n), K = static_cast<int64_t>(k);
  autograd_node(p, "autograd::engine::evaluate_function: LinearWithGradAccumulationAndAsyncCommunicationBackward",
                "LinearWithGradAccumulationAndAsyncCommunicationBackward", [&] {
                  p.op("aten::mm", 4.0, [&] { p.gemm(kGemmNn, gemm_us(kTTokens, k, n)); }, 2.0,
                       p.shapes({{{M, N}}, {{N, K}}}));
                  if (column_parallel) tp_allreduce_async(p, M * K);
                  p.op("aten::mm", 4.0, [&] { p.gemm(kGemmNt, gemm_us(n, k, kTTokens)); }, 2.0,
                       p.shapes({{{N, M}}, {{M, K}}}));
                  if (column_parallel) tp_allreduce_wait(p);
                });
  accumulate_grad(p);
}

int tp_act_shape(Prog& p) { return p.shapes({{{2, 2048, 4096}}}); }

void tp_layer_norm_fwd(Prog& p) {
  int args = p.shapes({{{2, 2048, 4096}}, {{}, "ScalarList", "[4096]"}, {{4096}}, {{4096}}, {{}, kScalar, "1e-05"}});
  p.op("aten::layer_norm", 3.0, [&] {
    p.kop("aten::native_layer_norm", 5.0, kLayerNormFwd, mem_us(2 * kTAct), 2.0, args);
  }, 1.0, args);
}

void tp_layer_norm_bwd(Prog& p) {
  autograd_node(p, "autograd::engine::evaluate_function: NativeLayerNormBackward0", "NativeLayerNormBackward0", [&] {
    p.op("aten::native_layer_norm_backward", 5.0, [&] {
      p.sim().launch(kLayerNormBwdInput, mem_us(3 * kTAct));
      p.sim().launch(kLayerNormBwdGammaBeta, mem_us(1.2 * kTAct));
    }, 2.0, tp_act_shape(p));
  });
  accumulate_grad(p);
}

void tp_dropout_add(Prog& p) {
  p.op("aten::dropout", 2.0, [&] {
    p.kop("aten::native_dropout", 5.0, kDropout, mem_us(2.5 * kTAct), 2.0, tp_act_shape(p));
  }, 1.0);
  p.kop("aten::add", 4.0, kAdd, mem_us(3 * kTAct), 1.5, tp_act_shape(p));
}

void tp_layer_fwd(Prog& p, int tp) {
  tp_layer_norm_fwd(p);
  tp_linear_fwd(p, kGemmTn256, 3 * kTH / tp, kTH);
  const int qkv = p.shapes({{{2, 32 / tp, 2048, 128}}, {{2, 32 / tp, 2048, 128}}, {{2, 32 / tp, 2048, 128}}});
  p.op("aten::scaled_dot_product_attention", 4.0, [&] {
    p.op("aten::_scaled_dot_product_flash_attention", 4.0, [&] {
      p.kop("aten::_flash_attention_forward", 6.0, kFlashFwd, attn_us(2, 2048, kTH / tp, true), 3.0, qkv);
    }, 1.5, qkv);
  }, 1.0, qkv);
  tp_linear_fwd(p, kGemmTn128, kTH, kTH / tp);
  allreduce_inline(p, static_cast<int64_t>(kTTokens * kTH), static_cast<int64_t>(kTAct));
  tp_dropout_add(p);
  tp_layer_norm_fwd(p);
  tp_linear_fwd(p, kGemmTn256, kTFfn / tp, kTH);
  p.kop("aten::gelu", 4.0, kGelu, mem_us(2 * kTAct * kTFfn / kTH / tp), 1.5);
  tp_linear_fwd(p, kGemmTn256, kTH, kTFfn / tp);
  allreduce_inline(p, static_cast<int64_t>(kTTokens * kTH), static_cast<int64_t>(kTAct));
  tp_dropout_add(p);
  p.cpu(6.0);
}

void tp_layer_bwd(Prog& p, int tp) {
  p.op("autograd::engine::evaluate_function: AddBackward0", 3.0, [&] { p.leaf("AddBackward0", 2.0, 1.0); }, 1.0);
  autograd_node(p, "autograd::engine::evaluate_function: NativeDropoutBackward0", "NativeDropoutBackward0", [&] {
    p.kop("aten::native_dropout_backward", 4.0, kDropoutBwd, mem_us(2.5 * kTAct), 1.5);
  });
  tp_linear_bwd(p, kTH, kTFfn / tp, false);
  autograd_node(p, "autograd::engine::evaluate_function: GeluBackward0", "GeluBackward0", [&] {
    p.kop("aten::gelu_backward", 4.0, kGeluBwd, mem_us(3 * kTAct * kTFfn / kTH / tp), 1.5);
  });
  tp_linear_bwd(p, kTFfn / tp, kTH, true);
  tp_layer_norm_bwd(p);
  p.kop("aten::add", 4.0, kAdd, mem_us(3 * kTAct), 1.5);
  autograd_node(p, "autograd::engine::evaluate_function: NativeDropoutBackward0", "NativeDropoutBackward0", [&] {
    p.kop("aten::native_dropout_backward", 4.0, kDropoutBwd, mem_us(2.5 * kTAct), 1.5);
  });
  tp_linear_bwd(p, kTH, kTH / tp, false);
  autograd_node(p, "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0",
                "ScaledDotProductFlashAttentionBackward0", [&] {
                  p.op("aten::_flash_attention_backward", 6.0, [&] {
                    p.sim().launch(kFlashBwdDot, mem_us(2 * kTAct / tp));
                    p.op("aten::zero_", 2.0, [&] { p.sim().memset(static_cast<int64_t>(2 * kTAct / tp)); }, 1.0);
                    p.sim().launch(kFlashBwd, 2.5 * attn_us(2, 2048, kTH / tp, true));
                    p.sim().launch(kFlashBwdConvert, mem_us(1.5 * kTAct / tp));
                  }, 3.0);
                });
  tp_linear_bwd(p, 3 * kTH / tp, kTH, true);
  tp_layer_norm_bwd(p);
  p.kop("aten::add", 4.0, kAdd, mem_us(3 * kTAct), 1.5);
}

// Megatron's vocab-parallel cross entropy over [tokens, vocab/tp] fp32 logits:
// three small allreduces (row max, target logit, sum of exponentials).
void tp_cross_entropy(Prog& p, int tp) {
  const double logits = kTTokens * kVocab / tp * 4;
  const int64_t rows = static_cast<int64_t>(kTTokens);
  p.kop("aten::max", 4.0, kMaxReduce, mem_us(logits), 1.5);
  allreduce_inline(p, rows, rows * 4);
  p.kop("aten::sub", 4.0, kAdd, mem_us(2 * logits), 1.5);
  p.kop("aten::gather", 4.0, kIndexSelect, 6.0, 1.5);
  allreduce_inline(p, rows, rows * 4);
  p.kop("aten::exp", 4.0, kExp, mem_us(2 * logits), 1.5);
  p.kop("aten::sum", 4.0, kSumReduce, mem_us(logits), 1.5);
  allreduce_inline(p, rows, rows * 4);
  p.kop("aten::log", 4.0, kExp, 5.0, 1.5);
  p.kop("aten::mean", 4.0, kMeanReduce, 5.0, 1.5);
}

// Grad-norm clipping and fused AdamW over this rank's `params`, split around
// the norm's allreduce over all ranks so that pipeline stages, which run one
// at a time, can wait for each other there. optimizer_begin() returns whether
// it arrived at that allreduce (not with a single rank); Sim::complete(0)
// must then come before optimizer_end().
bool optimizer_begin(Prog& p, int64_t params) {
  Sim& s = p.sim();
  s.push(RangeCat::kUserAnnotation, p.name("Optimizer.step#AdamW.step"), 12.0);
  p.kop("aten::_foreach_norm", 20.0, kForeachNorm, mem_us(static_cast<double>(params) * 4), 6.0);
  if (s.ranks() == 1) return false;
  s.push(RangeCat::kCpuOp, p.name("c10d::allreduce_"), 5.0);
  s.push_comms(p.name("record_param_comms"), 3.0, 1);
  s.push(RangeCat::kUserAnnotation, p.name("nccl:all_reduce"), 2.0);
  s.arrive(kNcclAllReduce, kComputeStream, 1, 4, 0, Coll::kAllReduce);
  return true;
}

void optimizer_end(Prog& p, int64_t params, bool arrived, int timer_slot) {
  Sim& s = p.sim();
  if (arrived) {
    s.pop(1.5);
    s.pop(2.0);
    s.pop(3.0);
  }
  p.op("aten::item", 3.0, [&] {
    p.op("aten::_local_scalar_dense", 4.0, [&] {
      s.memcpy(CopyKind::kDtoH, 4);
      s.stream_sync(kComputeStream);
    }, 2.0);
  }, 1.0);
  p.kop("aten::_foreach_mul_", 15.0, kForeachMul, mem_us(static_cast<double>(params) * 8), 5.0);
  p.op("aten::_fused_adamw_", 20.0, [&] {
    int64_t chunk = 2 * kLayerParams;
    for (int64_t done = 0; done < params; done += chunk) {
      int64_t n = std::min(chunk, params - done);
      s.launch(kAdamW, mem_us(static_cast<double>(n) * 26));
      p.cpu(2.0);
    }
  }, 8.0);
  s.pop(5.0);
  p.cpu(10.0);
  s.record(kComputeStream, timer_slot);
  s.event_sync(timer_slot);
}

void tp_step(Prog& p, Catalog& cat, int step, int layers) {
  Sim& s = p.sim();
  const int tp = s.ranks();
  p.annotation(cat.names.add(fmt::format("ProfilerStep#{}", step)), 4.0, [&] {
    p.annotation("Optimizer.zero_grad#AdamW.zero_grad", 3.0, [&] { p.cpu(25.0); }, 2.0);
    // Megatron's broadcast_data: input ids and labels go to the GPU and are
    // broadcast from the tensor-parallel group's first rank.
    for (int i = 0; i < 2; ++i) {
      p.op("aten::to", 2.0, [&] {
        p.op("aten::_to_copy", 3.0, [&] {
          p.leaf("aten::empty_strided", 2.5, 1.0);
          p.op("aten::copy_", 3.0, [&] { s.memcpy(CopyKind::kHtoD, static_cast<int64_t>(kTTokens * 8)); }, 2.0);
        }, 1.0);
      }, 1.0);
    }
    if (tp > 1) {
      const int64_t n = static_cast<int64_t>(2 * kTTokens);
      p.op("c10d::broadcast_", 5.0, [&] {
        s.push_comms(p.name("record_param_comms"), 3.0, n, 0, Coll::kBroadcast);
        p.annotation("nccl:broadcast", 2.0, [&] {
          s.collective(kNcclBroadcast, kComputeStream, n, n * 8, 0, Coll::kBroadcast);
        }, 1.5);
        s.pop(2.0);
      }, 3.0);
    }
    p.cpu(15.0);
    p.op("aten::embedding", 4.0, [&] {
      p.kop("aten::index_select", 5.0, kIndexSelect, mem_us(2 * kTAct), 2.0);
    }, 1.0);
    p.kop("aten::masked_fill_", 4.0, kFill, mem_us(2 * kTAct), 1.5);  // rows of other ranks' vocabulary
    allreduce_inline(p, static_cast<int64_t>(kTTokens * kTH), static_cast<int64_t>(kTAct));
    for (int l = 0; l < layers; ++l) tp_layer_fwd(p, tp);
    tp_layer_norm_fwd(p);
    tp_linear_fwd(p, kGemmTn256, kVocab / tp, kTH);
    tp_cross_entropy(p, tp);
    p.cpu(25.0);  // loss.backward() from Python

    autograd_node(p, "autograd::engine::evaluate_function: _VocabParallelCrossEntropyBackward",
                  "_VocabParallelCrossEntropyBackward", [&] {
                    p.kop("aten::sub_", 4.0, kAdd, mem_us(3 * kTTokens * kVocab / tp * 4), 1.5);
                    p.kop("aten::mul_", 4.0, kMul, mem_us(2 * kTTokens * kVocab / tp * 4), 1.5);
                  });
    tp_linear_bwd(p, kVocab / tp, kTH, true);
    tp_layer_norm_bwd(p);
    for (int l = 0; l < layers; ++l) tp_layer_bwd(p, tp);
    autograd_node(p, "autograd::engine::evaluate_function: EmbeddingBackward0", "EmbeddingBackward0", [&] {
      p.op("aten::embedding_dense_backward", 5.0, [&] {
        s.memset(static_cast<int64_t>(kVocab / tp * kTH * 4));
        s.launch(kEmbeddingBwd, mem_us(4 * kTAct));
      }, 2.0);
    });
    accumulate_grad(p);
    p.cpu(20.0);
    const int64_t params = (kTLayerParams * layers + static_cast<int64_t>(2 * kVocab * kTH)) / tp;
    bool arrived = optimizer_begin(p, params);
    if (arrived) s.complete(0);
    optimizer_end(p, params, arrived, kTpSlotTimer);
    p.op("aten::item", 3.0, [&] {
      p.op("aten::_local_scalar_dense", 4.0, [&] {
        s.memcpy(CopyKind::kDtoH, 4);
        s.stream_sync(kComputeStream);
      }, 2.0);
    }, 1.0);
    p.cpu(40.0);
  }, 3.0);
  p.cpu(2.0);
}

// ---- train-pp: 1F1B pipeline parallelism, one stage per rank (Megatron's
// non-interleaved schedule). Each stage holds `layers` of train-dp's layers;
// the first also the embedding, the last the final norm, LM head and loss, so
// it is the slowest. Activations go forward and gradients backward through
// NCCL send/recv on a communicator per pair of neighbouring stages, each a
// process group of its own with its own Seq, followed by
// torch.cuda.synchronize() as Megatron's batched p2p does: a stage whose
// input has not arrived waits, and its GPU idles (the pipeline bubbles).
enum class PpOp : uint8_t {
  kStepBegin,
  kForward,
  kBackward,
  kRecvForward,
  kSendForward,
  kSendForwardRecvBackward,
  kSendBackwardRecvForward,
  kSendBackward,
  kRecvBackward,
  kOptimizer,  // grad-norm allreduce over all stages, then AdamW
  kStepEnd,
};

constexpr int kPpSlotReady = 0, kPpSlotDone = 1, kPpSlotTimer = 2;

// One step of stage `stage`: warmup forwards, steady one-forward-one-backward,
// cooldown backwards. Example, 4 stages and 4 microbatches, stage 1:
//   recvF F sendF  recvF F sendF  recvF | F sendF·recvB B sendB·recvF | F sendF·recvB B sendB | recvB B sendB (x2)
std::vector<PpOp> one_f_one_b(int stage, int stages, int microbatches) {
  std::vector<PpOp> a{PpOp::kStepBegin};
  const bool first = stage == 0, last = stage == stages - 1;
  const int warmup = std::min(stages - stage - 1, microbatches);
  const int remaining = microbatches - warmup;
  for (int i = 0; i < warmup; ++i) {
    if (!first) a.push_back(PpOp::kRecvForward);
    a.push_back(PpOp::kForward);
    if (!last) a.push_back(PpOp::kSendForward);
  }
  if (remaining > 0 && !first) a.push_back(PpOp::kRecvForward);
  for (int i = 0; i < remaining; ++i) {
    a.push_back(PpOp::kForward);
    if (!last) a.push_back(PpOp::kSendForwardRecvBackward);
    a.push_back(PpOp::kBackward);
    if (!first) a.push_back(i == remaining - 1 ? PpOp::kSendBackward : PpOp::kSendBackwardRecvForward);
  }
  for (int i = 0; i < warmup; ++i) {
    if (!last) a.push_back(PpOp::kRecvBackward);
    a.push_back(PpOp::kBackward);
    if (!first) a.push_back(PpOp::kSendBackward);
  }
  a.push_back(PpOp::kOptimizer);
  a.push_back(PpOp::kStepEnd);
  return a;
}

struct P2p {
  bool prev;  // with the previous stage (else the next)
  Coll coll;
};

P2p p2p_of(PpOp op) {
  switch (op) {
    case PpOp::kRecvForward: return {true, Coll::kRecv};
    case PpOp::kSendForward: return {false, Coll::kSend};
    case PpOp::kSendForwardRecvBackward: return {false, Coll::kCoalesced};
    case PpOp::kSendBackwardRecvForward: return {true, Coll::kCoalesced};
    case PpOp::kSendBackward: return {true, Coll::kSend};
    case PpOp::kRecvBackward: return {false, Coll::kRecv};
    default: return {true, Coll::kSend};
  }
}

class Pipeline {
 public:
  Pipeline(Sim& sim, Catalog& cat, const ProgramShape& shape)
      : p_(sim, cat), cat_(cat), shape_(shape), ranks_(sim.ranks()) {
    // "nccl:send 0->1" / "nccl:recv 1<-0", as ProcessGroupNCCL names its p2p ranges.
    auto name = [&](const char* verb, const char* arrow, int r, int peer) {
      return peer < 0 || peer >= ranks_ ? 0u : cat.names.add(fmt::format("nccl:{} {}{}{}", verb, r, arrow, peer));
    };
    for (int r = 0; r < ranks_; ++r) {
      send_prev_.push_back(name("send", "->", r, r - 1));
      send_next_.push_back(name("send", "->", r, r + 1));
      recv_prev_.push_back(name("recv", "<-", r, r - 1));
      recv_next_.push_back(name("recv", "<-", r, r + 1));
    }
  }

  void run() {
    Sim& s = p_.sim();
    const int n = s.ranks();
    for (int i = 0; i < shape_.steps; ++i) {
      step_name_ = cat_.names.add(fmt::format("ProfilerStep#{}", shape_.first_step + i));
      std::vector<std::vector<PpOp>> prog;
      for (int r = 0; r < n; ++r) prog.push_back(one_f_one_b(r, n, shape_.microbatches));
      schedule(prog);
    }
  }

 private:
  // Runs every stage as far as it can; a stage at a communication waits until
  // every member of that process group has arrived, then all of them go on.
  // 1F1B pairs each stage's sends with its neighbour's receives in the same
  // order, so some stage can always go on until all are done.
  void schedule(const std::vector<std::vector<PpOp>>& prog) {
    Sim& s = p_.sim();
    const size_t n = prog.size();
    std::vector<size_t> pc(n, 0);
    std::vector<int> waiting(n, -1);  // process group a stage waits on
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t r = 0; r < n; ++r) {
        s.only(static_cast<int>(r));
        while (waiting[r] < 0 && pc[r] < prog[r].size()) {
          progress = true;
          waiting[r] = issue(static_cast<int>(r), prog[r][pc[r]]);
          if (waiting[r] < 0) ++pc[r];
        }
        const int g = waiting[r];
        if (g < 0 || !s.arrived_all(g)) continue;
        s.complete(g);
        for (size_t m = 0; m < n; ++m) {
          if (waiting[m] != g) continue;
          s.only(static_cast<int>(m));
          finish(static_cast<int>(m), prog[m][pc[m]]);
          waiting[m] = -1;
          ++pc[m];
        }
      }
    }
    s.only(-1);
  }

  int64_t stage_params(int stage) const {
    const int n = ranks_;
    int64_t params = kLayerParams * shape_.layers;
    if (stage == 0) params += kEmbedParams;
    if (stage == n - 1) params += kEmbedParams;  // the LM head's copy of the embedding
    return params;
  }

  // Runs `op` on `stage` (the Sim has it selected). A communication stops
  // after its kernel is launched; returns its process group, else -1.
  int issue(int stage, PpOp op) {
    Sim& s = p_.sim();
    switch (op) {
      case PpOp::kStepBegin:
        s.push(RangeCat::kUserAnnotation, step_name_, 4.0);
        p_.annotation("Optimizer.zero_grad#AdamW.zero_grad", 3.0, [&] { p_.cpu(25.0); }, 2.0);
        return -1;
      case PpOp::kForward:
        forward(stage);
        return -1;
      case PpOp::kBackward:
        backward(stage);
        return -1;
      case PpOp::kOptimizer: {
        if (optimizer_begin(p_, stage_params(stage))) return 0;
        optimizer_end(p_, stage_params(stage), false, kPpSlotTimer);
        return -1;
      }
      case PpOp::kStepEnd:
        if (stage == s.ranks() - 1) {
          p_.op("aten::item", 3.0, [&] {  // the loss, on the stage that has it
            p_.op("aten::_local_scalar_dense", 4.0, [&] {
              s.memcpy(CopyKind::kDtoH, 4);
              s.stream_sync(kComputeStream);
            }, 2.0);
          }, 1.0);
        }
        p_.cpu(40.0);
        s.pop(3.0);
        p_.cpu(2.0);
        return -1;
      default:
        return p2p_issue(stage, op);
    }
  }

  void finish(int stage, PpOp op) {
    if (op == PpOp::kOptimizer) {
      optimizer_end(p_, stage_params(stage), true, kPpSlotTimer);
    } else {
      p2p_finish(op);
    }
  }

  // Megatron's _communicate(): the P2POps go through batch_isend_irecv; a
  // send and a receive with the same peer become one grouped NCCL kernel.
  int p2p_issue(int stage, PpOp op) {
    Sim& s = p_.sim();
    const P2p c = p2p_of(op);
    const int peer = c.prev ? stage - 1 : stage + 1;
    const int group = 1 + std::min(stage, peer);
    const int stream = c.prev ? kP2pPrevStream : kP2pNextStream;
    const int64_t nelems = static_cast<int64_t>(kTokens * kH);
    const size_t st = static_cast<size_t>(stage);
    const uint32_t send = c.prev ? send_prev_[st] : send_next_[st];
    const uint32_t recv = c.prev ? recv_prev_[st] : recv_next_[st];
    p_.cpu(12.0);  // tensor shapes, receive buffers, the P2POp list
    if (c.coll == Coll::kCoalesced) {
      p_.op("c10d::send", 5.0, [&] {
        s.push_comms(p_.name("record_param_comms"), 3.0, nelems, group, Coll::kSend);
        p_.annotation(send, 2.0, [] {}, 1.0);
        s.pop(2.0);
      }, 2.0);
      p_.op("c10d::recv_", 5.0, [&] {
        s.push_comms(p_.name("record_param_comms"), 3.0, nelems, group, Coll::kRecv);
        p_.annotation(recv, 2.0, [] {}, 1.0);
        s.pop(2.0);
      }, 2.0);
      s.push(RangeCat::kUserAnnotation, p_.name("nccl:coalesced"), 3.0);
    } else {
      const bool is_send = c.coll == Coll::kSend;
      s.push(RangeCat::kCpuOp, p_.name(is_send ? "c10d::send" : "c10d::recv_"), 5.0);
      s.push_comms(p_.name("record_param_comms"), 3.0, nelems, group, c.coll);
      s.push(RangeCat::kUserAnnotation, is_send ? send : recv, 2.0);
    }
    s.record(kComputeStream, kPpSlotReady);
    s.wait(stream, kPpSlotReady);
    s.arrive(kNcclSendRecv, stream, nelems, nelems * 2, group, c.coll);
    return group;
  }

  void p2p_finish(PpOp op) {
    Sim& s = p_.sim();
    const P2p c = p2p_of(op);
    const int stream = c.prev ? kP2pPrevStream : kP2pNextStream;
    s.pop(1.5);
    if (c.coll != Coll::kCoalesced) {
      s.pop(2.0);
      s.pop(3.0);
    }
    s.record(stream, kPpSlotDone);  // req.wait(): the compute stream waits for the transfer
    s.wait(kComputeStream, kPpSlotDone);
    s.device_sync();
    p_.cpu(6.0);
  }

  void forward(int stage) {
    Sim& s = p_.sim();
    const bool first = stage == 0, last = stage == s.ranks() - 1;
    p_.cpu(20.0);  // forward_step(): get_batch, the model call
    if (first || last) {  // input ids on the first stage, labels on the last
      p_.op("aten::to", 2.0, [&] {
        p_.op("aten::_to_copy", 3.0, [&] {
          p_.leaf("aten::empty_strided", 2.5, 1.0);
          p_.op("aten::copy_", 3.0, [&] { s.memcpy(CopyKind::kHtoD, static_cast<int64_t>(kTokens * 8)); }, 2.0);
        }, 1.0);
      }, 1.0);
    }
    if (first) embedding_fwd(p_);
    for (int l = 0; l < shape_.layers; ++l) train_layer_fwd(p_);
    if (last) {
      layer_norm_fwd(p_);
      linear_fwd(p_, kGemmTn256, kTokens, kVocab, kH, false);
      cross_entropy_fwd(p_);
    }
  }

  void backward(int stage) {
    Sim& s = p_.sim();
    const bool first = stage == 0, last = stage == s.ranks() - 1;
    p_.cpu(15.0);  // backward_step(): torch.autograd.backward(output, grad)
    if (last) loss_head_bwd(p_);
    for (int l = 0; l < shape_.layers; ++l) train_layer_bwd(p_);
    if (first) embedding_bwd(p_);
  }

  Prog p_;
  Catalog& cat_;
  ProgramShape shape_;
  int ranks_ = 1;
  uint32_t step_name_ = 0;
  std::vector<uint32_t> send_prev_, send_next_, recv_prev_, recv_next_;
};

// ---- dataloader: image classification where the input pipeline is the
// bottleneck. Each step the main thread waits for the DataLoader's worker
// processes (JPEG decode and augmentation, not traced), pins the batch and
// copies it to the GPU, then runs a small ResNet-style network (a stem and
// `layers` bottleneck blocks at 56x56, batch 64, bf16 channels-last) whose
// GPU time is a fraction of the wait. With several ranks, DDP's gradient
// allreduce makes every rank wait for the slowest loader.
constexpr double kImgN = 64, kImgSide = 224, kSide = 56;
constexpr double kImgBytes = kImgN * 3 * kImgSide * kImgSide;  // uint8 batch
constexpr double kLoaderWaitUs = 30000;                       // per step, varies by rank and step
constexpr int kDlSlotTimer = 1;

double conv_us(double side, double cin, double cout, double k) {
  return 2.0 * kImgN * side * side * cin * cout * k * k / 4.5e8 + 6.0;
}
double fmap_bytes(double side, double channels) { return kImgN * side * side * channels * 2; }

void conv_fwd(Prog& p, double side, double cin, double cout, double k) {
  const int64_t N = static_cast<int64_t>(kImgN), C = static_cast<int64_t>(cin), O = static_cast<int64_t>(cout),
                K = static_cast<int64_t>(k), S = static_cast<int64_t>(side);
  const int args = p.shapes({{{N, C, S, S}}, {{O, C, K, K}}, {{}, kEmpty}});
  p.op("aten::conv2d", 3.0, [&] {
    p.op("aten::convolution", 2.5, [&] {
      p.op("aten::_convolution", 3.0, [&] {
        p.kop("aten::cudnn_convolution", 12.0, kConvFprop, conv_us(side, cin, cout, k), 3.0, args);
      }, 1.5);
    }, 1.0);
  }, 1.0, args);
}

void bn_fwd(Prog& p, double side, double channels) {
  const double bytes = fmap_bytes(side, channels);
  p.op("aten::batch_norm", 3.0, [&] {
    p.op("aten::_batch_norm_impl_index", 3.0, [&] {
      p.op("aten::native_batch_norm", 5.0, [&] {
        p.sim().launch(kBnStats, mem_us(bytes));
        p.sim().launch(kBnTransform, mem_us(2 * bytes));
      }, 2.0);
    }, 1.0);
  }, 1.0);
}

void relu_fwd(Prog& p, double side, double channels) {
  p.op("aten::relu_", 3.0, [&] {
    p.kop("aten::clamp_min_", 4.0, kRelu, mem_us(2 * fmap_bytes(side, channels)), 1.5);
  }, 1.0);
}

void conv_bn(Prog& p, double side, double cin, double cout, double k, bool relu) {
  conv_fwd(p, side, cin, cout, k);
  bn_fwd(p, side, cout);
  if (relu) relu_fwd(p, side, cout);
}

void conv_bwd(Prog& p, double side, double cin, double cout, double k, bool input_grad) {
  autograd_node(p, "autograd::engine::evaluate_function: ConvolutionBackward0", "ConvolutionBackward0", [&] {
    p.op("aten::convolution_backward", 6.0, [&] {
      if (input_grad) p.sim().launch(kConvDgrad, conv_us(side, cin, cout, k));
      p.sim().launch(kConvWgrad, 1.15 * conv_us(side, cin, cout, k));
    }, 2.0);
  });
  accumulate_grad(p);
}

void bn_bwd(Prog& p, double side, double channels) {
  const double bytes = fmap_bytes(side, channels);
  autograd_node(p, "autograd::engine::evaluate_function: NativeBatchNormBackward0", "NativeBatchNormBackward0", [&] {
    p.op("aten::native_batch_norm_backward", 5.0, [&] {
      p.sim().launch(kBnBwdReduce, mem_us(2 * bytes));
      p.sim().launch(kBnBwdElemt, mem_us(3 * bytes));
    }, 2.0);
  });
  accumulate_grad(p);
}

void relu_bwd(Prog& p, double side, double channels) {
  autograd_node(p, "autograd::engine::evaluate_function: ReluBackward0", "ReluBackward0", [&] {
    p.kop("aten::threshold_backward", 4.0, kReluBwd, mem_us(3 * fmap_bytes(side, channels)), 1.5);
  });
}

// 1x1 reduce to 64, 3x3, 1x1 expand to 256, residual add; the first block
// projects the stem's 64 channels to 256 for the residual.
void bottleneck_fwd(Prog& p, bool first) {
  const double cin = first ? 64 : 256;
  conv_bn(p, kSide, cin, 64, 1, true);
  conv_bn(p, kSide, 64, 64, 3, true);
  conv_bn(p, kSide, 64, 256, 1, false);
  if (first) conv_bn(p, kSide, 64, 256, 1, false);
  p.kop("aten::add_", 4.0, kAdd, mem_us(3 * fmap_bytes(kSide, 256)), 1.5);
  relu_fwd(p, kSide, 256);
  p.cpu(5.0);
}

void bottleneck_bwd(Prog& p, bool first) {
  const double cin = first ? 64 : 256;
  relu_bwd(p, kSide, 256);
  p.op("autograd::engine::evaluate_function: AddBackward0", 3.0, [&] { p.leaf("AddBackward0", 2.0, 1.0); }, 1.0);
  if (first) {
    bn_bwd(p, kSide, 256);
    conv_bwd(p, kSide, 64, 256, 1, true);
  }
  bn_bwd(p, kSide, 256);
  conv_bwd(p, kSide, 64, 256, 1, true);
  relu_bwd(p, kSide, 64);
  bn_bwd(p, kSide, 64);
  conv_bwd(p, kSide, 64, 64, 3, true);
  relu_bwd(p, kSide, 64);
  bn_bwd(p, kSide, 64);
  conv_bwd(p, kSide, cin, 64, 1, true);
  if (!first) p.kop("aten::add", 4.0, kAdd, mem_us(3 * fmap_bytes(kSide, 256)), 1.5);
}

// Tensor.pin_memory() on the main thread: a CPU copy into page-locked memory.
void pin_memory(Prog& p, double bytes) {
  p.op("aten::pin_memory", 3.0, [&] {
    p.op("aten::_pin_memory", 4.0, [&] {
      p.leaf("aten::empty", 3.0, 1.0);
      p.op("aten::copy_", 3.0, [&] { p.cpu(bytes / 6.0e3); }, 2.0);  // ~6 GB/s
    }, 1.5);
  }, 1.0);
}

void h2d(Prog& p, double bytes) {
  p.op("aten::to", 2.0, [&] {
    p.op("aten::_to_copy", 3.0, [&] {
      p.leaf("aten::empty_strided", 2.5, 1.0);
      p.op("aten::copy_", 3.0, [&] { p.sim().memcpy(CopyKind::kHtoD, static_cast<int64_t>(bytes)); }, 2.0);
    }, 1.0);
  }, 1.0);
}

int64_t resnet_params(int blocks) {
  return static_cast<int64_t>(3 * 64 * 49 + 64 * 256 + blocks * (256 * 64 + 64 * 64 * 9 + 64 * 256) + 256 * 1000);
}

void dataloader_step(Prog& p, Catalog& cat, int step, int blocks) {
  Sim& s = p.sim();
  const bool ddp = s.ranks() > 1;
  const double labels = kImgN * 8;
  p.annotation(cat.names.add(fmt::format("ProfilerStep#{}", step)), 4.0, [&] {
    p.annotation("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 8.0, [&] {
      s.cpu_varied(kLoaderWaitUs, 0.12);  // blocked on the workers' result queue
    }, 6.0);
    pin_memory(p, kImgBytes);
    pin_memory(p, labels);
    p.cpu(12.0);
    h2d(p, kImgBytes);
    h2d(p, labels);
    p.annotation("Optimizer.zero_grad#AdamW.zero_grad", 3.0, [&] { p.cpu(15.0); }, 2.0);
    auto forward = [&] {
      // uint8 -> bf16, then (x - mean) / std
      p.op("aten::to", 2.0, [&] {
        p.op("aten::_to_copy", 3.0, [&] {
          p.kop("aten::copy_", 4.0, kToBf16, mem_us(3 * kImgBytes), 2.0);
        }, 1.0);
      }, 1.0);
      p.kop("aten::sub", 4.0, kAdd, mem_us(4 * kImgBytes), 1.5);
      p.kop("aten::div", 4.0, kMul, mem_us(4 * kImgBytes), 1.5);
      conv_bn(p, 112, 3, 64, 7, true);
      p.op("aten::max_pool2d", 3.0, [&] {
        p.kop("aten::max_pool2d_with_indices", 5.0, kMaxPool, mem_us(1.25 * fmap_bytes(112, 64)), 2.0);
      }, 1.0);
      for (int b = 0; b < blocks; ++b) bottleneck_fwd(p, b == 0);
      p.op("aten::adaptive_avg_pool2d", 3.0, [&] {
        p.kop("aten::mean", 5.0, kMeanReduce, mem_us(fmap_bytes(kSide, 256)), 2.0);
      }, 1.0);
      p.leaf("aten::flatten", 2.0, 1.0);
      p.op("aten::linear", 3.0, [&] {
        p.leaf("aten::t", 1.5, 0.8);
        p.op("aten::addmm", 5.0, [&] { p.gemm(kGemmTn64, gemm_us(kImgN, 1000, 256)); }, 2.0);
      }, 1.0);
    };
    if (ddp) {
      p.annotation("DistributedDataParallel.forward", 20.0, forward, 8.0);
    } else {
      forward();
    }
    p.op("aten::cross_entropy_loss", 3.0, [&] {
      p.op("aten::log_softmax", 2.0, [&] { p.kop("aten::_log_softmax", 4.0, kLogSoftmaxFwd, 6.0, 1.5); }, 1.0);
      p.op("aten::nll_loss_nd", 2.0, [&] { p.kop("aten::nll_loss_forward", 4.0, kNllFwd, 5.0, 1.5); }, 1.0);
    }, 1.0);
    p.cpu(25.0);  // loss.backward() from Python

    autograd_node(p, "autograd::engine::evaluate_function: NllLossBackward0", "NllLossBackward0", [&] {
      p.op("aten::nll_loss_backward", 4.0, [&] {
        p.op("aten::zero_", 2.0, [&] { p.kop("aten::fill_", 3.0, kFill, 3.0, 1.0); }, 1.0);
        s.launch(kNllBwd, 5.0);
      }, 2.0);
    });
    autograd_node(p, "autograd::engine::evaluate_function: LogSoftmaxBackward0", "LogSoftmaxBackward0", [&] {
      p.kop("aten::_log_softmax_backward_data", 4.0, kLogSoftmaxBwd, 6.0, 1.5);
    });
    autograd_node(p, "autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0", [&] {
      p.op("aten::mm", 4.0, [&] { p.gemm(kGemmNn, gemm_us(kImgN, 256, 1000)); }, 2.0);
      p.op("aten::mm", 4.0, [&] { p.gemm(kGemmNt, gemm_us(1000, 256, kImgN)); }, 2.0);
      p.kop("aten::sum", 5.0, kSumReduce, 5.0, 2.0);
    });
    accumulate_grad(p);
    autograd_node(p, "autograd::engine::evaluate_function: MeanBackward1", "MeanBackward1", [&] {
      p.kop("aten::div", 4.0, kMul, mem_us(2 * fmap_bytes(kSide, 256)), 1.5);
    });
    for (int b = blocks - 1; b >= 0; --b) bottleneck_bwd(p, b == 0);
    autograd_node(p, "autograd::engine::evaluate_function: MaxPool2DWithIndicesBackward0",
                  "MaxPool2DWithIndicesBackward0", [&] {
                    p.op("aten::max_pool2d_with_indices_backward", 5.0, [&] {
                      p.op("aten::zero_", 2.0, [&] { s.memset(static_cast<int64_t>(fmap_bytes(112, 64))); }, 1.0);
                      s.launch(kMaxPoolBwd, mem_us(1.5 * fmap_bytes(112, 64)));
                    }, 2.0);
                  });
    relu_bwd(p, 112, 64);
    bn_bwd(p, 112, 64);
    conv_bwd(p, 112, 3, 64, 7, false);
    if (ddp) {  // one bucket holds the whole (small) model
      allreduce_bucket(p, 0, resnet_params(blocks));
      s.wait(kComputeStream, kSlotBucketBase);
    }
    p.cpu(20.0);
    p.annotation("Optimizer.step#AdamW.step", 12.0, [&] {
      p.op("aten::_fused_adamw_", 20.0, [&] {
        s.launch(kAdamW, mem_us(static_cast<double>(resnet_params(blocks)) * 26));
      }, 8.0);
    }, 5.0);
    p.cpu(10.0);
    s.record(kComputeStream, kDlSlotTimer);
    s.event_sync(kDlSlotTimer);
    p.op("aten::item", 3.0, [&] {
      p.op("aten::_local_scalar_dense", 4.0, [&] {
        s.memcpy(CopyKind::kDtoH, 4);
        s.stream_sync(kComputeStream);
      }, 2.0);
    }, 1.0);
    p.cpu(30.0);
  }, 3.0);
  p.cpu(2.0);
}

}  // namespace

Catalog make_catalog() {
  Catalog c;
  c.kernels.resize(kNumKernels);
  auto def = [&](int k, std::string_view name, std::string args) {
    c.kernels[static_cast<size_t>(k)] = KernelDef{json_escape(name), std::move(args)};
  };
  def(kIndexSelect,
      "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<long, unsigned int>, int, int, unsigned int, unsigned int, long)",
      geometry(26, 0, 8192, 1, 1, 128, 100));
  def(kLayerNormFwd,
      "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
      geometry(30, 128, 4096, 1, 1, 256, 94));
  def(kGemmTn256,
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
      geometry(168, 231424, 132, 1, 1, 384, 0));
  def(kGemmTn128,
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
      geometry(168, 231424, 132, 1, 1, 384, 0));
  def(kGemmNn,
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
      geometry(168, 231424, 132, 1, 1, 384, 0));
  def(kGemmNt,
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
      geometry(168, 231424, 132, 1, 1, 384, 0));
  def(kGemmTn64,
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
      geometry(90, 99328, 96, 1, 1, 128, 0));
  def(kCopy,
      "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})",
      geometry(24, 0, 16384, 1, 1, 128, 100));
  def(kFlashFwd,
      "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false>(pytorch_flash::Flash_fwd_params)",
      geometry(255, 49152, 16, 16, 2, 128, 13));
  def(kDropout,
      "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, 1, 8, bool>(at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<bool, unsigned int>, unsigned int, float, at::PhiloxCudaState)",
      geometry(32, 0, 2112, 1, 1, 256, 100));
  def(kAdd,
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
      geometry(20, 0, 16384, 1, 1, 128, 100));
  def(kGelu,
      "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)",
      geometry(28, 0, 65536, 1, 1, 128, 100));
  def(kLogSoftmaxFwd,
      "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)",
      geometry(40, 0, 4096, 1, 1, 1024, 92));
  def(kNllFwd,
      "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<c10::BFloat16, float, long>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, long const*, c10::BFloat16 const*, bool, long, long, long, long)",
      geometry(30, 0, 1, 1, 1, 1024, 0));
  def(kNllBwd,
      "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<c10::BFloat16, long>(c10::BFloat16*, c10::BFloat16 const*, long const*, c10::BFloat16 const*, c10::BFloat16 const*, bool, int, int, long, long)",
      geometry(24, 0, 1, 1, 1, 1024, 0));
  def(kLogSoftmaxBwd,
      "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<8, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, long)",
      geometry(38, 0, 4096, 1, 1, 1024, 93));
  def(kFill,
      "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)",
      geometry(16, 0, 65536, 1, 1, 128, 100));
  def(kDropoutBwd,
      "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::masked_scale_kernel<bool, c10::BFloat16, float>(at::Tensor&, at::Tensor const&, at::Tensor const&, float)::{lambda(c10::BFloat16, bool)#1}, std::array<char*, 3ul> >(int, at::native::(anonymous namespace)::masked_scale_kernel<bool, c10::BFloat16, float>(at::Tensor&, at::Tensor const&, at::Tensor const&, float)::{lambda(c10::BFloat16, bool)#1}, std::array<char*, 3ul>)",
      geometry(22, 0, 16384, 1, 1, 128, 100));
  def(kSumReduce,
      "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 8> >(at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 8>)",
      geometry(40, 16, 64, 16, 1, 128, 25));
  def(kGeluBwd,
      "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>)",
      geometry(30, 0, 65536, 1, 1, 128, 100));
  def(kLayerNormBwdInput,
      "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)",
      geometry(40, 0, 4096, 1, 1, 256, 90));
  def(kLayerNormBwdGammaBeta,
      "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<c10::BFloat16, float>(long, long, c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16*, c10::BFloat16*)",
      geometry(64, 8192, 64, 1, 1, 512, 48));
  def(kFlashBwdDot,
      "void pytorch_flash::flash_bwd_dot_do_o_kernel<true, pytorch_flash::Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> > >(pytorch_flash::Flash_bwd_params)",
      geometry(32, 0, 32, 2, 16, 256, 62));
  def(kFlashBwd,
      "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, true, false, false, false, false, false, false, false>(pytorch_flash::Flash_bwd_params)",
      geometry(255, 147456, 16, 2, 16, 256, 12));
  def(kFlashBwdConvert,
      "void pytorch_flash::flash_bwd_convert_dq_kernel<pytorch_flash::Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> > >(pytorch_flash::Flash_bwd_params, int)",
      geometry(40, 32768, 32, 2, 16, 256, 48));
  def(kEmbeddingBwd,
      "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::BFloat16, float, long>(long const*, c10::BFloat16 const*, c10::BFloat16*, int, long, int, int)",
      geometry(38, 8448, 64, 1, 1, 1024, 50));
  def(kMul,
      "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)",
      geometry(20, 0, 65536, 1, 1, 128, 100));
  def(kNcclAllReduce, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
      geometry(96, 87568, 24, 1, 1, 640, 0));
  def(kAdamW,
      "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float*, double, double, double, double, double, bool, float const*, float const*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float*, double, double, double, double, double, bool, float const*, float const*)",
      geometry(96, 0, 320, 1, 1, 512, 48));
  def(kRmsNorm,
      "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)",
      geometry(28, 32, 2048, 1, 1, 1024, 75));
  def(kFusedAddRmsNorm,
      "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)",
      geometry(32, 32, 2048, 1, 1, 256, 70));
  def(kSiluAndMul,
      "void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)",
      geometry(22, 0, 2048, 1, 1, 1024, 80));
  def(kFlashDecode,
      "void pytorch_flash::flash_fwd_splitkv_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, false, false, false, true, false, false, false>(pytorch_flash::Flash_fwd_params)",
      geometry(208, 49152, 1, 8, 16, 128, 8));
  def(kArgmax,
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps<c10::BFloat16>, unsigned int, long, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps<c10::BFloat16>, unsigned int, long, 4>)",
      geometry(32, 16, 8, 1, 1, 512, 3));
  def(kNcclSendRecv, "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
      geometry(64, 0, 1, 1, 1, 512, 0));
  def(kNcclBroadcast, "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
      geometry(96, 87568, 24, 1, 1, 640, 0));
  def(kForeachNorm,
      "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::LpNormFunctor<float, (at::native::(anonymous namespace)::NormType)1, float, float>, float*, int>(at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::LpNormFunctor<float, (at::native::(anonymous namespace)::NormType)1, float, float>, float*, int)",
      geometry(40, 2048, 320, 1, 1, 512, 50));
  def(kForeachMul,
      "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarTensorFunctor<float, 1, 1, 0>, std::multiplies<float>, float const*>(at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarTensorFunctor<float, 1, 1, 0>, std::multiplies<float>, float const*)",
      geometry(32, 0, 320, 1, 1, 512, 60));
  def(kMaxReduce,
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MaxOps<float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MaxOps<float>, unsigned int, float, 4>)",
      geometry(32, 16, 4096, 1, 1, 512, 80));
  def(kExp,
      "void at::native::vectorized_elementwise_kernel<4, at::native::exp_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::exp_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)",
      geometry(20, 0, 65536, 1, 1, 128, 100));
  def(kToBf16,
      "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)",
      geometry(26, 0, 18816, 1, 1, 128, 100));
  def(kConvFprop,
      "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
      geometry(168, 197632, 132, 1, 1, 384, 0));
  def(kConvDgrad,
      "sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
      geometry(168, 197632, 132, 1, 1, 384, 0));
  def(kConvWgrad,
      "sm90_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
      geometry(168, 197632, 132, 1, 1, 384, 0));
  def(kBnStats,
      "void at::native::batch_norm_collect_statistics_channels_last_kernel<at::native::Var, c10::BFloat16, float, 4>(c10::BFloat16 const*, float*, float*, float volatile*, int*, int, int, float)",
      geometry(40, 4096, 1568, 4, 1, 256, 85));
  def(kBnTransform,
      "void at::native::batch_norm_transform_input_channels_last_kernel<c10::BFloat16, float, float, 4>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, float const*, float const*, c10::BFloat16*, int, int, bool)",
      geometry(30, 0, 1568, 4, 1, 256, 95));
  def(kBnBwdReduce,
      "void at::native::batch_norm_backward_reduce_channels_last_kernel<4, c10::BFloat16, float, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, float*, float*, float*, float*, float volatile*, int*, int, int)",
      geometry(48, 8192, 1568, 4, 1, 256, 80));
  def(kBnBwdElemt,
      "void at::native::batch_norm_backward_elemt_channels_last_kernel<4, c10::BFloat16, float, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, float const*, float const*, float const*, c10::BFloat16*, float, int, int)",
      geometry(36, 0, 1568, 4, 1, 256, 92));
  def(kRelu,
      "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#13}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#13}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)",
      geometry(20, 0, 25088, 1, 1, 128, 100));
  def(kReluBwd,
      "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::threshold_kernel_impl<c10::BFloat16>(at::TensorIteratorBase&, c10::BFloat16, c10::BFloat16)::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, at::native::(anonymous namespace)::threshold_kernel_impl<c10::BFloat16>(at::TensorIteratorBase&, c10::BFloat16, c10::BFloat16)::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>)",
      geometry(22, 0, 25088, 1, 1, 128, 100));
  def(kMaxPool,
      "void at::native::(anonymous namespace)::max_pool_forward_nhwc<c10::BFloat16, float>(c10::BFloat16 const*, int, long, long, long, int, int, int, int, int, int, int, int, int, int, int, int, c10::BFloat16*, long*)",
      geometry(40, 8192, 3136, 1, 1, 256, 88));
  def(kMaxPoolBwd,
      "void at::native::(anonymous namespace)::max_pool_backward_nhwc<c10::BFloat16, float>(c10::BFloat16 const*, long const*, int, long, long, long, int, int, int, int, int, int, int, int, int, int, int, int, int, int, c10::BFloat16*)",
      geometry(40, 8192, 12544, 1, 1, 256, 88));
  def(kMeanReduce,
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<float, float, float, float>, unsigned int, c10::BFloat16, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<float, float, float, float>, unsigned int, c10::BFloat16, 4>)",
      geometry(32, 16, 256, 1, 1, 512, 40));
  return c;
}

void run_train_dp(Sim& sim, Catalog& cat, const ProgramShape& shape) {
  Prog p(sim, cat);
  for (int i = 0; i < shape.steps; ++i) train_step(p, cat, shape.first_step + i, shape.layers);
}

void run_infer_decode(Sim& sim, Catalog& cat, const ProgramShape& shape) {
  Prog p(sim, cat);
  const int tp = sim.ranks();
  for (int i = 0; i < shape.steps; ++i) {
    p.annotation(cat.names.add(fmt::format("ProfilerStep#{}", shape.first_step + i)), 4.0, [&] {
      sim.device_sync();  // the serving loop's torch.cuda.synchronize() before a request
      p.cpu(30.0);
      infer_forward(p, true, shape.layers, tp);
      for (int t = 0; t < shape.decode_tokens; ++t) {
        p.cpu(35.0);  // sampler bookkeeping, stopping criteria, next inputs in Python
        infer_forward(p, false, shape.layers, tp);
      }
      p.cpu(20.0);
    }, 3.0);
    p.cpu(2.0);
  }
}

void run_train_pp(Sim& sim, Catalog& cat, const ProgramShape& shape) { Pipeline(sim, cat, shape).run(); }

void run_train_tp(Sim& sim, Catalog& cat, const ProgramShape& shape) {
  Prog p(sim, cat);
  for (int i = 0; i < shape.steps; ++i) tp_step(p, cat, shape.first_step + i, shape.layers);
}

void run_dataloader(Sim& sim, Catalog& cat, const ProgramShape& shape) {
  Prog p(sim, cat);
  for (int i = 0; i < shape.steps; ++i) dataloader_step(p, cat, shape.first_step + i, shape.layers);
}

std::vector<GroupDef> pipeline_groups(int stages) {
  std::vector<GroupDef> out;
  for (int s = 0; s + 1 < stages; ++s) {
    out.push_back(GroupDef{std::to_string(s + 1), fmt::format("pp_p2p_{}_{}", s, s + 1), {s, s + 1}});
  }
  return out;
}

}  // namespace emo::synth::detail
