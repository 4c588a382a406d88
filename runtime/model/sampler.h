// Sampler: picks the next token of one request from its logits row. Penalties, temperature,
// top-k, top-p and min-p as the OpenAI/vLLM parameters define them; randomness from a
// counter-based generator keyed by (seed, step) only, so a request samples the same tokens
// whatever batch it runs in and however often it is replayed.
// Thread-safety: pure functions; safe to call concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/base/status.h"

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
  int64_t top_logprobs = 0;  // how many of the most likely tokens to report
};

// What the request has seen so far (for penalties) and which sample this is.
struct SampleContext {
  std::span<const int32_t> prompt_tokens;
  std::span<const int32_t> output_tokens;
  uint64_t step = 0;  // index of the token being sampled among the request's outputs
  // false: skip the log-softmax over the vocabulary (SampleResult::logprob stays 0, top empty);
  // the engine asks for it only when the request wants logprobs.
  bool want_logprobs = true;
};

struct SampleResult {
  int32_t token = 0;
  // Log-probabilities under the model's raw distribution (log_softmax of the logits, before
  // penalties, temperature and truncation), as OpenAI-compatible servers report them.
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // top_logprobs (token, logprob), most likely first
};

// INVALID_ARGUMENT for out-of-range parameters, naming the field: the one check of a request's
// sampling parameters (Engine::Submit runs it once per request).
Status ValidateSamplingParams(const SamplingParams& params);
// One token from a logits row. `params` must have passed ValidateSamplingParams (not checked
// again per token). INVALID_ARGUMENT for an empty row or a row with NaN; token ids in the context
// outside [0, vocab) are INVALID_ARGUMENT too.
StatusOr<SampleResult> Sample(std::span<const float> logits, const SamplingParams& params,
                              const SampleContext& context);

// Counter-based uniform double in [0, 1) from (seed, step): splitmix64 of both, 53-bit mantissa.
double UniformFromCounter(uint64_t seed, uint64_t step);

}  // namespace df11
