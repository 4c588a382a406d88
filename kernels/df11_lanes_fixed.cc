// Fixed lanes (df11_lanes_fixed.h): the builder and the reference decoder. Both walk a tile block
// by block and take a block's escapes in the order the CUDA kernel does (ForEachEscape), so that
// the escape nibbles land where the kernel looks for them.
#include "kernels/df11_lanes_fixed.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

#include "kernels/base/parallel.h"
#include "kernels/df11_format.h"

namespace df11 {
namespace {

// Tile geometry shared by the builder and the decoder.
struct Geometry {
  int64_t rows, cols, chunks;
  int rows_per_tile;
  int64_t entries;  // per lane per tile, a multiple of 4
  int64_t tiles() const { return (rows + rows_per_tile - 1) / rows_per_tile; }
  uint64_t stride() const { return static_cast<uint64_t>(entries) / 4 * 3 * kLanes; }
  // First element of entry g of lane `lane` in tile t, or -1 for a padding entry.
  int64_t Element(int64_t t, int lane, int64_t g) const {
    const int64_t c = lane + kLanes * (g / rows_per_tile), row = t * rows_per_tile + g % rows_per_tile;
    return c < chunks && row < rows ? row * cols + 8 * c : -1;
  }
  // Word and bit position of element k's code bit b (0..2) in entry g's block.
  uint64_t WordOf(int64_t t, int lane, int64_t g, int b) const {
    const int64_t i = g % 4;
    return t * stride() + static_cast<uint64_t>(3 * (g / 4) + (i < 3 ? i : b)) * kLanes + lane;
  }
  static int BitOf(int64_t g, int k, int b) { return g % 4 < 3 ? 4 * k + b : 4 * k + 3; }
};

Geometry MakeGeometry(int64_t rows, int64_t cols, int rows_per_tile) {
  const int64_t chunks = cols / 8, per_row = (chunks + kLanes - 1) / kLanes;
  return {rows, cols, chunks, rows_per_tile, (rows_per_tile * per_row + 3) / 4 * 4};
}

// Calls escape(lane, i, k) for the escaped elements of one block (element k of entry i: bit
// 8 i + k of masks[lane]) in escape order: lane by lane, each lane's in (entry, element) order.
template <typename Fn>
void ForEachEscape(const std::array<uint32_t, kLanes>& masks, Fn escape) {
  for (int lane = 0; lane < kLanes; ++lane) {
    for (uint32_t m = masks[lane]; m != 0; m &= m - 1) {
      const int bit = __builtin_ctz(m);
      escape(lane, bit / 8, bit % 8);
    }
  }
}

}  // namespace

uint64_t FixedLanesBytesBound(const std::array<uint64_t, 256>& histogram, int64_t rows, int64_t cols,
                              int rows_per_tile) {
  std::array<uint64_t, 256> sorted = histogram;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  uint64_t escapes = 0, rare = 0;
  for (int rank = kFixedEscape; rank < 256; ++rank) {
    escapes += sorted[rank];
    if (rank >= kFixedEscape + kFixedRareNibble) rare += sorted[rank];
  }
  const Geometry geo = MakeGeometry(rows, cols, rows_per_tile);
  const uint64_t tiles = geo.tiles();
  // ... + the split state (tile_split: 2 words a tile) where BuildFixedLaneStreams writes one. (A
  // bound 8 bytes a tile looser on every matrix took q|k|v and o of the 8B shape past 1.03 and out
  // of fixed lanes: their 1-row tiles are 1.0285x the unit.)
  const bool split = rows_per_tile == 4 && GemvSplitChunk(rows, cols) > 0;
  return 4 * tiles * geo.stride() + 4 * (escapes / 8 + tiles + uint64_t{2} * kLanes) + rare + 1 + 8 * (tiles + 1) + 24 +
         (split ? 8 * tiles : 0);
}

FixedCodes FixedCodesOf(const std::array<uint64_t, 256>& histogram) {
  // Exponents by count, most frequent first (ties: the smaller exponent).
  std::array<int, 256> order;
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return histogram[a] > histogram[b]; });
  FixedCodes c;
  for (int rank = 0; rank < 256; ++rank) {
    const int e = order[rank];
    c.code[e] = static_cast<uint8_t>(std::min(rank, kFixedEscape));
    c.nibble[e] = static_cast<uint8_t>(rank < kFixedEscape ? 0 : std::min(rank - kFixedEscape, kFixedRareNibble));
    if (rank < kFixedEscape) c.primary[rank] = static_cast<uint8_t>(histogram[e] > 0 ? e : 0);
    if (rank >= kFixedEscape && rank < kFixedEscape + kFixedRareNibble) {
      c.secondary[rank - kFixedEscape] = static_cast<uint8_t>(histogram[e] > 0 ? e : 0);
    }
  }
  return c;
}

FixedGeometry FixedGeometryOf(int64_t rows, int64_t cols, int rows_per_tile) {
  const Geometry geo = MakeGeometry(rows, cols, rows_per_tile);
  FixedGeometry g;
  g.tiles = geo.tiles();
  g.entries = geo.entries;
  g.tile_stride = geo.stride();
  const int64_t split = GemvSplitChunk(rows, cols);
  if (split > 0 && rows_per_tile == 4 && split % kLanes == 0 && split / kLanes < geo.entries / 4) {
    g.split_block = static_cast<uint32_t>(split / kLanes);
  }
  return g;
}

Status FillFixedTileOffsets(std::span<const uint64_t> escapes, std::span<const uint64_t> rare, LaneStreams& out,
                            const std::string& what) {
  const size_t tiles = escapes.size();
  out.tile_escapes.resize(tiles + 1);
  out.tile_rare.resize(tiles + 1);
  uint64_t escape_words = 0, rare_bytes = 0;
  for (size_t t = 0; t < tiles; ++t) {
    out.tile_escapes[t] = static_cast<uint32_t>(escape_words);
    out.tile_rare[t] = static_cast<uint32_t>(rare_bytes);
    escape_words += (escapes[t] + 7) / 8;
    rare_bytes += rare[t];
    if (escape_words >= (uint64_t{1} << 32) || rare_bytes >= (uint64_t{1} << 32)) {
      return InvalidArgument(what + ": fixed lanes' escapes over 2^32 entries");
    }
  }
  out.tile_escapes[tiles] = static_cast<uint32_t>(escape_words);
  out.tile_rare[tiles] = static_cast<uint32_t>(rare_bytes);
  return Status::Ok();
}

int64_t GemvSplitChunk(int64_t rows, int64_t cols) {
  const int64_t per_row = (cols / 8 + kLanes - 1) / kLanes;
  if (rows <= 0 || rows >= 65536 || per_row < 2 || FixedRowsPerTile(rows, cols) != 4) return 0;
  return kLanes * (per_row / 2);
}

int FixedRowsPerTile(int64_t rows, int64_t cols) {
  const int64_t per_row = (cols / 8 + kLanes - 1) / kLanes;
  if (LaneRowsPerTile(rows) == 1 && per_row % 4 == 0) return 1;
  if (LaneRowsPerTile(rows) == 1 && per_row % 2 == 0) return 2;
  return 4;
}

StatusOr<LaneStreams> BuildFixedLaneStreams(std::span<const uint16_t> w, const std::array<uint64_t, 256>& histogram,
                                            int64_t rows, int64_t cols, int rows_per_tile, const std::string& what) {
  if (rows <= 0 || cols <= 0 || cols % 8 != 0 || (rows_per_tile != 1 && rows_per_tile != 2 && rows_per_tile != 4) ||
      static_cast<uint64_t>(rows) * cols != w.size()) {
    return InvalidArgument(what + ": fixed lanes need [rows, cols] with cols % 8 == 0 matching " +
                           std::to_string(w.size()) + " elements and 1, 2 or 4 rows per tile, got [" +
                           std::to_string(rows) + ", " + std::to_string(cols) + "], " + std::to_string(rows_per_tile));
  }
  LaneStreams out;
  out.code = LaneCode::kFixed3;
  out.rows = rows;
  out.cols = cols;
  out.rows_per_tile = rows_per_tile;
  const FixedCodes codes = FixedCodesOf(histogram);
  const std::array<uint8_t, 256>&code = codes.code, &nibble = codes.nibble;  // per exponent
  out.primary = codes.primary;
  out.secondary = codes.secondary;
  const Geometry geo = MakeGeometry(rows, cols, rows_per_tile);
  const int64_t tiles = geo.tiles();
  out.tile_stride = geo.stride();
  if (static_cast<uint64_t>(tiles) * out.tile_stride >= (uint64_t{1} << 32)) {
    return InvalidArgument(what + ": fixed lanes over 2^32 words");
  }
  // Pass 1: each tile's escapes and rare bytes (any order counts them), and exponents the histogram missed.
  std::vector<uint64_t> tile_escapes(tiles), tile_rare(tiles);
  std::vector<int> missing(tiles, -1);
  // Per exponent: bit 0 an escape, bit 1 a rare byte, bit 2 missing from the histogram. Counting
  // into locals through this table instead of into the vectors element by element: gate|up of the
  // 8B shape built in 0.24 s instead of 0.35 on two cores (the whole model's build on the GPU
  // machine's 16 cores stayed within its run-to-run spread, 4.9-5.6 s).
  std::array<uint8_t, 256> kind{};
  for (int e = 0; e < 256; ++e) {
    kind[e] = static_cast<uint8_t>((code[e] == kFixedEscape ? 1 : 0) |
                                   (code[e] == kFixedEscape && nibble[e] == kFixedRareNibble ? 2 : 0) |
                                   (histogram[e] == 0 ? 4 : 0));
  }
  ParallelFor(tiles, 0, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t first = t * rows_per_tile * cols, last = std::min<int64_t>(rows, (t + 1) * rows_per_tile) * cols;
      uint64_t escapes = 0, rares = 0;
      uint32_t any_missing = 0;
      for (int64_t i = first; i < last; ++i) {
        const uint32_t k = kind[ExponentOf(w[i])];
        escapes += k & 1u;
        rares += (k >> 1) & 1u;
        any_missing |= k & 4u;
      }
      tile_escapes[t] = escapes;
      tile_rare[t] = rares;
      if (any_missing != 0) {  // which exponent, for the error (rare: a histogram that does not match w)
        for (int64_t i = first; i < last; ++i) {
          if (histogram[ExponentOf(w[i])] == 0) missing[t] = ExponentOf(w[i]);
        }
      }
    }
  });
  for (int64_t t = 0; t < tiles; ++t) {
    if (missing[t] >= 0) {
      return InvalidArgument(what + ": exponent " + std::to_string(missing[t]) + " in rows from " +
                             std::to_string(t * rows_per_tile) + " is missing from the histogram");
    }
  }
  DF11_RETURN_IF_ERROR(FillFixedTileOffsets(tile_escapes, tile_rare, out, what));
  const uint64_t escape_words = out.tile_escapes[tiles], rare = out.tile_rare[tiles];
  // The GEMV's split (GemvSplitChunk) in the layout it names, 4 rows per tile, where block j
  // starts at chunk 32 j.
  out.split_block = FixedGeometryOf(rows, cols, rows_per_tile).split_block;
  if (out.split_block != 0) out.tile_split.assign(2 * tiles, 0);
  out.words.assign(tiles * out.tile_stride, 0);
  out.escapes.assign(escape_words + uint64_t{2} * kLanes, 0);
  out.rare.assign(rare + 1, 0);
  // Pass 2: codes, then each entry's escapes in the kernel's order.
  ParallelFor(tiles, 0, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      uint64_t nib = uint64_t{out.tile_escapes[t]} * 8, rare_at = out.tile_rare[t];
      for (int64_t j = 0; j < geo.entries / 4; ++j) {
        if (out.split_block != 0 && j == out.split_block) {
          out.tile_split[2 * t] = static_cast<uint32_t>(nib - uint64_t{out.tile_escapes[t]} * 8);
          out.tile_split[2 * t + 1] = static_cast<uint32_t>(rare_at);
        }
        std::array<uint32_t, kLanes> masks{};
        std::array<std::array<int64_t, kLanes>, 4> element{};
        for (int lane = 0; lane < kLanes; ++lane) {
          uint32_t words[3] = {0, 0, 0};  // the block's words of this lane (layout: df11_lanes_fixed.h)
          for (int i = 0; i < 4; ++i) {
            element[i][lane] = geo.Element(t, lane, 4 * j + i);
            if (element[i][lane] < 0) continue;
            const uint16_t* src = w.data() + element[i][lane];
            for (int k = 0; k < 8; ++k) {
              const uint32_t c = code[ExponentOf(src[k])];
              if (i < 3) {
                words[i] |= c << (4 * k);
              } else {
                for (int b = 0; b < 3; ++b) words[b] |= ((c >> b) & 1u) << (4 * k + 3);
              }
              if (c == kFixedEscape) masks[lane] |= 1u << (8 * i + k);
            }
          }
          for (int b = 0; b < 3; ++b) out.words[geo.WordOf(t, lane, 4 * j + b, b)] = words[b];  // word 3j + b
        }
        ForEachEscape(masks, [&](int lane, int i, int k) {
          const uint8_t e = ExponentOf(w[element[i][lane] + k]);
          out.escapes[nib / 8] |= uint32_t{nibble[e]} << (4 * (nib % 8));
          ++nib;
          if (nibble[e] == kFixedRareNibble) out.rare[rare_at++] = e;
        });
      }
    }
  });
  return out;
}

Status DecodeFixedLanesCpu(const LaneStreams& lanes, std::span<const uint8_t> sign_mantissa, uint16_t* out,
                           const std::string& what) {
  const uint64_t n = static_cast<uint64_t>(lanes.rows) * lanes.cols;
  if (sign_mantissa.size() < n) return InvalidArgument(what + ": sign_mantissa shorter than the matrix");
  const Geometry geo = MakeGeometry(lanes.rows, lanes.cols, lanes.rows_per_tile);
  const int64_t tiles = geo.tiles();
  if (lanes.code != LaneCode::kFixed3 || lanes.tile_stride != geo.stride() ||
      lanes.words.size() < tiles * geo.stride() || lanes.tile_escapes.size() != static_cast<size_t>(tiles) + 1 ||
      lanes.tile_rare.size() != static_cast<size_t>(tiles) + 1 ||
      lanes.tile_split.size() != (lanes.split_block != 0 ? 2 * static_cast<size_t>(tiles) : 0)) {
    return InvalidArgument(what + ": not fixed lanes of [" + std::to_string(lanes.rows) + ", " +
                           std::to_string(lanes.cols) + "]");
  }
  for (int64_t t = 0; t < tiles; ++t) {
    uint64_t nib = uint64_t{lanes.tile_escapes[t]} * 8, rare_at = lanes.tile_rare[t];
    const uint64_t nib_end = std::min<uint64_t>(uint64_t{lanes.tile_escapes[t + 1]} * 8, 8 * lanes.escapes.size());
    const uint64_t rare_end = std::min<uint64_t>(lanes.tile_rare[t + 1], lanes.rare.size());
    Status failed = Status::Ok();
    for (int64_t j = 0; j < geo.entries / 4 && failed.ok(); ++j) {
      if (lanes.split_block != 0 && j == lanes.split_block &&
          (nib - uint64_t{lanes.tile_escapes[t]} * 8 != lanes.tile_split[2 * t] ||
           rare_at != lanes.tile_split[2 * t + 1])) {
        return DataLoss(what + ": tile " + std::to_string(t) + "'s split state (block " +
                        std::to_string(lanes.split_block) + ") is not where its escapes and rare bytes are");
      }
      std::array<uint32_t, kLanes> masks{};
      std::array<std::array<int64_t, kLanes>, 4> element{};
      std::array<std::array<std::array<uint8_t, 8>, kLanes>, 4> exps{};
      for (int i = 0; i < 4; ++i) {
        const int64_t g = 4 * j + i;
        for (int lane = 0; lane < kLanes; ++lane) {
          element[i][lane] = geo.Element(t, lane, g);
          if (element[i][lane] < 0) continue;
          for (int k = 0; k < 8; ++k) {
            int c = 0;
            for (int b = 0; b < 3; ++b) {
              c |= static_cast<int>((lanes.words[geo.WordOf(t, lane, g, b)] >> Geometry::BitOf(g, k, b)) & 1) << b;
            }
            exps[i][lane][k] = lanes.primary[c];
            if (c == kFixedEscape) masks[lane] |= 1u << (8 * i + k);
          }
        }
      }
      ForEachEscape(masks, [&](int lane, int i, int k) {
        if (!failed.ok()) return;
        if (nib >= nib_end) {
          failed = DataLoss(what + ": tile " + std::to_string(t) + " has more escapes than its nibbles");
          return;
        }
        const int v = static_cast<int>(lanes.escapes[nib / 8] >> (4 * (nib % 8))) & 15;
        ++nib;
        if (v != kFixedRareNibble) {
          exps[i][lane][k] = lanes.secondary[v];
        } else if (rare_at < rare_end) {
          exps[i][lane][k] = lanes.rare[rare_at++];
        } else {
          failed = DataLoss(what + ": tile " + std::to_string(t) + " has more rare escapes than rare bytes");
        }
      });
      for (int i = 0; i < 4 && failed.ok(); ++i) {
        for (int lane = 0; lane < kLanes; ++lane) {
          for (int k = 0; k < 8 && element[i][lane] >= 0; ++k) {
            out[element[i][lane] + k] = ComposeBf16(exps[i][lane][k], sign_mantissa[element[i][lane] + k]);
          }
        }
      }
    }
    DF11_RETURN_IF_ERROR(failed);
  }
  return Status::Ok();
}

}  // namespace df11
