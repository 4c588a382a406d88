// wgmma_tile_bench: the Hopper linear on fixed-lanes tiles of 4 rows (Df11WgmmaTileGemm on DF11's
// fixed lanes, cuda::WgmmaTileGemm on the BF16 twin; sm_90a) on the linears of a Qwen3-8B decode
// step, against what the model runs there today (Df11TileGemm and the BF16 TileGemm with the
// same rows per tile; above 64 tokens: the DF11 matrix decoded into a scratch, then cuBLAS, and
// cuBLAS for BF16), cuBLAS and the BF16 WgmmaGemm, with the read roofline in the same run.
// gate|up is also timed with its activation in one launch (WgmmaTileGemmGated and its DF11 twin against
// Df11TileGemmGated and what BF16 runs today) where the tile kernels run.
// Usage: wgmma_tile_bench [--tokens 33,48,64] [--configs 0,1,2,3] [--all-4-rows] [--with-1-row]
//        [--split-proxy] [--json OUT]
// (configurations: cuda_gemm.h, WgmmaTileGemm)
// By default only the matrices a DF11 model keeps at 4 rows per tile (FixedRowsPerTile: gate|up,
// lm_head); --all-4-rows builds every matrix with 4 rows per tile (a layout the model does not use
// yet). Each time: MedianMs (linear_timing.h: 30 calls after 3 warm-ups, CUDA events, copies
// rotated so that L2 never holds the one read), random N(0, 0.02) BF16 W, x ~ N(0, 1). Each
// (linear, tokens, configuration) first checks DF11 == BF16 twin bit for bit and the twin against cuBLAS.
#include <cuda_runtime.h>

#include <algorithm>
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
#include "kernels/df11_codec.h"
#include "kernels/df11_format.h"
#include "kernels/df11_lanes_cuda.h"
#include "kernels/df11_lanes_fixed.h"

namespace df11 {
namespace {

void Check(const Status& s) { CheckOk("wgmma_tile_bench", s); }

struct Copy {
  cuda::DeviceBuffer plain, sm;
  DeviceLanesBuffer fixed;
};

std::vector<uint16_t> Fetch(const uint16_t* p, size_t n) {
  std::vector<uint16_t> v(n);
  CK(cudaMemcpy(v.data(), p, n * 2, cudaMemcpyDeviceToHost));
  return v;
}

int Main(int argc, char** argv) {
  const std::string json_path = JsonPathArg(argc, argv);
  std::vector<int64_t> token_counts = {33, 48, 64}, configs = {0, 1, 2, 3};
  bool all_4_rows = false, with_1_row = false;
  std::vector<StepLinear> linears(std::begin(kQwen3_8bStepLinears), std::end(kQwen3_8bStepLinears));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tokens" && i + 1 < argc) token_counts = ParseList(argv[++i]);
    if (a == "--configs" && i + 1 < argc) configs = ParseList(argv[++i]);
    if (a == "--all-4-rows") all_4_rows = true;
    if (a == "--with-1-row") with_1_row = true;
    if (a == "--split-proxy") {
      // The 1-row matrices with K split S ways, as [S n, K / S] at 4 rows per tile: the grid and the
      // work a CTA would have (not the split sums' combine).
      linears = {{"q|k|v/2", int64_t{2} * 6144, 4096 / 2, 36},
                 {"o/4", int64_t{4} * 4096, 4096 / 4, 36},
                 {"down/4", int64_t{4} * 4096, 12288 / 4, 36}};
      all_4_rows = true;
    }
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  if (!cuda::WgmmaGemmAvailable()) {
    std::fprintf(stderr, "wgmma_tile_bench: %s is not a compute capability 9.0 GPU\n", prop.name);
    return 1;
  }
  const double roofline = ReadBandwidthBytesPerSecond();
  std::printf("GPU: %s; read roofline %.3f TB/s\n", prop.name, roofline / 1e12);
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  const std::vector<uint16_t> pool = WeightPool(rng, dist);
  cuda::GemmHandle gemm;
  Check(gemm.Init(nullptr));
  const size_t nt = token_counts.size(), nw = configs.size();
  // Per tokens: the chosen matrices of one step summed (ms): today's DF11 and BF16 linears, cuBLAS,
  // WgmmaGemm, and per configuration the new linear in both formats.
  std::vector<double> s_df11_tile(nt), s_bf16_tile(nt), s_cublas(nt), s_wgmma(nt), s_floor_bf16(nt), s_floor_df11(nt);
  std::vector<std::vector<double>> s_df11_new(nt, std::vector<double>(nw)), s_bf16_new(nt, std::vector<double>(nw));
  std::string json = "{\"gpu\": \"" + std::string(prop.name) +
                     "\", \"read_roofline_tbs\": " + std::to_string(roofline / 1e12) +
                     ", \"all_4_rows\": " + (all_4_rows ? "true" : "false") + ", \"linears\": [";
  bool first = true;
  for (const StepLinear& s : linears) {
    const int rows = all_4_rows ? 4 : FixedRowsPerTile(s.n, s.k);
    if (rows != 4 && !with_1_row) continue;
    const uint64_t elements = static_cast<uint64_t>(s.n) * s.k;
    std::vector<uint16_t> host(elements);
    for (uint64_t i = 0; i < elements; ++i) host[i] = pool[(i + s.n) % pool.size()];
    std::vector<uint8_t> sm(elements);
    for (uint64_t i = 0; i < elements; ++i) sm[i] = SignMantissaOf(host[i]);
    auto fixed = BuildFixedLaneStreams(host, ExponentHistogram(host), s.n, s.k, rows, s.name);
    Check(fixed.status());
    const uint64_t df11_bytes = fixed->bytes() + elements;
    const int copies = static_cast<int>(std::max<uint64_t>(1, (uint64_t{1} << 30) / df11_bytes + 1));
    std::vector<Copy> c(copies);
    for (Copy& cp : c) {
      auto plain = cuda::DeviceBuffer::Allocate(2 * elements, "plain");
      auto smb = cuda::DeviceBuffer::Allocate(elements, "sign_mantissa");
      Check(plain.status());
      Check(smb.status());
      cp.plain = std::move(plain).value();
      cp.sm = std::move(smb).value();
      CK(cudaMemcpy(cp.plain.data(), host.data(), 2 * elements, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(cp.sm.data(), sm.data(), elements, cudaMemcpyHostToDevice));
      auto up = DeviceLanesBuffer::Upload(*fixed, nullptr);
      Check(up.status());
      cp.fixed = std::move(up).value();
    }
    std::normal_distribution<float> xdist(0.0f, 1.0f);
    std::vector<uint16_t> hx(cuda::kWgmmaTileMaxTokens * s.k);
    for (auto& v : hx) v = Bf16(xdist(rng));
    auto xb = cuda::DeviceBuffer::Allocate(hx.size() * 2, "x");
    auto yb = cuda::DeviceBuffer::Allocate(cuda::kWgmmaTileMaxTokens * s.n * 2, "y");
    auto y2b = cuda::DeviceBuffer::Allocate(cuda::kWgmmaTileMaxTokens * s.n * 2, "y2");
    auto ws = cuda::DeviceBuffer::Allocate(cuda::WgmmaGemmWorkspaceFloats(cuda::kWgmmaTileMaxTokens, s.n, s.k) * 4,
                                           "workspace");
    Check(xb.status());
    Check(yb.status());
    Check(y2b.status());
    Check(ws.status());
    CK(cudaMemcpy(xb->data(), hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    const uint16_t* x = xb->as<uint16_t>();
    uint16_t *y = yb->as<uint16_t>(), *y2 = y2b->as<uint16_t>();
    float* workspace = ws->as<float>();
    auto scratch_buffer = cuda::DeviceBuffer::Allocate(2 * elements, "scratch");
    Check(scratch_buffer.status());
    uint16_t* scratch = scratch_buffer->as<uint16_t>();
    const double floor_bf16 = 2.0 * elements / roofline * 1e3, floor_df11 = double(df11_bytes) / roofline * 1e3;
    for (size_t ti = 0; ti < nt; ++ti) {
      const int64_t t = token_counts[ti];
      auto df11_tile = [&](int i) {
        Check(Df11TileGemm(x, c[i].fixed.lanes(), c[i].sm.as<uint8_t>(), nullptr, t, false, y, nullptr));
      };
      auto bf16_tile = [&](int i) {
        Check(cuda::TileGemm(x, c[i].plain.as<uint16_t>(), nullptr, t, s.n, s.k, false, y, nullptr, rows));
      };
      // Above the tile kernel's tokens the model decodes a DF11 matrix into the scratch (here not
      // ahead on a second stream: serialized), then runs cuBLAS, as for BF16.
      auto df11_scratch = [&](int i) {
        Check(LaunchLanesDecode(c[i].fixed.lanes(), Df11Tables{}, c[i].sm.as<uint8_t>(), scratch, nullptr));
        Check(gemm.CublasGemm(x, scratch, t, s.n, s.k, false, y));
      };
      const bool tile = t <= cuda::kTileGemmMaxTokens;
      const double cub =
          MedianMs(copies, [&](int i) { Check(gemm.CublasGemm(x, c[i].plain.as<uint16_t>(), t, s.n, s.k, false, y)); });
      const double dt = !tile                           ? MedianMs(copies, df11_scratch)
                        : t >= cuda::kTileGemmMinTokens ? MedianMs(copies, df11_tile)
                                                        : 0.0;
      const double bt = !tile ? cub : t >= cuda::kTileGemmMinTokens ? MedianMs(copies, bf16_tile) : 0.0;
      const double wg = MedianMs(copies, [&](int i) {
        Check(cuda::WgmmaGemm(x, c[i].plain.as<uint16_t>(), nullptr, t, s.n, s.k, false, y, workspace, nullptr));
      });
      s_df11_tile[ti] += s.per_step * dt;
      s_bf16_tile[ti] += s.per_step * bt;
      s_cublas[ti] += s.per_step * cub;
      s_wgmma[ti] += s.per_step * wg;
      s_floor_bf16[ti] += s.per_step * floor_bf16;
      s_floor_df11[ti] += s.per_step * floor_df11;
      std::printf(
          "%-13s T=%-3lld today: DF11 %s %.4f ms, BF16 %s %.4f; cuBLAS %.4f; WgmmaGemm %.4f; "
          "floors BF16 %.4f DF11 %.4f\n",
          s.name, static_cast<long long>(t), tile ? "Df11TileGemm" : "decode+cuBLAS", dt, tile ? "TileGemm" : "cuBLAS",
          bt, cub, wg, floor_bf16, floor_df11);
      for (size_t wi = 0; wi < nw && rows == 4; ++wi) {
        const int config = static_cast<int>(configs[wi]);
        // Bits: DF11 against the twin; the twin against cuBLAS (into y first, then DF11's).
        Check(gemm.CublasGemm(x, c[0].plain.as<uint16_t>(), t, s.n, s.k, false, y));
        CK(cudaDeviceSynchronize());
        const std::vector<uint16_t> want_cublas = Fetch(y, t * s.n);
        Check(Df11WgmmaTileGemm(x, c[0].fixed.lanes(), c[0].sm.as<uint8_t>(), nullptr, t, false, y, nullptr, config));
        Check(cuda::WgmmaTileGemm(x, c[0].plain.as<uint16_t>(), nullptr, t, s.n, s.k, false, y2, nullptr, config));
        CK(cudaDeviceSynchronize());
        const std::vector<uint16_t> got = Fetch(y, t * s.n), twin = Fetch(y2, t * s.n);
        // WgmmaGemm (128 rows a CTA, 64-column stages, m64nNk16 over every token) adds the same
        // 16-column steps in column order where it does not split K: its bits against DF11's.
        Check(cuda::WgmmaGemm(x, c[0].plain.as<uint16_t>(), nullptr, t, s.n, s.k, false, y2, workspace, nullptr));
        CK(cudaDeviceSynchronize());
        const std::vector<uint16_t> wide = Fetch(y2, t * s.n);
        uint64_t differ = 0, wide_differ = 0;
        double num = 0, den = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          differ += got[i] != twin[i];
          wide_differ += got[i] != wide[i];
          num = std::max(num, std::fabs(double{cpu::Bf16ToFloat(twin[i])} - cpu::Bf16ToFloat(want_cublas[i])));
          den = std::max(den, std::fabs(double{cpu::Bf16ToFloat(want_cublas[i])}));
        }
        const double df = MedianMs(copies, [&](int i) {
          Check(Df11WgmmaTileGemm(x, c[i].fixed.lanes(), c[i].sm.as<uint8_t>(), nullptr, t, false, y, nullptr, config));
        });
        const double bf = MedianMs(copies, [&](int i) {
          Check(cuda::WgmmaTileGemm(x, c[i].plain.as<uint16_t>(), nullptr, t, s.n, s.k, false, y, nullptr, config));
        });
        s_df11_new[ti][wi] += s.per_step * df;
        s_bf16_new[ti][wi] += s.per_step * bf;
        std::printf(
            "    config %d: DF11 %.4f ms (%.3fx today's, %.0f G weights/s, %.0f%% of its floor), BF16 %.4f "
            "(%.3fx today's, %.3fx cuBLAS, %.0f%% of its floor); DF11 != twin in %llu of %zu, != WgmmaGemm in "
            "%llu; twin vs cuBLAS %.2e\n",
            config, df, dt > 0 ? df / dt : 0.0, elements / (df * 1e6), 100 * floor_df11 / df, bf,
            bt > 0 ? bf / bt : 0.0, bf / cub, 100 * floor_bf16 / bf, static_cast<unsigned long long>(differ),
            got.size(), static_cast<unsigned long long>(wide_differ), num / std::max(den, 1e-30));
        json += std::string(first ? "" : ", ") + "{\"linear\": \"" + s.name + "\", \"tokens\": " + std::to_string(t) +
                ", \"config\": " + std::to_string(config) + ", \"df11_wgmma_tile_ms\": " + std::to_string(df) +
                ", \"bf16_wgmma_tile_ms\": " + std::to_string(bf) + ", \"df11_tile_ms\": " + std::to_string(dt) +
                ", \"bf16_tile_ms\": " + std::to_string(bt) + ", \"cublas_ms\": " + std::to_string(cub) +
                ", \"wgmma_gemm_ms\": " + std::to_string(wg) + ", \"floor_bf16_ms\": " + std::to_string(floor_bf16) +
                ", \"floor_df11_ms\": " + std::to_string(floor_df11) +
                ", \"df11_differs_from_twin\": " + std::to_string(differ) +
                ", \"df11_differs_from_wgmma_gemm\": " + std::to_string(wide_differ) + "}";
        first = false;
        std::fflush(stdout);
      }
      // gate|up and its activation in one launch (what the model runs from kWgmmaTileGatedModelMinTokens):
      // today Df11TileGemmGated and, for BF16 above 32 tokens, TileGemm then GatedActivation.
      const int64_t inter = s.n / 2;
      if (!all_4_rows && std::string(s.name) == "gate|up_proj" && t >= cuda::kTileGemmMinTokens && tile) {
        const bool bf16_gated = t <= 32;  // kBf16TileGatedMaxTokens (model_cuda_step.cc)
        const double dg = MedianMs(copies, [&](int i) {
          Check(Df11TileGemmGated(Activation::kSilu, x, c[i].fixed.lanes(), c[i].sm.as<uint8_t>(), nullptr, t, inter, y,
                                  nullptr));
        });
        const double bg = MedianMs(copies, [&](int i) {
          if (bf16_gated) {
            Check(cuda::TileGemmGated(Activation::kSilu, x, c[i].plain.as<uint16_t>(), nullptr, t, inter, s.k, y,
                                      nullptr));
          } else {
            Check(cuda::TileGemm(x, c[i].plain.as<uint16_t>(), nullptr, t, s.n, s.k, false, y2, nullptr));
            Check(cuda::GatedActivation(Activation::kSilu, y2, s.n, y2 + inter, s.n, t, inter, y, nullptr));
          }
        });
        std::printf("  gated  today: DF11 Df11TileGemmGated %.4f ms, BF16 %s %.4f\n", dg,
                    bf16_gated ? "TileGemmGated" : "TileGemm+GatedActivation", bg);
        for (size_t wi = 0; wi < nw; ++wi) {
          const int config = static_cast<int>(configs[wi]);
          const double df = MedianMs(copies, [&](int i) {
            Check(Df11WgmmaTileGemmGated(Activation::kSilu, x, c[i].fixed.lanes(), c[i].sm.as<uint8_t>(), nullptr, t,
                                         inter, y, nullptr, config));
          });
          const double bf = MedianMs(copies, [&](int i) {
            Check(cuda::WgmmaTileGemmGated(Activation::kSilu, x, c[i].plain.as<uint16_t>(), nullptr, t, inter, s.k, y,
                                           nullptr, config));
          });
          std::printf("    gated config %d: DF11 %.4f ms (%.3fx today's), BF16 %.4f (%.3fx today's)\n", config, df,
                      df / dg, bf, bf / bg);
          json += ", {\"linear\": \"gate|up_proj+activation\", \"tokens\": " + std::to_string(t) +
                  ", \"config\": " + std::to_string(config) + ", \"df11_wgmma_tile_ms\": " + std::to_string(df) +
                  ", \"bf16_wgmma_tile_ms\": " + std::to_string(bf) + ", \"df11_tile_ms\": " + std::to_string(dg) +
                  ", \"bf16_tile_ms\": " + std::to_string(bg) + "}";
          std::fflush(stdout);
        }
      }
    }
  }
  json += "], \"steps\": [";
  std::printf("\nthese linears in one decode step (36 layers + lm_head), ms:\n");
  for (size_t ti = 0; ti < nt; ++ti) {
    std::printf(
        "  T=%lld: today DF11 %.3f, BF16 %.3f (%.3fx); cuBLAS %.3f, WgmmaGemm %.3f; floors BF16 %.3f, DF11 %.3f\n",
        static_cast<long long>(token_counts[ti]), s_df11_tile[ti], s_bf16_tile[ti],
        s_df11_tile[ti] / std::max(s_bf16_tile[ti], 1e-9), s_cublas[ti], s_wgmma[ti], s_floor_bf16[ti],
        s_floor_df11[ti]);
    json += std::string(ti ? ", " : "") + "{\"tokens\": " + std::to_string(token_counts[ti]) +
            ", \"df11_tile_ms\": " + std::to_string(s_df11_tile[ti]) +
            ", \"bf16_tile_ms\": " + std::to_string(s_bf16_tile[ti]) +
            ", \"cublas_ms\": " + std::to_string(s_cublas[ti]) + ", \"wgmma_gemm_ms\": " + std::to_string(s_wgmma[ti]) +
            ", \"floor_bf16_ms\": " + std::to_string(s_floor_bf16[ti]) +
            ", \"floor_df11_ms\": " + std::to_string(s_floor_df11[ti]) + ", \"new\": [";
    for (size_t wi = 0; wi < nw; ++wi) {
      std::printf("    config %lld: DF11 %.3f (%.3fx today's DF11), BF16 %.3f (%.3fx today's BF16); DF11/BF16 %.3f\n",
                  static_cast<long long>(configs[wi]), s_df11_new[ti][wi],
                  s_df11_new[ti][wi] / std::max(s_df11_tile[ti], 1e-9), s_bf16_new[ti][wi],
                  s_bf16_new[ti][wi] / std::max(s_bf16_tile[ti], 1e-9), s_df11_new[ti][wi] / s_bf16_new[ti][wi]);
      json += std::string(wi ? ", " : "") + "{\"config\": " + std::to_string(configs[wi]) +
              ", \"df11_ms\": " + std::to_string(s_df11_new[ti][wi]) +
              ", \"bf16_ms\": " + std::to_string(s_bf16_new[ti][wi]) + "}";
    }
    json += "]}";
  }
  json += "]}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("wgmma_tile_bench", df11::Main, argc, argv); }
