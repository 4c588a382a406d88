// Paged attention over the bf16 KV cache for ragged batches (see cuda_ops.h PagedAttention).
// One thread block per (query head, token): 128 threads walk the token's keys in tiles of 64.
// Per tile: each warp scores 16 keys (lanes split head_dim, shuffle-reduced in a fixed order),
// then the block updates the online softmax (running max, running sum) and each thread
// accumulates its own output dimensions over the tile's values in key order. Deterministic:
// no atomics, and the order of every sum depends only on the token's own keys.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda_ops.h"
#include "kernels/cuda_ops_internal.cuh"

namespace df11::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 64;
constexpr int kMaxHeadDim = 256;
constexpr int kDimsPerThread = kMaxHeadDim / kThreads;

__global__ void __launch_bounds__(kThreads)
    PagedAttentionKernel(PagedKvLayer cache, BatchLayout batch, AttentionParams p, const uint16_t* q, uint16_t* out) {
  const int64_t head = blockIdx.x, t = blockIdx.y;
  const int64_t d = cache.head_dim, row = cache.num_kv_heads * d;
  const int64_t kv_head = head / (p.num_heads / cache.num_kv_heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ float q_s[kMaxHeadDim];
  __shared__ float scores[kTile];
  __shared__ int64_t slots[kTile];

  const uint16_t* q_row = q + (t * p.num_heads + head) * d;
  for (int64_t i = threadIdx.x; i < d; i += kThreads) q_s[i] = Bf16ToFloat(q_row[i]);
  const int64_t pos = batch.positions[t];
  const int32_t* table = batch.tables + batch.table_begin[batch.token_seq[t]];
  const int64_t first = p.sliding_window > 0 ? max(int64_t{0}, pos - p.sliding_window + 1) : 0;

  float acc[kDimsPerThread];
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) acc[i] = 0;
  float running_max = -INFINITY, running_sum = 0;
  __syncthreads();

  for (int64_t tile = first; tile <= pos; tile += kTile) {
    const int n = static_cast<int>(min(int64_t{kTile}, pos + 1 - tile));
    if (threadIdx.x < n) {
      const int64_t j = tile + threadIdx.x;
      slots[threadIdx.x] = int64_t{table[j / cache.block_size]} * cache.block_size + j % cache.block_size;
    }
    __syncthreads();
    for (int k = warp; k < n; k += kWarps) {
      const uint16_t* key = cache.k + slots[k] * row + kv_head * d;
      float dot = 0;
      for (int64_t i = lane; i < d; i += 32) dot += q_s[i] * Bf16ToFloat(key[i]);
      dot = WarpSum(dot);
      if (lane == 0) {
        float s = dot * p.scale;
        if (p.softcap > 0) s = tanhf(s / p.softcap) * p.softcap;
        scores[k] = s;
      }
    }
    __syncthreads();
    float tile_max = -INFINITY;
    for (int k = 0; k < n; ++k) tile_max = fmaxf(tile_max, scores[k]);
    const float new_max = fmaxf(running_max, tile_max);
    const float correction = expf(running_max - new_max);  // 0 on the first tile
    __syncthreads();
    if (threadIdx.x < n) scores[threadIdx.x] = expf(scores[threadIdx.x] - new_max);
    __syncthreads();
    float tile_sum = 0;
    for (int k = 0; k < n; ++k) tile_sum += scores[k];
    running_sum = running_sum * correction + tile_sum;
    running_max = new_max;
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int64_t dim = threadIdx.x + i * kThreads;
      if (dim < d) {
        float a = acc[i] * correction;
        for (int k = 0; k < n; ++k) a += scores[k] * Bf16ToFloat(cache.v[slots[k] * row + kv_head * d + dim]);
        acc[i] = a;
      }
    }
    __syncthreads();  // scores and slots are rewritten by the next tile
  }
  uint16_t* dst = out + (t * p.num_heads + head) * d;
  const float inv = 1.0f / running_sum;
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int64_t dim = threadIdx.x + i * kThreads;
    if (dim < d) dst[dim] = FloatToBf16(acc[i] * inv);
  }
}

}  // namespace

Status PagedAttention(const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params,
                      const uint16_t* q, uint16_t* out, GpuStream stream) {
  if (cache.head_dim > kMaxHeadDim) {
    return InvalidArgument("PagedAttention: head_dim " + std::to_string(cache.head_dim) + " > " +
                           std::to_string(kMaxHeadDim));
  }
  if (cache.num_kv_heads <= 0 || params.num_heads % cache.num_kv_heads != 0) {
    return InvalidArgument("PagedAttention: num_heads must be a multiple of num_kv_heads");
  }
  if (batch.num_tokens == 0) return Status::Ok();
  if (batch.num_tokens > 65535) return InvalidArgument("PagedAttention: more than 65535 tokens in one step");
  const dim3 grid(static_cast<unsigned>(params.num_heads), static_cast<unsigned>(batch.num_tokens));
  PagedAttentionKernel<<<grid, kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(cache, batch, params, q, out);
  return CheckLaunch("PagedAttentionKernel");
}

}  // namespace df11::cuda
