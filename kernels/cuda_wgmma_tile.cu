// The Hopper tensor-core linear on fixed-lanes tiles of 4 rows (cuda_gemm.h: WgmmaTileGemm;
// df11_lanes_cuda.h: Df11WgmmaTileGemm), built for sm_90a alone (kernels/CMakeLists.txt):
// y[T, N] = x[T, K] · W[N, K]^T (+ bias) (+ y) for 1 <= T <= 64, W read once.
//
// Geometry: a CTA owns 64 rows of W, the 16 tiles of 4 rows of fixed lanes (df11_lanes_fixed.h)
// that cover them, and every token. K goes in stages of 256 columns: one fixed-lanes block of
// every tile. A stage of W is 64 rows x 256 columns in four 64-column blocks of the 128-byte
// swizzle (cuda_wgmma.cuh), x's stage the same for 64 tokens (rows past T zero). Two loaders fill
// W's stage with the same bits:
//   Bf16Loader copies W by cp.async (three stage buffers, two ahead of the multiply, or one);
//   Df11Loader decodes fixed lanes (df11_tile_decoder.cuh): warp w decodes its tiles' block, lane
//     l's entry of tile row r being the 16-byte chunk l % 8 of block l / 8 of row r (with two
//     stage buffers while the tensor cores multiply the previous stage; with one, CTAs overlap).
// x comes in by cp.async with W (BF16) or while W's stage decodes (DF11). The pipelines are the
// `config` of WgmmaTileGemm (cuda_gemm.h).
// Then every warpgroup g multiplies the stage's 64 rows by its kN = 64 / warpgroups tokens
// (g kN ..) with 16 wgmma m64nNk16, one per 16 columns in column order: the same instructions on
// the same bits for both loaders, so a DF11 matrix and its BF16 twin give the same bits.
//
// Reduction order, fixed for given (warps: 8 or 16, K): per output, the stages in order, in each the 16
// column steps in order (inside a step the hardware's order), fp32; then the bias, then y's old
// value, rounded to bf16 once.
//
// A measured building block, not used by the model (docs/df11-lanes.md, "The DF11 producer for
// wgmma"). On the H100, the 4-row matrices of an 8B step at 33-64 tokens (bench/wgmma_tile_bench,
// bench/results/wgmma_tile_h100_*.log): the best DF11 pipeline (config 3) runs gate|up and lm_head
// at 0.93-1.07x Df11TileGemm, its BF16 twin at 0.87-1.07x TileGemm: the decoder, at 16 warps an
// SM, decodes 730-950 G weights/s, where Df11TileGemm's 24 warps reach 1.1-1.3 T at 8 tokens; the
// 3-CTA pipeline (config 0) fits 80 registers only by spilling and is no faster. With every matrix
// at 4 rows per tile the small ones (q|k|v, o, down: 64-96 CTAs) leave SMs idle.
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "kernels/cuda_gemm.h"
#include "kernels/cuda_ops_internal.cuh"
#include "kernels/cuda_wgmma.cuh"
#include "kernels/df11_lanes_cuda.h"
#include "kernels/df11_lanes_fixed.h"
#include "kernels/df11_tile_decoder.cuh"

namespace df11 {
namespace {

using cuda::wgmma::Descriptor;
using cuda::wgmma::Swizzled;

constexpr int kR = 4;                  // rows per fixed-lanes tile
constexpr int kTiles = 16;             // tiles per CTA
constexpr int kRows = 64;              // W rows per CTA: one wgmma M
constexpr int kCols = 256;             // columns per stage: one fixed-lanes block of each tile
constexpr int kBlockBytes = 64 * 128;  // one 64-column swizzled block of 64 rows (W) or 64 tokens (x)
constexpr int kStageBytes = 4 * kBlockBytes;
constexpr int kMaxTokens = 64;

// Byte offset in a stage of the 16-byte chunk of row (or token) r, columns 8 c .. 8 c + 7 (c < 32).
__device__ __forceinline__ uint32_t StageOffset(int r, int c) {
  return static_cast<uint32_t>((c / 8) * kBlockBytes) + Swizzled(r, c % 8);
}

// W [n, k] BF16 (row-major, 16-byte aligned), copied by cp.async: kStages stage buffers, stage
// s + kStages - 1 copying while stage s multiplies (one buffer: copy, then multiply), kBlocks
// CTAs per SM. (An L2 evict-first hint on these copies, as TileGemm's, made the 16-warp kernel
// fault with an illegal instruction on the H100: not used.)
template <int kStagesT, int kBlocksT>
struct Bf16Loader {
  const uint16_t* w;
  int64_t n, k;
  static constexpr bool kAsync = true;
  static constexpr int kStages = kStagesT;
  static constexpr int kBlocks = kBlocksT;
  static constexpr bool kUncheckedInterior = false;
  struct State {
    int64_t row0;
    int tid;
  };
  __device__ __forceinline__ State Begin(int64_t cta, int warp, int lane) const {
    return {cta * kRows, warp * 32 + lane};
  }
  template <int kThreads>
  __device__ __forceinline__ void Issue(const State& st, uint8_t* stage, int64_t s) const {
#pragma unroll
    for (int i = st.tid; i < kRows * 32; i += kThreads) {
      const int r = i / 32, c = i % 32;
      const int64_t row = st.row0 + r, col = s * kCols + 8 * c;
      const bool in = row < n && col < k;
      cuda::CopyAsync16(stage + StageOffset(r, c), in ? w + row * k + col : w, in ? 16 : 0);
    }
  }
};

// W as fixed lanes of 4 rows per tile (w.code == kFixed3); sign_mantissa as Df11Gemv's. Warp w
// decodes tiles w kTilesPerWarp .. of the CTA's 16 (fixed_lanes::TileDecoder, shared with
// Df11TileGemm). Two stage buffers: stage s decodes while the tensor cores multiply stage s - 1
// and stage s + 1's raw words load; one: fetch, decode, multiply, with kBlocks CTAs per SM
// overlapping each other.
template <int kTilesPerWarp, int kStagesT, int kBlocksT, bool kPrefetchT = false>
struct Df11Loader : fixed_lanes::TileDecoder<kR, kTilesPerWarp, kTiles> {
  static constexpr bool kAsync = false;
  static constexpr bool kPrefetch = kPrefetchT;  // one buffer: stage s + 1's raw words load while s decodes
  static constexpr int kStages = kStagesT;
  static constexpr int kBlocks = kBlocksT;
  // A CTA whose tiles are all full and whose stages are all whole runs without bounds checks.
  static constexpr bool kUncheckedInterior = true;

  // Decodes the fetched stage s into `stage`: lane l's entry of tile row r as the 16-byte chunk
  // of columns 8 l .. of the stage (entries past the matrix: zeros).
  template <bool kChecked>
  __device__ __forceinline__ void Store(typename Df11Loader::State& st, const typename Df11Loader::Fetched& f,
                                        uint8_t* stage, int64_t s) const {
    this->template Decode<kChecked, false>(st, f, s, [&](int p, int i, const uint4& v) {
      *reinterpret_cast<uint4*>(stage + StageOffset(kR * (st.warp * kTilesPerWarp + p) + i, st.lane)) = v;
    });
  }
};

template <typename Loader>
constexpr int SharedBytes() {
  return 2 * Loader::kStages * kStageBytes + 1024;  // W's and x's stage buffers, + room to align to 1024
}

// Grid: ceil(n / 64) CTAs of kWarps warps; SharedBytes<Loader>() of dynamic shared memory: W's
// kStages stage buffers, then x's.
template <int kWarps, typename Loader>
__global__ void __launch_bounds__(kWarps * 32, Loader::kBlocks)
    WgmmaTileKernel(Loader ld, const uint16_t* __restrict__ x, const float* __restrict__ bias, int64_t n, int64_t k,
                    int tokens, bool accumulate, uint16_t* __restrict__ y) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kThreads = kWarps * 32;
  constexpr int kN = kMaxTokens / (kWarps / 4);  // tokens per warpgroup
  constexpr int kStages = Loader::kStages;
  if constexpr (!Loader::kAsync) static_assert(!Loader::kPrefetch || kStages == 1, "prefetch: one buffer only");
  extern __shared__ uint8_t shared_raw[];
  uint8_t* wbuf = shared_raw + ((1024 - cuda::SharedAddress(shared_raw) % 1024) % 1024);
  uint8_t* xbuf = wbuf + kStages * kStageBytes;
  cuda::AllowDependents();
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = warp / 4;
  typename Loader::State st = ld.Begin(blockIdx.x, warp, lane);
  // x's rows past T are zeros in every buffer, written once.
  for (int i = tid; i < kStages * kMaxTokens * 32; i += kThreads) {
    const int b = i / (kMaxTokens * 32), t = (i / 32) % kMaxTokens, c = i % 32;
    if (t >= tokens) *reinterpret_cast<uint4*>(xbuf + b * kStageBytes + StageOffset(t, c)) = make_uint4(0, 0, 0, 0);
  }
  cuda::WaitPrevious();  // x, y (and a BF16 W decoded into a scratch) belong to earlier kernels
  const int64_t stages = (k + kCols - 1) / kCols;
  // Thread (warp, lane) copies x's chunk `lane` of tokens warp, warp + kWarps, ...: one swizzle
  // position for all of them (kWarps is a multiple of 8).
  const uint32_t x_offset = StageOffset(warp, lane);
  const uint16_t* x_row = x + warp * k + 8 * lane;
  auto issue_x = [&](int64_t s) {
    uint8_t* xs = xbuf + (s % kStages) * kStageBytes + x_offset;
    const bool in = s * kCols + 8 * lane < k;
    for (int t = warp; t < tokens; t += kWarps) {
      cuda::CopyAsync16(xs + (t - warp) * 128, in ? x_row + (t - warp) * k + s * kCols : x, in ? 16 : 0);
    }
  };
  float d[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) d[i] = 0.0f;
  const bool multiplies = g * kN < tokens;  // the same for a whole warpgroup
  auto multiply = [&](int64_t s) {
    if (!multiplies) return;
    cuda::wgmma::FenceOperands(d);
    const uint32_t wa = cuda::SharedAddress(wbuf + (s % kStages) * kStageBytes);
    const uint32_t xa = cuda::SharedAddress(xbuf + (s % kStages) * kStageBytes) + g * kN * 128;
    cuda::wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < kCols / 16; ++kk) {
      const uint32_t at = (kk / 4) * kBlockBytes + 32 * (kk % 4);
      cuda::wgmma::Wgmma<kN>(d, Descriptor(wa + at), Descriptor(xa + at), true);
    }
    cuda::wgmma::Commit();
    cuda::wgmma::FenceOperands(d);  // d stays where the wgmma writes it while the next stage decodes
  };
  auto run = [&](auto checked) {
    [[maybe_unused]] constexpr bool kChecked = decltype(checked)::value;
    if constexpr (Loader::kAsync && kStages == 1) {
      for (int64_t s = 0; s < stages; ++s) {
        cuda::wgmma::Wait<0>();  // this warpgroup's multiply of stage s - 1 is done
        __syncthreads();         // every multiply of stage s - 1 is done: the buffers refill
        ld.template Issue<kThreads>(st, wbuf, s);
        issue_x(s);
        cuda::CopyAsyncCommit();
        cuda::CopyAsyncWait<0>();
        cuda::wgmma::FenceProxyAsync();
        __syncthreads();  // stage s is in
        multiply(s);
      }
    } else if constexpr (Loader::kAsync) {
#pragma unroll
      for (int i = 0; i + 1 < kStages; ++i) {
        if (i < stages) {
          ld.template Issue<kThreads>(st, wbuf + i * kStageBytes, i);
          issue_x(i);
        }
        cuda::CopyAsyncCommit();
      }
      for (int64_t s = 0; s < stages; ++s) {
        cuda::CopyAsyncWait<kStages - 2>();
        cuda::wgmma::Wait<0>();  // this warpgroup's multiply of stage s - 1 is done
        cuda::wgmma::FenceProxyAsync();
        __syncthreads();  // stage s is in; every multiply of stage s - 1 is done: its buffers refill
        const int64_t next = s + kStages - 1;
        if (next < stages) {
          ld.template Issue<kThreads>(st, wbuf + (next % kStages) * kStageBytes, next);
          issue_x(next);
        }
        cuda::CopyAsyncCommit();
        multiply(s);
      }
    } else if constexpr (kStages == 1) {
      typename Loader::Fetched f{};
      if constexpr (Loader::kPrefetch) f = ld.template Fetch<kChecked>(st, 0);
      for (int64_t s = 0; s < stages; ++s) {
        // Without prefetch, stage s's raw words load while the CTA waits at the barrier. (Loading
        // them after it, for fewer live registers across the barrier, measured no better:
        // bench/results/wgmma_tile_h100_fetch_late.log.)
        typename Loader::Fetched next = f;
        if constexpr (Loader::kPrefetch) {
          if (s + 1 < stages) next = ld.template Fetch<kChecked>(st, s + 1);
        } else {
          f = ld.template Fetch<kChecked>(st, s);
        }
        cuda::wgmma::Wait<0>();  // this warpgroup's multiply of stage s - 1 is done
        __syncthreads();         // every multiply of stage s - 1 is done: the buffers refill
        issue_x(s);
        cuda::CopyAsyncCommit();
        ld.template Store<kChecked>(st, f, wbuf, s);
        f = next;
        cuda::CopyAsyncWait<0>();
        cuda::wgmma::FenceProxyAsync();
        __syncthreads();  // stage s is in
        multiply(s);
      }
    } else {
      issue_x(0);
      cuda::CopyAsyncCommit();
      typename Loader::Fetched f = ld.template Fetch<kChecked>(st, 0);
      for (int64_t s = 0; s < stages; ++s) {
        typename Loader::Fetched next = f;
        if (s + 1 < stages) next = ld.template Fetch<kChecked>(st, s + 1);  // loads while stage s decodes
        ld.template Store<kChecked>(st, f, wbuf + (s % kStages) * kStageBytes, s);
        f = next;
        cuda::wgmma::Wait<0>();  // this warpgroup's multiply of stage s - 1 is done
        cuda::CopyAsyncWait<0>();
        cuda::wgmma::FenceProxyAsync();
        __syncthreads();  // stage s is in; every multiply of stage s - 1 is done: its buffers refill
        if (s + 1 < stages) issue_x(s + 1);
        cuda::CopyAsyncCommit();
        multiply(s);
      }
    }
    cuda::wgmma::Wait<0>();  // inside each path: no register move may sit between a wgmma and its wait
    cuda::wgmma::FenceOperands(d);
  };
  if constexpr (Loader::kUncheckedInterior) {
    if (static_cast<int64_t>(blockIdx.x + 1) * kRows <= n && k % kCols == 0) {
      run(std::false_type{});
    } else {
      run(std::true_type{});
    }
  } else {
    run(std::true_type{});
  }
  cuda::CopyAsyncWait<0>();
  if (!multiplies) return;
  // d[4 j + e]: row 16 (warp % 4) + lane / 4 + 8 (e / 2), token g kN + 8 j + 2 (lane % 4) + e % 2.
  const int64_t row0 = int64_t{blockIdx.x} * kRows;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = row0 + 16 * (warp % 4) + lane / 4 + 8 * (e / 2);
      const int64_t token = g * kN + 8 * j + 2 * (lane % 4) + e % 2;
      if (row >= n || token >= tokens) continue;
      float v = d[4 * j + e];
      if (bias != nullptr) v += bias[row];
      if (accumulate) v += cuda::Bf16ToFloat(y[token * n + row]);
      y[token * n + row] = cuda::FloatToBf16(v);
    }
  }
#else
  __trap();  // built for sm_90a only
#endif
}

template <int kWarps, typename Loader>
Status Launch(const Loader& ld, const uint16_t* x, const float* bias, int64_t n, int64_t k, int64_t tokens,
              bool accumulate, uint16_t* y, GpuStream stream) {
  constexpr int kShared = SharedBytes<Loader>();
  auto* kernel = WgmmaTileKernel<kWarps, Loader>;
  int device = 0, sms = 0;
  DF11_RETURN_IF_ERROR(cuda::CurrentDeviceSms(&device, &sms));
  DF11_RETURN_IF_ERROR((cuda::AllowSharedBytes<WgmmaTileKernel<kWarps, Loader>>(kShared, device, "WgmmaTileKernel")));
  cuda::LaunchDependentShared(kernel, dim3(static_cast<unsigned>((n + kRows - 1) / kRows)), dim3(kWarps * 32), kShared,
                              reinterpret_cast<cudaStream_t>(stream), ld, x, bias, n, k, static_cast<int>(tokens),
                              accumulate, y);
  return cuda::CheckLaunch("WgmmaTileKernel");
}

std::string Shape(int64_t tokens, int64_t n, int64_t k) {
  std::string s = "[";
  s += std::to_string(tokens) + ", " + std::to_string(k) + "] x [" + std::to_string(n) + ", " + std::to_string(k) +
       "]^T";
  return s;
}

bool Operands(const uint16_t* x, int64_t tokens, int64_t n, int64_t k, int config) {
  return tokens >= 1 && tokens <= kMaxTokens && n > 0 && n <= (int64_t{1} << 36) && k > 0 && k % 8 == 0 &&
         k <= (int64_t{1} << 24) && reinterpret_cast<uintptr_t>(x) % 16 == 0 && config >= 0 && config <= 4;
}

}  // namespace

namespace cuda {

Status WgmmaTileGemm(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
                     bool accumulate, uint16_t* y, GpuStream stream, int config) {
  if (!Operands(x, tokens, n, k, config) || reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    return InvalidArgument("WgmmaTileGemm: " + Shape(tokens, n, k) + " needs 1.." + std::to_string(kMaxTokens) +
                           " tokens, K a multiple of 8, 16-byte aligned x and W, and configuration 0 to 4");
  }
  if (!WgmmaGemmAvailable()) return FailedPrecondition("WgmmaTileGemm: needs a compute capability 9.0 GPU (sm_90a)");
  switch (config) {
    case 1:
    case 3:
    case 4:
      return Launch<8>(Bf16Loader<1, 3>{w, n, k}, x, bias, n, k, tokens, accumulate, y, stream);
    case 2:
      return Launch<16>(Bf16Loader<3, 1>{w, n, k}, x, bias, n, k, tokens, accumulate, y, stream);
    default:
      return Launch<8>(Bf16Loader<3, 1>{w, n, k}, x, bias, n, k, tokens, accumulate, y, stream);
  }
}

}  // namespace cuda

Status Df11WgmmaTileGemm(const uint16_t* x, const DeviceLanes& w, const uint8_t* sign_mantissa, const float* bias,
                         int64_t tokens, bool accumulate, uint16_t* y, GpuStream stream, int config) {
  if (w.code != LaneCode::kFixed3 || w.rows_per_tile != kR || w.words == nullptr ||
      reinterpret_cast<uintptr_t>(sign_mantissa) % 8 != 0 || sign_mantissa == nullptr ||
      !Operands(x, tokens, w.rows, w.cols, config)) {
    return InvalidArgument("Df11WgmmaTileGemm: " + Shape(tokens, w.rows, w.cols) + " needs fixed lanes of 4 rows per " +
                           "tile, 1.." + std::to_string(kMaxTokens) +
                           " tokens, K a multiple of 8, 16-byte aligned x, and configuration 0 to 4");
  }
  if (!cuda::WgmmaGemmAvailable()) {
    return FailedPrecondition("Df11WgmmaTileGemm: needs a compute capability 9.0 GPU (sm_90a)");
  }
  switch (config) {
    case 1:
      return Launch<8>(Df11Loader<2, 2, 1>{{w, sign_mantissa}}, x, bias, w.rows, w.cols, tokens, accumulate, y, stream);
    case 2:
      return Launch<16>(Df11Loader<1, 2, 1>{{w, sign_mantissa}}, x, bias, w.rows, w.cols, tokens, accumulate, y,
                        stream);
    case 3:
      return Launch<8>(Df11Loader<2, 1, 2>{{w, sign_mantissa}}, x, bias, w.rows, w.cols, tokens, accumulate, y, stream);
    case 4:
      return Launch<8>(Df11Loader<2, 1, 2, true>{{w, sign_mantissa}}, x, bias, w.rows, w.cols, tokens, accumulate, y,
                       stream);
    default:
      return Launch<8>(Df11Loader<2, 1, 3>{{w, sign_mantissa}}, x, bias, w.rows, w.cols, tokens, accumulate, y, stream);
  }
}

}  // namespace df11
