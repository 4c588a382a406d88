// Token sampling (see sampler.h): the request's context becomes penalty entries, and the row is
// sampled by the kernels' CPU twin (kernels/sampling.h), the same math as the CUDA sampler.
#include "runtime/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace df11 {

Status ValidateSamplingParams(const SamplingParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) return InvalidArgument("temperature must be >= 0");
  if (p.top_k < 0) return InvalidArgument("top_k must be >= 0");
  if (!(p.top_p > 0 && p.top_p <= 1)) return InvalidArgument("top_p must be in (0, 1]");
  if (!(p.min_p >= 0 && p.min_p <= 1)) return InvalidArgument("min_p must be in [0, 1]");
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty)) {
    return InvalidArgument("repetition_penalty must be > 0");
  }
  if (!std::isfinite(p.presence_penalty)) return InvalidArgument("presence_penalty must be finite");
  if (!std::isfinite(p.frequency_penalty)) return InvalidArgument("frequency_penalty must be finite");
  if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs) {
    return InvalidArgument("top_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "]");
  }
  return Status::Ok();
}

StatusOr<std::vector<PenaltyEntry>> PenaltyEntries(const SamplingParams& p, const SampleContext& ctx, int64_t vocab) {
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool counts = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  std::vector<PenaltyEntry> entries;
  if (!repetition && !counts) return entries;
  // Linear in the context (this runs for every penalised row of every step): each distinct
  // token's entry is found through a per-thread index over the vocabulary, token -> entry + 1,
  // which is cleared again before returning; then the distinct tokens are sorted.
  thread_local std::vector<int32_t> index;
  if (static_cast<int64_t>(index.size()) < vocab) index.resize(vocab, 0);
  int32_t bad = -1;
  bool bad_seen = false;
  auto add = [&](int32_t t, bool output) {
    if (t < 0 || t >= vocab) {
      if (!bad_seen) bad = t;
      bad_seen = true;
      return;
    }
    int32_t& slot = index[t];
    if (slot == 0) {
      entries.push_back({.token = t, .seen = repetition ? 1 : 0});
      slot = static_cast<int32_t>(entries.size());
    }
    if (output) ++entries[slot - 1].output_count;
  };
  if (repetition) {
    for (int32_t t : ctx.prompt_tokens) add(t, false);
  }
  for (int32_t t : ctx.output_tokens) add(t, true);
  for (const PenaltyEntry& e : entries) index[e.token] = 0;
  if (bad_seen) {
    return InvalidArgument("sampling: context token " + std::to_string(bad) + " outside [0, " + std::to_string(vocab) +
                           ")");
  }
  std::sort(entries.begin(), entries.end(),
            [](const PenaltyEntry& x, const PenaltyEntry& y) { return x.token < y.token; });
  return entries;
}

StatusOr<SampleResult> Sample(std::span<const float> row, const SamplingParams& params, const SampleContext& ctx) {
  DF11_ASSIGN_OR_RETURN(const std::vector<PenaltyEntry> entries,
                        PenaltyEntries(params, ctx, static_cast<int64_t>(row.size())));
  return SampleRow(row, params, entries, ctx.step, ctx.want_logprobs);
}

}  // namespace df11
