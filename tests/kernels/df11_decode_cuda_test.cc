// CUDA DF11 decoder vs the CPU reference decoder and the original weights, bit for bit.
// Skips (with a message) when built without CUDA or when no GPU is present; run on the GPU
// machine for every kernel change (scripts/gpu/run-gpu-checks.sh).
#include <gtest/gtest.h>

#include <iterator>
#include <numeric>
#include <random>

#include "kernels/df11_codec.h"
#include "tests/kernels/df11_test_util.h"

#ifdef DF11_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda_upload.h"
#include "kernels/df11_decode_cuda.h"
#endif

namespace df11 {
namespace {

#ifndef DF11_HAVE_CUDA
TEST(Df11Cuda, DecoderMatchesCpu) { GTEST_SKIP() << "built without CUDA (nvcc not found): GPU decoder not tested"; }
#else

bool HaveGpu() { return CudaDeviceCount() > 0; }
#define REQUIRE_GPU() \
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device: GPU decoder not tested here (run scripts/gpu/run-gpu-checks.sh)"

// Decodes [begin, end) on the GPU into a poisoned buffer at `out_offset` elements into it.
std::vector<uint16_t> GpuDecode(const EncodedUnit& unit, uint64_t begin, uint64_t end, uint64_t out_offset = 0) {
  auto layout = ValidateUnit(unit.view(), "gpu");
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  auto buf = DeviceUnitBuffer::Upload(unit.view(), *layout);
  EXPECT_TRUE(buf.ok()) << buf.status().ToString();
  const uint64_t count = end - begin;
  uint16_t* out = nullptr;
  EXPECT_EQ(cudaMalloc(&out, (count + out_offset + 8) * 2), cudaSuccess);
  EXPECT_EQ(cudaMemset(out, 0xFF, (count + out_offset + 8) * 2), cudaSuccess);
  Status s = LaunchDf11Decode(buf->unit(), buf->layout(), begin, end, out + out_offset, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> all(count + out_offset + 8);
  EXPECT_EQ(cudaMemcpy(all.data(), out, all.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(out);
  for (uint64_t i = 0; i < out_offset; ++i) EXPECT_EQ(all[i], 0xFFFF) << "wrote before the output range";
  for (uint64_t i = out_offset + count; i < all.size(); ++i) EXPECT_EQ(all[i], 0xFFFF) << "wrote past the output range";
  return {all.begin() + out_offset, all.begin() + out_offset + count};
}

void ExpectGpuRoundTrip(const std::vector<uint16_t>& words, const char* what) {
  auto enc = EncodeUnit(words);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  auto layout = ValidateUnit(enc->view(), what);
  ASSERT_TRUE(layout.ok());
  std::vector<uint16_t> cpu(words.size());
  ASSERT_TRUE(DecodeUnitCpu(enc->view(), *layout, 0, words.size(), cpu.data(), 0, what).ok());
  std::vector<uint16_t> gpu = GpuDecode(*enc, 0, words.size());
  ASSERT_EQ(gpu.size(), words.size());
  for (size_t i = 0; i < words.size(); ++i) {
    ASSERT_EQ(gpu[i], cpu[i]) << what << ": GPU and CPU differ at element " << i << " of " << words.size();
    ASSERT_EQ(gpu[i], words[i]) << what << ": element " << i;
  }
}

TEST(Df11Cuda, GaussianLayerShapes) {
  REQUIRE_GPU();
  ExpectGpuRoundTrip(testing::GaussianWeights(4096 * 1024 + 3, 0.02f, 11), "gaussian 0.02");
  ExpectGpuRoundTrip(testing::GaussianWeights(1 << 20, 1.0f, 12), "gaussian 1.0");
}

// A unit uploaded through a HostUploader (its stream and sign_mantissa on several threads, the
// bytes between parts zeroed on the legacy stream) is the plain upload's allocation byte for byte,
// and decodes to the words. Before each upload the device memory it will likely get is filled with
// 0xAB (freed, then allocated again), so that a byte neither copied nor zeroed would show.
TEST(Df11Cuda, UploadThroughTheUploaderIsThePlainUploadsBytes) {
  REQUIRE_GPU();
  auto uploader = cuda::HostUploader::Create(3, 4096);
  ASSERT_TRUE(uploader.ok()) << uploader.status().ToString();
  for (size_t n : {size_t{1000}, size_t{300001}, size_t{1} << 20}) {
    const std::vector<uint16_t> words = testing::GaussianWeights(n, 0.02f, static_cast<uint32_t>(n));
    auto enc = EncodeUnit(words);
    ASSERT_TRUE(enc.ok());
    auto layout = ValidateUnit(enc->view(), "upload");
    ASSERT_TRUE(layout.ok());
    std::vector<std::vector<uint8_t>> images;
    for (cuda::HostUploader* u : {static_cast<cuda::HostUploader*>(nullptr), &*uploader}) {
      void* dirty = nullptr;
      const size_t dirty_bytes = 64 + 2 * n * 2;
      ASSERT_EQ(cudaMalloc(&dirty, dirty_bytes), cudaSuccess);
      ASSERT_EQ(cudaMemset(dirty, 0xAB, dirty_bytes), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaFree(dirty), cudaSuccess);
      auto buf = DeviceUnitBuffer::Upload(enc->view(), *layout, u);
      ASSERT_TRUE(buf.ok()) << buf.status().ToString();
      std::vector<uint8_t> image(buf->device_bytes());
      ASSERT_EQ(cudaMemcpy(image.data(), buf->device_base(), image.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      images.push_back(std::move(image));
      uint16_t* out = nullptr;
      ASSERT_EQ(cudaMalloc(&out, n * 2), cudaSuccess);
      ASSERT_TRUE(LaunchDf11Decode(buf->unit(), buf->layout(), 0, n, out, nullptr).ok());
      std::vector<uint16_t> back(n);
      ASSERT_EQ(cudaMemcpy(back.data(), out, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      cudaFree(out);
      ASSERT_EQ(back, words) << "n " << n << (u ? ", through the uploader" : ", plain");
    }
    ASSERT_EQ(images[0].size(), images[1].size());
    for (size_t i = 0; i < images[0].size(); ++i) {
      ASSERT_EQ(images[0][i], images[1][i]) << "n " << n << ": byte " << i << " of the unit's allocation differs";
    }
    // The padding after each part from the lookup tables on is zero (the decoder reads past a
    // stream's bytes and gaps into it): offsets from the last upload's pointers, sizes from the view.
    auto buf = DeviceUnitBuffer::Upload(enc->view(), *layout, &*uploader);
    ASSERT_TRUE(buf.ok());
    const auto* base = static_cast<const uint8_t*>(buf->device_base());
    const DeviceUnit& du = buf->unit();
    const std::pair<const uint8_t*, uint64_t> regions[] = {
        {du.luts, enc->view().luts.size()},
        {du.stream, enc->view().encoded_exponent.size()},
        {du.sign_mantissa, n},
        {reinterpret_cast<const uint8_t*>(du.chunk_starts), 4 * layout->chunk_starts.size()},
        {du.gaps, enc->view().gaps.size()},
    };
    for (size_t r = 0; r < std::size(regions); ++r) {
      const uint64_t begin = regions[r].first - base + regions[r].second;
      const uint64_t end = r + 1 < std::size(regions) ? regions[r + 1].first - base : images[1].size();
      for (uint64_t i = begin; i < end; ++i) ASSERT_EQ(images[1][i], 0) << "n " << n << ": padding byte " << i;
    }
  }
}

TEST(Df11Cuda, AdversarialDistributions) {
  REQUIRE_GPU();
  std::vector<int> exps(240);
  std::iota(exps.begin(), exps.end(), 0);
  std::vector<double> uniform(240, 1.0), skewed(240);
  for (int i = 0; i < 240; ++i) skewed[i] = std::pow(0.8, i % 40) + 1e-6;
  ExpectGpuRoundTrip(testing::WeightsWithExponents(300001, exps, uniform, 13), "all 240 uniform");
  ExpectGpuRoundTrip(testing::WeightsWithExponents(300001, exps, skewed, 14), "all 240 skewed");
  ExpectGpuRoundTrip(testing::FibonacciWeights(30, 15), "fibonacci 30 (29-bit codes)");
  ExpectGpuRoundTrip(testing::FibonacciWeights(34, 16), "fibonacci 34 (length-limited)");
  std::vector<uint16_t> one(100000, 0x3F80);
  ExpectGpuRoundTrip(one, "one symbol (1-bit codes, 32768 per chunk)");
  std::vector<uint16_t> zeros;
  zeros.reserve(70000);
  for (int i = 0; i < 70000; ++i) zeros.push_back(i % 3 == 0 ? 0x8000 : static_cast<uint16_t>(i % 3 == 1 ? 0 : i % 127 + 1));
  ExpectGpuRoundTrip(zeros, "signed zeros and subnormals");
}

TEST(Df11Cuda, SizesAroundBoundaries) {
  REQUIRE_GPU();
  for (size_t n : {1, 2, 3, 7, 8, 9, 63, 64, 65, 4095, 4096, 4097, 12600, 12700, 25000, 100003}) {
    ExpectGpuRoundTrip(testing::GaussianWeights(n, 0.02f, static_cast<uint32_t>(n)), "size sweep");
  }
}

TEST(Df11Cuda, RangesMatchCpu) {
  REQUIRE_GPU();
  auto words = testing::GaussianWeights(1 << 20, 0.02f, 17);
  auto enc = EncodeUnit(words);
  ASSERT_TRUE(enc.ok());
  std::mt19937 rng(18);
  for (int trial = 0; trial < 60; ++trial) {
    uint64_t a = rng() % words.size(), b = rng() % words.size();
    if (a > b) std::swap(a, b);
    if (trial % 3 == 0) a &= ~uint64_t{7};            // aligned: vector path
    if (trial % 5 == 0) b = std::min<uint64_t>(a + 4096, words.size());  // one embedding row
    const uint64_t offset = trial % 2;                // misaligned output: scalar path
    auto gpu = GpuDecode(*enc, a, b, offset);
    ASSERT_TRUE(std::equal(gpu.begin(), gpu.end(), words.begin() + a)) << "range " << a << ".." << b;
  }
}

// Several ranges in one launch (embedding rows: aligned rows of 4096, plus unaligned ones, a repeat,
// an empty range, ranges crossing chunk boundaries) land at their offsets, gaps left untouched.
TEST(Df11Cuda, MultiRangeLaunchMatchesWords) {
  REQUIRE_GPU();
  const uint64_t n = 1 << 20;
  auto words = testing::GaussianWeights(n, 0.02f, 19);
  auto enc = EncodeUnit(words);
  ASSERT_TRUE(enc.ok());
  auto layout = ValidateUnit(enc->view(), "multi");
  ASSERT_TRUE(layout.ok());
  auto buf = DeviceUnitBuffer::Upload(enc->view(), *layout);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  for (bool aligned : {true, false}) {
    std::vector<Df11Range> ranges;
    uint64_t out_size = 0;
    auto add = [&](uint64_t begin, uint64_t end) {
      ranges.push_back({begin, end, out_size});
      out_size += end - begin + (aligned ? 8 : 3);  // a gap after each range
      if (aligned) out_size = (out_size + 7) / 8 * 8;
    };
    for (uint64_t row : {7, 255, 3, 200, 7}) add(row * 4096, row * 4096 + 4096);
    add(100, 100);
    add(n - 4096, n);
    if (!aligned) {
      add(12345, 12345 + 40000);  // several chunks
      add(1, 2);
    }
    bool vector_ok = false;
    auto items = Df11DecodeItems(buf->layout(), ranges, &vector_ok);
    ASSERT_TRUE(items.ok()) << items.status().ToString();
    EXPECT_EQ(vector_ok, aligned);
    Df11DecodeItem* d_items = nullptr;
    uint16_t* out = nullptr;
    ASSERT_EQ(cudaMalloc(&d_items, items->size() * sizeof(Df11DecodeItem) + 8), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_items, items->data(), items->size() * sizeof(Df11DecodeItem), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMalloc(&out, out_size * 2), cudaSuccess);
    ASSERT_EQ(cudaMemset(out, 0xFF, out_size * 2), cudaSuccess);
    const Status st = LaunchDf11DecodeItems(buf->unit(), d_items, static_cast<uint32_t>(items->size()), vector_ok,
                                            out, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::vector<uint16_t> got(out_size);
    ASSERT_EQ(cudaMemcpy(got.data(), out, out_size * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(out);
    cudaFree(d_items);
    std::vector<uint16_t> want(out_size, 0xFFFF);
    for (const Df11Range& r : ranges) {
      std::copy(words.begin() + r.begin, words.begin() + r.end, want.begin() + r.out_offset);
    }
    EXPECT_TRUE(got == want) << (aligned ? "aligned" : "unaligned") << " ranges";
  }
  const std::vector<Df11Range> bad = {{n - 1, n + 1, 0}};
  EXPECT_EQ(Df11DecodeItems(buf->layout(), bad, nullptr).status().code(), StatusCode::kOutOfRange);
}

TEST(Df11Cuda, CorruptStreamsStayInBounds) {
  REQUIRE_GPU();
  // Structurally valid units with garbage streams and gaps: the output is garbage, but the kernel
  // must finish without a fault or a write outside the output range (GpuDecode checks the guards).
  auto words = testing::GaussianWeights(300000, 0.02f, 19);
  auto enc = EncodeUnit(words);
  ASSERT_TRUE(enc.ok());
  std::mt19937 rng(20);
  for (int trial = 0; trial < 10; ++trial) {
    EncodedUnit bad = *enc;
    for (auto& b : bad.encoded_exponent) b = static_cast<uint8_t>(rng());
    for (auto& b : bad.gaps) b = static_cast<uint8_t>(rng());
    ASSERT_TRUE(ValidateUnit(bad.view(), "bad").ok());
    GpuDecode(bad, 0, words.size());
    GpuDecode(bad, 1000, 5000, 1);
  }
}

#endif  // DF11_HAVE_CUDA

}  // namespace
}  // namespace df11
