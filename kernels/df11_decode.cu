// CUDA DF11 decoder. Kernel first, then launchers.
//
// One thread block of 512 threads decodes one 4 KiB chunk at a time (persistent grid, striding
// over chunks); thread t owns window t of the chunk (8 stream bytes, plus 4 bytes of look-ahead
// for a code that starts at its end). Per chunk:
//   1. decode: each thread walks its window once with a 12-bit shared-memory table (one lookup for
//      almost every code; the published LUTs only for codes the table cannot settle), staging
//      the symbols in shared memory (<= 64 per window);
//   2. scan: a block-wide exclusive sum of the per-window counts gives each window's first element;
//   3. scatter: exponents move into a chunk-wide array ordered by element;
//   4. write: threads sweep the chunk's elements 8 at a time, join each exponent with its
//      sign_mantissa byte and store 16 bytes of BF16.
// The reference kernel decodes every window twice (count, then write) and reads LUTs from global
// memory at every step; here each code is decoded once from shared memory.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <type_traits>
#include <vector>

#include "kernels/cuda_upload.h"
#include "kernels/df11_decode_cuda.h"
#include "kernels/df11_device.cuh"
#include "kernels/df11_fast_table.h"
#include "kernels/gpu.h"

namespace df11 {
namespace {

constexpr int kThreads = 512;                 // windows per chunk (= the format's threads_per_block)
constexpr int kMaxCodesPerWindow = 64;        // codes are >= 1 bit and start inside 64 bits
// Staging: each thread's decoded symbols sit contiguously in its own 68-byte row (64 codes, one
// spare for the pair store, padding); 68 = 17 words, odd, so lanes at equal depth hit distinct banks.
constexpr int kStagingStride = 68;
static_assert(kStagingStride >= kMaxCodesPerWindow + 1, "a window's codes and the pair store's spare fit its row");
constexpr int kTableBytes = kFastTableSize * 4;
constexpr int kScanBytes = 32 * 4;
constexpr int kStagingBytes = kThreads * kStagingStride;  // multiple of 16: `exps` stays 16-byte aligned

__device__ __forceinline__ uint32_t Bswap(uint32_t x) { return __byte_perm(x, 0, 0x0123); }

// Inclusive block-wide sum of `v` over 512 threads; `scratch` holds 16 warp totals.
__device__ __forceinline__ uint32_t BlockInclusiveSum(uint32_t v, uint32_t* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t u = __shfl_up_sync(0xFFFFFFFFu, v, d);
    if (lane >= d) v += u;
  }
  if (lane == 31) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    uint32_t w = lane < kThreads / 32 ? scratch[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const uint32_t u = __shfl_up_sync(0xFFFFFFFFu, w, d);
      if (lane >= d) w += u;
    }
    if (lane < kThreads / 32) scratch[lane] = w;
  }
  __syncthreads();
  return v + (warp > 0 ? scratch[warp - 1] : 0);
}

// What a thread needs to start a chunk: its window's 12 stream bytes, gap, and the chunk bounds.
struct WindowLoad {
  uint32_t w0, w1, w2;     // big-endian words: own 8 bytes, then 4 bytes of look-ahead
  uint32_t gap;
  uint32_t start, stop;    // chunk_starts[chunk], chunk_starts[chunk + 1]
};

__device__ __forceinline__ WindowLoad LoadWindow(const DeviceUnit& u, uint32_t chunk, int tid) {
  WindowLoad r;
  const uint64_t window = static_cast<uint64_t>(chunk) * kThreads + tid;
  const uint2 own = *reinterpret_cast<const uint2*>(u.stream + window * 8);
  r.w0 = own.x;
  r.w1 = own.y;
  r.w2 = *reinterpret_cast<const uint32_t*>(u.stream + window * 8 + 8);
  const uint64_t gbit = window * 5;
  r.gap = (static_cast<uint32_t>(u.gaps[gbit / 8]) << 8 | u.gaps[gbit / 8 + 1]) >> (11 - gbit % 8);
  r.start = u.chunk_starts[chunk];
  r.stop = u.chunk_starts[chunk + 1];
  return r;
}

constexpr int kPrefetchGroups = 4;  // sign_mantissa groups of 8 prefetched per thread (16K elements/chunk)

// Work `index` of a launch: one range and one chunk it touches. Without `items`: the range
// [begin, end) to `out` and chunk first_chunk + index; with: items[index].
struct Work {
  uint32_t chunk;
  uint64_t begin, end;
  uint16_t* out;
};

__device__ __forceinline__ Work WorkAt(uint32_t index, uint64_t begin, uint64_t end, uint32_t first_chunk,
                                       uint16_t* out, const Df11DecodeItem* items) {
  if (items == nullptr) return Work{first_chunk + index, begin, end, out};
  const Df11DecodeItem it = items[index];
  return Work{it.chunk, it.begin, it.end, out + it.out_offset};
}

template <int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    Df11DecodeKernel(DeviceUnit u, uint64_t range_begin, uint64_t range_end, uint32_t first_chunk, uint32_t num_work,
                     uint16_t* __restrict__ range_out, const Df11DecodeItem* __restrict__ items, bool vector_ok) {
  extern __shared__ __align__(16) uint8_t smem[];
  uint32_t* table = reinterpret_cast<uint32_t*>(smem);
  uint32_t* scan = reinterpret_cast<uint32_t*>(smem + kTableBytes);
  uint8_t* staging = smem + kTableBytes + kScanBytes;
  uint8_t* exps = staging + kStagingBytes;  // [max_chunk_elements + 16], element e at e - (start & ~7)
  const int tid = threadIdx.x;

  uint32_t index = blockIdx.x;
  Work work;
  WindowLoad next;
  if (index < num_work) {
    work = WorkAt(index, range_begin, range_end, first_chunk, range_out, items);
    next = LoadWindow(u, work.chunk, tid);
  }
  for (int i = tid; i < kTableBytes / 16; i += kThreads) {
    reinterpret_cast<uint4*>(table)[i] = reinterpret_cast<const uint4*>(u.pair_table)[i];
  }
  __syncthreads();

  for (; index < num_work; index += gridDim.x) {
    const WindowLoad cur = next;
    const uint64_t begin = work.begin, end = work.end;
    uint16_t* const out = work.out;
    if (index + gridDim.x < num_work) {  // hidden by this chunk
      work = WorkAt(index + gridDim.x, range_begin, range_end, first_chunk, range_out, items);
      next = LoadWindow(u, work.chunk, tid);
    }
    const uint32_t start = cur.start, stop = cur.stop;
    const uint64_t lo = max(static_cast<uint64_t>(start), begin), hi = min(static_cast<uint64_t>(stop), end);
    const uint64_t g_first = lo / 8, g_last = lo < hi ? (hi + 7) / 8 : g_first;
    uint2 sm[kPrefetchGroups];  // sign_mantissa of this thread's first output groups, loaded early
#pragma unroll
    for (int k = 0; k < kPrefetchGroups; ++k) {
      const uint64_t g = g_first + tid + k * kThreads;
      if (g < g_last) sm[k] = *reinterpret_cast<const uint2*>(u.sign_mantissa + g * 8);
    }

    // 1. Decode this thread's window once, staging symbols in shared memory.
    const uint32_t w0 = Bswap(cur.w0), w1 = Bswap(cur.w1), w2 = Bswap(cur.w2);
    uint8_t* row = staging + tid * kStagingStride;
    uint32_t count = 0;
    for (uint32_t p = cur.gap & 0x1F; p < 64;) {
      const uint32_t peek = p < 32 ? __funnelshift_l(w1, w0, p) : __funnelshift_l(w2, w1, p - 32);
      uint32_t e = table[peek >> (32 - kFastTableBits)];
      if (e == 0) e = WalkLuts(u.luts, u.num_luts, peek) | 1u << 28;  // rare: long or unsettled code
      // Up to two codes per lookup; the second counts only if it starts inside this window.
      const uint32_t bits1 = (e >> 16) & 63;
      const uint32_t take2 = (e >> 29) & (p + bits1 < 64);
      row[count] = static_cast<uint8_t>(e);
      row[count + 1] = static_cast<uint8_t>(e >> 8);
      count += 1 + take2;
      p += bits1 + (take2 ? (e >> 22) & 63 : 0);
    }

    // 2. First element of this window.
    const uint32_t first = start + BlockInclusiveSum(count, scan) - count;

    // 3. Scatter real elements (phantom codes past `stop` are dropped) into `exps`, 4 bytes per
    //    store where the destination is word-aligned: the row is read word by word and realigned.
    const uint32_t base = start & ~7u;
    const uint32_t keep = first >= stop ? 0 : min(count, stop - first);
    const uint32_t dst = first - base;
    const uint32_t head = min(keep, (4 - (dst & 3)) & 3);
    for (uint32_t i = 0; i < head; ++i) exps[dst + i] = row[i];
    const uint32_t words = (keep - head) / 4;
    const uint32_t* src = reinterpret_cast<const uint32_t*>(row);  // row is 4-byte aligned
    const uint32_t selector = 0x3210 + 0x1111 * head;                // bytes head..head+3 of (hi:lo)
    uint32_t lo_word = src[0];
    uint32_t* dst_words = reinterpret_cast<uint32_t*>(exps + dst + head);
    for (uint32_t j = 0; j < words; ++j) {
      const uint32_t hi_word = src[j + 1];
      dst_words[j] = __byte_perm(lo_word, hi_word, selector);
      lo_word = hi_word;
    }
    for (uint32_t i = head + 4 * words; i < keep; ++i) exps[dst + i] = row[i];
    __syncthreads();

    // 4. Write [lo, hi) 8 elements at a time: the prefetched groups, then any remainder.
    auto write_group = [&](uint64_t g, uint2 s) {
      const uint64_t e0 = g * 8;
      if (vector_ok && e0 >= lo && e0 + 8 <= hi) {
        const uint2 ex = *reinterpret_cast<const uint2*>(exps + (e0 - base));
        const uint2 a = Compose4(ex.x, s.x), b = Compose4(ex.y, s.y);
        *reinterpret_cast<uint4*>(out + (e0 - begin)) = make_uint4(a.x, a.y, b.x, b.y);
      } else {
        for (uint64_t e = max(e0, lo); e < min(e0 + 8, hi); ++e) {
          const uint32_t j = static_cast<uint32_t>(e - e0);
          const uint32_t sb = ((j < 4 ? s.x : s.y) >> (8 * (j & 3))) & 0xFF, x = exps[e - base];
          out[e - begin] = static_cast<uint16_t>(((sb & 0x80) << 8) | (x << 7) | (sb & 0x7F));
        }
      }
    };
#pragma unroll
    for (int k = 0; k < kPrefetchGroups; ++k) {
      const uint64_t g = g_first + tid + k * kThreads;
      if (g < g_last) write_group(g, sm[k]);
    }
    for (uint64_t g = g_first + tid + kPrefetchGroups * kThreads; g < g_last; g += kThreads) {
      write_group(g, *reinterpret_cast<const uint2*>(u.sign_mantissa + g * 8));
    }
    __syncthreads();  // staging and exps are reused by the next chunk
  }
}

}  // namespace

// ---- launchers ----

uint64_t Df11DecodeSharedBytes(const DeviceUnit& unit) {
  return kTableBytes + kScanBytes + kStagingBytes + ((unit.max_chunk_elements + 16 + 15) & ~15u);
}

namespace {

using KernelFn = void (*)(DeviceUnit, uint64_t, uint64_t, uint32_t, uint32_t, uint16_t*, const Df11DecodeItem*, bool);

struct KernelConfig {
  KernelFn kernel = nullptr;
  uint64_t smem = 0;
  uint32_t max_grid = 0;  // SMs x resident blocks per SM
};

// The kernel variant and its persistent-grid size for this unit's shared memory on this device.
StatusOr<KernelConfig> Configure(const DeviceUnit& unit) {
  const uint64_t smem = Df11DecodeSharedBytes(unit);
  // Register budget variant: 3 blocks/SM (<= 42 registers) by default; DF11_DECODE_MIN_BLOCKS=2
  // gives the compiler 64 registers (benchmarks compare the two).
  static const int min_blocks = [] {
    const char* v = std::getenv("DF11_DECODE_MIN_BLOCKS");
    return v != nullptr && std::string(v) == "2" ? 2 : 3;
  }();
  KernelFn kernel = min_blocks == 2 ? Df11DecodeKernel<2> : Df11DecodeKernel<3>;
  static thread_local int configured_device = -1, blocks_per_sm = 0, sms = 0;
  static thread_local uint64_t configured_smem = 0;
  int device = 0;
  DF11_CUDA_RETURN(cudaGetDevice(&device));
  if (device != configured_device || smem != configured_smem) {
    DF11_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
    DF11_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    DF11_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, kThreads, smem));
    if (blocks_per_sm < 1) return Internal("DF11 decode kernel cannot run with " + std::to_string(smem) + " bytes of shared memory");
    configured_device = device;
    configured_smem = smem;
  }
  return KernelConfig{kernel, smem, static_cast<uint32_t>(sms * blocks_per_sm)};
}

// Chunks [c0, c1) that elements [begin, end) (begin < end) touch.
std::pair<uint32_t, uint32_t> ChunksOf(const UnitLayout& layout, uint64_t begin, uint64_t end) {
  const auto& starts = layout.chunk_starts;
  const uint32_t c0 = static_cast<uint32_t>(
      std::upper_bound(starts.begin(), starts.begin() + layout.num_chunks, begin) - starts.begin() - 1);
  const uint32_t c1 = static_cast<uint32_t>(
      std::lower_bound(starts.begin(), starts.begin() + layout.num_chunks, end) - starts.begin());
  return {c0, c1};
}

}  // namespace

Status LaunchDf11Decode(const DeviceUnit& unit, const UnitLayout& layout, uint64_t begin, uint64_t end,
                        uint16_t* out, GpuStream stream) {
  if (begin > end || end > unit.num_elements) {
    return OutOfRange("decode range [" + std::to_string(begin) + ", " + std::to_string(end) + ") outside [0, " +
                      std::to_string(unit.num_elements) + ")");
  }
  if (begin == end) return Status::Ok();
  if (unit.stream == nullptr) return FailedPrecondition("DF11 decode: the unit was kept without its stream (WithoutStream)");
  const auto [c0, c1] = ChunksOf(layout, begin, end);
  DF11_ASSIGN_OR_RETURN(const KernelConfig cfg, Configure(unit));
  const uint32_t chunks = c1 - c0;
  const uint32_t grid = std::min<uint32_t>(chunks, cfg.max_grid);
  const bool vector_ok = begin % 8 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  cfg.kernel<<<grid, kThreads, cfg.smem, reinterpret_cast<cudaStream_t>(stream)>>>(unit, begin, end, c0, chunks, out,
                                                                                   nullptr, vector_ok);
  DF11_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

StatusOr<std::vector<Df11DecodeItem>> Df11DecodeItems(const UnitLayout& layout, std::span<const Df11Range> ranges,
                                                      bool* vector_ok) {
  std::vector<Df11DecodeItem> items;
  if (vector_ok != nullptr) *vector_ok = true;
  for (const Df11Range& r : ranges) {
    if (r.begin > r.end || r.end > layout.num_elements) {
      return OutOfRange("decode range [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                        ") outside [0, " + std::to_string(layout.num_elements) + ")");
    }
    if (r.begin == r.end) continue;
    if (vector_ok != nullptr && (r.begin % 8 != 0 || r.out_offset % 8 != 0)) *vector_ok = false;
    const auto [c0, c1] = ChunksOf(layout, r.begin, r.end);
    for (uint32_t c = c0; c < c1; ++c) items.push_back({r.begin, r.end, r.out_offset, c, 0});
  }
  return items;
}

Status LaunchDf11DecodeItems(const DeviceUnit& unit, const Df11DecodeItem* items, uint32_t num_items, bool vector_ok,
                             uint16_t* out, GpuStream stream) {
  if (num_items == 0) return Status::Ok();
  if (unit.stream == nullptr) return FailedPrecondition("DF11 decode: the unit was kept without its stream (WithoutStream)");
  DF11_ASSIGN_OR_RETURN(const KernelConfig cfg, Configure(unit));
  const uint32_t grid = std::min<uint32_t>(num_items, cfg.max_grid);
  vector_ok = vector_ok && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  cfg.kernel<<<grid, kThreads, cfg.smem, reinterpret_cast<cudaStream_t>(stream)>>>(unit, 0, 0, 0, num_items, out, items,
                                                                                   vector_ok);
  DF11_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

// ---- upload ----

DeviceUnitBuffer::~DeviceUnitBuffer() {
  if (base_ != nullptr) cudaFree(base_);
}

DeviceUnitBuffer::DeviceUnitBuffer(DeviceUnitBuffer&& other) noexcept { *this = std::move(other); }

DeviceUnitBuffer& DeviceUnitBuffer::operator=(DeviceUnitBuffer&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) cudaFree(base_);
    unit_ = other.unit_;
    base_ = other.base_;
    bytes_ = other.bytes_;
    released_base_ = other.released_base_;
    layout_ = std::move(other.layout_);
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

StatusOr<DeviceUnitBuffer> DeviceUnitBuffer::Upload(const UnitView& view, const UnitLayout& layout,
                                                    cuda::HostUploader* uploader) {
  if (layout.threads_per_block != kThreads) {
    return InvalidArgument("the CUDA decoder supports threads_per_block 512 (the published value), got " +
                           std::to_string(layout.threads_per_block));
  }
  auto align = [](uint64_t v) { return (v + 255) & ~uint64_t{255}; };
  const uint64_t chunk_bytes = uint64_t{kThreads} * kBytesPerWindow;
  const uint64_t stream_bytes = layout.num_chunks * chunk_bytes + 16;
  const uint64_t gap_bytes = layout.num_chunks * kThreads * 5 / 8 + 8;
  const uint64_t off_table = 0;
  const uint64_t off_luts = align(off_table + kTableBytes);
  const uint64_t off_stream = align(off_luts + view.luts.size());
  const uint64_t off_sm = align(off_stream + stream_bytes);
  const uint64_t off_starts = align(off_sm + layout.num_elements + 16);
  const uint64_t off_gaps = align(off_starts + 4 * layout.chunk_starts.size());
  const uint64_t total = align(off_gaps + gap_bytes);

  // Each part copied straight from where it lies (the checkpoint's mapped file) and the bytes
  // between parts zeroed: no host copy of the unit. A zeroed host image of the whole unit, filled
  // and copied in one call, took the 8B model's units 9.2-9.4 s to the device against 1.4-1.7 s
  // this way (H200, bench/results/model_load_h200_units_upload.log). The two big parts go through
  // the uploader's staging on several host threads when the caller passes one (the model's load);
  // its streams are unordered with the legacy stream the zeros and small parts go on, so no byte
  // is written by both (zeroing the whole buffer first, then waiting for it, made the load slower).
  DeviceUnitBuffer buf;
  DF11_CUDA_RETURN(cudaMalloc(&buf.base_, total));
  buf.bytes_ = total;
  auto* b = static_cast<uint8_t*>(buf.base_);
  const auto table = BuildPairTable(view.luts);
  struct Part {
    uint64_t offset;
    const void* src;
    uint64_t bytes;
    bool big;
  };
  const Part parts[] = {
      {off_table, table.data(), kTableBytes, false},
      {off_luts, view.luts.data(), view.luts.size(), false},
      {off_stream, view.encoded_exponent.data(), std::min<uint64_t>(view.encoded_exponent.size(), stream_bytes), true},
      {off_sm, view.sign_mantissa.data(), std::min<uint64_t>(view.sign_mantissa.size(), off_starts - off_sm), true},
      {off_starts, layout.chunk_starts.data(), std::min<uint64_t>(4 * layout.chunk_starts.size(), off_gaps - off_starts),
       false},
      {off_gaps, view.gaps.data(), std::min<uint64_t>(view.gaps.size(), gap_bytes), false},
  };
  for (size_t i = 0; i < std::size(parts); ++i) {
    const uint64_t end = i + 1 < std::size(parts) ? parts[i + 1].offset : total;
    const uint64_t used = parts[i].offset + parts[i].bytes;
    if (used < end) DF11_CUDA_RETURN(cudaMemset(b + used, 0, end - used));
  }
  for (const Part& p : parts) {
    if (p.bytes == 0) continue;
    if (p.big && uploader != nullptr) {
      DF11_RETURN_IF_ERROR(uploader->Copy(b + p.offset, p.src, p.bytes));
    } else {
      DF11_CUDA_RETURN(cudaMemcpy(b + p.offset, p.src, p.bytes, cudaMemcpyHostToDevice));
    }
  }
  DeviceUnit& u = buf.unit_;
  u.pair_table = reinterpret_cast<const uint32_t*>(b + off_table);
  u.luts = b + off_luts;
  u.stream = b + off_stream;
  u.sign_mantissa = b + off_sm;
  u.chunk_starts = reinterpret_cast<const uint32_t*>(b + off_starts);
  u.gaps = b + off_gaps;
  u.num_elements = layout.num_elements;
  u.num_bytes = layout.num_bytes;
  u.num_chunks = static_cast<uint32_t>(layout.num_chunks);
  u.max_chunk_elements = layout.max_chunk_elements;
  u.num_luts = layout.num_luts;
  u.threads_per_block = layout.threads_per_block;
  buf.layout_ = layout;
  return buf;
}

void DeviceUnitBuffer::Release() {
  if (base_ == nullptr) return;
  cudaFree(base_);
  released_base_ = base_;
  base_ = nullptr;
}

Status DeviceUnitBuffer::Reacquire(const void* host, GpuStream stream) {
  if (base_ != nullptr) return FailedPrecondition("DeviceUnitBuffer::Reacquire: the unit is not released");
  void* fresh = nullptr;
  DF11_CUDA_RETURN(cudaMalloc(&fresh, bytes_));
  base_ = fresh;
  DF11_CUDA_RETURN(
      cudaMemcpyAsync(fresh, host, bytes_, cudaMemcpyHostToDevice, reinterpret_cast<cudaStream_t>(stream)));
  // Every pointer of unit_ lies in the old allocation (or is null): same offset, new base.
  auto move = [&](auto*& p) {
    if (p == nullptr) return;
    using T = std::remove_reference_t<decltype(p)>;
    const auto offset = reinterpret_cast<const char*>(p) - static_cast<const char*>(released_base_);
    p = reinterpret_cast<T>(static_cast<const char*>(fresh) + offset);
  };
  move(unit_.pair_table);
  move(unit_.luts);
  move(unit_.stream);
  move(unit_.sign_mantissa);
  move(unit_.chunk_starts);
  move(unit_.gaps);
  released_base_ = nullptr;
  return Status::Ok();
}

StatusOr<DeviceUnitBuffer> DeviceUnitBuffer::WithoutStream() const {
  auto align = [](uint64_t v) { return (v + 255) & ~uint64_t{255}; };  // Upload's layout, stream left out
  const uint64_t luts_bytes = static_cast<uint64_t>(unit_.num_luts) * kLutRowBytes;
  const uint64_t off_luts = align(kTableBytes);
  const uint64_t off_sm = align(off_luts + luts_bytes);
  const uint64_t total = align(off_sm + unit_.num_elements + 16);
  DeviceUnitBuffer buf;
  DF11_CUDA_RETURN(cudaMalloc(&buf.base_, total));
  buf.bytes_ = total;
  auto* b = static_cast<uint8_t*>(buf.base_);
  DF11_CUDA_RETURN(cudaMemset(b, 0, total));
  DF11_CUDA_RETURN(cudaMemcpy(b, unit_.pair_table, kTableBytes, cudaMemcpyDeviceToDevice));
  DF11_CUDA_RETURN(cudaMemcpy(b + off_luts, unit_.luts, luts_bytes, cudaMemcpyDeviceToDevice));
  DF11_CUDA_RETURN(cudaMemcpy(b + off_sm, unit_.sign_mantissa, unit_.num_elements, cudaMemcpyDeviceToDevice));
  buf.unit_ = unit_;
  buf.unit_.pair_table = reinterpret_cast<const uint32_t*>(b);
  buf.unit_.luts = b + off_luts;
  buf.unit_.sign_mantissa = b + off_sm;
  buf.unit_.stream = nullptr;
  buf.unit_.chunk_starts = nullptr;
  buf.unit_.gaps = nullptr;
  buf.layout_ = layout_;
  return buf;
}

}  // namespace df11
