// The Hopper tensor-core linear on fixed-lanes tiles of 4 rows (cuda_gemm.h: WgmmaTileGemm;
// df11_lanes_cuda.h: Df11WgmmaTileGemm), built for sm_90a alone (kernels/CMakeLists.txt):
// y[T, N] = x[T, K] · W[N, K]^T (+ bias) (+ y) for 1 <= T <= 128, W read once; or a gate|up
// linear and its gated activation (WgmmaTileGemmGated: a CTA's rows are 32 gate rows and the same
// 32 up rows, summed through shared memory at the end).
//
// Geometry: a CTA owns 64 rows of W, the 16 tiles of 4 rows of fixed lanes (df11_lanes_fixed.h)
// that cover them, and every token. K goes in stages of 256 columns: one fixed-lanes block of
// every tile. A stage of W is 64 rows x 256 columns in four 64-column blocks of the 128-byte
// swizzle (cuda_wgmma.cuh), x's stage the same for 64 or 128 tokens (rows past T zero; a kernel
// for 1-64 tokens, another for 65-128). Two loaders fill
// W's stage with the same bits:
//   Bf16Loader copies W by cp.async (three stage buffers, two ahead of the multiply, or one);
//   Df11Loader decodes fixed lanes (df11_tile_decoder.cuh): warp w decodes its tiles' block, lane
//     l's entry of tile row r being the 16-byte chunk l % 8 of block l / 8 of row r (with two
//     stage buffers while the tensor cores multiply the previous stage; with one, CTAs overlap).
// x comes in by cp.async with W (BF16) or while W's stage decodes (DF11). The pipelines are the
// `config` of WgmmaTileGemm (cuda_gemm.h).
// Then every warpgroup g multiplies the stage's 64 rows by its kN = kTokens / warpgroups tokens
// (g kN ..) with 16 wgmma m64nNk16, one per 16 columns in column order: the same instructions on
// the same bits for both loaders, so a DF11 matrix and its BF16 twin give the same bits. The
// descriptors are built once a stage and stepped by an add (DescriptorAt), x's copies step a
// pointer: on one H200 that took configuration 5's instructions at 64 tokens from 69.8 M to 51.0 M
// (ncu, gate|up) and the BF16 twin's gate|up with its activation from 0.0635-0.0834 ms to
// 0.0603-0.0708 at 17-64 tokens, while the DF11 kernel, bound by its decoder's latency, did not
// move (0.1010-0.1221 against 0.1015-0.1232; bench/results/wgmma_tile_h200_descriptors_ab.log).
//
// Reduction order, fixed for a given K: per output, the stages in order, in each the 16 column steps
// in order (inside a step the hardware's order), fp32; then the bias, then y's old value, rounded
// to bf16 once. 8 warps issue m64n32k16 up to 64 tokens, 16 warps m64n16k16: that N does not change
// an output's bits is checked by the GPU tests (cuda_gemm.h, "Bits").
//
// Used by the model (cuda_gemm.h, WgmmaTileApplies) for the matrices of 4 rows per tile at 17-128
// tokens: DF11 fused, a BF16 W by this kernel or by cuBLAS where GemmHandle::CheckCublasBits found
// cuBLAS gives its bits (gate|up with its activation from 33 tokens). On the H100 (DF11 configurations 3
// and 4) the 8B step's gate|up with its activation ran 0.83-0.91x (BF16) and 0.95-0.97x (DF11) the
// time of what ran before, lm_head 0.98-0.99x and 0.86-0.87x (bench/results/wgmma_tile_h100_gated*.log;
// a decode step at batch 33 / 48 / 64 0.3-0.5 ms faster in BF16 and 0.1-0.3 in DF11:
// ab_h100_wgmma_tile.log). DF11 runs configuration 5 since (16 warps of one tile each: 32 decoding
// warps an SM at 64 registers, 28 bytes spilled; on an H200 gate|up with its activation 0.89x
// configurations 3 / 4 at 33-48 tokens and 0.92-0.94x Df11TileGemmGated at 17-32,
// wgmma_tile_h200_16_warps.log). With configurations 3 / 4 DF11 lost to Df11TileGemmGated
// (1.05-1.19x at 16-32 tokens, H100). The first measurements, at 33-64 tokens
// (wgmma_tile_h100_*.log of 2026-11-26, docs/df11-lanes.md, "The DF11 producer for wgmma"): the
// decoder, at 16 warps an SM, decodes 730-950 G weights/s, where Df11TileGemm's 24 warps reach
// 1.1-1.3 T at 8 tokens; the 3-CTA pipeline (config 0) fits 80 registers only by spilling and is no
// faster. With every matrix at 4 rows per tile the small ones (q|k|v, o, down: 64-96 CTAs) leave
// SMs idle. At 65-128 tokens (a 128-token x stage, wgmma_tile_h100_128_tokens.log) the BF16 twin
// runs 1.6-1.7x cuBLAS (each 64-row CTA reads x's 64 KB stage for W's 32 KB), so the model keeps
// cuBLAS there.
#include <cuda_runtime.h>

#include <algorithm>
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

using cuda::wgmma::DescriptorAt;
using cuda::wgmma::DescriptorLow;
using cuda::wgmma::Swizzled;

constexpr int kR = 4;                  // rows per fixed-lanes tile
constexpr int kTiles = 16;             // tiles per CTA
constexpr int kRows = 64;              // W rows per CTA: one wgmma M
constexpr int kCols = 256;             // columns per stage: one fixed-lanes block of each tile
constexpr int kBlockBytes = 64 * 128;  // one 64-column swizzled block of W's 64 rows
constexpr int kStageBytes = 4 * kBlockBytes;
constexpr int kMaxTokens = 128;  // cuda::kWgmmaTileMaxTokens
constexpr int kLastConfig = 5;   // configurations 0 .. kLastConfig (cuda_gemm.h, WgmmaTileGemm)

// x's stage for a kernel of kTokens tokens (64 or 128): four 64-column blocks of kTokens rows.
template <int kTokens>
constexpr int kXBlockBytes = kTokens * 128;
template <int kTokens>
constexpr int kXStageBytes = 4 * kXBlockBytes<kTokens>;

// Byte offset in a stage of the 16-byte chunk of row (or token) r, columns 8 c .. 8 c + 7 (c < 32),
// in blocks of kBlock bytes.
template <int kBlock = kBlockBytes>
__device__ __forceinline__ uint32_t StageOffset(int r, int c) {
  return static_cast<uint32_t>((c / 8) * kBlock) + Swizzled(r, c % 8);
}

// W's first rows of CTA c's shared rows 0 .. 31 and 32 .. 63: 64 c and 64 c + 32 for a plain
// linear; for a gate|up linear (inter > 0, inter % 32 == 0) gate rows 32 c .. and the same rows'
// up rows inter + 32 c .., so that the CTA holds both inputs of its 32 outputs of the activation.
struct CtaRows {
  int64_t first, second;
};
__device__ __forceinline__ CtaRows CtaRowsOf(int64_t cta, int64_t inter) {
  if (inter == 0) return {cta * kRows, cta * kRows + kRows / 2};
  return {cta * (kRows / 2), inter + cta * (kRows / 2)};
}

// W [n, k] BF16 (row-major, 16-byte aligned), copied by cp.async: kStages stage buffers, stage
// s + kStages - 1 copying while stage s multiplies (one buffer: copy, then multiply), kBlocks
// CTAs per SM. (An L2 evict-first hint on these copies, as TileGemm's, made the 16-warp kernel
// fault with an illegal instruction on the H100: not used.)
template <int kStagesT, int kBlocksT>
struct Bf16Loader {
  const uint16_t* w;
  int64_t n, k;
  int64_t inter = 0;  // a gate|up linear (W holds inter gate rows, then inter up rows): CtaRows
  static constexpr bool kAsync = true;
  static constexpr int kStages = kStagesT;
  static constexpr int kBlocks = kBlocksT;
  static constexpr bool kUncheckedInterior = false;
  struct State {
    int64_t row0, row1;  // W's rows of the CTA's rows 0 .. 31 and 32 .. 63
    int tid;
  };
  __device__ __forceinline__ State Begin(int64_t cta, int warp, int lane) const {
    const CtaRows rows = CtaRowsOf(cta, inter);
    return {rows.first, rows.second, warp * 32 + lane};
  }
  template <int kThreads>
  __device__ __forceinline__ void Issue(const State& st, uint8_t* stage, int64_t s) const {
#pragma unroll
    for (int i = st.tid; i < kRows * 32; i += kThreads) {
      const int r = i / 32, c = i % 32;
      const int64_t row = (r < kRows / 2 ? st.row0 : st.row1) + r % (kRows / 2), col = s * kCols + 8 * c;
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
  int64_t inter = 0;  // as Bf16Loader's
  static constexpr bool kAsync = false;
  static constexpr bool kPrefetch = kPrefetchT;  // one buffer: stage s + 1's raw words load while s decodes
  static constexpr int kStages = kStagesT;
  static constexpr int kBlocks = kBlocksT;
  // A CTA whose tiles are all full and whose stages are all whole runs without bounds checks.
  static constexpr bool kUncheckedInterior = true;

  // Warp w decodes the CTA's tiles w kTilesPerWarp .. (its shared rows); the first half of the
  // warps the tiles of W's rows CtaRowsOf(cta).first .., the others those of .second ...
  __device__ __forceinline__ typename Df11Loader::State Begin(int64_t cta, int warp, int lane) const {
    constexpr int kHalf = kTiles / kTilesPerWarp / 2;  // warps per half
    const CtaRows rows = CtaRowsOf(cta, inter);
    return this->BeginAt((warp < kHalf ? rows.first : rows.second) / kR + (warp % kHalf) * kTilesPerWarp, warp, lane);
  }

  // Decodes the fetched stage s into `stage`: lane l's entry of tile row r as the 16-byte chunk
  // of columns 8 l .. of the stage (entries past the matrix: zeros).
  template <bool kChecked>
  __device__ __forceinline__ void Store(typename Df11Loader::State& st, const typename Df11Loader::Fetched& f,
                                        uint8_t* stage, int64_t s) const {
    this->template Decode<kChecked, false, false>(st, f, s, [&](int p, int i, const uint4& v) {
      *reinterpret_cast<uint4*>(stage + StageOffset(kR * (st.warp * kTilesPerWarp + p) + i, st.lane)) = v;
    });
  }
};

template <typename Loader, int kTokens>
constexpr int SharedBytes() {
  constexpr int kStage = kStageBytes + kXStageBytes<kTokens>;  // W's and x's
  return Loader::kStages * kStage + 1024;                      // + room to align to 1024
}

// Grid: ceil(n / 64) CTAs of kWarps warps (a gate|up linear, ld.inter > 0: inter / 32), for
// 1 <= tokens <= kTokens; SharedBytes<Loader, kTokens>() of dynamic shared memory: W's kStages
// stage buffers, then x's. A gate|up linear writes y [T, inter] = Gated(act, g, u) of each output
// row's gate and up sums, each rounded as a plain linear rounds it (bias, no accumulate).
template <int kWarps, int kTokens, typename Loader>
__global__ void __launch_bounds__(kWarps * 32, Loader::kBlocks)
    WgmmaTileKernel(Loader ld, const uint16_t* __restrict__ x, const float* __restrict__ bias, int64_t n, int64_t k,
                    int tokens, bool accumulate, Activation act, uint16_t* __restrict__ y) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kThreads = kWarps * 32;
  constexpr int kN = kTokens / (kWarps / 4);  // tokens per warpgroup
  constexpr int kXBlock = kXBlockBytes<kTokens>, kXStage = kXStageBytes<kTokens>;
  constexpr int kStages = Loader::kStages;
  if constexpr (!Loader::kAsync) static_assert(!Loader::kPrefetch || kStages == 1, "prefetch: one buffer only");
  extern __shared__ uint8_t shared_raw[];
  uint8_t* wbuf = shared_raw + ((1024 - cuda::SharedAddress(shared_raw) % 1024) % 1024);
  uint8_t* xbuf = wbuf + kStages * kStageBytes;
  const int64_t inter = ld.inter;
  // A gated linear's dependent (the down projection) may launch only after the main loop (as
  // TileGemmGated's: at its start, its waiting CTAs would hold SM slots the loop needs).
  if (inter == 0) cuda::AllowDependents();
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = warp / 4;
  typename Loader::State st = ld.Begin(blockIdx.x, warp, lane);
  // x's rows past T are zeros in every buffer, written once.
  for (int i = tid; i < kStages * kTokens * 32; i += kThreads) {
    const int b = i / (kTokens * 32), t = (i / 32) % kTokens, c = i % 32;
    if (t >= tokens) {
      *reinterpret_cast<uint4*>(xbuf + b * kXStage + StageOffset<kXBlock>(t, c)) = make_uint4(0, 0, 0, 0);
    }
  }
  cuda::WaitPrevious();  // x, y (and a BF16 W decoded into a scratch) belong to earlier kernels
  const int64_t stages = (k + kCols - 1) / kCols;
  // Thread (warp, lane) copies x's chunk `lane` of tokens warp, warp + kWarps, ...: one swizzle
  // position for all of them (kWarps is a multiple of 8). The source steps by kWarps tokens, one
  // 64-bit add a copy (a product of token and k at each copy took ~15 instructions, 4 copies a
  // thread a stage at 64 tokens on 16 warps: bench/results/ncu_wgmma_tile_h200.log).
  const uint32_t x_offset = StageOffset<kXBlock>(warp, lane);
  const uint16_t* x_row = x + warp * k + 8 * lane;
  const int64_t x_step = int64_t{kWarps} * k;  // elements between a thread's tokens
  auto issue_x = [&](int64_t s) {
    uint8_t* xs = xbuf + (s % kStages) * kXStage + x_offset;
    const bool in = s * kCols + 8 * lane < k;
    const uint16_t* src = x_row + s * kCols;
#pragma unroll
    for (int i = 0; i < kTokens / kWarps; ++i) {
      if (warp + i * kWarps < tokens) cuda::CopyAsync16(xs + i * kWarps * 128, in ? src : x, in ? 16 : 0);
      src += x_step;  // never read once past the batch's tokens
    }
  };
  float d[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) d[i] = 0.0f;
  const bool multiplies = g * kN < tokens;  // the same for a whole warpgroup
  // The warpgroup as a value the compiler knows is the same for the warp (a shuffle from lane 0, as
  // CUTLASS's canonical_warp_group_idx does), so that x's descriptors live in uniform registers.
  const int g_uniform = __shfl_sync(0xffffffffu, g, 0);
  auto multiply = [&](int64_t s) {
    if (!multiplies) return;
    cuda::wgmma::FenceOperands(d);
    const uint32_t wa = DescriptorLow(cuda::SharedAddress(wbuf + (s % kStages) * kStageBytes));
    const uint32_t xa = DescriptorLow(cuda::SharedAddress(xbuf + (s % kStages) * kXStage) + g_uniform * kN * 128);
    cuda::wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < kCols / 16; ++kk) {
      const uint32_t at = 32 * (kk % 4);
      cuda::wgmma::Wgmma<kN>(d, DescriptorAt(wa, (kk / 4) * kBlockBytes + at),
                             DescriptorAt(xa, (kk / 4) * kXBlock + at), true);
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
  if (inter > 0) {
    cuda::AllowDependents();
    // The sums through shared memory (the stages are free once every warpgroup's wgmma is done):
    // red[token][row], then thread i takes output row i % 32 of token i / 32.
    constexpr int kPitch = kRows + 4;
    static_assert(kTokens * kPitch * 4 + 1024 <= SharedBytes<Loader, kTokens>(), "the sums fit");
    float* red = reinterpret_cast<float*>(wbuf);
    __syncthreads();
    if (multiplies) {
#pragma unroll
      for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = 16 * (warp % 4) + lane / 4 + 8 * (e / 2), token = g * kN + 8 * j + 2 * (lane % 4) + e % 2;
          red[token * kPitch + row] = d[4 * j + e];
        }
      }
    }
    __syncthreads();
    const int64_t row0 = int64_t{blockIdx.x} * (kRows / 2);  // the CTA's first output (gate row)
    for (int i = tid; i < kRows / 2 * tokens; i += kThreads) {
      const int row = i % (kRows / 2), token = i / (kRows / 2);
      const int64_t out = row0 + row;
      float gv = red[token * kPitch + row], uv = red[token * kPitch + kRows / 2 + row];
      if (bias != nullptr) {
        gv += bias[out];
        uv += bias[inter + out];
      }
      y[token * inter + out] = cuda::Gated(act, cuda::FloatToBf16(gv), cuda::FloatToBf16(uv));
    }
    return;
  }
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

// A plain linear (inter 0) or a gate|up linear and its activation (ld.inter = inter > 0).
struct Gate {
  Activation act = Activation::kSilu;
  int64_t inter = 0;
};

template <int kWarps, int kTokens, typename Loader>
Status Launch(Loader ld, const uint16_t* x, const float* bias, int64_t n, int64_t k, int64_t tokens, bool accumulate,
              Gate gate, uint16_t* y, GpuStream stream) {
  constexpr int kShared = SharedBytes<Loader, kTokens>();
  static_assert(kShared * Loader::kBlocks <= 227 * 1024, "shared memory of the CTAs an SM holds");
  auto* kernel = WgmmaTileKernel<kWarps, kTokens, Loader>;
  int device = 0, sms = 0;
  DF11_RETURN_IF_ERROR(cuda::CurrentDeviceSms(&device, &sms));
  DF11_RETURN_IF_ERROR(
      (cuda::AllowSharedBytes<WgmmaTileKernel<kWarps, kTokens, Loader>>(kShared, device, "WgmmaTileKernel")));
  ld.inter = gate.inter;
  const int64_t ctas = gate.inter > 0 ? gate.inter / (kRows / 2) : (n + kRows - 1) / kRows;
  cuda::LaunchDependentShared(kernel, dim3(static_cast<unsigned>(ctas)), dim3(kWarps * 32), kShared,
                              reinterpret_cast<cudaStream_t>(stream), ld, x, bias, n, k, static_cast<int>(tokens),
                              accumulate, gate.act, y);
  return cuda::CheckLaunch("WgmmaTileKernel");
}

// The BF16 loader's pipeline for `config` (cuda_gemm.h) in the kernel of kTokens tokens. At 128
// tokens a stage (W and x) is 96 KB: at most two stage buffers, or one at 2 CTAs per SM.
template <int kTokens>
Status LaunchBf16(int config, const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n,
                  int64_t k, bool accumulate, Gate gate, uint16_t* y, GpuStream stream) {
  // Stage buffers (one CTA an SM), and CTAs an SM with one buffer.
  constexpr int kBuffers = kTokens > 64 ? 2 : 3, kOneBufferBlocks = kTokens > 64 ? 2 : 3;
  using OneBuffer = Bf16Loader<1, kOneBufferBlocks>;
  using Buffers = Bf16Loader<kBuffers, 1>;
  switch (config) {
    case 1:
    case 3:
    case 4:
    case 5:
      return Launch<8, kTokens>(OneBuffer{w, n, k}, x, bias, n, k, tokens, accumulate, gate, y, stream);
    case 2:
      return Launch<16, kTokens>(Buffers{w, n, k}, x, bias, n, k, tokens, accumulate, gate, y, stream);
    default:
      return Launch<8, kTokens>(Buffers{w, n, k}, x, bias, n, k, tokens, accumulate, gate, y, stream);
  }
}

// The DF11 loader's pipeline for `config`; at 128 tokens config 0 (one buffer at 3 CTAs per SM)
// does not fit and runs as 3.
template <int kTokens>
Status LaunchDf11(int config, const uint16_t* x, const DeviceLanes& w, const uint8_t* sm, const float* bias,
                  int64_t tokens, bool accumulate, Gate gate, uint16_t* y, GpuStream stream) {
  const int64_t n = w.rows, k = w.cols;
  switch (config) {
    case 1:
      return Launch<8, kTokens>(Df11Loader<2, 2, 1>{{w, sm}}, x, bias, n, k, tokens, accumulate, gate, y, stream);
    case 2:
      return Launch<16, kTokens>(Df11Loader<1, 2, 1>{{w, sm}}, x, bias, n, k, tokens, accumulate, gate, y, stream);
    case 4:
      return Launch<8, kTokens>(Df11Loader<2, 1, 2, true>{{w, sm}}, x, bias, n, k, tokens, accumulate, gate, y, stream);
    case 3:
      return Launch<8, kTokens>(Df11Loader<2, 1, 2>{{w, sm}}, x, bias, n, k, tokens, accumulate, gate, y, stream);
    case 5:
      return Launch<16, kTokens>(Df11Loader<1, 1, 2>{{w, sm}}, x, bias, n, k, tokens, accumulate, gate, y, stream);
    default:
      if constexpr (kTokens > 64) {
        return Launch<8, kTokens>(Df11Loader<2, 1, 2>{{w, sm}}, x, bias, n, k, tokens, accumulate, gate, y, stream);
      } else {
        return Launch<8, kTokens>(Df11Loader<2, 1, 3>{{w, sm}}, x, bias, n, k, tokens, accumulate, gate, y, stream);
      }
  }
}

std::string Shape(int64_t tokens, int64_t n, int64_t k) {
  std::string s = "[";
  s += std::to_string(tokens) + ", " + std::to_string(k) + "] x [" + std::to_string(n) + ", " + std::to_string(k) +
       "]^T";
  return s;
}

bool Operands(const uint16_t* x, int64_t tokens, int64_t n, int64_t k, int config) {
  return tokens >= 1 && tokens <= kMaxTokens && n > 0 && n <= (int64_t{1} << 36) && k > 0 && k % 8 == 0 &&
         k <= (int64_t{1} << 24) && reinterpret_cast<uintptr_t>(x) % 16 == 0 && config >= 0 && config <= kLastConfig;
}

// A gate|up linear's rows: gate and up halves of whole CTAs.
bool GatedRows(int64_t inter) { return inter > 0 && inter % (kRows / 2) == 0; }

Status Bf16Linear(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
                  bool accumulate, Gate gate, uint16_t* y, GpuStream stream, int config, const char* name) {
  if (!Operands(x, tokens, n, k, config) || reinterpret_cast<uintptr_t>(w) % 16 != 0 ||
      (gate.inter > 0 && (!GatedRows(gate.inter) || n != 2 * gate.inter || accumulate))) {
    return InvalidArgument(std::string(name) + ": " + Shape(tokens, n, k) + " needs 1.." + std::to_string(kMaxTokens) +
                           " tokens, K a multiple of 8, 16-byte aligned x and W, configuration 0 to " +
                           std::to_string(kLastConfig) +
                           (gate.inter > 0 ? ", and 2 inter rows with inter a multiple of 32" : ""));
  }
  if (!cuda::WgmmaGemmAvailable()) {
    return FailedPrecondition(std::string(name) + ": needs a compute capability 9.0 GPU (sm_90a)");
  }
  if (tokens <= 64) return LaunchBf16<64>(config, x, w, bias, tokens, n, k, accumulate, gate, y, stream);
  return LaunchBf16<128>(config, x, w, bias, tokens, n, k, accumulate, gate, y, stream);
}

Status Df11Linear(const uint16_t* x, const DeviceLanes& w, const uint8_t* sign_mantissa, const float* bias,
                  int64_t tokens, bool accumulate, Gate gate, uint16_t* y, GpuStream stream, int config,
                  const char* name) {
  static_assert(kR == 4, "Df11WgmmaTileLanes (df11_lanes_cuda.h) names 4 rows per tile");
  if (!Df11WgmmaTileLanes(w) || w.words == nullptr || reinterpret_cast<uintptr_t>(sign_mantissa) % 8 != 0 ||
      sign_mantissa == nullptr || !Operands(x, tokens, w.rows, w.cols, config) ||
      (gate.inter > 0 && (!GatedRows(gate.inter) || w.rows != 2 * gate.inter))) {
    return InvalidArgument(
        std::string(name) + ": " + Shape(tokens, w.rows, w.cols) + " needs fixed lanes of 4 rows per tile, 1.." +
        std::to_string(kMaxTokens) + " tokens, K a multiple of 8, 16-byte aligned x, configuration 0 to " +
        std::to_string(kLastConfig) + (gate.inter > 0 ? ", and 2 inter rows with inter a multiple of 32" : ""));
  }
  if (!cuda::WgmmaGemmAvailable()) {
    return FailedPrecondition(std::string(name) + ": needs a compute capability 9.0 GPU (sm_90a)");
  }
  if (tokens <= 64) return LaunchDf11<64>(config, x, w, sign_mantissa, bias, tokens, accumulate, gate, y, stream);
  return LaunchDf11<128>(config, x, w, sign_mantissa, bias, tokens, accumulate, gate, y, stream);
}

}  // namespace

namespace cuda {

namespace {
// WgmmaTileApplies from min_tokens.
bool AppliesFrom(int64_t min_tokens, const uint16_t* x, int64_t tokens, int64_t n, int64_t k, int64_t max_tokens) {
  return tokens >= min_tokens && tokens <= std::min(max_tokens, kWgmmaTileMaxTokens) && n > 0 && k > 0 && k % 8 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && FixedRowsPerTile(n, k) == kR && WgmmaGemmAvailable();
}
}  // namespace

bool WgmmaTileApplies(const uint16_t* x, int64_t tokens, int64_t n, int64_t k, int64_t max_tokens) {
  return AppliesFrom(kWgmmaTileModelMinTokens, x, tokens, n, k, max_tokens);
}

bool WgmmaTileGatedApplies(const uint16_t* x, int64_t tokens, int64_t inter, int64_t k, int64_t max_tokens) {
  return GatedRows(inter) && AppliesFrom(kWgmmaTileGatedModelMinTokens, x, tokens, 2 * inter, k, max_tokens);
}

Status WgmmaTileGemm(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
                     bool accumulate, uint16_t* y, GpuStream stream, int config) {
  return Bf16Linear(x, w, bias, tokens, n, k, accumulate, Gate{}, y, stream, config, "WgmmaTileGemm");
}

Status WgmmaTileGemmGated(Activation act, const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens,
                          int64_t inter, int64_t k, uint16_t* out, GpuStream stream, int config) {
  if (inter <= 0) return InvalidArgument("WgmmaTileGemmGated: inter must be positive");
  return Bf16Linear(x, w, bias, tokens, 2 * inter, k, false, Gate{act, inter}, out, stream, config,
                    "WgmmaTileGemmGated");
}

}  // namespace cuda

Status Df11WgmmaTileGemm(const uint16_t* x, const DeviceLanes& w, const uint8_t* sign_mantissa, const float* bias,
                         int64_t tokens, bool accumulate, uint16_t* y, GpuStream stream, int config) {
  return Df11Linear(x, w, sign_mantissa, bias, tokens, accumulate, Gate{}, y, stream, config, "Df11WgmmaTileGemm");
}

Status Df11WgmmaTileGemmGated(Activation act, const uint16_t* x, const DeviceLanes& w, const uint8_t* sign_mantissa,
                              const float* bias, int64_t tokens, int64_t inter, uint16_t* out, GpuStream stream,
                              int config) {
  if (inter <= 0) return InvalidArgument("Df11WgmmaTileGemmGated: inter must be positive");
  return Df11Linear(x, w, sign_mantissa, bias, tokens, false, Gate{act, inter}, out, stream, config,
                    "Df11WgmmaTileGemmGated");
}

}  // namespace df11
