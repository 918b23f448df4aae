// The train-dp and infer-decode programs. Operator names, nesting and kernel
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
      p.op("aten::embedding", 4.0, [&] {
        p.kop("aten::index_select", 5.0, kIndexSelect, mem_us(2 * kAct), 2.0,
              p.shapes({{{32000, 2048}}, {{}, kScalar, "0"}, {{4096}, kLong}}));
      }, 1.0, p.shapes({{{32000, 2048}}, {{2, 2048}, kLong}, {{}, kScalar, "-1"}, {{}, kScalar, "False"}, {{}, kScalar, "False"}}));
      for (int l = 0; l < layers; ++l) train_layer_fwd(p);
      layer_norm_fwd(p);
      linear_fwd(p, kGemmTn256, kTokens, kVocab, kH, false);
    }, 8.0);
    const double logits = kTokens * kVocab * 2;
    p.op("aten::cross_entropy_loss", 3.0, [&] {
      p.op("aten::log_softmax", 2.0, [&] {
        p.kop("aten::_log_softmax", 4.0, kLogSoftmaxFwd, mem_us(2 * logits), 1.5);
      }, 1.0);
      p.op("aten::nll_loss_nd", 2.0, [&] {
        p.op("aten::nll_loss", 2.0, [&] {
          p.kop("aten::nll_loss_forward", 4.0, kNllFwd, 8.0, 1.5);
        }, 1.0);
      }, 1.0);
    }, 1.0);
    p.cpu(25.0);  // loss.backward() from Python

    autograd_node(p, "autograd::engine::evaluate_function: NllLossBackward0", "NllLossBackward0", [&] {
      p.op("aten::nll_loss_backward", 4.0, [&] {
        p.op("aten::zero_", 2.0, [&] { p.kop("aten::fill_", 3.0, kFill, mem_us(logits), 1.0); }, 1.0);
        s.launch(kNllBwd, 10.0);
      }, 2.0);
    });
    autograd_node(p, "autograd::engine::evaluate_function: LogSoftmaxBackward0", "LogSoftmaxBackward0", [&] {
      p.kop("aten::_log_softmax_backward_data", 4.0, kLogSoftmaxBwd, mem_us(3 * logits), 1.5);
    });
    autograd_node(p, "autograd::engine::evaluate_function: MmBackward0", "MmBackward0", [&] {
      p.op("aten::mm", 4.0, [&] { p.gemm(kGemmNn, gemm_us(kTokens, kH, kVocab)); }, 2.0);
      p.op("aten::mm", 4.0, [&] { p.gemm(kGemmNt, gemm_us(kVocab, kH, kTokens)); }, 2.0);
    });
    layer_norm_bwd(p);

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
    autograd_node(p, "autograd::engine::evaluate_function: EmbeddingBackward0", "EmbeddingBackward0", [&] {
      p.op("aten::embedding_backward", 3.0, [&] {
        p.op("aten::embedding_dense_backward", 5.0, [&] {
          s.memset(static_cast<int64_t>(kVocab * kH * 4));
          s.launch(kEmbeddingBwd, mem_us(4 * kAct));
        }, 2.0);
      }, 1.0);
    });
    accumulate_grad(p);
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

}  // namespace emo::synth::detail
