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
#include "kernels/cuda_wgmma.cuh"

namespace df11::cuda {
namespace {

using wgmma::Descriptor;
using wgmma::DeviceIsSm90;
using wgmma::Swizzled;

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
    wgmma::FenceProxyAsync();  // cp.async's writes, for wgmma
    __syncthreads();           // stage s is in; every warpgroup is done with stage s - 2, whose buffer refills
    if (s + kAhead < stages) load(s + kAhead);
    CopyAsyncCommit();
    const uint32_t ws = SharedAddress(shared + (s % G::kStages) * G::kStageBytes);
    const uint32_t wa = ws + g * 64 * 128, xa = ws + G::kWBytes;
    wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < kKC / 16; ++kk) wgmma::Wgmma<kN>(d, Descriptor(wa + 32 * kk), Descriptor(xa + 32 * kk), true);
    wgmma::Commit();
    wgmma::Wait<1>();
  }
  wgmma::Wait<0>();
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

template <int kN>
Status Launch(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
              bool accumulate, uint16_t* y, float* workspace, cudaStream_t stream) {
  int device = 0, sms = 0;
  DF11_RETURN_IF_ERROR(CurrentDeviceSms(&device, &sms));
  int splits = 1;
  int64_t k_per_split = 0;
  Plan(n, k, sms, Geometry<kN>::kCtasPerSm, &splits, &k_per_split);
  auto* kernel = WgmmaGemmKernel<kN>;
  DF11_RETURN_IF_ERROR(AllowSharedBytes<WgmmaGemmKernel<kN>>(Geometry<kN>::kSharedBytes, device, "WgmmaGemmKernel"));
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
