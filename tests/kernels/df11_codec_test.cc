// DF11 codec round trips on adversarial exponent distributions, random access, code limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kernels/df11_code.h"
#include "kernels/df11_fast_table.h"
#include "kernels/df11_codec.h"
#include "tests/kernels/df11_test_util.h"

namespace df11 {
namespace {

using testing::FibonacciWeights;
using testing::GaussianWeights;
using testing::WeightsWithExponents;

// Encodes, validates, decodes whole (reference and fast decoder) and checks every bit; returns
// the unit.
EncodedUnit RoundTrip(const std::vector<uint16_t>& words, int threads = 0) {
  auto enc = EncodeUnit(words, threads);
  EXPECT_TRUE(enc.ok()) << enc.status().ToString();
  if (!enc.ok()) return {};
  auto layout = ValidateUnit(enc->view(), "unit");
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  if (!layout.ok()) return {};
  EXPECT_EQ(layout->num_elements, words.size());
  std::vector<uint16_t> out(words.size(), 0xDEAD);
  Status s = DecodeUnitCpu(enc->view(), *layout, 0, words.size(), out.data(), threads, "unit");
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < words.size(); ++i) {
    if (out[i] != words[i]) {
      ADD_FAILURE() << "element " << i << " of " << words.size() << ": got " << out[i] << " want " << words[i];
      break;
    }
  }
  std::vector<uint16_t> fast(words.size(), 0xDEAD);
  s = DecodeUnitCpuFast(enc->view(), *layout, 0, words.size(), fast.data(), threads, "unit");
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(fast == words) << "DecodeUnitCpuFast differs from the input";
  return std::move(enc).value();
}

// ExponentHistogram counts every word once, whatever its length (0..9 and a long run of one
// exponent, where its four interleaved counters all take the same symbol) and thread count,
// against counts worked out here: word v = i << 7 has exponent i % 256.
TEST(Df11Codec, ExponentHistogramCountsEveryWord) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{9}}) {
    std::vector<uint16_t> words(n);
    for (size_t i = 0; i < n; ++i) words[i] = static_cast<uint16_t>((i % 256) << 7);
    for (int threads : {1, 2, 3}) {
      const auto h = ExponentHistogram(words, threads);
      for (int e = 0; e < 256; ++e) EXPECT_EQ(h[e], static_cast<size_t>(e) < n ? 1u : 0u) << "n " << n << " e " << e;
    }
  }
  std::vector<uint16_t> run(100003, static_cast<uint16_t>((120 << 7) | 0x8001));  // sign and mantissa set
  run[7] = static_cast<uint16_t>(3 << 7);
  for (int threads : {1, 4}) {
    const auto h = ExponentHistogram(run, threads);
    EXPECT_EQ(h[120], 100002u);
    EXPECT_EQ(h[3], 1u);
    EXPECT_EQ(std::accumulate(h.begin(), h.end(), uint64_t{0}), 100003u);
  }
}

TEST(Df11Codec, GaussianRoundTripAndRatio) {
  auto words = GaussianWeights(1 << 20, 0.02f, 1);
  EncodedUnit unit = RoundTrip(words);
  const double bits_per_exponent = unit.encoded_exponent.size() * 8.0 / words.size();
  EXPECT_GT(bits_per_exponent, 2.3);
  EXPECT_LT(bits_per_exponent, 3.0);
}

TEST(Df11Codec, OneSymbolOnly) {
  for (size_t n : {1, 2, 7, 4095, 4096, 4097, 100000}) {
    std::vector<uint16_t> words(n, 0x3F80);  // 1.0
    for (size_t i = 0; i < n; i += 3) words[i] = 0xBF85;  // -1.04: same exponent
    EncodedUnit unit = RoundTrip(words);
    EXPECT_EQ(unit.code_bits[127], 1);
  }
}

TEST(Df11Codec, AllUsableSymbols) {
  std::vector<int> exps(240);
  std::iota(exps.begin(), exps.end(), 0);
  std::vector<double> uniform(240, 1.0), skewed(240);
  for (int i = 0; i < 240; ++i) skewed[i] = std::pow(0.8, i % 40) + 1e-6;
  RoundTrip(WeightsWithExponents(300000, exps, uniform, 2));
  RoundTrip(WeightsWithExponents(300000, exps, skewed, 3));
}

TEST(Df11Codec, FibonacciForcesThe32BitLimit) {
  // 34 symbols with Fibonacci counts (14.9M elements): unlimited Huffman depth would be 33.
  auto words = FibonacciWeights(34, 4);
  EncodedUnit unit = RoundTrip(words);
  const int max_len = *std::max_element(unit.code_bits.begin(), unit.code_bits.end());
  EXPECT_LE(max_len, 32);
  EXPECT_GT(max_len, 8);  // still needs nested tables
}

TEST(Df11Codec, CodesOf25To32BitsUseFourTableLevels) {
  // 30 Fibonacci counts (2.2M elements): Huffman depth 29 fits the limit as is.
  auto words = FibonacciWeights(30, 8);
  EncodedUnit unit = RoundTrip(words);
  EXPECT_EQ(*std::max_element(unit.code_bits.begin(), unit.code_bits.end()), 29);
  EXPECT_EQ(unit.num_luts(), 5);  // root + one table per continued byte + lengths row
}

TEST(Df11Codec, LengthLimitOnLongFibonacciHistogram) {
  std::array<uint64_t, 256> h{};
  uint64_t a = 1, b = 1;
  for (int s = 0; s < 60; ++s) {  // depth 59 unlimited; counts up to ~1.5e12
    h[s + 60] = a;
    const uint64_t c = a + b;
    a = b;
    b = c;
  }
  auto lengths = BuildCodeLengths(h);
  ASSERT_TRUE(lengths.ok());
  EXPECT_LE(*std::max_element(lengths->begin(), lengths->end()), 32);
  EXPECT_TRUE(BuildLuts(*lengths).ok());
}

TEST(Df11Codec, SizesAroundWindowAndChunkBoundaries) {
  // 4096 bytes = one chunk of stream; with 8-bit codes (uniform over 256 -> 240 symbols ~7.9
  // bits) a chunk holds ~4150 elements, so sweep sizes around the boundaries.
  std::vector<int> exps(240);
  std::iota(exps.begin(), exps.end(), 0);
  std::vector<double> uniform(240, 1.0);
  for (size_t n : {1, 2, 3, 8, 63, 64, 65, 4095, 4096, 4097, 4150, 4200, 8191, 8192, 8193, 12500}) {
    RoundTrip(WeightsWithExponents(n, exps, uniform, static_cast<uint32_t>(n)));
    RoundTrip(GaussianWeights(n, 0.02f, static_cast<uint32_t>(n) + 7));
  }
}

TEST(Df11Codec, SignedZerosAndSubnormals) {
  std::vector<uint16_t> words;
  words.reserve(5000);
  for (int i = 0; i < 5000; ++i) {
    words.push_back(i % 4 == 0 ? 0x0000 : i % 4 == 1 ? 0x8000 : static_cast<uint16_t>((i % 2) << 15 | (i % 127 + 1)));
  }
  RoundTrip(words);
}

TEST(Df11Codec, SingleThreadAndManyThreadsAgree) {
  auto words = GaussianWeights(700000, 0.02f, 5);
  EncodedUnit a = RoundTrip(words, 1);
  EncodedUnit b = RoundTrip(words, 8);
  EXPECT_EQ(a.encoded_exponent, b.encoded_exponent);
  EXPECT_EQ(a.gaps, b.gaps);
  EXPECT_EQ(a.output_positions, b.output_positions);
}

TEST(Df11Codec, RandomAccessRanges) {
  auto words = GaussianWeights(200000, 0.05f, 6);
  auto enc = EncodeUnit(words);
  ASSERT_TRUE(enc.ok());
  auto layout = ValidateUnit(enc->view(), "u");
  ASSERT_TRUE(layout.ok());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    uint64_t a = rng() % words.size(), b = rng() % words.size();
    if (a > b) std::swap(a, b);
    if (trial % 10 == 0) b = std::min<uint64_t>(words.size(), a + 1);
    std::vector<uint16_t> out(b - a, 0xDEAD);
    ASSERT_TRUE(DecodeUnitCpu(enc->view(), *layout, a, b, out.data(), 2, "u").ok());
    ASSERT_TRUE(std::equal(out.begin(), out.end(), words.begin() + a)) << "range " << a << ".." << b;
  }
  std::vector<uint16_t> out(1);
  EXPECT_EQ(DecodeUnitCpu(enc->view(), *layout, 5, words.size() + 1, out.data(), 1, "u").code(),
            StatusCode::kOutOfRange);
}

// Damaged streams: the fast decoder reports exactly what the reference reports (same status
// code), and when both succeed (a flip that still parses) the same words.
TEST(Df11Codec, FastDecoderAgreesWithReferenceOnDamagedStreams) {
  auto words = GaussianWeights(50000, 0.02f, 11);
  auto enc = EncodeUnit(words);
  ASSERT_TRUE(enc.ok());
  std::mt19937 rng(12);
  int losses = 0;
  for (int trial = 0; trial < 100; ++trial) {
    EncodedUnit damaged = *enc;
    std::vector<uint8_t>& stream = damaged.encoded_exponent;
    if (trial % 4 == 0) {
      stream.resize(stream.size() - 1 - rng() % 64);  // truncated: the last chunks run dry
    } else {
      stream[rng() % stream.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    }
    auto layout = ValidateUnit(damaged.view(), "u");
    if (!layout.ok()) continue;
    std::vector<uint16_t> ref(words.size()), fast(words.size());
    const Status a = DecodeUnitCpu(damaged.view(), *layout, 0, words.size(), ref.data(), 1, "u");
    const Status b = DecodeUnitCpuFast(damaged.view(), *layout, 0, words.size(), fast.data(), 1, "u");
    ASSERT_EQ(a.code(), b.code()) << "trial " << trial << ": " << a.ToString() << " vs " << b.ToString();
    if (a.ok()) {
      ASSERT_TRUE(ref == fast) << "trial " << trial;
    }
    losses += a.code() == StatusCode::kDataLoss;
  }
  EXPECT_GT(losses, 10);  // the damage is detected, not just tolerated
}

TEST(Df11Codec, ExponentsAbove239AreRefused) {
  std::vector<uint16_t> words(100, 0x3F80);
  words[42] = 0x7F80;  // +inf, exponent 255
  auto enc = EncodeUnit(words);
  ASSERT_FALSE(enc.ok());
  EXPECT_NE(enc.status().message().find("255"), std::string::npos) << enc.status().message();
}

TEST(Df11Codec, CanonicalCodesArePrefixFree) {
  std::array<uint8_t, 256> lengths{};
  lengths[1] = 1;
  lengths[2] = 2;
  lengths[3] = 3;
  lengths[4] = 3;
  auto codes = CanonicalCodes(lengths);
  EXPECT_EQ(codes[1], 0b0u);
  EXPECT_EQ(codes[2], 0b10u);
  EXPECT_EQ(codes[3], 0b110u);
  EXPECT_EQ(codes[4], 0b111u);
}

TEST(Df11Codec, EntropyOfUniformHistogram) {
  std::array<uint64_t, 256> h{};
  for (int i = 0; i < 16; ++i) h[i] = 10;
  EXPECT_DOUBLE_EQ(HistogramEntropyBits(h), 4.0);
}

}  // namespace
}  // namespace df11

namespace df11 {
namespace {

// The CUDA decoder's 12-bit table must agree with the LUT walk for every 12-bit prefix that
// settles a code. Checked on the CPU against a direct walk.
TEST(Df11FastTable, AgreesWithLutWalk) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto words = seed == 3 ? testing::FibonacciWeights(30, seed) : testing::GaussianWeights(50000, seed * 0.01f, seed);
    auto enc = EncodeUnit(words);
    ASSERT_TRUE(enc.ok());
    const auto table = BuildFastTable(enc->luts);
    const uint8_t* lengths = &enc->luts[static_cast<size_t>(enc->num_luts() - 1) * 256];
    int settled = 0;
    for (uint32_t i = 0; i < kFastTableSize; ++i) {
      for (uint32_t low : {0u, 0xFFFFFu, 0x5A5A5u}) {
        const uint32_t peek = i << 20 | low;
        int t = 0;
        uint8_t sym = 0;
        for (int level = 0; level < 4; ++level) {
          sym = enc->luts[t * 256 + ((peek >> (24 - 8 * level)) & 0xFF)];
          if (sym < 240) break;
          t = 256 - sym;
        }
        if (table[i] != 0) {
          ASSERT_EQ(table[i] & 0xFF, sym) << "prefix " << i;
          ASSERT_EQ(table[i] >> 8, lengths[sym]) << "prefix " << i;
        }
      }
      settled += table[i] != 0;
    }
    EXPECT_GT(settled, kFastTableSize * 9 / 10);
  }
}

}  // namespace
}  // namespace df11

namespace df11 {
namespace {

uint32_t WalkSymbol(const std::vector<uint8_t>& luts, uint32_t peek) {
  int t = 0;
  uint8_t sym = 0;
  for (int level = 0; level < 4; ++level) {
    sym = luts[t * 256 + ((peek >> (24 - 8 * level)) & 0xFF)];
    if (sym < 240) break;
    t = 256 - sym;
  }
  return sym;
}

// The pair table's second code must be what the LUT walk gives at bit bits1, for any bits that
// follow the 12 known ones.
TEST(Df11FastTable, PairTableAgreesWithLutWalk) {
  std::mt19937 rng(9);
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto words = seed == 3 ? testing::FibonacciWeights(30, seed) : testing::GaussianWeights(50000, seed * 0.01f, seed);
    auto enc = EncodeUnit(words);
    ASSERT_TRUE(enc.ok());
    const auto pairs = BuildPairTable(enc->luts);
    const uint8_t* lengths = &enc->luts[static_cast<size_t>(enc->num_luts() - 1) * 256];
    int doubles = 0;
    for (uint32_t i = 0; i < kFastTableSize; ++i) {
      const uint32_t e = pairs[i];
      if (PairCount(e) == 0) continue;
      for (int trial = 0; trial < 8; ++trial) {
        const uint64_t bits = static_cast<uint64_t>(i) << 52 | (static_cast<uint64_t>(rng()) << 20 | rng() >> 12);
        const uint32_t s1 = WalkSymbol(enc->luts, static_cast<uint32_t>(bits >> 32));
        ASSERT_EQ(PairSymbol1(e), s1);
        ASSERT_EQ(PairBits1(e), lengths[s1]);
        if (PairCount(e) == 2) {
          const uint32_t s2 = WalkSymbol(enc->luts, static_cast<uint32_t>((bits << PairBits1(e)) >> 32));
          ASSERT_EQ(PairSymbol2(e), s2) << "prefix " << i;
          ASSERT_EQ(PairBits2(e), lengths[s2]);
        }
      }
      doubles += PairCount(e) == 2;
    }
    if (seed == 1) {
      EXPECT_GT(doubles, kFastTableSize / 2);  // Gaussian weights: most lookups give two codes
    }
  }
}

}  // namespace
}  // namespace df11
