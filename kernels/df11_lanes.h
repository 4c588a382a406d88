// Lane streams: a GPU-friendly, lossless re-arrangement of the DF11 exponent codes of one matrix
// W [rows, cols] (cols % 8 == 0), built at load time so that a warp can decode a tile of rows
// straight into registers and multiply it (the fused DF11 GEMV, df11_lanes_cuda.h).
//
// Each element keeps its own Huffman code from the unit (same LUTs, same bits per code); only the
// order of the codes changes. Rows are grouped in tiles of rows_per_tile (1 or 4; the last tile
// may be shorter). In a tile, lane l (0..31) of the warp owns the 8-element column groups
// c = l, l + 32, l + 64, ... (c < cols / 8), the same groups the BF16 Gemv gives lane l, and its
// stream holds, for each of its c in order, then each row r of the tile in order, the 8 codes of
// W[r, 8c .. 8c + 7]. Lane streams are MSB-first bit strings cut into u32 words; word j of lane l
// of tile t is words[tile_words[t] + 32 * j + l] (coalesced: a warp reads 128 contiguous bytes),
// and a tile is as long as its longest lane (shorter lanes are zero padded). Two zero rows of 32
// words end the array so that a decoder may read two words ahead of any lane. Sign and mantissa
// stay in the unit's sign_mantissa array, in element order.
//
// Size: per lane, the codes' bits rounded up to words, times 32 lanes, plus the padding to the
// longest lane and 4 bytes per tile; the unit's gaps and output_positions are not needed.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace df11 {

inline constexpr int kLanes = 32;

// One symbol's code, right-aligned (bits) with its length (0: the symbol has no code).
struct SymbolCode {
  uint32_t bits = 0;
  int length = 0;
};
// The code of every symbol reachable through a validated unit's LUTs (ValidateUnit), read back
// from the tables (the smallest, where several decode to one symbol). INVALID_ARGUMENT for tables
// a validated unit cannot have (a pointer to a missing table, a length that ends elsewhere).
StatusOr<std::array<SymbolCode, 256>> CodesFromLuts(std::span<const uint8_t> luts);

// How a lane stream codes its exponents.
//   kHuffman: each element's own code from the unit (above).
//   kFixed3:  a 3-bit code per element (df11_lanes_fixed.h): no lookup chain, ~1.03x the unit's bytes.
enum class LaneCode { kHuffman, kFixed3 };

struct LaneStreams {
  LaneCode code = LaneCode::kHuffman;
  int64_t rows = 0, cols = 0;
  int rows_per_tile = 1;
  // kHuffman: [tiles + 1] word offset of each tile (multiples of 32), then the end. kFixed3: empty.
  std::vector<uint32_t> tile_words;
  std::vector<uint32_t> words;  // kHuffman: [tile_words.back() + 64]; kFixed3: [tiles * tile_stride]
  // kFixed3 only (df11_lanes_fixed.h).
  uint64_t tile_stride = 0;            // words per tile: 96 per block of 4 entries
  std::vector<uint32_t> escapes;       // escape nibbles, 8 per word, low nibble first; then 64 zero words
  std::vector<uint32_t> tile_escapes;  // [tiles + 1] word index of each tile's first escape, then the end
  std::vector<uint8_t> rare;           // full exponents of the escapes whose nibble is 15; then one zero byte
  std::vector<uint32_t> tile_rare;     // [tiles + 1] index of each tile's first rare byte, then the end
  // [tiles][2]: where each tile's block split_block starts, as its escape nibble (from the tile's
  // first) and its rare byte's index; empty when the matrix's GEMV does not split (GemvSplitChunk).
  std::vector<uint32_t> tile_split;
  uint32_t split_block = 0;             // 4 rows per tile: the block whose first chunk is GemvSplitChunk's; 0: no split
  std::array<uint8_t, 8> primary{};     // exponent of codes 0..6; byte 7 (the escape) is 0
  std::array<uint8_t, 16> secondary{};  // exponent of escape nibbles 0..14; byte 15 is 0

  int64_t num_tiles() const { return (rows + rows_per_tile - 1) / rows_per_tile; }
  uint64_t bytes() const {
    return 4 * (tile_words.size() + words.size() + escapes.size() + tile_escapes.size() + tile_rare.size() +
                tile_split.size()) +
           rare.size() + (code == LaneCode::kFixed3 ? primary.size() + secondary.size() : 0);
  }
};

// Rows per tile for a matrix of `rows` rows: 4 from 8,192 rows on (as the BF16 Gemv groups them),
// else 1. The choice changes only how codes are laid out, never the arithmetic.
int LaneRowsPerTile(int64_t rows);

// Lane streams of W [rows, cols] whose BF16 words are `w` (row-major), with the unit's codes.
// INVALID_ARGUMENT (naming `what`) for cols % 8 != 0, a size mismatch, an exponent without a code,
// or more than 2^32 words.
StatusOr<LaneStreams> BuildLaneStreams(const std::array<SymbolCode, 256>& codes, std::span<const uint16_t> w,
                                       int64_t rows, int64_t cols, int rows_per_tile, const std::string& what);

// Reference decoder: W [rows, cols] as BF16 from the lane streams, the unit's validated LUTs
// (walked as the format defines; unused for kFixed3) and W's sign_mantissa bytes (element order).
// DATA_LOSS, naming `what`, when a lane's codes run past its tile or escapes past their arrays.
Status DecodeLanesCpu(const LaneStreams& lanes, std::span<const uint8_t> luts, std::span<const uint8_t> sign_mantissa,
                      uint16_t* out, const std::string& what);

}  // namespace df11
