// The small-batch linear (see cuda_gemm.h, Gemv): y[T, N] = x[T, K] · W[N, K]^T for T <= 4, one warp
// per 1 or 4 output rows, W streamed once in 16-byte loads (evict-first), x read through L1.
// Reduction order, fixed (cuda_gemv_internal.cuh, shared with the fused DF11 GEMV): lane l adds its
// 16-byte chunks l, l + 32, l + 64, ... in order (8 fused multiply-adds each), then a butterfly
// over the 32 lanes; the same for every row, token and call. At 1 token a matrix of GemvSplitChunk
// > 0 (df11_lanes_fixed.h: gate|up) sums its chunks below that chunk and those from it apart, and
// each lane adds the two sums before the butterfly: the order of the fused DF11 GEMV, which gives
// each half of such a matrix's tiles to its own warp.
// Launched as a dependent (programmatic dependent launch, cuda_ops_internal.cuh): while the
// previous kernel finishes, each warp prefetches its first W chunks into L2, then waits for it
// before reading x or writing y. (A DF11 model's W is the output of the DF11 decode launched just
// before, which lets no dependent start early; an L2 prefetch reads nothing into registers, and
// the loads come after the wait.)
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda_gemm.h"
#include "kernels/cuda_gemv_internal.cuh"
#include "kernels/df11_lanes_fixed.h"

namespace df11::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
// 16-byte W loads a lane has in flight: kLoads / kRows chunks of each of its kRows rows.
constexpr int kLoads = 8;

// Grid: ceil(n / (kWarpsPerBlock * kRows)) blocks of kWarpsPerBlock warps; warp w of block b owns
// rows (b * kWarpsPerBlock + w) * kRows + [0, kRows), so each x chunk read serves kRows rows.
// bias: [n] fp32 or null; accumulate: y's old value joins the sum. split: 0, or the chunk (a
// multiple of 32) where each lane's sum splits in two (GemvSplitChunk, at 1 token).
// kGated (GemvGated): W is [2 n, k], gate rows then up rows, and y [kTokens, n] gets the gated
// activation `act` of each gate|up pair: warp w of block b owns pairs (b * kWarpsPerBlock + w) *
// kRows / 2 + [0, kRows / 2), its rows r < kRows / 2 the gate rows, the others the up rows. Its
// dependents may launch only once its loads are done: what follows it is the down projection, a
// Gemv of hundreds of blocks that would otherwise take the SM slots of its later waves (H100,
// Qwen3-8B shape, BF16 step at batch 1: 5.87-5.93 ms against 6.00-6.08 with dependents allowed at
// the start and 6.01-6.04 unfused; bench/results/ab_h100_gated_gemv.log).
// kSplit: split > 0 (1 token only).
template <int kTokens, int kRows, bool kGated, bool kSplit>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    GemvKernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, const float* __restrict__ bias,
               int64_t n, int64_t k, bool accumulate, Activation act, int64_t split, uint16_t* __restrict__ y) {
  if constexpr (!kGated) AllowDependents();
  constexpr int kOwn = kGated ? kRows / 2 : kRows;  // output rows of a warp
  const int lane = threadIdx.x % 32;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * kOwn;
  if (first >= n) {
    WaitPrevious();
    return;
  }
  const int64_t chunks = k / 8;
  const uint4* xs = reinterpret_cast<const uint4*>(x);
  const uint4* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {  // rows past n read row first again; their sums are dropped
    const int64_t own = first + r % kOwn, base = kGated && r >= kOwn ? n : 0;
    wrow[r] = reinterpret_cast<const uint4*>(w + (base + (own < n ? own : first)) * k);
  }
  constexpr int kUnroll = kLoads / kRows;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    if (lane + 32 * u < chunks) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(wrow[r] + lane + 32 * u));
    }
  }
  WaitPrevious();
  float acc[kRows][kTokens];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;
  }
  auto step = [&](const uint4(&wv)[kRows], int64_t c) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const uint4 xv = __ldg(xs + t * chunks + c);
#pragma unroll
      for (int r = 0; r < kRows; ++r) GemvDot8(wv[r], xv, acc[r][t]);
    }
  };
  // The lane's chunks c, c + 32, ... below end; at chunk `swap` (an iteration's first) the sums so
  // far move to `below` and the sums start again from zero. A lane with no chunk from the split on
  // (chunks < split + 32) never swaps: `below` stays zero and the lane's sum is its first half's
  // plus zero, as the split order gives it.
  float below[kRows][kTokens] = {};
  auto sum = [&](int64_t c, int64_t end, int64_t swap) {
    auto restart = [&] {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
          below[r][t] = acc[r][t];
          acc[r][t] = 0.0f;
        }
      }
    };
    for (; c + 32 * (kUnroll - 1) < end; c += 32 * kUnroll) {
      if (kSplit && c == swap) restart();
      uint4 wv[kUnroll][kRows];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) wv[u][r] = __ldcs(wrow[r] + c + 32 * u);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) step(wv[u], c + 32 * u);
    }
    for (; c < end; c += 32) {
      if (kSplit && c == swap) restart();
      uint4 wv[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) wv[r] = __ldcs(wrow[r] + c);
      step(wv, c);
    }
  };
  if constexpr (kSplit) {
    // One pass where the split is an iteration's first chunk (32 kUnroll divides it: gate|up of
    // the 8B shape), else two.
    if (split % (32 * kUnroll) == 0) {
      sum(lane, chunks, split + lane);
    } else {
      sum(lane, split, -1);
      sum(split + lane, chunks, split + lane);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int t = 0; t < kTokens; ++t) acc[r][t] = below[r][t] + acc[r][t];
    }
  } else {
    sum(lane, chunks, -1);
  }
  if constexpr (kGated) {
    AllowDependents();  // see GemvKernel's comment
    GemvGatedStore<kOwn, kTokens>(acc, first, n, bias, act, y);
  } else {
    GemvStore(acc, first, n, bias, accumulate, y);
  }
}

template <int kTokens, int kRows, bool kGated = false>
void LaunchRows(const uint16_t* x, const uint16_t* w, const float* bias, int64_t n, int64_t k, bool accumulate,
                uint16_t* y, cudaStream_t s, Activation act = Activation::kSilu) {
  constexpr int kOwn = kGated ? kRows / 2 : kRows;
  const int64_t blocks = (n + kWarpsPerBlock * kOwn - 1) / (kWarpsPerBlock * kOwn);
  // W's rows: n, or 2 n of a gate|up linear.
  const int64_t split = kTokens == 1 ? GemvSplitChunk(kGated ? 2 * n : n, k) : 0;
  // An error shows in Gemv's CheckLaunch.
  if constexpr (kTokens == 1) {
    if (split > 0 && split < k / 8) {
      LaunchDependent(GemvKernel<kTokens, kRows, kGated, true>, dim3(static_cast<unsigned>(blocks)),
                      dim3(kWarpsPerBlock * 32), s, x, w, bias, n, k, accumulate, act, split, y);
      return;
    }
  }
  LaunchDependent(GemvKernel<kTokens, kRows, kGated, false>, dim3(static_cast<unsigned>(blocks)),
                  dim3(kWarpsPerBlock * 32), s, x, w, bias, n, k, accumulate, act, int64_t{0}, y);
}

// f.template operator()<kTokens>() for kTokens = tokens (1..kGemvMaxTokens).
template <typename F>
void ForTokens(int64_t tokens, F&& f) {
  switch (tokens) {
    case 1:
      f.template operator()<1>();
      break;
    case 2:
      f.template operator()<2>();
      break;
    case 3:
      f.template operator()<3>();
      break;
    default:
      f.template operator()<4>();
      break;
  }
}

// rows_per_warp 1, 2 or 4; 0 picks four where that still gives every SM a few blocks, else one.
template <int kTokens>
void Launch(const uint16_t* x, const uint16_t* w, const float* bias, int64_t n, int64_t k, bool accumulate, uint16_t* y,
            int rows_per_warp, cudaStream_t s) {
  if (rows_per_warp == 0) rows_per_warp = n >= 8192 ? 4 : 1;
  switch (rows_per_warp) {
    case 4:
      LaunchRows<kTokens, 4>(x, w, bias, n, k, accumulate, y, s);
      break;
    case 2:
      LaunchRows<kTokens, 2>(x, w, bias, n, k, accumulate, y, s);
      break;
    default:
      LaunchRows<kTokens, 1>(x, w, bias, n, k, accumulate, y, s);
      break;
  }
}

}  // namespace

bool GemvApplies(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t k) {
  return tokens >= 1 && tokens <= kGemvMaxTokens && k % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

Status Gemv(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
            bool accumulate, uint16_t* y, GpuStream stream, int rows_per_warp) {
  if (!GemvApplies(x, w, tokens, k) || n <= 0 || n > (int64_t{1} << 36)) {
    return InvalidArgument("Gemv: [" + std::to_string(tokens) + ", " + std::to_string(k) + "] x [" + std::to_string(n) +
                           ", " + std::to_string(k) +
                           "]^T needs 1..4 tokens, K a multiple of 8 and 16-byte aligned x and W");
  }
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  ForTokens(tokens, [&]<int kTokens>() { Launch<kTokens>(x, w, bias, n, k, accumulate, y, rows_per_warp, s); });
  return CheckLaunch("GemvKernel");
}

Status GemvGated(Activation act, const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t inter,
                 int64_t k, uint16_t* out, GpuStream stream) {
  if (!GemvApplies(x, w, tokens, k) || inter <= 0 || inter > (int64_t{1} << 35)) {
    return InvalidArgument("GemvGated: [" + std::to_string(tokens) + ", " + std::to_string(k) + "] x [2 x " +
                           std::to_string(inter) + ", " + std::to_string(k) +
                           "]^T needs 1..4 tokens, K a multiple of 8 and 16-byte aligned x and W");
  }
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  // Two pairs (four rows) a warp where Gemv would take four rows per warp for the 2 inter rows.
  const bool wide = 2 * inter >= 8192;
  ForTokens(tokens, [&]<int kTokens>() {
    if (wide) {
      LaunchRows<kTokens, 4, true>(x, w, bias, inter, k, false, out, s, act);
    } else {
      LaunchRows<kTokens, 2, true>(x, w, bias, inter, k, false, out, s, act);
    }
  });
  return CheckLaunch("GemvKernel");
}

}  // namespace df11::cuda
