// emo-microbench: the CUDA microbenchmarks `emo calibrate` runs at each locked SM clock.
//
//   emo-microbench KIND [--flops-per-byte X] [--min-seconds S] [--device N | --uuid GPU-...]
//   KIND: fma_loop | stream_copy | intensity | tensor_gemm | idle
//
// After setup and a warm-up it prints {"phase":"start"}, runs the kernel back to back for at least S
// seconds, then prints one result line {"kind":"fma_loop","seconds":2.004,"iterations":93}; the caller
// reads the energy counter at those two lines. Errors go to stderr with exit status 1 (2 for usage).
// Nothing here touches clocks or power limits.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

[[noreturn]] void die(const std::string& what, int code = 1) {
  std::fprintf(stderr, "emo-microbench: error: %s\n", what.c_str());
  std::exit(code);
}

void check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) die(std::string(call) + ": " + cudaGetErrorString(rc));
}
#define CK(call) check((call), #call)

// ---- kernels --------------------------------------------------------------------------------------

// Compute-bound: 8 independent FMA chains per thread in registers (enough to hide the FMA latency),
// no memory traffic except one conditional store that keeps the compiler from removing the loop.
__global__ void fma_kernel(float* out, int iters, float seed) {
  float a[8];
  for (int j = 0; j < 8; ++j) a[j] = seed + 0.001f * static_cast<float>(threadIdx.x + j);
  const float m = 0.9999f, c = 0.0001f;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], m, c);
  }
  float s = 0;
  for (int j = 0; j < 8; ++j) s += a[j];
  if (s == 12345.678f) out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// Memory-bound: a grid-stride float4 copy of a buffer far larger than L2.
__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}

// Roofline sweep: each float4 read and written (32 bytes) gets `fmas` FMAs per lane, 4 lanes × 2 flops
// each, so flops/byte = 8·fmas/32 = fmas/4. Example: --flops-per-byte 8 → 32 FMAs per lane.
__global__ void intensity_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n,
                                 int fmas) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const float m = 0.9999f, c = 0.0001f;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float4 v = src[i];
    for (int k = 0; k < fmas; ++k) {
      v.x = fmaf(v.x, m, c);
      v.y = fmaf(v.y, m, c);
      v.z = fmaf(v.z, m, c);
      v.w = fmaf(v.w, m, c);
    }
    dst[i] = v;
  }
}

// Tensor-core GEMM C = A·B, bf16 inputs, fp32 accumulate (WMMA 16×16×16). A block of 8 warps computes
// a 128×128 tile of C; each warp a 64×32 piece (4×2 fragments). Tiles of A (128×32) and B (32×128)
// are staged in shared memory, rows padded by 8 elements against bank conflicts (WMMA wants the
// leading dimension a multiple of 8 for 16-bit types). M, N, K are multiples of 128.
constexpr int kBM = 128, kBN = 128, kBK = 32, kPad = 8;
constexpr int kGemmThreads = 256;

__global__ void __launch_bounds__(kGemmThreads)
    gemm_kernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                float* __restrict__ c, int m, int n, int k) {
  using namespace nvcuda;
  __shared__ __align__(32) __nv_bfloat16 as[kBM][kBK + kPad];
  __shared__ __align__(32) __nv_bfloat16 bs[kBK][kBN + kPad];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warp_m = warp / 4;  // 0..1: 64 rows each
  const int warp_n = warp % 4;  // 0..3: 32 columns each
  const int row0 = static_cast<int>(blockIdx.y) * kBM, col0 = static_cast<int>(blockIdx.x) * kBN;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < k; k0 += kBK) {
    // 128×32 of A and 32×128 of B: 512 chunks of 8 bf16 (16 bytes) each, 2 per thread per matrix.
    for (int chunk = static_cast<int>(threadIdx.x); chunk < kBM * kBK / 8; chunk += kGemmThreads) {
      int r = chunk / (kBK / 8), cc = (chunk % (kBK / 8)) * 8;
      *reinterpret_cast<uint4*>(&as[r][cc]) =
          *reinterpret_cast<const uint4*>(&a[static_cast<size_t>(row0 + r) * k + k0 + cc]);
    }
    for (int chunk = static_cast<int>(threadIdx.x); chunk < kBK * kBN / 8; chunk += kGemmThreads) {
      int r = chunk / (kBN / 8), cc = (chunk % (kBN / 8)) * 8;
      *reinterpret_cast<uint4*>(&bs[r][cc]) =
          *reinterpret_cast<const uint4*>(&b[static_cast<size_t>(k0 + r) * n + col0 + cc]);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[2];
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(fa[i], &as[warp_m * 64 + i * 16][kk], kBK + kPad);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &bs[kk][warp_n * 32 + j * 16], kBN + kPad);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      int r = row0 + warp_m * 64 + i * 16, col = col0 + warp_n * 32 + j * 16;
      wmma::store_matrix_sync(&c[static_cast<size_t>(r) * n + col], acc[i][j], n, wmma::mem_row_major);
    }
  }
}

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, unsigned seed) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    p[i] = __float2bfloat16(static_cast<float>(h % 2001u) / 1000.0f - 1.0f);
  }
}

__global__ void fill_f32(float* p, size_t n) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = static_cast<float>(i % 1000u) * 0.001f;
}

// ---- driver ---------------------------------------------------------------------------------------

struct Args {
  std::string kind;
  double flops_per_byte = -1;
  double min_seconds = 1.0;
  int device = 0;
  std::string uuid;
};

void usage(const char* msg) {
  std::fprintf(stderr,
               "usage: emo-microbench fma_loop|stream_copy|intensity|tensor_gemm|idle [--flops-per-byte X] "
               "[--min-seconds S] [--device N | --uuid GPU-...]\n");
  if (msg) die(msg, 2);
  std::exit(0);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage((s + " needs a value").c_str());
      return argv[++i];
    };
    auto number = [&](const std::string& v) {
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') usage((s + ": '" + v + "' is not a number").c_str());
      return x;
    };
    if (s == "--help" || s == "-h")
      usage(nullptr);
    else if (s == "--flops-per-byte")
      a.flops_per_byte = number(value());
    else if (s == "--min-seconds")
      a.min_seconds = number(value());
    else if (s == "--device")
      a.device = static_cast<int>(number(value()));
    else if (s == "--uuid")
      a.uuid = value();
    else if (!s.empty() && s[0] == '-')
      usage(("unknown option " + s).c_str());
    else if (a.kind.empty())
      a.kind = s;
    else
      usage(("unexpected argument " + s).c_str());
  }
  if (a.kind == "fma") a.kind = "fma_loop";
  if (a.kind == "copy") a.kind = "stream_copy";
  if (a.kind == "gemm") a.kind = "tensor_gemm";
  if (a.kind != "fma_loop" && a.kind != "stream_copy" && a.kind != "intensity" && a.kind != "tensor_gemm" &&
      a.kind != "idle")
    usage(a.kind.empty() ? "no benchmark named" : ("unknown benchmark " + a.kind).c_str());
  if (a.kind == "intensity" && !(a.flops_per_byte >= 0)) usage("intensity needs --flops-per-byte X (X >= 0)");
  if (!(a.min_seconds > 0)) usage("--min-seconds must be > 0");
  return a;
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", the form NVML and nvidia-smi print.
std::string uuid_string(const cudaUUID_t& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return buf;
}

int select_device(const Args& a) {
  int count = 0;
  CK(cudaGetDeviceCount(&count));
  if (a.uuid.empty()) {
    if (a.device < 0 || a.device >= count)
      die("no CUDA device " + std::to_string(a.device) + " (" + std::to_string(count) + " visible)");
    return a.device;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, d));
    if (uuid_string(prop.uuid) == a.uuid) return d;
  }
  die("no visible CUDA device has UUID " + a.uuid + " (is CUDA_VISIBLE_DEVICES hiding it?)");
}

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Runs `launch` back to back: a warm-up of ~0.3 s (which also sizes batches of ~50 ms, so the host
// sync between batches costs < 1 %), the start line, then whole batches until `min_seconds` passed.
template <class Launch>
void run_timed(const Args& a, Launch launch) {
  auto t0 = Clock::now();
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  double one = std::max(since(t0), 1e-6);
  long batch = std::max(1L, static_cast<long>(0.05 / one));
  t0 = Clock::now();
  while (since(t0) < 0.3) {
    for (long i = 0; i < batch; ++i) launch();
    CK(cudaDeviceSynchronize());
  }
  std::printf("{\"phase\":\"start\"}\n");
  std::fflush(stdout);
  long iterations = 0;
  t0 = Clock::now();
  double elapsed = 0;
  do {
    for (long i = 0; i < batch; ++i) launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    iterations += batch;
    elapsed = since(t0);
  } while (elapsed < a.min_seconds);
  std::printf("{\"kind\":\"%s\",\"seconds\":%.6f,\"iterations\":%ld}\n", a.kind.c_str(), elapsed, iterations);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  int dev = select_device(a);
  CK(cudaSetDevice(dev));
  CK(cudaFree(nullptr));  // create the context now, before anything is timed
  int sms = 0, l2 = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));

  if (a.kind == "idle") {
    // Nothing launched: the GPU idles at the locked clock with a context open, as between kernels.
    std::printf("{\"phase\":\"start\"}\n");
    std::fflush(stdout);
    auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(a.min_seconds));
    std::printf("{\"kind\":\"idle\",\"seconds\":%.6f,\"iterations\":0}\n", since(t0));
    return 0;
  }

  if (a.kind == "fma_loop") {
    float* out = nullptr;
    const int threads = 256, blocks = sms * 8;
    CK(cudaMalloc(&out, sizeof(float) * threads * blocks));
    // ~10 ms per launch on a large GPU: 2^16 iterations × 8 chains × 2 flops per thread.
    run_timed(a, [&] { fma_kernel<<<blocks, threads>>>(out, 1 << 16, 1.0f); });
    CK(cudaFree(out));
  } else if (a.kind == "stream_copy" || a.kind == "intensity") {
    // Each buffer 16× the L2 (at least 256 MiB), within a third of free memory each.
    size_t bytes = std::max<size_t>(static_cast<size_t>(l2) * 16, size_t(256) << 20);
    bytes = std::min(bytes, free_b / 3) / 16 * 16;
    if (bytes < (size_t(16) << 20)) die("not enough free GPU memory for the copy buffers");
    size_t n = bytes / sizeof(float4);
    float4 *src = nullptr, *dst = nullptr;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&dst, bytes));
    fill_f32<<<sms * 4, 256>>>(reinterpret_cast<float*>(src), bytes / sizeof(float));
    const int threads = 256, blocks = sms * 8;
    if (a.kind == "stream_copy") {
      run_timed(a, [&] { copy_kernel<<<blocks, threads>>>(src, dst, n); });
    } else {
      int fmas = static_cast<int>(a.flops_per_byte * 4 + 0.5);
      run_timed(a, [&] { intensity_kernel<<<blocks, threads>>>(src, dst, n, fmas); });
    }
    CK(cudaFree(src));
    CK(cudaFree(dst));
  } else {  // tensor_gemm
    int major = 0;
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 8) die("tensor_gemm needs bf16 tensor cores (compute capability 8.0 or newer)");
    const int m = 4096, n = 4096, k = 4096;
    __nv_bfloat16 *da = nullptr, *db = nullptr;
    float* dc = nullptr;
    CK(cudaMalloc(&da, sizeof(__nv_bfloat16) * m * k));
    CK(cudaMalloc(&db, sizeof(__nv_bfloat16) * k * n));
    CK(cudaMalloc(&dc, sizeof(float) * m * n));
    fill_bf16<<<sms * 4, 256>>>(da, static_cast<size_t>(m) * k, 1u);
    fill_bf16<<<sms * 4, 256>>>(db, static_cast<size_t>(k) * n, 2u);
    dim3 grid(n / kBN, m / kBM);
    run_timed(a, [&] { gemm_kernel<<<grid, kGemmThreads>>>(da, db, dc, m, n, k); });
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dc));
  }
  return 0;
}
