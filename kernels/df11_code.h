// Internals of the DF11 encoder, exposed for tests: canonical codes and LUT construction.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/df11_codec.h"

namespace df11 {

// Canonical prefix codes (shortest first, ties by symbol) for the given lengths; right-aligned.
std::array<uint32_t, 256> CanonicalCodes(const std::array<uint8_t, 256>& lengths);

// The published LUT rows for a canonical code with these lengths: the root table, one table per
// byte-prefix of longer codes (ordered by depth, then prefix), then the code-length row.
// INVALID_ARGUMENT when more than kMaxDecodeTables tables would be needed.
StatusOr<std::vector<uint8_t>> BuildLuts(const std::array<uint8_t, 256>& lengths);

}  // namespace df11
