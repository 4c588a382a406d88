// Internal to the fused tensor-core linears (cuda_tile_gemm.cu: Df11TileGemm; cuda_wgmma_tile.cu:
// Df11WgmmaTileGemm): a warp's decoding of its tiles of fixed lanes (df11_lanes_fixed.h), stage by
// stage, into whatever shared-memory layout the kernel's multiply reads. A CTA owns kCtaTiles
// tiles of kR rows; warp w owns tiles w kTilesPerWarp .. of them. A stage is one fixed-lanes block
// of each tile: kR rows x 1024 / kR columns; entry i of lane l is row i % kR of the tile, columns
// 8 l + 256 (i / kR) of the stage. Included only by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/df11_lanes_cuda.h"
#include "kernels/df11_lanes_fixed_decode.cuh"

namespace df11::fixed_lanes {

// W as fixed lanes (w.code == kFixed3, w.rows_per_tile == kR); sm: W's sign_mantissa bytes
// (element order), 8-byte aligned. Read-only: kernels take it as a parameter.
template <int kR, int kTilesPerWarp, int kCtaTiles>
struct TileDecoder {
  DeviceLanes w;
  const uint8_t* sm;

  static constexpr int kStageCols = 1024 / kR;

  // Per tile of the warp: its rows (0: past the matrix), its escape words and where its next
  // block's escapes and rare bytes start.
  struct Tile {
    int rows;
    bool has_rare;
    uint32_t block_nibble;
    uint64_t rare_base;
    const uint32_t* escapes;  // EscapeQueue's words and limit
    uint32_t limit;
  };
  struct State {
    Tables t;
    Tile tile[kTilesPerWarp];
    int64_t tile0;  // the warp's first tile
    int warp, lane;
  };
  struct Fetched {
    BlockRaw b[kTilesPerWarp];
  };

  // Warp `warp` of CTA `cta` takes tiles cta kCtaTiles + warp kTilesPerWarp ..
  __device__ __forceinline__ State Begin(int64_t cta, int warp, int lane) const {
    return BeginAt(cta * kCtaTiles + warp * kTilesPerWarp, warp, lane);
  }
  // The warp takes tiles tile0 .. tile0 + kTilesPerWarp - 1 (its shared-memory tiles are still
  // warp kTilesPerWarp ..). Every thread of the CTA calls Begin(At): it ends with a CTA barrier, so
  // the CTA's escape table is in (filled first, so that the tiles' loads below overlap the barrier;
  // CtaTables at the end instead made the DF11 linears of a step at 64 tokens 4% slower, ptxas
  // spilling other registers: bench/results/df11_gemv_h100_begin_barrier_ab.log).
  __device__ __forceinline__ State BeginAt(int64_t tile0, int warp, int lane) const {
    State st;
    st.warp = warp;
    st.lane = lane;
    __shared__ uint2 escape_table[16];
    FillEscapeTable(escape_table, w, warp * 32 + lane);
    st.t = MakeTables(w, escape_table);
    st.tile0 = tile0;
    const int64_t tiles = (w.rows + kR - 1) / kR;
#pragma unroll
    for (int p = 0; p < kTilesPerWarp; ++p) {
      Tile& tl = st.tile[p];
      const int64_t index = st.tile0 + p;
      tl.rows = index < tiles ? static_cast<int>(min(static_cast<int64_t>(kR), w.rows - index * kR)) : 0;
      tl.block_nibble = 0;
      const EscapeQueue q = TileQueue(w, w.tile0 + (tl.rows > 0 ? index : 0));
      tl.escapes = q.words;
      tl.limit = q.limit;
      tl.rare_base = q.rare;
      tl.has_rare = tl.rows > 0 && w.tile_rare[w.tile0 + index + 1] != tl.rare_base;
    }
    __syncthreads();  // the escape table is in
    return st;
  }
  // Whether entry i of tile p's block in `stage` lies in the matrix.
  template <bool kChecked>
  __device__ __forceinline__ bool Real(const State& st, int p, int64_t stage, int i) const {
    if constexpr (!kChecked) return true;
    constexpr int kSlots = 4 / kR;  // column slots per block
    const uint32_t c = st.lane + 32 * (kSlots * static_cast<uint32_t>(stage) + i / kR);
    return c < static_cast<uint32_t>(w.cols / 8) && i % kR < st.tile[p].rows;
  }
  // The raw words of the warp's tiles' block `stage` (loads in flight until Decode uses them).
  template <bool kChecked>
  __device__ __forceinline__ Fetched Fetch(const State& st, int64_t stage) const {
    Fetched f;
#pragma unroll
    for (int p = 0; p < kTilesPerWarp; ++p) {
      const Tile& tl = st.tile[p];
      const int64_t index = st.tile0 + p;
      const uint32_t* words =
          w.words + static_cast<uint64_t>(w.tile0 + (tl.rows > 0 ? index : 0)) * w.tile_stride + 96 * stage + st.lane;
      const uint8_t* base = sm + index * kR * w.cols + stage * kStageCols + 8 * st.lane;
      if (!kChecked || tl.rows > 0) {
        f.b[p] = LoadRaw(
            words, [&](int i) { return Real<kChecked>(st, p, stage, i); },
            [&](int i) { return base + (i % kR) * w.cols + 256 * (i / kR); });
      } else {
        f.b[p] = {};
      }
    }
    return f;
  }
  // Decodes the fetched blocks of stage s: store(p, i, v) gets entry i (0..3, in order) of tile p
  // as 8 BF16 words, zeros for entries past the matrix. A block whose warp has no rare bytes (the
  // tile's rare index does not move in StartBlock; most blocks: a Gaussian matrix has a few rare
  // bytes in some tiles) decodes on entries without the rare-byte check where the kernel asks:
  //   kSkipRefills: the entries also skip the escape queue's refill checks when every lane's escapes
  //     of the block are already queued (NeedsRefill), which drops a divergent branch per entry: one
  //     second copy of the entries, without both checks (kSkipRare) or without the refill check only.
  //     Measured on the H100 in Df11TileGemm (bench/results/df11_gemv_h100_skip_refills_ab.log,
  //     three runs each, linears of an 8B step): 3 / 8 / 16 tokens 7.75-7.89 / 7.81-8.00 / 8.62-8.75
  //     ms against 7.99-8.13 / 8.10-8.15 / 8.79-8.86; at 32-64 tokens the second copy of the entries
  //     spilled more (4 rows per tile, 64 tokens: 360 bytes against 248) and lost 2%.
  //   kSkipRare alone: a second copy of the entries that keeps the refill checks.
  // Which kernels ask is measured per token bucket (cuda_tile_gemm.cu, SkipsRareChecks).
  template <bool kChecked, bool kSkipRefills, bool kSkipRare, typename Store>
  __device__ __forceinline__ void Decode(State& st, const Fetched& f, int64_t s, Store store) const {
#pragma unroll
    for (int p = 0; p < kTilesPerWarp; ++p) {
      Tile& tl = st.tile[p];
      if (!kChecked || tl.rows > 0) {  // the same for every lane of the warp
        const BlockCodes b = Codes(f.b[p], [&](int i) { return Real<kChecked>(st, p, s, i); });
        EscapeQueue q;
        q.words = tl.escapes;
        q.limit = tl.limit;
        q.rare = tl.rare_base;
        const uint64_t rare_before = tl.rare_base;
        StartBlock(b, st.lane, tl.has_rare, tl.block_nibble, tl.rare_base, q);
        const bool rare_block = tl.rare_base != rare_before;  // the warp's block holds rare bytes
        auto entries = [&](auto refill, auto rare) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const uint4 v = EntryWords<decltype(refill)::value, decltype(rare)::value>(b, i, q, st.t, w);
            store(p, i, !kChecked || b.ok[i] ? v : make_uint4(0, 0, 0, 0));
          }
        };
        if constexpr (kSkipRefills) {
          if ((kSkipRare && rare_block) || NeedsRefill(b, q)) {
            entries(std::true_type{}, std::true_type{});
          } else {
            entries(std::false_type{}, std::bool_constant<!kSkipRare>{});
          }
        } else if constexpr (kSkipRare) {
          if (rare_block) {
            entries(std::true_type{}, std::true_type{});
          } else {
            entries(std::true_type{}, std::false_type{});
          }
        } else {
          entries(std::true_type{}, std::true_type{});
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) store(p, i, make_uint4(0, 0, 0, 0));
      }
    }
  }
};

}  // namespace df11::fixed_lanes
