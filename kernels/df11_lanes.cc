// Lane streams (df11_lanes.h): the builder and the reference decoder.
#include "kernels/df11_lanes.h"

#include <algorithm>
#include <thread>

#include "kernels/df11_format.h"
#include "kernels/df11_lanes_fixed.h"

namespace df11 {

StatusOr<std::array<SymbolCode, 256>> CodesFromLuts(std::span<const uint8_t> luts) {
  const int rows = static_cast<int>(luts.size() / kLutRowBytes);
  if (rows < 2) return InvalidArgument("LUTs: need a decode table and the code-length row");
  const uint8_t* lengths = luts.data() + static_cast<size_t>(rows - 1) * kLutRowBytes;
  std::array<SymbolCode, 256> codes{};
  // Walk the tables from the root: (table, depth, prefix of 8 * depth bits that leads to it).
  struct Visit {
    int table, depth;
    uint64_t prefix;
  };
  std::vector<Visit> todo{{0, 0, 0}};
  std::vector<bool> seen(rows - 1, false);
  seen[0] = true;
  while (!todo.empty()) {
    const Visit v = todo.back();
    todo.pop_back();
    for (int b = 0; b < 256; ++b) {
      const uint8_t entry = luts[static_cast<size_t>(v.table) * kLutRowBytes + b];
      const uint64_t value = v.prefix << 8 | static_cast<uint64_t>(b);  // 8 * (depth + 1) bits
      if (entry >= kFirstPointer) {
        const int next = 256 - entry;
        if (next >= rows - 1 || v.depth >= 3) return InvalidArgument("LUTs: pointer to a missing table");
        if (!seen[next]) {
          seen[next] = true;
          todo.push_back({next, v.depth + 1, value});
        }
        continue;
      }
      const int len = lengths[entry];
      if (len == 0) continue;  // code space no symbol uses (a one-symbol code's other half)
      const int known = 8 * (v.depth + 1);
      if (len <= 8 * v.depth || len > known || len > kMaxCodeBits) {
        return InvalidArgument("LUTs: symbol " + std::to_string(entry) + " has length " + std::to_string(len) +
                               " but ends in a table at depth " + std::to_string(v.depth));
      }
      const uint32_t bits = static_cast<uint32_t>(value >> (known - len));
      // A symbol reachable by two codes (a one-symbol unit fills the whole root with it) decodes
      // from either: the first one found, the smallest, is kept.
      if (codes[entry].length == 0) codes[entry] = {bits, len};
    }
  }
  return codes;
}

int LaneRowsPerTile(int64_t rows) { return rows >= 8192 ? 4 : 1; }

namespace {

// Calls fn(tile) for every tile, spread over the machine's threads.
template <typename Fn>
void ForEachTile(int64_t tiles, Fn fn) {
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(tiles / 64, 1));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int64_t tile = t * tiles / threads; tile < (t + 1) * tiles / threads; ++tile) fn(tile);
    });
  }
  for (auto& th : pool) th.join();
}

// Calls fn(element index) for lane `lane` of tile `tile`, in the lane's stream order.
template <typename Fn>
void ForEachLaneElement(int64_t rows, int64_t cols, int rows_per_tile, int64_t tile, int lane, Fn fn) {
  const int64_t first = tile * rows_per_tile, last = std::min<int64_t>(first + rows_per_tile, rows);
  for (int64_t c = lane; c < cols / 8; c += kLanes) {
    for (int64_t r = first; r < last; ++r) {
      for (int i = 0; i < 8; ++i) fn(r * cols + 8 * c + i);
    }
  }
}

}  // namespace

StatusOr<LaneStreams> BuildLaneStreams(const std::array<SymbolCode, 256>& codes, std::span<const uint16_t> w,
                                       int64_t rows, int64_t cols, int rows_per_tile, const std::string& what) {
  if (rows <= 0 || cols <= 0 || cols % 8 != 0 || (rows_per_tile != 1 && rows_per_tile != 4) ||
      static_cast<uint64_t>(rows) * cols != w.size()) {
    return InvalidArgument(what + ": lane streams need [rows, cols] with cols % 8 == 0 matching " +
                           std::to_string(w.size()) + " elements, got [" + std::to_string(rows) + ", " +
                           std::to_string(cols) + "], " + std::to_string(rows_per_tile) + " rows per tile");
  }
  LaneStreams out;
  out.rows = rows;
  out.cols = cols;
  out.rows_per_tile = rows_per_tile;
  const int64_t tiles = (rows + rows_per_tile - 1) / rows_per_tile;
  // Pass 1: each tile's longest lane, in words.
  std::vector<uint64_t> tile_rows(tiles, 0);
  std::vector<int> missing(tiles, -1);  // an exponent without a code, per tile
  ForEachTile(tiles, [&](int64_t tile) {
    uint64_t longest = 0;
    for (int lane = 0; lane < kLanes; ++lane) {
      uint64_t bits = 0;
      ForEachLaneElement(rows, cols, rows_per_tile, tile, lane, [&](int64_t e) {
        const int len = codes[ExponentOf(w[e])].length;
        if (len == 0) missing[tile] = ExponentOf(w[e]);
        bits += len;
      });
      longest = std::max(longest, (bits + 31) / 32);
    }
    tile_rows[tile] = longest;
  });
  uint64_t total = 0;
  out.tile_words.resize(tiles + 1);
  for (int64_t t = 0; t < tiles; ++t) {
    if (missing[t] >= 0) {
      return InvalidArgument(what + ": exponent " + std::to_string(missing[t]) + " in rows from " +
                             std::to_string(t * rows_per_tile) + " has no code in the unit's tables");
    }
    out.tile_words[t] = static_cast<uint32_t>(total);
    total += tile_rows[t] * kLanes;
    if (total >= (uint64_t{1} << 32)) return InvalidArgument(what + ": lane streams over 2^32 words");
  }
  out.tile_words[tiles] = static_cast<uint32_t>(total);
  out.words.assign(total + uint64_t{2} * kLanes, 0);
  // Pass 2: write each lane's codes MSB-first.
  ForEachTile(tiles, [&](int64_t tile) {
    for (int lane = 0; lane < kLanes; ++lane) {
      uint32_t* dst = out.words.data() + out.tile_words[tile] + lane;
      uint64_t acc = 0;  // pending bits, right-aligned
      int pending = 0;
      ForEachLaneElement(rows, cols, rows_per_tile, tile, lane, [&](int64_t e) {
        const SymbolCode c = codes[ExponentOf(w[e])];
        acc = acc << c.length | c.bits;
        pending += c.length;
        if (pending >= 32) {
          pending -= 32;
          *dst = static_cast<uint32_t>(acc >> pending);
          dst += kLanes;
        }
      });
      if (pending > 0) *dst = static_cast<uint32_t>(acc << (32 - pending));
    }
  });
  return out;
}

Status DecodeLanesCpu(const LaneStreams& lanes, std::span<const uint8_t> luts, std::span<const uint8_t> sign_mantissa,
                      uint16_t* out, const std::string& what) {
  if (lanes.code == LaneCode::kFixed3) return DecodeFixedLanesCpu(lanes, sign_mantissa, out, what);
  const uint64_t n = static_cast<uint64_t>(lanes.rows) * lanes.cols;
  if (sign_mantissa.size() < n) return InvalidArgument(what + ": sign_mantissa shorter than the matrix");
  const int num_luts = static_cast<int>(luts.size() / kLutRowBytes);
  const uint8_t* lengths = luts.data() + static_cast<size_t>(num_luts - 1) * kLutRowBytes;
  for (int64_t tile = 0; tile < lanes.num_tiles(); ++tile) {
    const uint64_t base = lanes.tile_words[tile];
    const uint64_t capacity = (lanes.tile_words[tile + 1] - base) / kLanes * 32;  // bits per lane
    for (int lane = 0; lane < kLanes; ++lane) {
      uint64_t pos = 0;
      auto bit = [&](uint64_t p) -> uint32_t {
        return p < capacity ? (lanes.words[base + p / 32 * kLanes + lane] >> (31 - p % 32)) & 1 : 0;
      };
      Status failed = Status::Ok();
      ForEachLaneElement(lanes.rows, lanes.cols, lanes.rows_per_tile, tile, lane, [&](int64_t e) {
        if (!failed.ok()) return;
        int table = 0;
        uint8_t symbol = 0;
        for (int level = 0; level < 4; ++level) {
          uint32_t byte = 0;
          for (int i = 0; i < 8; ++i) byte = byte << 1 | bit(pos + 8 * static_cast<uint64_t>(level) + i);
          symbol = luts[static_cast<size_t>(table) * kLutRowBytes + byte];
          if (symbol < kFirstPointer) break;
          table = 256 - symbol;
        }
        pos += lengths[symbol];
        if (symbol >= kFirstPointer || pos > capacity) {
          failed = DataLoss(what + ": lane " + std::to_string(lane) + " of tile " + std::to_string(tile) +
                            " runs past its " + std::to_string(capacity) + " bits");
          return;
        }
        out[e] = ComposeBf16(symbol, sign_mantissa[e]);
      });
      DF11_RETURN_IF_ERROR(failed);
    }
  }
  return Status::Ok();
}

}  // namespace df11
