// Shared by the linear-layer benchmarks (gemv_bench, df11_gemv_bench, df11_slice_bench): the 8B
// step's linears, BF16 rounding of random values, the pool of random weights, and the median time
// of a call that reads a rotating copy of its weights.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "bench/bench_main.h"
#include "bench/cuda_check.h"
#include "kernels/base/status.h"

namespace df11 {

// The linears of a Qwen3-8B decode step as the CUDA model runs them (q|k|v and gate|up stacked)
// and its lm_head: W [n, k]; per_step: times a step runs it (36 layers, 1 lm_head).
struct StepLinear {
  const char* name;
  int64_t n, k;
  int per_step;
};
inline constexpr StepLinear kQwen3_8bStepLinears[] = {{"q|k|v_proj", 6144, 4096, 36},
                                                      {"o_proj", 4096, 4096, 36},
                                                      {"gate|up_proj", 24576, 4096, 36},
                                                      {"down_proj", 4096, 12288, 36},
                                                      {"lm_head", 151936, 4096, 1}};

// A benchmark's call that must succeed: otherwise prints "program: status" and exits 1.
inline void CheckOk(const char* program, const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, s.ToString().c_str());
    std::exit(1);
  }
}

// f rounded to the nearest BF16 (ties to even).
inline uint16_t Bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

// Random weights to tile over every matrix: 2^24 + 17 draws of `dist` rounded to BF16 (the period is
// not a multiple of any row length).
inline std::vector<uint16_t> WeightPool(std::mt19937& rng, std::normal_distribution<float>& dist) {
  std::vector<uint16_t> pool((1 << 24) + 17);
  for (auto& v : pool) v = Bf16(dist(rng));
  return pool;
}

// Median milliseconds of `fn(copy)` over `calls` timed calls (30 unless given) after 3 warm-ups
// (CUDA events on the default stream), rotating copies so that the L2 never holds the one being read.
template <typename F>
double MedianMs(int copies, F fn, int calls = 30) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn(i % copies);
  std::vector<double> ms;
  for (int i = 0; i < calls; ++i) {
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
  return Median(std::move(ms));
}

}  // namespace df11
