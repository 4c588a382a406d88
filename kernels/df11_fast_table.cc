// Builds the CUDA decoder's 12-bit table from the published LUTs (see df11_fast_table.h).
#include "kernels/df11_fast_table.h"

#include "kernels/df11_format.h"

namespace df11 {

std::array<uint16_t, kFastTableSize> BuildFastTable(std::span<const uint8_t> luts) {
  std::array<uint16_t, kFastTableSize> table{};
  const int rows = static_cast<int>(luts.size() / kLutRowBytes);
  const uint8_t* lengths = luts.data() + static_cast<size_t>(rows - 1) * kLutRowBytes;
  for (int i = 0; i < kFastTableSize; ++i) {
    const uint8_t v = luts[i >> 4];
    if (v < kFirstPointer) {
      table[i] = static_cast<uint16_t>(lengths[v] << 8 | v);
      continue;
    }
    // The walk continues with byte 1, of which only the top 4 bits are known: usable only when
    // all 16 completions give the same symbol.
    const uint8_t* next = luts.data() + static_cast<size_t>(256 - v) * kLutRowBytes;
    const uint8_t first = next[(i & 15) << 4];
    bool same = first < kFirstPointer;
    for (int x = 1; x < 16 && same; ++x) same = next[((i & 15) << 4) | x] == first;
    table[i] = same ? static_cast<uint16_t>(lengths[first] << 8 | first) : 0;
  }
  return table;
}

PairTable BuildPairTable(std::span<const uint8_t> luts) {
  const auto single = BuildFastTable(luts);
  PairTable pairs{};
  for (uint32_t i = 0; i < kFastTableSize; ++i) {
    const uint32_t e1 = single[i];
    if (e1 == 0) continue;  // count 0: walk the LUTs
    const uint32_t bits1 = e1 >> 8;
    uint32_t entry = (e1 & 0xFF) | bits1 << 16 | 1u << 28;
    if (bits1 < kFastTableBits) {
      // The next code starts at bit bits1; its first 12 - bits1 bits are known.
      const uint32_t known = kFastTableBits - bits1;
      const uint32_t head = (i << bits1) & (kFastTableSize - 1);
      const uint32_t e2 = single[head];
      bool settled = e2 != 0 && (e2 >> 8) <= known;
      for (uint32_t x = 1; settled && x < (1u << bits1); ++x) settled = single[head | x] == e2;
      if (settled) entry = (e1 & 0xFF) | (e2 & 0xFF) << 8 | bits1 << 16 | (e2 >> 8) << 22 | 2u << 28;
    }
    pairs[i] = entry;
  }
  return pairs;
}

}  // namespace df11
