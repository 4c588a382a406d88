// Paged attention over the bf16 KV cache for ragged batches (see cuda_ops.h PagedAttention).
//
// Rounding follows transformers' eager attention in bf16 (the reference our fixtures record):
//   s = bf16(bf16(q·k) * scale)                       (bf16 matmul, then a bf16 multiply)
//   softcap: s = bf16(bf16(tanh(bf16(s * (1/cap)))) * cap)
//   p = bf16(exp(s - max) / sum)                      (fp32 softmax, cast to bf16)
//   out = bf16(sum_j p_j v_j)                         (fp32 accumulation)
// The normalised p needs the row's max and sum before any p·v, so each block makes two passes
// over its keys: pass 0 finds (max, sum) online, pass 1 recomputes the scores and accumulates p·v.
//
// Work split: a block takes one tile of consecutive tokens of one sequence (host-built, see
// AttentionTiles) and `nh` query heads of one KV group: rows = tokens x nh <= 16, so K/V tiles
// loaded once into shared memory serve every query head of the group (GQA) and every token of the
// tile (prefill). 4 warps; with few rows (decode) the warps split each 128-key tile between them
// (key groups), with many rows they split the rows. Each lane scores one key (16-byte shared loads,
// row stride padded to avoid bank conflicts) and owns head dims lane, lane + 32, ... of the output.
// Partial results of key groups are merged through shared memory in a fixed order: no atomics, the
// same batch gives the same bits.
//
// Split-KV (flash-decoding): when the grid has fewer blocks than the H100 has SMs (decode of a few
// sequences) and the caller gave a workspace, each block's key range is cut into `splits` ranges
// of split_keys keys (a multiple of 64, from the batch's max_keys) and three launches replace one:
// kStats (per split row max/sum), kValues (every split merges all splits' max/sum in split order,
// so p is normalised by the global sum exactly as unsplit, then writes its fp32 p·v partial),
// CombineKernel (partials summed in split order, rounded to bf16). Deterministic.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda_ops.h"
#include "kernels/cuda_attention_internal.cuh"
#include "kernels/cuda_ops_internal.cuh"

namespace df11::cuda {
namespace {

using namespace attention;  // NOLINT: the shared tile constants and helpers

constexpr int kSplitGranule = 64;     // keys: a split covers a multiple of this
constexpr int kMaxSplitBlocks = 400;  // blocks x splits bound of the workspace

// Split-KV modes: kWhole (one block per tile, bf16 out); kStats (a key split's row (max, sum) to
// the workspace); kValues (the splits' (max, sum) merged in split order, then this split's p·v as
// fp32 partial rows to the workspace); CombineKernel sums the partials in split order.
enum Mode : int { kWhole = 0, kStats = 1, kValues = 2 };

struct Geometry {
  int rows, nh, row_groups, key_groups;
  int mode = kWhole, splits = 1;
  int64_t split_keys = 0;
  float* stats = nullptr;    // [blocks][splits][kMaxRows][2]
  float* partial = nullptr;  // [blocks][splits][kMaxRows][d]
};

__device__ __forceinline__ void Unpack8(const uint4& v, float* f) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
  }
}

__global__ void __launch_bounds__(kThreads)
    AttentionKernel(PagedKvLayer cache, BatchLayout batch, AttentionParams p, Geometry g, const uint16_t* q,
                    uint16_t* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int d = static_cast<int>(cache.head_dim);
  float* q_s = reinterpret_cast<float*>(smem);                             // [rows][d]
  float* ml_s = q_s + kMaxRows * d;                                        // [kWarps][kRowsPerWarp][2]
  uint16_t* kv_s = reinterpret_cast<uint16_t*>(ml_s + kWarps * kRowsPerWarp * 2);  // [kKeys][d + kPad]

  const int64_t t0 = batch.tiles[2 * blockIdx.x], n_tok = batch.tiles[2 * blockIdx.x + 1];
  const int64_t kv_head = blockIdx.y;
  const int64_t group = p.num_heads / cache.num_kv_heads;
  const int64_t chunk = blockIdx.z / g.splits, split = blockIdx.z % g.splits;
  const int64_t head0 = kv_head * group + chunk * g.nh;
  const int rows = static_cast<int>(n_tok) * g.nh;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rg = warp % g.row_groups, kg = warp / g.row_groups;

  for (int idx = threadIdx.x; idx < rows * d; idx += kThreads) {
    const int r = idx / d, i = idx % d;
    q_s[idx] = Bf16ToFloat(q[((t0 + r / g.nh) * p.num_heads + head0 + r % g.nh) * d + i]);
  }
  const int32_t* table = batch.tables + batch.table_begin[batch.token_seq[t0]];
  int64_t hi = batch.positions[t0 + n_tok - 1];
  int64_t lo = p.sliding_window > 0 ? max(int64_t{0}, batch.positions[t0] - p.sliding_window + 1) : 0;
  // Split s covers keys [lo + s * split_keys, ...) of the tile's range; splits past it idle.
  // (used <= splits when max_keys holds; the clamp keeps a violated contract inside the workspace.)
  const int64_t used = g.mode == kWhole ? 1 : min(int64_t{g.splits}, (hi - lo + g.split_keys) / g.split_keys);
  const int64_t block = (int64_t{blockIdx.x} * gridDim.y + blockIdx.y) * (gridDim.z / g.splits) + chunk;
  float* stats = g.mode == kWhole ? nullptr : g.stats + block * g.splits * kMaxRows * 2;
  float* partial = g.mode == kWhole ? nullptr : g.partial + (block * g.splits + split) * kMaxRows * d;
  if (g.mode != kWhole) {
    if (split >= used) return;
    lo += split * g.split_keys;
    hi = min(hi, lo + g.split_keys - 1);
  }

  // This warp's rows: rg, rg + row_groups, ... (at most kRowsPerWarp).
  int row_of[kRowsPerWarp];
  int64_t first[kRowsPerWarp], last[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    row_of[i] = rg + i * g.row_groups;
    const bool live = row_of[i] < rows;
    const int64_t pos = live ? batch.positions[t0 + row_of[i] / g.nh] : -1;
    last[i] = pos;
    first[i] = p.sliding_window > 0 ? max(int64_t{0}, pos - p.sliding_window + 1) : 0;
    if (!live) first[i] = 1;  // empty range
  }
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0;
#pragma unroll
    for (int k = 0; k < kDimsPerLane; ++k) acc[i][k] = 0;
  }

  const int keys_per_warp = kKeys / g.key_groups;  // 32 * (4 / key_groups) keys, lanes stride over them
  if (g.mode == kValues) {
    // The row's global (max, sum): the splits' stats merged in split order.
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      if (row_of[i] >= rows) continue;
      for (int64_t s = 0; s < used; ++s) {
        Merge(m[i], l[i], stats[(s * kMaxRows + row_of[i]) * 2], stats[(s * kMaxRows + row_of[i]) * 2 + 1]);
      }
    }
  }
  for (int pass = g.mode == kValues ? 1 : 0; pass < (g.mode == kStats ? 1 : 2); ++pass) {
    for (int64_t start = lo; start <= hi; start += kKeys) {
      __syncthreads();
      LoadTile(cache.k, cache, table, kv_head, start, hi, kv_s);
      __syncthreads();
      // Scores of this warp's keys: key slot kg * keys_per_warp + sub * 32 + lane.
      float prob[kRowsPerWarp][kKeys / 32];
      for (int sub = 0; sub < keys_per_warp / 32; ++sub) {
        const int key = kg * keys_per_warp + sub * 32 + lane;
        const int64_t j = start + key;
        float dot[kRowsPerWarp] = {0, 0, 0, 0};
        const uint16_t* krow = kv_s + key * (d + kPad);
        for (int c = 0; c < d / 8; ++c) {
          float kf[8];
          Unpack8(*reinterpret_cast<const uint4*>(krow + c * 8), kf);
#pragma unroll
          for (int i = 0; i < kRowsPerWarp; ++i) {
            if (row_of[i] >= rows) continue;
            const float4 a = *reinterpret_cast<const float4*>(q_s + row_of[i] * d + c * 8);
            const float4 b = *reinterpret_cast<const float4*>(q_s + row_of[i] * d + c * 8 + 4);
            dot[i] += a.x * kf[0] + a.y * kf[1] + a.z * kf[2] + a.w * kf[3] + b.x * kf[4] + b.y * kf[5] +
                      b.z * kf[6] + b.w * kf[7];
          }
        }
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
          const bool valid = j >= first[i] && j <= last[i];
          const float s = valid ? Score(dot[i], p) : -INFINITY;
          if (pass == 0) {
            if (valid) Merge(m[i], l[i], s, 1.0f);
            prob[i][sub] = 0;
          } else {
            prob[i][sub] = valid ? RoundBf16(expf(s - m[i]) / l[i]) : 0.0f;
          }
        }
      }
      if (pass == 0) continue;
      __syncthreads();
      LoadTile(cache.v, cache, table, kv_head, start, hi, kv_s);
      __syncthreads();
      for (int sub = 0; sub < keys_per_warp / 32; ++sub) {
        for (int k = 0; k < 32; ++k) {
          const uint16_t* vrow = kv_s + (kg * keys_per_warp + sub * 32 + k) * (d + kPad);
          float vf[kDimsPerLane];
#pragma unroll
          for (int x = 0; x < kDimsPerLane; ++x) {
            const int dim = lane + 32 * x;
            vf[x] = dim < d ? Bf16ToFloat(vrow[dim]) : 0.0f;
          }
#pragma unroll
          for (int i = 0; i < kRowsPerWarp; ++i) {
            const float pk = __shfl_sync(0xFFFFFFFFu, prob[i][sub], k);
#pragma unroll
            for (int x = 0; x < kDimsPerLane; ++x) acc[i][x] += pk * vf[x];
          }
        }
      }
    }
    if (pass == 0) {
      // Row (max, sum): over the lanes (butterfly), then over the key groups in a fixed order.
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        for (int off = 16; off > 0; off >>= 1) {
          const float mo = __shfl_xor_sync(0xFFFFFFFFu, m[i], off), lo_ = __shfl_xor_sync(0xFFFFFFFFu, l[i], off);
          Merge(m[i], l[i], mo, lo_);
        }
        if (lane == 0) {
          ml_s[(warp * kRowsPerWarp + i) * 2] = m[i];
          ml_s[(warp * kRowsPerWarp + i) * 2 + 1] = l[i];
        }
      }
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        float mm = -INFINITY, ll = 0;
        for (int k = 0; k < g.key_groups; ++k) {
          const int w = rg + k * g.row_groups;
          Merge(mm, ll, ml_s[(w * kRowsPerWarp + i) * 2], ml_s[(w * kRowsPerWarp + i) * 2 + 1]);
        }
        m[i] = mm;
        l[i] = ll;
        if (g.mode == kStats && kg == 0 && lane == 0 && row_of[i] < rows) {
          stats[(split * kMaxRows + row_of[i]) * 2] = mm;
          stats[(split * kMaxRows + row_of[i]) * 2 + 1] = ll;
        }
      }
    }
  }
  if (g.mode == kStats) return;

  // Merge the key groups' partial outputs (fixed order) and write bf16.
  __syncthreads();
  float* part = reinterpret_cast<float*>(kv_s);  // [kWarps][kRowsPerWarp][d]
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
#pragma unroll
    for (int x = 0; x < kDimsPerLane; ++x) {
      const int dim = lane + 32 * x;
      if (dim < d) part[(warp * kRowsPerWarp + i) * d + dim] = acc[i][x];
    }
  }
  __syncthreads();
  if (kg != 0) return;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = row_of[i];
    if (r >= rows) continue;
    uint16_t* dst = out + ((t0 + r / g.nh) * p.num_heads + head0 + r % g.nh) * d;
#pragma unroll
    for (int x = 0; x < kDimsPerLane; ++x) {
      const int dim = lane + 32 * x;
      if (dim >= d) continue;
      float sum = 0;
      for (int k = 0; k < g.key_groups; ++k) sum += part[((rg + k * g.row_groups) * kRowsPerWarp + i) * d + dim];
      if (g.mode == kValues) {
        partial[r * d + dim] = sum;
      } else {
        dst[dim] = FloatToBf16(sum);
      }
    }
  }
}

// out = bf16(sum over the used splits, in order, of the partial rows). Grid as AttentionKernel's
// with z = head chunks; one thread per (row, dim).
__global__ void CombineKernel(BatchLayout batch, AttentionParams p, Geometry g, int64_t d, int64_t group_chunks,
                              uint16_t* out) {
  const int64_t t0 = batch.tiles[2 * blockIdx.x], n_tok = batch.tiles[2 * blockIdx.x + 1];
  const int64_t kv_head = blockIdx.y, chunk = blockIdx.z;
  const int64_t group = p.num_heads / gridDim.y;
  const int64_t head0 = kv_head * group + chunk * g.nh;
  const int64_t hi = batch.positions[t0 + n_tok - 1];
  const int64_t lo = p.sliding_window > 0 ? max(int64_t{0}, batch.positions[t0] - p.sliding_window + 1) : 0;
  const int64_t used = min(int64_t{g.splits}, (hi - lo + g.split_keys) / g.split_keys);
  const int64_t block = (int64_t{blockIdx.x} * gridDim.y + blockIdx.y) * group_chunks + chunk;
  const float* partial = g.partial + block * g.splits * kMaxRows * d;
  const int64_t rows = n_tok * g.nh;
  for (int64_t idx = threadIdx.x; idx < rows * d; idx += blockDim.x) {
    const int64_t r = idx / d, dim = idx % d;
    float sum = 0;
    for (int64_t s = 0; s < used; ++s) sum += partial[(s * kMaxRows + r) * d + dim];
    out[((t0 + r / g.nh) * p.num_heads + head0 + r % g.nh) * d + dim] = FloatToBf16(sum);
  }
}

size_t SharedBytes(int64_t d) {
  const size_t tile = static_cast<size_t>(kKeys) * (d + kPad) * 2;
  const size_t part = static_cast<size_t>(kWarps) * kRowsPerWarp * d * 4;
  return static_cast<size_t>(kMaxRows) * d * 4 + kWarps * kRowsPerWarp * 2 * 4 + (tile > part ? tile : part);
}

}  // namespace

int64_t AttentionWorkspaceFloats(int64_t head_dim) {
  return int64_t{kMaxSplitBlocks} * kMaxRows * (head_dim + 2);
}

int64_t AttentionTileTokens(int64_t num_heads, int64_t num_kv_heads) {
  const int64_t group = num_kv_heads > 0 ? num_heads / num_kv_heads : 1;
  return group >= kMaxRows ? 1 : kMaxRows / group;
}

Status PagedAttention(const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params,
                      const uint16_t* q, uint16_t* out, GpuStream stream) {
  const int64_t d = cache.head_dim;
  if (d > kMaxHeadDim || d % 8 != 0 || d <= 0) {
    return InvalidArgument("PagedAttention: head_dim " + std::to_string(d) + " must be a multiple of 8 and <= " +
                           std::to_string(kMaxHeadDim));
  }
  if (cache.num_kv_heads <= 0 || params.num_heads % cache.num_kv_heads != 0) {
    return InvalidArgument("PagedAttention: num_heads must be a multiple of num_kv_heads");
  }
  if (batch.num_tokens == 0) return Status::Ok();
  if (batch.tiles == nullptr || batch.num_tiles <= 0 || batch.tile_tokens <= 0 || batch.tile_tokens > kMaxRows) {
    return InvalidArgument("PagedAttention: the batch has no attention tiles of 1.." + std::to_string(kMaxRows) +
                           " tokens (see AttentionTiles)");
  }
  if (batch.num_tiles > 0x7FFFFFFF) return InvalidArgument("PagedAttention: too many tiles");
  const int64_t group = params.num_heads / cache.num_kv_heads;
  int nh = 1;  // heads per block: the largest divisor of the group with tile_tokens * nh <= kMaxRows
  for (int64_t h = 1; h <= group; ++h) {
    if (group % h == 0 && h * batch.tile_tokens <= kMaxRows) nh = static_cast<int>(h);
  }
  const int max_rows = static_cast<int>(batch.tile_tokens) * nh;
  Geometry g{0, nh, 0, 0};
  g.row_groups = max_rows <= 4 ? 1 : max_rows <= 8 ? 2 : 4;
  g.key_groups = kWarps / g.row_groups;
  const size_t shared = SharedBytes(d);
  if (shared > 48 * 1024) {
    DF11_RETURN_IF_ERROR(CheckCuda(
        cudaFuncSetAttribute(AttentionKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)),
        "cudaFuncSetAttribute(AttentionKernel)"));
  }
  const int64_t blocks = batch.num_tiles * cache.num_kv_heads * (group / nh);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (params.tensor_cores && d % 16 == 0 && batch.tile_tokens > 1) {
    return attention::LaunchTensorCore(cache, batch, params, nh, q, out, s);
  }
  // Split-KV when the grid is far below two blocks per SM (132 on an H100) and keys are many.
  int64_t splits = 1;
  if (batch.split_workspace != nullptr && batch.max_keys > kSplitGranule && blocks < 132) {
    const int64_t by_keys = (batch.max_keys + kSplitGranule - 1) / kSplitGranule;
    splits = std::min<int64_t>({by_keys, (264 + blocks - 1) / blocks, 64});
    if (blocks * splits > kMaxSplitBlocks) splits = kMaxSplitBlocks / blocks;
  }
  if (splits <= 1) {
    const dim3 grid(static_cast<unsigned>(batch.num_tiles), static_cast<unsigned>(cache.num_kv_heads),
                    static_cast<unsigned>(group / nh));
    AttentionKernel<<<grid, kThreads, shared, s>>>(cache, batch, params, g, q, out);
    return CheckLaunch("AttentionKernel");
  }
  const int64_t per_split = (batch.max_keys + splits - 1) / splits;
  g.splits = static_cast<int>(splits);
  g.split_keys = (per_split + kSplitGranule - 1) / kSplitGranule * kSplitGranule;
  g.stats = batch.split_workspace;
  g.partial = g.stats + kMaxSplitBlocks * kMaxRows * 2;
  const dim3 grid(static_cast<unsigned>(batch.num_tiles), static_cast<unsigned>(cache.num_kv_heads),
                  static_cast<unsigned>(group / nh * splits));
  g.mode = kStats;
  AttentionKernel<<<grid, kThreads, shared, s>>>(cache, batch, params, g, q, out);
  DF11_RETURN_IF_ERROR(CheckLaunch("AttentionKernel (split stats)"));
  g.mode = kValues;
  AttentionKernel<<<grid, kThreads, shared, s>>>(cache, batch, params, g, q, out);
  DF11_RETURN_IF_ERROR(CheckLaunch("AttentionKernel (split values)"));
  const dim3 combine(static_cast<unsigned>(batch.num_tiles), static_cast<unsigned>(cache.num_kv_heads),
                     static_cast<unsigned>(group / nh));
  CombineKernel<<<combine, 256, 0, s>>>(batch, params, g, d, group / nh, out);
  return CheckLaunch("CombineKernel");
}

}  // namespace df11::cuda
