// The fused DF11 GEMV (df11_lanes_cuda.h), from Huffman lanes and from fixed lanes
// (df11_lanes_fixed.h), against the BF16 Gemv on the same weights, and against
// today's DF11 path (decode the unit into a BF16 scratch, then Gemv), on the linears of a
// Qwen3-8B-shaped layer as the CUDA model runs them (q|k|v and gate|up stacked) and its lm_head,
// 1..kGemvMaxTokens tokens; at 3, 4, 8, 16, 24, 32, 33, 48 and 64 tokens the tensor-core linears (TileGemm on BF16,
// Df11TileGemm on fixed lanes) against cuBLAS and against decode-then-cuBLAS; plus the decoders alone (both lane
// decoders and the chunk decoder, weights/s), beside the read roofline measured in the same run. Each timed call reads
// a different copy of the weights (copies fill > 1 GB), so the 50 MB L2 never holds them. CUDA events, 3 warm-ups,
// median of 30. Random N(0, 0.02) BF16 weights. Checks that both fused GEMVs give the BF16 Gemv's
// bits. Prints a table; --json FILE writes the numbers. --fixed-rows R (1, 2 or 4) builds every
// matrix's fixed lanes with R rows per tile, and runs TileGemm with R too (a layout the model does
// not use; 0, the default: FixedRowsPerTile, the model's). --only NAME runs that linear alone (for
// a profiler; the step totals then count it alone). --split-proxy S (2 or 4): the one-row matrices
// (q|k|v, o, down) as [S n, K / S], every matrix at 4 rows per tile: the grids and the work a
// warp or CTA would have with those matrices at 4 rows per tile and K split S ways (not the split
// sums' combine), the step totals comparable with a run without it. --decoders runs only the
// decoders: each linear's (bytes moved against the read roofline, bits against the weights), the step's total, and a
// layer's matrices decoded one after another as the model decodes a unit, without and with
// LaunchLanesDecode's after_fixed_decode. --power SECONDS: for each linear (with --only, that one),
// phases of SECONDS each, one kernel called back to back over rotating copies (idle; a device-to-
// device copy of W's BF16 bytes; as many bytes copied 8 MB at a time between two buffers the L2
// holds; the BF16 Gemv and the fused DF11 GEMV at 1 token; the fixed-lane
// decoder into a scratch; cuBLAS at 2,048 tokens on the BF16 W), each line giving the phase's
// wall-clock start and end (Unix seconds) and its calls, for bench/power_phases.py to join with
// power samples (nvidia-smi) into joules per weight.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_main.h"
#include "bench/cuda_check.h"
#include "bench/linear_timing.h"
#include "bench/read_roofline.h"
#include "kernels/cuda_gemm.h"
#include "kernels/df11_codec.h"
#include "kernels/df11_lanes_cuda.h"
#include "kernels/df11_lanes_fixed.h"

namespace df11 {
namespace {

void Check(const Status& s) { CheckOk("df11_gemv_bench", s); }

// A fused GEMV's bits against the BF16 Gemv's, in the table and in the JSON: not run (the GEMV
// refuses the matrix, Df11GemvTakes), the same, or not.
const char* BitsWord(bool ran, bool same) { return !ran ? "n/a" : same ? "same" : "DIFFER"; }
const char* BitsJson(bool ran, bool same) { return !ran ? "null" : same ? "true" : "false"; }
// A time in the JSON: null for a GEMV that did not run (NaN).
std::string JsonMs(double ms) { return std::isnan(ms) ? "null" : std::to_string(ms); }

// Unix time in seconds (the clock nvidia-smi's samples are stamped with).
double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// --power: a phase's line, which power_phases.py reads: "power phase NAME LINEAR start S end S
// calls N ms_per_call M weights W" (M 0 for a phase without calls).
void PrintPowerPhase(const char* name, const char* linear, double start, double end, int64_t calls, uint64_t weights) {
  std::printf("power phase %s %s start %.3f end %.3f calls %lld ms_per_call %.5f weights %llu\n", name, linear, start,
              end, static_cast<long long>(calls), calls > 0 ? (end - start) * 1e3 / static_cast<double>(calls) : 0.0,
              static_cast<unsigned long long>(weights));
  std::fflush(stdout);
}

// --power: calls fn(copy) back to back, copies at a time between synchronizations, for `seconds`
// of wall clock, then prints the phase's line.
template <typename F>
void PowerPhase(const char* name, const char* linear, double seconds, int copies, uint64_t weights, F fn) {
  CK(cudaDeviceSynchronize());
  const double start = UnixSeconds();
  int64_t calls = 0;
  while (UnixSeconds() - start < seconds) {
    for (int i = 0; i < copies; ++i, ++calls) fn(i);
    CK(cudaDeviceSynchronize());
  }
  PrintPowerPhase(name, linear, start, UnixSeconds(), calls, weights);
}

// One copy of a matrix in both formats on the device.
struct Copy {
  cuda::DeviceBuffer plain;
  DeviceUnitBuffer unit;
  DeviceLanesBuffer lanes, fixed;
};

int Main(int argc, char** argv) {
  const std::string json_path = JsonPathArg(argc, argv);
  std::string rows_arg, only, proxy_arg;
  double power_seconds = 0;
  bool decoders_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--decoders") decoders_only = true;
  }
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--fixed-rows") rows_arg = argv[i + 1];
    if (std::string(argv[i]) == "--only") only = argv[i + 1];
    if (std::string(argv[i]) == "--power") power_seconds = std::atof(argv[i + 1]);
    if (std::string(argv[i]) == "--split-proxy") proxy_arg = argv[i + 1];
  }
  std::vector<StepLinear> linears(std::begin(kQwen3_8bStepLinears), std::end(kQwen3_8bStepLinears));
  if (!proxy_arg.empty()) {
    if (proxy_arg != "2" && proxy_arg != "4") {
      std::fprintf(stderr, "df11_gemv_bench: --split-proxy takes 2 or 4, got %s\n", proxy_arg.c_str());
      return 2;
    }
    const int64_t split = proxy_arg[0] - '0';
    linears = {{split == 2 ? "q|k|v/2" : "q|k|v/4", split * 6144, 4096 / split, 36},
               {split == 2 ? "o/2" : "o/4", split * 4096, 4096 / split, 36},
               kQwen3_8bStepLinears[2],
               {split == 2 ? "down/2" : "down/4", split * 4096, 12288 / split, 36},
               kQwen3_8bStepLinears[4]};
    rows_arg = "4";
  }
  if (!rows_arg.empty() && rows_arg != "1" && rows_arg != "2" && rows_arg != "4") {
    std::fprintf(stderr, "df11_gemv_bench: --fixed-rows takes 1, 2 or 4, got %s\n", rows_arg.c_str());
    return 2;
  }
  const int fixed_rows = rows_arg.empty() ? 0 : rows_arg[0] - '0';
  if (!only.empty() &&
      std::none_of(linears.begin(), linears.end(), [&](const StepLinear& s) { return only == s.name; })) {
    std::fprintf(stderr, "df11_gemv_bench: --only names no linear of the step (q|k|v_proj, o_proj, ...): %s\n",
                 only.c_str());
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const double roofline = ReadBandwidthBytesPerSecond();
  std::printf("GPU: %s; read roofline %.3f TB/s\n", prop.name, roofline / 1e12);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  const std::vector<uint16_t> pool = WeightPool(rng, dist);
  std::string json = "{\"gpu\": \"" + std::string(prop.name) +
                     "\", \"read_roofline_tbs\": " + std::to_string(roofline / 1e12) + ", \"results\": [";
  bool first_row = true;
  double step_bf16[5] = {}, step_fused[5] = {}, step_fixed[5] = {}, step_scratch[5] = {};  // per tokens, ms per step
  // The fixed-lane decoder alone over the linears of one step: ms, weights, bytes read and written.
  double step_decode_ms = 0, step_weights = 0, step_decode_bytes = 0;
  struct LayerMatrix {
    Copy copy;
    uint64_t n;
  };
  std::vector<LayerMatrix> layer;  // --decoders: the layer's matrices
  bool decodes_exact = true;
  // The same at kTileTokens: TileGemm, cuBLAS, Df11TileGemm, fixed decode + cuBLAS.
  // (3, 4, then each bucket's largest token count, and 33 inside the last.)
  constexpr int kTileBuckets = 10;
  double tile_bf16[kTileBuckets] = {}, tile_cublas[kTileBuckets] = {}, tile_df11[kTileBuckets] = {},
         tile_scratch[kTileBuckets] = {};
  constexpr int64_t kTileTokens[kTileBuckets] = {2, 3, 4, 8, 16, 24, 32, 33, 48, 64};
  static_assert(kTileTokens[kTileBuckets - 1] == cuda::kTileGemmMaxTokens, "the last bucket's largest count");
  cuda::GemmHandle gemm;
  Check(gemm.Init(nullptr));
  std::printf("%-13s %3s | %9s %9s %9s %9s | %6s %6s %6s | %s\n", "linear", "T", "bf16 ms", "fused ms", "fixed ms",
              "scratch", "fu/bf", "fx/bf", "sc/bf", "bits");
  for (const StepLinear& s : linears) {
    if (!only.empty() && only != s.name) continue;
    const uint64_t n = static_cast<uint64_t>(s.n) * s.k;
    std::vector<uint16_t> host(n);
    for (uint64_t i = 0; i < n; ++i) host[i] = pool[(i + s.n) % pool.size()];
    auto enc = EncodeUnit(host);
    Check(enc.status());
    auto layout = ValidateUnit(enc->view(), s.name);
    Check(layout.status());
    auto codes = CodesFromLuts(enc->luts);
    Check(codes.status());
    auto lanes = BuildLaneStreams(*codes, host, s.n, s.k, LaneRowsPerTile(s.n), s.name);
    Check(lanes.status());
    auto fixed = BuildFixedLaneStreams(host, ExponentHistogram(host), s.n, s.k,
                                       fixed_rows != 0 ? fixed_rows : FixedRowsPerTile(s.n, s.k), s.name);
    Check(fixed.status());
    const uint64_t fixed_bytes = fixed->bytes() + enc->sign_mantissa.size();
    const uint64_t df11_bytes = enc->encoded_exponent.size() + enc->sign_mantissa.size() + enc->gaps.size() +
                                enc->output_positions.size() + enc->luts.size();
    const uint64_t lanes_bytes = lanes->bytes() + enc->sign_mantissa.size() + enc->luts.size();
    const int copies = static_cast<int>(std::max<uint64_t>(1, (uint64_t{1} << 30) / lanes_bytes + 1));
    std::vector<Copy> c(copies);
    for (Copy& cp : c) {
      auto plain = cuda::DeviceBuffer::Allocate(2 * n, "plain");
      Check(plain.status());
      cp.plain = std::move(plain).value();
      CK(cudaMemcpy(cp.plain.data(), host.data(), 2 * n, cudaMemcpyHostToDevice));
      auto unit = DeviceUnitBuffer::Upload(enc->view(), *layout);
      Check(unit.status());
      cp.unit = std::move(unit).value();
      auto up = DeviceLanesBuffer::Upload(*lanes, nullptr);
      Check(up.status());
      cp.lanes = std::move(up).value();
      auto upf = DeviceLanesBuffer::Upload(*fixed, nullptr);
      Check(upf.status());
      cp.fixed = std::move(upf).value();
    }
    auto scratch = cuda::DeviceBuffer::Allocate(2 * n, "scratch");
    Check(scratch.status());
    uint16_t* out = scratch->as<uint16_t>();
    auto xb = cuda::DeviceBuffer::Allocate(cuda::kTileGemmMaxTokens * s.k * 2, "x");
    auto yb = cuda::DeviceBuffer::Allocate(cuda::kTileGemmMaxTokens * s.n * 2, "y");
    auto yb2 = cuda::DeviceBuffer::Allocate(cuda::kTileGemmMaxTokens * s.n * 2, "y2");
    Check(xb.status());
    Check(yb.status());
    Check(yb2.status());
    std::vector<uint16_t> hx(cuda::kTileGemmMaxTokens * s.k);
    for (auto& v : hx) v = Bf16(dist(rng) * 50);
    CK(cudaMemcpy(xb->data(), hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    const uint16_t* x = xb->as<uint16_t>();
    uint16_t *y = yb->as<uint16_t>(), *y2 = yb2->as<uint16_t>();

    const double lane_decode = MedianMs(copies, [&](int i) {
      Check(LaunchLanesDecode(c[i].lanes.lanes(), TablesOf(c[i].unit.unit()), c[i].unit.unit().sign_mantissa, out,
                              nullptr));
    });
    const double fixed_decode = MedianMs(copies, [&](int i) {
      Check(LaunchLanesDecode(c[i].fixed.lanes(), {}, c[i].unit.unit().sign_mantissa, out, nullptr));
    });
    const double chunk_decode = MedianMs(
        copies, [&](int i) { Check(LaunchDf11Decode(c[i].unit.unit(), c[i].unit.layout(), 0, n, out, nullptr)); });
    std::printf(
        "%-13s     decoders: lanes %.4f ms (%.0f G weights/s), fixed %.4f ms (%.0f G/s), chunks %.4f ms (%.0f G/s); "
        "bytes: BF16 %.1f MB, DF11 %.1f MB, lanes %.1f MB (%.4f x DF11), fixed %.1f MB (%.4f x DF11, %d rows per "
        "tile)\n",
        s.name, lane_decode, n / (lane_decode * 1e6), fixed_decode, n / (fixed_decode * 1e6), chunk_decode,
        n / (chunk_decode * 1e6), 2.0 * n / 1e6, df11_bytes / 1e6, lanes_bytes / 1e6,
        static_cast<double>(lanes_bytes) / df11_bytes, fixed_bytes / 1e6, static_cast<double>(fixed_bytes) / df11_bytes,
        fixed->rows_per_tile);
    step_decode_ms += s.per_step * fixed_decode;
    step_weights += s.per_step * static_cast<double>(n);
    step_decode_bytes += s.per_step * static_cast<double>(fixed_bytes + 2 * n);
    {  // the decoder's bits against the weights
      CK(cudaMemset(out, 0xff, 2 * n));
      Check(LaunchLanesDecode(c[0].fixed.lanes(), {}, c[0].unit.unit().sign_mantissa, out, nullptr));
      std::vector<uint16_t> back(n);
      CK(cudaMemcpy(back.data(), out, 2 * n, cudaMemcpyDeviceToHost));
      const bool same = back == host;
      decodes_exact = decodes_exact && same;
      std::printf("%-13s     fixed decoder: %.0f GB/s moved (read + written), %.3f of the read roofline; bits %s\n",
                  s.name, (fixed_bytes + 2.0 * n) / (fixed_decode * 1e6),
                  (fixed_bytes + 2.0 * n) / (fixed_decode * 1e-3) / roofline, same ? "same" : "DIFFER");
      json += std::string(first_row ? "" : ",") + "\n  {\"linear\": \"" + s.name +
              "\", \"fixed_decode_ms\": " + std::to_string(fixed_decode) + ", \"weights\": " + std::to_string(n) +
              ", \"fixed_bytes\": " + std::to_string(fixed_bytes) +
              ", \"decode_bits_equal\": " + (same ? "true" : "false") + "}";
      first_row = false;
    }
    if (decoders_only) {
      if (s.per_step > 1) layer.push_back({std::move(c[0]), n});  // one copy of each matrix of a layer
      continue;
    }
    if (power_seconds > 0) {
      constexpr int64_t kPrefillTokens = 2048;
      auto px = cuda::DeviceBuffer::Allocate(kPrefillTokens * s.k * 2, "prefill x");
      auto py = cuda::DeviceBuffer::Allocate(kPrefillTokens * s.n * 2, "prefill y");
      Check(px.status());
      Check(py.status());
      {  // random activations, as x
        std::vector<uint16_t> hp(kPrefillTokens * s.k);
        for (auto& v : hp) v = Bf16(dist(rng) * 50);
        CK(cudaMemcpy(px->data(), hp.data(), hp.size() * 2, cudaMemcpyHostToDevice));
      }
      const double idle_start = UnixSeconds();
      std::this_thread::sleep_for(std::chrono::duration<double>(power_seconds));
      PrintPowerPhase("idle", s.name, idle_start, UnixSeconds(), 0, n);
      PowerPhase("copy", s.name, power_seconds, copies, n,
                 [&](int i) { CK(cudaMemcpyAsync(out, c[i].plain.data(), 2 * n, cudaMemcpyDeviceToDevice, nullptr)); });
      {  // the same bytes copied within the L2: 8 MB to 8 MB, as many calls as W's bytes make
        constexpr uint64_t kL2Bytes = uint64_t{8} << 20;
        const int64_t pieces = static_cast<int64_t>((2 * n + kL2Bytes - 1) / kL2Bytes);
        auto l2 = cuda::DeviceBuffer::Allocate(2 * kL2Bytes, "L2 copy");
        Check(l2.status());
        char* base = static_cast<char*>(l2->data());
        PowerPhase("l2_copy", s.name, power_seconds, copies, n, [&](int) {
          for (int64_t p = 0; p < pieces; ++p) {
            CK(cudaMemcpyAsync(base + kL2Bytes, base, kL2Bytes, cudaMemcpyDeviceToDevice, nullptr));
          }
        });
      }
      PowerPhase("bf16_gemv", s.name, power_seconds, copies, n, [&](int i) {
        Check(cuda::Gemv(x, c[i].plain.as<uint16_t>(), nullptr, 1, s.n, s.k, false, y, nullptr));
      });
      if (Df11GemvTakes(c[0].fixed.lanes(), 1)) {
        PowerPhase("df11_gemv", s.name, power_seconds, copies, n, [&](int i) {
          Check(Df11Gemv(x, c[i].fixed.lanes(), {}, c[i].unit.unit().sign_mantissa, nullptr, 1, false, y2, nullptr));
        });
      }
      PowerPhase("df11_decode", s.name, power_seconds, copies, n, [&](int i) {
        Check(LaunchLanesDecode(c[i].fixed.lanes(), {}, c[i].unit.unit().sign_mantissa, out, nullptr));
      });
      PowerPhase("cublas_2048", s.name, power_seconds, copies, n, [&](int i) {
        Check(gemm.CublasGemm(px->as<uint16_t>(), c[i].plain.as<uint16_t>(), kPrefillTokens, s.n, s.k, false,
                              py->as<uint16_t>()));
      });
      continue;
    }
    for (const int64_t t : {1, 2, 3, 4}) {
      const double bf16 = MedianMs(copies, [&](int i) {
        Check(cuda::Gemv(x, c[i].plain.as<uint16_t>(), nullptr, t, s.n, s.k, false, y, nullptr));
      });
      // The Huffman lanes' GEMV does not run a matrix whose 1-token sums split (Df11GemvTakes): NaN, "n/a".
      const bool huffman_takes = Df11GemvTakes(c[0].lanes.lanes(), t);
      const double fused = !huffman_takes ? std::nan("") : MedianMs(copies, [&](int i) {
        Check(Df11Gemv(x, c[i].lanes.lanes(), TablesOf(c[i].unit.unit()), c[i].unit.unit().sign_mantissa, nullptr, t,
                       false, y2, nullptr));
      });
      const bool fixed_takes = Df11GemvTakes(c[0].fixed.lanes(), t);  // not: --fixed-rows 1 or 2 where sums split
      const double fused_fixed = !fixed_takes ? std::nan("") : MedianMs(copies, [&](int i) {
        Check(Df11Gemv(x, c[i].fixed.lanes(), {}, c[i].unit.unit().sign_mantissa, nullptr, t, false, y2, nullptr));
      });
      const double via_scratch = MedianMs(copies, [&](int i) {
        Check(LaunchDf11Decode(c[i].unit.unit(), c[i].unit.layout(), 0, n, out, nullptr));
        Check(cuda::Gemv(x, out, nullptr, t, s.n, s.k, false, y, nullptr));
      });
      // Bits: the fused GEMV against the BF16 Gemv on the same x.
      Check(cuda::Gemv(x, c[0].plain.as<uint16_t>(), nullptr, t, s.n, s.k, false, y, nullptr));
      std::vector<uint16_t> a(t * s.n), b(t * s.n);
      CK(cudaMemcpy(a.data(), y, a.size() * 2, cudaMemcpyDeviceToHost));
      if (huffman_takes) {
        Check(Df11Gemv(x, c[0].lanes.lanes(), TablesOf(c[0].unit.unit()), c[0].unit.unit().sign_mantissa, nullptr, t,
                       false, y2, nullptr));
        CK(cudaMemcpy(b.data(), y2, b.size() * 2, cudaMemcpyDeviceToHost));
      }
      std::vector<uint16_t> f(t * s.n);
      if (fixed_takes) {
        Check(Df11Gemv(x, c[0].fixed.lanes(), {}, c[0].unit.unit().sign_mantissa, nullptr, t, false, y2, nullptr));
        CK(cudaMemcpy(f.data(), y2, f.size() * 2, cudaMemcpyDeviceToHost));
      }
      const bool same = a == b, same_fixed = a == f;
      step_bf16[t] += s.per_step * bf16;
      step_fused[t] += s.per_step * fused;
      step_fixed[t] += s.per_step * fused_fixed;
      step_scratch[t] += s.per_step * via_scratch;
      std::printf("%-13s %3ld | %9.4f %9.4f %9.4f %9.4f | %6.3f %6.3f %6.3f | %s %s\n", s.name, static_cast<long>(t),
                  bf16, fused, fused_fixed, via_scratch, fused / bf16, fused_fixed / bf16, via_scratch / bf16,
                  BitsWord(huffman_takes, same), BitsWord(fixed_takes, same_fixed));
      json +=
          std::string(first_row ? "" : ",") + "\n  {\"linear\": \"" + s.name + "\", \"n\": " + std::to_string(s.n) +
          ", \"k\": " + std::to_string(s.k) + ", \"tokens\": " + std::to_string(t) +
          ", \"bf16_gemv_ms\": " + std::to_string(bf16) + ", \"df11_fused_ms\": " + JsonMs(fused) +
          ", \"df11_decode_then_gemv_ms\": " + std::to_string(via_scratch) +
          ", \"fused_bits_equal_bf16\": " + BitsJson(huffman_takes, same) +
          ", \"df11_fixed_fused_ms\": " + JsonMs(fused_fixed) +
          ", \"fixed_bits_equal_bf16\": " + BitsJson(fixed_takes, same_fixed) +
          ", \"fixed_decode_ms\": " + std::to_string(fixed_decode) +
          ", \"fixed_bytes\": " + std::to_string(fixed_bytes) + ", \"lane_decode_ms\": " + std::to_string(lane_decode) +
          ", \"chunk_decode_ms\": " + std::to_string(chunk_decode) + ", \"bf16_bytes\": " + std::to_string(2 * n) +
          ", \"df11_bytes\": " + std::to_string(df11_bytes) + ", \"lanes_bytes\": " + std::to_string(lanes_bytes) + "}";
      first_row = false;
    }
    for (int b = 0; b < kTileBuckets; ++b) {
      const int64_t t = kTileTokens[b];
      const double tile = MedianMs(copies, [&](int i) {
        Check(cuda::TileGemm(x, c[i].plain.as<uint16_t>(), nullptr, t, s.n, s.k, false, y, nullptr, fixed_rows));
      });
      const double cublas =
          MedianMs(copies, [&](int i) { Check(gemm.CublasGemm(x, c[i].plain.as<uint16_t>(), t, s.n, s.k, false, y)); });
      const double fused = MedianMs(copies, [&](int i) {
        Check(Df11TileGemm(x, c[i].fixed.lanes(), c[i].unit.unit().sign_mantissa, nullptr, t, false, y2, nullptr));
      });
      const double via_scratch = MedianMs(copies, [&](int i) {
        Check(LaunchLanesDecode(c[i].fixed.lanes(), {}, c[i].unit.unit().sign_mantissa, out, nullptr));
        Check(gemm.CublasGemm(x, out, t, s.n, s.k, false, y));
      });
      Check(cuda::TileGemm(x, c[0].plain.as<uint16_t>(), nullptr, t, s.n, s.k, false, y, nullptr, fixed_rows));
      Check(Df11TileGemm(x, c[0].fixed.lanes(), c[0].unit.unit().sign_mantissa, nullptr, t, false, y2, nullptr));
      std::vector<uint16_t> a(t * s.n), f(t * s.n);
      CK(cudaMemcpy(a.data(), y, a.size() * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(f.data(), y2, f.size() * 2, cudaMemcpyDeviceToHost));
      const bool same = a == f;
      tile_bf16[b] += s.per_step * tile;
      tile_cublas[b] += s.per_step * cublas;
      tile_df11[b] += s.per_step * fused;
      tile_scratch[b] += s.per_step * via_scratch;
      std::printf(
          "%-13s %3ld | tile %9.4f cublas %9.4f df11 tile %9.4f fixed+cublas %9.4f | tile/cublas %6.3f "
          "df11/tile %6.3f df11/cublas %6.3f | %s\n",
          s.name, static_cast<long>(t), tile, cublas, fused, via_scratch, tile / cublas, fused / tile, fused / cublas,
          same ? "same" : "DIFFER");
      json += std::string(",") + "\n  {\"linear\": \"" + s.name + "\", \"tokens\": " + std::to_string(t) +
              ", \"bf16_tile_gemm_ms\": " + std::to_string(tile) + ", \"bf16_cublas_ms\": " + std::to_string(cublas) +
              ", \"df11_tile_gemm_ms\": " + std::to_string(fused) +
              ", \"df11_fixed_decode_then_cublas_ms\": " + std::to_string(via_scratch) +
              ", \"tile_bits_equal_bf16\": " + (same ? "true" : "false") + "}";
    }
  }
  if (power_seconds > 0) return decodes_exact ? 0 : 1;  // the phases' lines are the output
  if (decoders_only) {
    // A layer's matrices decoded one after another into one scratch, as the model decodes a unit:
    // each launch after the previous (LaunchLanesDecode's default), then each started while the
    // previous one's last tiles run (after_fixed_decode). Alternating, medians.
    uint64_t total = 0;
    for (const LayerMatrix& m : layer) total += m.n;
    auto layer_out = cuda::DeviceBuffer::Allocate(2 * total, "layer scratch");
    Check(layer_out.status());
    auto decode_layer = [&](bool overlap) {
      uint64_t at = 0;
      for (size_t i = 0; i < layer.size(); ++i) {
        Check(LaunchLanesDecode(layer[i].copy.fixed.lanes(), {}, layer[i].copy.unit.unit().sign_mantissa,
                                layer_out->as<uint16_t>() + at, nullptr, overlap && i > 0));
        at += layer[i].n;
      }
    };
    std::vector<double> serial, overlapped;
    for (int round = 0; round < 5; ++round) {
      serial.push_back(MedianMs(1, [&](int) { decode_layer(false); }));
      overlapped.push_back(MedianMs(1, [&](int) { decode_layer(true); }));
    }
    std::sort(serial.begin(), serial.end());
    std::sort(overlapped.begin(), overlapped.end());
    const double layer_serial = serial[serial.size() / 2], layer_overlapped = overlapped[overlapped.size() / 2];
    // Both orders give the same bits: the overlapped decode against the weights, matrix by matrix.
    CK(cudaMemset(layer_out->data(), 0xff, 2 * total));
    decode_layer(true);
    CK(cudaDeviceSynchronize());
    bool layer_exact = true;
    uint64_t at = 0;
    for (const LayerMatrix& m : layer) {
      std::vector<uint16_t> back(m.n), want(m.n);
      CK(cudaMemcpy(back.data(), layer_out->as<uint16_t>() + at, 2 * m.n, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(want.data(), m.copy.plain.data(), 2 * m.n, cudaMemcpyDeviceToHost));
      layer_exact = layer_exact && back == want;
      at += m.n;
    }
    decodes_exact = decodes_exact && layer_exact;
    std::printf(
        "\na layer's %zu matrices, decoded one after another: %.4f ms; each started during the previous one's last "
        "tiles: %.4f ms (%.3fx); bits %s\n",
        layer.size(), layer_serial, layer_overlapped, layer_overlapped / layer_serial, layer_exact ? "same" : "DIFFER");
    json += std::string(first_row ? "" : ",") + "\n  {\"layer_decode_serial_ms\": " + std::to_string(layer_serial) +
            ", \"layer_decode_overlapped_ms\": " + std::to_string(layer_overlapped) +
            ", \"layer_decode_bits_equal\": " + (layer_exact ? "true" : "false") + "}";
    first_row = false;
  }
  std::printf(
      "\nfixed-lane decoder alone, linears of one step (36 layers + lm_head): %.3f ms, %.0f G weights/s, %.0f GB/s "
      "moved (%.3f of the read roofline); bits %s\n",
      step_decode_ms, step_weights / (step_decode_ms * 1e6), step_decode_bytes / (step_decode_ms * 1e6),
      step_decode_bytes / (step_decode_ms * 1e-3) / roofline, decodes_exact ? "same" : "DIFFER");
  json += std::string(first_row ? "" : ",") + "\n  {\"decoder_step_ms\": " + std::to_string(step_decode_ms) +
          ", \"decoder_step_weights\": " + std::to_string(step_weights) +
          ", \"decoder_step_bytes\": " + std::to_string(step_decode_bytes) +
          ", \"decoder_bits_equal\": " + (decodes_exact ? "true" : "false") + "}";
  first_row = false;
  if (decoders_only) {
    json += "\n]}\n";
    if (!json_path.empty()) std::ofstream(json_path) << json;
    return decodes_exact ? 0 : 1;
  }
  std::printf("\nlinears of one decode step (36 layers + lm_head), ms:\n");
  for (int b = 0; b < kTileBuckets; ++b) {
    std::printf(
        "  T=%d: BF16 TileGemm %.3f, cuBLAS %.3f (TileGemm/cuBLAS %.3f), DF11 Df11TileGemm %.3f (%.3fx "
        "TileGemm, %.3fx cuBLAS), DF11 fixed decode+cuBLAS %.3f (%.3fx cuBLAS)\n",
        static_cast<int>(kTileTokens[b]), tile_bf16[b], tile_cublas[b], tile_bf16[b] / tile_cublas[b], tile_df11[b],
        tile_df11[b] / tile_bf16[b], tile_df11[b] / tile_cublas[b], tile_scratch[b], tile_scratch[b] / tile_cublas[b]);
    json += std::string(",") + "\n  {\"tile_step_linears_tokens\": " + std::to_string(kTileTokens[b]) +
            ", \"bf16_tile_gemm_ms\": " + std::to_string(tile_bf16[b]) +
            ", \"bf16_cublas_ms\": " + std::to_string(tile_cublas[b]) +
            ", \"df11_tile_gemm_ms\": " + std::to_string(tile_df11[b]) +
            ", \"df11_fixed_decode_then_cublas_ms\": " + std::to_string(tile_scratch[b]) + "}";
  }
  for (int t = 1; t <= 4; ++t) {
    std::printf("  T=%d: BF16 Gemv %.3f, DF11 fused %.3f (%.3fx), fixed %.3f (%.3fx), DF11 decode+Gemv %.3f (%.3fx)\n",
                t, step_bf16[t], step_fused[t], step_fused[t] / step_bf16[t], step_fixed[t],
                step_fixed[t] / step_bf16[t], step_scratch[t], step_scratch[t] / step_bf16[t]);
    json += std::string(",") + "\n  {\"step_linears_tokens\": " + std::to_string(t) +
            ", \"bf16_ms\": " + std::to_string(step_bf16[t]) + ", \"df11_fused_ms\": " + std::to_string(step_fused[t]) +
            ", \"df11_fixed_fused_ms\": " + std::to_string(step_fixed[t]) +
            ", \"df11_decode_then_gemv_ms\": " + std::to_string(step_scratch[t]) + "}";
  }
  json += "\n]}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("df11_gemv_bench", df11::Main, argc, argv); }
