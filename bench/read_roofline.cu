// The GPU's read-bandwidth roofline for the benchmarks: a kernel that only reads a large buffer
// (16-byte loads, grid-stride, one word written per block), timed with CUDA events.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench/bench_main.h"
#include "bench/read_roofline.h"

namespace df11 {
namespace {

__global__ void ReadKernel(const uint4* data, int64_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcs(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) sink[blockIdx.x] = acc;  // keeps the loads; practically never taken
}

}  // namespace

double ReadBandwidthBytesPerSecond(int64_t bytes, int reps) {
  const int64_t n = bytes / 16;
  uint4* data = nullptr;
  uint32_t* sink = nullptr;
  if (cudaMalloc(&data, n * 16) != cudaSuccess) return 0;
  if (cudaMalloc(&sink, 4096 * 4) != cudaSuccess) {
    cudaFree(data);
    return 0;
  }
  cudaMemset(data, 0x5A, n * 16);  // touched: no lazily mapped pages in the timed reads
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int blocks = std::min(4096, sms * 8);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> ms;
  for (int r = 0; r < reps + 2; ++r) {
    cudaEventRecord(start);
    ReadKernel<<<blocks, 512>>>(data, n, sink);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    if (r >= 2) ms.push_back(t);  // two warm-ups
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(data);
  cudaFree(sink);
  const double median = Median(ms) * 1e-3;
  return cudaGetLastError() == cudaSuccess && median > 0 ? static_cast<double>(n * 16) / median : 0;
}

}  // namespace df11
