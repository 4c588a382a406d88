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
// Geometry: 3 warpgroups. Consumer warpgroup g (0, 1) owns rows 64 g .. 64 g + 63; the third
// copies K and V (warp specialization, its registers given to the consumers by setmaxnreg).
// Shared memory, 128-byte swizzle (cuda_wgmma.cuh), head dims padded with zeros to 128 as two
// 64-dim blocks:
//   Q  [2 dim blocks][128 rows][128 B], K-major: wgmma's A for S = Q K^T;
//   per stage (3): K [2][128 keys][128 B], K-major: B of S; V in the same layout, which is
//   MN-major for O += P V (N = dims contiguous; DescriptorMN, LBO = one dim block).
// Per key tile: the copying warpgroup waits for the stage's `empty` mbarrier (every consumer warp
// done with the tile three before), looks up the tile's cache slots (one key a thread), copies each
// key's 16-byte chunks of K and V by cp.async and arrives on the stage's `full` mbarrier when its
// copies land. Each consumer warpgroup loads its own Q rows, then per tile waits for `full` and
// takes its turn at the tensor cores (FlashAttention-3's ping-pong, two named barriers): a turn
// issues 8 wgmma m64n128k16 for S of tile t (64 fp32 a thread: rows g and g + 8 of its warp's 16,
// 32 keys) and 8 wgmma m64n128k16 with P of tile t - 1 in registers for O += P V (64 fp32 a
// thread), then hands over; tile t's softmax (in registers, as the mma.sync kernel's: quad shuffles
// for the row max and sum) runs while the other warpgroup's products multiply, then O's rescale
// and P's bf16 packing once tile t - 1's P V is done, which also releases that tile's stage. O
// sees the same operations in the same order as in a loop of one tile at a time (the rescale by
// tile t's factor after tile t - 1's P V, before tile t's).
//
// Measured on an H100 (bench/attention_bench, Qwen3-8B layer, causal prefill;
// bench/results/ab_h100_prefill_pingpong.log, three rounds alternating with the build before):
// 512 / 2,048 / 4,096 tokens 0.0135-0.0139 / 0.0905-0.0917 / 0.294-0.296 ms a layer (155 / 378 /
// 465 TFLOP/s) against 0.0170-0.0171 / 0.1116-0.1127 / 0.361-0.364 for the two-warpgroup kernel
// before it, which copied its tiles itself a tile ahead (one __syncthreads a tile) and ran each
// warpgroup's S, softmax and P V in turn. Separate `full` barriers for K and V (S of a tile
// waiting only for its keys) were slower: 0.103 ms at 2,048 tokens. ncu (attention_bench, 2,048
// tokens, clocks locked at 1.41 GHz; ncu_prefill_attention_h100_pingpong.txt): the tensor pipe
// 40% busy, 0.4 instructions issued a scheduler-cycle. Earlier, for the two-warpgroup kernel
// (attention_h100_wgmma_prefill.log, ab_h100_prefill_slots.log): 64-key tiles, three stages and
// one warpgroup a block (64 rows, two blocks an SM) were slower; FlashAttention-3's
// intra-warpgroup overlap alone (without warp specialization) gained nothing.
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

constexpr int kConsumerThreads = 256;             // two warpgroups multiply
constexpr int kThreads = kConsumerThreads + 128;  // and one copies K and V
// Registers a thread of each role asks for (setmaxnreg; 128 x 40 + 256 x 232 <= 64 K).
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;
constexpr int kRows = 128;                 // query rows of a block
constexpr int kQBlockBytes = kRows * 128;  // one dim block of Q: 16 KB
static_assert(PrefillRows(kDP) == kRows, "the host's tiles hold PrefillRows(128) rows");

constexpr int kKeys = 128;                            // keys per K/V tile
constexpr int kStages = 3;                            // K/V tiles in shared memory at once
constexpr int kTileBlockBytes = kKeys * 128;          // one dim block of a K or V tile: 16 KB
constexpr int kStageBytes = 2 * 2 * kTileBlockBytes;  // K, then V
// Q, the stages, each stage's cache slots, each stage's two barriers, room to align.
constexpr int kSharedBytes = 2 * kQBlockBytes + kStages * kStageBytes + kStages * kKeys * 4 + 2 * kStages * 8 + 1024;
static_assert(kSharedBytes <= 227 * 1024, "one block an SM");

// Named barriers (0 is __syncthreads): 1 + g, warpgroup g's turn at the tensor cores; 3 + g,
// warpgroup g's Q in shared memory; 5, a tile's cache slots in shared memory for the copying
// warpgroup.
constexpr int kTurnBarrier = 1, kQBarrier = 3, kSlotsBarrier = 5;

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

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// mbarriers in shared memory (one phase per use of a stage) and named barriers.
__device__ __forceinline__ void BarrierInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SharedAddress(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void BarrierArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SharedAddress(bar)) : "memory");
}
// Arrives once every cp.async this thread issued so far has landed.
__device__ __forceinline__ void BarrierArriveOnCopies(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(SharedAddress(bar)) : "memory");
}
// Returns once the barrier's phase of this parity has completed.
__device__ __forceinline__ void BarrierWait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(SharedAddress(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void NamedSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void NamedArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int kRegisters>
__device__ __forceinline__ void GrowRegisters() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void ShrinkRegisters() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
#endif

// Grid (tiles, KV heads, group / nh), kThreads threads, kSharedBytes of dynamic shared memory.
__global__ void __launch_bounds__(kThreads, 1)
    WgmmaPrefillKernel(PagedKvLayer cache, BatchLayout batch, AttentionParams p, int nh, const uint16_t* q,
                       uint16_t* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t shared_raw[];
  uint8_t* shared = shared_raw + ((1024 - SharedAddress(shared_raw) % 1024) % 1024);
  uint8_t* q_s = shared;                      // [2][kRows][128 B]
  uint8_t* kv_s = shared + 2 * kQBlockBytes;  // stage s: K at s * kStageBytes, V 2 blocks on
  int32_t* slot_s = reinterpret_cast<int32_t*>(kv_s + kStages * kStageBytes);  // [kStages][kKeys] cache slots
  uint64_t* full = reinterpret_cast<uint64_t*>(slot_s + kStages * kKeys);      // [kStages]: the tile landed
  uint64_t* empty = full + kStages;  // [kStages]: every consumer warp is done with the tile

  const int tid = threadIdx.x, lane = tid % 32;
  const int d = static_cast<int>(cache.head_dim);
  // Blocks start in the order of (x, y), read tile-major as the mma.sync kernel's (longest tiles first).
  const int64_t order = blockIdx.x + int64_t{gridDim.x} * blockIdx.y;
  const int64_t tile = order / gridDim.y, kv_head = order % gridDim.y;
  const int64_t t0 = batch.tiles[2 * tile], n_tok = batch.tiles[2 * tile + 1];
  const int hi = batch.positions[t0 + n_tok - 1];  // positions fit int32 (and < 2^24: SlotOf)
  const int lo = p.sliding_window > 0 ? max(0, batch.positions[t0] - static_cast<int>(p.sliding_window) + 1) : 0;
  const int tiles = hi >= lo ? (hi - lo) / kKeys + 1 : 0;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      BarrierInit(&full[s], kThreads - kConsumerThreads);
      BarrierInit(&empty[s], kConsumerThreads / 32);
    }
  }
  __syncthreads();

  if (tid >= kConsumerThreads) {
    // The copying warpgroup: tile t into stage t % kStages once every consumer warp released the
    // tile before it there. Thread i looks up key i's cache slot (SlotOf), then copies chunk
    // i % 16 of keys i / 16 + 8 k (zeros past hi and past head_dim).
    ShrinkRegisters<kProducerRegisters>();
    const int i_p = tid - kConsumerThreads;
    const int32_t* table = batch.tables + batch.table_begin[batch.token_seq[t0]];
    const int bs = static_cast<int>(cache.block_size);
    const float inv_bs = 1.0f / static_cast<float>(bs);
    const int chunk = i_p % 16, key_base = i_p / 16;
    const int64_t slot_row = cache.num_kv_heads * cache.head_dim;
    const int64_t column = kv_head * d + (chunk * 8 < d ? chunk * 8 : 0);  // this lane's chunk of a slot's row
    const uint16_t* k_column = cache.k + column;
    const uint16_t* v_column = cache.v + column;
    WaitPrevious();     // the new tokens' keys and values come from PrepareAttention
    AllowDependents();  // only now: no launch runs two kernels ahead
    for (int t = 0; t < tiles; ++t) {
      const int stage = t % kStages;
      if (t >= kStages) BarrierWait(&empty[stage], (t / kStages - 1) & 1);
      int32_t* slots = slot_s + stage * kKeys;
      slots[i_p] = SlotOf(table, bs, inv_bs, lo + t * kKeys + i_p, hi);
      NamedSync(kSlotsBarrier, kThreads - kConsumerThreads);
      uint8_t* k_t = kv_s + stage * kStageBytes;
      uint8_t* v_t = k_t + 2 * kTileBlockBytes;
#pragma unroll
      for (int i = 0; i < kKeys / 8; ++i) {
        const int key = key_base + 8 * i;
        const int32_t slot = slots[key];
        const int bytes = slot >= 0 && chunk * 8 < d ? 16 : 0;  // 0: zeros, and the address is slot 0's
        const int64_t at = int64_t{max(slot, 0)} * slot_row;
        const uint32_t off = ChunkOffset(key, chunk, kTileBlockBytes);
        CopyAsync16(k_t + off, k_column + at, bytes);
        CopyAsync16(v_t + off, v_column + at, bytes);
      }
      // The stage's slots are rewritten only after the consumers released it, so after every
      // thread's copies of it were issued and landed.
      BarrierArriveOnCopies(&full[stage]);
    }
    CopyAsyncWait<0>();
    return;
  }

  // The consumer warpgroups.
  GrowRegisters<kConsumerRegisters>();
  const int wg = tid / 128, warp = (tid % 128) / 32, gr = lane / 4, tc = lane % 4;
  const int64_t group = p.num_heads / cache.num_kv_heads;
  const int64_t head0 = kv_head * group + int64_t{blockIdx.z} * nh;
  const int rows = static_cast<int>(n_tok) * nh;
  auto q_row = [&](int r) { return (t0 + r / nh) * p.num_heads + head0 + r % nh; };  // [T * heads] row

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

  // This warpgroup's 64 rows of Q (q comes from PrepareAttention).
  WaitPrevious();
  AllowDependents();
#pragma unroll
  for (int i = 0; i < 64 * (kDP / 8) / 128; ++i) {
    const int idx = tid % 128 + 128 * i, r = 64 * wg + idx / 16, c = idx % 16;
    const bool live = r < rows && c * 8 < d;
    CopyAsync16(q_s + ChunkOffset(r, c, kQBlockBytes), live ? q + q_row(r) * d + c * 8 : q, live ? 16 : 0);
  }
  CopyAsyncCommit();
  CopyAsyncWait<0>();
  wgmma::FenceProxyAsync();  // the copies' writes, for wgmma
  NamedSync(kQBarrier + wg, 128);

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
  // The warpgroups take turns at the tensor cores (FlashAttention-3's ping-pong): a turn issues
  // S = Q K^T of tile t and O += P V of tile t - 1, then the other warpgroup's turn starts while
  // this one runs tile t's softmax. tiles + 1 turns each, warpgroup 0 first; warpgroup 1's last
  // turn hands over to no one, so every arrive meets a sync.
  auto wait_tile = [&](int t) {
    BarrierWait(&full[t % kStages], (t / kStages) & 1);
    wgmma::FenceProxyAsync();  // the copying warp's writes, for wgmma
  };
  auto release = [&](int t) {  // after the wgmma reading tile t completed
    __syncwarp();
    if (lane == 0) BarrierArrive(&empty[t % kStages]);
  };
  auto turn_begin = [&] { NamedSync(kTurnBarrier + wg, kConsumerThreads); };
  auto turn_end = [&](bool last) {
    if (wg == 0 || !last) NamedArrive(kTurnBarrier + 1 - wg, kConsumerThreads);
  };
  if (tiles > 0) {
    if (wg == 1) NamedArrive(kTurnBarrier, kConsumerThreads);
    wait_tile(0);
    turn_begin();
    wgmma::Fence();
    issue_scores(0);
    wgmma::Commit();
    turn_end(false);
    wgmma::Wait<0>();
    wgmma::FenceOperands(s);
    float alpha[2];
    exponents(lo, alpha);
    rescale_and_pack(alpha);
  }
  for (int t = 1; t < tiles; ++t) {
    wait_tile(t);
    turn_begin();
    wgmma::Fence();
    issue_scores(t);
    wgmma::Commit();
    issue_pv(t - 1);
    wgmma::Commit();
    turn_end(false);
    wgmma::Wait<1>();  // S of tile t; P V of tile t - 1 still multiplying
    wgmma::FenceOperands(s);
    float alpha[2];
    exponents(lo + t * kKeys, alpha);
    wgmma::Wait<0>();
    wgmma::FenceOperands(o);
    release(t - 1);
    rescale_and_pack(alpha);
  }
  if (tiles > 0) {
    turn_begin();
    wgmma::Fence();
    issue_pv(tiles - 1);
    wgmma::Commit();
    turn_end(true);
    wgmma::Wait<0>();
    wgmma::FenceOperands(o);
    release(tiles - 1);
  }
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
