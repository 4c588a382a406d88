// Paged attention over the bf16 KV cache for ragged batches (see cuda_ops.h PagedAttention): one
// FlashAttention-2-style kernel on bf16 tensor cores (mma.sync m16n8k16, fp32 accumulate) for
// prefill and decode, with flash-decoding key splits when the grid is too small for the GPU. On
// Hopper, prefill-mode blocks of head dims 65..128 run the wgmma kernel of cuda_attention_wgmma.cu
// instead (the same tiles, rows and numerics; 2.0x / 2.1x faster at 2,048 / 4,096 tokens).
//
// Numerics (FlashAttention's, transformers' default `sdpa` path): s = (q·k) * scale in fp32,
// soft-cap s = cap * tanh(s / cap) in fp32, online softmax with fp32 (max, sum) statistics (kept in
// the log2 domain: exp2 of s * log2(e)), probabilities rounded to bf16 only as the P·V operand, fp32
// accumulation, out = bf16(O / sum).
//
// Work split: a block takes one tile of consecutive tokens of one sequence (host-built, see
// AttentionTiles: longest keys first; blocks read the grid tile-major, so they start in that
// order) and `nh` query heads of one KV group: rows = tile tokens x nh (row r = token
// r / nh, head r % nh), so K/V tiles loaded once into shared memory serve every query head of the
// group (GQA) and every token of the tile. 4 warps, 64-key K/V tiles, head dims padded with zeros to
// the kernel's DP (64, 128 or 256). K/V tiles arrive by cp.async (16-byte copies, zero-filled past
// the keys and dims), addressed through a shared table of the tile's cache slots; decode mode with
// DP <= 128 double-buffers them (tile t + 1 loads while tile t computes). Fragments come from shared
// memory by ldmatrix (V transposed):
// - prefill mode (kRowWarps = 4): 128 rows (64 for head dims above 128), each warp owns two (one)
//   m16 row tiles and every key of a tile;
// - decode mode (kRowWarps = 1): 16 rows, the 4 warps split each tile's keys (16 each), then merge
//   their (max, sum, O) through shared memory in warp order.
// Decode-mode blocks may further split a sequence's keys into `splits` ranges (flash-decoding; every
// block's, DecodeKeySplits, or only the last wave's, DecodeTailSplits): each writes its unnormalised
// (max, sum, O) rows to the workspace and CombineKernel merges the ranges by their log-sum-exp in
// split order. Fixed orders everywhere, no atomics: the same batch gives the
// same bits.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/cuda_attention_internal.cuh"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_ops_internal.cuh"
#include "kernels/gpu.h"

namespace df11::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTileKeys = 64;  // keys per shared-memory K/V tile; a key split is a multiple
// m16 row tiles per prefill-mode warp: two where registers allow (head dims up to 128), so every
// K and V fragment a warp loads from shared memory feeds two mma. Measured on the H100
// (bench/attention_bench.cc, Qwen3-8B layer; bench/results/attention_h100_mtiles_ab.log, three runs
// each): a 2,048-token prefill 0.299-0.302 ms a layer against 0.310-0.314 with one tile (4 blocks
// per SM then, 2 now: 253 registers), 4,096 tokens 0.879-0.890 against 0.926-0.952; with two
// K/V stages as well (2 blocks per SM still fit) 0.301-0.302 and 0.893-0.897.
// (PrefillMTiles, PrefillRows: cuda_attention_internal.cuh.)
constexpr int kDecodeRows = 16;  // query rows per decode-mode block
constexpr int kMaxHeadDim = 256;
constexpr int kMaxSplitBlocks = 4096;  // blocks x splits bound of the workspace

// A launch's shape: heads per block, key splits (1 = none), the workspace. A block's pair is its
// (tile, KV head, head chunk), numbered tile-major: (tile * heads + kv_head) * chunks + chunk.
// whole > 0 (decode only; DecodeTailSplits): a 1D grid whose first `whole` blocks take pairs
// [0, whole) unsplit and whose others take the later pairs in `splits` blocks each.
struct Split {
  int nh = 1;
  int splits = 1;
  int64_t whole = 0;
  int64_t heads = 1, chunks = 1;  // KV heads, head chunks (group / nh)
  float* workspace = nullptr;     // [split pairs][splits][kDecodeRows][2 + head_dim]: max, sum, O
};

// Keys per split of a sequence's `span` visible keys: an even share, whole tiles. Split s covers
// [lo + s * SplitKeys, ...); splits past the span idle. Computed on the device from the batch, so
// a launch (or a captured graph) serves any lengths.
__device__ __forceinline__ int64_t SplitKeys(int64_t span, int splits) {
  return ((span + splits - 1) / splits + kTileKeys - 1) / kTileKeys * kTileKeys;
}

// K/V stages of a kernel: two (copy the next tile during this one's math) in decode mode up to DP
// 128; one elsewhere (three DP-256 decode blocks per SM). Measured against other choices on an H100
// (bench/attention_bench.cc, Qwen3-8B layer shape; bench/results/attention_h100_variants_ab.log,
// with one m16 tile per prefill warp): decode with 3 stages (2 blocks per SM) was 7% faster at
// batch 64 but 9% slower at 128 and 16% at 8, with 4 stages (1 block) 23-70% slower; loading the
// block table a tile earlier changed nothing; prefill with 2 stages (2 blocks per SM then) was 19%
// slower, with 32-key tiles (1, 2 or 3 stages) 8-18% slower; with two m16 tiles per warp, 2 stages
// gain nothing (PrefillMTiles). Both modes are bound by their warps' instruction latency (ncu:
// 0.4-0.5 issued per scheduler-cycle at 10-14 resident warps per SM), not by how many bytes are in
// flight. Fewer instructions did gain (attention_h100_rescale_ab.log: one address computation for a
// key's K and V copies, O's rescale skipped when no row max moved, decode warps' Q fragments in
// registers): decode at batch 64 over 512 keys 0.068-0.069 ms a layer against 0.078-0.079, at 128
// 0.114 against 0.121-0.122, a 2,048-token prefill 0.267-0.269 against 0.299-0.300, 4,096 tokens
// 0.783-0.792 against 0.886-0.888. Packing P by one cvt.rn.bf16x2.f32 and folding the scale into
// the exponent's FMA gained nothing measurable (attention_h100_softmax_ab.log: prefill 0.266-0.268
// ms against 0.269-0.272). Starting tiles longest first, each tile's KV heads together, balances a
// causal prefill's waves (before, the grid's last blocks were the last KV head's longest tiles):
// 2,048 tokens 0.181-0.182 ms a layer against 0.270-0.272, 4,096 tokens 0.632-0.636 against
// 0.789-0.796; decode unchanged (attention_h100_lpt_ab.log, three runs each, alternating).
// Measured again with the copies of IssueTile below (ab_h100_decode_stages.log, two rounds each):
// decode with 3 stages (2 blocks per SM) 3% faster at 48-64 sequences over 512 keys, 3-4% slower at
// 96-128 and 14-20% at 8-16, so not worth a second decode kernel for 48-64 sequences.
// Decode with one stage to fit 4 or 5 blocks per SM (a 64-sequence grid of 512 blocks then runs
// in one wave instead of 1.3) was slower (attention_h100_decode_occupancy_ab.log, two runs each):
// batch 64 over 512 keys 0.072-0.073 ms a layer at 4 blocks, 0.097 at 5, against 0.066; batch 8
// 0.030-0.031 against 0.023-0.024: the second stage hides more than the extra blocks do. Issuing
// the first K/V tile before the q loads (one more barrier) was slower at small batches: decode at
// batch 1 / 8 0.0100-0.0101 / 0.0170-0.0172 ms a layer against 0.0096-0.0099 / 0.0166-0.0168
// (attention_h100_first_tile_early.log, three runs each, alternating).
constexpr int Stages(int dp, int row_warps) { return row_warps == 1 && dp <= 128 ? 2 : 1; }

// Blocks per SM the compiler must fit in registers: two prefill-mode blocks up to DP 128, whose
// warps hold two m16 row tiles (PrefillMTiles; with one they ran four blocks: at 165 registers,
// 12 warps per SM had run at 16% occupancy, ALU-bound, and 16 warps needed <= 128 registers);
// three decode-mode blocks up to DP 128 (what their shared memory allows), whose warps keep their
// Q fragments in registers.
constexpr int MinBlocks(int dp, int row_warps) { return dp > 128 ? 1 : row_warps == 4 ? 2 : 3; }

// c += a · b on bf16 tensor cores (m16n8k16, row x col, fp32 accumulate). Fragment layout, lane =
// 4g + t: a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..];
// b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]; c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1].
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Cache slots of keys [start, start + kTileKeys) into slots (-1 past hi; SlotOf); threads
// 0..kTileKeys-1.
__device__ __forceinline__ void FillSlots(const PagedKvLayer& cache, const int32_t* table, int64_t start, int64_t hi,
                                          int32_t* slots) {
  if (threadIdx.x < kTileKeys) {
    const int bs = static_cast<int>(cache.block_size);
    slots[threadIdx.x] = SlotOf(table, bs, 1.0f / static_cast<float>(bs),
                                static_cast<int>(start) + static_cast<int>(threadIdx.x), static_cast<int>(hi));
  }
}

// Four 8x8 bf16 matrices from shared memory, lanes 8i..8i+7 addressing matrix i's rows; with
// kTrans each lane gets the transposed elements (see Mma's fragment layout).
template <bool kTrans>
__device__ __forceinline__ void LoadMatrices(uint32_t (&r)[4], const uint16_t* row) {
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(SharedAddress(row)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(SharedAddress(row)));
  }
}

// Starts copying the keys and values of `slots` (one tile) into k_dst and v_dst [kTileKeys][ld]:
// zeros for slots of -1 and past head_dim. Thread t copies chunk t % (DP / 8) of keys t / (DP / 8) +
// step i; a key's K and V rows sit at the same offset of their pools, one 32 x 32 -> 64-bit multiply
// for both. Written with the chunk, the pool columns and the shared offsets out of the loop, where
// the copies had taken 33% of the decode kernel's instructions at batch 64, ~37 a chunk of K and V
// (ncu_decode_attention_h100_b64_sass.csv.xz); with that and FillSlots's reciprocal, decode at batch
// 32 / 64 / 128 over 512 keys 0.0387-0.0389 / 0.0624-0.0626 / 0.1074 ms a layer against 0.0399 /
// 0.0645 / 0.1093-0.1095 (H100, bench/results/ab_h100_attention_copies.log): the kernel waits on
// latency more than it issues.
template <int DP>
__device__ __forceinline__ void IssueTile(const PagedKvLayer& cache, const int32_t* slots, int64_t kv_head, int ld,
                                          uint16_t* k_dst, uint16_t* v_dst) {
  constexpr int kChunks = DP / 8;
  static_assert(kThreads % kChunks == 0 && kTileKeys % (kThreads / kChunks) == 0, "whole keys a step");
  constexpr int kKeyStep = kThreads / kChunks;
  const int d = static_cast<int>(cache.head_dim);
  const int c = static_cast<int>(threadIdx.x) % kChunks, key0 = static_cast<int>(threadIdx.x) / kChunks;
  const bool dim_live = c * 8 < d;
  const auto row = static_cast<uint32_t>(cache.num_kv_heads * cache.head_dim);
  const auto column = static_cast<uint32_t>(kv_head * d + (dim_live ? c * 8 : 0));
  const int dst = key0 * ld + c * 8;
#pragma unroll
  for (int i = 0; i < kTileKeys / kKeyStep; ++i) {
    const int32_t slot = slots[key0 + kKeyStep * i];
    const int bytes = slot >= 0 && dim_live ? 16 : 0;  // 0: zeros, and the address is slot 0's
    const uint64_t at = uint64_t{static_cast<uint32_t>(max(slot, 0))} * row + column;
    CopyAsync16(k_dst + dst + kKeyStep * i * ld, cache.k + at, bytes);
    CopyAsync16(v_dst + dst + kKeyStep * i * ld, cache.v + at, bytes);
  }
}

template <int DP, int kRowWarps>
__global__ void __launch_bounds__(kThreads, MinBlocks(DP, kRowWarps))
    AttentionKernel(PagedKvLayer cache, BatchLayout batch, AttentionParams p, Split g, const uint16_t* q,
                    uint16_t* out) {
  constexpr int kMT = kRowWarps > 1 ? PrefillMTiles(DP) : 1;  // m16 row tiles per warp
  constexpr int kRows = 16 * kMT * kRowWarps;                 // query rows of the block
  constexpr int kKeyWarps = kWarps / kRowWarps;               // warps sharing one row set
  constexpr int kWarpKeys = kTileKeys / kKeyWarps;            // keys of a tile per warp
  constexpr int kST = kWarpKeys / 8;                          // n8 tiles of S per warp
  constexpr int kOT = DP / 8;                                 // n8 tiles of O
  constexpr int kLd = DP + 8;                                 // bf16 row stride in shared memory
  constexpr int kStages = Stages(DP, kRowWarps);
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem);                        // [kRows][kLd]
  uint16_t* k_s = q_s + kRows * kLd;                                        // [kStages][kTileKeys][kLd]
  uint16_t* v_s = k_s + kStages * kTileKeys * kLd;                          // [kStages][kTileKeys][kLd]
  float* ml_s = reinterpret_cast<float*>(v_s + kStages * kTileKeys * kLd);  // [kWarps][16][2] (decode merge)
  int32_t* slot_s = reinterpret_cast<int32_t*>(ml_s + kWarps * 16 * 2);     // [2][kTileKeys] cache slots

  const int d = static_cast<int>(cache.head_dim);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gr = lane >> 2, tc = lane & 3;
  // Blocks start in the order of (x, y); read tile-major, so a tile's KV heads start together and
  // the tiles, longest first (AttentionTiles), start in the order of their work.
  int64_t tile, kv_head, pair;
  int chunk, split, splits;
  if (g.whole > 0) {
    const int64_t b = blockIdx.x;
    const bool cut = b >= g.whole;
    pair = cut ? g.whole + (b - g.whole) / g.splits : b;
    split = cut ? static_cast<int>((b - g.whole) % g.splits) : 0;
    splits = cut ? g.splits : 1;
    chunk = static_cast<int>(pair % g.chunks);
    kv_head = pair / g.chunks % g.heads;
    tile = pair / (g.chunks * g.heads);
  } else {
    const int64_t order = blockIdx.x + int64_t{gridDim.x} * blockIdx.y;
    tile = order / gridDim.y;
    kv_head = order % gridDim.y;
    chunk = blockIdx.z / g.splits;
    split = blockIdx.z % g.splits;
    splits = g.splits;
    pair = (tile * gridDim.y + kv_head) * g.chunks + chunk;
  }
  const int64_t t0 = batch.tiles[2 * tile], n_tok = batch.tiles[2 * tile + 1];
  const int64_t group = p.num_heads / cache.num_kv_heads;
  const int64_t head0 = kv_head * group + int64_t{chunk} * g.nh;
  const int rows = static_cast<int>(n_tok) * g.nh;
  auto q_row = [&](int r) { return (t0 + r / g.nh) * p.num_heads + head0 + r % g.nh; };  // [T * heads] row

  const int32_t* table = batch.tables + batch.table_begin[batch.token_seq[t0]];
  int64_t hi = batch.positions[t0 + n_tok - 1];
  int64_t lo = p.sliding_window > 0 ? max(int64_t{0}, batch.positions[t0] - p.sliding_window + 1) : 0;
  if (splits > 1) {
    const int64_t per = SplitKeys(hi - lo + 1, splits);
    lo += split * per;
    if (lo > hi) return;
    hi = min(hi, lo + per - 1);
  }

  // This lane's rows (gr and gr + 8 of each of the warp's m16 tiles) and their visible keys
  // [first, last] (positions fit int32); over the warp's live rows, the keys every row sees:
  // [all_from, all_to].
  const int row0 = kRowWarps == 1 ? 0 : warp * 16 * kMT;
  int first[kMT][2], last[kMT][2], all_from = 0, all_to = INT_MAX;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = row0 + 16 * mt + gr + 8 * i;
      last[mt][i] = r < rows ? batch.positions[t0 + r / g.nh] : -1;
      first[mt][i] = p.sliding_window > 0 ? max(0, last[mt][i] - static_cast<int>(p.sliding_window) + 1) : 0;
      if (r < rows) {
        all_from = max(all_from, first[mt][i]);
        all_to = min(all_to, last[mt][i]);
      }
    }
  }
  all_from = __reduce_max_sync(0xFFFFFFFFu, all_from);
  all_to = min(__reduce_min_sync(0xFFFFFFFFu, all_to), static_cast<int>(hi));
  const bool warp_live = row0 < rows;
  const int key0 = kRowWarps == 1 ? warp * kWarpKeys : 0;  // this warp's keys within a tile
  const float scale2 = p.softcap > 0 ? p.scale : p.scale * kLog2e;
  float m[kMT][2], l[kMT][2], o[kMT][kOT][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
#pragma unroll
    for (int x = 0; x < kOT; ++x) o[mt][x][0] = o[mt][x][1] = o[mt][x][2] = o[mt][x][3] = 0.0f;
  }

  // Tiles of keys [lo + t * kTileKeys, ...]: slots of tile t in slot_s[t & 1]; with two stages tile
  // t + 1 is issued (after a barrier that also ends every read of its stage) before tile t computes.
  const int64_t tiles = hi >= lo ? (hi - lo) / kTileKeys + 1 : 0;
  const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: this lane addresses row mr of matrix mi
  // Decode mode up to DP 128: the warp's Q fragments (the block's 16 rows, every dim) stay in
  // registers for every tile instead of coming from shared memory each time.
  constexpr bool kQInRegisters = kRowWarps == 1 && DP <= 128;
  uint32_t q_frag[kQInRegisters ? DP / 16 : 1][4];
  if (tiles > 0) FillSlots(cache, table, lo, hi, slot_s);
  // Everything above reads the batch and the block table only; q and the new tokens' keys and values
  // come from the previous kernel (PrepareAttention; this launch is its programmatic dependent).
  WaitPrevious();
  // Only now (no launch two kernels ahead): the next kernel may be a Gemv that prefetches its
  // weights meanwhile, or the combine.
  AllowDependents();
  for (int idx = threadIdx.x; idx < kRows * (DP / 8); idx += kThreads) {
    const int r = idx / (DP / 8), c = idx % (DP / 8);
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < rows && c * 8 < d) value = *reinterpret_cast<const uint4*>(q + q_row(r) * d + c * 8);
    *reinterpret_cast<uint4*>(q_s + r * kLd + c * 8) = value;
  }
  if (tiles > 0) {
    __syncthreads();
    IssueTile<DP>(cache, slot_s, kv_head, kLd, k_s, v_s);
    CopyAsyncCommit();
    if constexpr (kQInRegisters) {
#pragma unroll
      for (int c = 0; c < DP; c += 16)
        LoadMatrices<false>(q_frag[c / 16], q_s + (mr + (mi & 1) * 8) * kLd + c + (mi >> 1) * 8);
    }
  }
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t start = lo + t * kTileKeys;
    const bool more = t + 1 < tiles;
    int32_t* next_slots = slot_s + ((t + 1) & 1) * kTileKeys;
    if (more) FillSlots(cache, table, start + kTileKeys, hi, next_slots);
    const int64_t stage = kStages == 1 ? 0 : t & 1;
    if constexpr (kStages == 2) {
      __syncthreads();
      if (more) {
        const int64_t next = (t + 1) & 1;
        IssueTile<DP>(cache, next_slots, kv_head, kLd, k_s + next * kTileKeys * kLd, v_s + next * kTileKeys * kLd);
        CopyAsyncCommit();
        CopyAsyncWait<1>();
      } else {
        CopyAsyncWait<0>();
      }
    } else {
      CopyAsyncWait<0>();
    }
    __syncthreads();
    const uint16_t* k_t = k_s + stage * kTileKeys * kLd;
    const uint16_t* v_t = v_s + stage * kTileKeys * kLd;
    if (warp_live) {
      // S = Q K^T for the warp's 16 kMT rows x kWarpKeys keys.
      float s[kMT][kST][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int n = 0; n < kST; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
      }
#pragma unroll
      for (int c = 0; c < DP; c += 16) {
        if (c >= d) break;
        uint32_t a[kMT][4];  // Q rows row0 + 16 mt .. + 15, dims c .. c + 15
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          if constexpr (kQInRegisters) {
#pragma unroll
            for (int j = 0; j < 4; ++j) a[mt][j] = q_frag[c / 16][j];
          } else {
            LoadMatrices<false>(a[mt], q_s + (row0 + 16 * mt + mr + (mi & 1) * 8) * kLd + c + (mi >> 1) * 8);
          }
        }
#pragma unroll
        for (int n = 0; n < kST; n += 2) {  // K rows of n8 tiles n and n + 1, dims c .. c + 15
          uint32_t b[4];
          LoadMatrices<false>(b, k_t + (key0 + (n + (mi >> 1)) * 8 + mr) * kLd + c + (mi & 1) * 8);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            Mma(s[mt][n], a[mt], b[0], b[1]);
            Mma(s[mt][n + 1], a[mt], b[2], b[3]);
          }
        }
      }
      // Scores (log2 domain), the tile's row max over the quad, the rescale of (sum, O). Only tiles
      // with keys some live row must not see (the causal edge, the window, past hi) are masked.
      float tile_max[kMT][2];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) tile_max[mt][0] = tile_max[mt][1] = -INFINITY;
      auto score = [&](auto masked) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int n = 0; n < kST; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int i = e >> 1;
              float x = s[mt][n][e] * scale2;
              if (p.softcap > 0) x = p.softcap * tanhf(x * (1.0f / p.softcap)) * kLog2e;
              if constexpr (decltype(masked)::value) {
                const int j = static_cast<int>(start) + key0 + n * 8 + 2 * tc + (e & 1);
                if (j < first[mt][i] || j > last[mt][i]) x = -INFINITY;
              }
              s[mt][n][e] = x;
              tile_max[mt][i] = fmaxf(tile_max[mt][i], x);
            }
          }
        }
      };
      if (start >= all_from && start + kTileKeys - 1 <= all_to) {
        score(std::false_type{});
      } else {
        score(std::true_type{});
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        float alpha[2], m_use[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          float tm = tile_max[mt][i];
          tm = fmaxf(tm, __shfl_xor_sync(0xFFFFFFFFu, tm, 1));
          tm = fmaxf(tm, __shfl_xor_sync(0xFFFFFFFFu, tm, 2));
          const float m_new = fmaxf(m[mt][i], tm);
          alpha[i] = Weight(m[mt][i], m_new);
          m[mt][i] = m_new;
          m_use[i] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no visible key yet: every p is 0
          l[mt][i] *= alpha[i];
        }
        // O's rescale, skipped when no row of the warp's tile got a new max (every alpha is exactly
        // 1: the same bits), as is usual once a row has seen its largest scores.
        if (!__all_sync(0xFFFFFFFFu, alpha[0] == 1.0f && alpha[1] == 1.0f)) {
#pragma unroll
          for (int x = 0; x < kOT; ++x) {
            o[mt][x][0] *= alpha[0];
            o[mt][x][1] *= alpha[0];
            o[mt][x][2] *= alpha[1];
            o[mt][x][3] *= alpha[1];
          }
        }
#pragma unroll
        for (int n = 0; n < kST; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            s[mt][n][e] = exp2f(s[mt][n][e] - m_use[e >> 1]);
            l[mt][e >> 1] += s[mt][n][e];
          }
        }
      }
      // O += P V: P's accumulator tiles 2k, 2k + 1 are the A fragment of keys 16k .. 16k + 15; V's
      // B fragments of dims 8x .. 8x + 15 by one transposed ldmatrix (padded dims are zeros), each
      // feeding every m16 tile of the warp.
#pragma unroll
      for (int k = 0; k < kWarpKeys / 16; ++k) {
        uint32_t a[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          a[mt][0] = PackBf16(s[mt][2 * k][0], s[mt][2 * k][1]);
          a[mt][1] = PackBf16(s[mt][2 * k][2], s[mt][2 * k][3]);
          a[mt][2] = PackBf16(s[mt][2 * k + 1][0], s[mt][2 * k + 1][1]);
          a[mt][3] = PackBf16(s[mt][2 * k + 1][2], s[mt][2 * k + 1][3]);
        }
        const uint16_t* vb = v_t + (key0 + 16 * k + (mi & 1) * 8 + mr) * kLd + (mi >> 1) * 8;
#pragma unroll
        for (int x = 0; x < kOT; x += 2) {
          if (x * 8 >= d) break;
          uint32_t b[4];
          LoadMatrices<true>(b, vb + x * 8);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            Mma(o[mt][x], a[mt], b[0], b[1]);
            Mma(o[mt][x + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }  // warp_live
    if constexpr (kStages == 1) {
      __syncthreads();  // every read of the stage done
      if (more) {
        IssueTile<DP>(cache, next_slots, kv_head, kLd, k_s, v_s);
        CopyAsyncCommit();
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {  // the row's sum over its quad (fixed butterfly)
      l[mt][i] += __shfl_xor_sync(0xFFFFFFFFu, l[mt][i], 1);
      l[mt][i] += __shfl_xor_sync(0xFFFFFFFFu, l[mt][i], 2);
    }
  }

  if constexpr (kRowWarps > 1) {  // prefill mode: each warp writes its rows
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = row0 + 16 * mt + gr + 8 * i;
        if (r >= rows) continue;
        const float inv = 1.0f / l[mt][i];
        uint16_t* dst = out + q_row(r) * d + 2 * tc;
#pragma unroll
        for (int x = 0; x < kOT; ++x) {
          if (x * 8 < d) {
            *reinterpret_cast<uint32_t*>(dst + x * 8) = PackBf16(o[mt][x][2 * i] * inv, o[mt][x][2 * i + 1] * inv);
          }
        }
      }
    }
    return;
  } else {
    // Decode mode: merge the 4 warps' (max, sum, O) in warp order through shared memory (O over the
    // K/V tiles), then write bf16 rows or this split's unnormalised partial.
    __syncthreads();
    float* o_s = reinterpret_cast<float*>(k_s);  // [kWarps][16][DP] (every copy has landed)
    if (tc == 0) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        ml_s[(warp * 16 + gr + 8 * i) * 2] = m[0][i];
        ml_s[(warp * 16 + gr + 8 * i) * 2 + 1] = l[0][i];
      }
    }
#pragma unroll
    for (int x = 0; x < kOT; ++x) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o_s[(warp * 16 + gr + 8 * (e >> 1)) * DP + x * 8 + 2 * tc + (e & 1)] = o[0][x][e];
    }
    __syncthreads();
    float* part = splits > 1 ? g.workspace + ((pair - g.whole) * splits + split) * kDecodeRows * (2 + d) : nullptr;
    for (int idx = threadIdx.x; idx < rows * d; idx += kThreads) {
      const int r = idx / d, dim = idx % d;
      float top = -INFINITY;
      for (int w = 0; w < kWarps; ++w) top = fmaxf(top, ml_s[(w * 16 + r) * 2]);
      float sum = 0.0f, acc = 0.0f;
      for (int w = 0; w < kWarps; ++w) {
        const float wt = Weight(ml_s[(w * 16 + r) * 2], top);
        sum += ml_s[(w * 16 + r) * 2 + 1] * wt;
        acc += o_s[(w * 16 + r) * DP + dim] * wt;
      }
      if (part == nullptr) {
        out[q_row(r) * d + dim] = FloatToBf16(acc / sum);
      } else {
        float* pr = part + r * (2 + d);
        if (dim == 0) {
          pr[0] = top;
          pr[1] = sum;
        }
        pr[2 + dim] = acc;
      }
    }
  }
}

// out = bf16(merged O / merged sum) over the used splits of each split pair (Split), in split order.
// One block a pair from g.whole on (the grid: the split pairs), kCombineThreads threads, one per
// (row, dim) of the pair's rows (looping past kCombineThreads). Each thread issues the loads of kCombineBatch splits at
// a time before using them (the sums still run in split order), and the block is a programmatic dependent of the
// attention launch: it reads the batch before waiting for the partials. With the attention launched as a dependent of
// PrepareAttention, measured on the H100 (attention_bench, bench/results/ab_h100_combine.log, two runs each; the
// combine had 128 threads, one load at a time): decode at batch 1 / 8 over 512 keys 0.0104 / 0.0167-0.0170 ms a layer
// against 0.0173-0.0181 / 0.0230-0.0231 (ncu: the combine alone 10 us of 18). Measured and not kept
// (bench/results/ab_h100_fused_combine.log): no combine launch, the last of a block's splits to
// finish (an arrival counter in the workspace) merging them with its 128 threads: decode at batch
// 1 / 8 0.0155 / 0.0207 ms a layer against 0.0100-0.0103 / 0.0169, the BF16 step at batch 1 6.28
// ms against 6.11-6.17.
constexpr int kCombineThreads = 512;
constexpr int kCombineBatch = 8;
__global__ void __launch_bounds__(kCombineThreads)
    CombineKernel(BatchLayout batch, AttentionParams p, Split g, int64_t d, uint16_t* out) {
  const int64_t pair = g.whole + blockIdx.x;
  const int64_t tile = pair / (g.chunks * g.heads), kv_head = pair / g.chunks % g.heads, chunk = pair % g.chunks;
  const int64_t t0 = batch.tiles[2 * tile], n_tok = batch.tiles[2 * tile + 1];
  const int64_t group = p.num_heads / g.heads;
  const int64_t head0 = kv_head * group + chunk * g.nh;
  const int64_t hi = batch.positions[t0 + n_tok - 1];
  const int64_t lo = p.sliding_window > 0 ? max(int64_t{0}, batch.positions[t0] - p.sliding_window + 1) : 0;
  const int64_t per = SplitKeys(hi - lo + 1, g.splits);
  const int used = static_cast<int>(min(int64_t{g.splits}, (hi - lo + per) / per));
  const float* part = g.workspace + int64_t{blockIdx.x} * g.splits * kDecodeRows * (2 + d);
  const int64_t rows = n_tok * g.nh, stride = kDecodeRows * (2 + d);
  WaitPrevious();     // the partials come from the attention launch
  AllowDependents();  // the next kernel may be a Gemv that prefetches its weights
  for (int64_t idx = threadIdx.x; idx < rows * d; idx += blockDim.x) {
    const int64_t r = idx / d, dim = idx % d;
    const float* row = part + r * (2 + d);
    float top = -INFINITY;
    for (int s0 = 0; s0 < used; s0 += kCombineBatch) {
      float m[kCombineBatch];
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) m[j] = s0 + j < used ? row[(s0 + j) * stride] : -INFINITY;
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) top = fmaxf(top, m[j]);
    }
    float sum = 0.0f, acc = 0.0f;
    for (int s0 = 0; s0 < used; s0 += kCombineBatch) {
      float m[kCombineBatch], l[kCombineBatch], o[kCombineBatch];
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) {
        const float* pr = row + (s0 + j) * stride;
        const bool live = s0 + j < used;
        m[j] = live ? pr[0] : -INFINITY;
        l[j] = live ? pr[1] : 0.0f;
        o[j] = live ? pr[2 + dim] : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) {
        if (s0 + j < used) {
          const float wt = Weight(m[j], top);
          sum += l[j] * wt;
          acc += o[j] * wt;
        }
      }
    }
    out[((t0 + r / g.nh) * p.num_heads + head0 + r % g.nh) * d + dim] = FloatToBf16(acc / sum);
  }
}

int MultiprocessorCount() {
  static const int count = [] {
    int device = 0, sms = 0;
    if (!CurrentDeviceSms(&device, &sms).ok()) return 132;
    return sms;
  }();
  return count;
}

template <int DP, int kRowWarps>
constexpr size_t SharedBytes() {
  constexpr int kLd = DP + 8;
  constexpr int kStages = Stages(DP, kRowWarps);
  static_assert(2 * kTileKeys * kLd * 2 >= kWarps * 16 * DP * 4, "the decode merge reuses the K/V tiles");
  constexpr int kRows = kRowWarps > 1 ? PrefillRows(DP) : kDecodeRows;
  return size_t{kRows + 2 * kStages * kTileKeys} * kLd * 2 + kWarps * 16 * 2 * 4 + 2 * kTileKeys * 4;
}

template <int DP, int kRowWarps>
Status AllowShared() {
  if (SharedBytes<DP, kRowWarps>() <= 48 * 1024) return Status::Ok();
  int device = 0, sms = 0;
  DF11_RETURN_IF_ERROR(CurrentDeviceSms(&device, &sms));
  return AllowSharedBytes<AttentionKernel<DP, kRowWarps>>(static_cast<int>(SharedBytes<DP, kRowWarps>()), device,
                                                          "cudaFuncSetAttribute(AttentionKernel)");
}

template <int DP, int kRowWarps>
Status Launch(const dim3& grid, const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params,
              const Split& g, const uint16_t* q, uint16_t* out, cudaStream_t stream) {
  DF11_RETURN_IF_ERROR((AllowShared<DP, kRowWarps>()));
  LaunchDependentShared(AttentionKernel<DP, kRowWarps>, grid, dim3(kThreads), SharedBytes<DP, kRowWarps>(), stream,
                        cache, batch, params, g, q, out);
  return CheckLaunch("AttentionKernel");
}

// Decode-mode blocks the GPU runs at once (blocks per SM x SMs), per padded head dim; 0 if unknown.
template <int DP>
int64_t DecodeSlots() {
  static const int64_t slots = [] {
    int per_sm = 0;
    if (!AllowShared<DP, 1>().ok() ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, AttentionKernel<DP, 1>, kThreads,
                                                      SharedBytes<DP, 1>()) != cudaSuccess) {
      cudaGetLastError();
      return int64_t{0};
    }
    return int64_t{per_sm} * MultiprocessorCount();
  }();
  return slots;
}

// The share of the GPU's block slots `blocks` keep busy over their waves: blocks / slots below one
// wave, else waves / whole waves.
double WaveUse(int64_t blocks, int64_t slots) {
  const double waves = static_cast<double>(blocks) / static_cast<double>(slots);
  return waves <= 1.0 ? waves : waves / std::ceil(waves);
}

template <int kRowWarps>
Status LaunchFor(int64_t d, const dim3& grid, const PagedKvLayer& cache, const BatchLayout& batch,
                 const AttentionParams& params, const Split& g, const uint16_t* q, uint16_t* out, cudaStream_t stream) {
  if (d <= 64) return Launch<64, kRowWarps>(grid, cache, batch, params, g, q, out, stream);
  if (d <= 128) return Launch<128, kRowWarps>(grid, cache, batch, params, g, q, out, stream);
  return Launch<256, kRowWarps>(grid, cache, batch, params, g, q, out, stream);
}

// The most splits of one block's keys that save time: ceil(sqrt(3 tiles)) for `tiles` key tiles
// (DecodeKeySplits says why).
int64_t LatencySplits(int64_t tiles) {
  return static_cast<int64_t>(std::ceil(std::sqrt(3.0 * static_cast<double>(tiles))));
}

}  // namespace

int64_t AttentionWorkspaceFloats(int64_t head_dim) { return int64_t{kMaxSplitBlocks} * kDecodeRows * (head_dim + 2); }

int64_t AttentionTileTokens(int64_t num_heads, int64_t num_kv_heads, int64_t head_dim) {
  const int64_t group = num_kv_heads > 0 ? num_heads / num_kv_heads : 1;
  const int64_t rows = PrefillRows(static_cast<int>(std::min<int64_t>(head_dim, kMaxHeadDim)));
  return group >= rows ? 1 : rows / group;
}

// Flash-decoding, measured on an H100 (bench/results/model_step_h100_*.json): a grid of less
// than one wave of blocks splits each sequence's keys (up to one split per tile of max_keys)
// into the most splits whose blocks all run at once (one wave; rounding up to just past one
// wave, as it did before, left a second round of a few long blocks: on an H200 at 24 / 32 / 40 /
// 48 sequences over 512 keys 24.4 / 29.7 / 32.5 / 34.9 us a layer against 30.0 / 34.5 / 40.8 /
// 44.5, over 2,048 keys 62.7 / 89.4 / 103.1 / 110.5 against 71.2 / 95.5 / 104.6 / 117.4;
// bench/results/attention_h200_splits.log), and at most about sqrt(3 tiles) of them: a split
// costs its block's start, its partial sums and the combine's reads (~0.3 us on an H200), a key
// tile ~1.3 us on its block, so T tiles take the least time in ~sqrt(4.3 T) splits, and max_keys
// (a power of two) is up to twice the longest sequence's keys (attention_h200_splits_small.log).
// With that cap, one sequence over 1,025 / 2,049 / 4,097 keys 10.5-10.6 / 12.7-12.8 / 17.5-17.7
// us a layer against 11.5-11.6 / 16.8 / 19.0-19.2, two over 1,025 / 2,049 12.5-12.6 / 15.2
// against 16.3-16.5 / 18.7-18.8, four over 513 11.5 against 14.4-14.5, the rest within noise
// (ab_h200_attention_splits_cap.log). Then, over long contexts (splits of 16 tiles or more), any
// grid takes more splits past one wave, the fewest that leave the last wave least idle, when that
// gains 5% of the slots (at 512 keys, 3 splits of a 1.3-wave grid cost more in partial sums and
// the combine than the idle wave did; at 4,096 keys they gain 20%). For grids under one wave that
// came later (H200, bench/results/attention_h200_splits_long.log): 28 / 32 / 36 / 40 sequences
// over 4,096 keys 132 / 145 / 166 / 185 us a layer against one wave's 145 / 152 / 183 / 192, over
// 8,192 keys at 32 / 40 275 / 339 against 320 / 373, over 2,048 at 28-36 2-5% less, elsewhere
// within ~1%; the graph step at 32 sequences over 4,096 / 8,192 positions BF16 11.43-11.57 /
// 16.61-16.70 ms against 11.68-11.74 / 17.37-17.41, DF11 13.57-13.67 / 18.50-18.60 against
// 13.91-13.94 / 19.24-19.34 (ab_h200_attention_splits_long.log). Splits of 8 tiles, which split
// 512 keys in two at batch 64 (2.6 waves) and 256 (4,096 blocks), were slower too: 0.073 / 0.223
// ms a layer against 0.066 / 0.203 (bench/results/attention_h100_split8_ab.log).
int64_t DecodeKeySplits(int64_t blocks, int64_t max_keys, int64_t slots) {
  if (blocks <= 0 || slots <= 0 || max_keys <= kTileKeys) return 1;
  const int64_t tiles = (max_keys + kTileKeys - 1) / kTileKeys;
  int64_t first = 1;
  if (blocks < slots) {
    first = std::max<int64_t>(
        1, std::min<int64_t>({tiles, slots / blocks, LatencySplits(tiles), kMaxSplitBlocks / blocks}));
  }
  int64_t splits = first;
  const int64_t most = std::min<int64_t>(tiles / 16, kMaxSplitBlocks / blocks);
  double best = WaveUse(blocks * first, slots);
  for (int64_t n = first + 1; n <= most; ++n) {
    const double use = WaveUse(blocks * n, slots);
    if (use > best + 0.05) {
      best = use;
      splits = n;
    }
  }
  return splits;
}

// A grid past one wave whose last wave is at most half full (and that DecodeKeySplits leaves
// unsplit): its blocks after the whole waves (the shortest sequences: AttentionTiles) split their
// keys, as many splits as let the last wave's blocks fill the slots, at most ceil(sqrt(3 tiles))
// (as above) and one a tile. The whole waves' blocks start first (lowest block numbers) and write
// their rows; the split blocks run as slots free up and the combine merges only theirs. A last
// wave of a few unsplit blocks had taken most of a whole wave's time: on an H200 (396 slots), 49 /
// 50 / 56 / 64 sequences over 513 keys 34.9 / 46.0 / 53.5 / 55.2 us a layer. With the rule 34.9 /
// 38.8-39.2 / 46.4-46.8 / 50.3-50.4, over 901 keys at 50 / 56 / 64 56.7-56.9 / 66.4-66.5 / 73.2-73.3
// against 70.4-71.3 / 82.9-83.1 / 84.1-84.4, 100 and 104 sequences (8 and 20 blocks past two waves)
// 3-10% less, 72 over 513 keys (2 splits) 55.4-55.7 against 57.0-57.2; each within ~1% of the best
// of 2-7 forced splits (bench/results/attention_h200_tail_splits.log). At 150-256 sequences up to 6%
// less, but 200 over 513 keys (16 blocks past four waves, 7 splits) 1.7% more
// (attention_h200_tail_splits_many_waves.log).
int64_t DecodeTailSplits(int64_t blocks, int64_t max_keys, int64_t slots) {
  if (blocks <= slots || slots <= 0 || max_keys <= kTileKeys || DecodeKeySplits(blocks, max_keys, slots) > 1) return 1;
  const int64_t tail = blocks % slots;
  if (tail == 0) return 1;
  const int64_t tiles = (max_keys + kTileKeys - 1) / kTileKeys;
  return std::max<int64_t>(1, std::min<int64_t>({slots / tail, tiles, LatencySplits(tiles), kMaxSplitBlocks / tail}));
}

// Measured and not kept (bench/results/ab_h100_prepare_attend_{pdl,plain,early}.log, H100): decode
// blocks that prepare their own rows (qk-norm and rope of their q heads into shared memory, the
// last split's block storing the new key and value before its copies), one launch instead of
// PrepareAttention's and this one. Alone up to 2-4 us a layer faster at batch 1-8, but the graph step
// gained nothing at batch 1-8 and lost 0.1-0.3 ms at 64-128 (the prologue on every block's path),
// launched plainly or as a dependent of the q|k|v linear, with or without the first tile's copies
// issued before the prologue.
Status PagedAttention(const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params,
                      const uint16_t* q, uint16_t* out, GpuStream stream) {
  const int64_t d = cache.head_dim;
  if (d > kMaxHeadDim || d % 8 != 0 || d <= 0) {
    return InvalidArgument("PagedAttention: head_dim " + std::to_string(d) +
                           " must be a multiple of 8 and <= " + std::to_string(kMaxHeadDim));
  }
  if (cache.num_kv_heads <= 0 || params.num_heads % cache.num_kv_heads != 0) {
    return InvalidArgument("PagedAttention: num_heads must be a multiple of num_kv_heads");
  }
  if (batch.num_tokens == 0) return Status::Ok();
  const int64_t prefill_rows = PrefillRows(static_cast<int>(d));
  if (batch.tiles == nullptr || batch.num_tiles <= 0 || batch.tile_tokens <= 0 || batch.tile_tokens > prefill_rows) {
    return InvalidArgument("PagedAttention: the batch has no attention tiles of 1.." + std::to_string(prefill_rows) +
                           " tokens (see AttentionTiles)");
  }
  if (batch.num_tiles > 0x7FFFFFFF) return InvalidArgument("PagedAttention: too many tiles");
  // Decode-only batches (one-token tiles) run 16-row blocks whose warps split keys; others 64-row
  // blocks. nh: the largest divisor of the group that fits the block's rows.
  const bool decode = batch.tile_tokens == 1;
  const int64_t group = params.num_heads / cache.num_kv_heads;
  const int64_t max_rows = decode ? kDecodeRows : prefill_rows;
  Split g;
  for (int64_t h = 1; h <= group; ++h) {
    if (group % h == 0 && h * batch.tile_tokens <= max_rows) g.nh = static_cast<int>(h);
  }
  const int64_t chunks = group / g.nh;
  g.heads = cache.num_kv_heads;
  g.chunks = chunks;
  const int64_t blocks = batch.num_tiles * cache.num_kv_heads * chunks;
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(batch.num_tiles), static_cast<unsigned>(cache.num_kv_heads),
                  static_cast<unsigned>(chunks));
  if (!decode) {
    if (WgmmaPrefillApplies(d)) return WgmmaPrefillAttention(cache, batch, params, g.nh, q, out, s);
    return LaunchFor<4>(d, grid, cache, batch, params, g, q, out, s);
  }
  // Flash-decoding: key splits of every block by DecodeKeySplits, else of the last wave's by
  // DecodeTailSplits (the rules and their measurements there).
  const int64_t slots = d <= 64 ? DecodeSlots<64>() : d <= 128 ? DecodeSlots<128>() : DecodeSlots<256>();
  if (batch.split_workspace != nullptr) {
    g.splits = static_cast<int>(DecodeKeySplits(blocks, batch.max_keys, slots));
    const int64_t tail = g.splits > 1 ? 1 : DecodeTailSplits(blocks, batch.max_keys, slots);
    if (tail > 1) {
      g.whole = blocks / slots * slots;
      g.splits = static_cast<int>(tail);
    }
  }
  if (g.splits <= 1) {
    g.splits = 1;
    return LaunchFor<1>(d, grid, cache, batch, params, g, q, out, s);
  }
  g.workspace = batch.split_workspace;
  const dim3 split_grid = g.whole > 0 ? dim3(static_cast<unsigned>(g.whole + (blocks - g.whole) * g.splits))
                                      : dim3(grid.x, grid.y, static_cast<unsigned>(chunks * g.splits));
  DF11_RETURN_IF_ERROR(LaunchFor<1>(d, split_grid, cache, batch, params, g, q, out, s));
  LaunchDependent(CombineKernel, dim3(static_cast<unsigned>(blocks - g.whole)), dim3(kCombineThreads), s, batch, params,
                  g, d, out);
  return CheckLaunch("CombineKernel");
}

}  // namespace df11::cuda
