// Shared by the linear-layer benchmarks (gemv_bench, df11_gemv_bench): BF16 rounding of random
// values and the median time of a call that reads a rotating copy of its weights.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bench/cuda_check.h"

namespace df11 {

// f rounded to the nearest BF16 (ties to even).
inline uint16_t Bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

// Median milliseconds of `fn(copy)` over 30 timed calls after 3 warm-ups (CUDA events on the
// default stream), rotating copies so that the L2 never holds the one being read.
template <typename F>
double MedianMs(int copies, F fn) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn(i % copies);
  std::vector<double> ms;
  for (int i = 0; i < 30; ++i) {
    CK(cudaEventRecord(a));
    fn((i + 3) % copies);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace df11
