// Unicode helpers of the tokenizer: UTF-8 validation/decoding, Rust-compatible lossy decoding,
// White_Space, and canonical normalization (NFC/NFD) with the Unicode 9.0 tables that HF
// `tokenizers` uses (runtime/tokenizer_unicode_tables.cc, generated).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace df11::tokenizer_internal {

// Returns the byte offset of the first invalid UTF-8 sequence, or npos if `s` is valid.
// Valid means well-formed per Unicode: no overlongs, surrogates or code points > U+10FFFF.
size_t FindInvalidUtf8(std::string_view s);

// Decodes the code point starting at s[i] of VALID UTF-8 and advances i.
inline char32_t NextCodePoint(std::string_view s, size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    ++i;
    return b;
  }
  int len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  char32_t cp = b & (0x7F >> len);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

// Byte length of the UTF-8 sequence whose lead byte is `lead` (1 for invalid leads).
inline size_t Utf8SequenceLength(unsigned char lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 1;
}

void AppendUtf8(std::string& out, char32_t cp);
size_t CountCodePoints(std::string_view valid_utf8);

// Rust's String::from_utf8_lossy: each maximal prefix of an ill-formed sequence becomes one
// U+FFFD. With `hold_incomplete`, a trailing sequence that is incomplete but could still become
// valid is not decoded; its length is stored in *held (streaming).
std::string Utf8Lossy(std::string_view bytes, bool hold_incomplete = false, size_t* held = nullptr);

// Unicode White_Space (Rust char::is_whitespace, regex \s).
bool IsWhiteSpace(char32_t cp);

// Canonical normalization of valid UTF-8.
std::string NormalizeNfc(std::string_view s);
std::string NormalizeNfd(std::string_view s);

// Generated tables (runtime/tokenizer_unicode_tables.cc).
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
