// The tensor-core small-batch linear (cuda_gemm.h: TileGemm; df11_lanes_cuda.h: Df11TileGemm):
// y[T, N] = x[T, K] · W[N, K]^T for kTileGemmMinTokens <= T <= kTileGemmMaxTokens, W read once.
//
// Geometry, from rows_per_tile r (1, 2 or 4; fixed lanes' tiles, df11_lanes_fixed.h): a CTA of
// kWarps warps (8, or 16 for grids of one-row tiles that fit the GPU at once: WideCtas) owns
// kTiles = 16 tiles of r rows (BM = 16 r rows of W); warp w owns its tiles w * kTilesPerWarp +
// [0, kTilesPerWarp), kTilesPerWarp = 16 / kWarps. K goes in stages of KC = 1024 / r columns
// (one fixed-lanes block of every tile): each warp puts its tiles' part of the stage into shared
// memory as BF16 (the loader), the CTA syncs, then the warps multiply the stage by x with
// mma.m16n8k16 (W rows as M, tokens as N, fp32 accumulation), the BF16 loader's next stage
// already copying (cp.async).
// Two loaders fill the same stage with the same bits: Bf16Loader copies W, Df11Loader decodes
// fixed lanes (df11_lanes_fixed_decode.cuh). Everything after the stage is one code path, so a
// DF11 matrix and its BF16 twin give the same bits for the same r.
//
// Measured on the H100 and not kept (bench/results/ab_h100_prefetch_prepare_ahead.log): each warp
// asking L2 for its tiles' first stage (cp.async.bulk.prefetch.L2) before WaitPrevious, in both
// loaders (and the fused DF11 GEMV): the DF11 step at batch 8 / 64 9.49 / 16.99 ms against 8.78 /
// 15.77, BF16 at 64 12.10 against 11.66 (that build also had a PrepareAttention worth ~0.1 ms a
// step more, cuda_fused.cu).
//
// Reduction order, fixed for a given (r, T bucket, K, warps a CTA): warp w adds the 32-column groups w % kKSplit,
// + kKSplit, ... of every stage in order, each as two mma (columns 8q..8q+3 then 8q+4..8q+7 of the
// group for quad lane q: the k order inside an mma is the hardware's, the same on every call);
// the kKSplit warps' fp32 partial sums are then added in warp order, then the bias, then y's old
// value, and rounded to bf16 once.
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "kernels/cuda_gemm.h"
#include "kernels/cuda_ops_internal.cuh"
#include "kernels/df11_lanes_cuda.h"
#include "kernels/df11_lanes_fixed.cuh"
#include "kernels/df11_lanes_fixed.h"
#include "kernels/df11_lanes_fixed_decode.cuh"
#include "kernels/df11_tile_decoder.cuh"

namespace df11 {
namespace {

constexpr int kCtaTiles = 16;

template <int kR, int kW = 8>
struct Geometry {
  static constexpr int kWarps = kW;
  static constexpr int kTilesPerWarp = kCtaTiles / kW;
  static constexpr int kTiles = kCtaTiles;       // per CTA
  static constexpr int kRows = kTiles * kR;      // BM
  static constexpr int kCols = 1024 / kR;        // KC: columns per stage
  static constexpr int kPitch = kCols + 32;      // elements per shared row (64 bytes of skew)
  static constexpr int kStage = kRows * kPitch;  // elements per stage
  static constexpr int kMTiles = kRows / 16;
  static constexpr int kGroups = kCols / 32;  // 32-column groups per stage
};

// The first of warp w's kTilesPerWarp tiles in CTA c: tile c kTiles + w kTilesPerWarp, or for a
// gated linear (kGated: W holds inter gate rows, then inter up rows, and inter % (BM / 2) == 0)
// gate tile c kTiles / 2 + w kTilesPerWarp for warps 0 .. kWarps / 2 - 1 and the matching up tile
// (inter / kR further) for the others: CTA c's shared rows 0 .. BM / 2 - 1 are gate rows
// c BM / 2 .., rows BM / 2 .. BM - 1 the same rows' up rows.
template <int kR, int kW, bool kGated>
__device__ __forceinline__ int64_t WarpFirstTile(int64_t cta, int warp, int64_t inter) {
  constexpr int kTiles = Geometry<kR, kW>::kTiles, kTilesPerWarp = Geometry<kR, kW>::kTilesPerWarp;
  if constexpr (!kGated) {
    return cta * kTiles + warp * kTilesPerWarp;
  } else {
    constexpr int kHalf = kW / 2;
    const int64_t gate = cta * (kTiles / 2) + (warp % kHalf) * kTilesPerWarp;
    return warp < kHalf ? gate : inter / kR + gate;
  }
}

// Entry i (0..3) of a warp's tile in a stage: row i % r of the tile, columns 8 lane + 256 (i / r)
// of the stage; in shared memory at row (local tile) r + i % r.
template <int kR>
__device__ __forceinline__ uint16_t* EntryAddress(uint16_t* stage, int local_tile, int i, int lane) {
  return stage + (local_tile * kR + i % kR) * Geometry<kR>::kPitch + 8 * lane + 256 * (i / kR);
}
template <int kR>
__device__ __forceinline__ void StoreEntry(uint16_t* stage, int local_tile, int i, int lane, const uint4& v) {
  *reinterpret_cast<uint4*>(EntryAddress<kR>(stage, local_tile, i, lane)) = v;
}

// A loader is a kernel parameter (read-only: it stays in parameter space) with a per-warp State
// made by Begin. An asynchronous loader (kAsync) has Issue, which starts copying a stage into its
// buffer (cp.async; the kernel waits for it); the others have Fetch, which loads a stage's raw
// words into registers, and Store, which writes the stage as BF16.

// W [n, k] BF16, row-major, 16-byte aligned; entries past the matrix load as zeros. kStages stage
// buffers: stage s + kStages - 1 is copying (cp.async, L2 evict-first) while stage s multiplies.
// Measured on the H100 against the loader it replaced (registers, __ldcs, next stage prefetched
// into registers; bench/results/df11_gemv_h100_cpasync_ab.log, model_step_h100_cpasync_ab.log):
// the linears of a decode step at 32 tokens 7.32-7.38 ms against 7.79-7.80, 3-16 tokens
// unchanged; the model's BF16 step at batch 32 9.43-9.45 ms against 9.90-9.92. Without the
// evict-first policy the step at batch 4-8 lost 0.3 ms (W's lines evicted what the step's other
// kernels reuse from L2); 3 CTAs per SM (80 registers) was no faster than 2.
// Measured and not kept: from 17 tokens, for 1 or 2 rows per tile, 32-row CTAs with 256-column
// stages (3 of them; the same reduction order, so the same bits), so each x fragment feeds two m16
// tiles instead of one (with 16-row CTAs at 64 tokens a CTA reads 4 bytes of x from L2 per byte of
// W). The linears alone got faster, in df11_gemv_bench (8.06-8.29 ms a step at 64 tokens against
// 8.75-9.04; bench/results/df11_gemv_h100_bf16_row_blocks.log, with the other shapes tried) and
// in the model's own eager step under ncu (kernels 10.99 ms against 11.72 at batch 64), but the
// model's graph step did not: batch 64 11.37-11.47 ms against 11.33-11.42, batch 32 8.59-8.69
// against 8.43-8.50, nor with the next kernel allowed to launch only after the main loop, nor with
// 512-column stages (bench/results/ab_h100_bf16_row_blocks.log). Those steps run at the H100's
// 700 W power cap (SM clock ~1.7 GHz), unlike the kernels measured alone.
template <int kR, int kW = 8>
struct Bf16Loader {
  const uint16_t* w;
  int64_t n, k;
  static constexpr int kWarps = kW;
  static constexpr bool kAsync = true;
  static constexpr int kStages = 2;
  static constexpr int kMinBlocks = 2;
  // Its bounds checks cost nothing measurable (measured with the register loader it replaced).
  static constexpr bool kUncheckedInterior = false;

  struct State {
    int64_t row0;     // the warp's first tile's first row
    uint64_t policy;  // W is read once: its lines leave L2 first (as __ldcs's did)
    int warp, lane;
  };
  // tile0: the warp's first tile (WarpFirstTile).
  __device__ __forceinline__ State BeginAt(int64_t tile0, int warp, int lane) const {
    return {tile0 * kR, cuda::EvictFirstPolicy(), warp, lane};
  }
  template <bool kChecked>
  __device__ __forceinline__ void Issue(const State& st, uint16_t* stage, int64_t s) const {
    using G = Geometry<kR, kW>;
#pragma unroll
    for (int p = 0; p < G::kTilesPerWarp; ++p) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = st.row0 + p * kR + i % kR;
        const int64_t col = s * G::kCols + 8 * st.lane + 256 * (i / kR);
        const bool in = row < n && col < k;
        cuda::CopyAsync16(EntryAddress<kR>(stage, st.warp * G::kTilesPerWarp + p, i, st.lane),
                          in ? w + row * k + col : w, in ? 16 : 0, st.policy);
      }
    }
  }
};

// W as fixed lanes (w.code == kFixed3, w.rows_per_tile == kR); sign_mantissa as Df11Gemv's. The
// decoding is fixed_lanes::TileDecoder's (df11_tile_decoder.cuh), shared with the Hopper linear.
template <int kR, int kW = 8>
struct Df11Loader : fixed_lanes::TileDecoder<kR, Geometry<kR, kW>::kTilesPerWarp, kCtaTiles> {
  // A stage loads just before it decodes, into one stage buffer (two barriers a stage): registers
  // and shared memory for more warps per SM instead, 3 CTAs per SM (80 registers) at every token
  // count. Measured on the H100 (the linears of an 8B decode step at 8 tokens, before the
  // unchecked interior): 2 buffers, prefetched, 2 CTAs per SM 10.27-10.46 ms; 2 buffers, 3 CTAs
  // 10.03-10.15 ms; 1 buffer, 4 CTAs 9.98 ms. 2 CTAs per SM at 16-32 tokens, where 80 registers
  // spill up to 232 bytes with 4 rows per tile (no spills at 106-112 registers), was slower:
  // 10.1-10.6 / 11.0-11.3 ms at 16 / 32 tokens against 8.8-8.9 / 10.0-10.1
  // (bench/results/df11_gemv_h100_df11_minblocks2_ab.log). Two stage buffers, 1 or 4 tiles a warp,
  // 2 CTAs per SM at 64 tokens and 4 at 3-8 tokens were all slower again (docs/df11-lanes.md, "a
  // local optimum"; df11_gemv_h100_{df11_stages,tile_rows,df11_blocks}_ab.log). x's columns of a
  // stage copied into shared memory (cp.async, issued before the stage decodes; the fragments then
  // read there) with 4 rows per tile from 17 tokens was slower too: the step's DF11 linears
  // 12.42-12.50 ms at 64 tokens against 11.91-12.03 (bench/results/df11_gemv_h100_df11_staged_x.log).
  static constexpr int kWarps = kW;
  static constexpr bool kAsync = false;
  static constexpr int kStages = 1;
  static constexpr int kMinBlocks = kW == 16 ? 2 : 3;  // 64 or 80 registers
  // A CTA whose tiles are all full and whose stages are all whole runs without bounds checks.
  static constexpr bool kUncheckedInterior = true;

  // Decodes the fetched stage s into `stage` (kSkipRefills: the kernel's 1-2 token groups;
  // kSkipRare: SkipsRareChecks; TileDecoder::Decode).
  template <bool kChecked, bool kSkipRefills = false, bool kSkipRare = false>
  __device__ __forceinline__ void Store(typename Df11Loader::State& st, const typename Df11Loader::Fetched& f,
                                        uint16_t* stage, int64_t s) const {
    this->template Decode<kChecked, kSkipRefills, kSkipRare>(st, f, s, [&](int p, int i, const uint4& v) {
      StoreEntry<kR>(stage, st.warp * Geometry<kR, kW>::kTilesPerWarp + p, i, st.lane, v);
    });
  }
};

// Whether the DF11 loader of the kernel for kR rows per tile and kNT token groups decodes a block
// without rare bytes on entries that skip the rare-byte check (TileDecoder::Decode's kSkipRare: in
// the copy without refill checks at 1-2 token groups, a second copy of the entries at 4). Measured
// on one H200 against main, two rounds alternating (bench/results/df11_gemv_h200_skip_rare_ab.log,
// linears of a step one after another, and wgmma_tile_h200_skip_rare_ab.log): at 3-8 tokens the
// step's Df11TileGemm linears 6.19-6.36 ms against 6.28-6.42; at 16 tokens o_proj 0.0220-0.0223 ms
// against 0.0205 (one-row tiles spill 10 bytes more) while 4-row gate|up took 0.0812-0.0834 against
// 0.0836-0.0837; at 32 tokens with the second copy q|k|v / o / down / lm_head 0.0331-0.0340 /
// 0.0251-0.0253 / 0.0559-0.0561 / 0.563 ms against 0.0343-0.0344 / 0.0266-0.0271 / 0.0627-0.0628
// / 0.570-0.572; at 64 tokens the second copy lost (down_proj 0.0814-0.0818 against 0.0774-0.0777),
// as it did in the wgmma tile linear (gate|up with its activation 0.1055-0.1325 against
// 0.0989-0.1204 at 17-64 tokens), which keeps one copy.
template <int kR, int kNT>
constexpr bool SkipsRareChecks() {
  return kNT == 1 || kNT == 3 || kNT == 4 || (kNT == 2 && kR == 4);
}

// c += a · b, m16n8k16, bf16 in, fp32 accumulation (PTX fragment layout).
__device__ __forceinline__ void Mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Token groups per warp: the warps split T's kNT groups of 8 in kNT / kNtPerWarp sets and K in the
// rest (kKSplit). At 64 tokens (kNT = 8) a warp of a 1-row-per-tile CTA (one m-tile) takes 4
// groups, one of 2 or 4 rows per tile 2. Measured on the H100 (the linears of an 8B decode step
// at 64 tokens, BF16 TileGemm / cuBLAS; bench/results/df11_gemv_h100_tile64_v{22,42,84}.log):
// 2 and 2 1.243, 4 and 2 1.221 (kept), 8 and 4 1.343 (DF11 then needs 2 CTAs per SM: 15.1 ms
// against 12.2). At 9-16 tokens (kNT = 2) a warp of a 4-row-per-tile CTA takes one group: half
// the accumulators, so the DF11 loader's 80 registers spill 28 bytes instead of 212-220 (ptxas),
// for twice the shared-memory reads of W. Measured on the H100 (df11_gemv_bench, three visits,
// two runs each against the build before, bench/results/df11_gemv_h100_tile_warp_split_ab.log):
// at 16 tokens the DF11 gate|up 0.0842-0.0864 ms against 0.0917-0.0957 and lm_head 0.436-0.477
// against 0.487-0.508, BF16 unchanged (0.077-0.081 and 0.414-0.422); a step's DF11 linears at 16
// tokens 7.56-7.67 ms against 7.90-7.96 (visit 3). The same at 17-64 tokens (one group; or 2
// m-tiles x 2 groups, or 1 x 4, with no K split) spilled less too but lost: at 64 tokens the DF11
// gate|up 0.133-0.141 against 0.126-0.131, lm_head BF16 0.54-0.65 against 0.47-0.48. 4 groups a
// warp for 1-row tiles at 17-32 tokens moved nothing beyond run-to-run noise (visit 3).
template <int kR, int kNT>
constexpr int NtPerWarp() {
  if constexpr (kNT < 2) return kNT;
  // One-row tiles at 17-24 and 33-48 tokens (Dispatch): 3 groups a warp, K split 8 or 4 ways, where
  // the 32- and 64-token instances ran (4 groups a warp at 64 tokens hold 16 accumulators). Measured
  // on one H200 (bench/results/ab_h200_tile_nt36.log, two rounds alternating): DF11 step at batch
  // 17 / 33 / 40 / 48 8.60-8.61 / 10.01-10.03 / 10.30-10.32 / 10.61-10.65 ms against 8.66-8.70 /
  // 10.46-10.49 / 10.67-10.69 / 10.85-10.89, BF16 5.82-5.88 / 7.02-7.03 / 7.28-7.33 / 7.68-7.74
  // against 6.03-6.05 / 7.26-7.29 / 7.53-7.58 / 7.88-7.92; batches 16, 25, 32, 49 and 64 unchanged.
  if constexpr (kNT == 3 || kNT == 6) return 3;
  if constexpr (kNT == 8 && kR == 1) return 4;
  if constexpr (kNT == 2 && kR == 4) return 1;
  return 2;
}
// Shared bytes: the stage buffers, or the kKSplit warps' partial sums if more.
template <int kR, int kNT, typename Loader>
constexpr int SharedBytes() {
  using G = Geometry<kR, Loader::kWarps>;
  constexpr int split = G::kWarps / (kNT / NtPerWarp<kR, kNT>());
  constexpr int stages = Loader::kStages * G::kStage * 2, sums = split * 8 * kNT * (G::kRows + 4) * 4;
  return stages > sums ? stages : sums;
}

// kNT: tokens in groups of 8 (mma's N), T <= 8 kNT. Grid: ceil(n / BM) CTAs of kWarps warps,
// SharedBytes() of dynamic shared memory (Loader::kStages stage buffers, then the partial sums).
// kBlocks: CTAs per SM the registers are sized for (Loader::kMinBlocks, or 3 for the BF16 loader's
// 64-token grids that fill one wave at 3 but not at 2: LaunchTile).
// kGated: W [n = 2 inter, k] is a gate|up linear with inter % (BM / 2) == 0 (every CTA full; grid
// inter / (BM / 2)), and y [T, inter] gets Gated(act, g, u) of each row's two outputs, each rounded
// as the plain kernel rounds it: the bits of the plain kernel followed by GatedActivation (a row's
// sum does not depend on which shared row holds it). accumulate must be false. A gated linear
// allows its dependents (the down projection's tile linear) only after its main loop: with them
// allowed at its start, as the plain kernel does, the model's step was slower than with the
// activation in its own launch (H100, bench/results/ab_h100_gated_tile.log, two runs each: DF11
// at batch 8 / 32 8.61-8.73 / 12.07-12.23 ms against 8.32, 11.69-11.80 unfused and 8.20-8.23 /
// 11.45-11.61 late; BF16 at batch 64 12.32-12.34 against 11.46-11.51 unfused, 11.40-11.51 late).
template <int kR, int kNT, typename Loader, int kBlocks = Loader::kMinBlocks, bool kGated = false>
__global__ void __launch_bounds__(Loader::kWarps * 32, kBlocks)
    TileGemmKernel(Loader ld, const uint16_t* __restrict__ x, const float* __restrict__ bias, int64_t n, int64_t k,
                   int tokens, bool accumulate, uint16_t* __restrict__ y, Activation act, int64_t inter) {
  using G = Geometry<kR, Loader::kWarps>;
  constexpr int kWarps = G::kWarps;
  constexpr int kNtPerWarp = NtPerWarp<kR, kNT>();
  constexpr int kNSplit = kNT / kNtPerWarp;
  constexpr int kKSplit = kWarps / kNSplit;
  constexpr int kGroupsPerWarp = G::kGroups / kKSplit;
  static_assert(G::kGroups % kKSplit == 0, "every warp takes as many 32-column groups");
  extern __shared__ uint4 shared_raw[];
  uint16_t* shared = reinterpret_cast<uint16_t*>(shared_raw);
  if constexpr (!kGated) cuda::AllowDependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int ks = warp % kKSplit, ns = warp / kKSplit;
  typename Loader::State st = ld.BeginAt(WarpFirstTile<kR, kWarps, kGated>(blockIdx.x, warp, inter), warp, lane);
  cuda::WaitPrevious();  // x, y (and a BF16 W decoded into a scratch) belong to earlier kernels
  const int64_t stages = (k + G::kCols - 1) / G::kCols;
  float acc[G::kMTiles][kNtPerWarp][4];
#pragma unroll
  for (int mt = 0; mt < G::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNtPerWarp; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
    }
  }
  // Every stage, with or without bounds checks on W (kChecked); x's are always checked.
  auto run = [&](auto checked) {
    constexpr bool kChecked = decltype(checked)::value;
    if constexpr (Loader::kAsync) {
#pragma unroll
      for (int i = 0; i + 1 < Loader::kStages; ++i) {
        if (i < stages) ld.template Issue<kChecked>(st, shared + i * G::kStage, i);
        cuda::CopyAsyncCommit();
      }
    }
    for (int64_t s = 0; s < stages; ++s) {
      uint16_t* stage = shared + (s % Loader::kStages) * G::kStage;
      if constexpr (Loader::kAsync) {
        cuda::CopyAsyncWait<Loader::kStages - 2>();
        __syncthreads();  // stage s is in; every warp is past stage s - 1, whose buffer is free
        const int64_t next = s + Loader::kStages - 1;
        if (next < stages) ld.template Issue<kChecked>(st, shared + (next % Loader::kStages) * G::kStage, next);
        cuda::CopyAsyncCommit();
      } else {
        ld.template Store<kChecked, kNT <= 2, SkipsRareChecks<kR, kNT>()>(st, ld.template Fetch<kChecked>(st, s), stage,
                                                                          s);
        __syncthreads();
      }
#pragma unroll
      for (int gi = 0; gi < kGroupsPerWarp; ++gi) {
        const int grp = ks + gi * kKSplit;
        const int64_t col = s * G::kCols + 32 * grp + 8 * q;
        uint4 b[kNtPerWarp];
#pragma unroll
        for (int nt = 0; nt < kNtPerWarp; ++nt) {
          const int token = 8 * (ns * kNtPerWarp + nt) + g;
          b[nt] = token < tokens && col < k ? __ldg(reinterpret_cast<const uint4*>(x + token * k + col))
                                            : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int mt = 0; mt < G::kMTiles; ++mt) {
          const uint16_t* a = stage + (16 * mt + g) * G::kPitch + 32 * grp + 8 * q;
          const uint4 lo = *reinterpret_cast<const uint4*>(a), hi = *reinterpret_cast<const uint4*>(a + 8 * G::kPitch);
#pragma unroll
          for (int nt = 0; nt < kNtPerWarp; ++nt) {
            Mma(acc[mt][nt], lo.x, hi.x, lo.y, hi.y, b[nt].x, b[nt].y);
            Mma(acc[mt][nt], lo.z, hi.z, lo.w, hi.w, b[nt].z, b[nt].w);
          }
        }
      }
      if constexpr (!Loader::kAsync) __syncthreads();  // the buffer is free for the next stage
    }
  };
  if constexpr (Loader::kUncheckedInterior) {
    const bool interior = static_cast<int64_t>(blockIdx.x + 1) * G::kRows <= n && k % G::kCols == 0;
    if (interior) {
      run(std::false_type{});
    } else {
      run(std::true_type{});
    }
  } else {
    run(std::true_type{});
  }
  if constexpr (Loader::kAsync) cuda::CopyAsyncWait<0>();
  if constexpr (kGated) cuda::AllowDependents();
  __syncthreads();  // the stages are free: partial sums go there, [kKSplit][8 kNT tokens][BM + 4]
  constexpr int kRedPitch = G::kRows + 4;
  static_assert(kKSplit * 8 * kNT * kRedPitch * 4 <= SharedBytes<kR, kNT, Loader>(), "the partial sums fit");
  float* red = reinterpret_cast<float*>(shared);
#pragma unroll
  for (int mt = 0; mt < G::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNtPerWarp; ++nt) {
      const int token = 8 * (ns * kNtPerWarp + nt) + 2 * q, row = 16 * mt + g;
      float* r = red + (ks * 8 * kNT + token) * kRedPitch + row;
      r[0] = acc[mt][nt][0];
      r[kRedPitch] = acc[mt][nt][1];
      r[8] = acc[mt][nt][2];
      r[kRedPitch + 8] = acc[mt][nt][3];
    }
  }
  __syncthreads();
  // Shared row `row`'s sum for `token`: the kKSplit warps' partial sums in warp order, then W's
  // row `out`'s bias.
  auto sum = [&](int row, int token, int64_t out) {
    float v = red[token * kRedPitch + row];
#pragma unroll
    for (int p = 1; p < kKSplit; ++p) v += red[(p * 8 * kNT + token) * kRedPitch + row];
    if (bias != nullptr) v += bias[out];
    return v;
  };
  if constexpr (kGated) {
    constexpr int kHalf = G::kRows / 2;
    const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kHalf;  // the CTA's first gate row
    for (int i = threadIdx.x; i < kHalf * tokens; i += kWarps * 32) {
      const int row = i % kHalf, token = i / kHalf;
      const int64_t out = row0 + row;
      const uint16_t g = cuda::FloatToBf16(sum(row, token, out)),
                     u = cuda::FloatToBf16(sum(kHalf + row, token, inter + out));
      y[token * inter + out] = cuda::Gated(act, g, u);
    }
  } else {
    const int64_t row0 = static_cast<int64_t>(blockIdx.x) * G::kRows;
    for (int i = threadIdx.x; i < G::kRows * tokens; i += kWarps * 32) {
      const int row = i % G::kRows, token = i / G::kRows;
      const int64_t out = row0 + row;
      if (out >= n) continue;
      float v = sum(row, token, out);
      if (accumulate) v += cuda::Bf16ToFloat(y[token * n + out]);
      y[token * n + out] = cuda::FloatToBf16(v);
    }
  }
}

// A gated launch's activation and inter (TileGemmKernel's kGated); inter 0: a plain linear.
struct Gate {
  Activation act = Activation::kSilu;
  int64_t inter = 0;
};

template <int kR, int kNT, typename Loader, int kBlocks, bool kGated>
Status LaunchKernel(const Loader& ld, const uint16_t* x, const float* bias, int64_t n, int64_t k, int64_t tokens,
                    bool accumulate, uint16_t* y, Gate gate, int64_t ctas, int device, GpuStream stream) {
  constexpr int kSharedBytes = SharedBytes<kR, kNT, Loader>();
  auto* kernel = TileGemmKernel<kR, kNT, Loader, kBlocks, kGated>;
  DF11_RETURN_IF_ERROR((cuda::AllowSharedBytes<TileGemmKernel<kR, kNT, Loader, kBlocks, kGated>>(kSharedBytes, device,
                                                                                                 "TileGemmKernel")));
  cuda::LaunchDependentShared(kernel, dim3(static_cast<unsigned>(ctas)), dim3(Loader::kWarps * 32), kSharedBytes,
                              reinterpret_cast<cudaStream_t>(stream), ld, x, bias, n, k, static_cast<int>(tokens),
                              accumulate, y, gate.act, gate.inter);
  return cuda::CheckLaunch("TileGemmKernel");
}

template <int kR, int kNT, typename Loader, int kBlocks>
Status LaunchGatedOrNot(const Loader& ld, const uint16_t* x, const float* bias, int64_t n, int64_t k, int64_t tokens,
                        bool accumulate, uint16_t* y, Gate gate, int64_t ctas, int device, GpuStream stream) {
  if (gate.inter > 0) {
    return LaunchKernel<kR, kNT, Loader, kBlocks, true>(ld, x, bias, n, k, tokens, false, y, gate, ctas, device,
                                                        stream);
  }
  return LaunchKernel<kR, kNT, Loader, kBlocks, false>(ld, x, bias, n, k, tokens, accumulate, y, gate, ctas, device,
                                                       stream);
}

// The BF16 loader at 64 tokens runs at 3 CTAs per SM (80 registers) where its grid then fits one
// wave and did not at 2; the bits are the same (the same code, other registers). Measured on the
// H100 (bench/results/df11_gemv_h100_bf16_minblocks3_ab.log, two runs each, 64 tokens): q|k|v
// (384 CTAs) 0.0432-0.0444 ms against 0.0471-0.0476, gate|up (384) 0.0932-0.0935 against
// 0.1036-0.1048; but down (256 CTAs) 0.0812-0.0813 against 0.0685-0.0694 and lm_head (2,374)
// 0.509 against 0.472, so only such grids take it. The DF11 loader always runs at 3. A gated
// launch has the same grid as the plain one (n / BM CTAs).
template <int kR, int kNT, typename Loader>
Status LaunchTile(const Loader& ld, const uint16_t* x, const float* bias, int64_t n, int64_t k, int64_t tokens,
                  bool accumulate, uint16_t* y, Gate gate, GpuStream stream) {
  using G = Geometry<kR>;
  int device = 0, sms = 0;
  DF11_RETURN_IF_ERROR(cuda::CurrentDeviceSms(&device, &sms));
  const int64_t ctas = (n + G::kRows - 1) / G::kRows;
  if constexpr ((kNT == 8 || kNT == 6) && Loader::kMinBlocks == 2 && Loader::kWarps == 8) {
    if (ctas > 2 * int64_t{sms} && ctas <= 3 * int64_t{sms}) {
      return LaunchGatedOrNot<kR, kNT, Loader, 3>(ld, x, bias, n, k, tokens, accumulate, y, gate, ctas, device, stream);
    }
  }
  return LaunchGatedOrNot<kR, kNT, Loader, Loader::kMinBlocks>(ld, x, bias, n, k, tokens, accumulate, y, gate, ctas,
                                                               device, stream);
}

// Whether a linear of n rows at one row per tile runs CTAs of 16 warps of one tile (64 registers,
// 2 CTAs an SM; both loaders) instead of 8 warps of two: where its grid then fits the GPU at once
// (o_proj and down_proj of the 8B shape: 256 CTAs on 132 SMs), so each SM runs up to 32 warps
// where 8 warps of two tiles left it 16 (the DF11 loader needs warps: docs/df11-lanes.md). Measured
// on the H100 (bench/results/df11_gemv_h100_wide_ctas_ab.log, visit 2, two runs each against 8 warps
// everywhere): DF11 down_proj 0.0442-0.0447 / 0.0456-0.0458 / 0.0481-0.0483 / 0.0631 /
// 0.0794-0.0801 ms at 3 / 8 / 16 / 32 / 64 tokens against 0.0520-0.0529 / 0.0529-0.0536 /
// 0.0569-0.0575 / 0.0700-0.0708 / 0.0874-0.0880, o_proj 0.0197-0.0318 against 0.0231-0.0353, BF16
// within 3%; a step's DF11 linears 6.46-6.50 / 6.56-6.59 / 7.00 / 8.77-8.80 / 10.81-10.82 ms against
// 6.85-6.94 / 7.03-7.07 / 7.47-7.53 / 9.13-9.19 / 11.20-11.30, BF16 unchanged. Every 1-row grid at
// 16 warps lost on q|k|v (384 CTAs, which 2 CTAs an SM take in 1.5 rounds): DF11 0.0319-0.0334 ms at
// 3 tokens against 0.0276-0.0277 (visit 1), so it keeps 8 warps. The choice depends on the shape
// and the GPU only, so a DF11 matrix and its BF16 twin take the same; a gated linear takes the CTAs
// of the plain one of its n = 2 inter rows (gate warps the first half, up warps the second), so that
// the plain linear followed by the activation keeps the gated kernel's sums.
StatusOr<bool> WideCtas(int rows_per_tile, int64_t n) {
  if (rows_per_tile != 1) return false;
  int device = 0, sms = 0;
  DF11_RETURN_IF_ERROR(cuda::CurrentDeviceSms(&device, &sms));
  return (n + kCtaTiles - 1) / kCtaTiles <= 2 * int64_t{sms};
}

template <template <int, int> class Loader, typename Make>
Status Dispatch(int rows_per_tile, int64_t tokens, Make make, const uint16_t* x, const float* bias, int64_t n,
                int64_t k, bool accumulate, uint16_t* y, Gate gate, GpuStream stream) {
  auto by_tokens = [&]<int kR, int kW>(const Loader<kR, kW>& ld) {
    if (tokens <= 8) return LaunchTile<kR, 1>(ld, x, bias, n, k, tokens, accumulate, y, gate, stream);
    if (tokens <= 16) return LaunchTile<kR, 2>(ld, x, bias, n, k, tokens, accumulate, y, gate, stream);
    if constexpr (kR == 1) {  // one-row tiles: buckets of 24 and 48 tokens (NtPerWarp)
      if (tokens <= 24) return LaunchTile<kR, 3>(ld, x, bias, n, k, tokens, accumulate, y, gate, stream);
    }
    if (tokens <= 32) return LaunchTile<kR, 4>(ld, x, bias, n, k, tokens, accumulate, y, gate, stream);
    if constexpr (kR == 1) {
      if (tokens <= 48) return LaunchTile<kR, 6>(ld, x, bias, n, k, tokens, accumulate, y, gate, stream);
    }
    return LaunchTile<kR, 8>(ld, x, bias, n, k, tokens, accumulate, y, gate, stream);
  };
  switch (rows_per_tile) {
    case 4:
      return by_tokens(make.template operator()<4, 8>());
    case 2:
      return by_tokens(make.template operator()<2, 8>());
    default: {
      DF11_ASSIGN_OR_RETURN(const bool wide, WideCtas(rows_per_tile, n));
      if (wide) return by_tokens(make.template operator()<1, 16>());
      return by_tokens(make.template operator()<1, 8>());
    }
  }
}

std::string Shape(int64_t tokens, int64_t n, int64_t k) {
  std::string s = "[";
  s += std::to_string(tokens) + ", " + std::to_string(k) + "] x [" + std::to_string(n) + ", " + std::to_string(k) +
       "]^T";
  return s;
}

}  // namespace

namespace cuda {

bool TileGemmApplies(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t k) {
  return tokens >= kTileGemmMinTokens && tokens <= kTileGemmMaxTokens && k % 8 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

Status TileGemm(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
                bool accumulate, uint16_t* y, GpuStream stream, int rows_per_tile) {
  if (!TileGemmApplies(x, w, tokens, k) || n <= 0 || n > (int64_t{1} << 36) || k > (int64_t{1} << 24) ||
      (rows_per_tile != 0 && rows_per_tile != 1 && rows_per_tile != 2 && rows_per_tile != 4)) {
    return InvalidArgument("TileGemm: " + Shape(tokens, n, k) + " needs " + std::to_string(kTileGemmMinTokens) + ".." +
                           std::to_string(kTileGemmMaxTokens) +
                           " tokens, K a multiple of 8, 16-byte aligned x and W, and 0, 1, 2 or 4 rows per tile");
  }
  const int r = rows_per_tile != 0 ? rows_per_tile : FixedRowsPerTile(n, k);
  return Dispatch<Bf16Loader>(
      r, tokens,
      [&]<int kR, int kW>() {
        return Bf16Loader<kR, kW>{w, n, k};
      },
      x, bias, n, k, accumulate, y, Gate{}, stream);
}

int64_t TileGemmGatedRows(int rows_per_tile) { return Geometry<1>::kTiles / 2 * rows_per_tile; }

bool TileGemmGatedApplies(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t inter, int64_t k,
                          int rows_per_tile) {
  if (rows_per_tile != 0 && rows_per_tile != 1 && rows_per_tile != 2 && rows_per_tile != 4) return false;
  if (!TileGemmApplies(x, w, tokens, k) || inter <= 0 || inter > (int64_t{1} << 35) || k > (int64_t{1} << 24)) {
    return false;
  }
  const int r = rows_per_tile != 0 ? rows_per_tile : FixedRowsPerTile(2 * inter, k);
  return inter % TileGemmGatedRows(r) == 0;
}

Status TileGemmGated(Activation act, const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens,
                     int64_t inter, int64_t k, uint16_t* out, GpuStream stream, int rows_per_tile) {
  if (!TileGemmGatedApplies(x, w, tokens, inter, k, rows_per_tile)) {
    return InvalidArgument("TileGemmGated: " + Shape(tokens, 2 * inter, k) + " for " + std::to_string(inter) +
                           " gate|up pairs needs what TileGemm needs, 0, 1, 2 or 4 rows per tile (" +
                           std::to_string(rows_per_tile) + " given) and inter a multiple of 8 x the rows per tile");
  }
  const int r = rows_per_tile != 0 ? rows_per_tile : FixedRowsPerTile(2 * inter, k);
  return Dispatch<Bf16Loader>(
      r, tokens,
      [&]<int kR, int kW>() {
        return Bf16Loader<kR, kW>{w, 2 * inter, k};
      },
      x, bias, 2 * inter, k, false, out, Gate{act, inter}, stream);
}

}  // namespace cuda

Status LaunchFixedTileGemm(const uint16_t* x, const DeviceLanes& w, const uint8_t* sm, const float* bias,
                           int64_t tokens, bool accumulate, uint16_t* y, GpuStream stream, Activation act,
                           int64_t inter) {
  return Dispatch<Df11Loader>(
      w.rows_per_tile, tokens,
      [&]<int kR, int kW>() {
        return Df11Loader<kR, kW>{{w, sm}};
      },
      x, bias, w.rows, w.cols, accumulate, y, Gate{act, inter}, stream);
}

}  // namespace df11
