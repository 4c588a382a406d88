// The small-batch linear on the GPU: cuda::Gemv (1, 2 and 4 rows per warp, and the shape's own
// choice) vs cuBLAS (cublasGemmEx, the kernel GemmHandle ran before) on the linears of a
// Qwen3-8B-shaped layer and its lm_head, 1..kGemvMaxTokens tokens, beside the read roofline
// measured in the same run. Each timed call reads a different copy of W (copies fill > 1 GB), so the 50 MB L2
// never holds it. CUDA events, 3 warm-ups, median of 30. Random BF16 data (N(0, 0.02) weights).
// Prints a table; --json FILE writes the numbers.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/cuda_check.h"
#include "bench/linear_timing.h"
#include "bench/read_roofline.h"
#include "kernels/cuda_gemm.h"

namespace df11 {
namespace {

struct Shape {
  const char* name;
  int64_t n, k;
};

constexpr Shape kShapes[] = {{"q_proj/o_proj", 4096, 4096},
                             {"k_proj/v_proj", 1024, 4096},
                             {"gate/up_proj", 12288, 4096},
                             {"down_proj", 4096, 12288},
                             {"lm_head", 151936, 4096}};

int Main(int argc, char** argv) {
  const std::string json_path = JsonPathArg(argc, argv);
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const double roofline = ReadBandwidthBytesPerSecond();
  std::printf("GPU: %s; read roofline %.3f TB/s\n", prop.name, roofline / 1e12);
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::string json = "{\"gpu\": \"" + std::string(prop.name) +
                     "\", \"read_roofline_tbs\": " + std::to_string(roofline / 1e12) + ", \"results\": [";
  bool first_row = true;
  std::printf("%-14s %6s | %-24s | %9s %9s %9s %9s %9s | best vs cuBLAS\n", "linear", "tokens", "", "cuBLAS", "gemv r1",
              "gemv r2", "gemv r4", "gemv auto");
  for (const Shape& s : kShapes) {
    const uint64_t w_bytes = static_cast<uint64_t>(s.n) * s.k * 2;
    const int copies = static_cast<int>(std::max<uint64_t>(1, (uint64_t{1} << 30) / w_bytes + 1));
    std::vector<uint16_t> host(static_cast<size_t>(s.n) * s.k);
    for (auto& v : host) v = Bf16(dist(rng));
    uint16_t* w = nullptr;
    CK(cudaMalloc(&w, w_bytes * copies));
    for (int c = 0; c < copies; ++c)
      CK(cudaMemcpy(w + static_cast<size_t>(c) * s.n * s.k, host.data(), w_bytes, cudaMemcpyHostToDevice));
    uint16_t *x = nullptr, *y = nullptr;
    CK(cudaMalloc(&x, cuda::kGemvMaxTokens * s.k * 2));
    CK(cudaMalloc(&y, cuda::kGemvMaxTokens * s.n * 2));
    std::vector<uint16_t> hx(cuda::kGemvMaxTokens * s.k);
    for (auto& v : hx) v = Bf16(dist(rng) * 50);
    CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    for (const int64_t t : {1, 2, 3, 4}) {
      auto wc = [&](int c) { return w + static_cast<size_t>(c) * s.n * s.k; };
      const float alpha = 1, beta = 0;
      const double cublas = MedianMs(copies, [&](int c) {
        cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.n), static_cast<int>(t),
                     static_cast<int>(s.k), &alpha, wc(c), CUDA_R_16BF, static_cast<int>(s.k), x, CUDA_R_16BF,
                     static_cast<int>(s.k), &beta, y, CUDA_R_16BF, static_cast<int>(s.n), CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
      });
      double gemv[4];
      const int variants[4] = {1, 2, 4, 0};
      for (int v = 0; v < 4; ++v) {
        gemv[v] = MedianMs(copies, [&](int c) {
          if (!cuda::Gemv(x, wc(c), nullptr, t, s.n, s.k, false, y, nullptr, variants[v]).ok()) std::exit(1);
        });
      }
      const double best = *std::min_element(gemv, gemv + 4);
      auto pct = [&](double ms) { return 100.0 * w_bytes / (ms * 1e-3) / roofline; };
      std::printf("%-14s %6ld | ms (%% of roofline)      | %9.4f %9.4f %9.4f %9.4f %9.4f | %.2fx\n", s.name,
                  static_cast<long>(t), cublas, gemv[0], gemv[1], gemv[2], gemv[3], cublas / best);
      std::printf("%-14s %6s |                          | %8.1f%% %8.1f%% %8.1f%% %8.1f%% %8.1f%% |\n", "", "",
                  pct(cublas), pct(gemv[0]), pct(gemv[1]), pct(gemv[2]), pct(gemv[3]));
      json += std::string(first_row ? "" : ",") + "\n  {\"linear\": \"" + s.name + "\", \"n\": " + std::to_string(s.n) +
              ", \"k\": " + std::to_string(s.k) + ", \"tokens\": " + std::to_string(t) +
              ", \"cublas_ms\": " + std::to_string(cublas) + ", \"gemv_rows1_ms\": " + std::to_string(gemv[0]) +
              ", \"gemv_rows2_ms\": " + std::to_string(gemv[1]) + ", \"gemv_rows4_ms\": " + std::to_string(gemv[2]) +
              ", \"gemv_auto_ms\": " + std::to_string(gemv[3]) + "}";
      first_row = false;
    }
    CK(cudaFree(w));
    CK(cudaFree(x));
    CK(cudaFree(y));
  }
  json += "\n]}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  cublasDestroy(handle);
  return 0;
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("gemv_bench", df11::Main, argc, argv); }
