// DF11 unit codec on the CPU: the encoder (length-limited canonical Huffman code, hierarchical
// LUTs, bitstream, chunk index) and the reference decoder that the CUDA kernel is checked against.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/df11_format.h"
#include "kernels/base/status.h"

namespace df11 {

// A unit as the encoder produces it, in the published layout.
struct EncodedUnit {
  std::vector<uint8_t> luts;              // [k * 256]
  std::vector<uint8_t> encoded_exponent;  // bitstream
  std::vector<uint8_t> sign_mantissa;     // [n]
  std::vector<uint8_t> output_positions;  // u32 little-endian [chunks + 1]
  std::vector<uint8_t> gaps;              // packed 5-bit, padded to chunks * threads_per_block windows
  std::array<uint8_t, 256> code_bits{};   // code length per exponent (0 = unused)
  int threads_per_block = kDefaultThreadsPerBlock;

  UnitView view() const {
    return UnitView{luts, encoded_exponent, sign_mantissa, output_positions, gaps, threads_per_block};
  }
  int num_luts() const { return static_cast<int>(luts.size() / kLutRowBytes); }
};

// Histogram of the 8-bit exponents of BF16 words (multi-threaded).
std::array<uint64_t, 256> ExponentHistogram(std::span<const uint16_t> words, int threads = 0);

// Code lengths (0 for absent symbols) for a histogram: Huffman, limited to 32 bits and to at most
// kMaxDecodeTables LUT rows; frequencies are flattened step by step until both limits hold.
// Fails (INVALID_ARGUMENT) when a symbol >= 240 occurs: such exponents cannot be encoded.
StatusOr<std::array<uint8_t, 256>> BuildCodeLengths(const std::array<uint64_t, 256>& histogram);

// Encodes BF16 words (the concatenated weights of a unit). Fails for exponents >= 240 or n >= 2^32.
StatusOr<EncodedUnit> EncodeUnit(std::span<const uint16_t> words, int threads = 0,
                                 int threads_per_block = kDefaultThreadsPerBlock);

// Reference decoder: decodes elements [begin, end) of a validated unit into out[0, end-begin),
// walking the LUTs exactly as the format defines them, using up to `threads` threads (0 = all).
// Random access: only the chunks that hold [begin, end) are decoded. Returns DATA_LOSS when the
// stream disagrees with output_positions (a chunk yields fewer codes than it claims) or a code
// needed for an element extends past the end of the stream. `what` prefixes error messages.
Status DecodeUnitCpu(const UnitView& unit, const UnitLayout& layout, uint64_t begin, uint64_t end,
                     uint16_t* out, int threads, const std::string& what);

// The same contract and results, faster: a 12-bit table memoizing the LUT walk (built per call,
// ~4096 walks) settles most codes in one lookup, and stream bits come from 8-byte loads. The
// runtime's CPU backend uses this one; tests compare it with DecodeUnitCpu.
Status DecodeUnitCpuFast(const UnitView& unit, const UnitLayout& layout, uint64_t begin, uint64_t end,
                         uint16_t* out, int threads, const std::string& what);

// Shannon entropy (bits per symbol) of a histogram.
double HistogramEntropyBits(const std::array<uint64_t, 256>& histogram);

}  // namespace df11
