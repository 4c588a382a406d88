// Tests of the tokenizer's Unicode helpers: UTF-8 validation, Rust-compatible lossy decoding,
// and NFC/NFD against hand-checked cases of the Unicode normalization algorithm.
#include <gtest/gtest.h>

#include "runtime/tokenizer/unicode.h"

namespace df11::tokenizer_internal {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(TokenizerUnicode, FindInvalidUtf8) {
  EXPECT_EQ(FindInvalidUtf8(""), std::string::npos);
  EXPECT_EQ(FindInvalidUtf8("h\xC3\xA9llo \xF0\x9F\x98\x80"), std::string::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xFF"), 2u);
  EXPECT_EQ(FindInvalidUtf8("a\xC0\xAF"), 1u);           // overlong
  EXPECT_EQ(FindInvalidUtf8("\xED\xA0\x80"), 0u);        // surrogate
  EXPECT_EQ(FindInvalidUtf8("xy\xF4\x90\x80\x80"), 2u);  // > U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("abc\xE2\x82"), 3u);         // truncated
}

TEST(TokenizerUnicode, LossyMatchesRustFromUtf8Lossy) {
  // Each maximal prefix of an ill-formed sequence becomes one U+FFFD.
  EXPECT_EQ(Utf8Lossy("ok"), "ok");
  EXPECT_EQ(Utf8Lossy("\xF0\x90\x80"), kFffd);
  EXPECT_EQ(Utf8Lossy("\xF0\x90\x80"
                      "A"),
            kFffd + "A");
  EXPECT_EQ(Utf8Lossy("\xE0\x80"), Repeat(kFffd, 2));
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), Repeat(kFffd, 3));
  EXPECT_EQ(Utf8Lossy("\xC0\xAF"), Repeat(kFffd, 2));
  EXPECT_EQ(Utf8Lossy("\xF4\x90\x80\x80"), Repeat(kFffd, 4));
  EXPECT_EQ(Utf8Lossy("a\xFF"
                      "b\xE2\x82\xAC"),
            "a" + kFffd + "b\xE2\x82\xAC");
  size_t held = 0;
  EXPECT_EQ(Utf8Lossy("a\xE2\x82", true, &held), "a");
  EXPECT_EQ(held, 2u);
  EXPECT_EQ(Utf8Lossy("a\xE2\x41", true, &held), "a" + kFffd + "A");
  EXPECT_EQ(held, 0u);
}

TEST(TokenizerUnicode, WhiteSpace) {
  for (char32_t cp : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F,
                      0x205F, 0x3000}) {
    EXPECT_TRUE(IsWhiteSpace(cp)) << std::hex << static_cast<uint32_t>(cp);
  }
  for (char32_t cp : {0x00, 0x08, 0x41, 0x200B, 0xFEFF, 0x180E})
    EXPECT_FALSE(IsWhiteSpace(cp)) << std::hex << static_cast<uint32_t>(cp);
}

TEST(TokenizerUnicode, Nfc) {
  EXPECT_EQ(NormalizeNfc(""), "");
  EXPECT_EQ(NormalizeNfc("e\u0301"), "\u00e9");
  EXPECT_EQ(NormalizeNfc("\u212b"), "\u00c5");                    // singleton decomposition
  EXPECT_EQ(NormalizeNfc("\u1100\u1161\u11a8"), "\uac01");        // Hangul L+V+T
  EXPECT_EQ(NormalizeNfc("\uac00\u11a8"), "\uac01");              // Hangul LV+T
  EXPECT_EQ(NormalizeNfc("\u0958"), "\u0915\u093c");              // composition exclusion
  EXPECT_EQ(NormalizeNfc("q\u0307\u0323"), "q\u0323\u0307");      // canonical reordering
  EXPECT_EQ(NormalizeNfc("\u1e0b\u0323"), "\u1e0d\u0307");        // recomposition after reordering
  EXPECT_EQ(NormalizeNfc("a\u0301\u0301"), "\u00e1\u0301");       // second mark is blocked
  EXPECT_EQ(NormalizeNfc("\u0301abc"), "\u0301abc");              // leading combining mark
  EXPECT_EQ(NormalizeNfc("\u0344"), "\u0308\u0301");              // non-starter decomposition
  EXPECT_EQ(NormalizeNfc("\uf900"), "\u8c48");                    // CJK compatibility ideograph
  EXPECT_EQ(NormalizeNfc("\U0001d15e"), "\U0001d157\U0001d165");  // musical symbol (excluded)
}

TEST(TokenizerUnicode, Nfd) {
  EXPECT_EQ(NormalizeNfd("\u00e9"), "e\u0301");
  EXPECT_EQ(NormalizeNfd("\uac01"), "\u1100\u1161\u11a8");
  EXPECT_EQ(NormalizeNfd("\u1e0b\u0323"), "d\u0323\u0307");
  EXPECT_EQ(NormalizeNfd("abc"), "abc");
}

}  // namespace
}  // namespace df11::tokenizer_internal
