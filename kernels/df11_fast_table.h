// A 12-bit decode table derived from a unit's LUTs, used by the CUDA decoder: entry i describes
// the code at the top of any 32-bit peek whose top 12 bits are i, as (code_bits << 8) | symbol,
// or 0 when those 12 bits do not settle the LUT walk (then the kernel walks the LUTs).
// It is a memo of the LUT walk, exact for every validated unit by construction.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace df11 {

inline constexpr int kFastTableBits = 12;
inline constexpr int kFastTableSize = 1 << kFastTableBits;

// `luts` must have passed ValidateUnit.
std::array<uint16_t, kFastTableSize> BuildFastTable(std::span<const uint8_t> luts);

// Pair table: entry i decodes up to two codes from the 12 bits i when they settle them:
//   bits 0-7 symbol 1, 8-15 symbol 2, 16-21 length 1, 22-27 length 2,
//   28-29 count (0 = walk the LUTs, 1 = one code, 2 = two codes).
// The second code is recorded only when every completion of its known bits gives the same code.
using PairTable = std::array<uint32_t, kFastTableSize>;
PairTable BuildPairTable(std::span<const uint8_t> luts);
inline uint32_t PairCount(uint32_t e) { return e >> 28; }
inline uint32_t PairSymbol1(uint32_t e) { return e & 0xFF; }
inline uint32_t PairSymbol2(uint32_t e) { return (e >> 8) & 0xFF; }
inline uint32_t PairBits1(uint32_t e) { return (e >> 16) & 63; }
inline uint32_t PairBits2(uint32_t e) { return (e >> 22) & 63; }

}  // namespace df11
