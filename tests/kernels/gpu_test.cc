// kernels/gpu.h: the checked-call helper's status and message, and the device queries agreeing
// with each other (on a machine without a GPU, or a build without CUDA, they all say "no device").
#include "kernels/gpu.h"

#include <gtest/gtest.h>

namespace df11 {
namespace {

TEST(Gpu, CheckedCallNamesTheCallAndWhere) {
  EXPECT_TRUE(CudaCallStatus(0, "cudaMalloc(&p, n)", "x.cc", 7).ok());
  const Status failed = CudaCallStatus(1, "cudaMemcpy(d, h, n, kind)", "kernels/x.cu", 42);
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.code(), StatusCode::kInternal);
  EXPECT_EQ(failed.message().rfind("cudaMemcpy(d, h, n, kind): ", 0), 0u) << failed.message();
  EXPECT_NE(failed.message().find("(kernels/x.cu:42)"), std::string::npos) << failed.message();
#ifdef DF11_HAVE_CUDA
  // cudaErrorMemoryAllocation (2): out of memory is retryable, not an internal error.
  EXPECT_EQ(CudaCallStatus(2, "cudaMalloc(&p, n)", "x.cc", 1).code(), StatusCode::kResourceExhausted);
#endif
}

TEST(Gpu, MacroStatusNamesTheExpressionAndLine) {
  auto call = [](int error) { return error; };
  const Status st = DF11_CUDA_STATUS(call(1));
  EXPECT_NE(st.message().find("call(1)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("gpu_test.cc:" + std::to_string(__LINE__ - 2)), std::string::npos) << st.message();
  auto returns = [&]() -> Status {
    DF11_CUDA_RETURN(call(0));
    DF11_CUDA_RETURN(call(1));
    return Status::Ok();
  };
  EXPECT_FALSE(returns().ok());
}

TEST(Gpu, QueriesAgree) {
  const int devices = CudaDeviceCount();
  EXPECT_GE(devices, 0);
  const std::optional<GpuMemory> memory = QueryGpuMemory();
  if (devices == 0) {
    EXPECT_FALSE(memory.has_value());
    EXPECT_EQ(GpuName(), "none");
    return;
  }
  ASSERT_TRUE(memory.has_value());
  EXPECT_GT(memory->total_bytes, 0u);
  EXPECT_LE(memory->free_bytes, memory->total_bytes);
  EXPECT_LT(memory->index, devices);
  EXPECT_NE(GpuName(), "none");
  EXPECT_NE(CudaRuntimeVersion(), "none");
}

}  // namespace
}  // namespace df11
