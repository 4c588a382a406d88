// The sampler's shared math (kernels/sampling.h) and the CUDA sampler against its CPU twin
// SampleRow: the same token, logprob and top logprobs, bit for bit, over vocabularies of real
// models, every parameter, ties, signed zeros, -inf, penalties and NaN rows. The CUDA test skips
// without a device.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/sampling.h"

#ifdef DF11_HAVE_CUDA
#include "kernels/cuda_ops.h"
#include "kernels/cuda_sampling.h"
#include "kernels/gpu.h"
#endif

namespace df11 {
namespace {

// SampleExp within a few ulp of the library's exp over its whole range, exactly 1 at 0.
TEST(SamplingMath, ExpIsAccurate) {
  EXPECT_EQ(sampling::SampleExp(0.0), 1.0);
  EXPECT_EQ(sampling::SampleExp(-0.0), 1.0);
  EXPECT_EQ(sampling::SampleExp(-800.0), 0.0);
  EXPECT_EQ(sampling::SampleExp(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_EQ(sampling::SampleExp(std::nan("")), 0.0);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-699.0, 0.0);
  for (int i = 0; i < 100000; ++i) {
    const double x = i < 1000 ? -i * 0.001 : dist(rng);
    const double want = std::exp(x), got = sampling::SampleExp(x);
    EXPECT_LE(std::fabs(got - want), 4 * std::numeric_limits<double>::epsilon() * want) << x;
  }
}

// SampleLog within a few ulp of the library's log on [1, 2^20].
TEST(SamplingMath, LogIsAccurate) {
  EXPECT_EQ(sampling::SampleLog(1.0), 0.0);
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> dist(0.0, 20.0);
  for (int i = 0; i < 100000; ++i) {
    const double s = std::exp2(dist(rng)), want = std::log(s), got = sampling::SampleLog(s);
    EXPECT_LE(std::fabs(got - want), 4 * std::numeric_limits<double>::epsilon() * std::max(want, 1.0)) << s;
  }
}

// Hand-worked chunked sums: 300 ones are a chunk of 256 and one of 44.
TEST(SamplingMath, ChunkedSumAndPrefixCut) {
  auto one = [](int64_t) { return 1.0; };
  EXPECT_EQ(sampling::ChunkedSum(300, one), 300.0);
  EXPECT_EQ(sampling::PrefixCut(300, 10.0, false, one), 10);     // 10 ones reach 10
  EXPECT_EQ(sampling::PrefixCut(300, 10.0, true, one), 11);      // > 10 needs 11
  EXPECT_EQ(sampling::PrefixCut(300, 256.5, false, one), 257);   // in the second chunk
  EXPECT_EQ(sampling::PrefixCut(300, 1000.0, false, one), 300);  // never: all
  // 1e16 then ones: within a chunk each 1 is lost against 1e16 (ulp 2), so the chunk's sum stays
  // 1e16 and the cut never moves past the first term.
  auto big_first = [](int64_t i) { return i == 0 ? 1e16 : 1.0; };
  EXPECT_EQ(sampling::ChunkedSum(256, big_first), 1e16);
  EXPECT_EQ(sampling::PrefixCut(256, 1e16, true, big_first), 256);
}

#ifdef DF11_HAVE_CUDA

struct Case {
  SamplingParams params;
  bool penalties = false;
  bool want_logprobs = false;
};

std::vector<Case> Cases() {
  std::vector<Case> c;
  c.push_back({{.temperature = 0.0f}});
  c.push_back({{.temperature = 0.0f, .repetition_penalty = 1.3f, .presence_penalty = 0.5f}, true, true});
  c.push_back({{.temperature = 1.0f, .seed = 1}, false, true});
  c.push_back({{.temperature = 0.7f, .top_p = 0.9f, .seed = 2}});
  c.push_back({{.temperature = 1.0f, .top_k = 50, .seed = 3}});
  c.push_back({{.temperature = 1.0f, .min_p = 0.1f, .seed = 4}});
  c.push_back({{.temperature = 1.3f, .top_k = 1000, .top_p = 0.95f, .min_p = 0.05f, .seed = 5}});
  c.push_back({{.temperature = 0.8f,
                .repetition_penalty = 1.2f,
                .presence_penalty = 0.5f,
                .frequency_penalty = 0.25f,
                .seed = 6,
                .top_logprobs = 20},
               true,
               true});
  c.push_back({{.temperature = 2.0f, .top_p = 0.5f, .seed = 7, .top_logprobs = 5}, false, true});
  c.push_back({{.temperature = 0.05f, .top_k = 1, .seed = 8}});
  return c;
}

// Row r of a test matrix: mostly N(0, 3) logits, some rows flat (all ties), peaked, with signed
// zeros and -inf, or NaN.
std::vector<float> Row(int64_t r, int64_t vocab, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(vocab);
  for (float& v : row) v = normal(rng);
  switch (r % 7) {
    case 1:
      std::fill(row.begin(), row.end(), 0.5f);
      break;
    case 2:
      row[vocab / 3] = 40.0f;
      break;
    case 3:
      for (int64_t i = 0; i < vocab; i += 5) row[i] = (i % 2) ? 0.0f : -0.0f;
      break;
    case 4:
      for (int64_t i = 0; i < vocab; i += 3) row[i] = -std::numeric_limits<float>::infinity();
      break;
    case 5:  // bf16-like values: many exact ties
      for (float& v : row) v = std::round(v * 4) / 4;
      break;
    default:
      break;
  }
  return row;
}

TEST(CudaSampling, MatchesCpuTwinBitForBit) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device: the CUDA sampler is not tested here";
  const std::vector<Case> cases = Cases();
  for (const int64_t vocab : {300, 151936, 262208}) {
    const int64_t rows = 41;  // three sort groups; row 40 has NaN
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    std::vector<float> logits;
    std::vector<cuda::DeviceSampleRow> params(rows);
    std::vector<PenaltyEntry> entries;
    std::vector<StatusOr<SampleResult>> want;
    int32_t sort_slots = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row = Row(r, vocab, rng);
      if (r == rows - 1) row[vocab / 2] = std::nanf("");
      const Case& c = cases[r % cases.size()];
      cuda::DeviceSampleRow& p = params[r];
      p.params = c.params;
      p.step = static_cast<uint64_t>(r * 3);
      p.want_logprobs = c.want_logprobs;
      p.penalty_begin = static_cast<int32_t>(entries.size());
      std::vector<PenaltyEntry> row_entries;
      if (c.penalties) {
        for (int32_t t = 0; t < vocab; t += static_cast<int32_t>(vocab / 37 + 1)) {
          row_entries.push_back({.token = t, .seen = 1, .output_count = t % 3});
        }
      }
      entries.insert(entries.end(), row_entries.begin(), row_entries.end());
      p.penalty_count = static_cast<int32_t>(row_entries.size());
      p.sort_slot = c.params.temperature > 0 ? sort_slots++ : -1;
      want.push_back(SampleRow(row, c.params, row_entries, p.step, c.want_logprobs));
      logits.insert(logits.end(), row.begin(), row.end());
    }
    auto d_logits = cuda::DeviceBuffer::Allocate(logits.size() * 4, "logits");
    auto d_params = cuda::DeviceBuffer::Allocate(params.size() * sizeof(params[0]), "params");
    auto d_entries = cuda::DeviceBuffer::Allocate(entries.size() * sizeof(PenaltyEntry) + 16, "entries");
    auto d_out = cuda::DeviceBuffer::Allocate(rows * sizeof(cuda::SampledRow), "out");
    auto d_work = cuda::DeviceBuffer::Allocate(cuda::SamplingWorkspaceBytes(vocab), "workspace");
    ASSERT_TRUE(d_logits.ok() && d_params.ok() && d_entries.ok() && d_out.ok() && d_work.ok());
    ASSERT_TRUE(cuda::CopyToDevice(d_logits->data(), logits.data(), logits.size() * 4, nullptr).ok());
    ASSERT_TRUE(cuda::CopyToDevice(d_params->data(), params.data(), params.size() * sizeof(params[0]), nullptr).ok());
    ASSERT_TRUE(
        cuda::CopyToDevice(d_entries->data(), entries.data(), entries.size() * sizeof(PenaltyEntry), nullptr).ok());
    const Status st = cuda::SampleRows(d_logits->as<float>(), rows, vocab, d_params->as<cuda::DeviceSampleRow>(),
                                       d_entries->as<PenaltyEntry>(), sort_slots, d_work->data(), d_work->bytes(),
                                       d_out->as<cuda::SampledRow>(), nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::vector<cuda::SampledRow> got(rows);
    ASSERT_TRUE(cuda::CopyToHost(got.data(), d_out->data(), rows * sizeof(cuda::SampledRow), nullptr).ok());
    for (int64_t r = 0; r < rows; ++r) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + " row " + std::to_string(r));
      if (!want[r].ok()) {
        EXPECT_EQ(got[r].error, 1);
        continue;
      }
      ASSERT_EQ(got[r].error, 0);
      EXPECT_EQ(got[r].token, want[r]->token);
      if (!params[r].want_logprobs) continue;
      EXPECT_EQ(std::bit_cast<uint32_t>(got[r].logprob), std::bit_cast<uint32_t>(want[r]->logprob))
          << got[r].logprob << " vs " << want[r]->logprob;
      ASSERT_EQ(got[r].num_top, static_cast<int32_t>(want[r]->top.size()));
      for (int i = 0; i < got[r].num_top; ++i) {
        EXPECT_EQ(got[r].top_ids[i], want[r]->top[i].first) << i;
        EXPECT_EQ(got[r].top_logprobs[i], want[r]->top[i].second) << i;
      }
    }
  }
}

#endif

}  // namespace
}  // namespace df11
