// Fixed lanes (LaneCode::kFixed3): lane streams whose exponents have a 3-bit code, so that a warp
// decodes 8 of them with two byte permutes and no chain of dependent lookups (the fused DF11 GEMV,
// df11_lanes_cuda.h). Lossless for any matrix; built at load from the matrix's BF16 words.
//
// Codes. The matrix's 7 most frequent exponents get codes 0..6 (`primary`, most frequent first);
// code 7 is an escape: the element's exponent is the next escape nibble, 0..14 naming one of the
// next 15 exponents (`secondary`), 15 saying "the next rare byte holds it".
//
// Order. Tiles of rows_per_tile rows (1, 2 or 4) as in df11_lanes.h. In a tile, lane l's entries
// are its 8-element groups in stream order: entry g is column group c = l + 32 * (g / rows_per_tile)
// of row g % rows_per_tile of the tile. Every lane of a tile has `entries` = rows_per_tile *
// ceil(cols / 256) entries rounded up to a multiple of 4 (entries past the lane's groups or past
// the matrix's rows are padding: code 0, no escapes).
//
// Code words. Entries come in blocks of 4: block j of lane l of tile t is 3 words,
// words[t * tile_stride + (3 j + i) * 32 + l] for i = 0, 1, 2 (a warp reads 128 contiguous bytes).
// Entry 4 j + i (i < 3) keeps the code of its element k in bits 0..2 of nibble k of word i; entry
// 4 j + 3 keeps bit b of its element k's code in bit 3 of nibble k of word b.
//
// Escapes. A tile's escape nibbles start at word tile_escapes[t] of `escapes` (8 nibbles a word,
// low first; the last word of a tile is zero padded), in the order the warp meets them: block by
// block, and in a block lane by lane, each lane's escaped elements in (entry, element) order.
// Rare bytes follow the same order, one per nibble 15, from tile_rare[t].
//
// Size per element: 3 bits + the sign_mantissa byte + 4 bits per escape (~2% of a Gaussian
// matrix's elements) + 8 bytes per tile: ~1.028x the published unit's bytes.
//
// Split state. Where the 1-token GEMV splits each row's sum (GemvSplitChunk: a matrix of 4 rows
// per tile), tile_split holds, per tile, where its block split_block starts: the escape nibble
// (counted from the tile's first) and the rare byte's index, 8 more bytes a tile. The fused GEMV
// walks the two halves of a tile on two warps; the second starts from this state.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "kernels/base/status.h"
#include "kernels/df11_lanes.h"

namespace df11 {

// Rows per tile for fixed lanes of [rows, cols]: the Huffman lanes' choice (LaneRowsPerTile) when
// it needs no padding entries (ceil(cols / 256) a multiple of 4 for one row), else 2 when that
// needs none, else 4 (which never does).
int FixedRowsPerTile(int64_t rows, int64_t cols);

// Where the 1-token GEMV of W [rows, cols] splits each row's sum, in 8-column chunks (a multiple of
// 32), or 0 for one sum. The BF16 Gemv (cuda_gemm.h) and the fused DF11 GEMV both follow it: lane
// l sums its chunks below the split, then those from it, and adds the two before the butterfly.
// Nonzero for the matrices of 4 rows per tile (FixedRowsPerTile) below 65,536 rows (gate|up, not
// lm_head) with at least two blocks a tile: their 1-token fused GEMV gives each half of a tile to
// its own warp, so that the tiles' work goes out to the warps in finer pieces
// (docs/df11-lanes.md, "The 1-token GEMV on an H200").
int64_t GemvSplitChunk(int64_t rows, int64_t cols);

inline constexpr int kFixedEscape = 7;       // the 3-bit code that sends to an escape nibble
inline constexpr int kFixedRareNibble = 15;  // the escape nibble that sends to a rare byte

// The codes BuildFixedLaneStreams gives W's exponents from their counts: per exponent its 3-bit
// code (7: an escape) and escape nibble (0..14, 15: a rare byte), and LaneStreams' primary and
// secondary tables.
struct FixedCodes {
  std::array<uint8_t, 256> code{}, nibble{};
  std::array<uint8_t, 8> primary{};
  std::array<uint8_t, 16> secondary{};
};
FixedCodes FixedCodesOf(const std::array<uint64_t, 256>& histogram);

// The shape of W [rows, cols]'s fixed lanes: tiles, entries per lane per tile (a multiple of 4),
// words per tile, and the GEMV's split block (0: no split state).
struct FixedGeometry {
  int64_t tiles = 0, entries = 0;
  uint64_t tile_stride = 0;
  uint32_t split_block = 0;
};
FixedGeometry FixedGeometryOf(int64_t rows, int64_t cols, int rows_per_tile);

// The tiles' offsets from their counts (escapes[t], rare[t]: tile t's escape nibbles and rare
// bytes), as both builders lay them out: out.tile_escapes in escape words (each tile's nibbles from
// a word of its own) and out.tile_rare, tiles + 1 entries each, the last the totals.
// INVALID_ARGUMENT (naming `what`) past 2^32 entries.
Status FillFixedTileOffsets(std::span<const uint64_t> escapes, std::span<const uint64_t> rare, LaneStreams& out,
                            const std::string& what);

// An upper bound on LaneStreams::bytes() of W's fixed lanes, from W's exponent counts alone.
uint64_t FixedLanesBytesBound(const std::array<uint64_t, 256>& histogram, int64_t rows, int64_t cols,
                              int rows_per_tile);

// Fixed lanes of W [rows, cols] whose BF16 words are `w` (row-major) and exponent counts `histogram`
// (ExponentHistogram(w), df11_codec.h). INVALID_ARGUMENT (naming `what`) for cols % 8 != 0, rows_per_tile not 1,
// 2 or 4, a size mismatch, a histogram that misses an exponent of w, or arrays over 2^32 entries.
StatusOr<LaneStreams> BuildFixedLaneStreams(std::span<const uint16_t> w, const std::array<uint64_t, 256>& histogram,
                                            int64_t rows, int64_t cols, int rows_per_tile, const std::string& what);

// Reference decoder of fixed lanes (DecodeLanesCpu calls it): W as BF16 into out. DATA_LOSS, naming
// `what`, when escapes run past their arrays.
Status DecodeFixedLanesCpu(const LaneStreams& lanes, std::span<const uint8_t> sign_mantissa, uint16_t* out,
                           const std::string& what);

}  // namespace df11
