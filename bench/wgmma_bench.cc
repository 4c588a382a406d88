// wgmma_bench: the Hopper tensor-core linear (cuda::WgmmaGemm, sm_90a) on the linears of a
// Qwen3-8B decode step at 33-128 tokens, against cuBLAS and (up to 64 tokens) the BF16 TileGemm the
// model runs there, with the read roofline measured in the same run.
// Usage: wgmma_bench [--tokens 48,64,96,128] [--json OUT]
// Each time: MedianMs (linear_timing.h: 30 calls after 3 warm-ups, CUDA events, W copies rotated so
// that L2 never holds the one read), random N(0, 0.02) BF16 W, x ~ N(0, 1). Each (linear, tokens)
// first checks WgmmaGemm against cuBLAS (relative error, printed). Per tokens: the step's linears
// summed (36 layers + lm_head) and the W bytes' time at the roofline.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/linear_timing.h"
#include "bench/read_roofline.h"
#include "kernels/cpu_ops.h"
#include "kernels/cuda_gemm.h"

namespace df11 {
namespace {

void Check(const Status& s) { CheckOk("wgmma_bench", s); }

int Main(int argc, char** argv) {
  const std::string json_path = JsonPathArg(argc, argv);
  std::vector<int64_t> token_counts = {48, 64, 96, 128};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--tokens") token_counts = ParseList(argv[++i]);
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  if (!cuda::WgmmaGemmAvailable()) {
    std::fprintf(stderr, "wgmma_bench: %s is not a compute capability 9.0 GPU\n", prop.name);
    return 1;
  }
  const double roofline = ReadBandwidthBytesPerSecond();
  std::printf("GPU: %s; read roofline %.3f TB/s\n", prop.name, roofline / 1e12);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  const std::vector<uint16_t> pool = WeightPool(rng, dist);
  cuda::GemmHandle gemm;
  Check(gemm.Init(nullptr));
  const int64_t max_tokens = cuda::kWgmmaGemmMaxTokens;
  std::vector<double> sum_wgmma(token_counts.size()), sum_cublas(token_counts.size()), sum_tile(token_counts.size()),
      sum_floor(token_counts.size());
  std::string json = "{\"gpu\": \"" + std::string(prop.name) +
                     "\", \"read_roofline_tbs\": " + std::to_string(roofline / 1e12) + ", \"linears\": [";
  bool first = true;
  std::printf("%-13s %4s | %9s %9s %9s | %7s %7s | %8s %8s | %s\n", "linear", "T", "wgmma ms", "cublas ms", "tile ms",
              "wg/cub", "wg/tile", "wg TB/s", "% roof", "rel err vs cuBLAS");
  for (const StepLinear& s : kQwen3_8bStepLinears) {
    const uint64_t elements = static_cast<uint64_t>(s.n) * s.k;
    std::vector<uint16_t> host(elements);
    for (uint64_t i = 0; i < elements; ++i) host[i] = pool[(i + s.n) % pool.size()];
    const int copies = static_cast<int>(std::max<uint64_t>(1, (uint64_t{1} << 30) / (2 * elements) + 1));
    std::vector<cuda::DeviceBuffer> w;
    for (int c = 0; c < copies; ++c) {
      auto b = cuda::DeviceBuffer::Allocate(2 * elements, "w");
      Check(b.status());
      CK(cudaMemcpy(b->data(), host.data(), 2 * elements, cudaMemcpyHostToDevice));
      w.push_back(std::move(b).value());
    }
    std::normal_distribution<float> xdist(0.0f, 1.0f);
    std::vector<uint16_t> hx(max_tokens * s.k);
    for (auto& v : hx) v = Bf16(xdist(rng));
    auto xb = cuda::DeviceBuffer::Allocate(hx.size() * 2, "x");
    auto yb = cuda::DeviceBuffer::Allocate(max_tokens * s.n * 2, "y");
    auto ref = cuda::DeviceBuffer::Allocate(max_tokens * s.n * 2, "reference");
    auto ws = cuda::DeviceBuffer::Allocate(cuda::WgmmaGemmWorkspaceFloats(max_tokens, s.n, s.k) * 4, "workspace");
    Check(xb.status());
    Check(yb.status());
    Check(ref.status());
    Check(ws.status());
    CK(cudaMemcpy(xb->data(), hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    const uint16_t* x = xb->as<uint16_t>();
    uint16_t *y = yb->as<uint16_t>(), *yr = ref->as<uint16_t>();
    float* workspace = ws->as<float>();
    for (size_t ti = 0; ti < token_counts.size(); ++ti) {
      const int64_t t = token_counts[ti];
      Check(cuda::WgmmaGemm(x, w[0].as<uint16_t>(), nullptr, t, s.n, s.k, false, y, workspace, nullptr));
      Check(gemm.CublasGemm(x, w[0].as<uint16_t>(), t, s.n, s.k, false, yr));
      CK(cudaDeviceSynchronize());
      std::vector<uint16_t> got(t * s.n), want(t * s.n);
      CK(cudaMemcpy(got.data(), y, got.size() * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(want.data(), yr, want.size() * 2, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        num = std::max(num, std::fabs(double{cpu::Bf16ToFloat(got[i])} - cpu::Bf16ToFloat(want[i])));
        den = std::max(den, std::fabs(double{cpu::Bf16ToFloat(want[i])}));
      }
      const double rel = num / std::max(den, 1e-30);
      const double wg = MedianMs(copies, [&](int c) {
        Check(cuda::WgmmaGemm(x, w[c].as<uint16_t>(), nullptr, t, s.n, s.k, false, y, workspace, nullptr));
      });
      const double cublas =
          MedianMs(copies, [&](int c) { Check(gemm.CublasGemm(x, w[c].as<uint16_t>(), t, s.n, s.k, false, yr)); });
      double tile = 0;
      if (t >= cuda::kTileGemmMinTokens && t <= cuda::kTileGemmMaxTokens) {
        tile = MedianMs(copies, [&](int c) {
          Check(cuda::TileGemm(x, w[c].as<uint16_t>(), nullptr, t, s.n, s.k, false, yr, nullptr));
        });
      }
      const double floor_ms = 2.0 * elements / roofline * 1e3;
      sum_wgmma[ti] += s.per_step * wg;
      sum_cublas[ti] += s.per_step * cublas;
      sum_tile[ti] += s.per_step * tile;
      sum_floor[ti] += s.per_step * floor_ms;
      std::printf("%-13s %4lld | %9.4f %9.4f %9.4f | %7.3f %7.3f | %8.3f %7.1f%% | %.2e\n", s.name,
                  static_cast<long long>(t), wg, cublas, tile, wg / cublas, tile > 0 ? wg / tile : 0.0,
                  2.0 * elements / (wg * 1e-3) / 1e12, 100.0 * floor_ms / wg, rel);
      json += std::string(first ? "" : ", ") + "{\"linear\": \"" + s.name + "\", \"tokens\": " + std::to_string(t) +
              ", \"wgmma_ms\": " + std::to_string(wg) + ", \"cublas_ms\": " + std::to_string(cublas) +
              ", \"tile_ms\": " + std::to_string(tile) + ", \"floor_ms\": " + std::to_string(floor_ms) +
              ", \"rel_err_vs_cublas\": " + std::to_string(rel) + "}";
      first = false;
      std::fflush(stdout);
    }
  }
  json += "], \"steps\": [";
  std::printf("\nlinears of one decode step (36 layers + lm_head), ms:\n");
  for (size_t ti = 0; ti < token_counts.size(); ++ti) {
    std::printf("  T=%lld: WgmmaGemm %.3f, cuBLAS %.3f, TileGemm %.3f, W at the roofline %.3f (wgmma/cuBLAS %.3f)\n",
                static_cast<long long>(token_counts[ti]), sum_wgmma[ti], sum_cublas[ti], sum_tile[ti], sum_floor[ti],
                sum_wgmma[ti] / sum_cublas[ti]);
    json += std::string(ti ? ", " : "") + "{\"tokens\": " + std::to_string(token_counts[ti]) +
            ", \"wgmma_ms\": " + std::to_string(sum_wgmma[ti]) + ", \"cublas_ms\": " + std::to_string(sum_cublas[ti]) +
            ", \"tile_ms\": " + std::to_string(sum_tile[ti]) + ", \"floor_ms\": " + std::to_string(sum_floor[ti]) + "}";
  }
  json += "]}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("wgmma_bench", df11::Main, argc, argv); }
