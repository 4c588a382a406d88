// The Hopper tensor-core linear for 1-128 tokens (cuda_gemm.h: WgmmaGemm), built for sm_90a
// alone (its own library, kernels/CMakeLists.txt). A measured building block, not yet used by the
// model: y[T, N] = x[T, K] · W[N, K]^T (+ bias) (+ y), W BF16, read once.
//
// Geometry: a CTA of two warpgroups owns kBM = 128 rows of W (warpgroup g rows 64 g ..) and every
// token; K goes in stages of kKC = 64 columns, each row of a stage one 128-byte line of shared
// memory in the 128-byte swizzle (16-byte chunk c of row r at r * 128 + ((c ^ r % 8) * 16)), the
// layout wgmma reads K-major with SBO = 1024 bytes (8 rows). All 256 threads copy stages in by
// cp.async, kStages - 2 ahead; each warpgroup multiplies a stage with 4 wgmma m64nNk16 (N = 64 or
// 128 tokens; x's rows past T are zeros), one group of them left running while the next stage
// lands. K splits into up to kMaxSplits parts, as many as still fit one wave of CTAs, whose fp32
// partial sums a second kernel adds in split order. Measured (bench/wgmma_bench, H100,
// bench/results/wgmma_h100.log): the linears of an 8B decode step at 64 tokens 7.36 ms against
// cuBLAS 7.82 and TileGemm 9.18; at 128 tokens 9.22 against cuBLAS 7.91.
//
// Reduction order, fixed for a given (T bucket, N, K, SM count: the splits): per split, the wgmma of each
// 16-column step in column order (inside a step the hardware's order), then the splits in order,
// then the bias, then y's old value, rounded to bf16 once.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda_gemm.h"
#include "kernels/cuda_ops_internal.cuh"

namespace df11::cuda {
namespace {

constexpr int kBM = 128;  // W rows per CTA
constexpr int kKC = 64;   // columns per stage: one 128-byte line per row
constexpr int kThreads = 256;
constexpr int kMaxSplits = 8;

template <int kN>
struct Geometry {
  // 4 stages for 64 tokens, 3 for 128: 97 KB of shared memory, 2 CTAs per SM. Measured on the H100
  // (bench/results/wgmma_h100_v*.log): 6 and 4 stages at 1 CTA per SM were slower (one-wave grids
  // need the second CTA slot: gate|up's 192 row blocks), 128 tokens at 1 CTA per SM with 6 stages
  // 9.93 ms for the step's linears against 9.15.
  static constexpr int kStages = kN <= 64 ? 4 : 3;
  static constexpr int kCtasPerSm = 2;
  static constexpr int kWBytes = kBM * kKC * 2;  // 16 KB
  static constexpr int kXBytes = kN * kKC * 2;   // 8 or 16 KB
  static constexpr int kStageBytes = kWBytes + kXBytes;
  static constexpr int kSharedBytes = kStages * kStageBytes + 1024;  // + room to align to 1024
};

// Byte offset of 16-byte chunk c (0..7) of row r in a stage (128-byte swizzle).
__device__ __forceinline__ uint32_t Swizzled(int r, int c) {
  return static_cast<uint32_t>(r * 128 + ((c ^ (r & 7)) << 4));
}

// wgmma's shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle starting at
// shared address `address`: swizzle mode 1 (bits 62-63), stride between 8-row groups 1024 bytes
// (bits 32-45, in 16-byte units), leading offset unused (1), start address in 16-byte units.
__device__ __forceinline__ uint64_t Descriptor(uint32_t address) {
  return uint64_t{1} << 62 | uint64_t{1024 >> 4} << 32 | uint64_t{1} << 16 | ((address & 0x3FFFF) >> 4);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// d (+)= W stage rows · x stage tokens over 16 columns: wgmma m64n64k16, both operands K-major in
// shared memory (descriptors a and b), fp32 accumulators; accumulate = false starts from zero.
__device__ __forceinline__ void Wgmma64(float (&d)[32], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, "
      "1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}

// d (+)= W stage rows · x stage tokens over 16 columns: wgmma m64n128k16, both operands K-major in
// shared memory (descriptors a and b), fp32 accumulators; accumulate = false starts from zero.
__device__ __forceinline__ void Wgmma128(float (&d)[64], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}

template <int kN>
__device__ __forceinline__ void Wgmma(float (&d)[kN / 2], uint64_t a, uint64_t b, bool accumulate) {
  if constexpr (kN == 64) {
    Wgmma64(d, a, b, accumulate);
  } else {
    Wgmma128(d, a, b, accumulate);
  }
}
#endif

// Grid (ceil(n / kBM), splits); kThreads threads; Geometry<kN>::kSharedBytes of dynamic shared
// memory. Split s takes columns [s * k_per_split, min(k, (s + 1) * k_per_split)). partial: null
// (one split) or [splits][tokens][n] fp32.
template <int kN>
__global__ void __launch_bounds__(kThreads, Geometry<kN>::kCtasPerSm)
    WgmmaGemmKernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, const float* __restrict__ bias,
                    int64_t tokens, int64_t n, int64_t k, int64_t k_per_split, bool accumulate,
                    uint16_t* __restrict__ y, float* __restrict__ partial) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using G = Geometry<kN>;
  extern __shared__ uint8_t shared_raw[];
  uint8_t* shared = shared_raw + ((1024 - SharedAddress(shared_raw) % 1024) % 1024);
  AllowDependents();
  const int tid = threadIdx.x, g = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int64_t row0 = int64_t{blockIdx.x} * kBM;
  const int64_t k0 = int64_t{blockIdx.y} * k_per_split, k1 = min(k, k0 + k_per_split);
  const int stages = static_cast<int>((k1 - k0 + kKC - 1) / kKC);
  const uint64_t policy = EvictFirstPolicy();  // W is read once
  WaitPrevious();                              // x and y belong to earlier kernels
  auto load = [&](int s) {
    uint8_t* ws = shared + (s % G::kStages) * G::kStageBytes;
    uint8_t* xs = ws + G::kWBytes;
    const int64_t col0 = k0 + int64_t{s} * kKC;
#pragma unroll
    for (int i = tid; i < kBM * 8; i += kThreads) {
      const int r = i / 8, c = i % 8;
      const int64_t row = row0 + r, col = col0 + 8 * c;
      const bool in = row < n && col < k1;
      CopyAsync16(ws + Swizzled(r, c), in ? w + row * k + col : w, in ? 16 : 0, policy);
    }
#pragma unroll
    for (int i = tid; i < kN * 8; i += kThreads) {
      const int r = i / 8, c = i % 8;
      const int64_t col = col0 + 8 * c;
      const bool in = r < tokens && col < k1;
      CopyAsync16(xs + Swizzled(r, c), in ? x + r * k + col : x, in ? 16 : 0);
    }
  };
  float d[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) d[i] = 0.0f;
  // Stages are copied kAhead = kStages - 2 ahead: the buffer a new copy fills was last read by the
  // wgmma group of two stages before, which every warpgroup has waited for (wait_group 1 leaves
  // only the last group running), so one group of wgmma runs while the next stage's copies wait.
  constexpr int kAhead = G::kStages - 2;
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < stages) load(s);
    CopyAsyncCommit();
  }
  for (int s = 0; s < stages; ++s) {
    CopyAsyncWait<kAhead - 1>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // cp.async's writes, for wgmma
    __syncthreads();  // stage s is in; every warpgroup is done with stage s - 2, whose buffer refills
    if (s + kAhead < stages) load(s + kAhead);
    CopyAsyncCommit();
    const uint32_t ws = SharedAddress(shared + (s % G::kStages) * G::kStageBytes);
    const uint32_t wa = ws + g * 64 * 128, xa = ws + G::kWBytes;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kKC / 16; ++kk) Wgmma<kN>(d, Descriptor(wa + 32 * kk), Descriptor(xa + 32 * kk), true);
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  CopyAsyncWait<0>();
  // d[4 j + e]: row 64 g + 16 warp + lane / 4 + 8 (e / 2), token 8 j + 2 (lane % 4) + e % 2.
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = row0 + 64 * g + 16 * warp + lane / 4 + 8 * (e / 2);
      const int64_t token = 8 * j + 2 * (lane % 4) + e % 2;
      if (row >= n || token >= tokens) continue;
      if (partial != nullptr) {
        partial[(int64_t{blockIdx.y} * tokens + token) * n + row] = d[4 * j + e];
      } else {
        float v = d[4 * j + e];
        if (bias != nullptr) v += bias[row];
        if (accumulate) v += Bf16ToFloat(y[token * n + row]);
        y[token * n + row] = FloatToBf16(v);
      }
    }
  }
#else
  __trap();  // built for sm_90a only
#endif
}

// y[t, r] = bf16(sum over splits in order of partial[s, t, r] (+ bias[r]) (+ y[t, r])).
__global__ void AddSplitsKernel(const float* __restrict__ partial, int splits, const float* __restrict__ bias,
                                int64_t tokens, int64_t n, bool accumulate, uint16_t* __restrict__ y) {
  AllowDependents();
  WaitPrevious();
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= tokens * n) return;
  float v = partial[i];
  for (int s = 1; s < splits; ++s) v += partial[s * tokens * n + i];
  if (bias != nullptr) v += bias[i % n];
  if (accumulate) v += Bf16ToFloat(y[i]);
  y[i] = FloatToBf16(v);
}

// Splits of K and columns per split for n rows: the most splits whose CTAs still fit one wave
// (ctas_per_sm per SM), each split at least 4 stages long.
void Plan(int64_t n, int64_t k, int sms, int ctas_per_sm, int* splits, int64_t* k_per_split) {
  const int64_t row_blocks = (n + kBM - 1) / kBM;
  int64_t s = std::min<int64_t>({kMaxSplits, ctas_per_sm * sms / row_blocks, std::max<int64_t>(1, k / (4 * kKC))});
  s = std::max<int64_t>(1, s);
  *k_per_split = ((k + s - 1) / s + kKC - 1) / kKC * kKC;
  *splits = static_cast<int>((k + *k_per_split - 1) / *k_per_split);
}

bool DeviceIsSm90() {
  static const bool sm90 = [] {
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major == 9 && minor == 0;
  }();
  return sm90;
}

template <int kN>
Status Launch(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
              bool accumulate, uint16_t* y, float* workspace, cudaStream_t stream) {
  int device = 0, sms = 0;
  DF11_RETURN_IF_ERROR(CurrentDeviceSms(&device, &sms));
  int splits = 1;
  int64_t k_per_split = 0;
  Plan(n, k, sms, Geometry<kN>::kCtasPerSm, &splits, &k_per_split);
  auto* kernel = WgmmaGemmKernel<kN>;
  static thread_local int sized_device = -1;
  if (device != sized_device) {
    DF11_RETURN_IF_ERROR(
        CheckCuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Geometry<kN>::kSharedBytes),
                  "WgmmaGemmKernel"));
    sized_device = device;
  }
  const dim3 grid(static_cast<unsigned>((n + kBM - 1) / kBM), static_cast<unsigned>(splits));
  LaunchDependentShared(kernel, grid, dim3(kThreads), Geometry<kN>::kSharedBytes, stream, x, w, bias, tokens, n, k,
                        k_per_split, accumulate, y, splits > 1 ? workspace : nullptr);
  DF11_RETURN_IF_ERROR(CheckLaunch("WgmmaGemmKernel"));
  if (splits == 1) return Status::Ok();
  const int64_t outputs = tokens * n;
  LaunchDependent(AddSplitsKernel, dim3(static_cast<unsigned>((outputs + 255) / 256)), dim3(256), stream,
                  static_cast<const float*>(workspace), splits, bias, tokens, n, accumulate, y);
  return CheckLaunch("AddSplitsKernel");
}

}  // namespace

bool WgmmaGemmAvailable() { return DeviceIsSm90(); }

int64_t WgmmaGemmWorkspaceFloats(int64_t tokens, int64_t n, int64_t k) {
  return int64_t{kMaxSplits} * std::max<int64_t>(tokens, 0) * std::max<int64_t>(n, 0);
}

Status WgmmaGemm(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
                 bool accumulate, uint16_t* y, float* workspace, GpuStream stream) {
  if (tokens < 1 || tokens > kWgmmaGemmMaxTokens || n <= 0 || n > (int64_t{1} << 31) || k <= 0 || k % 8 != 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    return InvalidArgument("WgmmaGemm: [" + std::to_string(tokens) + ", " + std::to_string(k) + "] x [" +
                           std::to_string(n) + ", " + std::to_string(k) + "]^T needs 1.." +
                           std::to_string(kWgmmaGemmMaxTokens) +
                           " tokens, K a multiple of 8 and 16-byte aligned x and W");
  }
  if (!DeviceIsSm90()) return FailedPrecondition("WgmmaGemm: needs a compute capability 9.0 GPU (sm_90a)");
  if (workspace == nullptr) return InvalidArgument("WgmmaGemm: no split-K workspace (WgmmaGemmWorkspaceFloats)");
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (tokens <= 64) return Launch<64>(x, w, bias, tokens, n, k, accumulate, y, workspace, s);
  return Launch<128>(x, w, bias, tokens, n, k, accumulate, y, workspace, s);
}

}  // namespace df11::cuda
