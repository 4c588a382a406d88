// What the paged-attention kernels share (cuda_attention.cu: the mma.sync kernel for every head
// dim, prefill and decode; cuda_attention_wgmma.cu: the Hopper prefill kernel for head dims 65..128):
// the prefill block's rows, the softmax's log2 domain, the bf16 packing and merge weights, the
// cache-slot lookup of a key, and the launch of the Hopper kernel. Included only by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda_ops.h"
#include "kernels/cuda_ops_internal.cuh"

namespace df11::cuda {

inline constexpr float kLog2e = 1.4426950408889634f;

// m16 row tiles per prefill-mode warp of the mma.sync kernel (cuda_attention.cu): two where
// registers allow (head dims up to 128).
constexpr int PrefillMTiles(int dp) { return dp <= 128 ? 2 : 1; }
// Query rows per prefill-mode block (4 warps of the mma.sync kernel; two warpgroups of 64 rows of
// the Hopper kernel): 128 up to head dim 128, else 64.
constexpr int PrefillRows(int dp) { return 64 * PrefillMTiles(dp); }

__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  return static_cast<uint32_t>(FloatToBf16(lo)) | static_cast<uint32_t>(FloatToBf16(hi)) << 16;
}

// Weight 2^(m - top) of a partial whose max is m within a merge whose max is top (0 for an empty one).
__device__ __forceinline__ float Weight(float m, float top) { return m == -INFINITY ? 0.0f : exp2f(m - top); }

// The cache slot of a sequence's position j (table[j / bs] * bs + j % bs; table: the sequence's
// block table, bs the block size, inv_bs = 1.0f / bs) for j <= hi, else -1; the table is read at
// min(j, hi). j / bs by the float reciprocal corrected by one step: exact for j < 2^24 (positions
// are), a few instructions where an integer division took ~20 (ncu, decode at batch 64). Both
// attention kernels' tile copies look their keys' slots up with it.
__device__ __forceinline__ int32_t SlotOf(const int32_t* table, int bs, float inv_bs, int j, int hi) {
  const int jj = min(j, hi);
  int b = __float2int_rz(static_cast<float>(jj) * inv_bs);
  const int off = jj - b * bs;
  b += off >= bs ? 1 : off < 0 ? -1 : 0;
  return j <= hi ? table[b] * bs + (jj - b * bs) : -1;
}

// The Hopper prefill kernel (cuda_attention_wgmma.cu, built for sm_90a): whether it serves this
// head dim on this GPU (compute capability 9.0, head dims 65..128), and its launch over a batch
// whose tiles hold more than one token; nh query heads of a KV group per block (PagedAttention's
// choice). Same contract and numerics as PagedAttention's prefill-mode blocks.
bool WgmmaPrefillApplies(int64_t head_dim);
Status WgmmaPrefillAttention(const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params, int nh,
                             const uint16_t* q, uint16_t* out, cudaStream_t stream);

}  // namespace df11::cuda
