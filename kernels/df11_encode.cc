// DF11 encoder: BF16 words -> a unit in the published layout (see df11_format.h).
// Multi-threaded in two passes over contiguous element ranges: (1) bits per range, then an
// exclusive scan gives each range its first bit; (2) each range writes its codes, window gaps and
// chunk starts. Words wholly inside a range are stored plainly; the first and last word of a
// range may be shared with a neighbour and are OR-ed atomically.
#include <atomic>
#include <bit>
#include <vector>

#include "kernels/df11_code.h"
#include "kernels/df11_codec.h"
#include "kernels/base/parallel.h"

namespace df11 {
namespace {

struct RangeWriter {
  std::vector<uint64_t>& words;  // stream as big-endian-bit 64-bit words (bit 0 = MSB of word 0)
  uint64_t first_word;           // first word this range touches (shared, atomic)
  uint64_t acc = 0;              // pending bits of the current word, MSB-aligned
  uint64_t word = 0;             // index of the current word
  int used = 0;                  // bits in acc

  void Flush(bool last) {
    if (word == first_word || last) {
      std::atomic_ref<uint64_t>(words[word]).fetch_or(acc, std::memory_order_relaxed);
    } else {
      words[word] = acc;
    }
  }
  // Appends `len` bits (right-aligned in `code`), len in [1, 32].
  void Put(uint32_t code, int len) {
    const int room = 64 - used;
    if (len < room) {
      acc |= static_cast<uint64_t>(code) << (room - len);
      used += len;
      return;
    }
    const int spill = len - room;  // bits that go to the next word
    acc |= static_cast<uint64_t>(code) >> spill;
    Flush(false);
    ++word;
    acc = spill == 0 ? 0 : static_cast<uint64_t>(code) << (64 - spill);
    used = spill;
  }
};

}  // namespace

StatusOr<EncodedUnit> EncodeUnit(std::span<const uint16_t> words, int threads, int threads_per_block) {
  const uint64_t n = words.size();
  if (n >= (uint64_t{1} << 32)) return InvalidArgument("a unit holds at most 2^32-1 elements");
  if (threads <= 0) threads = HardwareThreads();
  EncodedUnit unit;
  unit.threads_per_block = threads_per_block;
  const auto histogram = ExponentHistogram(words, threads);
  DF11_ASSIGN_OR_RETURN(unit.code_bits, BuildCodeLengths(histogram));
  DF11_ASSIGN_OR_RETURN(unit.luts, BuildLuts(unit.code_bits));
  const std::array<uint32_t, 256> codes = CanonicalCodes(unit.code_bits);

  // Pass 1: bits per range.
  const int64_t ranges = std::max<int64_t>(1, std::min<int64_t>(threads * 4, static_cast<int64_t>(n / 65536) + 1));
  std::vector<uint64_t> range_bits(ranges + 1, 0);
  ParallelFor(ranges, threads, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      uint64_t bits = 0;
      for (uint64_t i = n * r / ranges; i < n * (r + 1) / ranges; ++i) bits += unit.code_bits[ExponentOf(words[i])];
      range_bits[r + 1] = bits;
    }
  });
  for (int64_t r = 0; r < ranges; ++r) range_bits[r + 1] += range_bits[r];
  const uint64_t total_bits = range_bits[ranges];
  const uint64_t num_bytes = (total_bits + 7) / 8;
  const uint64_t chunk_bits = static_cast<uint64_t>(threads_per_block) * kBytesPerWindow * 8;
  const uint64_t num_chunks = (num_bytes * 8 + chunk_bits - 1) / chunk_bits;
  const uint64_t padded_windows = num_chunks * threads_per_block;

  std::vector<uint64_t> stream((num_bytes + 7) / 8 + 1, 0);
  std::vector<uint8_t> window_gap(padded_windows, 0);
  std::vector<uint32_t> chunk_start(num_chunks + 1, static_cast<uint32_t>(n));
  unit.sign_mantissa.resize(n);

  // Pass 2: write codes; record the first code of every window and chunk.
  ParallelFor(ranges, threads, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint64_t begin = n * r / ranges, end = n * (r + 1) / ranges;
      if (begin == end) continue;
      uint64_t bit = range_bits[r];
      RangeWriter w{stream, bit / 64};
      w.word = bit / 64;
      w.used = static_cast<int>(bit % 64);
      // The previous element's start decides whether element `begin` opens a window.
      uint64_t prev_window = UINT64_MAX;
      if (begin > 0) {
        const uint64_t prev_start = bit - unit.code_bits[ExponentOf(words[begin - 1])];
        prev_window = prev_start / 64;
      }
      for (uint64_t i = begin; i < end; ++i) {
        const uint8_t e = ExponentOf(words[i]);
        const uint64_t window = bit / 64;
        if (window != prev_window) {
          window_gap[window] = static_cast<uint8_t>(bit % 64);
          const uint64_t chunk = bit / chunk_bits;
          if (prev_window == UINT64_MAX || prev_window * 64 / chunk_bits != chunk) {
            chunk_start[chunk] = static_cast<uint32_t>(i);
          }
          prev_window = window;
        }
        w.Put(codes[e], unit.code_bits[e]);
        bit += unit.code_bits[e];
        unit.sign_mantissa[i] = SignMantissaOf(words[i]);
      }
      if (w.used > 0) w.Flush(true);
    }
  });

  unit.encoded_exponent.resize(num_bytes);
  for (uint64_t b = 0; b < num_bytes; ++b) unit.encoded_exponent[b] = static_cast<uint8_t>(stream[b / 8] >> (56 - 8 * (b % 8)));
  unit.output_positions.resize(4 * (num_chunks + 1));
  for (uint64_t c = 0; c <= num_chunks; ++c) {
    for (int k = 0; k < 4; ++k) unit.output_positions[4 * c + k] = static_cast<uint8_t>(chunk_start[c] >> (8 * k));
  }
  unit.gaps.assign((padded_windows * 5 + 7) / 8, 0);
  for (uint64_t g = 0; g < padded_windows; ++g) {
    const uint64_t bit = g * 5;
    const uint32_t v = static_cast<uint32_t>(window_gap[g]) << (11 - bit % 8);
    unit.gaps[bit / 8] |= static_cast<uint8_t>(v >> 8);
    if (bit / 8 + 1 < unit.gaps.size()) unit.gaps[bit / 8 + 1] |= static_cast<uint8_t>(v);
  }
  return unit;
}

}  // namespace df11
