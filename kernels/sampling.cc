// The CPU twin of the CUDA sampler (see sampling.h for the order of processing and the sums).
// Built with -ffp-contract=off (kernels/CMakeLists.txt) so no multiply-add fuses.
#include "kernels/sampling.h"

#include <algorithm>
#include <numeric>

namespace df11 {
namespace {

// Ids of the first `keep` tokens in the sorted order (larger logit first, then lower id).
std::vector<int32_t> SortedIds(std::span<const float> logits, int64_t keep) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  auto before = [&](int32_t a, int32_t b) { return sampling::Before(logits[a], a, logits[b], b); };
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
  order.resize(keep);
  return order;
}

int32_t Draw(std::span<const float> logits, const SamplingParams& p, uint64_t step) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  int64_t n = p.top_k > 0 && p.top_k < vocab ? p.top_k : vocab;
  const std::vector<int32_t> order = SortedIds(logits, n);
  const float max_logit = logits[order[0]];
  std::vector<double> weights(n);  // exp once per candidate; the sums below read it several times
  for (int64_t i = 0; i < n; ++i) weights[i] = sampling::Weight(logits[order[i]], max_logit, p.temperature);
  const double z = sampling::ChunkedSum(n, [&](int64_t i) { return weights[i]; });
  auto q = [&](int64_t i) { return weights[i] / z; };
  if (p.top_p < 1.0f) n = sampling::PrefixCut(n, p.top_p, /*strict=*/false, q);
  if (p.min_p > 0.0f) {
    const double floor = p.min_p * q(0);
    for (int64_t i = 1; i < n; ++i) {
      if (q(i) < floor) {
        n = i;
        break;
      }
    }
  }
  const double kept = sampling::ChunkedSum(n, q);
  const double u = sampling::UniformFromCounter(p.seed, step);
  const int64_t m = sampling::PrefixCut(n, u, /*strict=*/true, [&](int64_t i) { return q(i) / kept; });
  return order[m - 1];
}

}  // namespace

StatusOr<SampleResult> SampleRow(std::span<const float> row, const SamplingParams& params,
                                 std::span<const PenaltyEntry> entries, uint64_t step, bool want_logprobs) {
  if (row.empty()) return InvalidArgument("sampling: empty logits row");
  for (float v : row) {
    if (std::isnan(v)) return InvalidArgument("sampling: logits contain NaN");
  }
  std::vector<float> penalized;
  if (!entries.empty()) {
    penalized.assign(row.begin(), row.end());
    for (const PenaltyEntry& e : entries) penalized[e.token] = sampling::Penalized(row[e.token], e, params);
  }
  const std::span<const float> logits = entries.empty() ? row : std::span<const float>(penalized);
  SampleResult result;
  if (params.temperature == 0.0f) {
    result.token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  } else {
    result.token = Draw(logits, params, step);
  }
  if (!want_logprobs) return result;
  // log_softmax of the raw row: logprob(i) = float(row[i] - (log(sum exp(row - max)) + max)).
  const int64_t vocab = static_cast<int64_t>(row.size());
  const float max_logit = *std::max_element(row.begin(), row.end());
  const double log_sum = sampling::SampleLog(sampling::ChunkedSum(
                             vocab,
                             [&](int64_t i) {
                               return sampling::SampleExp(static_cast<double>(row[i]) - static_cast<double>(max_logit));
                             })) +
                         max_logit;
  auto logprob = [&](int32_t i) { return static_cast<float>(static_cast<double>(row[i]) - log_sum); };
  result.logprob = logprob(result.token);
  const int64_t n = std::min<int64_t>(params.top_logprobs, vocab);
  if (n > 0) {
    std::vector<int32_t> ids(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                      [&](int32_t a, int32_t b) { return sampling::Before(logprob(a), a, logprob(b), b); });
    for (int64_t i = 0; i < n; ++i) result.top.emplace_back(ids[i], logprob(ids[i]));
  }
  return result;
}

}  // namespace df11
