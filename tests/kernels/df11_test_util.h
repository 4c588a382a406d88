// Test helpers for the kernels (and the layers above them): weight generators for adversarial
// exponent distributions, and the relative error the tests bound.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace df11::testing {

// max_i |a_i - b_i| / max_i |b_i| over n elements; infinite where a_i is NaN and b_i is not (std::max
// would skip it).
inline double MaxRelDiff(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) && !std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / std::max(den, 1e-30);
}
inline double MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  return MaxRelDiff(a.data(), b.data(), std::min(a.size(), b.size()));
}

inline uint16_t Bf16FromFloat(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

// Gaussian weights (like real LLM matrices).
inline std::vector<uint16_t> GaussianWeights(size_t n, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<uint16_t> w(n);
  for (auto& x : w) x = Bf16FromFloat(dist(rng));
  return w;
}

// Words with exponents drawn from `exponents` per `weights`, random sign and mantissa.
inline std::vector<uint16_t> WeightsWithExponents(size_t n, const std::vector<int>& exponents,
                                                  const std::vector<double>& weights, uint32_t seed) {
  std::mt19937 rng(seed);
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  std::vector<uint16_t> w(n);
  for (auto& x : w) {
    const uint32_t r = rng();
    x = static_cast<uint16_t>((r & 0x8000) | (exponents[pick(rng)] << 7) | (r & 0x7F));
  }
  return w;
}

// Fibonacci frequencies over `count` exponents: Huffman depths grow by one per symbol, so an
// unlimited code would exceed 32 bits for count > 33.
inline std::vector<uint16_t> FibonacciWeights(int count, uint32_t seed) {
  std::vector<uint64_t> f{1, 1};
  while (static_cast<int>(f.size()) < count) f.push_back(f[f.size() - 1] + f[f.size() - 2]);
  std::vector<uint16_t> w;
  std::mt19937 rng(seed);
  for (int s = 0; s < count; ++s) {
    for (uint64_t k = 0; k < f[s]; ++k) w.push_back(static_cast<uint16_t>((rng() & 0x807F) | ((s + 1) << 7)));
  }
  std::shuffle(w.begin(), w.end(), rng);
  return w;
}

}  // namespace df11::testing
