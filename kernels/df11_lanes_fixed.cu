// Fixed lanes on CUDA (layout: df11_lanes_fixed.h; entry points: df11_lanes_cuda.h, which calls
// LaunchFixedLanes for LaneCode::kFixed3). One warp per tile, persistent blocks of kWarps warps.
// Per entry (8 elements of one lane) the 3-bit codes are byte-permute selectors into two 8-byte
// tables held in registers, one giving each exponent's high 7 bits (the BF16 word's high byte
// without the sign), one its low bit (bit 7 of the low byte). Escapes (code 7): per block of 4
// entries a warp-wide prefix sum tells each lane where its escape nibbles start; each lane then
// takes its own from a 64-bit queue, the first of an entry through slot 7 of the tables (no loop),
// with no further warp-wide step. The sign_mantissa bytes are
// merged in and the bytes interleaved into 8 BF16 words. The sinks are the Huffman lanes'
// (df11_lanes.cu): the BF16 Gemv's arithmetic, a store, or a compare.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda_gemv_internal.cuh"
#include "kernels/df11_lanes_fixed.cuh"

namespace df11 {
namespace {

constexpr int kWarps = 8;

// Byte tables of the codes and the escape nibbles, split as a BF16 word needs them: the
// exponent's high 7 bits (the high byte without the sign) and its low bit (bit 7 of the low byte).
struct Tables {
  uint32_t hi0, hi1, lo0, lo1;  // byte c: primary[c] >> 1, (primary[c] & 1) << 7
  uint32_t shi[4], slo[4];      // byte v: the same of secondary[v]
};

__device__ __forceinline__ Tables MakeTables(const DeviceLanes& w) {
  Tables t;
  t.hi0 = (w.primary[0] >> 1) & 0x7f7f7f7fu;
  t.hi1 = (w.primary[1] >> 1) & 0x7f7f7f7fu;
  t.lo0 = (w.primary[0] << 7) & 0x80808080u;
  t.lo1 = (w.primary[1] << 7) & 0x80808080u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    t.shi[i] = (w.secondary[i] >> 1) & 0x7f7f7f7fu;
    t.slo[i] = (w.secondary[i] << 7) & 0x80808080u;
  }
  return t;
}

// One lane's escape nibbles: `queue` holds `left` of them, from nibble `next` of its tile's array
// on. Refill loads the next 9 to 16 (a lane rarely has more than 9 in a block).
struct EscapeQueue {
  const uint32_t* words;  // the tile's first escape word
  uint32_t limit;         // words in the array from `words` on (>= 1)
  uint32_t next, left;
  uint64_t queue;
  uint64_t rare;  // index of the lane's next rare byte
};

// Everything below is inlined: a queue passed to a function that is not would live in local memory.
__device__ __forceinline__ void Refill(EscapeQueue& q) {
  const uint32_t word = q.next / 8;
  const uint32_t lo = __ldg(q.words + min(word, q.limit - 1)), hi = __ldg(q.words + min(word + 1, q.limit - 1));
  q.queue = (static_cast<uint64_t>(hi) << 32 | lo) >> (4 * (q.next % 8));
  q.left = 16 - q.next % 8;
}

__device__ __forceinline__ uint32_t PopNibble(EscapeQueue& q) {
  if (q.left == 0) Refill(q);
  const uint32_t v = static_cast<uint32_t>(q.queue) & 15u;
  q.queue >>= 4;
  --q.left;
  ++q.next;
  return v;
}

// Counts the nibbles 15 among the lane's next n escape nibbles (tiles with rare bytes only).
__device__ __forceinline__ uint32_t CountRare(EscapeQueue q, uint32_t n) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < n; ++i) r += PopNibble(q) == 15u;
  return r;
}

// Inclusive sum of v over lanes 0..lane of the warp (every lane calls it).
__device__ __forceinline__ uint32_t WarpInclusiveSum(uint32_t v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const uint32_t u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += u;
  }
  return v;
}

// The lane's next rare byte (a call, so that the common path does not carry it predicated).
__device__ __noinline__ uint32_t RareByte(const uint8_t* rare, uint64_t index, uint64_t count) {
  return rare[min(index, count - 1)];
}

// Exponent bytes (high 7 bits, low bit at bit 7) of escape nibble v; a rare one's (v = 15) from the
// lane's next rare byte when `take`.
__device__ __forceinline__ void EscapeBytes(uint32_t v, bool take, EscapeQueue& q, const Tables& t,
                                            const DeviceLanes& w, uint32_t& h, uint32_t& l) {
  const bool upper = v >= 8;  // (a byte-permute selector's bit 3 would replicate the sign)
  h = __byte_perm(upper ? t.shi[2] : t.shi[0], upper ? t.shi[3] : t.shi[1], v & 7u) & 0xffu;
  l = __byte_perm(upper ? t.slo[2] : t.slo[0], upper ? t.slo[3] : t.slo[1], v & 7u) & 0xffu;
  if (__builtin_expect(v == 15 && take, 0)) {
    const uint32_t e = RareByte(w.rare, q.rare++, w.num_rare);
    h = e >> 1;
    l = (e & 1u) << 7;
  }
}

// One entry: the bytes hi/lo [elements 0..3, 4..7] of its 8 exponents from its selector v (code k
// in nibble k) and escape mask m (bit 4k: code k is 7). The lane's first escape of the entry goes
// in through the tables' slot 7, so every escaped element first gets its exponent without a loop
// or a branch; an entry with more escapes then rewrites those after the first, one by one.
// Divergent only there: no warp-wide operation. The queue holds the entry's first nibble.
__device__ __forceinline__ void DecodeEntry(uint32_t v, uint32_t m, uint32_t (&hi)[2], uint32_t (&lo)[2],
                                            EscapeQueue& q, const Tables& t, const DeviceLanes& w) {
  const bool any = m != 0;
  uint32_t h7, l7;
  EscapeBytes(static_cast<uint32_t>(q.queue) & 15u, any, q, t, w, h7, l7);
  const uint32_t used = any ? 1u : 0u;
  q.queue >>= 4 * used;
  q.left -= used;
  q.next += used;
  const uint32_t th1 = t.hi1 | (any ? h7 : 0u) << 24, tl1 = t.lo1 | (any ? l7 : 0u) << 24;  // slot 7: byte 3
  hi[0] = __byte_perm(t.hi0, th1, v);
  hi[1] = __byte_perm(t.hi0, th1, v >> 16);
  lo[0] = __byte_perm(t.lo0, tl1, v);
  lo[1] = __byte_perm(t.lo0, tl1, v >> 16);
  for (m &= m - 1; m != 0; m &= m - 1) {  // escapes after the first
    uint32_t h, l;
    EscapeBytes(PopNibble(q), true, q, t, w, h, l);
    const uint32_t bit = __ffs(m) - 1;       // 4k
    const uint32_t shift = 2 * (bit & 12u);  // 8 (k % 4)
    const uint32_t keep = ~(0xffu << shift);
    if (bit < 16) {
      hi[0] = (hi[0] & keep) | h << shift;
      lo[0] = (lo[0] & keep) | l << shift;
    } else {
      hi[1] = (hi[1] & keep) | h << shift;
      lo[1] = (lo[1] & keep) | l << shift;
    }
  }
  if (q.left == 0) Refill(q);  // the next entry's first nibble (rare: > 9 escapes in a block)
}

// What a warp needs to walk one tile: its lane's pointers at the tile's first block (advanced
// block by block), the tile's escapes, and its limits.
struct TileWalk {
  const uint32_t* words;  // the lane's word of block 0
  const uint8_t* sm;      // the lane's first column group of the tile's row 0
  const uint4* x;         // the lane's first x chunk (GEMV)
  uint16_t* y;            // the lane's first column group of row 0 in y (decode, compare)
  uint32_t cols;          // elements per row
  uint32_t chunks;        // 8-element groups per row
  uint32_t blocks;
  int rows;  // rows of this tile (<= kRows)
};

// One tile: every block, every entry. kChecked: entries may lie past the matrix's columns or rows
// (a short last tile, cols not a multiple of 256); otherwise every entry is real.
template <int kTokens, int kRows, bool kChecked>
__device__ __forceinline__ void WalkTile(TileWalk tw, EscapeQueue& q, uint64_t rare_base, bool has_rare,
                                         const Tables& t, const DeviceLanes& w, int lane, uint32_t* mismatches,
                                         float (&acc)[kRows][kTokens > 0 ? kTokens : 1]) {
  constexpr int kCols = 4 / kRows;  // column groups per block
  uint32_t block_nibble = 0;        // the block's first escape nibble in the tile
  uint32_t c0 = lane;               // the lane's column group of the block's first column slot
  for (uint32_t j = 0; j < tw.blocks; ++j) {
    const uint32_t a0 = __ldcs(tw.words), a1 = __ldcs(tw.words + 32), a2 = __ldcs(tw.words + 64);
    const uint32_t sel[4] = {a0 & 0x77777777u, a1 & 0x77777777u, a2 & 0x77777777u,
                             ((a0 >> 3) & 0x11111111u) | ((a1 >> 2) & 0x22222222u) | ((a2 >> 1) & 0x44444444u)};
    bool ok[4];
    uint2 s[4];
    uint32_t m[4], n = 0;  // escape masks; the lane's escapes in the block
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // entry 4j + i: row i % kRows, column slot i / kRows
      ok[i] = !kChecked || (c0 + 32 * (i / kRows) < tw.chunks && i % kRows < tw.rows);
      const uint8_t* p = tw.sm + (i % kRows) * tw.cols + 256 * (i / kRows);
      s[i] = ok[i] ? __ldcs(reinterpret_cast<const uint2*>(p)) : make_uint2(0, 0);
      const uint32_t v = sel[i];
      m[i] = ok[i] ? v & (v >> 1) & (v >> 2) & 0x11111111u : 0u;
      n += __popc(m[i]);
    }
    // x as floats, once per block, where that costs few registers (one chunk shared by 4 rows, or
    // one token); else each entry reads its chunk.
    constexpr bool kExpand = kTokens > 0 && kCols * kTokens <= 4;
    float xf[kExpand ? kCols : 1][kExpand ? kTokens : 1][8];
    if constexpr (kExpand) {
#pragma unroll
      for (int u = 0; u < kCols; ++u) {
#pragma unroll
        for (int k = 0; k < kTokens; ++k) {
          const bool in = !kChecked || c0 + 32 * u < tw.chunks;
          cuda::GemvExpand8(in ? __ldg(tw.x + k * tw.chunks + 32 * u) : make_uint4(0, 0, 0, 0), xf[u][k]);
        }
      }
    }
    // The lane's escapes are nibbles [block_nibble + those of the lanes before it, + n) of its tile.
    const uint32_t through = WarpInclusiveSum(n, lane);
    q.next = block_nibble + through - n;
    Refill(q);  // the lane's first 9 to 16 nibbles, loaded by every lane (no divergence)
    block_nibble += __shfl_sync(0xffffffffu, through, 31);
    if (has_rare) {  // and its rare bytes follow those of the lanes before it
      const uint32_t r = CountRare(q, n);
      const uint32_t r_through = WarpInclusiveSum(r, lane);
      q.rare = rare_base + (r_through - r);
      rare_base += __shfl_sync(0xffffffffu, r_through, 31);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t hi[2], lo[2];
      DecodeEntry(sel[i], m[i], hi, lo, q, t, w);
      if (!ok[i]) continue;
      const uint32_t h0 = hi[0] | (s[i].x & 0x80808080u), l0 = lo[0] | (s[i].x & 0x7f7f7f7fu);
      const uint32_t h1 = hi[1] | (s[i].y & 0x80808080u), l1 = lo[1] | (s[i].y & 0x7f7f7f7fu);
      const uint4 wv = make_uint4(__byte_perm(l0, h0, 0x5140), __byte_perm(l0, h0, 0x7362), __byte_perm(l1, h1, 0x5140),
                                  __byte_perm(l1, h1, 0x7362));
      if constexpr (kTokens > 0) {
#pragma unroll
        for (int k = 0; k < kTokens; ++k) {
          if constexpr (kExpand) {
            cuda::GemvDot8(wv, xf[i / kRows][k], acc[i % kRows][k]);
          } else {
            cuda::GemvDot8(wv, __ldg(tw.x + k * tw.chunks + 32 * (i / kRows)), acc[i % kRows][k]);
          }
        }
      } else {
        uint16_t* p = tw.y + (i % kRows) * tw.cols + 256 * (i / kRows);
        if constexpr (kTokens == 0) {
          *reinterpret_cast<uint4*>(p) = wv;
        } else {
          const uint4 want = *reinterpret_cast<const uint4*>(p);
          if (want.x != wv.x || want.y != wv.y || want.z != wv.z || want.w != wv.w) atomicAdd(mismatches, 1u);
        }
      }
    }
    tw.words += 96;
    tw.sm += 256 * kCols;
    tw.x += 32 * kCols;
    if constexpr (kTokens <= 0) tw.y += 256 * kCols;
    c0 += 32 * kCols;
  }
}

// kTokens > 0: y = x · W^T (+ bias) (+ y). kTokens == 0: y = W. kTokens == -1: *mismatches += the
// 8-element groups of W that differ from y's. kRows = w.rows_per_tile. Entry i of block j is row
// i % kRows of the tile and column group lane + 32 (kCols j + i / kRows), kCols = 4 / kRows.
template <int kTokens, int kRows>
__global__ void __launch_bounds__(kWarps * 32)
    FixedLanesKernel(const uint16_t* __restrict__ x, DeviceLanes w, const uint8_t* __restrict__ sm,
                     const float* __restrict__ bias, bool accumulate, uint16_t* __restrict__ y,
                     uint32_t* __restrict__ mismatches) {
  cuda::AllowDependents();
  const Tables t = MakeTables(w);
  cuda::WaitPrevious();  // x and y belong to the stream's earlier kernels
  const int lane = threadIdx.x % 32;
  const uint32_t chunks = static_cast<uint32_t>(w.cols / 8), per_row = (chunks + 31) / 32;
  const uint32_t blocks = (kRows * per_row + 3) / 4;
  const int64_t tiles = (w.rows + kRows - 1) / kRows;
  const bool columns_full = chunks % 32 == 0 && (kRows * per_row) % 4 == 0;  // no padding entries
  for (int64_t tile = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; tile < tiles;
       tile += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t first = tile * kRows, at = w.tile0 + tile;
    TileWalk tw;
    tw.words = w.words + static_cast<uint64_t>(at) * w.tile_stride + lane;
    tw.sm = sm + first * w.cols + 8 * lane;
    tw.x = reinterpret_cast<const uint4*>(x) + lane;
    tw.y = kTokens <= 0 ? y + first * w.cols + 8 * lane : nullptr;
    tw.cols = static_cast<uint32_t>(w.cols);
    tw.chunks = chunks;
    tw.blocks = blocks;
    tw.rows = static_cast<int>(min(static_cast<int64_t>(kRows), w.rows - first));
    EscapeQueue q;
    const uint32_t escape_word = min(w.tile_escapes[at], static_cast<uint32_t>(w.num_escape_words - 1));
    q.words = w.escapes + escape_word;
    q.limit = static_cast<uint32_t>(w.num_escape_words) - escape_word;
    const uint64_t rare_base = w.tile_rare[at];  // the tile's first rare byte
    const bool has_rare = w.tile_rare[at + 1] != rare_base;
    q.rare = rare_base;
    float acc[kRows][kTokens > 0 ? kTokens : 1];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int k = 0; k < (kTokens > 0 ? kTokens : 1); ++k) acc[r][k] = 0.0f;
    }
    if (columns_full && tw.rows == kRows) {
      WalkTile<kTokens, kRows, false>(tw, q, rare_base, has_rare, t, w, lane, mismatches, acc);
    } else {
      WalkTile<kTokens, kRows, true>(tw, q, rare_base, has_rare, t, w, lane, mismatches, acc);
    }
    if constexpr (kTokens > 0) cuda::GemvStore<kRows, kTokens>(acc, first, w.rows, bias, accumulate, y);
  }
}

template <int kTokens, int kRows>
Status Launch(const uint16_t* x, const DeviceLanes& w, const uint8_t* sm, const float* bias, bool accumulate,
              uint16_t* y, uint32_t* mismatches, GpuStream stream) {
  static thread_local cuda::PersistentFit fit;  // per kernel instance
  return cuda::LaunchPersistent(FixedLanesKernel<kTokens, kRows>, (w.num_tiles() + kWarps - 1) / kWarps, kWarps * 32,
                                fit, reinterpret_cast<cudaStream_t>(stream), "FixedLanesKernel", x, w, sm, bias,
                                accumulate, y, mismatches);
}

}  // namespace

template <int kTokens>
Status LaunchFixedLanes(const uint16_t* x, const DeviceLanes& w, const uint8_t* sm, const float* bias, bool accumulate,
                        uint16_t* y, uint32_t* mismatches, GpuStream stream) {
  switch (w.rows_per_tile) {
    case 4:
      return Launch<kTokens, 4>(x, w, sm, bias, accumulate, y, mismatches, stream);
    case 2:
      return Launch<kTokens, 2>(x, w, sm, bias, accumulate, y, mismatches, stream);
    default:
      return Launch<kTokens, 1>(x, w, sm, bias, accumulate, y, mismatches, stream);
  }
}

#define DF11_FIXED_LANES(T)                                                                                    \
  template Status LaunchFixedLanes<T>(const uint16_t*, const DeviceLanes&, const uint8_t*, const float*, bool, \
                                      uint16_t*, uint32_t*, GpuStream);
DF11_FIXED_LANES(-1)
DF11_FIXED_LANES(0)
DF11_FIXED_LANES(1)
DF11_FIXED_LANES(2)
DF11_FIXED_LANES(3)
DF11_FIXED_LANES(4)
#undef DF11_FIXED_LANES

}  // namespace df11
