// DF11 decode throughput on the GPU: our kernel vs the reference kernel (optional, loaded from a
// PTX file given with --reference-ptx; its source is never part of this repository) vs the
// device-to-device copy roofline, on Qwen3-8B-shaped layers (7 matrices, 192.9M Gaussian weights,
// std 0.02). Timing: CUDA events, warm-up, median of repeats, rotating over distinct layers so the
// 50 MB L2 cannot hold the input. Prints a table and writes JSON (--json FILE).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/cuda_check.h"
#include "kernels/df11_codec.h"
#include "kernels/df11_decode_cuda.h"
#include "kernels/base/parallel.h"
#include "tests/kernels/df11_test_util.h"

namespace {

#define CKD(x)                                                                   \
  do {                                                                           \
    CUresult r = (x);                                                            \
    if (r != CUDA_SUCCESS) {                                                     \
      const char* s = "";                                                        \
      cuGetErrorString(r, &s);                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s);         \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

// One Qwen3-8B decoder layer: q, k, v, o, gate, up, down.
std::vector<uint16_t> MakeLayer(uint32_t seed) {
  const uint64_t h = 4096, kv = 1024, inter = 12288;
  const uint64_t n = h * h + 2 * kv * h + h * h + 3 * inter * h;
  std::vector<uint16_t> w(n);
  df11::ParallelFor(64, 0, [&](int64_t a, int64_t b, int) {
    for (int64_t part = a; part < b; ++part) {
      auto piece = df11::testing::GaussianWeights(n / 64 + 1, 0.02f, seed * 1000 + static_cast<uint32_t>(part));
      const uint64_t lo = n * part / 64, hi = n * (part + 1) / 64;
      std::copy(piece.begin(), piece.begin() + (hi - lo), w.begin() + lo);
    }
  });
  return w;
}

template <typename F>
float TimeMs(int warmup, int reps, int rotate, F&& launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) launch(i % rotate);
  CK(cudaDeviceSynchronize());
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    launch(i % rotate);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    times.push_back(ms);
  }
  CK(cudaGetLastError());
  return static_cast<float>(df11::Median(times));
}

}  // namespace

int main(int argc, char** argv) {
  std::string ref_ptx, json_path;
  int layers = 3, reps = 50;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reference-ptx" && i + 1 < argc) ref_ptx = argv[++i];
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--layers" && i + 1 < argc) layers = std::stoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else { std::fprintf(stderr, "usage: %s [--reference-ptx FILE] [--json FILE] [--layers N] [--reps N]\n", argv[0]); return 2; }
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU: %s, %d SMs\n", prop.name, prop.multiProcessorCount);

  // Roofline: device-to-device copy, bytes read + written.
  const size_t copy_bytes = size_t{2} << 30;
  void *src, *dst;
  CK(cudaMalloc(&src, copy_bytes));
  CK(cudaMalloc(&dst, copy_bytes));
  CK(cudaMemset(src, 0x5A, copy_bytes));
  const float copy_ms = TimeMs(3, 20, 1, [&](int) { CK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice)); });
  const double copy_tbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e12;
  CK(cudaFree(src));
  CK(cudaFree(dst));
  std::printf("D2D copy: %.3f TB/s (read + write)\n", copy_tbs);

  std::vector<df11::DeviceUnitBuffer> units;
  std::vector<std::vector<uint16_t>> originals;
  uint64_t n = 0, compressed = 0;
  for (int l = 0; l < layers; ++l) {
    auto words = MakeLayer(100 + l);
    auto enc = df11::EncodeUnit(words);
    if (!enc.ok()) { std::fprintf(stderr, "%s\n", enc.status().ToString().c_str()); return 1; }
    auto layout = df11::ValidateUnit(enc->view(), "layer");
    auto buf = df11::DeviceUnitBuffer::Upload(enc->view(), *layout);
    if (!buf.ok()) { std::fprintf(stderr, "%s\n", buf.status().ToString().c_str()); return 1; }
    n = words.size();
    compressed = enc->encoded_exponent.size() + enc->sign_mantissa.size() + enc->gaps.size() +
                 enc->output_positions.size() + enc->luts.size();
    units.push_back(std::move(buf).value());
    originals.push_back(std::move(words));
  }
  std::printf("layer: %llu weights, compressed %.4f of BF16\n", static_cast<unsigned long long>(n), compressed / (2.0 * n));
  uint16_t* out;
  CK(cudaMalloc(&out, n * 2));

  // Ours, checked bit for bit against the original weights first.
  for (int l = 0; l < layers; ++l) {
    CK(cudaMemset(out, 0xFF, n * 2));
    auto s = df11::LaunchDf11Decode(units[l].unit(), units[l].layout(), 0, n, out, nullptr);
    if (!s.ok()) { std::fprintf(stderr, "%s\n", s.ToString().c_str()); return 1; }
    std::vector<uint16_t> host(n);
    CK(cudaMemcpy(host.data(), out, n * 2, cudaMemcpyDeviceToHost));
    if (host != originals[l]) { std::fprintf(stderr, "MISMATCH: our kernel, layer %d\n", l); return 1; }
  }
  const float ours_ms = TimeMs(5, reps, layers, [&](int l) {
    auto s = df11::LaunchDf11Decode(units[l].unit(), units[l].layout(), 0, n, out, nullptr);
    if (!s.ok()) std::exit(1);
  });
  const double ours_gws = n / (ours_ms * 1e-3) / 1e9;
  const double ours_tbs = (compressed + 2.0 * n) / (ours_ms * 1e-3) / 1e12;
  std::printf("ours:      %.4f ms  %.1f G weights/s  %.2f TB/s moved = %.1f%% of copy roofline\n", ours_ms, ours_gws,
              ours_tbs, 100 * ours_tbs / copy_tbs);

  // Row gather: 64 embedding-like rows of 4096 from a layer (random access through the chunk index).
  const float rows_ms = TimeMs(5, reps, layers, [&](int l) {
    for (int r = 0; r < 64; ++r) {
      const uint64_t row = (static_cast<uint64_t>(r) * 2654435761u) % (n / 4096);
      auto s = df11::LaunchDf11Decode(units[l].unit(), units[l].layout(), row * 4096, row * 4096 + 4096, out + r * 4096, nullptr);
      if (!s.ok()) std::exit(1);
    }
  });
  std::printf("64 rows x 4096 by range decode: %.4f ms\n", rows_ms);

  double ref_ms = 0, ref_gws = 0;
  if (!ref_ptx.empty()) {
    CKD(cuInit(0));
    CUmodule mod;
    CUfunction fn;
    CKD(cuModuleLoad(&mod, ref_ptx.c_str()));
    CKD(cuModuleGetFunction(&fn, mod, "decode"));
    auto launch_ref = [&](int l) {
      const df11::DeviceUnit& u = units[l].unit();
      const uint32_t max_diff = u.max_chunk_elements;
      const unsigned smem = 512 * 4 + 4 + max_diff * 2;
      CKD(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smem)));
      const void* luts = u.luts; const void* codes = u.stream; const void* sm = u.sign_mantissa;
      const void* pos = u.chunk_starts; const void* gaps = u.gaps; void* o = out;
      int n_luts = u.num_luts, n_bytes = static_cast<int>(u.num_bytes), n_el = static_cast<int>(u.num_elements);
      void* args[] = {&luts, &codes, &sm, &pos, &gaps, &o, &n_luts, &n_bytes, &n_el};
      CKD(cuLaunchKernel(fn, u.num_chunks, 1, 1, 512, 1, 1, smem, nullptr, args, nullptr));
    };
    for (int l = 0; l < layers; ++l) {
      CK(cudaMemset(out, 0xFF, n * 2));
      launch_ref(l);
      std::vector<uint16_t> host(n);
      CK(cudaMemcpy(host.data(), out, n * 2, cudaMemcpyDeviceToHost));
      if (host != originals[l]) { std::fprintf(stderr, "MISMATCH: reference kernel on our encoding, layer %d\n", l); return 1; }
    }
    std::printf("reference kernel decodes our encoding bit-exactly (%d layers)\n", layers);
    ref_ms = TimeMs(5, reps, layers, launch_ref);
    ref_gws = n / (ref_ms * 1e-3) / 1e9;
    std::printf("reference: %.4f ms  %.1f G weights/s   ours/reference = %.2fx\n", ref_ms, ref_gws, ours_gws / ref_gws);
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << "{\n  \"gpu\": \"" << prop.name << "\",\n  \"sms\": " << prop.multiProcessorCount
      << ",\n  \"weights_per_layer\": " << n << ",\n  \"compressed_ratio\": " << compressed / (2.0 * n)
      << ",\n  \"d2d_copy_tb_s\": " << copy_tbs << ",\n  \"ours_ms\": " << ours_ms << ",\n  \"ours_g_weights_s\": " << ours_gws
      << ",\n  \"ours_tb_s_moved\": " << ours_tbs << ",\n  \"ours_fraction_of_copy_roofline\": " << ours_tbs / copy_tbs
      << ",\n  \"rows64x4096_ms\": " << rows_ms << ",\n  \"reference_ms\": " << ref_ms << ",\n  \"reference_g_weights_s\": " << ref_gws
      << ",\n  \"ours_over_reference\": " << (ref_gws > 0 ? ours_gws / ref_gws : 0) << ",\n  \"reps\": " << reps
      << ",\n  \"layers_rotated\": " << layers << "\n}\n";
  }
  CK(cudaFree(out));
  return 0;
}
