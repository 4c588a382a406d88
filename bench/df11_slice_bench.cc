// DF11 linears above the tile kernel's 32 tokens, decoded slice by slice into a ring that stays in
// L2: W's fixed lanes decode one slice of rows at a time into one of two small buffers, and cuBLAS
// multiplies that slice from L2 into its columns of y, on a second stream while the next slice
// decodes. Against today's path (decode the whole matrix into the scratch in HBM, then cuBLAS) and
// against BF16 cuBLAS on the whole matrix and on the same slices (the BF16 twin must run the same
// calls to keep the same bits). Qwen3-8B-shaped linears at 64 and 128 tokens, slices of 4, 8 and
// 16 MB of BF16, with and without a persisting-L2 access window on the ring. Each timed call reads
// a different copy of the weights (> 1 GB of copies). CUDA events, 3 warm-ups, median of 30.
// Checks that the sliced DF11 linear gives the sliced BF16 linear's bits, and says whether the
// sliced BF16 linear gives the whole one's. --json FILE writes the numbers. --tokens T,T,... runs
// those token counts instead of 64 and 128 (e.g. 2048: a prefill's GEMMs).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/cuda_check.h"
#include "bench/linear_timing.h"
#include "bench/read_roofline.h"
#include "kernels/cuda_gemm.h"
#include "kernels/df11_codec.h"
#include "kernels/df11_format.h"
#include "kernels/df11_lanes_cuda.h"
#include "kernels/df11_lanes_fixed.h"

namespace df11 {
namespace {

constexpr int64_t kSliceMb[] = {4, 8, 16};

void Check(const Status& s) { CheckOk("df11_slice_bench", s); }

struct Copy {
  cuda::DeviceBuffer plain;
  cuda::DeviceBuffer sign_mantissa;
  DeviceLanesBuffer fixed;
};

// Rows per slice for about `mb` MB of BF16, a multiple of 64 rows (whole tiles).
int64_t SliceRows(const StepLinear& s, int64_t mb) {
  const int64_t rows = (mb << 20) / (2 * s.k);
  return std::max<int64_t>(64, rows / 64 * 64);
}

int Main(int argc, char** argv) {
  const std::string json_path = JsonPathArg(argc, argv);
  std::vector<int64_t> tokens = {64, 128};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) != "--tokens") continue;
    tokens.clear();
    std::stringstream list(argv[i + 1]);
    for (std::string item; std::getline(list, item, ',');) tokens.push_back(std::atoll(item.c_str()));
  }
  if (tokens.empty() || std::any_of(tokens.begin(), tokens.end(), [](int64_t t) { return t < 1 || t > 8192; })) {
    std::fprintf(stderr, "df11_slice_bench: --tokens takes counts of 1..8192 separated by commas\n");
    return 2;
  }
  const int nt = static_cast<int>(tokens.size());
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const double roofline = ReadBandwidthBytesPerSecond();
  std::printf("GPU: %s; read roofline %.3f TB/s; L2 %d MB, persisting max %d MB\n", prop.name, roofline / 1e12,
              prop.l2CacheSize >> 20, prop.persistingL2CacheMaxSize >> 20);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  const std::vector<uint16_t> pool = WeightPool(rng, dist);
  cudaStream_t a = nullptr, b = nullptr;  // a: cuBLAS (and the timer's default stream joins it), b: decodes
  CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  cuda::GemmHandle gemm;
  Check(gemm.Init(reinterpret_cast<GpuStream>(a)));
  constexpr int kEvents = 4;
  cudaEvent_t start, end, decoded[kEvents], used[kEvents];
  CK(cudaEventCreateWithFlags(&start, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&end, cudaEventDisableTiming));
  for (int i = 0; i < kEvents; ++i) {
    CK(cudaEventCreateWithFlags(&decoded[i], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&used[i], cudaEventDisableTiming));
  }
  // Joins the legacy default stream (the timer's) to a and b before, and back after.
  auto fork = [&] {
    CK(cudaEventRecord(start, nullptr));
    CK(cudaStreamWaitEvent(a, start));
    CK(cudaStreamWaitEvent(b, start));
  };
  auto join = [&](cudaStream_t s) {
    CK(cudaEventRecord(end, s));
    CK(cudaStreamWaitEvent(nullptr, end));
  };
  std::string json = "{\"gpu\": \"" + std::string(prop.name) +
                     "\", \"read_roofline_tbs\": " + std::to_string(roofline / 1e12) + ", \"results\": [";
  bool first_row = true;
  // Per tokens: ms per decode step (36 layers + lm_head) of each variant; [slice size][persist].
  std::vector<double> step_bf16(nt), step_df11(nt);
  std::vector<std::array<double, 3>> step_bf16_sliced(nt);
  std::vector<std::array<std::array<double, 2>, 3>> step_serial(nt), step_overlap(nt);
  for (const StepLinear& s : kQwen3_8bStepLinears) {
    const uint64_t n = static_cast<uint64_t>(s.n) * s.k;
    std::vector<uint16_t> host(n);
    for (uint64_t i = 0; i < n; ++i) host[i] = pool[(i + s.n) % pool.size()];
    const int rpt = FixedRowsPerTile(s.n, s.k);
    auto fixed = BuildFixedLaneStreams(host, ExponentHistogram(host), s.n, s.k, rpt, s.name);
    Check(fixed.status());
    std::vector<uint8_t> sm(n);
    for (uint64_t i = 0; i < n; ++i) sm[i] = SignMantissaOf(host[i]);
    const int copies = static_cast<int>(std::max<uint64_t>(2, (uint64_t{1} << 30) / (fixed->bytes() + n) + 1));
    std::vector<Copy> c(copies);
    for (Copy& cp : c) {
      auto plain = cuda::DeviceBuffer::Allocate(2 * n, "plain");
      Check(plain.status());
      cp.plain = std::move(plain).value();
      CK(cudaMemcpy(cp.plain.data(), host.data(), 2 * n, cudaMemcpyHostToDevice));
      auto smb = cuda::DeviceBuffer::Allocate(n, "sign_mantissa");
      Check(smb.status());
      cp.sign_mantissa = std::move(smb).value();
      CK(cudaMemcpy(cp.sign_mantissa.data(), sm.data(), n, cudaMemcpyHostToDevice));
      auto upf = DeviceLanesBuffer::Upload(*fixed, nullptr);
      Check(upf.status());
      cp.fixed = std::move(upf).value();
    }
    // The whole-matrix scratch, and a ring of two slices of up to 16 MB.
    auto scratch = cuda::DeviceBuffer::Allocate(2 * n, "scratch");
    Check(scratch.status());
    auto ringb = cuda::DeviceBuffer::Allocate(2 * (kSliceMb[2] << 20) + 4096, "ring");
    Check(ringb.status());
    const int64_t max_t = *std::max_element(tokens.begin(), tokens.end());
    auto xb = cuda::DeviceBuffer::Allocate(max_t * s.k * 2, "x");
    auto yb = cuda::DeviceBuffer::Allocate(max_t * s.n * 2, "y");
    auto yb2 = cuda::DeviceBuffer::Allocate(max_t * s.n * 2, "y2");
    Check(xb.status());
    Check(yb.status());
    Check(yb2.status());
    std::vector<uint16_t> hx(max_t * s.k);
    for (auto& v : hx) v = Bf16(dist(rng) * 50);
    CK(cudaMemcpy(xb->data(), hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    const uint16_t* x = xb->as<uint16_t>();
    uint16_t *y = yb->as<uint16_t>(), *y2 = yb2->as<uint16_t>();
    uint16_t* ring = ringb->as<uint16_t>();

    auto decode_slice = [&](const Copy& cp, int64_t row0, int64_t rows, uint16_t* dst, cudaStream_t st) {
      const DeviceLanes l = TileSlice(cp.fixed.lanes(), row0 / rpt, (rows + rpt - 1) / rpt);
      Check(
          LaunchLanesDecode(l, {}, cp.sign_mantissa.as<uint8_t>() + row0 * s.k, dst, reinterpret_cast<GpuStream>(st)));
    };
    auto bf16_sliced = [&](const Copy& cp, int64_t t, int64_t slice, uint16_t* out) {
      for (int64_t r = 0; r < s.n; r += slice) {
        const int64_t rows = std::min(slice, s.n - r);
        Check(gemm.CublasGemm(x, cp.plain.as<uint16_t>() + r * s.k, t, rows, s.k, false, out + r, s.n));
      }
    };
    // DF11 slice by slice; overlap: decodes on b, cuBLAS on a, two ring buffers.
    auto df11_sliced = [&](const Copy& cp, int64_t t, int64_t slice, bool overlap, uint16_t* out) {
      cudaStream_t ds = overlap ? b : a;
      int i = 0;
      for (int64_t r = 0; r < s.n; r += slice, ++i) {
        const int64_t rows = std::min(slice, s.n - r);
        uint16_t* buf = ring + (i % 2) * (kSliceMb[2] << 19);
        if (overlap && i >= 2) CK(cudaStreamWaitEvent(b, used[i % 2]));
        decode_slice(cp, r, rows, buf, ds);
        if (overlap) {
          CK(cudaEventRecord(decoded[i % 2], b));
          CK(cudaStreamWaitEvent(a, decoded[i % 2]));
        }
        Check(gemm.CublasGemm(x, buf, t, rows, s.k, false, out + r, s.n));
        if (overlap) CK(cudaEventRecord(used[i % 2], a));
      }
    };
    auto set_persist = [&](bool on) {
      cudaStreamAttrValue v{};
      if (on) {
        const size_t bytes = std::min<size_t>(2 * (kSliceMb[2] << 20), prop.persistingL2CacheMaxSize);
        CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, bytes));
        v.accessPolicyWindow.base_ptr = ring;
        v.accessPolicyWindow.num_bytes = std::min<size_t>(2 * (kSliceMb[2] << 20), prop.accessPolicyMaxWindowSize);
        v.accessPolicyWindow.hitRatio = 1.0f;
        v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
        v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
      } else {
        v.accessPolicyWindow.num_bytes = 0;
      }
      CK(cudaStreamSetAttribute(a, cudaStreamAttributeAccessPolicyWindow, &v));
      CK(cudaStreamSetAttribute(b, cudaStreamAttributeAccessPolicyWindow, &v));
      if (!on) {  // the set-aside L2 goes back to normal lines
        CK(cudaCtxResetPersistingL2Cache());
        CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
      }
    };
    for (int ti = 0; ti < nt; ++ti) {
      const int64_t t = tokens[ti];
      const double bf16 = MedianMs(copies, [&](int i) {
        fork();
        Check(gemm.CublasGemm(x, c[i].plain.as<uint16_t>(), t, s.n, s.k, false, y));
        join(a);
      });
      const double df11 = MedianMs(copies, [&](int i) {
        fork();
        decode_slice(c[i], 0, s.n, scratch->as<uint16_t>(), a);
        Check(gemm.CublasGemm(x, scratch->as<uint16_t>(), t, s.n, s.k, false, y2));
        join(a);
      });
      step_bf16[ti] += s.per_step * bf16;
      step_df11[ti] += s.per_step * df11;
      std::printf("%-13s T=%3ld | BF16 cuBLAS %8.4f ms | DF11 decode all + cuBLAS %8.4f (%.3fx)\n", s.name,
                  static_cast<long>(t), bf16, df11, df11 / bf16);
      Check(gemm.CublasGemm(x, c[0].plain.as<uint16_t>(), t, s.n, s.k, false, y));
      CK(cudaDeviceSynchronize());
      std::vector<uint16_t> whole(t * s.n), part(t * s.n), fused(t * s.n);
      CK(cudaMemcpy(whole.data(), y, whole.size() * 2, cudaMemcpyDeviceToHost));
      for (int si = 0; si < 3; ++si) {
        const int64_t slice = SliceRows(s, kSliceMb[si]);
        const double bs = MedianMs(copies, [&](int i) {
          fork();
          bf16_sliced(c[i], t, slice, y);
          join(a);
        });
        step_bf16_sliced[ti][si] += s.per_step * bs;
        bf16_sliced(c[0], t, slice, y);
        CK(cudaStreamSynchronize(a));
        CK(cudaMemcpy(part.data(), y, part.size() * 2, cudaMemcpyDeviceToHost));
        std::printf("%-13s T=%3ld slice %4ld rows (%2ld MB) | BF16 sliced %8.4f (%.3fx whole, bits %s whole)\n", s.name,
                    static_cast<long>(t), static_cast<long>(slice), static_cast<long>(kSliceMb[si]), bs, bs / bf16,
                    part == whole ? "same as" : "DIFFER from");
        for (int persist = 0; persist < 2; ++persist) {
          set_persist(persist != 0);
          double ms[2];
          for (int overlap = 0; overlap < 2; ++overlap) {
            ms[overlap] = MedianMs(copies, [&](int i) {
              fork();
              df11_sliced(c[i], t, slice, overlap != 0, y2);
              join(a);
            });
            df11_sliced(c[0], t, slice, overlap != 0, y2);
            CK(cudaStreamSynchronize(a));
            CK(cudaMemcpy(fused.data(), y2, fused.size() * 2, cudaMemcpyDeviceToHost));
            if (fused != part) std::printf("  BITS DIFFER: DF11 sliced vs BF16 sliced (overlap %d)\n", overlap);
          }
          step_serial[ti][si][persist] += s.per_step * ms[0];
          step_overlap[ti][si][persist] += s.per_step * ms[1];
          std::printf("    persist %d | DF11 sliced serial %8.4f (%.3fx BF16 sliced), overlapped %8.4f (%.3fx)\n",
                      persist, ms[0], ms[0] / bs, ms[1], ms[1] / bs);
          json += std::string(first_row ? "" : ",") + "\n  {\"linear\": \"" + s.name +
                  "\", \"tokens\": " + std::to_string(t) + ", \"slice_rows\": " + std::to_string(slice) +
                  ", \"persist\": " + std::to_string(persist) + ", \"bf16_cublas_ms\": " + std::to_string(bf16) +
                  ", \"bf16_sliced_ms\": " + std::to_string(bs) +
                  ", \"df11_decode_all_cublas_ms\": " + std::to_string(df11) +
                  ", \"df11_sliced_serial_ms\": " + std::to_string(ms[0]) +
                  ", \"df11_sliced_overlap_ms\": " + std::to_string(ms[1]) + "}";
          first_row = false;
        }
        set_persist(false);
      }
    }
  }
  std::printf("\nlinears of one decode step (36 layers + lm_head), ms:\n");
  for (int ti = 0; ti < nt; ++ti) {
    std::printf("  T=%ld: BF16 cuBLAS %.3f, DF11 decode all + cuBLAS %.3f (%.3fx)\n", static_cast<long>(tokens[ti]),
                step_bf16[ti], step_df11[ti], step_df11[ti] / step_bf16[ti]);
    for (int si = 0; si < 3; ++si) {
      std::printf(
          "    %2ld MB slices: BF16 %.3f (%.3fx whole); DF11 serial %.3f / %.3f persisting, overlapped %.3f / "
          "%.3f persisting (best %.3fx BF16 sliced, %.3fx BF16 whole)\n",
          static_cast<long>(kSliceMb[si]), step_bf16_sliced[ti][si], step_bf16_sliced[ti][si] / step_bf16[ti],
          step_serial[ti][si][0], step_serial[ti][si][1], step_overlap[ti][si][0], step_overlap[ti][si][1],
          std::min({step_serial[ti][si][0], step_serial[ti][si][1], step_overlap[ti][si][0], step_overlap[ti][si][1]}) /
              step_bf16_sliced[ti][si],
          std::min({step_serial[ti][si][0], step_serial[ti][si][1], step_overlap[ti][si][0], step_overlap[ti][si][1]}) /
              step_bf16[ti]);
    }
  }
  json += "\n]}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("df11_slice_bench", df11::Main, argc, argv); }
