// DF11 units whose bytes were worked out by hand from the format definition (not produced by our
// encoder), and the malformed-unit cases: each must fail with a message that says what is wrong.
#include <gtest/gtest.h>

#include "kernels/df11_codec.h"

namespace df11 {
namespace {

// Exponents 127 ("0"), 126 ("10"), 128 ("11"). Weights 1.0, 0.5, 2.0, -1.0, 1.0 (bf16 0x3F80,
// 0x3F00, 0x4000, 0xBF80, 0x3F80) -> exponent codes 0 10 11 0 0 = 0101100(0) = 0x58.
struct ThreeSymbolUnit {
  std::vector<uint8_t> luts = std::vector<uint8_t>(2 * 256, 0);
  std::vector<uint8_t> stream{0x58};
  std::vector<uint8_t> sign_mantissa{0x00, 0x00, 0x00, 0x80, 0x00};
  std::vector<uint8_t> positions{0, 0, 0, 0, 5, 0, 0, 0};  // u32 LE [0, 5]
  std::vector<uint8_t> gaps = std::vector<uint8_t>(320, 0);  // 512 windows x 5 bits, all 0
  ThreeSymbolUnit() {
    for (int b = 0x00; b <= 0x7F; ++b) luts[b] = 127;
    for (int b = 0x80; b <= 0xBF; ++b) luts[b] = 126;
    for (int b = 0xC0; b <= 0xFF; ++b) luts[b] = 128;
    luts[256 + 127] = 1;
    luts[256 + 126] = 2;
    luts[256 + 128] = 2;
  }
  UnitView view() const { return {luts, stream, sign_mantissa, positions, gaps, 512}; }
};

TEST(Df11Handmade, ThreeSymbolUnitDecodes) {
  ThreeSymbolUnit u;
  auto layout = ValidateUnit(u.view(), "hand");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  std::vector<uint16_t> out(5);
  ASSERT_TRUE(DecodeUnitCpu(u.view(), *layout, 0, 5, out.data(), 1, "hand").ok());
  EXPECT_EQ(out, (std::vector<uint16_t>{0x3F80, 0x3F00, 0x4000, 0xBF80, 0x3F80}));
}

TEST(Df11Handmade, EncoderWritesTheHandWorkedBytes) {
  ThreeSymbolUnit u;
  auto enc = EncodeUnit(std::vector<uint16_t>{0x3F80, 0x3F00, 0x4000, 0xBF80, 0x3F80}, 1);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->luts, u.luts);
  EXPECT_EQ(enc->encoded_exponent, u.stream);
  EXPECT_EQ(enc->sign_mantissa, u.sign_mantissa);
  EXPECT_EQ(enc->output_positions, u.positions);
  EXPECT_EQ(enc->gaps, u.gaps);
}

// A two-level code: 127 "0", 126 "10", ..., 120 "11111110", then 119 "111111110" and 118
// "111111111" continue in table 1 (root[0xFF] = 255 -> table 256-255 = 1).
// Sequence 118, 127, 119: 111111111 0 111111110 -> 11111111 10111111 110(00000) = FF BF C0.
TEST(Df11Handmade, TwoLevelTablesDecode) {
  std::vector<uint8_t> luts(3 * 256, 0);
  int b = 0;
  for (int len = 1; len <= 8; ++len) {
    const int span = 256 >> len;
    for (int k = 0; k < span; ++k) luts[b++] = static_cast<uint8_t>(128 - len);
    luts[2 * 256 + 128 - len] = static_cast<uint8_t>(len);
  }
  ASSERT_EQ(b, 255);
  luts[255] = 255;                                    // continue in table 1
  for (int k = 0; k < 128; ++k) luts[256 + k] = 119;  // 1111111 1|0...
  for (int k = 128; k < 256; ++k) luts[256 + k] = 118;
  luts[2 * 256 + 119] = 9;
  luts[2 * 256 + 118] = 9;
  std::vector<uint8_t> stream{0xFF, 0xBF, 0xC0};
  std::vector<uint8_t> sm{0x01, 0x82, 0x7F};
  std::vector<uint8_t> positions{0, 0, 0, 0, 3, 0, 0, 0};
  std::vector<uint8_t> gaps(320, 0);
  UnitView view{luts, stream, sm, positions, gaps, 512};
  auto layout = ValidateUnit(view, "hand2");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->max_code_bits, 9);
  std::vector<uint16_t> out(3);
  ASSERT_TRUE(DecodeUnitCpu(view, *layout, 0, 3, out.data(), 1, "hand2").ok());
  // 118<<7 | 1 = 0x3B01; sign + 127<<7 | 2 = 0xBF82; 119<<7 | 0x7F = 0x3BFF.
  EXPECT_EQ(out, (std::vector<uint16_t>{0x3B01, 0xBF82, 0x3BFF}));
}

// A window whose first code starts after bit 0: two windows, the second starting at bit 3.
// Window 0 holds 64 one-bit codes for 127 ("0") then window 1 begins with the tail of nothing:
// stream = 8 zero bytes (64 x "0"), then "11" "10" "0" = 0b11100 -> 0xE0 with gap 0.
// Instead we make window 1 start mid-code: codes 126 ("10") x 32 fill bits 0..63 exactly; then a
// 128 code "11" at bits 64..65 -> window 1 gap 0. To get gap 1: 63 bits of "0" then "10" crossing
// bits 63..64, then "0" at bit 65: gap of window 1 = 1.
TEST(Df11Handmade, GapSkipsTheTailOfACodeFromThePreviousWindow) {
  ThreeSymbolUnit u;
  u.stream = std::vector<uint8_t>(9, 0x00);
  u.stream[7] = 0x01;  // bit 63 = 1
  u.stream[8] = 0x00;  // bit 64 = 0 (end of "10"), bit 65 = 0 (code "0")
  // Elements: 63 x 127, one 126, one 127 = 65 elements.
  u.sign_mantissa = std::vector<uint8_t>(65, 0x11);
  u.positions = {0, 0, 0, 0, 65, 0, 0, 0};
  u.gaps[0] = 0b00000000;  // window 0: gap 0
  u.gaps[0] |= 0;          // window 1 gap occupies bits 5..9: value 1 -> bit 9 set
  u.gaps[1] = 0b01000000;
  auto layout = ValidateUnit(u.view(), "hand3");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  std::vector<uint16_t> out(65);
  ASSERT_TRUE(DecodeUnitCpu(u.view(), *layout, 0, 65, out.data(), 1, "hand3").ok());
  for (int i = 0; i < 63; ++i) ASSERT_EQ(out[i], 127 << 7 | 0x11) << i;
  EXPECT_EQ(out[63], 126 << 7 | 0x11);
  EXPECT_EQ(out[64], 127 << 7 | 0x11);
}

void ExpectError(const UnitView& view, StatusCode code, const std::string& needle) {
  auto layout = ValidateUnit(view, "bad");
  Status s = layout.status();
  if (layout.ok()) {
    std::vector<uint16_t> out(layout->num_elements);
    s = DecodeUnitCpu(view, *layout, 0, layout->num_elements, out.data(), 1, "bad");
  }
  ASSERT_FALSE(s.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
}

TEST(Df11Handmade, GapsTooShort) {
  ThreeSymbolUnit u;
  u.gaps.clear();
  ExpectError(u.view(), StatusCode::kDataLoss, "gaps");
}

TEST(Df11Handmade, OutputPositionsNotMonotonicOrPastN) {
  ThreeSymbolUnit u;
  u.positions = {0, 0, 0, 0, 9, 0, 0, 0};
  ExpectError(u.view(), StatusCode::kDataLoss, "past n");
  u.positions = {0, 0, 0, 0};
  u.positions.resize(3);
  ExpectError(u.view(), StatusCode::kDataLoss, "whole number of u32");
  u.positions = {1, 0, 0, 0, 5, 0, 0, 0};
  ExpectError(u.view(), StatusCode::kDataLoss, "start at element 0");
  u.positions = {0, 0, 0, 0, 5, 0, 0, 0, 5, 0, 0, 0};
  ExpectError(u.view(), StatusCode::kDataLoss, "entries, expected 2");
}

TEST(Df11Handmade, NonMonotonicPositions) {
  // Three chunks of stream (8193 bytes); entries 0, 20000, 10000, 40000.
  ThreeSymbolUnit u;
  u.stream = std::vector<uint8_t>(8193, 0);
  u.sign_mantissa = std::vector<uint8_t>(40000, 0);
  u.gaps = std::vector<uint8_t>(960, 0);
  u.positions = {0, 0, 0, 0, 0x20, 0x4E, 0, 0, 0x10, 0x27, 0, 0, 0x40, 0x9C, 0, 0};
  ExpectError(u.view(), StatusCode::kDataLoss, "not monotonic");
}

TEST(Df11Handmade, LutCycleAndMissingRows) {
  ThreeSymbolUnit u;
  u.luts.resize(3 * 256);
  std::copy(u.luts.begin() + 256, u.luts.begin() + 512, u.luts.begin() + 512);  // lengths -> row 2
  std::fill(u.luts.begin() + 256, u.luts.begin() + 512, 127);
  u.luts[0xFF] = 255;        // root -> table 1
  u.luts[256 + 0x10] = 255;  // table 1 -> table 1: a cycle
  ExpectError(u.view(), StatusCode::kDataLoss, "cycle");
  u.luts[256 + 0x10] = 127;
  u.luts[0xFF] = 250;  // table 6 does not exist
  ExpectError(u.view(), StatusCode::kDataLoss, "only 2 decode tables");
  u.luts.resize(256);
  ExpectError(u.view(), StatusCode::kDataLoss, "k >= 2");
}

TEST(Df11Handmade, ZeroCodeLength) {
  ThreeSymbolUnit u;
  u.luts[256 + 126] = 0;
  ExpectError(u.view(), StatusCode::kDataLoss, "code length");
  u.luts[256 + 126] = 33;
  ExpectError(u.view(), StatusCode::kDataLoss, "code length");
}

TEST(Df11Handmade, StreamEndsEarly) {
  ThreeSymbolUnit u;
  u.sign_mantissa.resize(9);  // 9 elements claimed, 5 codes + 3 padding bits in the stream
  u.positions = {0, 0, 0, 0, 9, 0, 0, 0};
  ExpectError(u.view(), StatusCode::kDataLoss, "ends early");
}

TEST(Df11Handmade, ChunkCountDisagreesWithPositions) {
  ThreeSymbolUnit u;
  // Two chunks: the first holds 32768 one-bit codes, but positions claims 30000.
  u.stream = std::vector<uint8_t>(4097, 0);
  u.sign_mantissa = std::vector<uint8_t>(32776, 0);
  u.gaps = std::vector<uint8_t>(640, 0);
  u.positions = {0, 0, 0, 0, 0x30, 0x75, 0, 0, 0x08, 0x80, 0, 0};  // 0, 30000, 32776
  ExpectError(u.view(), StatusCode::kDataLoss, "chunk 0 holds 32768 codes but output_positions says 30000");
}

TEST(Df11Handmade, EmptyUnit) {
  std::vector<uint8_t> luts(512, 0), empty, pos{0, 0, 0, 0};
  luts[256] = 1;
  UnitView view{luts, empty, empty, pos, empty, 512};
  auto layout = ValidateUnit(view, "empty");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->num_elements, 0u);
}

}  // namespace
}  // namespace df11
