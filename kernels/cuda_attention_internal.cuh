// Attention pieces shared by cuda_attention.cu (the fp32-FMA tiled kernel, split-KV) and
// cuda_attention_tc.cu (the tensor-core tile kernel): tile sizes, eager-bf16 score rounding,
// online (max, sum) merge, paged K/V tile loads. Included only by those .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda_ops.h"
#include "kernels/cuda_ops_internal.cuh"

namespace df11::cuda::attention {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kKeys = 128;       // keys per shared-memory tile
constexpr int kMaxRows = 16;     // query rows (token x head) per block
constexpr int kRowsPerWarp = 4;  // register-blocked rows per warp
constexpr int kMaxHeadDim = 256;
constexpr int kDimsPerLane = kMaxHeadDim / 32;
constexpr int kPad = 8;  // bf16 elements of padding per shared K/V row (16-byte loads stay conflict-free)

// Score of one (row, key) pair from the raw fp32 dot product, rounded like transformers' eager path.
__device__ __forceinline__ float Score(float dot, const AttentionParams& p) {
  float s = RoundBf16(RoundBf16(dot) * p.scale);
  if (p.softcap > 0) {
    s = RoundBf16(tanhf(RoundBf16(s * (1.0f / p.softcap))));
    s = RoundBf16(s * p.softcap);
  }
  return s;
}

// (m, l) of two partial softmax sums merged (commutative: a butterfly gives every lane the same).
__device__ __forceinline__ void Merge(float& m, float& l, float m_other, float l_other) {
  const float new_m = fmaxf(m, m_other);
  if (new_m == -INFINITY) return;
  l = (m == -INFINITY ? 0.0f : l * expf(m - new_m)) + (m_other == -INFINITY ? 0.0f : l_other * expf(m_other - new_m));
  m = new_m;
}

// Loads keys [start, start + kKeys) (those <= hi) of `pool` into `dst` [kKeys][d + kPad]; zeros past hi.
__device__ __forceinline__ void LoadTile(const uint16_t* pool, const PagedKvLayer& cache, const int32_t* table,
                                         int64_t kv_head, int64_t start, int64_t hi, uint16_t* dst) {
  const int d = static_cast<int>(cache.head_dim), chunks = d / 8;
  const int64_t row = cache.num_kv_heads * cache.head_dim;
#pragma unroll 4
  for (int idx = threadIdx.x; idx < kKeys * chunks; idx += kThreads) {
    const int key = idx / chunks, c = idx % chunks;
    const int64_t j = start + key;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (j <= hi) {
      const int64_t slot = int64_t{table[j / cache.block_size]} * cache.block_size + j % cache.block_size;
      value = *reinterpret_cast<const uint4*>(pool + slot * row + kv_head * d + c * 8);
    }
    *reinterpret_cast<uint4*>(dst + key * (d + kPad) + c * 8) = value;
  }
}

// The tensor-core kernel over the same tiles and grid as the tiled kernel (nh query heads of one KV
// group per block, rows = tile tokens x nh <= 16); head_dim a multiple of 16.
Status LaunchTensorCore(const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params, int nh,
                        const uint16_t* q, uint16_t* out, cudaStream_t stream);

}  // namespace df11::cuda::attention
