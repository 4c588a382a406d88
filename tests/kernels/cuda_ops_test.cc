// CUDA ops (kernels/cuda_ops.h, cuda_gemm.h) against their CPU twins (kernels/cpu_ops.h) on random
// data: inputs are BF16 values, so both sides see the same numbers; the GPU rounds to BF16 where
// transformers' bf16 run does, hence relative tolerances of a few BF16 ulps. Copies, gathers and
// the residual add are checked bit for bit. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu_ops.h"
#include "tests/kernels/df11_test_util.h"

#ifdef DF11_HAVE_CUDA
#include "kernels/cuda_gemm.h"
#include "kernels/cuda_ops.h"
#include "kernels/df11_decode_cuda.h"
#endif

namespace df11 {
namespace {

#ifndef DF11_HAVE_CUDA
TEST(CudaOps, MatchCpu) { GTEST_SKIP() << "built without CUDA (nvcc not found): CUDA ops not tested"; }
#else

#define REQUIRE_GPU() \
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device: CUDA ops not tested here"

using cpu::Bf16ToFloat;
using cpu::FloatToBf16;

// n random BF16 words with values ~ N(0, stddev).
std::vector<uint16_t> RandomBf16(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<uint16_t> v(n);
  for (auto& w : v) w = FloatToBf16(dist(rng));
  return v;
}
std::vector<float> ToFloat(const std::vector<uint16_t>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = Bf16ToFloat(v[i]);
  return f;
}

// A device copy of a host vector.
template <typename T>
cuda::DeviceBuffer Upload(const std::vector<T>& host) {
  auto buf = cuda::DeviceBuffer::Allocate(host.size() * sizeof(T) + 256, "test");
  EXPECT_TRUE(buf.ok()) << buf.status().ToString();
  EXPECT_TRUE(cuda::CopyToDevice(buf->data(), host.data(), host.size() * sizeof(T), nullptr).ok());
  EXPECT_TRUE(cuda::Synchronize(nullptr).ok());  // later work may run on another stream
  return std::move(buf).value();
}
template <typename T>
std::vector<T> Download(const cuda::DeviceBuffer& buf, size_t n) {
  std::vector<T> host(n);
  const Status st = cuda::CopyToHost(host.data(), buf.data(), n * sizeof(T), nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return host;
}

TEST(CudaOps, RmsNormMatchesCpu) {
  REQUIRE_GPU();
  // The per-thread kernel, and the vector path (dim % 256 == 0, >= 512 rows).
  for (const auto& [rows, dim] : {std::pair<int64_t, int64_t>{37, 200}, {600, 4096}})
    for (bool add_one : {false, true}) {
      const auto x = RandomBf16(rows * dim, 1, 3.0f);
      const auto w = ToFloat(RandomBf16(dim, 2, 0.5f));
      std::vector<float> want(rows * dim);
      cpu::RmsNorm(ToFloat(x).data(), w.data(), rows, dim, 1e-6f, add_one, want.data(), 1);
      auto dx = Upload(x);
      auto dw = Upload(w);
      ASSERT_TRUE(
          cuda::RmsNorm(dx.as<uint16_t>(), dw.as<float>(), rows, dim, 1e-6f, add_one, dx.as<uint16_t>(), nullptr).ok());
      EXPECT_LE(testing::MaxRelDiff(ToFloat(Download<uint16_t>(dx, rows * dim)), want), 1e-2) << "add_one " << add_one;
    }
}

TEST(CudaOps, RopeMatchesCpu) {
  REQUIRE_GPU();
  const int64_t tokens = 9, heads = 3, head_dim = 64, rotary = 48;  // partial rotary
  std::vector<float> inv_freq(rotary / 2);
  for (int64_t i = 0; i < rotary / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / rotary);
  const std::vector<int32_t> positions = {0, 1, 2, 7, 100, 101, 511, 4000, 3};
  const auto x = RandomBf16(tokens * heads * head_dim, 3);
  std::vector<float> cos(tokens * rotary / 2), sin(tokens * rotary / 2), want = ToFloat(x);
  cpu::RopeTables(inv_freq, positions, cos.data(), sin.data());
  cpu::ApplyRope(want.data(), tokens, heads, head_dim, rotary, cos.data(), sin.data(), 1);
  auto dx = Upload(x);
  auto dpos = Upload(positions);
  auto dfreq = Upload(inv_freq);
  ASSERT_TRUE(cuda::ApplyRope(dx.as<uint16_t>(), tokens, heads, head_dim, rotary, dpos.as<int32_t>(), dfreq.as<float>(),
                              nullptr)
                  .ok());
  const auto got = ToFloat(Download<uint16_t>(dx, x.size()));
  EXPECT_LE(testing::MaxRelDiff(got, want), 2e-2);
  for (int64_t t = 0; t < tokens; ++t) {  // the unrotated tail passes through bit for bit
    for (int64_t i = rotary; i < head_dim; ++i)
      EXPECT_EQ(got[t * heads * head_dim + i], want[t * heads * head_dim + i]);
  }
}

TEST(CudaOps, GatedActivationMatchesCpu) {
  REQUIRE_GPU();
  const int64_t tokens = 5, inter = 300;
  const auto gate_up = RandomBf16(tokens * 2 * inter, 4, 2.0f);  // fused layout: gate | up per row
  for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
    const auto f = ToFloat(gate_up);
    std::vector<float> want(tokens * inter);
    cpu::GatedActivation(act, f.data(), 2 * inter, f.data() + inter, 2 * inter, tokens, inter, want.data(), 1);
    auto d = Upload(gate_up);
    auto out = Upload(std::vector<uint16_t>(tokens * inter, 0xFFFF));
    ASSERT_TRUE(cuda::GatedActivation(act, d.as<uint16_t>(), 2 * inter, d.as<uint16_t>() + inter, 2 * inter, tokens,
                                      inter, out.as<uint16_t>(), nullptr)
                    .ok());
    EXPECT_LE(testing::MaxRelDiff(ToFloat(Download<uint16_t>(out, tokens * inter)), want), 1e-2);
  }
}

// The 8-wide path (16-byte aligned rows, inter a multiple of 8) gives the one-element path's bits:
// the same rows one element off alignment take the latter.
TEST(CudaOps, GatedActivationVectorPathIsBitIdentical) {
  REQUIRE_GPU();
  const int64_t tokens = 3, inter = 1024;
  const auto gate_up = RandomBf16(tokens * 2 * inter, 14, 3.0f);
  std::vector<uint16_t> shifted(gate_up.size() + 1);
  std::copy(gate_up.begin(), gate_up.end(), shifted.begin() + 1);
  for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
    auto aligned = Upload(gate_up), misaligned = Upload(shifted);
    auto out8 = Upload(std::vector<uint16_t>(tokens * inter, 0xFFFF));
    auto out1 = Upload(std::vector<uint16_t>(tokens * inter + 8, 0xFFFF));
    const uint16_t* a = aligned.as<uint16_t>();
    const uint16_t* m = misaligned.as<uint16_t>() + 1;
    ASSERT_TRUE(
        cuda::GatedActivation(act, a, 2 * inter, a + inter, 2 * inter, tokens, inter, out8.as<uint16_t>(), nullptr)
            .ok());
    ASSERT_TRUE(
        cuda::GatedActivation(act, m, 2 * inter, m + inter, 2 * inter, tokens, inter, out1.as<uint16_t>() + 1, nullptr)
            .ok());
    const auto got8 = Download<uint16_t>(out8, tokens * inter);
    const auto got1 = Download<uint16_t>(out1, tokens * inter + 1);
    EXPECT_EQ(got8, std::vector<uint16_t>(got1.begin() + 1, got1.end()));
    const auto f = ToFloat(gate_up);
    std::vector<float> want(tokens * inter);
    cpu::GatedActivation(act, f.data(), 2 * inter, f.data() + inter, 2 * inter, tokens, inter, want.data(), 1);
    EXPECT_LE(testing::MaxRelDiff(ToFloat(got8), want), 1e-2);
  }
}

TEST(CudaOps, CopiesGathersAndAddAreExact) {
  REQUIRE_GPU();
  const int64_t rows = 6, width = 40, vocab = 50;
  const auto table = RandomBf16(vocab * width, 5);
  const std::vector<int32_t> ids = {3, 0, 49, 3, 17, 8};
  auto dtable = Upload(table);
  auto dids = Upload(ids);
  auto out = Upload(std::vector<uint16_t>(rows * width, 0xFFFF));
  ASSERT_TRUE(
      cuda::EmbeddingGather(dtable.as<uint16_t>(), dids.as<int32_t>(), rows, width, 8.0f, out.as<uint16_t>(), nullptr)
          .ok());
  auto got = Download<uint16_t>(out, rows * width);
  std::vector<float> gathered(rows * width);
  cpu::EmbeddingGather(table.data(), ids, width, 8.0f, gathered.data());  // x8 is exact
  for (int64_t i = 0; i < rows * width; ++i) ASSERT_EQ(got[i], FloatToBf16(gathered[i])) << i;
  ASSERT_TRUE(
      cuda::GatherRows(dtable.as<uint16_t>(), dids.as<int32_t>(), rows, width, out.as<uint16_t>(), nullptr).ok());
  got = Download<uint16_t>(out, rows * width);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < width; ++i) ASSERT_EQ(got[r * width + i], table[ids[r] * width + i]);
  }
  const auto y = RandomBf16(rows * width, 6);
  auto dy = Upload(y);
  ASSERT_TRUE(cuda::AddInPlace(out.as<uint16_t>(), dy.as<uint16_t>(), rows * width, nullptr).ok());
  const auto sum = Download<uint16_t>(out, rows * width);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < width; ++i) {
      const int64_t k = r * width + i;
      ASSERT_EQ(sum[k], FloatToBf16(Bf16ToFloat(table[ids[r] * width + i]) + Bf16ToFloat(y[k])));
    }
  }
  // Split of a fused [T, 3 + 2 + 4] projection.
  const auto fused = RandomBf16(rows * 9, 7);
  auto dfused = Upload(fused);
  auto a = Upload(std::vector<uint16_t>(rows * 3)), b = Upload(std::vector<uint16_t>(rows * 2)),
       c = Upload(std::vector<uint16_t>(rows * 4));
  ASSERT_TRUE(cuda::SplitColumns(dfused.as<uint16_t>(), rows, 3, 2, 4, a.as<uint16_t>(), b.as<uint16_t>(),
                                 c.as<uint16_t>(), nullptr)
                  .ok());
  const auto ha = Download<uint16_t>(a, rows * 3), hb = Download<uint16_t>(b, rows * 2),
             hc = Download<uint16_t>(c, rows * 4);
  for (int64_t r = 0; r < rows; ++r) {
    for (int i = 0; i < 9; ++i) {
      const uint16_t got_v = i < 3 ? ha[r * 3 + i] : i < 5 ? hb[r * 2 + i - 3] : hc[r * 4 + i - 5];
      ASSERT_EQ(got_v, fused[r * 9 + i]);
    }
  }
}

// RmsNorm and AddRmsNorm's vector path (>= 512 rows of dim % 256 == 0, 16-byte aligned: one warp a row)
// against their per-thread kernels, reached through rows that start 2 bytes off alignment: the
// same bits (both keep RmsNormKernel's summation order).
TEST(CudaOps, RmsNormVectorPathIsPerThreadPathBitForBit) {
  REQUIRE_GPU();
  for (const int64_t dim : {256, 4096, 5376}) {
    for (const int64_t rows : {512, 600}) {
      for (bool add_one : {false, true}) {
        SCOPED_TRACE("dim " + std::to_string(dim) + " rows " + std::to_string(rows) + " add_one " +
                     std::to_string(add_one));
        const int64_t n = rows * dim;
        const auto h = RandomBf16(n, 23, 4.0f), y = RandomBf16(n, 24, 2.0f);
        const auto w = ToFloat(RandomBf16(dim, 25, 0.5f));
        std::vector<uint16_t> h_off(n + 8, 0), y_off(n + 8, 0);
        std::copy(h.begin(), h.end(), h_off.begin() + 1);
        std::copy(y.begin(), y.end(), y_off.begin() + 1);
        auto dh = Upload(h), dy = Upload(y), dw = Upload(w), dh_off = Upload(h_off), dy_off = Upload(y_off);
        auto out = Upload(std::vector<uint16_t>(n, 0)), out_off = Upload(std::vector<uint16_t>(n + 8, 0));
        // The n elements of an offset buffer from element 1 on.
        const auto from_one = [n](const cuda::DeviceBuffer& b) {
          const auto v = Download<uint16_t>(b, n + 8);
          return std::vector<uint16_t>(v.begin() + 1, v.begin() + 1 + n);
        };
        ASSERT_TRUE(
            cuda::RmsNorm(dh.as<uint16_t>(), dw.as<float>(), rows, dim, 1e-6f, add_one, out.as<uint16_t>(), nullptr)
                .ok());
        ASSERT_TRUE(cuda::RmsNorm(dh_off.as<uint16_t>() + 1, dw.as<float>(), rows, dim, 1e-6f, add_one,
                                  out_off.as<uint16_t>() + 1, nullptr)
                        .ok());
        EXPECT_EQ(Download<uint16_t>(out, n), from_one(out_off));
        ASSERT_TRUE(cuda::AddRmsNorm(dh.as<uint16_t>(), dy.as<uint16_t>(), dw.as<float>(), rows, dim, 1e-6f, add_one,
                                     out.as<uint16_t>(), nullptr)
                        .ok());
        ASSERT_TRUE(cuda::AddRmsNorm(dh_off.as<uint16_t>() + 1, dy_off.as<uint16_t>() + 1, dw.as<float>(), rows, dim,
                                     1e-6f, add_one, out_off.as<uint16_t>() + 1, nullptr)
                        .ok());
        EXPECT_EQ(Download<uint16_t>(out, n), from_one(out_off));
        const auto hidden = Download<uint16_t>(dh, n);
        EXPECT_EQ(hidden, from_one(dh_off));
        EXPECT_NE(hidden, h);  // the residual landed
      }
    }
  }
}

// The fused residual add + RMSNorm against AddInPlace then RmsNorm: the same bits, for row widths
// that give RmsNorm 64, 128 and 256 threads (and up to 36 elements per thread).
TEST(CudaOps, AddRmsNormIsAddThenRmsNormBitForBit) {
  REQUIRE_GPU();
  for (const int64_t dim : {100, 200, 4096, 5376, 9000}) {
    for (bool add_one : {false, true}) {
      const int64_t rows = 5;
      const auto h = RandomBf16(rows * dim, 20, 4.0f), y = RandomBf16(rows * dim, 21, 2.0f);
      const auto w = ToFloat(RandomBf16(dim, 22, 0.5f));
      auto dh_ref = Upload(h), dh = Upload(h), dy = Upload(y), dw = Upload(w);
      auto normed_ref = Upload(std::vector<uint16_t>(rows * dim, 0xFFFF));
      auto normed = Upload(std::vector<uint16_t>(rows * dim, 0xFFFF));
      ASSERT_TRUE(cuda::AddInPlace(dh_ref.as<uint16_t>(), dy.as<uint16_t>(), rows * dim, nullptr).ok());
      ASSERT_TRUE(cuda::RmsNorm(dh_ref.as<uint16_t>(), dw.as<float>(), rows, dim, 1e-6f, add_one,
                                normed_ref.as<uint16_t>(), nullptr)
                      .ok());
      ASSERT_TRUE(cuda::AddRmsNorm(dh.as<uint16_t>(), dy.as<uint16_t>(), dw.as<float>(), rows, dim, 1e-6f, add_one,
                                   normed.as<uint16_t>(), nullptr)
                      .ok());
      EXPECT_EQ(Download<uint16_t>(dh, rows * dim), Download<uint16_t>(dh_ref, rows * dim)) << dim;
      EXPECT_EQ(Download<uint16_t>(normed, rows * dim), Download<uint16_t>(normed_ref, rows * dim))
          << "dim " << dim << " add_one " << add_one;
    }
  }
}

// PrepareAttention against SplitColumns, RmsNorm (q, k per head), ApplyRope (q, k) and WriteKv:
// the same q and the same KV pools bit for bit. Shapes: Qwen3-8B's heads (fused q|k|v, qk-norm),
// no qk-norm over separate projections (head_dim 80), partial rotary (48 of 64) with Gemma's
// (1 + w) norm, head_dim 256, head_dim 24 (fewer elements than RmsNorm's threads), 64 query heads
// (80 head vectors a token: two blocks of the kernel per token).
TEST(CudaOps, PrepareAttentionIsSplitNormRopeWriteKvBitForBit) {
  REQUIRE_GPU();
  struct Shape {
    int64_t heads, kv_heads, head_dim, rotary;
    bool norm, add_one, fused;
  };
  for (const Shape& sh : {Shape{32, 8, 128, 128, true, false, true}, Shape{6, 2, 80, 80, false, false, false},
                          Shape{4, 2, 64, 48, true, true, true}, Shape{8, 4, 256, 256, true, true, false},
                          Shape{4, 2, 24, 24, false, false, true}, Shape{64, 8, 128, 128, true, false, true}}) {
    // A chunk of 520 tokens: PrepareAttention's kernel for prefills (kManyTokens).
    for (const int64_t chunk : {int64_t{4}, int64_t{520}}) {
      SCOPED_TRACE("head_dim " + std::to_string(sh.head_dim) + " heads " + std::to_string(sh.heads) + ", chunk " +
                   std::to_string(chunk));
      const int64_t hd = sh.head_dim, qd = sh.heads * hd, kvd = sh.kv_heads * hd, block_size = 4,
                    num_blocks = chunk == 4 ? 9 : 140;
      BatchArrays arrays;  // a decode at position 13 and a chunk at 2.., scattered blocks
      std::vector<int32_t> table0 = {5, 0, 7, 2}, table1 = {8, 3};
      for (int32_t b = 9; static_cast<int64_t>(table1.size()) * block_size < chunk + 2; ++b) table1.push_back(b);
      arrays.AddSequence(13, 1, table0, block_size);
      arrays.AddSequence(2, chunk, table1, block_size);
      const int64_t T = arrays.num_tokens();
      std::vector<float> inv_freq(sh.rotary / 2);
      for (int64_t i = 0; i < sh.rotary / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / sh.rotary);
      const auto qkv = RandomBf16(T * (qd + 2 * kvd), 30, 3.0f);
      const auto q_norm = ToFloat(RandomBf16(hd, 31, 0.5f)), k_norm = ToFloat(RandomBf16(hd, 32, 0.5f));
      const auto pool = RandomBf16(num_blocks * block_size * kvd, 33);
      auto dqkv = Upload(qkv), dqn = Upload(q_norm), dkn = Upload(k_norm), dfreq = Upload(inv_freq);
      auto dpos = Upload(arrays.positions), dseq = Upload(arrays.token_seq), dbegin = Upload(arrays.table_begin),
           dtables = Upload(arrays.tables);
      BatchLayout batch;
      batch.num_tokens = T;
      batch.positions = dpos.as<int32_t>();
      batch.token_seq = dseq.as<int32_t>();
      batch.table_begin = dbegin.as<int32_t>();
      batch.tables = dtables.as<int32_t>();
      // The reference: the ops in turn over split q, k, v buffers.
      auto q = Upload(std::vector<uint16_t>(T * qd)), k = Upload(std::vector<uint16_t>(T * kvd)),
           v = Upload(std::vector<uint16_t>(T * kvd));
      auto k_ref = Upload(pool), v_ref = Upload(pool), k_pool = Upload(pool), v_pool = Upload(pool);
      ASSERT_TRUE(cuda::SplitColumns(dqkv.as<uint16_t>(), T, qd, kvd, kvd, q.as<uint16_t>(), k.as<uint16_t>(),
                                     v.as<uint16_t>(), nullptr)
                      .ok());
      // The fused op reads either the fused rows or the split buffers (separate projections).
      const uint16_t* base = dqkv.as<uint16_t>();
      const cuda::QkvRows rows = sh.fused
                                     ? cuda::QkvRows{base, base + qd, base + qd + kvd, qd + 2 * kvd, qd + 2 * kvd}
                                     : cuda::QkvRows{q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(), qd, kvd};
      cuda::QkNormRope p;
      p.q_norm = sh.norm ? dqn.as<float>() : nullptr;
      p.k_norm = sh.norm ? dkn.as<float>() : nullptr;
      p.eps = 1e-6f;
      p.add_one = sh.add_one;
      p.rotary_dim = sh.rotary;
      p.inv_freq = dfreq.as<float>();
      auto q_out = Upload(std::vector<uint16_t>(T * qd, 0xFFFF));
      const cuda::PagedKvLayer fused_cache{
          k_pool.as<uint16_t>(), v_pool.as<uint16_t>(), num_blocks, block_size, sh.kv_heads, hd};
      ASSERT_TRUE(cuda::PrepareAttention(fused_cache, batch, sh.heads, rows, p, q_out.as<uint16_t>(), nullptr).ok());
      ASSERT_TRUE(cuda::Synchronize(nullptr).ok());
      if (sh.norm) {
        ASSERT_TRUE(cuda::RmsNorm(q.as<uint16_t>(), dqn.as<float>(), T * sh.heads, hd, 1e-6f, sh.add_one,
                                  q.as<uint16_t>(), nullptr)
                        .ok());
        ASSERT_TRUE(cuda::RmsNorm(k.as<uint16_t>(), dkn.as<float>(), T * sh.kv_heads, hd, 1e-6f, sh.add_one,
                                  k.as<uint16_t>(), nullptr)
                        .ok());
      }
      ASSERT_TRUE(
          cuda::ApplyRope(q.as<uint16_t>(), T, sh.heads, hd, sh.rotary, dpos.as<int32_t>(), dfreq.as<float>(), nullptr)
              .ok());
      ASSERT_TRUE(cuda::ApplyRope(k.as<uint16_t>(), T, sh.kv_heads, hd, sh.rotary, dpos.as<int32_t>(),
                                  dfreq.as<float>(), nullptr)
                      .ok());
      const cuda::PagedKvLayer ref_cache{k_ref.as<uint16_t>(), v_ref.as<uint16_t>(), num_blocks,
                                         block_size,           sh.kv_heads,          hd};
      ASSERT_TRUE(cuda::WriteKv(ref_cache, batch, k.as<uint16_t>(), v.as<uint16_t>(), nullptr).ok());
      EXPECT_EQ(Download<uint16_t>(q_out, T * qd), Download<uint16_t>(q, T * qd));
      const auto k_got = Download<uint16_t>(k_pool, pool.size());
      EXPECT_EQ(k_got, Download<uint16_t>(k_ref, pool.size()));
      EXPECT_EQ(Download<uint16_t>(v_pool, pool.size()), Download<uint16_t>(v_ref, pool.size()));
      EXPECT_NE(k_got, pool);  // the new keys landed
    }
  }
}

// Logits to fp32: exact without a cap; with cap 30 the bf16-rounded chain, worked by hand:
// 15 * (1/30) = 0.5 -> tanh 0.46211 -> bf16 0.462890625 -> * 30 = 13.8867 -> bf16 13.875
// (fp32 soft-cap: 13.8635); 40 -> 1.3359375 -> 0.87109375 -> 26.125; -100 -> -29.875.
TEST(CudaOps, LogitsToFloatRoundsSoftCapLikeTransformers) {
  REQUIRE_GPU();
  const std::vector<uint16_t> x = {0x3F80, 0xC2F7, FloatToBf16(15.0f), FloatToBf16(40.0f), FloatToBf16(-100.0f)};
  auto dx = Upload(x);
  auto out = Upload(std::vector<float>(x.size(), -1.0f));
  ASSERT_TRUE(cuda::LogitsToFloat(dx.as<uint16_t>(), 5, 0.0f, out.as<float>(), nullptr).ok());
  EXPECT_EQ(Download<float>(out, 5), (std::vector<float>{1.0f, -123.5f, 15.0f, 40.0f, -100.0f}));
  ASSERT_TRUE(cuda::LogitsToFloat(dx.as<uint16_t>() + 2, 3, 30.0f, out.as<float>(), nullptr).ok());
  EXPECT_EQ(Download<float>(out, 3), (std::vector<float>{13.875f, 26.125f, -29.875f}));
}

// Paged attention over a ragged batch vs the CPU: prefill + decode mixed (tiles of several tokens,
// warps own rows) and decode only (warps split keys, split-KV), contexts over several 64-key tiles,
// GQA, sliding window, softcap, head dims 16 to 256.
struct AttentionSeq {
  int64_t first, n;  // cached positions, new tokens
};

void CheckAttention(const std::vector<AttentionSeq>& seqs, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  const int64_t block_size = 4;
  int64_t num_blocks = 0;
  for (const AttentionSeq& s : seqs) num_blocks += (s.first + s.n + block_size - 1) / block_size;
  num_blocks += 3;
  // Block tables: blocks handed out in a scattered order (a stride coprime to num_blocks).
  std::vector<std::vector<int32_t> > tables(seqs.size());
  int64_t next = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int64_t b = 0; b < (seqs[i].first + seqs[i].n + block_size - 1) / block_size; ++b) {
      tables[i].push_back(static_cast<int32_t>((next++ * 7 + 1) % num_blocks));
    }
  }
  ASSERT_NE(num_blocks % 7, 0);
  BatchArrays arrays;
  for (size_t i = 0; i < seqs.size(); ++i) arrays.AddSequence(seqs[i].first, seqs[i].n, tables[i], block_size);
  const int64_t T = arrays.num_tokens();
  const int64_t pool = num_blocks * block_size * kv_heads * head_dim;
  const auto k_pool = RandomBf16(pool, 8), v_pool = RandomBf16(pool, 9);  // history for cached positions
  const auto k_new = RandomBf16(T * kv_heads * head_dim, 10), v_new = RandomBf16(T * kv_heads * head_dim, 11);
  const auto q = RandomBf16(T * heads * head_dim, 12);
  for (const auto& variant : {std::pair<int64_t, float>{0, 0.0f}, {5, 0.0f}, {150, 0.0f}, {0, 2.0f}}) {
    const int64_t window = variant.first;
    const float softcap = variant.second;
    std::vector<float> ck = ToFloat(k_pool), cv = ToFloat(v_pool);
    const cpu::PagedKvLayer cpu_cache{ck.data(), cv.data(), num_blocks, block_size, kv_heads, head_dim};
    cpu::WriteKv(cpu_cache, arrays.HostLayout(), ToFloat(k_new).data(), ToFloat(v_new).data(), 1);
    std::vector<float> want(T * heads * head_dim);
    const float scale = 1.0f / std::sqrt(float(head_dim));
    cpu::PagedAttention(cpu_cache, arrays.HostLayout(), {heads, scale, window, softcap}, ToFloat(q).data(), want.data(),
                        1);

    auto dk = Upload(k_pool), dv = Upload(v_pool), dkn = Upload(k_new), dvn = Upload(v_new), dq = Upload(q);
    auto dpos = Upload(arrays.positions), dseq = Upload(arrays.token_seq), dbegin = Upload(arrays.table_begin);
    auto dtables = Upload(arrays.tables);
    auto out = Upload(std::vector<uint16_t>(T * heads * head_dim, 0xFFFF));
    const cuda::PagedKvLayer cache{dk.as<uint16_t>(), dv.as<uint16_t>(), num_blocks, block_size, kv_heads, head_dim};
    int64_t tile_tokens = 0;
    const auto tiles = AttentionTiles(arrays.token_seq, arrays.positions,
                                      cuda::AttentionTileTokens(heads, kv_heads, head_dim), &tile_tokens);
    auto dtiles = Upload(tiles);
    const BatchLayout batch{T,
                            dpos.as<int32_t>(),
                            dseq.as<int32_t>(),
                            dbegin.as<int32_t>(),
                            dtables.as<int32_t>(),
                            dtiles.as<int32_t>(),
                            static_cast<int64_t>(tiles.size() / 2),
                            tile_tokens};
    ASSERT_TRUE(cuda::WriteKv(cache, batch, dkn.as<uint16_t>(), dvn.as<uint16_t>(), nullptr).ok());
    const AttentionParams params{heads, scale, window, softcap};
    // One launch into an output refilled with NaNs (0xFFFF) first, so an output the launch leaves
    // unwritten fails the comparisons instead of keeping an earlier launch's value.
    const std::vector<uint16_t> nans(want.size(), 0xFFFF);
    auto launch = [&](const BatchLayout& lb, std::vector<uint16_t>* result) {
      ASSERT_TRUE(cuda::CopyToDevice(out.as<uint16_t>(), nans.data(), nans.size() * sizeof(uint16_t), nullptr).ok());
      ASSERT_TRUE(cuda::PagedAttention(cache, lb, params, dq.as<uint16_t>(), out.as<uint16_t>(), nullptr).ok());
      *result = Download<uint16_t>(out, want.size());
    };
    // 1e-2: the kernel rounds probabilities to bf16 for P·V and the output to bf16; the CPU twin
    // keeps everything fp32.
    std::vector<uint16_t> got, again;
    launch(batch, &got);
    EXPECT_LE(testing::MaxRelDiff(ToFloat(got), want), 1e-2) << "window " << window << " softcap " << softcap;
    launch(batch, &again);  // same bits on a second run (deterministic)
    EXPECT_EQ(again, got);
    // A variant: within 1e-2 of the CPU twin and of the plain launch, the same bits twice.
    auto check_variant = [&](const BatchLayout& vb, const char* what) {
      std::vector<uint16_t> variant, repeat;
      launch(vb, &variant);
      EXPECT_LE(testing::MaxRelDiff(ToFloat(variant), want), 1e-2)
          << what << ", window " << window << " softcap " << softcap;
      EXPECT_LE(testing::MaxRelDiff(ToFloat(variant), ToFloat(got)), 1e-2) << what << " vs the plain launch";
      launch(vb, &repeat);
      EXPECT_EQ(repeat, variant) << what;
    };
    // Split-KV (flash-decoding, decode-only batches) with a workspace: fp32 sums in another order.
    int64_t max_keys = 0;
    for (const auto& sq : seqs) max_keys = std::max<int64_t>(max_keys, sq.first + sq.n);
    auto workspace = Upload(std::vector<float>(cuda::AttentionWorkspaceFloats(head_dim), 0.0f));
    BatchLayout split_batch = batch;
    split_batch.max_keys = max_keys;
    split_batch.split_workspace = workspace.as<float>();
    check_variant(split_batch, "split-KV");
    // Decode-only batches in prefill-mode blocks (128 rows, 64 above head dim 128; warps own rows
    // instead of keys).
    BatchLayout prefill_mode = batch;
    prefill_mode.tile_tokens = std::max<int64_t>(batch.tile_tokens, 2);
    check_variant(prefill_mode, "prefill-mode blocks");
    EXPECT_EQ(Download<uint16_t>(dk, pool), [&] {  // the cache holds exactly the written keys
      std::vector<uint16_t> k(pool);
      for (int64_t i = 0; i < pool; ++i) k[i] = FloatToBf16(ck[i]);
      return k;
    }());
  }
}

TEST(CudaOps, PagedAttentionMatchesCpu) {
  REQUIRE_GPU();
  // Mixed: a 13-token prefill, a decode over 300 cached positions, a 3-token chunk, a 40-token
  // prefill after 200 cached (several tiles of tokens and of keys). 6 heads over 2 KV heads, dim 80.
  CheckAttention({{0, 13}, {300, 1}, {5, 3}, {200, 40}}, 6, 2, 80);
  // Decode only (warps split keys): groups of 4 (Qwen3-8B's 32/8), dim 128.
  CheckAttention({{300, 1}, {0, 1}, {129, 1}, {127, 1}}, 8, 2, 128);
  // No GQA, dim 16 (lanes past the head dim idle), group of 32 heads over one KV head, dim 256.
  CheckAttention({{20, 7}, {3, 1}}, 2, 2, 16);
  CheckAttention({{40, 2}, {150, 1}}, 32, 1, 256);
  // Qwen3-8B's heads over long contexts (many key splits); a long prefill (several 128-row blocks per
  // sequence); head_dim 24 (padded to 64, the Mistral fixture's).
  CheckAttention({{4000, 1}, {700, 1}}, 32, 8, 128);
  // 32 decode sequences over 1,950-3,100 keys of Qwen3-8B's heads: 256 blocks, under one wave of an
  // H100's or H200's 396 decode slots, over enough key tiles to take splits past one wave (3 there).
  std::vector<AttentionSeq> long_decodes;
  for (int64_t i = 0; i < 32; ++i) long_decodes.push_back({3100 - 37 * i, 1});
  CheckAttention(long_decodes, 32, 8, 128);
  // 60 decode sequences of Qwen3-8B's heads over 3-701 keys: 480 blocks, past one wave of an H100's
  // or H200's 396 slots, so the last wave's blocks (the shortest sequences) split their keys
  // (DecodeTailSplits: 4 there; sequences of one tile leave splits idle).
  std::vector<AttentionSeq> tail_decodes;
  for (int64_t i = 0; i < 56; ++i) tail_decodes.push_back({700 - 5 * i, 1});
  for (const int64_t first : {2, 63, 64, 133}) tail_decodes.push_back({first, 1});
  CheckAttention(tail_decodes, 32, 8, 128);
  CheckAttention({{0, 150}, {64, 70}}, 4, 1, 64);
  CheckAttention({{10, 5}, {70, 1}}, 4, 2, 24);
  // Prefills of Qwen3-8B's group of 4 at dim 128 over many 32-token tiles, one behind 100 cached
  // positions, with a decode token in the same batch; dim 96 without GQA (128-token tiles). On an
  // H100 these run the Hopper prefill kernel (head dims 65..128).
  CheckAttention({{0, 300}, {100, 77}, {4, 1}}, 8, 2, 128);
  CheckAttention({{0, 200}, {30, 13}}, 4, 4, 96);
}

// Flash-decoding's key splits on an H100's or H200's 396 decode slots (3 blocks an SM x 132): the
// rule's choices, worked by hand from the comment on DecodeKeySplits, at shapes measured on an H200
// (bench/results/attention_h200_splits*.log; past one wave each is the best or tied-best forced
// count of attention_h200_splits_long.log or attention_h200_splits_4096.log); host code, so this
// runs without a GPU. Blocks: sequences x 8 KV heads (Qwen3-8B); max_keys: a power of two up to
// twice the longest sequence's keys.
TEST(CudaOps, DecodeKeySplitsFollowTheMeasuredRule) {
  constexpr int64_t kSlots = 396;
  // Under one wave: the most splits that fit it, at most ceil(sqrt(3 tiles)).
  EXPECT_EQ(cuda::DecodeKeySplits(8, 8192, kSlots), 20);   // 1 sequence over 4,096 keys
  EXPECT_EQ(cuda::DecodeKeySplits(8, 1024, kSlots), 7);    // 1 over 512
  EXPECT_EQ(cuda::DecodeKeySplits(64, 8192, kSlots), 6);   // 8 over 4,096
  EXPECT_EQ(cuda::DecodeKeySplits(192, 8192, kSlots), 2);  // 24 over 4,096
  EXPECT_EQ(cuda::DecodeKeySplits(256, 1024, kSlots), 1);  // 32 over 512: one wave
  EXPECT_EQ(cuda::DecodeKeySplits(384, 8192, kSlots), 1);  // 48 over 4,096: one wave, 97% of the slots
  // Long contexts past one wave when that uses the slots 5% better.
  EXPECT_EQ(cuda::DecodeKeySplits(224, 8192, kSlots), 5);  // 28 over 4,096
  EXPECT_EQ(cuda::DecodeKeySplits(256, 8192, kSlots), 3);  // 32 over 4,096
  EXPECT_EQ(cuda::DecodeKeySplits(256, 4096, kSlots), 3);  // 32 over 2,048
  EXPECT_EQ(cuda::DecodeKeySplits(320, 8192, kSlots), 6);  // 40 over 4,096
  EXPECT_EQ(cuda::DecodeKeySplits(512, 8192, kSlots), 3);  // 64 over 4,096
  EXPECT_EQ(cuda::DecodeKeySplits(512, 1024, kSlots), 1);  // 64 over 512: 2-8 splits measured slower
  // Nothing to split, or nothing known.
  EXPECT_EQ(cuda::DecodeKeySplits(8, 64, kSlots), 1);
  EXPECT_EQ(cuda::DecodeKeySplits(8, 8192, 0), 1);
  EXPECT_EQ(cuda::DecodeKeySplits(0, 8192, kSlots), 1);
}

// The splits of the last wave's blocks where DecodeKeySplits leaves a grid past one wave unsplit, on
// 396 slots (as above): slots / tail blocks, at most ceil(sqrt(3 tiles)) and a tile's each.
TEST(CudaOps, DecodeTailSplitsFillTheLastWave) {
  constexpr int64_t kSlots = 396;
  EXPECT_EQ(cuda::DecodeTailSplits(512, 1024, kSlots), 3);  // 64 sequences over 512: 116 blocks past one wave
  EXPECT_EQ(cuda::DecodeTailSplits(448, 1024, kSlots), 7);  // 56: 52 past it, 7 (sqrt(3 x 16) rounded up)
  EXPECT_EQ(cuda::DecodeTailSplits(400, 1024, kSlots), 7);  // 50: 4 past it
  EXPECT_EQ(cuda::DecodeTailSplits(400, 128, kSlots), 2);   // over 65-128 keys: 2 tiles
  EXPECT_EQ(cuda::DecodeTailSplits(480, 700, kSlots), 4);   // the CUDA attention test's 60 sequences
  EXPECT_EQ(cuda::DecodeTailSplits(800, 1024, kSlots), 7);  // 100: 8 past two waves
  // A last wave more than half full, one wave or less, splits of every block, nothing to split.
  EXPECT_EQ(cuda::DecodeTailSplits(640, 1024, kSlots), 1);  // 80: 244 past one wave
  EXPECT_EQ(cuda::DecodeTailSplits(1024, 1024, kSlots), 1);
  EXPECT_EQ(cuda::DecodeTailSplits(792, 1024, kSlots), 1);  // two whole waves
  EXPECT_EQ(cuda::DecodeTailSplits(384, 1024, kSlots), 1);
  EXPECT_EQ(cuda::DecodeTailSplits(512, 8192, kSlots), 1);  // 64 over 4,096: 3 splits of every block
  EXPECT_EQ(cuda::DecodeTailSplits(512, 64, kSlots), 1);
  EXPECT_EQ(cuda::DecodeTailSplits(512, 1024, 0), 1);
}

// cuBLAS GEMM (+bias through accumulate) vs the CPU matmul, and the same bits whether W sits in
// its own allocation or at a 256-byte-aligned offset inside a larger buffer (the DF11 scratch).
// 20 tokens run cuBLAS; GemmBias's single token runs Gemv.
TEST(CudaOps, GemmMatchesCpuAndIsPlacementIndependent) {
  REQUIRE_GPU();
  const int64_t tokens = 20, n = 96, k = 256;
  const auto x = RandomBf16(tokens * k, 13), w = RandomBf16(n * k, 14, 0.05f);
  const auto bias = ToFloat(RandomBf16(n, 15));
  std::vector<float> want(tokens * n);
  cpu::MatmulBf16(ToFloat(x).data(), w.data(), bias.data(), tokens, n, k, want.data(), 1);
  auto stream = cuda::CreateStream();
  ASSERT_TRUE(stream.ok());
  cuda::GemmHandle gemm;
  ASSERT_TRUE(gemm.Init(*stream).ok());
  auto dx = Upload(x), dw = Upload(w), dbias = Upload(bias);
  constexpr int64_t kOffset = int64_t{128} * 3;  // elements: a 768-byte offset, still 256-byte aligned
  std::vector<uint16_t> big(n * k + kOffset, 0);
  std::copy(w.begin(), w.end(), big.begin() + kOffset);
  auto dbig = Upload(big);
  auto y1 = Upload(std::vector<uint16_t>(tokens * n)), y2 = Upload(std::vector<uint16_t>(tokens * n));
  for (auto [weights, y] : {std::pair{dw.as<uint16_t>(), &y1}, std::pair{dbig.as<uint16_t>() + kOffset, &y2}}) {
    ASSERT_TRUE(cuda::BroadcastBias(dbias.as<float>(), tokens, n, y->as<uint16_t>(), *stream).ok());
    ASSERT_TRUE(gemm.Gemm(dx.as<uint16_t>(), weights, tokens, n, k, true, y->as<uint16_t>()).ok());
  }
  ASSERT_TRUE(cuda::Synchronize(*stream).ok());
  const auto got1 = Download<uint16_t>(y1, tokens * n), got2 = Download<uint16_t>(y2, tokens * n);
  EXPECT_EQ(got1, got2);
  EXPECT_LE(testing::MaxRelDiff(ToFloat(got1), want), 1e-2);
  // GemmBias: cublasLt's bias epilogue for several tokens, broadcast + accumulate for one.
  for (const int64_t t : {tokens, int64_t{1}}) {
    ASSERT_TRUE(
        gemm.GemmBias(dx.as<uint16_t>(), dw.as<uint16_t>(), dbias.as<float>(), t, n, k, y1.as<uint16_t>(), *stream)
            .ok());
    ASSERT_TRUE(cuda::Synchronize(*stream).ok());
    EXPECT_LE(testing::MaxRelDiff(ToFloat(Download<uint16_t>(y1, t * n)),
                                  std::vector<float>(want.begin(), want.begin() + t * n)),
              1e-2)
        << t << " tokens";
  }
  cuda::DestroyStream(*stream);
}

// Gemv (the small-batch linear GemmHandle runs below kTileGemmMinTokens tokens; it takes 1..kGemvMaxTokens) vs the CPU
// matmul for every token count, with a bias, with accumulate, with K not a multiple of the 256 elements a warp reads
// per step and N not a multiple of the 8 rows a block owns; the same bits twice.
TEST(CudaOps, GemvMatchesCpuForEveryTokenCount) {
  REQUIRE_GPU();
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{37, 264}, {96, 4096}, {1000, 1032}}) {
    for (int64_t tokens = 1; tokens <= cuda::kGemvMaxTokens; ++tokens) {
      SCOPED_TRACE(std::to_string(tokens) + " tokens, n " + std::to_string(n) + ", k " + std::to_string(k));
      const auto x = RandomBf16(tokens * k, 20 + tokens), w = RandomBf16(n * k, 21, 0.05f);
      const auto bias = ToFloat(RandomBf16(n, 22));
      std::vector<float> want(tokens * n);
      cpu::MatmulBf16(ToFloat(x).data(), w.data(), bias.data(), tokens, n, k, want.data(), 1);
      auto dx = Upload(x), dw = Upload(w), dbias = Upload(bias);
      auto y = Upload(std::vector<uint16_t>(tokens * n)), again = Upload(std::vector<uint16_t>(tokens * n));
      ASSERT_TRUE(cuda::GemvApplies(dx.as<uint16_t>(), dw.as<uint16_t>(), tokens, k));
      for (auto* out : {&y, &again}) {
        ASSERT_TRUE(cuda::Gemv(dx.as<uint16_t>(), dw.as<uint16_t>(), dbias.as<float>(), tokens, n, k, false,
                               out->as<uint16_t>(), nullptr)
                        .ok());
      }
      const auto got = Download<uint16_t>(y, tokens * n);
      EXPECT_EQ(got, Download<uint16_t>(again, tokens * n));
      EXPECT_LE(testing::MaxRelDiff(ToFloat(got), want), 1e-2);
      // accumulate: the bias broadcast into y first, then y += x · W^T.
      ASSERT_TRUE(cuda::BroadcastBias(dbias.as<float>(), tokens, n, y.as<uint16_t>(), nullptr).ok());
      ASSERT_TRUE(
          cuda::Gemv(dx.as<uint16_t>(), dw.as<uint16_t>(), nullptr, tokens, n, k, true, y.as<uint16_t>(), nullptr)
              .ok());
      EXPECT_LE(testing::MaxRelDiff(ToFloat(Download<uint16_t>(y, tokens * n)), want), 1e-2);
    }
  }
  const auto x = Upload(RandomBf16(16, 1));
  EXPECT_FALSE(cuda::GemvApplies(x.as<uint16_t>(), x.as<uint16_t>(), cuda::kGemvMaxTokens + 1, 8));
  EXPECT_FALSE(cuda::GemvApplies(x.as<uint16_t>(), x.as<uint16_t>(), 1, 12));
  EXPECT_EQ(cuda::Gemv(x.as<uint16_t>(), x.as<uint16_t>(), nullptr, 1, 1, 12, false, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
}

// gated(out) writes out[T, inter] with the bits of linear(gate_up) into [T, 2 inter] followed by
// GatedActivation(act), and writes every element.
void ExpectGatedIsLinearThenActivation(int64_t tokens, int64_t inter, Activation act,
                                       const std::function<Status(uint16_t* gate_up)>& linear,
                                       const std::function<Status(uint16_t* out)>& gated) {
  auto gate_up = Upload(std::vector<uint16_t>(tokens * 2 * inter));
  auto want = Upload(std::vector<uint16_t>(tokens * inter, 0x7fc0));  // NaN: unwritten shows
  auto got = Upload(std::vector<uint16_t>(tokens * inter, 0x7fc0));
  ASSERT_TRUE(linear(gate_up.as<uint16_t>()).ok());
  ASSERT_TRUE(cuda::GatedActivation(act, gate_up.as<uint16_t>(), 2 * inter, gate_up.as<uint16_t>() + inter, 2 * inter,
                                    tokens, inter, want.as<uint16_t>(), nullptr)
                  .ok());
  const Status st = gated(got.as<uint16_t>());
  ASSERT_TRUE(st.ok()) << st.ToString();
  const auto g = Download<uint16_t>(got, tokens * inter);
  EXPECT_EQ(g, Download<uint16_t>(want, tokens * inter));
  EXPECT_EQ(std::count(g.begin(), g.end(), uint16_t{0x7fc0}), 0);
}

// GemvGated (a gate|up linear and its gated activation in one launch) against Gemv into [T, 2 inter]
// then GatedActivation: the same bits for every token count, both activations, with and without a
// bias, and inter whose warps own one or two pairs (2 inter below / from 8,192 rows), odd, and
// not a multiple of a block's pairs.
TEST(CudaOps, GemvGatedIsGemvThenGatedActivationBitForBit) {
  REQUIRE_GPU();
  for (const auto& shape : {std::pair<int64_t, int64_t>{37, 264}, {96, 4096}, {4100, 136}, {4097, 64}}) {
    const int64_t inter = shape.first, k = shape.second;  // the lambdas below capture these
    const auto w = RandomBf16(2 * inter * k, 41, 0.05f);
    const auto bias = ToFloat(RandomBf16(2 * inter, 42));
    auto dw = Upload(w), dbias = Upload(bias);
    for (int64_t tokens = 1; tokens <= cuda::kGemvMaxTokens; ++tokens) {
      auto dx = Upload(RandomBf16(tokens * k, 40 + tokens, 2.0f));
      for (const Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
        for (const bool with_bias : {false, true}) {
          SCOPED_TRACE(std::to_string(tokens) + " tokens, inter " + std::to_string(inter) + ", k " + std::to_string(k) +
                       (act == Activation::kSilu ? ", silu" : ", gelu") + (with_bias ? ", bias" : ""));
          const float* b = with_bias ? dbias.as<float>() : nullptr;
          ExpectGatedIsLinearThenActivation(
              tokens, inter, act,
              [&](uint16_t* gate_up) {
                return cuda::Gemv(dx.as<uint16_t>(), dw.as<uint16_t>(), b, tokens, 2 * inter, k, false, gate_up,
                                  nullptr);
              },
              [&](uint16_t* out) {
                return cuda::GemvGated(act, dx.as<uint16_t>(), dw.as<uint16_t>(), b, tokens, inter, k, out, nullptr);
              });
        }
      }
    }
  }
  const auto x = Upload(RandomBf16(16, 1));
  EXPECT_EQ(cuda::GemvGated(Activation::kSilu, x.as<uint16_t>(), x.as<uint16_t>(), nullptr, cuda::kGemvMaxTokens + 1, 1,
                            8, nullptr, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      cuda::GemvGated(Activation::kSilu, x.as<uint16_t>(), x.as<uint16_t>(), nullptr, 1, 0, 8, nullptr, nullptr).code(),
      StatusCode::kInvalidArgument);
}

// A token's outputs do not depend on how many tokens share its call within one token bucket (the
// groups of 8 tokens past T multiply zeros into sums no one stores): T tokens give the first T rows
// of the bucket's largest count on the same x, bit for bit, every tile height. Buckets: 3-8, 9-16,
// 17-32 and 33-64 tokens, and for one row per tile 17-24, 25-32, 33-48 and 49-64.
TEST(CudaOps, TileGemmRowsDoNotDependOnTheTokensBesideThem) {
  REQUIRE_GPU();
  // The largest count of T's bucket (cuda_gemm.h, TileGemm).
  auto bucket_end = [](int rows_per_tile, int64_t t) -> int64_t {
    for (const int64_t end : {8, 16, 24, 32, 48}) {
      if (t <= end && (rows_per_tile == 1 || (end != 24 && end != 48))) return end;
    }
    return 64;
  };
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{96, 4096}, {1000, 1032}}) {
    const auto x = RandomBf16(64 * k, 40), w = RandomBf16(n * k, 41, 0.05f);
    auto dx = Upload(x), dw = Upload(w);
    for (const int rows_per_tile : {1, 2, 4}) {
      for (const int64_t tokens : {9, 17, 25, 33, 41, 57}) {
        const int64_t full = bucket_end(rows_per_tile, tokens);
        SCOPED_TRACE(std::to_string(tokens) + " of " + std::to_string(full) + " tokens, n " + std::to_string(n) + ", " +
                     std::to_string(rows_per_tile) + " rows per tile");
        auto y = Upload(std::vector<uint16_t>(full * n)), all = Upload(std::vector<uint16_t>(full * n));
        ASSERT_TRUE(cuda::TileGemm(dx.as<uint16_t>(), dw.as<uint16_t>(), nullptr, tokens, n, k, false, y.as<uint16_t>(),
                                   nullptr, rows_per_tile)
                        .ok());
        ASSERT_TRUE(cuda::TileGemm(dx.as<uint16_t>(), dw.as<uint16_t>(), nullptr, full, n, k, false, all.as<uint16_t>(),
                                   nullptr, rows_per_tile)
                        .ok());
        EXPECT_EQ(Download<uint16_t>(y, tokens * n), Download<uint16_t>(all, tokens * n));
      }
    }
  }
}

// TileGemmGated (a gate|up linear and its gated activation in one tile-kernel launch) against
// TileGemm with the same rows per tile into [T, 2 inter] then GatedActivation: the same bits in every
// token bucket, every tile height, both activations, with and without a bias, K not a multiple of a
// stage, inter of one and of many CTAs; an inter that is not a multiple of a CTA's gate rows is
// refused.
TEST(CudaOps, TileGemmGatedIsTileGemmThenGatedActivationBitForBit) {
  REQUIRE_GPU();
  for (const auto& shape : {std::pair<int64_t, int64_t>{32, 264}, {96, 1032}, {2048, 4096}}) {
    const int64_t inter = shape.first, k = shape.second;  // the lambdas below capture these
    const auto w = RandomBf16(2 * inter * k, 51, 0.05f);
    const auto bias = ToFloat(RandomBf16(2 * inter, 52));
    auto dw = Upload(w), dbias = Upload(bias);
    for (const int64_t tokens : {2, 3, 8, 9, 16, 17, 24, 25, 32, 33, 48, 49, 64}) {
      auto dx = Upload(RandomBf16(tokens * k, 50 + tokens, 2.0f));
      for (const int rows_per_tile : {0, 1, 2, 4}) {
        ASSERT_TRUE(cuda::TileGemmGatedApplies(dx.as<uint16_t>(), dw.as<uint16_t>(), tokens, inter, k, rows_per_tile));
        for (const Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
          for (const bool with_bias : {false, true}) {
            SCOPED_TRACE(std::to_string(tokens) + " tokens, inter " + std::to_string(inter) + ", k " +
                         std::to_string(k) + ", " + std::to_string(rows_per_tile) + " rows per tile" +
                         (act == Activation::kSilu ? ", silu" : ", gelu") + (with_bias ? ", bias" : ""));
            const float* b = with_bias ? dbias.as<float>() : nullptr;
            ExpectGatedIsLinearThenActivation(
                tokens, inter, act,
                [&](uint16_t* gate_up) {
                  return cuda::TileGemm(dx.as<uint16_t>(), dw.as<uint16_t>(), b, tokens, 2 * inter, k, false, gate_up,
                                        nullptr, rows_per_tile);
                },
                [&](uint16_t* out) {
                  return cuda::TileGemmGated(act, dx.as<uint16_t>(), dw.as<uint16_t>(), b, tokens, inter, k, out,
                                             nullptr, rows_per_tile);
                });
          }
        }
      }
    }
  }
  const auto x = Upload(RandomBf16(size_t{64} * 64, 1));
  // 4 rows per tile: a CTA takes 32 gate rows, so inter 48 would put up rows among its gate rows.
  EXPECT_EQ(cuda::TileGemmGatedRows(4), 32);
  EXPECT_FALSE(cuda::TileGemmGatedApplies(x.as<uint16_t>(), x.as<uint16_t>(), 8, 48, 64, 4));
  EXPECT_TRUE(cuda::TileGemmGatedApplies(x.as<uint16_t>(), x.as<uint16_t>(), 8, 48, 64, 2));
  EXPECT_FALSE(cuda::TileGemmGatedApplies(x.as<uint16_t>(), x.as<uint16_t>(), 1, 64, 64, 1));  // GEMV tokens
  EXPECT_FALSE(cuda::TileGemmGatedApplies(x.as<uint16_t>(), x.as<uint16_t>(), 8, 64, 64, 3));
  EXPECT_EQ(cuda::TileGemmGated(Activation::kSilu, x.as<uint16_t>(), x.as<uint16_t>(), nullptr, 8, 48, 64, nullptr,
                                nullptr, 4)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      cuda::TileGemmGated(Activation::kSilu, x.as<uint16_t>(), x.as<uint16_t>(), nullptr, 8, 0, 64, nullptr, nullptr)
          .code(),
      StatusCode::kInvalidArgument);
}

// TileGemm (the tensor-core linear GemmHandle runs for kTileGemmMinTokens <= T <= kTileGemmMaxTokens)
// vs the CPU matmul: every token bucket (<= 8, 16, 32, 64), every tile height, a bias, accumulate, K
// not a multiple of a stage (1024 / rows_per_tile columns) nor of 32, N not a multiple of a CTA's
// rows; the same bits twice.
TEST(CudaOps, TileGemmMatchesCpu) {
  REQUIRE_GPU();
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{37, 264}, {96, 4096}, {1000, 1032}, {8200, 136}}) {
    for (const int64_t tokens : {2, 3, 8, 9, 16, 17, 24, 25, 32, 33, 48, 49, 64}) {
      const auto x = RandomBf16(tokens * k, 30 + tokens), w = RandomBf16(n * k, 31, 0.05f);
      const auto bias = ToFloat(RandomBf16(n, 32));
      std::vector<float> want(tokens * n);
      cpu::MatmulBf16(ToFloat(x).data(), w.data(), bias.data(), tokens, n, k, want.data(), 1);
      auto dx = Upload(x), dw = Upload(w), dbias = Upload(bias);
      ASSERT_TRUE(cuda::TileGemmApplies(dx.as<uint16_t>(), dw.as<uint16_t>(), tokens, k));
      for (const int rows_per_tile : {0, 1, 2, 4}) {
        SCOPED_TRACE(std::to_string(tokens) + " tokens, n " + std::to_string(n) + ", k " + std::to_string(k) + ", " +
                     std::to_string(rows_per_tile) + " rows per tile");
        auto y = Upload(std::vector<uint16_t>(tokens * n)), again = Upload(std::vector<uint16_t>(tokens * n));
        for (auto* out : {&y, &again}) {
          ASSERT_TRUE(cuda::TileGemm(dx.as<uint16_t>(), dw.as<uint16_t>(), dbias.as<float>(), tokens, n, k, false,
                                     out->as<uint16_t>(), nullptr, rows_per_tile)
                          .ok());
        }
        const auto got = Download<uint16_t>(y, tokens * n);
        EXPECT_EQ(got, Download<uint16_t>(again, tokens * n));
        EXPECT_LE(testing::MaxRelDiff(ToFloat(got), want), 1e-2);
        ASSERT_TRUE(cuda::BroadcastBias(dbias.as<float>(), tokens, n, y.as<uint16_t>(), nullptr).ok());
        ASSERT_TRUE(cuda::TileGemm(dx.as<uint16_t>(), dw.as<uint16_t>(), nullptr, tokens, n, k, true, y.as<uint16_t>(),
                                   nullptr, rows_per_tile)
                        .ok());
        EXPECT_LE(testing::MaxRelDiff(ToFloat(Download<uint16_t>(y, tokens * n)), want), 1e-2);
      }
    }
  }
  const auto x = Upload(RandomBf16(16, 1));
  EXPECT_FALSE(cuda::TileGemmApplies(x.as<uint16_t>(), x.as<uint16_t>(), cuda::kTileGemmMinTokens - 1, 8));
  EXPECT_FALSE(cuda::TileGemmApplies(x.as<uint16_t>(), x.as<uint16_t>(), cuda::kTileGemmMaxTokens + 1, 8));
  EXPECT_FALSE(cuda::TileGemmApplies(x.as<uint16_t>(), x.as<uint16_t>(), 8, 12));
  EXPECT_EQ(cuda::TileGemm(x.as<uint16_t>(), x.as<uint16_t>(), nullptr, 8, 1, 16, false, nullptr, nullptr, 3).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::TileGemm(x.as<uint16_t>(), x.as<uint16_t>(), nullptr, cuda::kTileGemmMaxTokens + 1, 1, 16, false,
                           nullptr, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
}

// WgmmaGemm (sm_90a) against the CPU's MatmulBf16: rows not a multiple of its 128-row CTAs, K not
// a multiple of its 64-column stages, K split (96 rows: one CTA row, so K splits in up to 8), the
// 64- and 128-token instances; every output written (y starts as a huge value), deterministic run
// to run, and y's old value accumulated.
TEST(CudaOps, WgmmaGemmMatchesCpu) {
  REQUIRE_GPU();
  if (!cuda::WgmmaGemmAvailable()) GTEST_SKIP() << "not a compute capability 9.0 GPU: WgmmaGemm not tested";
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{37, 264}, {96, 4096}, {1000, 1032}, {2048, 2048}}) {
    for (const int64_t tokens : {1, 8, 33, 64, 65, 100, 128}) {
      SCOPED_TRACE(std::to_string(tokens) + " tokens, n " + std::to_string(n) + ", k " + std::to_string(k));
      const auto x = RandomBf16(tokens * k, 40 + tokens), w = RandomBf16(n * k, 41, 0.05f);
      const auto bias = ToFloat(RandomBf16(n, 42));
      std::vector<float> want(tokens * n);
      cpu::MatmulBf16(ToFloat(x).data(), w.data(), bias.data(), tokens, n, k, want.data(), 1);
      auto dx = Upload(x), dw = Upload(w), dbias = Upload(bias);
      auto workspace = Upload(std::vector<float>(cuda::WgmmaGemmWorkspaceFloats(tokens, n, k)));
      const uint16_t huge = FloatToBf16(1e30f);
      auto y = Upload(std::vector<uint16_t>(tokens * n, huge)), again = Upload(std::vector<uint16_t>(tokens * n, huge));
      for (auto* out : {&y, &again}) {
        ASSERT_TRUE(cuda::WgmmaGemm(dx.as<uint16_t>(), dw.as<uint16_t>(), dbias.as<float>(), tokens, n, k, false,
                                    out->as<uint16_t>(), workspace.as<float>(), nullptr)
                        .ok());
      }
      const auto got = Download<uint16_t>(y, tokens * n);
      EXPECT_EQ(got, Download<uint16_t>(again, tokens * n));
      EXPECT_LE(testing::MaxRelDiff(ToFloat(got), want), 1e-2);
      ASSERT_TRUE(cuda::BroadcastBias(dbias.as<float>(), tokens, n, y.as<uint16_t>(), nullptr).ok());
      ASSERT_TRUE(cuda::WgmmaGemm(dx.as<uint16_t>(), dw.as<uint16_t>(), nullptr, tokens, n, k, true, y.as<uint16_t>(),
                                  workspace.as<float>(), nullptr)
                      .ok());
      EXPECT_LE(testing::MaxRelDiff(ToFloat(Download<uint16_t>(y, tokens * n)), want), 1e-2);
    }
  }
  const auto x = Upload(RandomBf16(16, 1));
  auto workspace = Upload(std::vector<float>(16));
  EXPECT_EQ(cuda::WgmmaGemm(x.as<uint16_t>(), x.as<uint16_t>(), nullptr, cuda::kWgmmaGemmMaxTokens + 1, 1, 16, false,
                            nullptr, workspace.as<float>(), nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::WgmmaGemm(x.as<uint16_t>(), x.as<uint16_t>(), nullptr, 8, 1, 12, false, nullptr,
                            workspace.as<float>(), nullptr)
                .code(),
            StatusCode::kInvalidArgument);
}

// GemmHandle::CheckCublasBits: a matrix the wgmma tile linear takes (4 rows per tile: 8,192 rows)
// is checked at 17-128 tokens; where it found cuBLAS equal, Gemm (which runs cuBLAS there) gives
// WgmmaTileGemm's bits on other x than the check's, and cuBLAS itself does; where it did not, Gemm
// still gives them (the tile linear). A matrix of one row per tile is not the tile linear's: nothing
// is checked, cuBLAS never stands in. On an H200 cuBLAS had the bits at every count
// (bench/results/wgmma_tile_h200_*.log); the counts that took it are printed.
TEST(CudaOps, GemmTakesCublasOnlyWithTheWgmmaTileBits) {
  REQUIRE_GPU();
  if (!cuda::WgmmaGemmAvailable()) GTEST_SKIP() << "not a compute capability 9.0 GPU: the wgmma tile linear not tested";
  const int64_t n = 8192, k = 512;
  auto stream = cuda::CreateStream();
  ASSERT_TRUE(stream.ok());
  cuda::GemmHandle gemm;
  ASSERT_TRUE(gemm.Init(*stream).ok());
  const auto dw = Upload(RandomBf16(n * k, 50, 0.05f));
  EXPECT_FALSE(gemm.CublasKeepsBits(n, k, 64));  // nothing checked yet
  auto differed = gemm.CheckCublasBits(dw.as<uint16_t>(), n, k);
  ASSERT_TRUE(differed.ok()) << differed.status().ToString();
  std::string took;
  for (const int64_t tokens : {17, 24, 32, 33, 48, 64, 65, 100, 128}) {
    SCOPED_TRACE(std::to_string(tokens) + " tokens");
    const bool keeps = std::find(differed->begin(), differed->end(), tokens) == differed->end();
    EXPECT_EQ(gemm.CublasKeepsBits(n, k, tokens), keeps);
    if (keeps) took.append(1, ' ').append(std::to_string(tokens));
    const auto dx = Upload(RandomBf16(tokens * k, 51 + static_cast<uint32_t>(tokens)));
    auto y = Upload(std::vector<uint16_t>(tokens * n)), tile = Upload(std::vector<uint16_t>(tokens * n));
    auto cublas = Upload(std::vector<uint16_t>(tokens * n));
    ASSERT_TRUE(gemm.Gemm(dx.as<uint16_t>(), dw.as<uint16_t>(), tokens, n, k, false, y.as<uint16_t>()).ok());
    ASSERT_TRUE(gemm.CublasGemm(dx.as<uint16_t>(), dw.as<uint16_t>(), tokens, n, k, false, cublas.as<uint16_t>()).ok());
    ASSERT_TRUE(cuda::WgmmaTileGemm(dx.as<uint16_t>(), dw.as<uint16_t>(), nullptr, tokens, n, k, false,
                                    tile.as<uint16_t>(), *stream, cuda::kWgmmaTileModelConfig)
                    .ok());
    ASSERT_TRUE(cuda::Synchronize(*stream).ok());
    const auto want = Download<uint16_t>(tile, tokens * n);
    EXPECT_EQ(Download<uint16_t>(y, tokens * n), want);
    if (keeps) {
      EXPECT_EQ(Download<uint16_t>(cublas, tokens * n), want);
    }
  }
  std::printf("[ cuBLAS  ] [%lld, %lld]: cuBLAS with the tile linear's bits at%s tokens (%zu of 112 counts differ)\n",
              static_cast<long long>(n), static_cast<long long>(k), took.c_str(), differed->size());
  auto one_row = gemm.CheckCublasBits(dw.as<uint16_t>(), 4096, 1024);  // FixedRowsPerTile: 1 row per tile
  ASSERT_TRUE(one_row.ok());
  EXPECT_TRUE(one_row->empty());
  EXPECT_FALSE(gemm.CublasKeepsBits(4096, 1024, 64));
  cuda::DestroyStream(*stream);
}

#endif  // DF11_HAVE_CUDA

}  // namespace
}  // namespace df11
