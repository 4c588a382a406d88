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
  // (token, from the output) pairs sorted by token; a run of one token becomes one entry.
  std::vector<std::pair<int32_t, bool>> seen;
  seen.reserve(ctx.prompt_tokens.size() + ctx.output_tokens.size());
  if (repetition) {
    for (int32_t t : ctx.prompt_tokens) seen.emplace_back(t, false);
  }
  for (int32_t t : ctx.output_tokens) seen.emplace_back(t, true);
  std::sort(seen.begin(), seen.end());
  for (const auto& [t, output] : seen) {
    if (t < 0 || t >= vocab) {
      return InvalidArgument("sampling: context token " + std::to_string(t) + " outside [0, " +
                             std::to_string(vocab) + ")");
    }
    if (entries.empty() || entries.back().token != t) entries.push_back({.token = t, .seen = repetition ? 1 : 0});
    if (output) ++entries.back().output_count;
  }
  return entries;
}

StatusOr<SampleResult> Sample(std::span<const float> row, const SamplingParams& params, const SampleContext& ctx) {
  DF11_ASSIGN_OR_RETURN(const std::vector<PenaltyEntry> entries,
                        PenaltyEntries(params, ctx, static_cast<int64_t>(row.size())));
  return SampleRow(row, params, entries, ctx.step, ctx.want_logprobs);
}

}  // namespace df11
