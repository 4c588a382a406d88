// Reference DF11 decoder on the CPU. It follows the format literally: for every window, start at
// the window's gap, walk the byte-indexed LUTs for each code that starts inside the window, and
// number elements from the chunk's output_positions entry. Chunks are independent, so they are
// spread over threads. The CUDA decoder (df11_decode.cu) must agree with it bit for bit.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "kernels/base/parallel.h"
#include "kernels/df11_codec.h"
#include "kernels/df11_fast_table.h"

namespace df11 {
namespace {

// 32 stream bits starting at absolute bit `bit`, MSB-first, zeros past the end.
inline uint32_t Peek32(std::span<const uint8_t> stream, uint64_t bit) {
  const uint64_t byte = bit / 8;
  uint64_t v = 0;
  if (byte + 5 <= stream.size()) {
    for (int k = 0; k < 5; ++k) v = (v << 8) | stream[byte + k];
  } else {
    for (int k = 0; k < 5; ++k) v = (v << 8) | (byte + k < stream.size() ? stream[byte + k] : 0);
  }
  return static_cast<uint32_t>(v >> (8 - bit % 8));
}

// Walks the LUTs for the code at the top of `bits`; returns the symbol. Validated LUTs end the
// walk within 4 lookups.
inline uint8_t LookupSymbol(const uint8_t* luts, uint32_t bits) {
  int table = 0;
  for (int level = 0; level < 4; ++level) {
    const uint8_t v = luts[table * kLutRowBytes + ((bits >> (24 - 8 * level)) & 0xFF)];
    if (v < kFirstPointer) return v;
    table = 256 - v;
  }
  return 0;  // unreachable for validated LUTs
}

// 32 stream bits at `bit` through one unaligned 8-byte load (big-endian); the slow path near the
// end of the stream.
inline uint32_t Peek32Fast(std::span<const uint8_t> stream, uint64_t bit) {
  const uint64_t byte = bit / 8;
  if (byte + 8 > stream.size()) return Peek32(stream, bit);
  uint64_t v;
  std::memcpy(&v, stream.data() + byte, 8);
  v = __builtin_bswap64(v);
  return static_cast<uint32_t>(v >> (32 - bit % 8));
}

// How a decoder finds the code at the top of 32 peeked bits: the literal LUT walk (reference),
// or the 12-bit fast table first (a memo of the same walk, see df11_fast_table.h).
struct LutWalk {
  const uint8_t* luts;
  const uint8_t* lengths;
  uint32_t Peek(std::span<const uint8_t> stream, uint64_t bit) const { return Peek32(stream, bit); }
  void Code(uint32_t bits, uint8_t& symbol, int& len) const {
    symbol = LookupSymbol(luts, bits);
    len = lengths[symbol];
  }
};
struct TableFirst {
  const uint8_t* luts;
  const uint8_t* lengths;
  const uint16_t* table;  // [kFastTableSize]
  uint32_t Peek(std::span<const uint8_t> stream, uint64_t bit) const { return Peek32Fast(stream, bit); }
  void Code(uint32_t bits, uint8_t& symbol, int& len) const {
    const uint16_t e = table[bits >> (32 - kFastTableBits)];
    if (e != 0) {
      symbol = static_cast<uint8_t>(e & 0xFF);
      len = e >> 8;
      return;
    }
    symbol = LookupSymbol(luts, bits);
    len = lengths[symbol];
  }
};

struct ChunkError {
  uint64_t chunk = UINT64_MAX;
  Status status;
};

// Decodes the elements of chunk c that fall in [begin, end) into out[e - begin].
template <typename Codes>
Status DecodeChunk(const UnitView& unit, const UnitLayout& layout, const Codes& codes, uint64_t c, uint64_t begin,
                   uint64_t end, uint16_t* out, const std::string& what) {
  const uint64_t first = layout.chunk_starts[c], limit = layout.chunk_starts[c + 1];
  const uint64_t stream_bits = layout.num_bytes * 8;
  const uint64_t w_end = std::min<uint64_t>((c + 1) * layout.threads_per_block, layout.num_windows);
  uint64_t e = first;
  for (uint64_t w = c * layout.threads_per_block; w < w_end; ++w) {
    uint64_t bit = w * 64 + WindowGap(unit.gaps, w);
    while (bit < (w + 1) * 64) {
      uint8_t symbol;
      int len;
      codes.Code(codes.Peek(unit.encoded_exponent, bit), symbol, len);
      if (e < limit) {
        if (bit + len > stream_bits) {
          return DataLoss(what + ": the stream ends early: element " + std::to_string(e) + " (chunk " +
                          std::to_string(c) + ") needs bits up to " + std::to_string(bit + len) + " of " +
                          std::to_string(stream_bits));
        }
        if (e >= begin && e < end) out[e - begin] = ComposeBf16(symbol, unit.sign_mantissa[e]);
      }
      ++e;
      bit += len;
    }
  }
  const bool last_chunk = c + 1 == layout.num_chunks;
  if (e < limit || (!last_chunk && e != limit)) {
    return DataLoss(what + ": chunk " + std::to_string(c) + " holds " + std::to_string(e - first) +
                    " codes but output_positions says " + std::to_string(limit - first));
  }
  return Status::Ok();
}

template <typename Codes>
Status DecodeRange(const UnitView& unit, const UnitLayout& layout, const Codes& codes, uint64_t begin, uint64_t end,
                   uint16_t* out, int threads, const std::string& what) {
  if (begin > end || end > layout.num_elements) {
    return OutOfRange(what + ": range [" + std::to_string(begin) + ", " + std::to_string(end) + ") is outside [0, " +
                      std::to_string(layout.num_elements) + ")");
  }
  if (begin == end) return Status::Ok();
  const auto& starts = layout.chunk_starts;
  // First chunk: the last one starting at or before `begin`; last: the last one starting before `end`.
  const uint64_t c0 = std::upper_bound(starts.begin(), starts.begin() + layout.num_chunks, begin) - starts.begin() - 1;
  const uint64_t c1 = std::lower_bound(starts.begin(), starts.begin() + layout.num_chunks, end) - starts.begin();
  std::mutex mu;
  ChunkError first_error;
  ParallelFor(static_cast<int64_t>(c1 - c0), threads, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      Status s = DecodeChunk(unit, layout, codes, c0 + i, begin, end, out, what);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (c0 + i < first_error.chunk) first_error = {c0 + static_cast<uint64_t>(i), s};
        return;
      }
    }
  });
  return first_error.status;
}

}  // namespace

Status DecodeUnitCpu(const UnitView& unit, const UnitLayout& layout, uint64_t begin, uint64_t end, uint16_t* out,
                     int threads, const std::string& what) {
  const uint8_t* luts = unit.luts.data();
  const LutWalk codes{luts, luts + static_cast<size_t>(layout.num_luts - 1) * kLutRowBytes};
  return DecodeRange(unit, layout, codes, begin, end, out, threads, what);
}

Status DecodeUnitCpuFast(const UnitView& unit, const UnitLayout& layout, uint64_t begin, uint64_t end, uint16_t* out,
                         int threads, const std::string& what) {
  const uint8_t* luts = unit.luts.data();
  const std::array<uint16_t, kFastTableSize> table = BuildFastTable(unit.luts);
  const TableFirst codes{luts, luts + static_cast<size_t>(layout.num_luts - 1) * kLutRowBytes, table.data()};
  return DecodeRange(unit, layout, codes, begin, end, out, threads, what);
}

}  // namespace df11
