// The small-batch linear's arithmetic, shared by the BF16 Gemv (cuda_gemv.cu) and the fused DF11
// GEMV (df11_lanes.cu) so that both give the same bits: lane l of a warp adds the products of its
// 8-element column groups l, l + 32, l + 64, ... in that order (GemvDot8, 8 fused multiply-adds
// each), then GemvStore sums the 32 lanes by butterfly, adds the bias and y's old value, and
// rounds to bf16 once. Included only by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda_ops_internal.cuh"

namespace df11::cuda {

// acc += w[0..7] · x[0..7], both 8 bf16 in a uint4, in element order.
__device__ __forceinline__ void GemvDot8(const uint4& w, const uint4& x, float& acc) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc = fmaf(__uint_as_float(wv[i] << 16), __uint_as_float(xv[i] << 16), acc);
    acc = fmaf(__uint_as_float(wv[i] & 0xffff0000u), __uint_as_float(xv[i] & 0xffff0000u), acc);
  }
}

// x's 8 bf16 as floats, in the order GemvDot8 takes them (a kernel that multiplies one x chunk
// with several rows converts it once).
__device__ __forceinline__ void GemvExpand8(const uint4& x, float (&xf)[8]) {
  const uint32_t xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    xf[2 * i] = __uint_as_float(xv[i] << 16);
    xf[2 * i + 1] = __uint_as_float(xv[i] & 0xffff0000u);
  }
}

// GemvDot8 with x expanded by GemvExpand8: the same fused multiply-adds in the same order.
__device__ __forceinline__ void GemvDot8(const uint4& w, const float (&xf)[8], float& acc) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc = fmaf(__uint_as_float(wv[i] << 16), xf[2 * i], acc);
    acc = fmaf(__uint_as_float(wv[i] & 0xffff0000u), xf[2 * i + 1], acc);
  }
}

// Rows first + [0, kRows) (those < n) of y [kTokens, n]: every lane passes its partial sums; lane 0
// writes. bias: [n] fp32 or null; accumulate: y's old value joins the sum.
template <int kRows, int kTokens>
__device__ __forceinline__ void LaneSums(float (&acc)[kRows][kTokens]) {  // the butterfly over the 32 lanes
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      for (int offset = 16; offset > 0; offset /= 2) acc[r][t] += __shfl_xor_sync(0xffffffffu, acc[r][t], offset);
    }
  }
}

template <int kRows, int kTokens>
__device__ __forceinline__ void GemvStore(float (&acc)[kRows][kTokens], int64_t first, int64_t n,
                                          const float* __restrict__ bias, bool accumulate, uint16_t* __restrict__ y) {
  LaneSums(acc);
  if (threadIdx.x % 32 != 0) return;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = first + r;
    if (row >= n) break;
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      float v = acc[r][t];
      if (bias != nullptr) v += bias[row];
      if (accumulate) v += Bf16ToFloat(y[t * n + row]);
      y[t * n + row] = FloatToBf16(v);
    }
  }
}

// The gated sink of a gate|up linear (W [2 inter, K]: gate rows, then up rows): acc[r] holds rows
// first + r (gate) and acc[kPairs + r] rows inter + first + r (up), r < kPairs. Each row is summed
// and rounded as GemvStore does (butterfly, + bias, bf16), then out[t, first + r] = Gated(gate, up)
// for first + r < inter: the bits of GemvStore followed by GatedActivation.
template <int kPairs, int kTokens>
__device__ __forceinline__ void GemvGatedStore(float (&acc)[2 * kPairs][kTokens], int64_t first, int64_t inter,
                                               const float* __restrict__ bias, Activation act,
                                               uint16_t* __restrict__ out) {
  LaneSums(acc);
  if (threadIdx.x % 32 != 0) return;
#pragma unroll
  for (int r = 0; r < kPairs; ++r) {
    const int64_t row = first + r;
    if (row >= inter) break;
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      float g = acc[r][t], u = acc[kPairs + r][t];
      if (bias != nullptr) {
        g += bias[row];
        u += bias[inter + row];
      }
      out[t * inter + row] = Gated(act, FloatToBf16(g), FloatToBf16(u));
    }
  }
}

}  // namespace df11::cuda
