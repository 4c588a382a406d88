// CPU reference ops (see cpu_ops.h). Inner loops are written so the compiler can vectorise them
// (fixed-width partial sums instead of one serial accumulator); the summation order of every
// output element is fixed, so results do not depend on threading or batching.
#include "kernels/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/base/parallel.h"

namespace df11::cpu {
namespace {

constexpr int kLanes = 16;  // partial sums per dot product

// sum_i a[i] * b[i] in a fixed order: kLanes strided partial sums, then a pairwise reduction.
inline float Dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// y[0, n) += a * x[0, n)
inline void Axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

inline void UpcastRow(const uint16_t* w, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(w[i]);
}

}  // namespace

void ParallelForGrain(int64_t n, int64_t grain, int threads, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (threads <= 0) threads = HardwareThreads();
  const int64_t by_grain = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int workers = static_cast<int>(std::min<int64_t>(threads, by_grain));
  ParallelFor(n, workers, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

void RmsNorm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, bool add_one, float* out,
             int threads) {
  ParallelForGrain(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)), threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * dim;
      float* yr = out + r * dim;
      const float mean = Dot(xr, xr, dim) / static_cast<float>(dim);
      const float inv = 1.0f / std::sqrt(mean + eps);
      for (int64_t i = 0; i < dim; ++i) {
        const float scale = add_one ? 1.0f + w[i] : w[i];
        yr[i] = (xr[i] * inv) * scale;
      }
    }
  });
}

void RopeTables(std::span<const float> inv_freq, std::span<const int32_t> positions, float* cos, float* sin) {
  const size_t half = inv_freq.size();
  for (size_t t = 0; t < positions.size(); ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (size_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];  // fp32 product, as transformers
      cos[t * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin[t * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

void ApplyRope(float* x, int64_t tokens, int64_t num_heads, int64_t head_dim, int64_t rotary_dim, const float* cos,
               const float* sin, int threads) {
  const int64_t half = rotary_dim / 2;
  ParallelForGrain(tokens, 64, threads, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* c = cos + t * half;
      const float* s = sin + t * half;
      for (int64_t h = 0; h < num_heads; ++h) {
        float* v = x + (t * num_heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i];
          const float b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  });
}

void MatmulBf16(const float* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n, int64_t k, float* y,
                int threads) {
  constexpr int64_t kRowsPerTile = 8;  // weight rows upcast together, reused by every token
  const int64_t tiles = (n + kRowsPerTile - 1) / kRowsPerTile;
  const int64_t work_per_tile = kRowsPerTile * k * std::max<int64_t>(tokens, 1);
  ParallelForGrain(tiles, std::max<int64_t>(1, 65536 / std::max<int64_t>(work_per_tile, 1)), threads,
                   [&](int64_t tile0, int64_t tile1) {
                     std::vector<float> rows(kRowsPerTile * k);
                     for (int64_t tile = tile0; tile < tile1; ++tile) {
                       const int64_t r0 = tile * kRowsPerTile;
                       const int64_t r1 = std::min(n, r0 + kRowsPerTile);
                       for (int64_t r = r0; r < r1; ++r) UpcastRow(w + r * k, k, &rows[(r - r0) * k]);
                       for (int64_t t = 0; t < tokens; ++t) {
                         const float* xt = x + t * k;
                         for (int64_t r = r0; r < r1; ++r) {
                           const float dot = Dot(xt, &rows[(r - r0) * k], k);
                           y[t * n + r] = bias != nullptr ? dot + bias[r] : dot;
                         }
                       }
                     }
                   });
}

void GatedActivation(Activation act, const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
                     int64_t tokens, int64_t inter, float* out, int threads) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  ParallelForGrain(tokens, std::max<int64_t>(1, 16384 / std::max<int64_t>(inter, 1)), threads,
                   [&](int64_t t0, int64_t t1) {
                     for (int64_t t = t0; t < t1; ++t) {
                       const float* g = gate + t * gate_stride;
                       const float* u = up + t * up_stride;
                       float* o = out + t * inter;
                       if (act == Activation::kSilu) {
                         for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
                       } else {
                         for (int64_t i = 0; i < inter; ++i) {
                           const float v = g[i];
                           const float inner = kSqrt2OverPi * (v + 0.044715f * v * v * v);
                           o[i] = 0.5f * v * (1.0f + std::tanh(inner)) * u[i];
                         }
                       }
                     }
                   });
}

void EmbeddingGather(const uint16_t* table, std::span<const int32_t> ids, int64_t hidden, float scale, float* out) {
  for (size_t t = 0; t < ids.size(); ++t) {
    const uint16_t* row = table + static_cast<int64_t>(ids[t]) * hidden;
    float* o = out + static_cast<int64_t>(t) * hidden;
    for (int64_t i = 0; i < hidden; ++i) o[i] = Bf16ToFloat(row[i]) * scale;
  }
}

void SoftCap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] / cap) * cap;
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void SplitColumns(const float* src, int64_t tokens, int64_t a, int64_t b, int64_t c, float* dst_a, float* dst_b,
                  float* dst_c) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = src + t * (a + b + c);
    std::copy(row, row + a, dst_a + t * a);
    std::copy(row + a, row + a + b, dst_b + t * b);
    std::copy(row + a + b, row + a + b + c, dst_c + t * c);
  }
}

namespace {

// The cache slot of token t's position (batch_layout.h).
int64_t SlotOf(const PagedKvLayer& cache, const BatchLayout& batch, int64_t t) {
  const int64_t pos = batch.positions[t];
  const int32_t* table = batch.tables + batch.table_begin[batch.token_seq[t]];
  return int64_t{table[pos / cache.block_size]} * cache.block_size + pos % cache.block_size;
}

}  // namespace

void WriteKv(const PagedKvLayer& cache, const BatchLayout& batch, const float* k, const float* v, int threads) {
  const int64_t row = cache.num_kv_heads * cache.head_dim;
  ParallelForGrain(batch.num_tokens, 16, threads, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t slot = SlotOf(cache, batch, t);
      std::memcpy(cache.k + slot * row, k + t * row, row * sizeof(float));
      std::memcpy(cache.v + slot * row, v + t * row, row * sizeof(float));
    }
  });
}

namespace {

// One query head of one token at position `pos`: out[head_dim] = softmax(q·K^T) V over the
// visible keys [first, pos]. `scores` is scratch of at least pos + 1 floats.
void AttendOne(const PagedKvLayer& cache, const int32_t* blocks, int64_t kv_head, int64_t first, int64_t pos,
               const AttentionParams& p, const float* q, float* out, std::vector<float>& scores) {
  const int64_t d = cache.head_dim;
  const int64_t row = cache.num_kv_heads * d;
  auto slot_of = [&](int64_t j) { return blocks[j / cache.block_size] * cache.block_size + j % cache.block_size; };
  const int64_t count = pos - first + 1;
  if (static_cast<int64_t>(scores.size()) < count) scores.resize(count);
  float max_score = -std::numeric_limits<float>::infinity();
  for (int64_t j = first; j <= pos; ++j) {
    float s = Dot(q, cache.k + slot_of(j) * row + kv_head * d, d) * p.scale;
    if (p.softcap > 0) s = std::tanh(s / p.softcap) * p.softcap;
    scores[j - first] = s;
    max_score = std::max(max_score, s);
  }
  float sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    scores[i] = std::exp(scores[i] - max_score);
    sum += scores[i];
  }
  const float inv_sum = 1.0f / sum;
  std::fill(out, out + d, 0.0f);
  for (int64_t j = first; j <= pos; ++j) {
    Axpy(scores[j - first] * inv_sum, cache.v + slot_of(j) * row + kv_head * d, out, d);
  }
}

}  // namespace

void PagedAttention(const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params, const float* q,
                    float* out, int threads) {
  // Work items: (token, head) pairs of the whole batch.
  const int64_t heads = params.num_heads;
  const int64_t group = heads / cache.num_kv_heads;
  const int64_t d = cache.head_dim;
  ParallelForGrain(batch.num_tokens * heads, 4, threads, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = item / heads;
      const int64_t h = item % heads;
      const int64_t pos = batch.positions[t];
      const int64_t first = params.sliding_window > 0 ? std::max<int64_t>(0, pos - params.sliding_window + 1) : 0;
      AttendOne(cache, batch.tables + batch.table_begin[batch.token_seq[t]], h / group, first, pos, params,
                q + (t * heads + h) * d, out + (t * heads + h) * d, scores);
    }
  });
}

}  // namespace df11::cpu
