// gemm_algo_bench: how far cuBLAS's default algorithm (cublasGemmEx, what GemmHandle::CublasGemm
// runs above 64 tokens) is from the best algorithm cublasLt offers for the same operands on
// prefill-sized linears of a Qwen3-8B layer.
// Usage: gemm_algo_bench [--tokens 512,2048,4096] [--algos 32] [--json OUT]
// Per (linear, tokens): the default's median time, then each of up to --algos cublasLt heuristic
// results (same layouts, FP32 compute, the model's 32 MiB workspace), each timed the same way:
// 20 calls after 3 warm-ups, CUDA events, median; W random N(0, 0.02), x ~ N(0, 1), BF16.
// Prints each algorithm's id, tile, stages, split-K and time against the default, whether its
// output is bit for bit the default's, and per tokens the layer's four linears summed (default
// against best) with TFLOP/s; then the 36 layers' linears back to back (the GPU at its power cap,
// as in a prefill) with the default and with each linear's best candidate, 5 runs each in turn,
// medians. Compute-bound shapes: W is not rotated.
// --vs-tile (token counts of 3-64): also the BF16 TileGemm the model runs there (its time, and
// whether the default and each candidate give its bits: a cuBLAS algorithm with TileGemm's
// reduction order could stand in for it, as cuBLAS does for the wgmma tile linear where
// GemmHandle::CheckCublasBits finds it), and the layer's linears summed with TileGemm.
#include <cublasLt.h>
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
#include "kernels/cuda_gemm.h"

namespace df11 {
namespace {

#define CB(call)                                                                            \
  do {                                                                                      \
    const cublasStatus_t st_ = (call);                                                      \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                     \
      std::fprintf(stderr, "gemm_algo_bench: %s: %s\n", #call, cublasGetStatusString(st_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

int AlgoAttr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  int v = -1;
  size_t written = 0;
  uint32_t u = 0;
  // Attributes are uint32 or int32 (4 bytes) except a few 2-byte ones; read 4 bytes zeroed.
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &u, sizeof(u), &written) == CUBLAS_STATUS_SUCCESS) {
    v = static_cast<int>(u);
  }
  return v;
}

// One linear's operands and cublasLt descriptors, kept for the sustained run.
struct LinearState {
  uint16_t *w = nullptr, *x = nullptr, *y = nullptr;
  int n = 0, k = 0;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t best{};
  bool best_is_default = true;
};

// out [t, n] = x [t, k] · W [n, k]^T through cublasGemmEx's default algorithm, as GemmHandle runs it.
void DefaultGemm(cublasHandle_t h, const LinearState& st, int t, uint16_t* out) {
  const float alpha = 1.0f, beta = 0.0f;
  CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, st.n, t, st.k, &alpha, st.w, CUDA_R_16BF, st.k, st.x, CUDA_R_16BF, st.k,
                  &beta, out, CUDA_R_16BF, st.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// The same product through cublasLt with `algo` (st's descriptors).
void LtGemm(cublasLtHandle_t lt, const LinearState& st, const cublasLtMatmulAlgo_t& algo, void* workspace,
            uint16_t* out) {
  const float alpha = 1.0f, beta = 0.0f;
  CB(cublasLtMatmul(lt, st.op, &alpha, st.w, st.la, st.x, st.lb, &beta, out, st.lc, out, st.lc, &algo, workspace,
                    kWorkspaceBytes, nullptr));
}

int Main(int argc, char** argv) {
  const std::string json_path = JsonPathArg(argc, argv);
  std::vector<int64_t> token_counts = {512, 2048, 4096};
  int max_algos = 32;
  bool vs_tile = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--vs-tile") vs_tile = true;
    if (i + 1 >= argc) continue;
    if (std::string(argv[i]) == "--tokens") token_counts = ParseList(argv[++i]);
    if (std::string(argv[i]) == "--algos") max_algos = std::atoi(argv[++i]);
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU: %s, cuBLAS %d\n", prop.name, static_cast<int>(cublasLtGetVersion()));
  cublasHandle_t h = nullptr;
  CB(cublasCreate(&h));
  cublasLtHandle_t lt = nullptr;
  CB(cublasLtCreate(&lt));
  void* workspace = nullptr;
  CK(cudaMalloc(&workspace, kWorkspaceBytes));
  CB(cublasSetWorkspace(h, workspace, kWorkspaceBytes));
  std::mt19937 rng(11);
  std::normal_distribution<float> wdist(0.0f, 0.02f), xdist(0.0f, 1.0f);
  const int64_t max_t = *std::max_element(token_counts.begin(), token_counts.end());
  std::string json = "{\"gpu\": \"" + std::string(prop.name) + "\", \"runs\": [";
  bool first_json = true;
  for (int64_t t : token_counts) {
    double sum_default = 0, sum_best = 0, flops = 0, sum_tile = 0;
    const bool tile = vs_tile && t >= cuda::kTileGemmMinTokens && t <= cuda::kTileGemmMaxTokens;
    std::vector<LinearState> states(4);
    for (int li = 0; li < 4; ++li) {  // the layer's linears, not lm_head
      const StepLinear& s = kQwen3_8bStepLinears[li];
      std::vector<uint16_t> hw(static_cast<size_t>(s.n * s.k)), hx(static_cast<size_t>(max_t * s.k));
      for (auto& v : hw) v = Bf16(wdist(rng));
      for (auto& v : hx) v = Bf16(xdist(rng));
      uint16_t *w = nullptr, *x = nullptr, *y = nullptr, *y_ref = nullptr;
      CK(cudaMalloc(&w, hw.size() * 2));
      CK(cudaMalloc(&x, hx.size() * 2));
      CK(cudaMalloc(&y, static_cast<size_t>(max_t * s.n) * 2));
      CK(cudaMalloc(&y_ref, static_cast<size_t>(max_t * s.n) * 2));
      CK(cudaMemcpy(w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
      const int n = static_cast<int>(s.n), k = static_cast<int>(s.k), tt = static_cast<int>(t);
      LinearState& st = states[static_cast<size_t>(li)];
      st.w = w, st.x = x, st.y = y, st.n = n, st.k = k;
      auto run_default = [&](uint16_t* out) { DefaultGemm(h, st, tt, out); };
      run_default(y_ref);
      CK(cudaDeviceSynchronize());
      const double ms_default = MedianMs(
          1, [&](int) { run_default(y); }, 20);
      std::vector<uint16_t> ref(static_cast<size_t>(t * s.n)), got(ref.size()), tile_ref;
      CK(cudaMemcpy(ref.data(), y_ref, ref.size() * 2, cudaMemcpyDeviceToHost));
      double ms_tile = 0;
      if (tile) {  // the model's BF16 linear at these tokens, and its bits
        auto run_tile = [&](uint16_t* out) {
          const Status st_tile = cuda::TileGemm(x, w, nullptr, t, s.n, s.k, false, out, nullptr);
          if (!st_tile.ok()) {
            std::fprintf(stderr, "gemm_algo_bench: TileGemm: %s\n", st_tile.ToString().c_str());
            std::exit(1);
          }
        };
        run_tile(y);
        CK(cudaDeviceSynchronize());
        tile_ref.resize(ref.size());
        CK(cudaMemcpy(tile_ref.data(), y, tile_ref.size() * 2, cudaMemcpyDeviceToHost));
        ms_tile = MedianMs(
            1, [&](int) { run_tile(y); }, 20);
        sum_tile += ms_tile * 36;
        std::printf("\n%s T=%lld: TileGemm %.4f ms; the default %s TileGemm's bits\n", s.name,
                    static_cast<long long>(t), ms_tile,
                    std::memcmp(tile_ref.data(), ref.data(), ref.size() * 2) == 0 ? "gives" : "does not give");
      }
      // cublasLt with the same operands.
      cublasLtMatmulPreference_t pref = nullptr;
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CB(cublasLtMatmulDescCreate(&st.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      CB(cublasLtMatmulDescSetAttribute(st.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      CB(cublasLtMatmulDescSetAttribute(st.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      CB(cublasLtMatrixLayoutCreate(&st.la, CUDA_R_16BF, k, n, k));
      CB(cublasLtMatrixLayoutCreate(&st.lb, CUDA_R_16BF, k, tt, k));
      CB(cublasLtMatrixLayoutCreate(&st.lc, CUDA_R_16BF, n, tt, n));
      CB(cublasLtMatmulPreferenceCreate(&pref));
      const uint64_t ws = kWorkspaceBytes;
      CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
      std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(max_algos));
      int found = 0;
      CB(cublasLtMatmulAlgoGetHeuristic(lt, st.op, st.la, st.lb, st.lc, st.lc, pref, max_algos, results.data(),
                                        &found));
      std::printf("\n%s T=%lld (n %lld, k %lld): default %.4f ms (%.0f TFLOP/s); %d cublasLt candidates\n", s.name,
                  static_cast<long long>(t), static_cast<long long>(s.n), static_cast<long long>(s.k), ms_default,
                  2.0 * t * s.n * s.k / (ms_default * 1e-3) / 1e12, found);
      std::printf("  %3s %5s %5s %6s %6s %6s %6s %9s %7s %s\n", "#", "algo", "tile", "stages", "splitK", "swizzl",
                  "cta", "ms", "/dflt", "bits");
      double best = ms_default;
      for (int i = 0; i < found; ++i) {
        const cublasLtMatmulAlgo_t& algo = results[static_cast<size_t>(i)].algo;
        auto run = [&](uint16_t* out) { LtGemm(lt, st, algo, workspace, out); };
        CK(cudaMemset(y, 0, ref.size() * 2));
        run(y);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(got.data(), y, got.size() * 2, cudaMemcpyDeviceToHost));
        const bool same = std::memcmp(got.data(), ref.data(), got.size() * 2) == 0;
        const bool same_tile = tile && std::memcmp(got.data(), tile_ref.data(), got.size() * 2) == 0;
        const double ms = MedianMs(
            1, [&](int) { run(y); }, 20);
        if (ms < best) {
          best = ms;
          st.best = algo;
          st.best_is_default = false;
        }
        std::printf("  %3d %5d %5d %6d %6d %6d %6d %9.4f %7.3f %s%s\n", i, AlgoAttr(algo, CUBLASLT_ALGO_CONFIG_ID),
                    AlgoAttr(algo, CUBLASLT_ALGO_CONFIG_TILE_ID), AlgoAttr(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                    AlgoAttr(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), AlgoAttr(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                    AlgoAttr(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), ms, ms / ms_default,
                    same ? "same" : "differ",
                    !tile       ? ""
                    : same_tile ? " tile-same"
                                : " tile-differ");
        json += std::string(first_json ? "" : ", ") + "{\"linear\": \"" + s.name +
                "\", \"tokens\": " + std::to_string(t) + ", \"candidate\": " + std::to_string(i) +
                ", \"algo_id\": " + std::to_string(AlgoAttr(algo, CUBLASLT_ALGO_CONFIG_ID)) +
                ", \"ms\": " + std::to_string(ms) + ", \"default_ms\": " + std::to_string(ms_default) +
                ", \"same_bits\": " + (same ? "true" : "false") + "}";
        first_json = false;
      }
      sum_default += ms_default * 36;
      sum_best += best * 36;
      flops += 2.0 * t * s.n * s.k * 36;
      cublasLtMatmulPreferenceDestroy(pref);
      CK(cudaFree(y_ref));
    }
    // Sustained: the 36 layers' linears in turn as a prefill runs them (the GPU at its power cap),
    // all with the default, then each with its best candidate above; 5 runs each, in turn.
    const int tt = static_cast<int>(t);
    auto layer_loop = [&](bool tuned) {
      for (int layer = 0; layer < 36; ++layer) {
        for (const LinearState& st : states) {
          if (!tuned || st.best_is_default) {
            DefaultGemm(h, st, tt, st.y);
          } else {
            LtGemm(lt, st, st.best, workspace, st.y);
          }
        }
      }
    };
    std::vector<double> sustained[2];
    cudaEvent_t ea, eb;
    CK(cudaEventCreate(&ea));
    CK(cudaEventCreate(&eb));
    for (int rep = 0; rep < 12; ++rep) {
      const bool tuned = rep % 2 == 1;
      CK(cudaEventRecord(ea));
      layer_loop(tuned);
      CK(cudaEventRecord(eb));
      CK(cudaEventSynchronize(eb));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, ea, eb));
      if (rep >= 2) sustained[tuned ? 1 : 0].push_back(ms);
    }
    const double sd = Median(sustained[0]), sb = Median(sustained[1]);
    std::printf(
        "\nT=%lld sustained (36 layers' linears back to back, median of 5, alternating): default %.3f ms, "
        "best per linear %.3f ms (%.3fx)\n",
        static_cast<long long>(t), sd, sb, sb / sd);
    json += std::string(first_json ? "" : ", ") + "{\"tokens\": " + std::to_string(t) +
            ", \"sustained_default_ms\": " + std::to_string(sd) + ", \"sustained_best_ms\": " + std::to_string(sb) +
            "}";
    first_json = false;
    CK(cudaEventDestroy(ea));
    CK(cudaEventDestroy(eb));
    for (LinearState& st : states) {
      cublasLtMatrixLayoutDestroy(st.lc);
      cublasLtMatrixLayoutDestroy(st.lb);
      cublasLtMatrixLayoutDestroy(st.la);
      cublasLtMatmulDescDestroy(st.op);
      CK(cudaFree(st.w));
      CK(cudaFree(st.x));
      CK(cudaFree(st.y));
    }
    std::printf(
        "\nT=%lld: 36 layers' linears, default %.3f ms (%.0f TFLOP/s), best per linear %.3f ms (%.0f TFLOP/s)\n",
        static_cast<long long>(t), sum_default, flops / (sum_default * 1e-3) / 1e12, sum_best,
        flops / (sum_best * 1e-3) / 1e12);
    if (tile) std::printf("T=%lld: the same linears with TileGemm %.3f ms\n", static_cast<long long>(t), sum_tile);
  }
  json += "]}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  cublasLtDestroy(lt);
  cublasDestroy(h);
  CK(cudaFree(workspace));
  return 0;
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("gemm_algo_bench", df11::Main, argc, argv); }
