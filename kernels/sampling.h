// Sampling one logits row: the parameters, the result, and the arithmetic both backends run, so
// the CPU twin (SampleRow, sampling.cc) and the CUDA sampler (cuda_sampling.cu) return the same
// bits for the same row.
//
// Order of processing, as vLLM: penalties -> temperature -> top-k -> top-p -> min-p -> one draw
// by inverse CDF over the survivors sorted by logit (ties by token id). Every sum is a "chunked
// sum" in that sorted order (ChunkedSum below): kSampleChunk consecutive terms added one after
// another, then the chunk sums added one after another. The GPU adds each chunk in its own thread
// and the chunk sums in one, so both backends round identically; exp is SampleExp (+, *, ldexp
// only, no library call), and the files that run this math are compiled without FMA contraction
// (-ffp-contract=off, nvcc -fmad=false).
// Randomness: UniformFromCounter(seed, step), so a request samples the same tokens whatever batch
// it runs in and however often it is replayed.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/base/status.h"

#if defined(__CUDACC__)
#define DF11_HOST_DEVICE __host__ __device__
#else
#define DF11_HOST_DEVICE
#endif

namespace df11 {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax, lowest id on ties)
  int64_t top_k = 0;                // 0 = all tokens
  float top_p = 1.0f;               // (0, 1]: smallest prefix of sorted tokens reaching this mass
  float min_p = 0.0f;               // [0, 1]: drop tokens with p < min_p * p_max
  float repetition_penalty = 1.0f;  // > 0; HF style on prompt + output tokens: l > 0 ? l / r : l * r
  float presence_penalty = 0.0f;    // OpenAI style on output tokens: l -= presence if count > 0
  float frequency_penalty = 0.0f;   // OpenAI style on output tokens: l -= frequency * count
  uint64_t seed = 0;
  int64_t top_logprobs = 0;  // how many of the most likely tokens to report, <= kMaxTopLogprobs
};

inline constexpr int kMaxTopLogprobs = 20;

struct SampleResult {
  int32_t token = 0;
  // Log-probabilities under the model's raw distribution (log_softmax of the logits, before
  // penalties, temperature and truncation), as OpenAI-compatible servers report them.
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // top_logprobs (token, logprob), most likely first
};

// A context token the penalties touch, listed once per distinct token of the request.
struct PenaltyEntry {
  int32_t token = 0;         // in [0, vocab)
  int32_t seen = 0;          // 1: in the prompt or the output (repetition penalty)
  int32_t output_count = 0;  // times in the output (presence and frequency penalties)
  float raw = 0.0f;          // CUDA sampler: the logit before penalties (it penalises in place)
};

// Terms per chunk of a chunked sum.
inline constexpr int64_t kSampleChunk = 256;

namespace sampling {

DF11_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Counter-based uniform double in [0, 1) from (seed, step): splitmix64 of both, 53-bit mantissa.
DF11_HOST_DEVICE inline double UniformFromCounter(uint64_t seed, uint64_t step) {
  const uint64_t bits = SplitMix64(SplitMix64(seed) ^ (step * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// exp(x) for x <= 0 within ~2 ulp, the same bits on host and device: Cody-Waite reduction by
// ln 2, a degree-12 Taylor polynomial on |r| <= ln2/2, an exact power-of-two scale. Below -700
// (and for NaN) it returns 0, so no result is subnormal.
DF11_HOST_DEVICE inline double SampleExp(double x) {
  if (!(x > -700.0)) return 0.0;
  const double k = rint(x * 1.4426950408889634);  // round half to even on both
  const double r = (x - k * 0.6931471803691238) - k * 1.9082149292705877e-10;
  double p = 1.0 / 479001600.0;
  const double inv_factorial[] = {
      1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0,
      1.0 / 120.0,      1.0 / 24.0,      1.0 / 6.0,      0.5,           1.0,          1.0};
  for (double c : inv_factorial) p = p * r + c;
  return ldexp(p, static_cast<int>(k));
}

// log(s) for finite s >= 1 (a softmax denominator whose largest term is 1) within ~2 ulp, the
// same bits on host and device: s = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(z),
// z = (m - 1) / (m + 1), by its series.
DF11_HOST_DEVICE inline double SampleLog(double s) {
  int e = 0;
  double m = frexp(s, &e);  // [0.5, 1)
  if (m < 0.7071067811865476) {
    m = m * 2;
    e -= 1;
  }
  const double z = (m - 1) / (m + 1), z2 = z * z;
  double series = 1.0 / 25;
  for (int k = 11; k >= 0; --k) series = series * z2 + 1.0 / (2 * k + 1);
  return 2 * z * series + e * 0.6931471805599453;
}

// The logit after the penalties of one context token (repetition first, then presence and
// frequency), in fp32 as transformers/vLLM apply them.
DF11_HOST_DEVICE inline float Penalized(float l, const PenaltyEntry& e, const SamplingParams& p) {
  if (p.repetition_penalty != 1.0f && e.seen != 0) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
  if ((p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) && e.output_count > 0) {
    l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(e.output_count);
  }
  return l;
}

// The unnormalised probability of a logit given the largest: exp((l - l_max) / temperature).
DF11_HOST_DEVICE inline double Weight(float logit, float max_logit, float temperature) {
  return SampleExp((static_cast<double>(logit) - static_cast<double>(max_logit)) / static_cast<double>(temperature));
}

// Whether (a, id_a) comes before (b, id_b) in the sorted order: larger logit first, then lower id.
DF11_HOST_DEVICE inline bool Before(float a, int32_t id_a, float b, int32_t id_b) {
  return a > b || (a == b && id_a < id_b);
}

// Sum of f(0..n-1) chunk by chunk (see the header comment). f: int64_t -> double.
template <typename F>
double ChunkedSum(int64_t n, F f) {
  double total = 0;
  for (int64_t c = 0; c < n; c += kSampleChunk) {
    double s = 0;
    for (int64_t i = c; i < c + kSampleChunk && i < n; ++i) s += f(i);
    total += s;
  }
  return total;
}

// The smallest m in [1, n] whose prefix mass (the chunk sums before m's chunk added one after
// another, plus the terms of its chunk up to m) reaches `target` (>=, or > when strict); n when
// none does.
template <typename F>
int64_t PrefixCut(int64_t n, double target, bool strict, F f) {
  auto meets = [&](double mass) { return strict ? mass > target : mass >= target; };
  double before = 0;
  for (int64_t c = 0; c < n; c += kSampleChunk) {
    const int64_t end = c + kSampleChunk < n ? c + kSampleChunk : n;
    double s = 0;
    for (int64_t i = c; i < end; ++i) s += f(i);
    if (meets(before + s)) {
      double partial = 0;
      for (int64_t i = c; i < end; ++i) {
        partial += f(i);
        if (meets(before + partial)) return i + 1;
      }
    }
    before += s;
  }
  return n;
}

}  // namespace sampling

// The CPU twin: one token from a logits row. `params` must be valid (ValidateSamplingParams in
// runtime/model/sampler.h); `entries` list distinct tokens in [0, vocab) (empty without
// penalties). INVALID_ARGUMENT for an empty row or a row with NaN. want_logprobs = false skips the
// log-softmax (logprob stays 0, top empty).
StatusOr<SampleResult> SampleRow(std::span<const float> row, const SamplingParams& params,
                                 std::span<const PenaltyEntry> entries, uint64_t step, bool want_logprobs);

}  // namespace df11
