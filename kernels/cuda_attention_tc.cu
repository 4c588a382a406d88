// Tensor-core variant of the tiled attention kernel (see cuda_attention.cu for the tiles, the
// rounding and the two passes): same block = (tile, KV head, head chunk), rows = tile tokens x nh
// <= 16 = one WMMA m16 fragment (rows past the tile are zero). Per 128-key tile:
//   S[16 x 128] = Q · K^T on bf16 WMMA 16x16x16 (fp32 accumulate; warp w takes keys 32w..32w+31),
//   scores rounded and masked by scalar threads (thread = row tid / 8, keys (tid % 8) * 16 + 0..15),
//   pass 0: per-thread online (max, sum), merged over the row's 8 threads in a fixed butterfly;
//   pass 1: P = bf16(exp(s - max) / sum) to shared memory, O[16 x d] += P · V on WMMA (warp w owns
//   the output dims 16w, 16(w + 4), ...), kept in accumulator fragments across key tiles.
// Only the fp32 summation orders differ from the FMA kernel. Deterministic (no atomics).
// Shared memory: Q bf16 [16][d + 8], K/V tile [128][d + 8], S fp32 [16][128], P bf16 [16][136].
#include <mma.h>

#include <string>

#include "kernels/cuda_attention_internal.cuh"

namespace df11::cuda::attention {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kPLd = kKeys + 8;                                 // bf16 row stride of P
constexpr int kOutTilesPerWarp = kMaxHeadDim / 16 / kWarps;     // 4
constexpr int kKeysPerThread = kKeys / 8;                       // 16

__global__ void __launch_bounds__(kThreads)
    TensorCoreKernel(PagedKvLayer cache, BatchLayout batch, AttentionParams p, int nh, const uint16_t* q,
                     uint16_t* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int d = static_cast<int>(cache.head_dim), ld = d + kPad;
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem);                          // [16][ld]
  uint16_t* kv_s = q_s + kMaxRows * ld;                                       // [kKeys][ld]
  float* s_s = reinterpret_cast<float*>(kv_s + kKeys * ld);                   // [16][kKeys]
  uint16_t* p_s = reinterpret_cast<uint16_t*>(s_s + kMaxRows * kKeys);        // [16][kPLd]

  const int64_t t0 = batch.tiles[2 * blockIdx.x], n_tok = batch.tiles[2 * blockIdx.x + 1];
  const int64_t kv_head = blockIdx.y;
  const int64_t group = p.num_heads / cache.num_kv_heads;
  const int64_t head0 = kv_head * group + int64_t{blockIdx.z} * nh;
  const int rows = static_cast<int>(n_tok) * nh;
  const int warp = threadIdx.x >> 5;

  for (int idx = threadIdx.x; idx < kMaxRows * d; idx += kThreads) {
    const int r = idx / d, i = idx % d;
    q_s[r * ld + i] = r < rows ? q[((t0 + r / nh) * p.num_heads + head0 + r % nh) * d + i] : uint16_t{0};
  }
  const int32_t* table = batch.tables + batch.table_begin[batch.token_seq[t0]];
  const int64_t hi = batch.positions[t0 + n_tok - 1];
  const int64_t lo = p.sliding_window > 0 ? max(int64_t{0}, batch.positions[t0] - p.sliding_window + 1) : 0;

  // This thread's row and its key range within each tile.
  const int row = threadIdx.x / 8, sub = threadIdx.x % 8;
  const bool live = row < rows;
  const int64_t last = live ? batch.positions[t0 + row / nh] : -1;
  const int64_t first = live ? (p.sliding_window > 0 ? max(int64_t{0}, last - p.sliding_window + 1) : 0) : 1;
  float m = -INFINITY, l = 0;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kOutTilesPerWarp];
#pragma unroll
  for (int x = 0; x < kOutTilesPerWarp; ++x) wmma::fill_fragment(acc[x], 0.0f);

  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t start = lo; start <= hi; start += kKeys) {
      __syncthreads();
      LoadTile(cache.k, cache, table, kv_head, start, hi, kv_s);
      __syncthreads();
      // S = Q K^T: this warp's two 16-key column tiles.
      for (int n = 0; n < kKeys / 16 / kWarps; ++n) {
        const int key0 = (warp * (kKeys / 16 / kWarps) + n) * 16;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> s;
        wmma::fill_fragment(s, 0.0f);
        for (int c = 0; c < d; c += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
          wmma::load_matrix_sync(a, reinterpret_cast<const __nv_bfloat16*>(q_s + c), ld);
          wmma::load_matrix_sync(b, reinterpret_cast<const __nv_bfloat16*>(kv_s + key0 * ld + c), ld);
          wmma::mma_sync(s, a, b, s);
        }
        wmma::store_matrix_sync(s_s + key0, s, kKeys, wmma::mem_row_major);
      }
      __syncthreads();
      for (int k = 0; k < kKeysPerThread; ++k) {
        const int key = sub * kKeysPerThread + k;
        const int64_t j = start + key;
        const bool valid = j >= first && j <= last;
        const float sc = valid ? Score(s_s[row * kKeys + key], p) : -INFINITY;
        if (pass == 0) {
          if (valid) Merge(m, l, sc, 1.0f);
        } else {
          p_s[row * kPLd + key] = FloatToBf16(valid ? expf(sc - m) / l : 0.0f);
        }
      }
      if (pass == 0) continue;
      __syncthreads();  // P complete, K no longer read
      LoadTile(cache.v, cache, table, kv_head, start, hi, kv_s);
      __syncthreads();
#pragma unroll
      for (int x = 0; x < kOutTilesPerWarp; ++x) {
        const int dim0 = (warp + x * kWarps) * 16;
        if (dim0 >= d) break;
        for (int k0 = 0; k0 < kKeys; k0 += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
          wmma::load_matrix_sync(a, reinterpret_cast<const __nv_bfloat16*>(p_s + k0), kPLd);
          wmma::load_matrix_sync(b, reinterpret_cast<const __nv_bfloat16*>(kv_s + k0 * ld + dim0), ld);
          wmma::mma_sync(acc[x], a, b, acc[x]);
        }
      }
    }
    if (pass == 0) {
      // The row's (max, sum) over its 8 threads (consecutive lanes), fixed butterfly.
      for (int off = 4; off > 0; off >>= 1) {
        const float mo = __shfl_xor_sync(0xFFFFFFFFu, m, off), lo_ = __shfl_xor_sync(0xFFFFFFFFu, l, off);
        Merge(m, l, mo, lo_);
      }
    }
  }

  // O to shared memory (over the K/V tile), then bf16 rows.
  __syncthreads();
  float* o_s = reinterpret_cast<float*>(kv_s);  // [16][d]
#pragma unroll
  for (int x = 0; x < kOutTilesPerWarp; ++x) {
    const int dim0 = (warp + x * kWarps) * 16;
    if (dim0 < d) wmma::store_matrix_sync(o_s + dim0, acc[x], d, wmma::mem_row_major);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < rows * d; idx += kThreads) {
    const int r = idx / d, i = idx % d;
    out[((t0 + r / nh) * p.num_heads + head0 + r % nh) * d + i] = FloatToBf16(o_s[idx]);
  }
}

size_t TensorCoreSharedBytes(int64_t d) {
  return static_cast<size_t>(kMaxRows + kKeys) * (d + kPad) * 2 + kMaxRows * kKeys * 4 + kMaxRows * kPLd * 2;
}

}  // namespace

Status LaunchTensorCore(const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params, int nh,
                        const uint16_t* q, uint16_t* out, cudaStream_t stream) {
  const int64_t d = cache.head_dim;
  if (d % 16 != 0) return InvalidArgument("tensor-core attention: head_dim " + std::to_string(d) + " not a multiple of 16");
  const size_t shared = TensorCoreSharedBytes(d);
  if (shared > 48 * 1024) {
    DF11_RETURN_IF_ERROR(CheckCuda(
        cudaFuncSetAttribute(TensorCoreKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)),
        "cudaFuncSetAttribute(TensorCoreKernel)"));
  }
  const int64_t group = params.num_heads / cache.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(batch.num_tiles), static_cast<unsigned>(cache.num_kv_heads),
                  static_cast<unsigned>(group / nh));
  TensorCoreKernel<<<grid, kThreads, shared, stream>>>(cache, batch, params, nh, q, out);
  return CheckLaunch("TensorCoreKernel");
}

}  // namespace df11::cuda::attention
