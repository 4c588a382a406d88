// Unicode helpers of the tokenizer (UTF-8 itself is kernels/base/utf8.h): White_Space, and canonical normalization
// (NFC/NFD) with the Unicode 9.0 tables that HF `tokenizers` uses (unicode_tables.cc, generated).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/base/utf8.h"

namespace df11::tokenizer_internal {

// Unicode White_Space (Rust char::is_whitespace, regex \s).
bool IsWhiteSpace(char32_t cp);
// Byte length of the leading White_Space of valid UTF-8 `s`.
size_t LeadingSpaceLength(std::string_view s);
// Byte offset where the trailing White_Space of valid UTF-8 `s` starts (s.size() if none).
size_t TrailingSpaceStart(std::string_view s);

// Canonical normalization of valid UTF-8.
std::string NormalizeNfc(std::string_view s);
std::string NormalizeNfd(std::string_view s);

// Generated tables (runtime/tokenizer/unicode_tables.cc).
struct CanonicalDecomposition {
  uint32_t code_point;
  uint32_t first;
  uint32_t second;      // 0: singleton decomposition
  uint32_t composable;  // 1: primary composite (first + second compose back to code_point)
};
struct CombiningClassRange {
  uint32_t first;
  uint32_t last;
  uint32_t ccc;
};
extern const CanonicalDecomposition kCanonicalDecompositions[];
extern const size_t kNumCanonicalDecompositions;
extern const CombiningClassRange kCombiningClassRanges[];
extern const size_t kNumCombiningClassRanges;

}  // namespace df11::tokenizer_internal
