// Sampler: greedy, truncation rules, penalties, reproducibility from (seed, step), logprobs.
#include "runtime/model/sampler.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace df11 {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};

int32_t Pick(const SamplingParams& p, uint64_t step = 0, std::span<const int32_t> output = {},
             std::span<const int32_t> prompt = {}) {
  auto r = Sample(kLogits, p, {prompt, output, step});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->token : -1;
}

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(Pick(p), 1);
}

TEST(Sampler, TopKOneIsGreedyAndTopKLimitsTheSupport) {
  SamplingParams p;
  p.top_k = 1;
  for (uint64_t s = 0; s < 50; ++s) EXPECT_EQ(Pick(p, s), 1);
  p.top_k = 3;
  std::set<int32_t> seen;
  for (uint64_t s = 0; s < 500; ++s) seen.insert(Pick(p, s));
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2, 3}));
}

TEST(Sampler, TopPAndMinPTruncate) {
  SamplingParams p;
  p.top_p = 0.5f;  // p(1) = p(3) ~ 0.39 each: the two of them reach 0.5
  std::set<int32_t> seen;
  for (uint64_t s = 0; s < 500; ++s) seen.insert(Pick(p, s));
  EXPECT_EQ(seen, (std::set<int32_t>{1, 3}));
  p.top_p = 1.0f;
  p.min_p = 0.3f;  // p(2) / p_max = e^-1 = 0.37 survives, p(0) = e^-2 does not
  seen.clear();
  for (uint64_t s = 0; s < 500; ++s) seen.insert(Pick(p, s));
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2, 3}));
}

TEST(Sampler, FrequenciesFollowTheDistribution) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (uint64_t s = 0; s < n; ++s) ++counts[Pick(p, s)];
  double z = 0;
  for (float l : kLogits) z += std::exp(l);
  for (int32_t t = 0; t < 6; ++t) {
    EXPECT_NEAR(counts[t] / double(n), std::exp(kLogits[t]) / z, 0.015) << "token " << t;
  }
}

TEST(Sampler, ReproducibleFromSeedAndStep) {
  SamplingParams p;
  p.seed = 77;
  std::vector<int32_t> a, b;
  for (uint64_t s = 0; s < 100; ++s) a.push_back(Pick(p, s));
  for (uint64_t s = 0; s < 100; ++s) b.push_back(Pick(p, s));  // e.g. a replay in another batch
  EXPECT_EQ(a, b);
  p.seed = 78;
  std::vector<int32_t> c;
  for (uint64_t s = 0; s < 100; ++s) c.push_back(Pick(p, s));
  EXPECT_NE(a, c);
  EXPECT_NE(sampling::UniformFromCounter(1, 0), sampling::UniformFromCounter(1, 1));
  EXPECT_GE(sampling::UniformFromCounter(0, 0), 0.0);
  EXPECT_LT(sampling::UniformFromCounter(~0ull, ~0ull), 1.0);
}

TEST(Sampler, Penalties) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;  // token 1: 3 -> 1.5, so token 3 wins
  const std::vector<int32_t> prompt = {1};
  EXPECT_EQ(Pick(p, 0, {}, prompt), 3);
  p.repetition_penalty = 1.0f;
  p.presence_penalty = 0.5f;  // 1 and 3 both seen: 2.5 vs 2.5 -> lowest id 1... then frequency
  p.frequency_penalty = 0.4f;
  const std::vector<int32_t> output = {1, 1, 3};  // 1: 3 - 0.5 - 0.8 = 1.7; 3: 3 - 0.5 - 0.4 = 2.1
  EXPECT_EQ(Pick(p, 0, output), 3);
  p.frequency_penalty = 2.0f;  // 3: 0.5; 1: -1.5; token 2 wins with 2
  EXPECT_EQ(Pick(p, 0, output), 2);
  const std::vector<int32_t> bad = {6};
  EXPECT_FALSE(Sample(kLogits, p, {{}, bad, 0}).ok());
}

// Penalty entries worked by hand: one per distinct token, by token id; the prompt counts only for
// the repetition penalty; an out-of-range token is refused by name and leaves no trace in the
// next call (the per-thread index is cleared).
TEST(Sampler, PenaltyEntriesByHand) {
  const std::vector<int32_t> prompt = {5, 3, 5}, output = {3, 7, 3};
  auto fields = [](const std::vector<PenaltyEntry>& entries) {
    std::vector<std::array<int32_t, 3>> f;
    f.reserve(entries.size());
    for (const PenaltyEntry& e : entries) f.push_back({e.token, e.seen, e.output_count});
    return f;
  };
  SamplingParams both;
  both.repetition_penalty = 1.3f;
  both.frequency_penalty = 0.5f;
  auto r = PenaltyEntries(both, {prompt, output, 0}, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(fields(*r), (std::vector<std::array<int32_t, 3>>{{3, 1, 2}, {5, 1, 0}, {7, 1, 1}}));
  SamplingParams frequency;
  frequency.frequency_penalty = 0.5f;
  r = PenaltyEntries(frequency, {prompt, output, 0}, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(fields(*r), (std::vector<std::array<int32_t, 3>>{{3, 0, 2}, {7, 0, 1}}));
  EXPECT_TRUE(PenaltyEntries(SamplingParams{}, {prompt, output, 0}, 10)->empty());  // no penalty
  const std::vector<int32_t> bad = {2, 12, 2};
  r = PenaltyEntries(both, {bad, output, 0}, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("context token 12 outside [0, 10)"), std::string::npos) << r.status().ToString();
  r = PenaltyEntries(both, {std::vector<int32_t>{2}, std::vector<int32_t>{}, 0}, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(fields(*r), (std::vector<std::array<int32_t, 3>>{{2, 1, 0}}));
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
  SamplingParams p;
  p.temperature = 0;
  p.top_logprobs = 3;
  auto r = Sample(kLogits, p, {});
  ASSERT_TRUE(r.ok());
  double z = 0;
  for (float l : kLogits) z += std::exp(l);
  EXPECT_NEAR(r->logprob, 3.0 - std::log(z), 1e-6);
  ASSERT_EQ(r->top.size(), 3u);
  EXPECT_EQ(r->top[0].first, 1);
  EXPECT_EQ(r->top[1].first, 3);
  EXPECT_EQ(r->top[2].first, 2);
  EXPECT_NEAR(r->top[2].second, 2.0 - std::log(z), 1e-6);
}

TEST(Sampler, WithoutLogprobsSameTokensNoLogprobs) {
  SamplingParams p;
  p.top_logprobs = 2;
  p.seed = 9;
  for (uint64_t step = 0; step < 50; ++step) {
    SampleContext with{{}, {}, step, true}, without{{}, {}, step, false};
    auto a = Sample(kLogits, p, with), b = Sample(kLogits, p, without);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->token, b->token) << "step " << step;
    EXPECT_NE(a->logprob, 0.0f);
    EXPECT_EQ(b->logprob, 0.0f);
    EXPECT_TRUE(b->top.empty());
  }
}

// ValidateSamplingParams is the one check of the parameters (Engine::Submit runs it once per
// request); Sample checks its logits row.
TEST(Sampler, RejectsBadParameters) {
  const std::vector<SamplingParams> bad = {
      {.temperature = -1},       {.top_k = -1},        {.top_p = 0},        {.min_p = 2},
      {.repetition_penalty = 0}, {.top_logprobs = -2}, {.top_logprobs = 21}};
  for (const auto& p : bad) EXPECT_EQ(ValidateSamplingParams(p).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateSamplingParams({}).ok());
  const std::vector<float> nan = {1.0f, NAN};
  EXPECT_FALSE(Sample(nan, {}, {}).ok());
  EXPECT_FALSE(Sample({}, {}, {}).ok());
}

}  // namespace
}  // namespace df11
