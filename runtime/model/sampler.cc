// Token sampling (see sampler.h). Order of processing, as vLLM: penalties -> temperature ->
// top-k -> top-p -> min-p -> one draw by inverse CDF over the survivors sorted by probability
// (ties by token id, so the order and the draw are deterministic).
#include "runtime/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>

namespace df11 {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// log_softmax of `row` into out (double for a stable sum).
std::vector<float> LogSoftmax(std::span<const float> row) {
  const float mx = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - mx);
  const double log_sum = std::log(sum) + mx;
  std::vector<float> out(row.size());
  for (size_t i = 0; i < row.size(); ++i) out[i] = static_cast<float>(row[i] - log_sum);
  return out;
}

Status ApplyPenalties(std::vector<float>& logits, const SamplingParams& p, const SampleContext& ctx) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  auto check = [&](int32_t t) {
    return t >= 0 && t < vocab ? Status::Ok()
                               : InvalidArgument("sampling: context token " + std::to_string(t) + " outside [0, " +
                                                 std::to_string(vocab) + ")");
  };
  if (p.repetition_penalty != 1.0f) {
    std::vector<bool> seen(vocab, false);
    for (auto tokens : {ctx.prompt_tokens, ctx.output_tokens}) {
      for (int32_t t : tokens) {
        DF11_RETURN_IF_ERROR(check(t));
        seen[t] = true;
      }
    }
    for (int64_t t = 0; t < vocab; ++t) {
      if (seen[t]) logits[t] = logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int64_t> counts;
    for (int32_t t : ctx.output_tokens) {
      DF11_RETURN_IF_ERROR(check(t));
      ++counts[t];
    }
    for (const auto& [t, n] : counts) logits[t] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
  }
  return Status::Ok();
}

// Candidates sorted by logit (desc, then id), truncated by top-k/top-p/min-p; returns their
// probabilities (renormalised over the survivors) in `probs`.
std::vector<int32_t> Truncate(const std::vector<float>& logits, const SamplingParams& p, std::vector<double>& probs) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t keep = order.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
    keep = p.top_k;
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), by_logit);
    order.resize(keep);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  const double mx = logits[order[0]];
  probs.resize(order.size());
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i) sum += probs[i] = std::exp((logits[order[i]] - mx) / p.temperature);
  for (double& q : probs) q /= sum;
  if (p.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p (at least one token)
    double mass = 0;
    size_t n = 0;
    while (n < probs.size() && (n == 0 || mass < p.top_p)) mass += probs[n++];
    order.resize(n);
    probs.resize(n);
  }
  if (p.min_p > 0.0f) {
    const double floor = p.min_p * probs[0];
    size_t n = 1;
    while (n < probs.size() && probs[n] >= floor) ++n;
    order.resize(n);
    probs.resize(n);
  }
  const double kept = std::accumulate(probs.begin(), probs.end(), 0.0);
  for (double& q : probs) q /= kept;
  return order;
}

}  // namespace

double UniformFromCounter(uint64_t seed, uint64_t step) {
  const uint64_t bits = SplitMix64(SplitMix64(seed) ^ (step * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

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
  if (p.top_logprobs < 0) return InvalidArgument("top_logprobs must be >= 0");
  return Status::Ok();
}

StatusOr<SampleResult> Sample(std::span<const float> row, const SamplingParams& params, const SampleContext& ctx) {
  if (row.empty()) return InvalidArgument("sampling: empty logits row");
  for (float v : row) {
    if (std::isnan(v)) return InvalidArgument("sampling: logits contain NaN");
  }
  const bool penalties = params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
                         params.frequency_penalty != 0.0f;
  std::vector<float> penalized;
  if (penalties) {
    penalized.assign(row.begin(), row.end());
    DF11_RETURN_IF_ERROR(ApplyPenalties(penalized, params, ctx));
  }
  const std::span<const float> logits = penalties ? std::span<const float>(penalized) : row;
  SampleResult result;
  if (params.temperature == 0.0f) {
    result.token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  } else {
    std::vector<double> probs;
    const std::vector<int32_t> order = Truncate(std::vector<float>(logits.begin(), logits.end()), params, probs);
    const double u = UniformFromCounter(params.seed, ctx.step);
    double cdf = 0;
    result.token = order.back();
    for (size_t i = 0; i < order.size(); ++i) {
      cdf += probs[i];
      if (u < cdf) {
        result.token = order[i];
        break;
      }
    }
  }
  if (!ctx.want_logprobs) return result;
  const std::vector<float> logprobs = LogSoftmax(row);
  result.logprob = logprobs[result.token];
  const size_t n = std::min<size_t>(params.top_logprobs, row.size());
  if (n > 0) {
    std::vector<int32_t> ids(row.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
      return logprobs[a] > logprobs[b] || (logprobs[a] == logprobs[b] && a < b);
    });
    for (size_t i = 0; i < n; ++i) result.top.emplace_back(ids[i], logprobs[ids[i]]);
  }
  return result;
}

}  // namespace df11
