// The Hopper prefill attention (cuda_attention_internal.cuh: WgmmaPrefillAttention), built for
// sm_90a alone: PagedAttention's prefill-mode blocks for head dims 65..128 with wgmma instead of
// mma.sync. Same contract, work split and numerics as the mma.sync kernel (cuda_attention.cu):
// a block takes one tile of consecutive tokens of one sequence and nh query heads of one KV group
// (rows = tile tokens x nh, at most 128: row r = token r / nh, head r % nh), walks the keys the
// tile sees in 128-key tiles, and keeps FlashAttention's statistics: s = (q·k) * scale in fp32,
// optional soft-cap, online softmax in the log2 domain with fp32 (max, sum), probabilities rounded
// to bf16 only as the P·V operand, fp32 accumulation, out = bf16(O / sum). What differs from the
// mma.sync kernel is only fp32 rounding: the tensor cores' order inside each product, the scale
// joined to each exponent's fused multiply-add, exp2 flushing subnormal results, and the row sums
// in two chains.
//
// Geometry: 2 warpgroups, warpgroup g owns rows 64 g .. 64 g + 63. Shared memory, 128-byte swizzle
// (cuda_wgmma.cuh), head dims padded with zeros to 128 as two 64-dim blocks:
//   Q  [2 dim blocks][128 rows][128 B], K-major: wgmma's A for S = Q K^T;
//   per stage (2): K [2][128 keys][128 B], K-major: B of S; V in the same layout, which is
//   MN-major for O += P V (N = dims contiguous; DescriptorMN, LBO = one dim block).
// Per key tile: every thread copies its 8 keys' 16-byte chunk of K and V by cp.async, at the cache
// slots the first warpgroup looked up (one key a thread, two tiles ahead, into shared memory); the
// next tile copies while this one multiplies; one barrier a tile. Each warpgroup issues
// 8 wgmma m64n128k16 for S (64 fp32 a thread: rows g and g + 8 of its warp's 16, 32 keys), the
// softmax in registers as the mma.sync kernel's (quad shuffles for the row max and sum), P packed
// to bf16 as the A fragments of 8 wgmma m64n128k16 (A in registers) for O (64 fp32 a thread).
//
// Measured on an H100 (bench/attention_bench, Qwen3-8B layer, causal prefill): 2,048 tokens
// 0.112 ms a layer (306 TFLOP/s), 4,096 tokens 0.361-0.363 (380 TFLOP/s)
// (bench/results/ab_h100_prefill_slots.log; the slots in shared memory took 0.122 / 0.400-0.405 there
// to 0.112 / 0.362: each thread had looked up its 8 keys itself), against the mma.sync kernel's
// 0.179-0.182 / 0.626-0.639 (ab_h100_wgmma_prefill.log, attention_h100_wgmma_prefill.log).
// Measured on the way, not kept (attention_h100_wgmma_prefill.log): 64-key tiles 0.130 / 0.437 ms;
// three stages 3% slower; one warpgroup a block (64 rows, two blocks an SM) 0.179-0.181 /
// 0.650-0.668; Q·K^T of tile t issued with P·V of t - 1 and t's softmax run while P·V multiplies
// (FlashAttention-3's intra-warpgroup overlap) no gain. ncu of those earlier builds (same log):
// 1.4-1.6 instructions issued per SM cycle with 2 warps per scheduler, stalls mostly on dependent
// arithmetic and the barrier; what would go further is warp specialization (a producer warpgroup
// filling stages behind mbarriers) and two consumer warpgroups taking turns at the tensor cores.
#include <cuda_runtime.h>

#include <climits>
#include <type_traits>

#include "kernels/cuda_attention_internal.cuh"
#include "kernels/cuda_ops_internal.cuh"
#include "kernels/cuda_wgmma.cuh"

namespace df11::cuda {
namespace {

using wgmma::Descriptor;
using wgmma::DescriptorMN;
using wgmma::Swizzled;

constexpr int kDP = 128;  // head dim, padded

constexpr int kThreads = 256;              // two warpgroups
constexpr int kRows = 128;                 // query rows of a block
constexpr int kQBlockBytes = kRows * 128;  // one dim block of Q: 16 KB
static_assert(PrefillRows(kDP) == kRows, "the host's tiles hold PrefillRows(128) rows");

constexpr int kKeys = 128;                            // keys per K/V tile
constexpr int kStages = 2;                            // tile t + 1 copies while t multiplies
constexpr int kTileBlockBytes = kKeys * 128;          // one dim block of a K or V tile: 16 KB
constexpr int kStageBytes = 2 * 2 * kTileBlockBytes;  // K, then V
constexpr int kSharedBytes = 2 * kQBlockBytes + kStages * kStageBytes + 2 * kKeys * 4 + 1024;  // + room to align
constexpr int kKeysPerThread = kKeys * (kDP / 8) / kThreads;  // K (and V) chunks a thread copies a tile

// Byte offset of 16-byte chunk c (0..15, 8 dims each) of row r in a two-dim-block operand whose
// blocks are block_bytes apart.
__device__ __forceinline__ uint32_t ChunkOffset(int r, int c, int block_bytes) {
  return static_cast<uint32_t>((c >> 3) * block_bytes) + Swizzled(r, c & 7);
}

// 2^x, flushing subnormal results to zero (one MUFU.EX2; exp2f adds range fix-ups). A probability
// under 2^-126 next to the row's largest, which is 1, changes no bf16 P·V operand that matters.
__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Grid (tiles, KV heads, group / nh), kThreads threads, kSharedBytes of dynamic shared memory.
__global__ void __launch_bounds__(kThreads, 1)
    WgmmaPrefillKernel(PagedKvLayer cache, BatchLayout batch, AttentionParams p, int nh, const uint16_t* q,
                       uint16_t* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t shared_raw[];
  uint8_t* shared = shared_raw + ((1024 - SharedAddress(shared_raw) % 1024) % 1024);
  uint8_t* q_s = shared;                      // [2][kRows][128 B]
  uint8_t* kv_s = shared + 2 * kQBlockBytes;  // stage s: K at s * kStageBytes, V 2 blocks on
  int32_t* slot_s = reinterpret_cast<int32_t*>(kv_s + kStages * kStageBytes);  // [2][kKeys] cache slots

  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, gr = lane / 4, tc = lane % 4;
  const int d = static_cast<int>(cache.head_dim);
  // Blocks start in the order of (x, y), read tile-major as the mma.sync kernel's (longest tiles first).
  const int64_t order = blockIdx.x + int64_t{gridDim.x} * blockIdx.y;
  const int64_t tile = order / gridDim.y, kv_head = order % gridDim.y;
  const int64_t t0 = batch.tiles[2 * tile], n_tok = batch.tiles[2 * tile + 1];
  const int64_t group = p.num_heads / cache.num_kv_heads;
  const int64_t head0 = kv_head * group + int64_t{blockIdx.z} * nh;
  const int rows = static_cast<int>(n_tok) * nh;
  auto q_row = [&](int r) { return (t0 + r / nh) * p.num_heads + head0 + r % nh; };  // [T * heads] row

  const int32_t* table = batch.tables + batch.table_begin[batch.token_seq[t0]];
  const int hi = batch.positions[t0 + n_tok - 1];  // positions fit int32 (and < 2^24: Slot)
  const int lo = p.sliding_window > 0 ? max(0, batch.positions[t0] - static_cast<int>(p.sliding_window) + 1) : 0;
  const int tiles = hi >= lo ? (hi - lo) / kKeys + 1 : 0;

  // This thread's rows (gr and gr + 8 of its warp's 16) and their visible keys [first, last];
  // over the warp's live rows, the keys every row sees: [all_from, all_to].
  const int row0 = 64 * wg + 16 * warp;
  int first[2], last[2], all_from = 0, all_to = INT_MAX;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row0 + gr + 8 * i;
    last[i] = r < rows ? batch.positions[t0 + r / nh] : -1;
    first[i] = p.sliding_window > 0 ? max(0, last[i] - static_cast<int>(p.sliding_window) + 1) : 0;
    if (r < rows) {
      all_from = max(all_from, first[i]);
      all_to = min(all_to, last[i]);
    }
  }
  all_from = __reduce_max_sync(0xFFFFFFFFu, all_from);
  all_to = min(__reduce_min_sync(0xFFFFFFFFu, all_to), hi);
  const bool group_live = 64 * wg < rows;  // the warpgroup has rows (uniform across it)

  // Cache slots of a tile's keys in slot_s[buffer] (-1 past hi), one key a thread of the first
  // warpgroup: j / bs by a float reciprocal, corrected by one step (exact for j < 2^24), with no
  // branch (the table is read at min(j, hi)). Then every thread copies chunk tid % 16 of keys
  // tid / 16 + 16 i of a tile.
  const int bs = static_cast<int>(cache.block_size);
  const float inv_bs = 1.0f / static_cast<float>(bs);
  auto fill = [&](int start, int buffer) {
    if (tid < kKeys) {
      const int j = start + tid, jj = min(j, hi);
      int b = __float2int_rz(static_cast<float>(jj) * inv_bs);
      const int off = jj - b * bs;
      b += off >= bs ? 1 : off < 0 ? -1 : 0;
      const int32_t slot = table[b] * bs + (jj - b * bs);
      slot_s[buffer * kKeys + tid] = j <= hi ? slot : -1;
    }
  };
  const int chunk = tid % 16, key_base = tid / 16;
  constexpr int kKeyStep = kThreads / 16;
  const int64_t slot_row = cache.num_kv_heads * cache.head_dim;
  const int64_t column = kv_head * d + (chunk * 8 < d ? chunk * 8 : 0);  // this thread's chunk of a slot's row
  const uint16_t* k_column = cache.k + column;
  const uint16_t* v_column = cache.v + column;
  auto issue = [&](int t) {  // tile t's copies, its slots in slot_s[t % 2]
    uint8_t* k_t = kv_s + (t % kStages) * kStageBytes;
    uint8_t* v_t = k_t + 2 * kTileBlockBytes;
    const int32_t* slots = slot_s + (t & 1) * kKeys;
#pragma unroll
    for (int i = 0; i < kKeysPerThread; ++i) {
      const int key = key_base + kKeyStep * i;
      const int32_t slot = slots[key];
      const int bytes = slot >= 0 && chunk * 8 < d ? 16 : 0;  // 0: zeros, and the address is slot 0's
      const int64_t at = int64_t{max(slot, 0)} * slot_row;
      const uint32_t off = ChunkOffset(key, chunk, kTileBlockBytes);
      CopyAsync16(k_t + off, k_column + at, bytes);
      CopyAsync16(v_t + off, v_column + at, bytes);
    }
  };
  if (tiles > 0) fill(lo, 0);
  if (tiles > 1) fill(lo + kKeys, 1);
  // Everything above reads the batch and the block table only; q and the new tokens' keys and
  // values come from the previous kernel (PrepareAttention; this launch is its programmatic dependent).
  WaitPrevious();
  AllowDependents();
#pragma unroll
  for (int i = 0; i < kRows * (kDP / 8) / kThreads; ++i) {
    const int idx = tid + kThreads * i, r = idx / 16, c = idx % 16;
    const bool live = r < rows && c * 8 < d;
    CopyAsync16(q_s + ChunkOffset(r, c, kQBlockBytes), live ? q + q_row(r) * d + c * 8 : q, live ? 16 : 0);
  }
  __syncthreads();          // the first two tiles' slots
  if (tiles > 0) issue(0);  // one group: Q with tile 0
  CopyAsyncCommit();
  // Waits for tile t's copies, then the barrier after which every warpgroup is done with tile
  // t - 1, whose stage tile t + 1 then starts filling (and the slots of tile t, read by its copies,
  // make way for tile t + 2's).
  auto arrive = [&](int t) {
    CopyAsyncWait<0>();
    wgmma::FenceProxyAsync();  // the copies' writes (Q's too), for wgmma
    __syncthreads();
    if (t + 1 < tiles) issue(t + 1);
    if (t + 2 < tiles) fill(lo + (t + 2) * kKeys, t & 1);
    CopyAsyncCommit();
  };

  // Softmax in the log2 domain: without a soft-cap the scores stay q·k and `fold` (scale * log2 e)
  // joins them in each exponent's fused multiply-add; with one, s becomes cap * tanh(q·k * scale /
  // cap) * log2 e first.
  const float fold = p.softcap > 0 ? 1.0f : p.scale * kLog2e;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[kDP / 2];  // o[4 x + e]: row gr + 8 (e / 2), dim 8 x + 2 tc + e % 2
#pragma unroll
  for (int i = 0; i < kDP / 2; ++i) o[i] = 0.0f;
  float s[kKeys / 2];         // s[4 j + e]: row gr + 8 (e / 2) of the warp's 16, key start + 8 j + 2 tc + e % 2
  uint32_t a[kKeys / 16][4];  // P of a tile as the A fragments of its 16-key steps
  const uint32_t q_a = SharedAddress(q_s) + wg * 64 * 128;
  auto k_addr = [&](int t) { return SharedAddress(kv_s + (t % kStages) * kStageBytes); };
  auto issue_scores = [&](int t) {  // S = Q K^T of tile t
    const uint32_t k_a = k_addr(t);
#pragma unroll
    for (int kk = 0; kk < kDP / 16; ++kk) {
      const uint32_t step = 32 * (kk % 4);  // the 16-dim step's bytes within its 64-dim block
      wgmma::Wgmma<kKeys>(s, Descriptor(q_a + (kk / 4) * kQBlockBytes + step),
                          Descriptor(k_a + (kk / 4) * kTileBlockBytes + step), kk > 0);
    }
  };
  auto issue_pv = [&](int t) {  // O += P V of tile t; V's 16 keys of step k start 16 k lines on
    const uint32_t v_a = k_addr(t) + 2 * kTileBlockBytes;
#pragma unroll
    for (int k = 0; k < kKeys / 16; ++k) {
      wgmma::Wgmma128RegA(o, a[k], DescriptorMN(v_a + k * 16 * 128, kTileBlockBytes));
    }
  };
  // A tile's scores (soft-cap, masking: only tiles with keys some live row must not see, the causal
  // edge, the window, past hi), the row max over the quad, (max, sum) and the probabilities in s;
  // returns the rows' rescale factors for O.
  auto exponents = [&](int start, float(&alpha)[2]) {
    // Per row, the max and the sum run in two interleaved chains (elements e % 2 = 0 and 1), so
    // their dependent steps overlap.
    float tile_max[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
    auto score = [&](auto masked) {
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = e >> 1;
          float x = s[4 * n + e];
          if (p.softcap > 0) x = p.softcap * tanhf(x * (p.scale / p.softcap)) * kLog2e;
          if constexpr (decltype(masked)::value) {
            const int j = start + n * 8 + 2 * tc + (e & 1);
            if (j < first[i] || j > last[i]) x = -INFINITY;
          }
          s[4 * n + e] = x;
          tile_max[i][e & 1] = fmaxf(tile_max[i][e & 1], x);
        }
      }
    };
    if (start >= all_from && start + kKeys - 1 <= all_to) {
      score(std::false_type{});
    } else {
      score(std::true_type{});
    }
    float m_use[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float tm = fmaxf(tile_max[i][0], tile_max[i][1]);
      tm = fmaxf(tm, __shfl_xor_sync(0xFFFFFFFFu, tm, 1));
      tm = fmaxf(tm, __shfl_xor_sync(0xFFFFFFFFu, tm, 2));
      const float m_new = fmaxf(m[i], tm * fold);
      alpha[i] = Weight(m[i], m_new);
      m[i] = m_new;
      m_use[i] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no visible key yet: every p is 0
      l[i] *= alpha[i];
    }
    float sum[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[4 * n + e] = Exp2(fmaf(s[4 * n + e], fold, -m_use[e >> 1]));
        sum[e >> 1][e & 1] += s[4 * n + e];
      }
    }
    l[0] += sum[0][0] + sum[0][1];
    l[1] += sum[1][0] + sum[1][1];
  };
  // O's rescale, skipped when no row of the warp got a new max (every alpha is exactly 1), and P
  // packed to bf16 as the A fragments.
  auto rescale_and_pack = [&](const float(&alpha)[2]) {
    if (!__all_sync(0xFFFFFFFFu, alpha[0] == 1.0f && alpha[1] == 1.0f)) {
#pragma unroll
      for (int x = 0; x < kDP / 8; ++x) {
        o[4 * x + 0] *= alpha[0];
        o[4 * x + 1] *= alpha[0];
        o[4 * x + 2] *= alpha[1];
        o[4 * x + 3] *= alpha[1];
      }
    }
#pragma unroll
    for (int k = 0; k < kKeys / 16; ++k) {
      a[k][0] = PackBf16(s[8 * k + 0], s[8 * k + 1]);
      a[k][1] = PackBf16(s[8 * k + 2], s[8 * k + 3]);
      a[k][2] = PackBf16(s[8 * k + 4], s[8 * k + 5]);
      a[k][3] = PackBf16(s[8 * k + 6], s[8 * k + 7]);
    }
  };
  for (int t = 0; t < tiles; ++t) {
    arrive(t);
    if (!group_live) continue;
    wgmma::Fence();
    issue_scores(t);
    wgmma::Commit();
    wgmma::Wait<0>();
    wgmma::FenceOperands(s);
    float alpha[2];
    exponents(lo + t * kKeys, alpha);
    rescale_and_pack(alpha);
    wgmma::FenceOperands(o);
    wgmma::Fence();
    issue_pv(t);
    wgmma::Commit();
    wgmma::Wait<0>();  // the stage is read before a later barrier refills it
    wgmma::FenceOperands(o);
  }
  CopyAsyncWait<0>();
  if (!group_live) return;
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // the row's sum over its quad (fixed butterfly)
    l[i] += __shfl_xor_sync(0xFFFFFFFFu, l[i], 1);
    l[i] += __shfl_xor_sync(0xFFFFFFFFu, l[i], 2);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row0 + gr + 8 * i;
    if (r >= rows) continue;
    const float inv = 1.0f / l[i];
    uint16_t* dst = out + q_row(r) * d + 2 * tc;
#pragma unroll
    for (int x = 0; x < kDP / 8; ++x) {
      if (x * 8 < d)
        *reinterpret_cast<uint32_t*>(dst + x * 8) = PackBf16(o[4 * x + 2 * i] * inv, o[4 * x + 2 * i + 1] * inv);
    }
  }
#else
  __trap();  // built for sm_90a only
#endif
}

}  // namespace

bool WgmmaPrefillApplies(int64_t head_dim) { return head_dim > 64 && head_dim <= kDP && wgmma::DeviceIsSm90(); }

Status WgmmaPrefillAttention(const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params, int nh,
                             const uint16_t* q, uint16_t* out, cudaStream_t stream) {
  int device = 0, sms = 0;
  DF11_RETURN_IF_ERROR(CurrentDeviceSms(&device, &sms));
  DF11_RETURN_IF_ERROR(
      AllowSharedBytes<WgmmaPrefillKernel>(kSharedBytes, device, "cudaFuncSetAttribute(WgmmaPrefillKernel)"));
  const int64_t chunks = params.num_heads / cache.num_kv_heads / nh;
  const dim3 grid(static_cast<unsigned>(batch.num_tiles), static_cast<unsigned>(cache.num_kv_heads),
                  static_cast<unsigned>(chunks));
  LaunchDependentShared(WgmmaPrefillKernel, grid, dim3(kThreads), kSharedBytes, stream, cache, batch, params, nh, q,
                        out);
  return CheckLaunch("WgmmaPrefillKernel");
}

}  // namespace df11::cuda
