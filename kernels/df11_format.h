// The DFloat11 (DF11) unit format, as published models store it (dfloat11 package >= 0.2.0).
//
// A BF16 weight w (16 bits) = sign(1) | exponent(8) | mantissa(7). A compressed *unit* (one
// decoder layer, an embedding, an lm_head) concatenates the weights of its matrices and stores:
//   encoded_exponent  U8 [bytes]    Huffman bitstream of the 8-bit exponents, MSB-first, codes <= 32 bits
//   sign_mantissa     U8 [n]        (w >> 8 & 0x80) | (w & 0x7F)
//   luts              U8 [k, 256]   k-1 byte-indexed decode tables (entry >= 240: continue in table
//                                   256-entry with the next byte), last row = code length per symbol
//   output_positions  U32 [chunks+1] (stored as U8) index of the first element whose code starts in
//                                   each chunk, then n
//   gaps              U8            per window, the 5-bit bit offset of the first code starting in
//                                   it, packed big-endian
//   split_positions   I64 [m-1]     cumulative element counts between the m concatenated weights
// Words used in this code base: a *window* is one 8-byte slice of the stream (one GPU thread of
// the reference kernel); a *chunk* is threads_per_block windows (512 x 8 = 4096 bytes) and owns one
// output_positions entry. ("block" is kept for KV-cache blocks elsewhere.)
// A code belongs to the window in which its first bit lies. Decoding window g starts at bit
// 64*g + gap[g] and decodes every code that starts before bit 64*(g+1). Exponents >= 240 cannot
// be symbols (they would read as table pointers): such tensors are stored as plain BF16.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace df11 {

inline constexpr int kLutRowBytes = 256;
inline constexpr int kFirstPointer = 240;     // LUT entries >= this are pointers
inline constexpr int kMaxDecodeTables = 17;   // root + 16 (pointer values 255..240)
inline constexpr int kMaxCodeBits = 32;
inline constexpr int kDefaultThreadsPerBlock = 512;
inline constexpr int kBytesPerWindow = 8;     // the format's bytes_per_thread; nothing else is defined

// Borrowed views of one unit's tensors, exactly as stored.
struct UnitView {
  std::span<const uint8_t> luts;              // [k * 256]
  std::span<const uint8_t> encoded_exponent;  // [bytes]
  std::span<const uint8_t> sign_mantissa;     // [n]
  std::span<const uint8_t> output_positions;  // little-endian u32 [chunks + 1] (or [chunks], see below)
  std::span<const uint8_t> gaps;              // packed 5-bit values
  int threads_per_block = kDefaultThreadsPerBlock;
};

// What validation derives from a unit; everything a decoder needs besides the stream itself.
struct UnitLayout {
  uint64_t num_elements = 0;                 // n
  uint64_t num_bytes = 0;                    // encoded_exponent bytes
  int num_luts = 0;                          // k (rows including the code-length row)
  int threads_per_block = kDefaultThreadsPerBlock;
  uint64_t num_chunks = 0;                   // ceil(bytes / (threads_per_block * 8))
  uint64_t num_windows = 0;                  // ceil(bytes / 8)
  // output_positions as u32, always num_chunks + 1 entries (a stream whose last chunk starts no
  // code, which the reference encoder can write with only num_chunks entries, gets n appended).
  std::vector<uint32_t> chunk_starts;
  uint32_t max_chunk_elements = 0;           // max over chunks of chunk_starts[c+1] - chunk_starts[c]
  int max_code_bits = 0;                     // longest code length reachable from the root table
};

// Structural validation, O(tables + chunks): sizes agree (sign_mantissa = n, gaps cover every
// window, output_positions monotonic from 0 to n, n < 2^32), LUT rows present, every pointer
// lands on an existing table at the next depth (no cycles, depth <= 4), every reachable symbol
// has a code length in [1, 32]. It does not decode: a stream that ends early or disagrees with
// output_positions is found by DecodeUnitCpu. `what` prefixes error messages (e.g. the unit name).
StatusOr<UnitLayout> ValidateUnit(const UnitView& unit, const std::string& what);

// 5-bit gap of window g (0 when the gaps array is shorter: windows past the stream).
inline uint32_t WindowGap(std::span<const uint8_t> gaps, uint64_t window) {
  const uint64_t bit = window * 5;
  const uint64_t byte = bit / 8;
  uint32_t hi = byte < gaps.size() ? gaps[byte] : 0;
  uint32_t lo = byte + 1 < gaps.size() ? gaps[byte + 1] : 0;
  return (((hi << 8) | lo) >> (11 - bit % 8)) & 0x1F;
}

// A BF16 value from its exponent and its sign_mantissa byte.
inline uint16_t ComposeBf16(uint8_t exponent, uint8_t sign_mantissa) {
  return static_cast<uint16_t>(((sign_mantissa & 0x80) << 8) | (exponent << 7) | (sign_mantissa & 0x7F));
}
inline uint8_t ExponentOf(uint16_t w) { return static_cast<uint8_t>((w >> 7) & 0xFF); }
inline uint8_t SignMantissaOf(uint16_t w) { return static_cast<uint8_t>(((w >> 8) & 0x80) | (w & 0x7F)); }

}  // namespace df11
