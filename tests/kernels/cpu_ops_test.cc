// CPU ops against naive double-precision references, plus the determinism contracts
// (thread count and batch composition never change a result bit).
#include "kernels/cpu_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/batch_layout.h"

namespace df11::cpu {
namespace {

std::vector<float> RandomFloats(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint16_t> RandomBf16(size_t n, uint32_t seed, float stddev = 0.1f) {
  std::vector<uint16_t> w;
  for (float f : RandomFloats(n, seed, stddev)) w.push_back(FloatToBf16(f));
  return w;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
  }
}

TEST(CpuOps, Bf16RoundTripAndRounding) {
  for (uint32_t w = 0; w < 0x10000; ++w) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(w));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBf16(f), w);
  }
  EXPECT_EQ(FloatToBf16(1.0f + 1.0f / 256), FloatToBf16(1.0f));  // tie rounds to even
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
}

TEST(CpuOps, RmsNormMatchesReference) {
  const int64_t rows = 5, dim = 37;
  const auto x = RandomFloats(rows * dim, 1);
  const auto w = RandomFloats(dim, 2);
  for (bool add_one : {false, true}) {
    std::vector<float> out(rows * dim);
    RmsNorm(x.data(), w.data(), rows, dim, 1e-6f, add_one, out.data(), 3);
    std::vector<double> want(rows * dim);
    for (int64_t r = 0; r < rows; ++r) {
      double ms = 0;
      for (int64_t i = 0; i < dim; ++i) ms += double(x[r * dim + i]) * x[r * dim + i];
      const double inv = 1 / std::sqrt(ms / dim + 1e-6);
      for (int64_t i = 0; i < dim; ++i) want[r * dim + i] = x[r * dim + i] * inv * (add_one ? 1 + w[i] : w[i]);
    }
    ExpectNear(out, want, 1e-5);
  }
}

TEST(CpuOps, RopeRotatesHalvesAndPassesTheRest) {
  const int64_t tokens = 3, heads = 2, head_dim = 10, rotary = 6;
  std::vector<float> inv_freq = {1.0f, 0.1f, 0.01f};
  std::vector<int32_t> positions = {0, 7, 1000};
  std::vector<float> cos(tokens * 3), sin(tokens * 3);
  RopeTables(inv_freq, positions, cos.data(), sin.data());
  auto x = RandomFloats(tokens * heads * head_dim, 3);
  const auto x0 = x;
  ApplyRope(x.data(), tokens, heads, head_dim, rotary, cos.data(), sin.data(), 2);
  std::vector<double> want(x0.begin(), x0.end());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* v = &x0[(t * heads + h) * head_dim];
      double* o = &want[(t * heads + h) * head_dim];
      for (int i = 0; i < 3; ++i) {
        const double angle = double(float(positions[t]) * inv_freq[i]);
        o[i] = v[i] * std::cos(angle) - v[i + 3] * std::sin(angle);
        o[i + 3] = v[i + 3] * std::cos(angle) + v[i] * std::sin(angle);
      }
    }
  }
  ExpectNear(x, want, 1e-6);
}

TEST(CpuOps, MatmulMatchesReferenceWithBias) {
  const int64_t tokens = 4, n = 19, k = 45;
  const auto x = RandomFloats(tokens * k, 4);
  const auto w = RandomBf16(n * k, 5);
  const auto bias = RandomFloats(n, 6);
  std::vector<float> y(tokens * n);
  MatmulBf16(x.data(), w.data(), bias.data(), tokens, n, k, y.data(), 3);
  std::vector<double> want(tokens * n);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < n; ++r) {
      double acc = bias[r];
      for (int64_t i = 0; i < k; ++i) acc += double(x[t * k + i]) * Bf16ToFloat(w[r * k + i]);
      want[t * n + r] = acc;
    }
  }
  ExpectNear(y, want, 1e-5);
}

TEST(CpuOps, MatmulIsIndependentOfThreadsAndBatch) {
  const int64_t tokens = 7, n = 300, k = 129;
  const auto x = RandomFloats(tokens * k, 7);
  const auto w = RandomBf16(n * k, 8);
  std::vector<float> one_thread(tokens * n), many(tokens * n), single_row(n);
  MatmulBf16(x.data(), w.data(), nullptr, tokens, n, k, one_thread.data(), 1);
  MatmulBf16(x.data(), w.data(), nullptr, tokens, n, k, many.data(), 8);
  EXPECT_EQ(one_thread, many);
  MatmulBf16(x.data() + 3 * k, w.data(), nullptr, 1, n, k, single_row.data(), 4);
  EXPECT_TRUE(std::equal(single_row.begin(), single_row.end(), one_thread.begin() + 3 * n));
}

TEST(CpuOps, GatedActivations) {
  const int64_t tokens = 2, inter = 9;
  const auto gate_up = RandomFloats(tokens * 2 * inter, 9, 2.0f);
  for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
    std::vector<float> out(tokens * inter);
    GatedActivation(act, gate_up.data(), 2 * inter, gate_up.data() + inter, 2 * inter, tokens, inter, out.data(), 2);
    std::vector<double> want(tokens * inter);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < inter; ++i) {
        const double g = gate_up[t * 2 * inter + i], u = gate_up[t * 2 * inter + inter + i];
        const double a = act == Activation::kSilu
                             ? g / (1 + std::exp(-g))
                             : 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
        want[t * inter + i] = a * u;
      }
    }
    ExpectNear(out, want, 1e-5);
  }
}

TEST(CpuOps, EmbeddingGatherAndSoftCap) {
  const auto table = RandomBf16(int64_t{6} * 4, 10);
  std::vector<int32_t> ids = {5, 0, 5};
  std::vector<float> out(size_t{3} * 4);
  EmbeddingGather(table.data(), ids, 4, 2.0f, out.data());
  for (int t = 0; t < 3; ++t) {
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[t * 4 + i], 2.0f * Bf16ToFloat(table[ids[t] * 4 + i]));
  }
  std::vector<float> x = {0.0f, 100.0f, -3.0f};
  SoftCap(x.data(), 3, 30.0f);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_NEAR(x[1], 30 * std::tanh(100.0 / 30), 1e-5);
  EXPECT_NEAR(x[2], 30 * std::tanh(-0.1), 1e-5);
}

// Naive attention over contiguous K/V [len, kv_heads, d] for the token at position pos.
std::vector<double> NaiveAttention(const std::vector<float>& k, const std::vector<float>& v, const float* q,
                                   int64_t kv_heads, int64_t heads, int64_t d, int64_t pos, const AttentionParams& p) {
  std::vector<double> out(heads * d, 0.0);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / (heads / kv_heads);
    std::vector<double> s;
    const int64_t first = p.sliding_window > 0 ? std::max<int64_t>(0, pos - p.sliding_window + 1) : 0;
    for (int64_t j = first; j <= pos; ++j) {
      double dot = 0;
      for (int64_t i = 0; i < d; ++i) dot += double(q[h * d + i]) * k[(j * kv_heads + g) * d + i];
      dot *= p.scale;
      if (p.softcap > 0) dot = p.softcap * std::tanh(dot / p.softcap);
      s.push_back(dot);
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& e : s) sum += (e = std::exp(e - mx));
    for (int64_t j = first; j <= pos; ++j) {
      for (int64_t i = 0; i < d; ++i) out[h * d + i] += s[j - first] / sum * v[(j * kv_heads + g) * d + i];
    }
  }
  return out;
}

struct AttentionCase {
  int64_t window;
  float softcap;
};

class PagedAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

// Two sequences (one with history, one fresh) in one ragged batch, blocks scattered over the pool.
TEST_P(PagedAttentionTest, MatchesContiguousReference) {
  const int64_t kv_heads = 2, heads = 6, d = 8, block = 4, pool_blocks = 16;
  const int64_t len[2] = {11, 6}, cached[2] = {7, 0};
  std::vector<float> kpool(pool_blocks * block * kv_heads * d, NAN), vpool = kpool;
  PagedKvLayer cache{kpool.data(), vpool.data(), pool_blocks, block, kv_heads, d};
  std::vector<std::vector<int32_t>> tables = {{9, 2, 14}, {5, 0}};
  std::vector<std::vector<float>> kfull, vfull;
  BatchArrays history, batch;  // sequence 0's cached positions as a previous step wrote them; this step
  history.AddSequence(0, cached[0], tables[0], block);
  for (int s = 0; s < 2; ++s) {
    kfull.push_back(RandomFloats(len[s] * kv_heads * d, 20 + s));
    vfull.push_back(RandomFloats(len[s] * kv_heads * d, 30 + s));
    batch.AddSequence(cached[s], len[s] - cached[s], tables[s], block);
  }
  const int64_t rows = batch.num_tokens();
  WriteKv(cache, history.HostLayout(), kfull[0].data(), vfull[0].data(), 1);
  std::vector<float> knew, vnew;
  for (int s = 0; s < 2; ++s) {
    knew.insert(knew.end(), kfull[s].begin() + cached[s] * kv_heads * d, kfull[s].end());
    vnew.insert(vnew.end(), vfull[s].begin() + cached[s] * kv_heads * d, vfull[s].end());
  }
  WriteKv(cache, batch.HostLayout(), knew.data(), vnew.data(), 2);
  const auto q = RandomFloats(rows * heads * d, 40);
  const AttentionParams params{heads, 0.35f, GetParam().window, GetParam().softcap};
  std::vector<float> out(rows * heads * d);
  PagedAttention(cache, batch.HostLayout(), params, q.data(), out.data(), 3);
  for (int64_t t = 0; t < rows; ++t) {
    const int s = batch.token_seq[t];
    const auto want =
        NaiveAttention(kfull[s], vfull[s], &q[t * heads * d], kv_heads, heads, d, batch.positions[t], params);
    std::vector<float> got(out.begin() + t * heads * d, out.begin() + (t + 1) * heads * d);
    ExpectNear(got, want, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, PagedAttentionTest,
                         ::testing::Values(AttentionCase{0, 0.0f}, AttentionCase{3, 0.0f}, AttentionCase{0, 1.5f},
                                           AttentionCase{5, 2.0f}));

// Tiles of a ragged batch, worked by hand: sequence 0 has 5 new tokens at positions 3..7, sequence 1
// a decode at 20, sequence 2 three tokens at 0..2; tiles of at most 2 tokens. Runs in token order:
// {0,2} (last position 4), {2,2} (6), {4,1} (7), {5,1} (20), {6,2} (1), {8,1} (2); longest keys first.
TEST(AttentionTiles, RunsOfOneSequenceLongestFirst) {
  BatchArrays a;
  const std::vector<int32_t> table = {0, 1, 2, 3, 4, 5};
  a.AddSequence(3, 5, table, 4);
  a.AddSequence(20, 1, table, 4);
  a.AddSequence(0, 3, table, 4);
  int64_t max_count = -1;
  EXPECT_EQ(AttentionTiles(a.token_seq, a.positions, 2, &max_count),
            (std::vector<int32_t>{5, 1, 4, 1, 2, 2, 0, 2, 8, 1, 6, 2}));
  EXPECT_EQ(max_count, 2);
  // Equal last positions keep token order (decode batches of one length launch as before).
  BatchArrays b;
  for (int s = 0; s < 3; ++s) b.AddSequence(9, 1, table, 4);
  EXPECT_EQ(AttentionTiles(b.token_seq, b.positions, 1), (std::vector<int32_t>{0, 1, 1, 1, 2, 1}));
}

}  // namespace
}  // namespace df11::cpu
