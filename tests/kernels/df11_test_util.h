// Test helpers for the DF11 codec: weight generators for adversarial exponent distributions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace df11::testing {

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
