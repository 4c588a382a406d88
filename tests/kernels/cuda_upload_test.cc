// HostUploader (kernels/cuda_upload.h): every byte of a pageable host range lands at its place on
// the device, at sizes around its slots and thread shares, from one thread and from several, and
// nothing outside [dst, dst + bytes) is written. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/gpu.h"

#ifdef DF11_HAVE_CUDA
#include "kernels/cuda_ops.h"
#include "kernels/cuda_upload.h"
#endif

namespace df11 {
namespace {

#ifndef DF11_HAVE_CUDA
TEST(HostUploader, CopiesEveryByte) { GTEST_SKIP() << "built without CUDA (nvcc not found): HostUploader not tested"; }
#else

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(HostUploader, CopiesEveryByteAndNothingElse) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device: HostUploader not tested here";
  constexpr uint64_t kSlot = 4096;
  constexpr uint64_t kGuard = 256;  // bytes each side of the destination that must stay 0xA5
  for (int threads : {1, 3, 8}) {
    auto uploader = cuda::HostUploader::Create(threads, kSlot);
    ASSERT_TRUE(uploader.ok()) << uploader.status().ToString();
    EXPECT_EQ(uploader->threads(), threads);
    // Zero; under a slot; a slot and around it; under two slots (one thread); two; uneven shares;
    // more slots than threads; an odd offset into the source.
    for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, kSlot - 1, kSlot, kSlot + 1, 2 * kSlot - 1, 2 * kSlot,
                           2 * kSlot + 3, 7 * kSlot + kSlot / 2, 40 * kSlot + 17}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + ", bytes " + std::to_string(bytes));
      const std::vector<uint8_t> src = RandomBytes(bytes + 3, static_cast<uint32_t>(bytes * 31 + threads));
      auto dst = cuda::DeviceBuffer::Allocate(bytes + 2 * kGuard, "test");
      ASSERT_TRUE(dst.ok());
      std::vector<uint8_t> fill(bytes + 2 * kGuard, 0xA5);
      ASSERT_TRUE(cuda::CopyToDevice(dst->data(), fill.data(), fill.size(), nullptr).ok());
      ASSERT_TRUE(cuda::Synchronize(nullptr).ok());
      ASSERT_TRUE(uploader->Copy(dst->as<uint8_t>() + kGuard, src.data() + 3, bytes).ok());
      std::vector<uint8_t> back(fill.size());
      ASSERT_TRUE(cuda::CopyToHost(back.data(), dst->data(), back.size(), nullptr).ok());
      for (uint64_t i = 0; i < kGuard; ++i) {
        ASSERT_EQ(back[i], 0xA5) << "byte " << i << " before the destination was written";
        ASSERT_EQ(back[kGuard + bytes + i], 0xA5) << "byte " << i << " after the destination was written";
      }
      for (uint64_t i = 0; i < bytes; ++i) ASSERT_EQ(back[kGuard + i], src[3 + i]) << "byte " << i;
    }
  }
}

TEST(HostUploader, RejectsEmptySlotsAndUncreatedUse) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device: HostUploader not tested here";
  EXPECT_EQ(cuda::HostUploader::Create(2, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::HostUploader().Copy(nullptr, nullptr, 1).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(cuda::HostUploader().Copy(nullptr, nullptr, 0).ok());  // nothing to copy
}

#endif

}  // namespace
}  // namespace df11
