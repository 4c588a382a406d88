// Fixed lanes on CUDA (layout: df11_lanes_fixed.h; entry points: df11_lanes_cuda.h, which calls
// LaunchFixedLanes for LaneCode::kFixed3). One warp per tile, persistent blocks of kWarps warps,
// decoding block by block (df11_lanes_fixed_decode.cuh) into one of three sinks, those of the
// Huffman lanes (df11_lanes.cu): the BF16 Gemv's arithmetic, a store, or a compare.
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda_gemv_internal.cuh"
#include "kernels/df11_lanes_fixed.cuh"
#include "kernels/df11_lanes_fixed_decode.cuh"

namespace df11 {
namespace {

using fixed_lanes::BlockCodes;
using fixed_lanes::EscapeQueue;
using fixed_lanes::Tables;

constexpr int kWarps = 8;

// Where a kernel lets the stream's next kernel start (cuda::AllowDependents) and where it waits for
// the previous one (cuda::WaitPrevious).
enum class Order {
  kEarly,        // the next may start at once; waits before touching x or y (GEMV, compare)
  kWaitFirst,    // a decode: waits, then lets the next start, so that a decode launched kAfterDecode
                 // behind it starts only once everything before this one is done
  kAfterDecode,  // a decode behind a kWaitFirst or kAfterDecode decode of other rows (LaunchLanesDecode's
                 // after_fixed_decode): needs nothing that decode writes, so it starts at once and the
                 // two overlap (the first one's last tiles, the second's first); waits at its end, so
                 // that its completion still implies the previous decode's
};

// What a warp needs to walk one tile: its lane's pointers at the tile's first block (advanced
// block by block), the tile's escapes, and its limits.
struct TileWalk {
  const uint32_t* words;  // the lane's word of block 0
  const uint8_t* sm;      // the lane's first column group of the tile's row 0
  const uint4* x;         // the lane's first x chunk (GEMV)
  uint16_t* y;            // the lane's first column group of row 0 in y (decode, compare)
  uint32_t cols;          // elements per row
  uint32_t chunks;        // 8-element groups per row
  uint32_t blocks;        // blocks to walk
  int rows;               // rows of this tile (<= kRows)
  uint32_t c0;            // the lane's column group of the first block's first column slot
  uint32_t nibble;        // the first block's first escape nibble in the tile
};

// One tile: every block, every entry. kChecked: entries may lie past the matrix's columns or rows
// (a short last tile, cols not a multiple of 256); otherwise every entry is real.
template <int kTokens, int kRows, bool kChecked>
__device__ __forceinline__ void WalkTile(TileWalk tw, EscapeQueue& q, uint64_t rare_base, bool has_rare,
                                         const Tables& t, const DeviceLanes& w, int lane, uint32_t* mismatches,
                                         float (&acc)[kRows][kTokens > 0 ? kTokens : 1]) {
  constexpr int kCols = 4 / kRows;    // column groups per block
  uint32_t block_nibble = tw.nibble;  // the block's first escape nibble in the tile
  uint32_t c0 = tw.c0;                // the lane's column group of the block's first column slot
  for (uint32_t j = 0; j < tw.blocks; ++j) {
    // entry 4j + i: row i % kRows, column slot i / kRows
    const BlockCodes b = fixed_lanes::LoadBlock(
        tw.words, [&](int i) { return !kChecked || (c0 + 32 * (i / kRows) < tw.chunks && i % kRows < tw.rows); },
        [&](int i) { return tw.sm + (i % kRows) * tw.cols + 256 * (i / kRows); });
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
    fixed_lanes::StartBlock(b, lane, has_rare, block_nibble, rare_base, q);
    // fast: every lane's escapes of the block already queued and no rare bytes in the tile, so
    // the entries decode without the queue's refill checks and the rare-byte check. Measured on
    // the H100 (bench/results/ab_h100_gemv_fast_blocks.log, three runs each, alternating): DF11
    // step at batch 1 7.01-7.05 ms against 7.21-7.35, batch 2 7.54-7.64 against 7.74-7.88. The
    // same in the tile decoder (Df11TileGemm, 3-16 tokens, which skipped the refill checks
    // already) was slower: the linears of a step at 8 tokens 7.90-7.99 ms against 7.73-7.76.
    auto entries = [&](auto fast) {
      constexpr bool kSlow = !decltype(fast)::value;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint4 wv = fixed_lanes::EntryWords<kSlow, kSlow>(b, i, q, t, w);
        if (!b.ok[i]) continue;
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
    };
    if (has_rare || fixed_lanes::NeedsRefill(b, q)) {  // the same for every lane of the warp
      entries(std::false_type{});
    } else {
      entries(std::true_type{});
    }
    tw.words += 96;
    tw.sm += 256 * kCols;
    tw.x += 32 * kCols;
    if constexpr (kTokens <= 0) tw.y += 256 * kCols;
    c0 += 32 * kCols;
  }
}

// The body of FixedLanesKernel and FixedLanesKernelCapped. kTokens > 0: y = x · W^T (+ bias) (+ y).
// kTokens == 0: y = W. kTokens == -1: *mismatches += the 8-element groups of W that differ from
// y's. kRows = w.rows_per_tile. Entry i of block j is row i % kRows of the tile and column group
// lane + 32 (kCols j + i / kRows), kCols = 4 / kRows.
template <int kTokens, int kRows, Order kOrder = Order::kEarly>
__device__ __forceinline__ void FixedLanes(const uint16_t* __restrict__ x, const DeviceLanes& w,
                                           const uint8_t* __restrict__ sm, const float* __restrict__ bias,
                                           bool accumulate, uint16_t* __restrict__ y,
                                           uint32_t* __restrict__ mismatches) {
  static_assert(kOrder == Order::kEarly || kTokens == 0, "only a decode orders itself otherwise");
  if constexpr (kOrder != Order::kWaitFirst) cuda::AllowDependents();
  __shared__ uint2 escape_table[16];
  const Tables t = fixed_lanes::CtaTables(escape_table, w);
  if constexpr (kOrder != Order::kAfterDecode) cuda::WaitPrevious();  // x and y belong to the stream's earlier kernels
  if constexpr (kOrder == Order::kWaitFirst) cuda::AllowDependents();
  const int lane = threadIdx.x % 32;
  const uint32_t chunks = static_cast<uint32_t>(w.cols / 8), per_row = (chunks + 31) / 32;
  const uint32_t blocks = (kRows * per_row + 3) / 4;
  const int64_t tiles = (w.rows + kRows - 1) / kRows;
  const bool columns_full = chunks % 32 == 0 && (kRows * per_row) % 4 == 0;  // no padding entries
  // The 1-token GEMV of a matrix whose sums split (w.split_block, GemvSplitChunk): task 2 t + h is
  // half h of tile t, blocks [0, split_block) or [split_block, blocks). Warps 2 p and 2 p + 1 of a
  // block take the two halves of one tile in every round (kWarps and the grid's stride are even);
  // the second hands its lanes' sums to the first through shared memory, which adds them to its
  // own (first half + second half, GemvSplitChunk's order) before the butterfly.
  constexpr bool kCanSplit = kTokens == 1 && kRows == 4;  // the layout GemvSplitChunk names
  const bool split = kCanSplit && w.split_block != 0;
  const int warp = threadIdx.x / 32, half = split ? warp % 2 : 0;
  __shared__ float handed[kCanSplit ? kWarps / 2 : 1][2][kRows][32];  // [pair][round % 2][row][lane]
  const int64_t tasks = split ? 2 * tiles : tiles;
  int round = 0;
  for (int64_t task = static_cast<int64_t>(blockIdx.x) * kWarps + warp; task < tasks;
       task += static_cast<int64_t>(gridDim.x) * kWarps, ++round) {
    const int64_t tile = split ? task / 2 : task;
    const int64_t first = tile * kRows, at = w.tile0 + tile;
    const uint32_t skip = half != 0 ? w.split_block : 0;  // blocks before this task's first
    TileWalk tw;
    tw.words = w.words + static_cast<uint64_t>(at) * w.tile_stride + 96 * skip + lane;
    tw.sm = sm + first * w.cols + 256 * (4 / kRows) * skip + 8 * lane;
    tw.x = reinterpret_cast<const uint4*>(x) + 32 * (4 / kRows) * skip + lane;
    tw.y = kTokens <= 0 ? y + first * w.cols + 8 * lane : nullptr;
    tw.cols = static_cast<uint32_t>(w.cols);
    tw.chunks = chunks;
    tw.blocks = !split ? blocks : half == 0 ? w.split_block : blocks - w.split_block;
    tw.rows = static_cast<int>(min(static_cast<int64_t>(kRows), w.rows - first));
    tw.c0 = lane + 32 * (4 / kRows) * skip;
    tw.nibble = half != 0 ? w.tile_split[2 * at] : 0;
    EscapeQueue q = fixed_lanes::TileQueue(w, at);
    const bool has_rare = w.tile_rare[at + 1] != q.rare;                       // the whole tile's
    const uint64_t rare_base = half != 0 ? w.tile_split[2 * at + 1] : q.rare;  // the task's first rare byte
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
    if constexpr (kCanSplit) {
      if (split) {
        float(&slot)[kRows][32] = handed[warp / 2][round % 2];
        if (half != 0) {
#pragma unroll
          for (int r = 0; r < kRows; ++r) slot[r][lane] = acc[r][0];
        }
        // The pair's barrier (ids 1..kWarps / 2, immediates so that the CTA holds 5 barriers, not
        // 16; 0 is __syncthreads'). A slot is written again two rounds on, after the next round's
        // barrier, which its reader passes only once it has read.
        static_assert(kWarps == 8, "four pairs");
        switch (warp / 2) {
          case 0:
            asm volatile("bar.sync 1, 64;" ::: "memory");
            break;
          case 1:
            asm volatile("bar.sync 2, 64;" ::: "memory");
            break;
          case 2:
            asm volatile("bar.sync 3, 64;" ::: "memory");
            break;
          default:
            asm volatile("bar.sync 4, 64;" ::: "memory");
            break;
        }
        if (half != 0) continue;
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][0] += slot[r][lane];
      }
    }
    if constexpr (kTokens > 0) cuda::GemvStore<kRows, kTokens>(acc, first, w.rows, bias, accumulate, y);
  }
  if constexpr (kOrder == Order::kAfterDecode) cuda::WaitPrevious();
}

template <int kTokens, int kRows>
__global__ void __launch_bounds__(kWarps * 32)
    FixedLanesKernel(const uint16_t* __restrict__ x, DeviceLanes w, const uint8_t* __restrict__ sm,
                     const float* __restrict__ bias, bool accumulate, uint16_t* __restrict__ y,
                     uint32_t* __restrict__ mismatches) {
  FixedLanes<kTokens, kRows>(x, w, sm, bias, accumulate, y, mismatches);
}

// y = W (FixedLanes<0, kRows, kOrder>; LaunchFixedLanesDecode).
template <int kRows, Order kOrder>
__global__ void __launch_bounds__(kWarps * 32)
    FixedLanesDecodeKernel(DeviceLanes w, const uint8_t* __restrict__ sm, uint16_t* __restrict__ y) {
  FixedLanes<0, kRows, kOrder>(nullptr, w, sm, nullptr, false, y, nullptr);
}

// The same with registers capped so that kMinBlocks blocks fit an SM (see Launch).
template <int kTokens, int kRows, int kMinBlocks>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    FixedLanesKernelCapped(const uint16_t* __restrict__ x, DeviceLanes w, const uint8_t* __restrict__ sm,
                           const float* __restrict__ bias, bool accumulate, uint16_t* __restrict__ y,
                           uint32_t* __restrict__ mismatches) {
  FixedLanes<kTokens, kRows>(x, w, sm, bias, accumulate, y, mismatches);
}

// f.template operator()<kRows>() for kRows = w.rows_per_tile (1, 2 or 4).
template <typename F>
Status ForRowsPerTile(const DeviceLanes& w, F&& f) {
  switch (w.rows_per_tile) {
    case 4:
      return f.template operator()<4>();
    case 2:
      return f.template operator()<2>();
    default:
      return f.template operator()<1>();
  }
}

// The warps' tasks of FixedLanes<kTokens, kRows>: the tiles, or their halves where the 1-token GEMV
// splits (CheckOperands: a split state comes with 4 rows per tile).
int64_t Tasks(const DeviceLanes& w, int tokens) {
  return tokens == 1 && w.rows_per_tile == 4 && w.split_block != 0 ? 2 * w.num_tiles() : w.num_tiles();
}

// `what` names the kernel in errors.
template <typename Kernel>
Status LaunchGrid(Kernel kernel, const char* what, cuda::PersistentFit& fit, const uint16_t* x, const DeviceLanes& w,
                  const uint8_t* sm, const float* bias, bool accumulate, uint16_t* y, uint32_t* mismatches,
                  GpuStream stream, int64_t tasks) {
  return cuda::LaunchPersistent(kernel, (tasks + kWarps - 1) / kWarps, kWarps * 32, fit,
                                reinterpret_cast<cudaStream_t>(stream), what, x, w, sm, bias, accumulate, y,
                                mismatches);
}

// The 1-token, 1-row instance has 80 registers (3 blocks of 8 warps an SM); capped at 64 (4 blocks,
// ptxas spills 32 bytes) it runs where that takes the tiles in fewer rounds of one tile a warp:
// o_proj and down_proj of the 8B shape (4,096 tiles) took two rounds of 3,168 warps, the second 29%
// full, and take one of 4,224. Measured on the H100 against the uncapped kernel alone
// (bench/results/df11_gemv_h100_gemv_capped_ab.log, ab_h100_gemv_capped.log, two runs each,
// alternating): down_proj 0.0405-0.0408 ms against 0.0506-0.0514 (BF16 Gemv 0.043-0.045), o_proj
// 0.0195-0.0207 against 0.0220-0.0224, the DF11 step at batch 1 6.05-6.11 ms against 6.33-6.44.
// Not kept (ab_h100_even_grid.log): every persistent lane grid spread evenly over its rounds (396
// blocks instead of 528 for 6,144 tiles): the decoders no faster, gate|up at 1 token 3% slower.
constexpr int kMoreBlocks = 4;

template <int kTokens, int kRows>
Status Launch(const uint16_t* x, const DeviceLanes& w, const uint8_t* sm, const float* bias, bool accumulate,
              uint16_t* y, uint32_t* mismatches, GpuStream stream) {
  static thread_local cuda::PersistentFit fit;  // per kernel instance
  if constexpr (kTokens == 1 && kRows == 1) {
    static thread_local cuda::PersistentFit more;
    constexpr auto capped = FixedLanesKernelCapped<1, 1, kMoreBlocks>;
    DF11_RETURN_IF_ERROR(cuda::FitPersistent(FixedLanesKernel<1, 1>, kWarps * 32, fit, "FixedLanesKernel"));
    DF11_RETURN_IF_ERROR(cuda::FitPersistent(capped, kWarps * 32, more, "FixedLanesKernelCapped"));
    const int64_t tasks = Tasks(w, kTokens);
    auto rounds = [&](const cuda::PersistentFit& f) {
      return (tasks + int64_t{f.max_blocks} * kWarps - 1) / (int64_t{f.max_blocks} * kWarps);
    };
    if (rounds(more) < rounds(fit)) {
      return LaunchGrid(capped, "FixedLanesKernelCapped", more, x, w, sm, bias, accumulate, y, mismatches, stream,
                        tasks);
    }
  }
  return LaunchGrid(FixedLanesKernel<kTokens, kRows>, "FixedLanesKernel", fit, x, w, sm, bias, accumulate, y,
                    mismatches, stream, Tasks(w, kTokens));
}

}  // namespace

template <int kTokens>
Status LaunchFixedLanes(const uint16_t* x, const DeviceLanes& w, const uint8_t* sm, const float* bias, bool accumulate,
                        uint16_t* y, uint32_t* mismatches, GpuStream stream) {
  return ForRowsPerTile(
      w, [&]<int kRows>() { return Launch<kTokens, kRows>(x, w, sm, bias, accumulate, y, mismatches, stream); });
}

Status LaunchFixedLanesDecode(const DeviceLanes& w, const uint8_t* sm, uint16_t* y, bool after_fixed_decode,
                              GpuStream stream) {
  return ForRowsPerTile(w, [&]<int kRows>() {
    auto launch = [&](auto kernel, cuda::PersistentFit& fit) {
      return cuda::LaunchPersistent(kernel, (w.num_tiles() + kWarps - 1) / kWarps, kWarps * 32, fit,
                                    reinterpret_cast<cudaStream_t>(stream), "FixedLanesDecodeKernel", w, sm, y);
    };
    static thread_local cuda::PersistentFit first, after;  // per kernel instance
    return after_fixed_decode ? launch(FixedLanesDecodeKernel<kRows, Order::kAfterDecode>, after)
                              : launch(FixedLanesDecodeKernel<kRows, Order::kWaitFirst>, first);
  });
}

#define DF11_FIXED_LANES(T)                                                                                    \
  template Status LaunchFixedLanes<T>(const uint16_t*, const DeviceLanes&, const uint8_t*, const float*, bool, \
                                      uint16_t*, uint32_t*, GpuStream);
DF11_FIXED_LANES(-1)
DF11_FIXED_LANES(1)
DF11_FIXED_LANES(2)
DF11_FIXED_LANES(3)
DF11_FIXED_LANES(4)
#undef DF11_FIXED_LANES

}  // namespace df11
