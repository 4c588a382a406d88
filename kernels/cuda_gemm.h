// BF16 GEMM through cuBLAS for the linear layers: y[T, N] = x[T, K] · W[N, K]^T (+ y when
// accumulate, used to add a broadcast bias), BF16 in and out, FP32 accumulation
// (cublasGemmEx, CUBLAS_COMPUTE_32F as PyTorch uses, default algorithm). Determinism and bit-identity:
// the handle owns a fixed workspace and one stream, so the same shapes and pointer alignments
// always run the same kernel; callers keep W 256-byte aligned wherever it lives (its own
// allocation or a slice of the decode scratch) so a DF11 weight and its BF16 twin give the same
// bits.
// Compiles without nvcc; defined only when DF11_HAVE_CUDA. Thread-safety: one user at a time.
#pragma once

#include <bitset>
#include <cstdint>
#include <vector>

#include "kernels/cuda_ops.h"

namespace df11::cuda {

// The small-batch linear (cuda_gemv.cu): y[T, N] = x[T, K] · W[N, K]^T (+ bias [N] fp32 holding bf16
// values) (+ y's old value when accumulate), fp32 accumulation rounded to bf16 once, for
// 1 <= T <= kGemvMaxTokens. Decode steps read every weight once per step; on an H100 this beats
// cuBLAS on every linear at 1-2 tokens (1.03-1.33x), is mixed at 3-4 (0.81-1.97x) and loses at 8
// (bench/results/gemv_h100.log).
// Deterministic: a fixed order per row, set by (N, K, T) alone (cuda_gemv.cu; at 1 token a sum splits
// at GemvSplitChunk(N, K), df11_lanes_fixed.h, as the fused DF11 GEMV's does).
inline constexpr int64_t kGemvMaxTokens = 4;
// Whether Gemv takes these operands: T in [1, kGemvMaxTokens], K % 8 == 0, x and W 16-byte aligned.
bool GemvApplies(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t k);
// INVALID_ARGUMENT (naming the shapes) where GemvApplies is false. rows_per_warp: 1, 2 or 4 output
// rows per warp (bench/gemv_bench measures them); 0 lets the shape choose.
Status Gemv(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
            bool accumulate, uint16_t* y, GpuStream stream, int rows_per_warp = 0);
// A gate|up linear and its gated activation in one launch: W [2 inter, K] holds the gate rows,
// then the up rows (bias, if any, [2 inter] alike); out[T, inter] = bf16(bf16(act(g)) * u) with
// g, u the rows' outputs as Gemv rounds them. The bits of Gemv into [T, 2 inter] followed by
// GatedActivation (each row's sum is Gemv's whatever rows a warp owns); one launch fewer and no
// [T, 2 inter] intermediate. Operands as Gemv's (GemvApplies); INVALID_ARGUMENT otherwise.
Status GemvGated(Activation act, const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens,
                 int64_t inter, int64_t k, uint16_t* out, GpuStream stream);

// The tensor-core small-batch linear (cuda_tile_gemm.cu): y[T, N] = x[T, K] · W[N, K]^T (+ bias
// [N] fp32) (+ y's old value when accumulate), fp32 accumulation rounded to bf16 once, for
// kTileGemmMinTokens <= T <= kTileGemmMaxTokens. W goes through shared memory in the geometry of
// fixed lanes with rows_per_tile rows per tile (0: FixedRowsPerTile(n, k), what a DF11 model's
// fixed lanes use), so the fused DF11 linear (Df11TileGemm, df11_lanes_cuda.h) on the same tiles
// gives the same bits. Deterministic: the order depends on (rows_per_tile, T's bucket of 8, 16,
// 32 or 64 tokens (one row per tile: 8, 16, 24, 32, 48 or 64), K) only. On an H100 it beats Gemv from 3 tokens and cuBLAS up to 32 (0.94-0.96x
// there) and loses to it at 33-64 (1.18x: bench/results/df11_gemv_h100_tile64_final.log). From 2 tokens since the
// fused DF11 tile linear got faster than the fused 2-token GEMV (docs/df11-lanes.md, "The tile linear from 2 tokens"). The
// range still goes to 64 because the BF16 twin must run what a DF11 model runs, and there the
// fused DF11 linear is 12.2 ms a step against 16.7 for decoding into a scratch then cuBLAS: a
// DF11 step at 64 tokens gains ~4 ms, a BF16 step loses ~2.3 (docs/df11-lanes.md).
inline constexpr int64_t kTileGemmMinTokens = 2;
inline constexpr int64_t kTileGemmMaxTokens = 64;
// Whether TileGemm takes these operands: T in [kTileGemmMinTokens, kTileGemmMaxTokens], K % 8 == 0,
// x and W 16-byte aligned.
bool TileGemmApplies(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t k);
// Asynchronous, launched as a dependent. INVALID_ARGUMENT (naming the shapes) where
// TileGemmApplies is false or rows_per_tile is not 0, 1, 2 or 4.
Status TileGemm(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
                bool accumulate, uint16_t* y, GpuStream stream, int rows_per_tile = 0);
// TileGemm of a gate|up linear and its gated activation in one launch, as GemvGated is Gemv's: W
// [2 inter, K] holds the gate rows, then the up rows (bias, if any, [2 inter] alike); out[T, inter]
// = bf16(bf16(act(g)) * u) with g, u the rows' outputs as TileGemm rounds them with the same rows
// per tile: the bits of TileGemm into [T, 2 inter] followed by GatedActivation, with one launch
// fewer and no [T, 2 inter] intermediate. A CTA takes half its rows from the gate rows and half
// from the matching up rows, so inter must be a multiple of TileGemmGatedRows(rows per tile).
int64_t TileGemmGatedRows(int rows_per_tile);
// TileGemmApplies, inter > 0 and inter % TileGemmGatedRows(r) == 0 for r = rows_per_tile, or
// FixedRowsPerTile(2 inter, k) if 0.
bool TileGemmGatedApplies(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t inter, int64_t k,
                          int rows_per_tile = 0);
// Asynchronous, launched as a dependent. INVALID_ARGUMENT where TileGemmGatedApplies is false.
Status TileGemmGated(Activation act, const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens,
                     int64_t inter, int64_t k, uint16_t* out, GpuStream stream, int rows_per_tile = 0);

// The Hopper tensor-core linear (cuda_wgmma_gemm.cu; sm_90a, so compute capability 9.0 GPUs only):
// y[T, N] = x[T, K] · W[N, K]^T (+ bias) (+ y) for 1 <= T <= kWgmmaGemmMaxTokens, BF16 W read once,
// 128 rows of W a CTA multiplied by wgmma, K split where the rows give fewer CTAs than SMs (fp32
// partial sums in `workspace`, WgmmaGemmWorkspaceFloats, added in split order). Deterministic.
// Not yet used by the model (a measured building block: bench/wgmma_bench). bias: [n] fp32 or
// null; accumulate: y's old value joins the sum. x, W 16-byte aligned, K % 8 == 0.
inline constexpr int64_t kWgmmaGemmMaxTokens = 128;
bool WgmmaGemmAvailable();  // this GPU runs sm_90a code
int64_t WgmmaGemmWorkspaceFloats(int64_t tokens, int64_t n, int64_t k);
// Asynchronous, launched as a dependent. INVALID_ARGUMENT for other shapes or no workspace,
// FAILED_PRECONDITION on a GPU that is not compute capability 9.0.
Status WgmmaGemm(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
                 bool accumulate, uint16_t* y, float* workspace, GpuStream stream);

// The Hopper tensor-core linear on the tiles of fixed lanes with 4 rows per tile
// (cuda_wgmma_tile.cu; sm_90a): y[T, N] = x[T, K] · W[N, K]^T (+ bias [N] fp32) (+ y) for
// 1 <= T <= kWgmmaTileMaxTokens, 64 rows of W a CTA, K in stages of 256 columns multiplied by
// wgmma (one kernel for 1-64 tokens, another for 65-128: a stage of x holds 64 or 128 tokens).
// The fused DF11 linear Df11WgmmaTileGemm (df11_lanes_cuda.h) runs the same instructions on the
// same stage bits: same x, bias and W give the same bits, for configurations of the same warps.
// `config` (the pipeline; bench/wgmma_tile_bench measures them): 0: 8 warps, three stage
// buffers (BF16) or one at 3 CTAs per SM (DF11); 1: 8 warps, one buffer at 3 CTAs per SM (BF16) or
// two (DF11); 2: 16 warps, three (BF16) or two (DF11) buffers; 3: as 1, but DF11 with one buffer at
// 2 CTAs per SM; 4: as 3, stage s + 1's raw words loading while stage s decodes; 5: DF11 16 warps
// of one tile each, one buffer at 2 CTAs per SM (32 decoding warps an SM where 3 has 16), BF16 as
// 3. Above 64 tokens a stage (W and x) is 96 KB: three buffers become two, 3 CTAs per SM two, and
// DF11's configuration 0 runs as 3.
// Bits: every configuration adds, for each output, the same 16-column wgmma steps in column order
// on the same stage bits. Those of 8 warps (0, 1, 3, 4 and BF16's 5) issue wgmma m64n32k16 up to
// 64 tokens, those of 16 warps (2, DF11's 5) m64n16k16, each warpgroup a quarter of the tokens. That
// an output's bits do not depend on the N of the wgmma that computes it is not in NVIDIA's
// documentation; the GPU tests check it for the pairs the model runs (DF11 5 against BF16 3 at
// 1-128 tokens, tests/kernels/df11_lanes_test.cc) and wgmma_tile_bench on every shape it times
// (bench/results/wgmma_tile_h200_16_warps.log: 0 outputs differ at 16-64 tokens).
// Asynchronous, launched as a dependent. INVALID_ARGUMENT for other shapes or alignments (x, W
// 16-byte aligned, K % 8 == 0), FAILED_PRECONDITION on a GPU that is not compute capability 9.0.
inline constexpr int64_t kWgmmaTileMaxTokens = 128;
Status WgmmaTileGemm(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
                     bool accumulate, uint16_t* y, GpuStream stream, int config = 0);
// WgmmaTileGemm of a gate|up linear and its gated activation in one launch, as TileGemmGated is
// TileGemm's: W [2 inter, K] holds the gate rows, then the up rows (bias alike); out[T, inter] =
// Gated(act, g, u) of each row's two outputs rounded as WgmmaTileGemm rounds them, with one launch
// fewer and no [T, 2 inter] intermediate. A CTA takes 32 gate rows and the same 32 up rows, so
// inter % 32 == 0. INVALID_ARGUMENT otherwise (and as WgmmaTileGemm).
Status WgmmaTileGemmGated(Activation act, const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens,
                          int64_t inter, int64_t k, uint16_t* out, GpuStream stream, int config = 0);

// Where the model runs the wgmma tile linear, in both formats (a DF11 matrix's fixed lanes by
// Df11WgmmaTileGemm(Gated), a BF16 one by GemmHandle and WgmmaTileGemm(Gated), with
// kWgmmaTileModelConfig for BF16 and WgmmaTileDf11Config for DF11, whose bits agree: above): on a
// compute capability 9.0 GPU, for the matrices a DF11 model keeps at 4 rows per tile
// (FixedRowsPerTile: gate|up and lm_head of the 8B shape), from kWgmmaTileModelMinTokens (a plain
// linear) or kWgmmaTileGatedModelMinTokens (gate|up with its activation) to kWgmmaTileMaxTokens
// tokens, whatever tile_max_tokens (which bounds TileGemm only), where TileGemm ran before (and
// above 64 tokens, or above tile_max_tokens 32, decode-then-cuBLAS: there a BF16 W keeps cuBLAS
// where GemmHandle::CheckCublasBits finds the same bits). On the H100 (configuration 3 or 4 for DF11,
// bench/results/wgmma_tile_h100_gated*.log) gate|up with its activation ran 0.83-0.91x (BF16) and
// 0.95-0.97x (DF11) the time of what ran before at 33-64 tokens, lm_head 0.98-0.99x and 0.86-0.87x.
// With DF11's configuration 5 (H200, bench/results/wgmma_tile_h200_16_warps.log) gate|up with its
// activation takes 0.92-0.94x Df11TileGemmGated at 17-32 tokens (BF16's configuration 3 0.98-1.00x
// TileGemmGated; at 16 tokens, where Df11TileGemmGated takes tokens in 2 groups of 8, DF11 1.09x)
// and 0.89x / 0.89x / 0.96-0.98x what the model ran at 33 / 48 / 64 tokens; lm_head takes
// 0.90-0.93x at 17-32 tokens; its BF16 twin's WgmmaTileGemm would take 1.06-1.07x TileGemm there, but
// a BF16 W runs cuBLAS where CheckCublasBits finds its bits (bench/results/ab_h200_lm_head_17.log).
inline constexpr int64_t kWgmmaTileModelMinTokens = 17;
inline constexpr int64_t kWgmmaTileGatedModelMinTokens = 17;
inline constexpr int kWgmmaTileModelConfig = 3;
// The DF11 pipeline the model runs: configuration 5 for gate|up with its activation and for a plain
// linear up to 48 tokens, else 3 (H200, wgmma_tile_h200_16_warps.log: lm_head 0.93-0.96x
// configuration 3 at 33 and 48 tokens, 1.04x at 64).
inline int WgmmaTileDf11Config(bool gated, int64_t tokens) { return gated || tokens <= 48 ? 5 : 3; }
// Whether a linear [n, k] at these tokens takes the wgmma tile linear in the model (x 16-byte
// aligned), up to max_tokens (kWgmmaTileMaxTokens, or 0 where the model runs it nowhere:
// GemmHandle::wgmma_tile_max_tokens).
bool WgmmaTileApplies(const uint16_t* x, int64_t tokens, int64_t n, int64_t k, int64_t max_tokens);
// WgmmaTileApplies for the gate|up matrix [2 inter, k], with inter % 32 == 0 (WgmmaTileGemmGated).
bool WgmmaTileGatedApplies(const uint16_t* x, int64_t tokens, int64_t inter, int64_t k, int64_t max_tokens);

class GemmHandle {
 public:
  GemmHandle() = default;
  ~GemmHandle();
  GemmHandle(const GemmHandle&) = delete;
  GemmHandle& operator=(const GemmHandle&) = delete;

  // Creates the cuBLAS handle bound to `stream` with a 32 MiB workspace.
  Status Init(GpuStream stream);
  // Most tokens Gemm and GemmBias run TileGemm with: kTileGemmMaxTokens unless set lower
  // (ModelOptions::tile_max_tokens); clamped to [kTileGemmMinTokens - 1, kTileGemmMaxTokens].
  void set_tile_max_tokens(int64_t t) {
    tile_max_tokens_ = t < kTileGemmMinTokens - 1 ? kTileGemmMinTokens - 1 : t > kTileGemmMaxTokens ? kTileGemmMaxTokens : t;
  }
  int64_t tile_max_tokens() const { return tile_max_tokens_; }
  // Whether Gemm and GemmBias run WgmmaTileGemm where WgmmaTileApplies (default true;
  // ModelOptions::wgmma_tile). The most tokens they do: kWgmmaTileMaxTokens whatever
  // tile_max_tokens(), or 0 when off.
  void set_wgmma_tile(bool on) { wgmma_tile_ = on; }
  int64_t wgmma_tile_max_tokens() const { return wgmma_tile_ ? kWgmmaTileMaxTokens : 0; }
  // Every pointer device memory; x, w, y 16-byte aligned. kTileGemmMinTokens..tile_max_tokens()
  // tokens run TileGemm, fewer Gemv, more cuBLAS; WgmmaTileGemm where WgmmaTileApplies (to 128
  // tokens), or cuBLAS there where CheckCublasBits found its bits: the kernel's bits depend on the
  // shapes, alignment and GPU only, never on where W came from (a DF11 weight and its BF16 twin
  // give the same bits).
  // INTERNAL (naming the shapes) on a cuBLAS error.
  Status Gemm(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t n, int64_t k, bool accumulate,
              uint16_t* y);
  // Where cuBLAS gives WgmmaTileGemm's bits. For a [n, k] matrix that the wgmma tile linear takes
  // (WgmmaTileApplies), runs cuBLAS and WgmmaTileGemm (kWgmmaTileModelConfig) on `w` and random x at
  // every token count from kWgmmaTileModelMinTokens to kWgmmaTileMaxTokens, x and y 256-byte
  // aligned, and counts the outputs that differ on the device. Gemm then runs cuBLAS instead of
  // WgmmaTileGemm at the counts where none differed and x and y are 256-byte aligned (cuBLAS picks
  // its kernel by shape and alignment): the same bits, at cuBLAS's speed. On an H200 cuBLAS adds
  // each output's 16-column wgmma steps in column order as the tile linear does wherever it does
  // not split K (bench/results/wgmma_tile_h200_*.log: 0 of every output differed on gate|up and
  // lm_head of the 8B shape at 16-128 tokens). Returns the counts that differed (empty: cuBLAS
  // everywhere); nothing for shapes WgmmaTileApplies never takes. Waits for the stream. INTERNAL on
  // a CUDA or cuBLAS error, RESOURCE_EXHAUSTED without device memory for x and two y [128, n].
  StatusOr<std::vector<int64_t>> CheckCublasBits(const uint16_t* w, int64_t n, int64_t k);
  // Whether Gemm runs cuBLAS for a [n, k] matrix at these tokens with WgmmaTileGemm's bits
  // (CheckCublasBits found them equal; x and y 256-byte aligned; no accumulate).
  bool CublasKeepsBits(int64_t n, int64_t k, int64_t tokens) const;
  // Gemm through cuBLAS whatever the tokens (benchmarks compare the small-batch kernels with it).
  // ldy: elements between y's rows (0: n), so a slice of W's rows writes its columns of a wider y.
  Status CublasGemm(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t n, int64_t k, bool accumulate,
                    uint16_t* y, int64_t ldy = 0);
  // y = x · W^T + bias (bias: [n] fp32 holding bf16 values), rounded to bf16 once. Up to
  // kTileGemmMaxTokens tokens: Gemv or TileGemm (as Gemm picks) with the bias in its sum. More, as PyTorch's addmm: cublasLt with the bias epilogue (a bf16 bias vector, the
  // first heuristic algorithm under the same workspace and alignment preferences); an Lt
  // configuration the library refuses broadcasts the bias into y and accumulates.
  Status GemmBias(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k,
                  uint16_t* y, GpuStream stream);
  // Sizes GemmBias's bf16 bias buffer for biases up to n elements now, so no later call allocates
  // (CUDA graphs keep the buffer's address).
  Status ReserveBias(int64_t n) { return bias_bf16_.Reserve(static_cast<uint64_t>(n) * 2, "bf16 bias"); }

 private:
  // Whether Gemm and GemmBias run TileGemm for these operands (up to tile_max_tokens_ tokens).
  bool RunsTile(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t k) const {
    return tokens <= tile_max_tokens_ && TileGemmApplies(x, w, tokens, k);
  }
  // Whether they run WgmmaTileGemm instead (WgmmaTileApplies, up to wgmma_tile_max_tokens(), W
  // 16-byte aligned).
  bool RunsWgmmaTile(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t n, int64_t k) const {
    return WgmmaTileApplies(x, tokens, n, k, wgmma_tile_max_tokens()) && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  }
  Status LtGemmBias(const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t tokens, int64_t n, int64_t k,
                    uint16_t* y, GpuStream stream, bool* done);

  int64_t tile_max_tokens_ = kTileGemmMaxTokens;
  bool wgmma_tile_ = true;
  // CheckCublasBits's findings: per [n, k], bit t set where cuBLAS gave WgmmaTileGemm's bits at t tokens.
  struct CublasBits {
    int64_t n = 0, k = 0;
    std::bitset<kWgmmaTileMaxTokens + 1> tokens;
  };
  std::vector<CublasBits> cublas_bits_;
  void* handle_ = nullptr;     // cublasHandle_t
  void* lt_handle_ = nullptr;  // cublasLtHandle_t
  GpuStream stream_ = nullptr;
  DeviceBuffer bias_bf16_;     // the current bias as bf16
  DeviceBuffer workspace_;
};

}  // namespace df11::cuda
