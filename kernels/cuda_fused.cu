// Fused ops (see cuda_ops.h AddRmsNorm, PrepareAttention): one launch each for what several ops of
// cuda_ops.cu do in turn, with the same arithmetic in the same order, so the results are the same
// bits (tests/kernels/cuda_ops_test.cc compares them with the composition).
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/cuda_ops.h"
#include "kernels/cuda_ops_internal.cuh"

namespace df11::cuda {
namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;
constexpr int kItemWarps = 4;         // PrepareAttention: warps (head vectors) per block
constexpr int kVecWarps = 8;          // PrepareAttentionVecKernel: warps per block (one token)
constexpr int64_t kManyTokens = 512;  // PrepareAttentionVecKernel: 6 head vectors a warp from here on

cudaStream_t S(GpuStream s) { return reinterpret_cast<cudaStream_t>(s); }

// One chunk of a thread's row elements (LoadChunk's), every load before any store: h[k] =
// bf16(row[i] + add[i]) stored back to row[i], its square added to sum, for i = base + k * nt < n.
template <int kChunk>
__device__ __forceinline__ void AddChunk(uint16_t (&h)[kChunk], uint16_t* row, const uint16_t* add, int base, int nt,
                                         int n, float& sum) {
  uint16_t b[kChunk];
  LoadChunk(h, static_cast<const uint16_t*>(row), base, nt, n);
  LoadChunk(b, add, base, nt, n);
#pragma unroll
  for (int k = 0; k < kChunk; ++k) {
    const int i = base + k * nt;
    if (i < n) {
      h[k] = FloatToBf16(Bf16ToFloat(h[k]) + Bf16ToFloat(b[k]));
      row[i] = h[k];
      const float v = Bf16ToFloat(h[k]);
      sum += v * v;
    }
  }
}

// hidden = bf16(hidden + y), then normed = RmsNormKernel's output for the new hidden: the same
// per-thread sums (ThreadsFor(dim) threads, strided) and FinishRmsNorm, in chunks (RowChunk).
// A row of one chunk (dim <= kChunk * ThreadsFor(dim): 4,096 at 16) stays in registers between
// the sum and the norm, its weights loaded first (before the wait for the kernel that wrote y when
// launched as its dependent, kDependentMaxRows); longer rows go through FinishRmsNorm. The same
// bits either way.
template <int kChunk>
__global__ void AddRmsNormKernel(uint16_t* hidden, const uint16_t* y, const float* w, int64_t dim, float eps,
                                 bool add_one, uint16_t* normed) {
  uint16_t* row = hidden + blockIdx.x * dim;
  const uint16_t* add = y + blockIdx.x * dim;
  uint16_t* dst = normed + blockIdx.x * dim;
  const int n = static_cast<int>(dim), tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  if (n <= kChunk * nt) {
    float wv[kChunk];
    LoadChunk(wv, w, tid, nt, n);
    WaitPrevious();
    AllowDependents();  // the next kernel may be a Gemv that prefetches its weights
    uint16_t a[kChunk];
    float sum = 0;
    AddChunk(a, row, add, tid, nt, n, sum);
    __shared__ float warp_sums[32];
    const float r = rsqrtf(BlockSum(sum, warp_sums) / static_cast<float>(dim) + eps);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      const int i = tid + k * nt;
      if (i < n) dst[i] = NormElement(a[k], r, wv[k], add_one);
    }
    return;
  }
  WaitPrevious();
  AllowDependents();
  float sum = 0;
  for (int base = tid; base < n; base += kChunk * nt) {
    uint16_t a[kChunk];
    AddChunk(a, row, add, base, nt, n, sum);
  }
  FinishRmsNorm<kChunk>(sum, row, w, dim, eps, add_one, dst);
}

// AddRmsNormKernel's bits by WarpRmsNormRow (rows of dim % 256 == 0): kVecNormWarps rows a block.
__global__ void __launch_bounds__(32 * kVecNormWarps)
    VecAddRmsNormKernel(uint16_t* hidden, const uint16_t* y, const float* w, int64_t rows, int64_t dim, float eps,
                        bool add_one, uint16_t* normed) {
  AllowDependents();  // the next kernel may be a Gemv that prefetches its weights
  const int64_t r = int64_t{blockIdx.x} * kVecNormWarps + threadIdx.x / 32;
  if (r >= rows) return;
  WarpRmsNormRow(hidden + r * dim, y + r * dim, w, dim, eps, add_one, normed + r * dim);
}

// One warp per head vector: item i of token blockIdx.x is q head i (i < num_heads), then k heads,
// then v heads. Lane l holds elements l + 32 j. The norm emulates RmsNormKernel's order: virtual
// thread u of ThreadsFor(head_dim) sums elements u, u + threads, ... in turn; each virtual warp's
// sums are added by WarpSum; the virtual warps' totals in order. Rope as RopeKernel, element-wise,
// from the token's cos/sin computed once per block.
// Measured on the H100 and not kept (bench/results/ab_h100_prefetch_prepare_ahead.log,
// ab_h100_ahead_graphs.log; attention_bench's PrepareAttention lines): 4 head vectors a warp and one
// block a token (their loads all in flight together) took a 2,048-token prefill from 0.0711 to
// 0.0617 ms a layer but decode steps from 0.0051-0.0080 to 0.0082-0.0085; launched as a
// programmatic dependent of the q|k|v linear (rope table and cache slot before waiting), no step
// moved beyond run-to-run noise.
__global__ void __launch_bounds__(32 * kItemWarps)
    PrepareAttentionKernel(PagedKvLayer cache, BatchLayout batch, int64_t num_heads, QkvRows src, QkNormRope p,
                           uint16_t* q_out) {
  AllowDependents();  // the attention launch may start and read its batch meanwhile
  __shared__ uint16_t staged[kItemWarps][kMaxHeadDim];
  __shared__ float rope_cos[kMaxHeadDim / 2], rope_sin[kMaxHeadDim / 2];  // the token's, bf16-rounded
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x, kv_heads = cache.num_kv_heads;
  const int32_t pos = batch.positions[t];
  const int64_t rope_half = p.rotary_dim / 2;
  for (int64_t i = threadIdx.x; i < rope_half; i += blockDim.x) {  // once per block, not per head
    float s, c;
    sincosf(static_cast<float>(pos) * p.inv_freq[i], &s, &c);
    rope_cos[i] = RoundBf16(c);
    rope_sin[i] = RoundBf16(s);
  }
  __syncthreads();
  const int64_t item = int64_t{blockIdx.y} * kItemWarps + warp;
  if (item >= num_heads + 2 * kv_heads) return;
  const int d = static_cast<int>(cache.head_dim);
  const int kind = item < num_heads ? 0 : item < num_heads + kv_heads ? 1 : 2;  // q, k, v
  const int64_t head = kind == 0 ? item : kind == 1 ? item - num_heads : item - num_heads - kv_heads;
  const uint16_t* in = kind == 0   ? src.q + t * src.q_stride + head * d
                       : kind == 1 ? src.k + t * src.kv_stride + head * d
                                   : src.v + t * src.kv_stride + head * d;
  uint16_t* out;
  if (kind == 0) {
    out = q_out + (t * num_heads + head) * d;
  } else {
    const int64_t block = batch.tables[batch.table_begin[batch.token_seq[t]] + pos / cache.block_size];
    const int64_t slot = block * cache.block_size + pos % cache.block_size;
    out = (kind == 1 ? cache.k : cache.v) + slot * kv_heads * d + head * d;
  }
  uint16_t x[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    x[j] = e < d ? in[e] : 0;
  }
  const float* norm = kind == 0 ? p.q_norm : kind == 1 ? p.k_norm : nullptr;
  if (norm != nullptr) {
    const int virtual_warps = ThreadsFor(d) / 32;
    float total = 0;
    for (int w = 0; w < virtual_warps; ++w) {
      float sum = 0;
      for (int j = w; j < kPerLane; j += virtual_warps) {
        if (lane + 32 * j < d) {
          const float v = Bf16ToFloat(x[j]);
          sum += v * v;
        }
      }
      total += WarpSum(sum);
    }
    const float r = rsqrtf(total / static_cast<float>(d) + p.eps);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < d) x[j] = NormElement(x[j], r, norm[e], p.add_one);
    }
  }
  const int64_t half = kind == 2 ? 0 : rope_half;
  if (half > 0) {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) staged[warp][lane + 32 * j] = x[j];
    __syncwarp();
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e >= 2 * half) continue;
      const int64_t i = e < half ? e : e - half;  // the pair (i, i + half)
      const float c = rope_cos[i], s = rope_sin[i];
      const float x1 = Bf16ToFloat(staged[warp][i]), x2 = Bf16ToFloat(staged[warp][i + half]);
      x[j] = e < half ? FloatToBf16(RoundBf16(x1 * c) - RoundBf16(x2 * s))
                      : FloatToBf16(RoundBf16(x2 * c) + RoundBf16(x1 * s));
    }
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    if (e < d) out[e] = x[j];
  }
}

// PrepareAttentionKernel's arithmetic for head_dim == DP in {64, 128, 256} (then RmsNorm's block
// has DP threads, one element each, so its order is: each 32-element virtual warp's WarpSum
// butterfly, then the virtual warps' totals in order), with each lane holding E = DP / 32
// consecutive elements: one vector load and store per head vector instead of E two-byte ones, the
// norm's sum by LaneBlockSum<E>. Rope's pair (i, i + half) is one shuffle of distance half / E
// away (half % E == 0). A block of kVecWarps warps serves one token; each warp kPerWarp head
// vectors (items warp + kVecWarps j of the block's share), loaded together before any is processed.
// Measured on the H100 against PrepareAttentionKernel (Qwen3-8B layer; attention_bench,
// bench/results/attention_h100_prepare_vec_ab.log, two rounds each, alternating): a 2,048-token
// prefill 0.0421-0.0423 ms a layer against 0.0701-0.0702; decode at batch 1 / 8 / 64 0.0051-0.0057
// / 0.0057 / 0.0049-0.0054 against 0.0052-0.0053 / 0.0053-0.0058 / 0.0065, and at batch 128 with 6
// vectors a warp 0.0087-0.0089 against 0.0081-0.0083 (hence kManyTokens 512). The model step
// (model_step_h100_prepare_vec_run{1,2}.json against model_step_h100_session4_base_run{1,2}.json):
// BF16 prefill 57.13-57.54 ms against 57.59-58.26, DF11 64.82-64.95 against 66.78-67.27; BF16
// decode 0.03-0.23 ms faster at every batch. The head vectors' loads issued before the rope table
// (bench/results/ab_h100_prefill_slots.log): a 2,048-token prefill 0.0407-0.0409 ms a layer against
// 0.0423-0.0425. Measured and not kept (ab_h100_l2_prefetch.log): this kernel's blocks asking L2
// for the layer's o_proj weights (cp.async.bulk.prefetch.L2 in 16 KB pieces) in steps of up to 16
// tokens, for the attention leaves HBM idle: BF16 batch 1 / 8 7.17 / 7.00-7.04 ms against 6.09 /
// 6.54-6.61, DF11 batch 8 9.78-9.83 against 8.46-8.60. The token's row bases, the lane's norm
// weights and its rope factors are taken once for all its items (the compiler reloaded the table
// and the weights per item: a store through a generic pointer might have changed them), 59
// registers instead of 40 at DP 128 with 6 items (bench/results/attention_h100_prepare_hoist_ab.log,
// three rounds each, alternating): a 2,048-token prefill 0.0341-0.0343 ms a layer against
// 0.0402-0.0407, 4,096 tokens 0.0602-0.0603 against 0.0720-0.0725, 512 0.0098-0.0101 against
// 0.0124-0.0127; decode steps within run-to-run noise. The kernel is issue-bound at prefills (ncu:
// issue slots 73% busy, ~213 warp instructions a head vector; bench/results/ncu_prepare_attention_prefill_h100.txt.xz).
// Rope on packed bf16 pairs (two bf16x2 multiplies and an add per two elements, sin negated in the
// lower half): first tried with __hmul2 / __hadd2, 0.0287-0.0289 ms a layer at 2,048 tokens
// against 0.0317-0.0320, but the compiler contracted a multiply and the add into one fma and the
// bits changed (bench/results/attention_h100_prepare_rope_pairs_ab.log); now with __hmul2_rn /
// __hadd2_rn, which keep RopeKernel's roundings (CudaOps.PrepareAttentionIsSplitNormRopeWriteKvBitForBit
// passes on the H100): 0.0282-0.0287 ms a layer at 2,048 tokens against 0.0314, decode unchanged
// (bench/results/attention_h100_prepare_rope_rn_ab.log, three runs each, alternating).
template <int DP, int kPerWarp>
__global__ void __launch_bounds__(32 * kVecWarps)
    PrepareAttentionVecKernel(PagedKvLayer cache, BatchLayout batch, int64_t num_heads, QkvRows src, QkNormRope p,
                              uint16_t* q_out) {
  constexpr int E = DP / 32;  // elements per lane; also RmsNorm's virtual warps
  constexpr int W = E / 2;    // 32-bit words per lane
  using Vec = std::conditional_t<E == 2, uint32_t, std::conditional_t<E == 4, uint2, uint4>>;
  AllowDependents();  // the attention launch may start and read its batch meanwhile
  __shared__ float rope_cos[DP / 2], rope_sin[DP / 2];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x;
  const int heads = static_cast<int>(num_heads), kv_heads = static_cast<int>(cache.num_kv_heads);
  const int items = heads + 2 * kv_heads;
  // The token's rows, once: item i is q head i (i < heads), then k heads, then v heads.
  const uint16_t* q_src = src.q + t * src.q_stride;
  const uint16_t* k_src = src.k + t * src.kv_stride;
  const uint16_t* v_src = src.v + t * src.kv_stride;
  auto item_of = [&](int j) { return (static_cast<int>(blockIdx.y) * kPerWarp + j) * kVecWarps + warp; };
  auto source = [&](int item) -> const uint16_t* {
    if (item < heads) return q_src + item * DP;
    if (item < heads + kv_heads) return k_src + (item - heads) * DP;
    return v_src + (item - heads - kv_heads) * DP;
  };
  // The head vectors' loads first, so they fly while the block computes its rope table; the lane's
  // norm weights with them (held for every item: global loads after a store could not be hoisted).
  Vec raw[kPerWarp];
#pragma unroll
  for (int j = 0; j < kPerWarp; ++j) {
    const int item = item_of(j);
    if (item < items) raw[j] = reinterpret_cast<const Vec*>(source(item))[lane];
  }
  // Items grow with j: the warp has q heads if its first is one, k heads if its first is below the
  // v heads and its last (maybe past the end) at or above the k heads.
  const bool has_q = p.q_norm != nullptr && item_of(0) < heads;
  const bool has_k = p.k_norm != nullptr && item_of(0) < heads + kv_heads && item_of(kPerWarp - 1) >= heads;
  float q_w[E], k_w[E];
#pragma unroll
  for (int c = 0; c < E; ++c) {
    q_w[c] = has_q ? p.q_norm[lane * E + c] : 0.0f;
    k_w[c] = has_k ? p.k_norm[lane * E + c] : 0.0f;
  }
  const int32_t pos = batch.positions[t];
  const int rope_half = static_cast<int>(p.rotary_dim / 2);
  for (int i = threadIdx.x; i < rope_half; i += blockDim.x) {
    float sn, cs;
    sincosf(static_cast<float>(pos) * p.inv_freq[i], &sn, &cs);
    rope_cos[i] = RoundBf16(cs);
    rope_sin[i] = RoundBf16(sn);
  }
  const int64_t slot =
      int64_t{batch.tables[batch.table_begin[batch.token_seq[t]] + pos / cache.block_size]} * cache.block_size +
      pos % cache.block_size;
  uint16_t* q_dst = q_out + t * num_heads * DP;
  uint16_t* k_dst = cache.k + slot * kv_heads * DP;
  uint16_t* v_dst = cache.v + slot * kv_heads * DP;
  __syncthreads();
  // The lane's rope factors, the same for every item: elements first + c pair with entry
  // (first + c) % half of the table (first < half: the lower half, x * cos - other * sin).
  const int first = lane * E;
  const bool rotates = first < 2 * rope_half, lower = first < rope_half;
  const int shift = rope_half / E;
  const int from = lower ? lane + shift : rotates ? lane - shift : lane;
  // As packed bf16 pairs (the table's values are bf16 already), sin negated in the lower half.
  __nv_bfloat162 cs[W], sn[W];
#pragma unroll
  for (int q = 0; q < W; ++q) {
    const int e = (lower ? first : first - rope_half) + 2 * q;
    const float sign = lower ? -1.0f : 1.0f;
    cs[q] = rotates ? __floats2bfloat162_rn(rope_cos[e], rope_cos[e + 1]) : __floats2bfloat162_rn(0.0f, 0.0f);
    sn[q] =
        rotates ? __floats2bfloat162_rn(sign * rope_sin[e], sign * rope_sin[e + 1]) : __floats2bfloat162_rn(0.0f, 0.0f);
  }
#pragma unroll
  for (int j = 0; j < kPerWarp; ++j) {
    const int item = item_of(j);
    if (item >= items) break;                                             // the same for the whole warp
    const int kind = item < heads ? 0 : item < heads + kv_heads ? 1 : 2;  // q, k, v
    uint32_t w[W];
    std::memcpy(w, &raw[j], sizeof(w));
    uint16_t x[E];
#pragma unroll
    for (int c = 0; c < E; ++c) x[c] = static_cast<uint16_t>(w[c / 2] >> (16 * (c % 2)));
    if (kind == 0 ? p.q_norm != nullptr : kind == 1 && p.k_norm != nullptr) {
      float sq[E];
#pragma unroll
      for (int c = 0; c < E; ++c) {
        const float v = Bf16ToFloat(x[c]);
        sq[c] = v * v;
      }
      const float r = rsqrtf(LaneBlockSum(sq) / static_cast<float>(DP) + p.eps);
#pragma unroll
      for (int c = 0; c < E; ++c) x[c] = NormElement(x[c], r, kind == 0 ? q_w[c] : k_w[c], p.add_one);
    }
#pragma unroll
    for (int q = 0; q < W; ++q) w[q] = static_cast<uint32_t>(x[2 * q]) | static_cast<uint32_t>(x[2 * q + 1]) << 16;
    if (kind != 2 && rope_half > 0) {  // the same for the whole warp
      uint32_t other[W];
#pragma unroll
      for (int q = 0; q < W; ++q) other[q] = __shfl_sync(0xFFFFFFFFu, w[q], from);
      if (rotates) {
        // bf16(bf16(x cos) -+ bf16(other sin)) as RopeKernel rounds it, two elements an instruction:
        // a bf16x2 product or sum rounds the exact result once, and for bf16 operands RopeKernel's
        // fp32 product (exact) or sum (exact, or too small a change to reach a bf16 tie) then
        // rounded to bf16 gives the same bits; the _rn forms are never contracted into an fma.
#pragma unroll
        for (int q = 0; q < W; ++q) {
          __nv_bfloat162 mine, theirs;
          std::memcpy(&mine, &w[q], 4);
          std::memcpy(&theirs, &other[q], 4);
          const __nv_bfloat162 r = __hadd2_rn(__hmul2_rn(mine, cs[q]), __hmul2_rn(theirs, sn[q]));
          std::memcpy(&w[q], &r, 4);
        }
      }
    }
    uint16_t* out = kind == 0   ? q_dst + item * DP
                    : kind == 1 ? k_dst + (item - heads) * DP
                                : v_dst + (item - heads - kv_heads) * DP;
    Vec v;
    std::memcpy(&v, w, sizeof(w));
    reinterpret_cast<Vec*>(out)[lane] = v;
  }
}
}  // namespace

Status AddRmsNorm(uint16_t* hidden, const uint16_t* y, const float* w, int64_t rows, int64_t dim, float eps,
                  bool add_one, uint16_t* normed, GpuStream stream) {
  if (rows == 0) return Status::Ok();
  if (VecNormApplies(rows, dim, hidden, y, normed, w)) {
    VecAddRmsNormKernel<<<static_cast<unsigned>((rows + kVecNormWarps - 1) / kVecNormWarps), 32 * kVecNormWarps, 0,
                          S(stream)>>>(hidden, y, w, rows, dim, eps, add_one, normed);
    return CheckLaunch("VecAddRmsNormKernel");
  }
  const dim3 grid(static_cast<unsigned>(rows)), block(ThreadsFor(dim));
  if (RowChunk(rows) == 16 && rows <= kDependentMaxRows) {
    LaunchDependent(AddRmsNormKernel<16>, grid, block, S(stream), hidden, y, w, dim, eps, add_one, normed);
  } else if (RowChunk(rows) == 16) {
    AddRmsNormKernel<16><<<grid, block, 0, S(stream)>>>(hidden, y, w, dim, eps, add_one, normed);
  } else {
    AddRmsNormKernel<8><<<grid, block, 0, S(stream)>>>(hidden, y, w, dim, eps, add_one, normed);
  }
  return CheckLaunch("AddRmsNormKernel");
}

Status PrepareAttention(const PagedKvLayer& cache, const BatchLayout& batch, int64_t num_heads, const QkvRows& src,
                        const QkNormRope& params, uint16_t* q_out, GpuStream stream) {
  const int64_t d = cache.head_dim;
  if (d <= 0 || d > kMaxHeadDim) {
    return InvalidArgument("PrepareAttention: head_dim " + std::to_string(d) + " must be 1.." +
                           std::to_string(kMaxHeadDim));
  }
  if (params.rotary_dim < 0 || params.rotary_dim > d || params.rotary_dim % 2 != 0) {
    return InvalidArgument("PrepareAttention: rotary_dim " + std::to_string(params.rotary_dim) +
                           " must be even and <= head_dim " + std::to_string(d));
  }
  if (batch.num_tokens == 0) return Status::Ok();
  const int64_t items = num_heads + 2 * cache.num_kv_heads;
  // Head dims 64, 128 and 256 with vector-aligned rows and rope pairs: PrepareAttentionVecKernel,
  // one block per token and 6 head vectors a warp from kManyTokens tokens (a prefill: the rope
  // table once per token), one a warp below (decode: more warps in flight).
  const int64_t e = d / 32;
  const auto aligned = [&](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % (2 * e) == 0; };
  if ((d == 64 || d == 128 || d == 256) && (params.rotary_dim / 2) % e == 0 && aligned(src.q) && aligned(src.k) &&
      aligned(src.v) && src.q_stride % e == 0 && src.kv_stride % e == 0 && aligned(q_out) && aligned(cache.k) &&
      aligned(cache.v)) {
    const bool many = batch.num_tokens >= kManyTokens;
    const int64_t per_block = kVecWarps * (many ? 6 : 1);
    const dim3 vgrid(static_cast<unsigned>(batch.num_tokens),
                     static_cast<unsigned>((items + per_block - 1) / per_block));
    auto launch = [&]<int DP>() {
      if (many) {
        PrepareAttentionVecKernel<DP, 6>
            <<<vgrid, 32 * kVecWarps, 0, S(stream)>>>(cache, batch, num_heads, src, params, q_out);
      } else {
        PrepareAttentionVecKernel<DP, 1>
            <<<vgrid, 32 * kVecWarps, 0, S(stream)>>>(cache, batch, num_heads, src, params, q_out);
      }
    };
    if (d == 64) {
      launch.template operator()<64>();
    } else if (d == 128) {
      launch.template operator()<128>();
    } else {
      launch.template operator()<256>();
    }
    return CheckLaunch("PrepareAttentionVecKernel");
  }
  const dim3 grid(static_cast<unsigned>(batch.num_tokens),
                  static_cast<unsigned>((items + kItemWarps - 1) / kItemWarps));
  PrepareAttentionKernel<<<grid, 32 * kItemWarps, 0, S(stream)>>>(cache, batch, num_heads, src, params, q_out);
  return CheckLaunch("PrepareAttentionKernel");
}

}  // namespace df11::cuda
