// CPU reference ops of the forward step: plain C++ over raw buffers, no knowledge of models or
// requests. Activations are fp32, weights BF16 words upcast exactly, accumulation fp32.
// Every op with a `threads` argument fans out over ParallelFor (0 = all cores; small inputs run
// on fewer threads) and is deterministic: each output element is computed in a fixed order that
// does not depend on the thread count or on which other rows are in the batch.
// Shapes are row-major; "[T, N]" means T rows of N contiguous elements.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>

#include "kernels/batch_layout.h"

namespace df11::cpu {

// Exact BF16 -> fp32.
inline float Bf16ToFloat(uint16_t w) {
  const uint32_t u = static_cast<uint32_t>(w) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// fp32 -> BF16, round to nearest even (NaN stays NaN).
uint16_t FloatToBf16(float f);

// out[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w     (w: [dim] fp32; (1 + w) if add_one)
// As transformers' LlamaRMSNorm / Gemma3RMSNorm compute it in fp32. x, out: [rows, dim]; may alias.
void RmsNorm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, bool add_one, float* out,
             int threads);

// Rotary embedding tables for `positions`: cos/sin [num_positions, rotary_dim / 2] fp32,
// angle = float(position) * inv_freq[i] in fp32 (as transformers' rotary embedding does).
void RopeTables(std::span<const float> inv_freq, std::span<const int32_t> positions, float* cos, float* sin);

// Rotates, in place, the first rotary_dim (even, <= head_dim) elements of each head of x
// [T, num_heads, head_dim] the neox way (transformers' rotate_half): for i < rotary_dim/2,
//   x[i] <- x[i] cos[i] - x[i + half] sin[i],  x[i + half] <- x[i + half] cos[i] + x[i] sin[i].
// Elements past rotary_dim pass through (partial rotary). cos/sin: [T, rotary_dim / 2].
void ApplyRope(float* x, int64_t tokens, int64_t num_heads, int64_t head_dim, int64_t rotary_dim, const float* cos,
               const float* sin, int threads);

// y[T, N] = x[T, K] · W[N, K]^T (+ bias[N] when non-null). W: BF16 words. y must not alias x.
void MatmulBf16(const float* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k, float* y,
                int threads);

// out[T, I] = act(gate[T, I]) * up[T, I], where gate row t starts at gate + t * gate_stride and up
// row t at up + t * up_stride (a fused gate|up projection passes both halves of one buffer).
void GatedActivation(Activation act, const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
                     int64_t tokens, int64_t inter, float* out, int threads);

// out[T, H] = float(table[ids[t], :]) * scale, table BF16 [vocab, H]; ids must be in range.
void EmbeddingGather(const uint16_t* table, std::span<const int32_t> ids, int64_t hidden, float scale, float* out);

// In place: x = cap * tanh(x / cap) over n elements (cap > 0).
void SoftCap(float* x, int64_t n, float cap);

// x[i] += y[i] over n elements (the residual add).
void AddInPlace(float* x, const float* y, int64_t n);

// Column split of a fused projection: src [T, a + b + c] -> dst_a [T, a], dst_b [T, b], dst_c [T, c].
void SplitColumns(const float* src, int64_t tokens, int64_t a, int64_t b, int64_t c, float* dst_a, float* dst_b,
                  float* dst_c);

// A layer of the paged KV cache: fp32 pools (batch_layout.h).
using PagedKvLayer = PagedKvLayerOf<float>;

// Stores k, v [T, num_kv_heads, head_dim] of every token of `batch` (host arrays) into the cache
// slot of its position. Contract: no two tokens of the batch map to the same slot.
void WriteKv(const PagedKvLayer& cache, const BatchLayout& batch, const float* k, const float* v, int threads);

// Causal attention of the batch's tokens over the cache (which must already hold them, see WriteKv):
// out[T, num_heads, head_dim] fp32 from q [T, num_heads, head_dim]. Query head h reads KV head
// h / (num_heads / num_kv_heads). Softmax in fp32 with the max subtracted.
void PagedAttention(const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params, const float* q,
                    float* out, int threads);

// Runs fn(begin, end) over [0, n) on at most `threads` threads, each taking at least `grain`
// items (so tiny inputs stay on the calling thread).
void ParallelForGrain(int64_t n, int64_t grain, int threads, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace df11::cpu
