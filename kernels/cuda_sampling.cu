// The CUDA sampler (see cuda_sampling.h; the math is sampling.h's). Built with -fmad=false so
// no multiply-add fuses and the arithmetic matches the CPU twin bit for bit.
#include <cuda_runtime.h>

#include <cub/device/device_segmented_radix_sort.cuh>
#include <string>

#include "kernels/cuda_ops_internal.cuh"
#include "kernels/cuda_sampling.h"

namespace df11::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

// A (value, id) candidate; better = earlier in sampling::Before's order.
struct Candidate {
  float value;
  int32_t id;  // -1: none
};

__device__ Candidate Better(Candidate a, Candidate b) {
  if (a.id < 0) return b;
  if (b.id < 0) return a;
  return sampling::Before(b.value, b.id, a.value, a.id) ? b : a;
}

// The best candidate of the block (every thread gets it). The order is total, so the result does
// not depend on how the reduction pairs them.
__device__ Candidate BlockBest(Candidate c) {
  __shared__ Candidate warp_best[kWarps];
  __shared__ Candidate best;
  for (int offset = 16; offset > 0; offset /= 2) {
    Candidate other{__shfl_down_sync(0xffffffffu, c.value, offset), __shfl_down_sync(0xffffffffu, c.id, offset)};
    c = Better(c, other);
  }
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = c;
  __syncthreads();
  if (threadIdx.x < 32) {
    c = threadIdx.x < blockDim.x / 32 ? warp_best[threadIdx.x] : Candidate{0.0f, -1};
    for (int offset = 16; offset > 0; offset /= 2) {
      Candidate other{__shfl_down_sync(0xffffffffu, c.value, offset), __shfl_down_sync(0xffffffffu, c.id, offset)};
      c = Better(c, other);
    }
    if (threadIdx.x == 0) best = c;
  }
  __syncthreads();
  const Candidate result = best;
  __syncthreads();  // `best` may be written again by the next call
  return result;
}

// f() evaluated by thread 0, its value handed to every thread of the block.
template <typename T, typename F>
__device__ T OnThreadZero(F f) {
  __shared__ T value;
  __syncthreads();
  if (threadIdx.x == 0) value = f();
  __syncthreads();
  const T out = value;
  __syncthreads();  // `value` may be written again by the next call
  return out;
}

// The smallest value of the block.
__device__ int64_t BlockMin(int64_t v) {
  __shared__ int64_t warp_min[kWarps];
  for (int offset = 16; offset > 0; offset /= 2)
    v = min(v, static_cast<int64_t>(__shfl_down_sync(0xffffffffu, v, offset)));
  if (threadIdx.x % 32 == 0) warp_min[threadIdx.x / 32] = v;
  return OnThreadZero<int64_t>([&] {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) v = min(v, warp_min[w]);
    return v;
  });
}

// sampling::ChunkedSum on the block: chunk c summed by one thread into sums[c], the chunk sums
// added in order by thread 0. sums: ceil(n / kSampleChunk) doubles of shared memory.
template <typename F>
__device__ void ChunkSums(int64_t n, F f, double* sums) {
  const int64_t chunks = (n + kSampleChunk - 1) / kSampleChunk;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    double s = 0;
    const int64_t end = min(n, (c + 1) * kSampleChunk);
    for (int64_t i = c * kSampleChunk; i < end; ++i) s += f(i);
    sums[c] = s;
  }
  __syncthreads();
}

template <typename F>
__device__ double BlockChunkedSum(int64_t n, F f, double* sums) {
  ChunkSums(n, f, sums);
  return OnThreadZero<double>([&] {
    double total = 0;
    for (int64_t c = 0; c < (n + kSampleChunk - 1) / kSampleChunk; ++c) total += sums[c];
    return total;
  });
}

// sampling::PrefixCut on the block: chunk sums in parallel; thread 0 finds the chunk, warp 0
// evaluates its terms, lane 0 adds them in order.
template <typename F>
__device__ int64_t BlockPrefixCut(int64_t n, double target, bool strict, F f, double* sums) {
  __shared__ double terms[kSampleChunk];
  __shared__ int64_t result;
  __shared__ int64_t found_chunk;
  __shared__ double found_before;
  ChunkSums(n, f, sums);
  auto meets = [&](double mass) { return strict ? mass > target : mass >= target; };
  if (threadIdx.x == 0) {
    found_chunk = -1;
    double before = 0;
    for (int64_t c = 0; c < (n + kSampleChunk - 1) / kSampleChunk; ++c) {
      if (meets(before + sums[c])) {
        found_chunk = c;
        break;
      }
      before += sums[c];
    }
    found_before = before;
    result = n;
  }
  __syncthreads();
  if (found_chunk >= 0 && threadIdx.x < 32) {
    const int64_t begin = found_chunk * kSampleChunk, end = min(n, begin + kSampleChunk);
    for (int64_t i = begin + threadIdx.x; i < end; i += 32) terms[i - begin] = f(i);
    __syncwarp();
    if (threadIdx.x == 0) {
      double partial = 0;
      for (int64_t i = begin; i < end; ++i) {
        partial += terms[i - begin];
        if (meets(found_before + partial)) {
          result = i + 1;
          break;
        }
      }
    }
  }
  __syncthreads();
  const int64_t out = result;
  __syncthreads();
  return out;
}

// One slice of a row's raw logits: whether it has NaN and its best candidate.
struct SliceScan {
  Candidate best;
  int32_t nan;
};
// Slices per row: the rows' two passes over the vocabulary (NaN check, greedy argmax) spread
// over the GPU instead of one block a row (H100, 151,936 logits: RowKernel took ~65 us alone).
constexpr int kSlices = 64;
constexpr int kSliceThreads = 256;

// Grid (kSlices, rows): slice blockIdx.x of row blockIdx.y, its part of ceil(vocab / kSlices).
__global__ void __launch_bounds__(kSliceThreads) SliceKernel(const float* logits, int64_t vocab, SliceScan* scans) {
  const float* x = logits + blockIdx.y * vocab;
  const int64_t len = (vocab + kSlices - 1) / kSlices, begin = blockIdx.x * len, end = min(vocab, begin + len);
  Candidate best{0.0f, -1};
  int nan = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kSliceThreads) {
    const float v = x[i];
    nan |= isnan(v) ? 1 : 0;
    best = Better(best, {v, static_cast<int32_t>(i)});
  }
  nan = __syncthreads_or(nan);
  best = BlockBest(best);
  if (threadIdx.x == 0) scans[blockIdx.y * kSlices + blockIdx.x] = {best, nan};
}

// Per row: NaN check, the raw row's log-softmax statistics and top logprobs, penalties in place,
// and the greedy token. Grid: rows; block: kThreads; dynamic shared: chunk sums of the vocabulary.
// scans: SliceKernel's kSlices partials of each row, or null (then the block scans the row itself).
// The candidates' order is total, so the best of the slices' bests is the row's best: the same
// NaN verdict, maximum and greedy token either way (rows with penalties scan their penalised row).
__global__ void RowKernel(float* logits, int64_t vocab, const DeviceSampleRow* params, PenaltyEntry* entries,
                          const SliceScan* scans, SampledRow* out) {
  extern __shared__ double sums[];
  float* x = logits + blockIdx.x * vocab;
  const DeviceSampleRow& p = params[blockIdx.x];
  SampledRow& o = out[blockIdx.x];
  const SliceScan* scan = scans != nullptr ? scans + blockIdx.x * kSlices : nullptr;
  // The best candidate of the row as it is now; the best raw one (before penalties), from the
  // slices' partials when there are some.
  auto row_best = [&] {
    Candidate best{0.0f, -1};
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) best = Better(best, {x[i], static_cast<int32_t>(i)});
    return BlockBest(best);
  };
  auto raw_best = [&] {
    if (scan == nullptr) return row_best();
    return BlockBest(threadIdx.x < kSlices ? scan[threadIdx.x].best : Candidate{0.0f, -1});
  };
  int nan = 0;
  if (scan != nullptr) {
    if (threadIdx.x < kSlices) nan = scan[threadIdx.x].nan;
  } else {
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) nan |= isnan(x[i]) ? 1 : 0;
  }
  if (__syncthreads_or(nan)) {
    if (threadIdx.x == 0) o.error = 1;
    return;
  }
  if (threadIdx.x == 0) {
    o.error = 0;
    o.num_top = 0;
  }
  if (p.want_logprobs) {
    const double max_logit = raw_best().value;
    const double sum = BlockChunkedSum(
        vocab, [&](int64_t i) { return sampling::SampleExp(static_cast<double>(x[i]) - max_logit); }, sums);
    const double log_sum = sampling::SampleLog(sum) + max_logit;
    auto logprob = [&](int64_t i) { return static_cast<float>(static_cast<double>(x[i]) - log_sum); };
    const int n = static_cast<int>(p.params.top_logprobs < vocab ? p.params.top_logprobs : vocab);
    Candidate previous{0.0f, -1};
    for (int j = 0; j < n; ++j) {
      Candidate c{0.0f, -1};
      for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
        const Candidate here{logprob(i), static_cast<int32_t>(i)};
        if (previous.id < 0 || sampling::Before(previous.value, previous.id, here.value, here.id)) c = Better(c, here);
      }
      previous = BlockBest(c);
      if (threadIdx.x == 0) {
        o.top_ids[j] = previous.id;
        o.top_logprobs[j] = previous.value;
      }
    }
    if (threadIdx.x == 0) {
      o.num_top = n;
      o.log_sum = log_sum;
    }
  }
  for (int k = threadIdx.x; k < p.penalty_count; k += blockDim.x) {
    PenaltyEntry& e = entries[p.penalty_begin + k];
    e.raw = x[e.token];
    x[e.token] = sampling::Penalized(e.raw, e, p.params);
  }
  __syncthreads();  // the block's global writes are visible to the block from here
  if (p.params.temperature == 0.0f) {
    const Candidate best = p.penalty_count == 0 ? raw_best() : row_best();
    if (threadIdx.x == 0) o.token = best.id;
  }
}

// Sort input of the group's rows: keys (the penalised logits, -0 as +0 so the radix order equals
// the numeric one) and ids. Grid: rows.
__global__ void KeysKernel(const float* logits, int64_t vocab, const DeviceSampleRow* params, const SampledRow* out,
                           int64_t group_first, int64_t group_rows, float* keys, int32_t* ids) {
  const int64_t slot = params[blockIdx.x].sort_slot - group_first;
  if (slot < 0 || slot >= group_rows || out[blockIdx.x].error) return;
  const float* x = logits + blockIdx.x * vocab;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    keys[slot * vocab + i] = x[i] == 0.0f ? 0.0f : x[i];
    ids[slot * vocab + i] = static_cast<int32_t>(i);
  }
}

__global__ void OffsetsKernel(int64_t vocab, int32_t* offsets) {
  if (threadIdx.x <= kSortGroupRows) offsets[threadIdx.x] = static_cast<int32_t>(threadIdx.x * vocab);
}

// The draw of the group's rows over their sorted keys (sampling.h: top-k, top-p, min-p, inverse
// CDF). Grid: rows; block: kThreads; dynamic shared: chunk sums of the vocabulary.
__global__ void DrawKernel(int64_t vocab, const DeviceSampleRow* params, int64_t group_first, int64_t group_rows,
                           const float* sorted_keys, const int32_t* sorted_ids, SampledRow* out) {
  extern __shared__ double sums[];
  const DeviceSampleRow& row = params[blockIdx.x];
  const int64_t slot = row.sort_slot - group_first;
  if (slot < 0 || slot >= group_rows || out[blockIdx.x].error) return;
  const SamplingParams& p = row.params;
  const float* keys = sorted_keys + slot * vocab;
  const float max_logit = keys[0];
  auto weight = [&](int64_t i) { return sampling::Weight(keys[i], max_logit, p.temperature); };
  int64_t n = p.top_k > 0 && p.top_k < vocab ? p.top_k : vocab;
  const double z = BlockChunkedSum(n, weight, sums);
  auto q = [&](int64_t i) { return weight(i) / z; };
  if (p.top_p < 1.0f) n = BlockPrefixCut(n, p.top_p, /*strict=*/false, q, sums);
  if (p.min_p > 0.0f) {
    const double floor = p.min_p * q(0);
    int64_t first = n;
    for (int64_t i = 1 + threadIdx.x; i < n; i += blockDim.x) {
      if (q(i) < floor) {
        first = i;
        break;
      }
    }
    n = BlockMin(first);
  }
  const double kept = BlockChunkedSum(n, q, sums);
  const double u = sampling::UniformFromCounter(p.seed, row.step);
  const int64_t m = BlockPrefixCut(
      n, u, /*strict=*/true, [&](int64_t i) { return q(i) / kept; }, sums);
  if (threadIdx.x == 0) out[blockIdx.x].token = sorted_ids[slot * vocab + m - 1];
}

// The chosen token's logprob: its raw logit (PenaltyEntry::raw when it was penalised) minus the
// row's log-sum. Grid: rows; block: 256.
__global__ void FinishKernel(const float* logits, int64_t vocab, const DeviceSampleRow* params,
                             const PenaltyEntry* entries, SampledRow* out) {
  __shared__ float raw;
  const DeviceSampleRow& p = params[blockIdx.x];
  SampledRow& o = out[blockIdx.x];
  if (o.error || !p.want_logprobs) return;
  if (threadIdx.x == 0) raw = logits[blockIdx.x * vocab + o.token];
  __syncthreads();
  for (int k = threadIdx.x; k < p.penalty_count; k += blockDim.x) {
    const PenaltyEntry& e = entries[p.penalty_begin + k];
    if (e.token == o.token) raw = e.raw;  // entries are distinct: at most one writer
  }
  __syncthreads();
  if (threadIdx.x == 0) o.logprob = static_cast<float>(static_cast<double>(raw) - o.log_sum);
}

// The workspace: keys and ids in and out for one group, the segment offsets, then CUB's storage.
struct Workspace {
  float *keys_in, *keys_out;
  int32_t *ids_in, *ids_out, *offsets;
  void* cub;
  size_t cub_bytes;
};

uint64_t Align(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

size_t CubBytes(int64_t vocab) {
  size_t bytes = 0;
  cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(kSortGroupRows * vocab),
      kSortGroupRows, static_cast<const int32_t*>(nullptr), static_cast<const int32_t*>(nullptr), 0, 32);
  return bytes;
}

Workspace Carve(void* base, int64_t vocab) {
  const uint64_t array = Align(static_cast<uint64_t>(kSortGroupRows) * vocab * 4);
  char* p = static_cast<char*>(base);
  Workspace w;
  w.keys_in = reinterpret_cast<float*>(p);
  w.keys_out = reinterpret_cast<float*>(p + array);
  w.ids_in = reinterpret_cast<int32_t*>(p + 2 * array);
  w.ids_out = reinterpret_cast<int32_t*>(p + 3 * array);
  w.offsets = reinterpret_cast<int32_t*>(p + 4 * array);
  w.cub = p + 4 * array + Align((kSortGroupRows + 1) * 4);
  w.cub_bytes = CubBytes(vocab);
  return w;
}

}  // namespace

uint64_t SamplingWorkspaceBytes(int64_t vocab) {
  return 4 * Align(static_cast<uint64_t>(kSortGroupRows) * vocab * 4) + Align((kSortGroupRows + 1) * 4) +
         Align(CubBytes(vocab));
}

Status SampleRows(float* logits, int64_t rows, int64_t vocab, const DeviceSampleRow* params, PenaltyEntry* entries,
                  int64_t num_sort_slots, void* workspace, uint64_t workspace_bytes, SampledRow* out,
                  GpuStream stream) {
  if (rows <= 0) return Status::Ok();
  if (vocab <= 0 || vocab * kSortGroupRows > INT32_MAX) {
    return InvalidArgument("SampleRows: vocabulary of " + std::to_string(vocab) + " tokens out of range");
  }
  if (workspace_bytes < SamplingWorkspaceBytes(vocab)) {
    return InvalidArgument("SampleRows: workspace of " + std::to_string(workspace_bytes) + " bytes, needs " +
                           std::to_string(SamplingWorkspaceBytes(vocab)));
  }
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  const size_t sums_bytes = (vocab + kSampleChunk - 1) / kSampleChunk * sizeof(double);
  // The slices' partials go where the first sort group's keys go later (KeysKernel runs after
  // RowKernel has read them); rows past what that holds scan in RowKernel.
  Workspace w = Carve(workspace, vocab);
  SliceScan* scans = nullptr;
  if (static_cast<uint64_t>(rows) * kSlices * sizeof(SliceScan) <= static_cast<uint64_t>(kSortGroupRows) * vocab * 4) {
    scans = reinterpret_cast<SliceScan*>(w.keys_in);
    SliceKernel<<<dim3(kSlices, static_cast<unsigned>(rows)), kSliceThreads, 0, s>>>(logits, vocab, scans);
    DF11_RETURN_IF_ERROR(CheckLaunch("sampler slices"));
  }
  RowKernel<<<rows, kThreads, sums_bytes, s>>>(logits, vocab, params, entries, scans, out);
  DF11_RETURN_IF_ERROR(CheckLaunch("sampler rows"));
  if (num_sort_slots > 0) {
    OffsetsKernel<<<1, 32, 0, s>>>(vocab, w.offsets);
    DF11_RETURN_IF_ERROR(CheckLaunch("sampler offsets"));
    for (int64_t first = 0; first < num_sort_slots; first += kSortGroupRows) {
      const int64_t group = std::min<int64_t>(kSortGroupRows, num_sort_slots - first);
      KeysKernel<<<rows, kThreads, 0, s>>>(logits, vocab, params, out, first, group, w.keys_in, w.ids_in);
      DF11_RETURN_IF_ERROR(CheckLaunch("sampler keys"));
      size_t cub_bytes = w.cub_bytes;
      const cudaError_t err = cub::DeviceSegmentedRadixSort::SortPairsDescending(
          w.cub, cub_bytes, w.keys_in, w.keys_out, w.ids_in, w.ids_out, static_cast<int>(group * vocab),
          static_cast<int>(group), w.offsets, w.offsets + 1, 0, 32, s);
      DF11_RETURN_IF_ERROR(CheckCuda(err, "sampler sort"));
      DrawKernel<<<rows, kThreads, sums_bytes, s>>>(vocab, params, first, group, w.keys_out, w.ids_out, out);
      DF11_RETURN_IF_ERROR(CheckLaunch("sampler draw"));
    }
  }
  FinishKernel<<<rows, 256, 0, s>>>(logits, vocab, params, entries, out);
  return CheckLaunch("sampler finish");
}

}  // namespace df11::cuda
