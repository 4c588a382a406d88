// Fixed lanes built on the device (df11_lanes_cuda.h: BuildFixedLanesOnDevice, DeviceExponentHistogram):
// the same bytes as BuildFixedLaneStreams (df11_lanes_fixed.cc) from W's BF16 words already on the
// device, so that a model's load (runtime/model/model_cuda_load.cc) need not copy each matrix to
// the host and build its lanes there.
//
// One warp per tile walks its blocks in order, as the decoder does: lane l's entries of block j are
// entries 4 j .. 4 j + 3 (layout: df11_lanes_fixed.h). Pass 1 (CountKernel) counts each tile's
// escapes and rare bytes, and those before the split block; the host turns the counts into the
// tiles' offsets; pass 2 (WriteKernel) writes the code words, and per block each lane's escape
// nibbles (atomicOr into zeroed words: neighbouring lanes share words) and rare bytes at the
// offsets a warp-wide prefix sum of the lanes' counts gives, lane by lane, each lane's in (entry,
// element) order: the order ForEachEscape gives the host builder.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/df11_lanes_cuda.h"
#include "kernels/df11_lanes_fixed.h"
#include "kernels/df11_lanes_fixed_decode.cuh"
#include "kernels/gpu.h"

namespace df11 {
namespace {

using fixed_lanes::WarpInclusiveSum;

constexpr int kWarpsPerBlock = 8;  // tiles per CTA

// What both passes need: the shape, and per exponent its code and nibble (FixedCodesOf), which
// each CTA copies into shared memory (LoadTables).
struct BuildParams {
  const uint16_t* w;  // [rows, cols] BF16, row-major, 16-byte aligned
  int64_t rows, cols, chunks, tiles, entries;
  int rows_per_tile;
  uint32_t split_block;
  uint8_t code[256], nibble[256];
};

// The host builder's Geometry::Element (df11_lanes_fixed.cc): entry g of lane `lane` of tile t
// starts at this element, or -1 for a padding entry.
__device__ __forceinline__ int64_t ElementOf(const BuildParams& p, int64_t t, int lane, int64_t g) {
  const int64_t c = lane + kLanes * (g / p.rows_per_tile), row = t * p.rows_per_tile + g % p.rows_per_tile;
  return c < p.chunks && row < p.rows ? row * p.cols + 8 * c : -1;
}

// Lane `lane`'s block j of tile t: its three code words and escape mask (bit 8 i + k: element k
// of entry i escapes), the BF16 words of its entries (for the escapes' exponents).
struct LaneBlock {
  uint32_t words[3];
  uint32_t mask;
  uint4 v[4];
};

// code: the exponents' codes, in shared memory (a kernel parameter indexed at run time would be
// copied to local memory).
__device__ __forceinline__ LaneBlock LoadBlock(const BuildParams& p, const uint8_t* code, int64_t t, int lane,
                                               int64_t j) {
  LaneBlock b{{0, 0, 0}, 0, {}};
  for (int i = 0; i < 4; ++i) {
    const int64_t e = ElementOf(p, t, lane, 4 * j + i);
    b.v[i] = e < 0 ? make_uint4(0, 0, 0, 0) : *reinterpret_cast<const uint4*>(p.w + e);
    if (e < 0) continue;  // a padding entry: code 0, no escapes
    const uint32_t half[4] = {b.v[i].x, b.v[i].y, b.v[i].z, b.v[i].w};
    for (int k = 0; k < 8; ++k) {
      const uint32_t word = (half[k / 2] >> (16 * (k % 2))) & 0xffffu;
      const uint32_t c = code[(word >> 7) & 0xffu];
      if (i < 3) {
        b.words[i] |= c << (4 * k);
      } else {
        for (int bit = 0; bit < 3; ++bit) b.words[bit] |= ((c >> bit) & 1u) << (4 * k + 3);
      }
      if (c == kFixedEscape) b.mask |= 1u << (8 * i + k);
    }
  }
  return b;
}

__device__ __forceinline__ uint32_t ExponentAt(const LaneBlock& b, int bit) {
  const int i = bit / 8, k = bit % 8;
  const uint32_t half[4] = {b.v[i].x, b.v[i].y, b.v[i].z, b.v[i].w};
  return (half[k / 2] >> (16 * (k % 2) + 7)) & 0xffu;
}

__device__ __forceinline__ uint32_t RareCount(const uint8_t* nibble, const LaneBlock& b) {
  uint32_t r = 0;
  for (uint32_t m = b.mask; m != 0; m &= m - 1) r += nibble[ExponentAt(b, __ffs(m) - 1)] == kFixedRareNibble;
  return r;
}

// The CTA's copies of the code and nibble tables (every thread calls it, before any returns).
__device__ __forceinline__ void LoadTables(const BuildParams& p, uint8_t* code, uint8_t* nibble) {
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    code[i] = p.code[i];
    nibble[i] = p.nibble[i];
  }
  __syncthreads();
}

// counts[4 t ..]: tile t's escapes, rare bytes, and those two before block split_block.
__global__ void CountKernel(const BuildParams p, uint32_t* counts) {
  __shared__ uint8_t code[256], nibble[256];
  LoadTables(p, code, nibble);
  const int lane = threadIdx.x % kLanes;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kLanes;
  if (t >= p.tiles) return;  // the same for the whole warp
  uint32_t escapes = 0, rare = 0, escapes_before = 0, rare_before = 0;
  for (int64_t j = 0; j < p.entries / 4; ++j) {
    if (p.split_block != 0 && j == p.split_block) {
      escapes_before = escapes;
      rare_before = rare;
    }
    const LaneBlock b = LoadBlock(p, code, t, lane, j);
    escapes += __popc(b.mask);
    rare += RareCount(nibble, b);
  }
  // The warp's totals, in lane 31's inclusive sums.
  escapes = WarpInclusiveSum(escapes, lane);
  rare = WarpInclusiveSum(rare, lane);
  escapes_before = WarpInclusiveSum(escapes_before, lane);
  rare_before = WarpInclusiveSum(rare_before, lane);
  if (lane == kLanes - 1) {
    counts[4 * t] = escapes;
    counts[4 * t + 1] = rare;
    counts[4 * t + 2] = escapes_before;
    counts[4 * t + 3] = rare_before;
  }
}

// words: [tiles * tile_stride]; escapes zeroed; tile_escapes / tile_rare as the host builder's.
__global__ void WriteKernel(const BuildParams p, uint64_t tile_stride, const uint32_t* tile_escapes,
                            const uint32_t* tile_rare, uint32_t* words, uint32_t* escapes, uint8_t* rare) {
  __shared__ uint8_t code[256], nibble[256];
  LoadTables(p, code, nibble);
  const int lane = threadIdx.x % kLanes;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kLanes;
  if (t >= p.tiles) return;
  uint64_t nib = uint64_t{tile_escapes[t]} * 8, rare_at = tile_rare[t];
  for (int64_t j = 0; j < p.entries / 4; ++j) {
    const LaneBlock b = LoadBlock(p, code, t, lane, j);
    for (int i = 0; i < 3; ++i) words[t * tile_stride + static_cast<uint64_t>(3 * j + i) * kLanes + lane] = b.words[i];
    const uint32_t n = __popc(b.mask), r = RareCount(nibble, b);
    const uint32_t n_through = WarpInclusiveSum(n, lane), r_through = WarpInclusiveSum(r, lane);
    uint64_t at = nib + n_through - n, rare_next = rare_at + r_through - r;
    for (uint32_t m = b.mask; m != 0; m &= m - 1, ++at) {
      const uint32_t e = ExponentAt(b, __ffs(m) - 1), v = nibble[e];
      atomicOr(escapes + at / 8, v << (4 * (at % 8)));
      if (v == kFixedRareNibble) rare[rare_next++] = static_cast<uint8_t>(e);
    }
    nib += __shfl_sync(0xffffffffu, n_through, 31);
    rare_at += __shfl_sync(0xffffffffu, r_through, 31);
  }
}

__global__ void HistogramKernel(const uint16_t* w, uint64_t n, unsigned long long* counts) {
  __shared__ unsigned int local[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
  __syncthreads();
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    atomicAdd(&local[(w[i] >> 7) & 0xffu], 1u);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    if (local[i] != 0) atomicAdd(&counts[i], static_cast<unsigned long long>(local[i]));
  }
}

}  // namespace

StatusOr<std::array<uint64_t, 256>> DeviceExponentHistogram(const uint16_t* w, uint64_t n, GpuStream stream) {
  DF11_ASSIGN_OR_RETURN(cuda::DeviceBuffer counts, cuda::DeviceBuffer::Allocate(256 * 8, "exponent histogram"));
  DF11_RETURN_IF_ERROR(cuda::FillZero(counts.data(), 256 * 8, stream));
  if (n > 0) {
    // Each block's 256 shared counters take at most 2^32 - 1 words: grid-stride chunks far below that.
    const uint64_t blocks = std::min<uint64_t>(1024, (n + 255) / 256);
    HistogramKernel<<<static_cast<unsigned>(blocks), 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        w, n, counts.as<unsigned long long>());
    DF11_CUDA_RETURN(cudaGetLastError());
  }
  std::array<uint64_t, 256> out{};
  DF11_RETURN_IF_ERROR(cuda::CopyToHost(out.data(), counts.data(), sizeof(out), stream));
  return out;
}

StatusOr<DeviceLanesBuffer> BuildFixedLanesOnDevice(const uint16_t* w, const std::array<uint64_t, 256>& histogram,
                                                    int64_t rows, int64_t cols, int rows_per_tile, GpuStream stream,
                                                    const std::string& what) {
  if (rows <= 0 || cols <= 0 || cols % 8 != 0 || (rows_per_tile != 1 && rows_per_tile != 2 && rows_per_tile != 4) ||
      reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    return InvalidArgument(what +
                           ": fixed lanes on the device need [rows, cols] with cols % 8 == 0, 16-byte aligned "
                           "words and 1, 2 or 4 rows per tile, got [" +
                           std::to_string(rows) + ", " + std::to_string(cols) + "], " + std::to_string(rows_per_tile));
  }
  const FixedCodes codes = FixedCodesOf(histogram);
  const FixedGeometry geo = FixedGeometryOf(rows, cols, rows_per_tile);
  if (static_cast<uint64_t>(geo.tiles) * geo.tile_stride >= (uint64_t{1} << 32)) {
    return InvalidArgument(what + ": fixed lanes over 2^32 words");
  }
  BuildParams p{};
  p.w = w;
  p.rows = rows;
  p.cols = cols;
  p.chunks = cols / 8;
  p.tiles = geo.tiles;
  p.entries = geo.entries;
  p.rows_per_tile = rows_per_tile;
  p.split_block = geo.split_block;
  std::memcpy(p.code, codes.code.data(), 256);
  std::memcpy(p.nibble, codes.nibble.data(), 256);
  const auto cu = reinterpret_cast<cudaStream_t>(stream);
  const unsigned grid = static_cast<unsigned>((geo.tiles + kWarpsPerBlock - 1) / kWarpsPerBlock);

  // Pass 1, then the tiles' offsets on the host (as the host builder's).
  DF11_ASSIGN_OR_RETURN(cuda::DeviceBuffer counts,
                        cuda::DeviceBuffer::Allocate(16 * static_cast<uint64_t>(geo.tiles), "fixed lanes counts"));
  CountKernel<<<grid, kWarpsPerBlock * kLanes, 0, cu>>>(p, counts.as<uint32_t>());
  DF11_CUDA_RETURN(cudaGetLastError());
  std::vector<uint32_t> host_counts(4 * static_cast<size_t>(geo.tiles));
  DF11_RETURN_IF_ERROR(cuda::CopyToHost(host_counts.data(), counts.data(), 4 * host_counts.size(), stream));
  LaneStreams lanes;  // its tile arrays filled here; words, escapes and rare stay on the device
  lanes.code = LaneCode::kFixed3;
  lanes.rows = rows;
  lanes.cols = cols;
  lanes.rows_per_tile = rows_per_tile;
  lanes.tile_stride = geo.tile_stride;
  lanes.primary = codes.primary;
  lanes.secondary = codes.secondary;
  lanes.split_block = geo.split_block;
  std::vector<uint64_t> tile_escapes(geo.tiles), tile_rare(geo.tiles);
  for (int64_t t = 0; t < geo.tiles; ++t) {
    tile_escapes[t] = host_counts[4 * t];
    tile_rare[t] = host_counts[4 * t + 1];
  }
  DF11_RETURN_IF_ERROR(FillFixedTileOffsets(tile_escapes, tile_rare, lanes, what));
  if (geo.split_block != 0) {  // where block split_block starts: its escape nibble in the tile, its rare byte
    lanes.tile_split.resize(2 * geo.tiles);
    for (int64_t t = 0; t < geo.tiles; ++t) {
      lanes.tile_split[2 * t] = host_counts[4 * t + 2];
      lanes.tile_split[2 * t + 1] = lanes.tile_rare[t] + host_counts[4 * t + 3];
    }
  }
  const uint64_t escape_words = lanes.tile_escapes[geo.tiles], rare = lanes.tile_rare[geo.tiles];
  // The buffer with the host builder's array sizes (zeroed: the escape nibbles are or-ed in).
  DF11_ASSIGN_OR_RETURN(
      DeviceLanesBuffer b,
      DeviceLanesBuffer::UploadTiles(lanes, geo.tiles * geo.tile_stride, escape_words + 2 * kLanes, rare + 1, stream));
  const DeviceLanes& d = b.lanes();
  WriteKernel<<<grid, kWarpsPerBlock * kLanes, 0, cu>>>(p, geo.tile_stride, d.tile_escapes, d.tile_rare,
                                                        const_cast<uint32_t*>(d.words),
                                                        const_cast<uint32_t*>(d.escapes), const_cast<uint8_t*>(d.rare));
  DF11_CUDA_RETURN(cudaGetLastError());
  DF11_RETURN_IF_ERROR(cuda::Synchronize(stream));
  return b;
}

}  // namespace df11
