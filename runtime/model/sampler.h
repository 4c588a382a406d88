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
#include "kernels/sampling.h"  // SamplingParams, SampleResult, PenaltyEntry

namespace df11 {

// What the request has seen so far (for penalties) and which sample this is.
struct SampleContext {
  std::span<const int32_t> prompt_tokens;
  std::span<const int32_t> output_tokens;
  uint64_t step = 0;  // index of the token being sampled among the request's outputs
  // false: skip the log-softmax over the vocabulary (SampleResult::logprob stays 0, top empty);
  // the engine asks for it only when the request wants logprobs.
  bool want_logprobs = true;
};

// INVALID_ARGUMENT for out-of-range parameters, naming the field: the one check of a request's
// sampling parameters (Engine::Submit runs it once per request).
Status ValidateSamplingParams(const SamplingParams& params);
// One token from a logits row. `params` must have passed ValidateSamplingParams (not checked
// again per token). INVALID_ARGUMENT for an empty row or a row with NaN; token ids in the context
// outside [0, vocab) are INVALID_ARGUMENT too.
StatusOr<SampleResult> Sample(std::span<const float> logits, const SamplingParams& params,
                              const SampleContext& context);

// The penalties' context of a request as PenaltyEntry rows (one per distinct token, by token id);
// empty when `params` has no penalty. INVALID_ARGUMENT for a token outside [0, vocab).
StatusOr<std::vector<PenaltyEntry>> PenaltyEntries(const SamplingParams& params, const SampleContext& context,
                                                   int64_t vocab);

}  // namespace df11
