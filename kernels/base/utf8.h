// The one UTF-8 library of the project (tokenizers, Jinja strings, request validation).
// "Valid" means well-formed per Unicode: no overlongs, surrogates or code points > U+10FFFF.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace df11 {

// Returns the byte offset of the first invalid UTF-8 sequence, or npos if `s` is valid.
size_t FindInvalidUtf8(std::string_view s);
inline bool IsValidUtf8(std::string_view s) { return FindInvalidUtf8(s) == std::string_view::npos; }

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

// Appends the UTF-8 encoding of `cp` to *out.
void AppendUtf8(char32_t cp, std::string* out);
// Number of code points of valid UTF-8 (Python len()).
size_t CountCodePoints(std::string_view valid_utf8);

// Rust's String::from_utf8_lossy: each maximal prefix of an ill-formed sequence becomes one
// U+FFFD. With `hold_incomplete`, a trailing sequence that is incomplete but could still become
// valid is not decoded; its length is stored in *held (streaming).
std::string Utf8Lossy(std::string_view bytes, bool hold_incomplete = false, size_t* held = nullptr);

}  // namespace df11
