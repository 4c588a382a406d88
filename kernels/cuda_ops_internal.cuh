// Device helpers shared by the CUDA op files (BF16 rounding, block reductions, launch checks).
// Included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/base/status.h"
#include "kernels/batch_layout.h"  // Activation

namespace df11::cuda {

// Status of a CUDA call / of the last launch, naming `what` (INTERNAL; RESOURCE_EXHAUSTED for OOM).
Status CheckCuda(cudaError_t err, const char* what);
Status CheckLaunch(const char* kernel);

__device__ __forceinline__ float Bf16ToFloat(uint16_t w) { return __uint_as_float(static_cast<uint32_t>(w) << 16); }
__device__ __forceinline__ uint16_t FloatToBf16(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
// f rounded to the nearest BF16 value, kept as fp32.
__device__ __forceinline__ float RoundBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

// bf16(bf16(act(gate)) * up) of one element: the gated activation (GatedActivation, and the
// gate|up linears that end in it: GemvGated, TileGemmGated and their DF11 twins).
__device__ __forceinline__ uint16_t Gated(Activation act, uint16_t gate, uint16_t up) {
  const float g = Bf16ToFloat(gate);
  float a;
  if (act == Activation::kSilu) {
    a = g / (1.0f + expf(-g));
  } else {
    a = 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
  }
  return FloatToBf16(RoundBf16(a) * Bf16ToFloat(up));
}

// Shared-memory address of a generic pointer into shared memory (for PTX).
__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; bytes = 0 writes zeros and reads nothing.
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SharedAddress(dst)), "l"(src), "r"(bytes));
}
// An L2 policy that evicts these lines first (for data read once, e.g. streamed weights), and
// CopyAsync16 under it.
__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, int bytes, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(SharedAddress(dst)), "l"(src),
               "r"(bytes), "l"(policy));
}
__device__ __forceinline__ void CopyAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Programmatic dependent launch (sm_90). A kernel launched as a dependent (LaunchDependent) may
// start while the stream's previous kernel still runs: before it reads or writes anything that
// kernel touches it calls WaitPrevious(), which returns once that kernel has finished and its
// writes are visible (at once for a kernel launched the ordinary way). AllowDependents(): the
// next kernel, if launched as a dependent, may start now. Both are no-ops before sm_90.
__device__ __forceinline__ void WaitPrevious() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void AllowDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Launches kernel<<<grid, block, shared_bytes, stream>>>(args...) as a dependent of the stream's
// previous kernel (programmatic stream serialization). Returns the launch's error (callers may
// leave it to their CheckLaunch).
template <typename... Params, typename... Args>
cudaError_t LaunchDependentShared(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                                  cudaStream_t stream, Args... args) {
  cudaLaunchAttribute dependent[1];
  dependent[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = dependent;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// Row-wise ops after a linear (AddRmsNorm, GatedActivation) launch as dependents only for up to
// kDependentMaxRows rows, where the linear before them is a GEMV; after the tensor-core tile linear
// (3-64 rows) their early blocks cost more than the launch they hide. Measured on the H100
// (model_step_bench, bench/results/ab_h100_dependents.log, two runs each): as dependents at
// every row count, BF16 batch 1 / 8 / 64 6.09-6.12 / 6.50-6.56 / 12.12-12.17 ms, DF11 7.55 /
// 8.77-8.87 / 16.47-16.57; launched plainly 6.16-6.23 / 6.52-6.57 / 11.33-11.43 and 7.51-7.73 /
// 8.40-8.49 / 15.59-15.84. Again with every tile linear allowing its dependents only after its main
// loop (as the gated one does) and these up to 64 rows: BF16 batch 64 12.02 ms against 11.26-11.29,
// DF11 batch 8 / 64 8.34-8.42 / 14.90-14.92 against 8.36-8.41 / 14.89-14.93
// (bench/results/ab_h100_gated_tile_final.log, .dep).
inline constexpr int64_t kDependentMaxRows = 2;

// LaunchDependentShared without dynamic shared memory.
template <typename... Params, typename... Args>
cudaError_t LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
  return LaunchDependentShared(kernel, grid, block, 0, stream, args...);
}

// The current device (*device) and its SM count (*sms), asked of the driver once per thread and
// device.
inline Status CurrentDeviceSms(int* device, int* sms) {
  static thread_local int cached_device = -1, cached_sms = 0;
  DF11_RETURN_IF_ERROR(CheckCuda(cudaGetDevice(device), "cudaGetDevice"));
  if (*device != cached_device) {
    DF11_RETURN_IF_ERROR(
        CheckCuda(cudaDeviceGetAttribute(&cached_sms, cudaDevAttrMultiProcessorCount, *device), "SM count"));
    cached_device = *device;
  }
  *sms = cached_sms;
  return Status::Ok();
}

// Raises kKernel's dynamic shared-memory limit to `bytes` on `device` (the current one), once per
// host thread and device: the attribute is per device, and each instance of this template (one per
// kernel) remembers the device it last raised it on. `what` names the kernel in errors.
template <auto kKernel>
Status AllowSharedBytes(int bytes, int device, const char* what) {
  static thread_local int sized_device = -1;
  if (device == sized_device) return Status::Ok();
  DF11_RETURN_IF_ERROR(
      CheckCuda(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), what));
  sized_device = device;
  return Status::Ok();
}

// A persistent grid's fit: how many blocks of a kernel every SM holds at once, asked once per
// thread and device (a caller keeps one, function-local static thread_local, per kernel instance).
struct PersistentFit {
  int device = -1, max_blocks = 0;
};

// Fills `fit` for blocks of `threads` of `kernel` on the current device (once per device).
template <typename... Params>
Status FitPersistent(void (*kernel)(Params...), int threads, PersistentFit& fit, const char* what) {
  int current = 0, sms = 0;
  DF11_RETURN_IF_ERROR(CurrentDeviceSms(&current, &sms));
  if (current != fit.device) {
    int per_sm = 0;
    DF11_RETURN_IF_ERROR(CheckCuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0), what));
    fit.max_blocks = per_sm * sms > 1 ? per_sm * sms : 1;
    fit.device = current;
  }
  return Status::Ok();
}

// Launches min(blocks_wanted, what fits the GPU at once) blocks of `threads` as a dependent
// (LaunchDependent); `what` names the kernel in errors.
template <typename... Params, typename... Args>
Status LaunchPersistent(void (*kernel)(Params...), int64_t blocks_wanted, int threads, PersistentFit& fit,
                        cudaStream_t stream, const char* what, Args... args) {
  DF11_RETURN_IF_ERROR(FitPersistent(kernel, threads, fit, what));
  const int64_t blocks = blocks_wanted < fit.max_blocks ? blocks_wanted : fit.max_blocks;
  LaunchDependent(kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), stream, args...);
  return CheckLaunch(what);
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, d);
  return v;
}

// Threads per block of a per-row kernel over `n` elements. RmsNorm's fp32 summation order follows
// from it, and AddRmsNorm and PrepareAttention keep that order (the same bits).
__host__ __device__ constexpr int ThreadsFor(int64_t n) { return n >= 256 ? 256 : n >= 128 ? 128 : 64; }

// Sum over the block (blockDim.x a multiple of 32), fixed order; every thread gets the result.
// `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = WarpSum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  __syncthreads();
  return total;
}

// One RMSNorm output element as transformers rounds it, x scaled by r = rsqrt(mean(x^2) + eps):
//   add_one (Gemma3RMSNorm): bf16(x * r * (1 + w))      (all fp32, one rounding)
//   else (LlamaRMSNorm):     bf16(w * bf16(x * r))
__device__ __forceinline__ uint16_t NormElement(uint16_t x, float r, float w, bool add_one) {
  const float v = Bf16ToFloat(x) * r;
  return add_one ? FloatToBf16(v * (1.0f + w)) : FloatToBf16(w * RoundBf16(v));
}

// RMSNorm kernels take a thread's row elements (threadIdx.x + k * blockDim.x, k = 0, 1, ...) in
// chunks of kChunk, every load of a chunk before its first store: the loads of a chunk overlap,
// where a loop that stores between loads waits for each load in turn (ncu, H100: a batch-1
// AddRmsNorm ~17 us, 2,048 rows 42 us; bench/results/ncu_{small,prefill}_kernels_h100_lpt.txt).
// 16 per chunk (one chunk up to 4,096 wide) for up to kWideChunkRows rows; 8 for more (48
// registers instead of 94: a 2,048-row AddRmsNorm all in registers, 119, ran 2 blocks per SM and
// took 61 us, ncu_prefill_kernels_h100_norm_regs.txt; in chunks of 8 34 us,
// ncu_prefill_kernels_h100_norm.txt). Measured in the model step (H100,
// bench/results/model_step_h100_norm_ab.log, two runs each, alternating): BF16 decode 6.73-6.74 /
// 6.95-6.97 / 11.74-11.88 / 11.35-11.44 ms at batch 1 / 8 / 64 / 128 against 7.20-7.21 /
// 7.47-7.49 / 12.33-12.40 / 11.95-11.97; a 2,048-token prefill unchanged (55.3 ms).
constexpr int64_t kWideChunkRows = 512;
inline int RowChunk(int64_t rows) { return rows <= kWideChunkRows ? 16 : 8; }

// v[k] = p[base + k * nt] for k < kChunk (zero at n and past): one chunk of a thread's row elements.
template <int kChunk, typename T>
__device__ __forceinline__ void LoadChunk(T (&v)[kChunk], const T* p, int base, int nt, int n) {
#pragma unroll
  for (int k = 0; k < kChunk; ++k) v[k] = base + k * nt < n ? p[base + k * nt] : T{0};
}

// The rest of a row's RMSNorm in a block of ThreadsFor(dim) threads, once each thread has `sum`,
// the sum of squares of its elements threadIdx.x, + blockDim.x, ... in that order: BlockSum, then
// dst[i] = NormElement(row[i]) over the same elements, in chunks (RowChunk; dst may alias row).
template <int kChunk>
__device__ __forceinline__ void FinishRmsNorm(float sum, const uint16_t* row, const float* w, int64_t dim, float eps,
                                              bool add_one, uint16_t* dst) {
  const int n = static_cast<int>(dim), tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  __shared__ float warp_sums[32];
  sum = BlockSum(sum, warp_sums);
  const float r = rsqrtf(sum / static_cast<float>(dim) + eps);
  for (int base = tid; base < n; base += kChunk * nt) {
    uint16_t x[kChunk];
    float wv[kChunk];
    LoadChunk(x, row, base, nt, n);
    LoadChunk(wv, w, base, nt, n);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      const int i = base + k * nt;
      if (i < n) dst[i] = NormElement(x[k], r, wv[k], add_one);
    }
  }
}

// BlockSum's total over a block of 32 E threads (E a power of two, 1 < E <= 32), each holding
// one value, computed by one warp whose lane l holds in s[c] the value of thread E l + c: each
// 32-thread warp's WarpSum butterfly (its step of distance m pairs element c ^ m of the same lane
// when m < E, else element c of lane ^ (m / E); fp32 addition commutes, so every step gives
// WarpSum's bits), then the warps' totals (at lanes (32 / E) w) added in order from 0. Every lane
// gets the total; s is left holding each warp's sum.
template <int E>
__device__ __forceinline__ float LaneBlockSum(float (&s)[E]) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) {
    if (m >= E) {
#pragma unroll
      for (int c = 0; c < E; ++c) s[c] += __shfl_xor_sync(0xFFFFFFFFu, s[c], m / E);
    } else {
      float next[E];
#pragma unroll
      for (int c = 0; c < E; ++c) next[c] = s[c] + s[c ^ m];
#pragma unroll
      for (int c = 0; c < E; ++c) s[c] = next[c];
    }
  }
  float total = 0;
#pragma unroll
  for (int w = 0; w < E; ++w) total += __shfl_sync(0xFFFFFFFFu, s[0], w * (32 / E));
  return total;
}

// The vector path of RmsNorm and AddRmsNorm for rows of `dim` % 256 == 0 (ThreadsFor(dim) = 256
// virtual threads, thread u summing elements u, u + 256, ... in turn, then BlockSum): one warp per
// row, lane l holding virtual threads 8 l .. 8 l + 7, whose elements 256 k + 8 l .. it reads as
// one 16-byte vector per k. Each virtual thread's sum runs over k in order, then LaneBlockSum<8>:
// the bits of RmsNormKernel. kVecNormWarps rows
// a block, from kVecNormMinRows rows on. Measured on the H100 (model_step_bench, two rounds each,
// alternating with main): at every row count (bench/results/ab_h100_vec_norm.log) a 2,048-token
// prefill 55.39-56.43 ms against 56.65-57.55 (BF16), 63.83-64.11 against 64.36-64.70 (DF11), but
// decode steps of 1-256 rows 0.6-0.9 ms slower (a warp's chunks of a row wait for each other: few
// rows, few warps), so those keep the per-thread kernels; from 512 rows, on another machine
// (ab_h100_vec_norm_512.log), prefill 53.55-54.47 against 53.20-54.63 (BF16) and 60.05-62.36
// against 62.65 (DF11), decode unchanged: a gain of ~0.5 ms or less, inside the prefill's
// run-to-run spread. A warp's loads of a row are batched (kSumBatch, kNormBatch chunks in flight
// before any is used; the arithmetic in the same order): ncu of a 2,048-token BF16 prefill step,
// AddRmsNorm 20.1 us against 25.8 (bench/results/ncu_prefill_kernels_h100_norm_batch.txt).
constexpr int kVecNormWarps = 8;
constexpr int64_t kVecNormMinRows = 512;
inline bool VecNormApplies(int64_t rows, int64_t dim, const void* a, const void* b, const void* c, const void* w) {
  const auto aligned = [](const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return rows >= kVecNormMinRows && dim % 256 == 0 && aligned(a) && aligned(b) && aligned(c) && aligned(w);
}

// row: the row (add != null: hidden = bf16(hidden + add) is stored back first); dst[i] =
// NormElement(row[i]) (dst may alias row). Every lane of the warp calls it.
__device__ __forceinline__ void WarpRmsNormRow(uint16_t* row, const uint16_t* add, const float* w, int64_t dim,
                                               float eps, bool add_one, uint16_t* dst) {
  // kSumBatch (kNormBatch) chunks of the row are loaded before any is used, so a warp has that
  // many loads in flight instead of one (the row's chunks are otherwise a chain of load latencies:
  // few rows leave few warps); the arithmetic stays in chunk order.
  constexpr int kSumBatch = 8, kNormBatch = 4;
  const int lane = threadIdx.x & 31;
  const int chunks = static_cast<int>(dim / 256);
  float sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int k0 = 0; k0 < chunks; k0 += kSumBatch) {
    uint4 v[kSumBatch], y[kSumBatch];
#pragma unroll
    for (int j = 0; j < kSumBatch; ++j) {
      if (k0 + j >= chunks) break;
      v[j] = reinterpret_cast<const uint4*>(row + 256 * (k0 + j))[lane];
      if (add != nullptr) y[j] = reinterpret_cast<const uint4*>(add + 256 * (k0 + j))[lane];
    }
#pragma unroll
    for (int j = 0; j < kSumBatch; ++j) {
      if (k0 + j >= chunks) break;
      uint16_t e[8];
      std::memcpy(e, &v[j], 16);
      if (add != nullptr) {
        uint16_t f[8];
        std::memcpy(f, &y[j], 16);
#pragma unroll
        for (int c = 0; c < 8; ++c) e[c] = FloatToBf16(Bf16ToFloat(e[c]) + Bf16ToFloat(f[c]));
        std::memcpy(&v[j], e, 16);
        reinterpret_cast<uint4*>(row + 256 * (k0 + j))[lane] = v[j];
      }
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const float x = Bf16ToFloat(e[c]);
        sum[c] += x * x;
      }
    }
  }
  const float r = rsqrtf(LaneBlockSum(sum) / static_cast<float>(dim) + eps);
  for (int k0 = 0; k0 < chunks; k0 += kNormBatch) {
    uint4 v[kNormBatch];
    float4 w0[kNormBatch], w1[kNormBatch];
#pragma unroll
    for (int j = 0; j < kNormBatch; ++j) {
      if (k0 + j >= chunks) break;
      v[j] = reinterpret_cast<const uint4*>(row + 256 * (k0 + j))[lane];
      w0[j] = reinterpret_cast<const float4*>(w + 256 * (k0 + j))[2 * lane];
      w1[j] = reinterpret_cast<const float4*>(w + 256 * (k0 + j))[2 * lane + 1];
    }
#pragma unroll
    for (int j = 0; j < kNormBatch; ++j) {
      if (k0 + j >= chunks) break;
      const float wv[8] = {w0[j].x, w0[j].y, w0[j].z, w0[j].w, w1[j].x, w1[j].y, w1[j].z, w1[j].w};
      uint16_t e[8];
      std::memcpy(e, &v[j], 16);
#pragma unroll
      for (int c = 0; c < 8; ++c) e[c] = NormElement(e[c], r, wv[c], add_one);
      uint4 o;
      std::memcpy(&o, e, 16);
      reinterpret_cast<uint4*>(dst + 256 * (k0 + j))[lane] = o;
    }
  }
}

}  // namespace df11::cuda
