// The fused DF11 GEMV and the lane-stream decoder (df11_lanes_cuda.h). One kernel, two sinks:
// each warp owns a tile of rows and walks its lanes' streams (df11_lanes.h) group by group; lane l
// decodes the 8 exponents of a group with the unit's 12-bit pair table in shared memory (the LUTs
// for the rare codes it cannot settle), joins them with their sign_mantissa bytes into a uint4 of
// BF16, and either multiplies it with x (GEMV, the BF16 Gemv's order) or stores it (decode).
// Persistent grid: blocks of kWarps warps stride over the tiles, loading the table once.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/cuda_gemv_internal.cuh"
#include "kernels/df11_device.cuh"
#include "kernels/df11_fast_table.h"
#include "kernels/df11_lanes_cuda.h"
#include "kernels/df11_lanes_fixed.cuh"
#include "kernels/df11_lanes_fixed.h"

namespace df11 {
namespace {

constexpr int kWarps = 8;

// A lane's bit reader: the stream continues at bit p (0..31) of w0, then w1, then ahead; `ahead`
// is the next word, loaded one word early (the lane reads its words 32 apart: word j of the lane
// is at 32 * j), never past `last`.
struct LaneReader {
  uint32_t w0, w1, ahead;
  uint32_t p;
  const uint32_t* next;  // the word after `ahead`
  const uint32_t* last;

  __device__ __forceinline__ const uint32_t* Clamp(const uint32_t* q) const { return q < last ? q : last; }
  __device__ __forceinline__ void Start(const uint32_t* lane_words, const uint32_t* last_word) {
    last = last_word;
    w0 = __ldg(Clamp(lane_words));
    w1 = __ldg(Clamp(lane_words + kLanes));
    ahead = __ldg(Clamp(lane_words + 2 * kLanes));
    next = Clamp(lane_words + 3 * kLanes);
    p = 0;
  }
  // The 32 bits at the read position.
  __device__ __forceinline__ uint32_t Peek() const { return __funnelshift_l(w1, w0, p); }
  // Skips n <= 32 bits.
  __device__ __forceinline__ void Consume(uint32_t n) {
    p += n;
    if (p >= 32) {
      p -= 32;
      w0 = w1;
      w1 = ahead;
      ahead = __ldg(next);
      next = Clamp(next + kLanes);
    }
  }
};

// The next 8 exponents of the lane's stream, byte i = exponent i. Symbols enter an 8-byte
// shift register from the top, one or two per table lookup, so after 8 the first is in byte 0.
__device__ __forceinline__ uint2 DecodeGroup(LaneReader& in, const uint32_t* table, const Df11Tables& t) {
  uint32_t lo = 0, hi = 0;
  for (int n = 0; n < 8;) {
    const uint32_t peek = in.Peek();
    uint32_t e = table[peek >> (32 - kFastTableBits)];
    if (e == 0) e = WalkLuts(t.luts, t.num_luts, peek) | 1u << 28;  // rare: long or unsettled code
    const bool two = ((e >> 29) & 1) != 0 && n < 7;
    const uint32_t shift = two ? 16 : 8;
    lo = __funnelshift_r(lo, hi, shift);
    hi = __funnelshift_r(hi, e, shift);  // symbol 1 (and 2) from e's low bytes
    in.Consume(((e >> 16) & 63) + (two ? (e >> 22) & 63 : 0));
    n += two ? 2 : 1;
  }
  return make_uint2(lo, hi);
}

// kTokens > 0: y = x · W^T (+ bias) (+ y), kRows = w.rows_per_tile. kTokens == 0: y = W.
// kTokens == -1 (compare): *mismatches += the 8-element groups of W that differ from y's.
template <int kTokens, int kRows>
__global__ void __launch_bounds__(kWarps * 32)
    LanesKernel(const uint16_t* __restrict__ x, DeviceLanes w, Df11Tables t, const uint8_t* __restrict__ sm,
                const float* __restrict__ bias, bool accumulate, uint16_t* __restrict__ y,
                uint32_t* __restrict__ mismatches) {
  __shared__ __align__(16) uint32_t table[kFastTableSize];
  cuda::AllowDependents();
  for (int i = threadIdx.x; i < kFastTableSize / 4; i += kWarps * 32) {
    reinterpret_cast<uint4*>(table)[i] = __ldg(reinterpret_cast<const uint4*>(t.pair_table) + i);
  }
  __syncthreads();
  cuda::WaitPrevious();  // x and y (or out) belong to the stream's earlier kernels
  const int lane = threadIdx.x % 32;
  const int64_t tiles = (w.rows + kRows - 1) / kRows, chunks = w.cols / 8;
  const uint32_t* last = w.words + w.num_words - kLanes + lane;  // in the zero rows
  for (int64_t tile = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; tile < tiles;
       tile += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t first = tile * kRows;
    const int64_t rows = w.rows - first;  // rows of this tile: min(kRows, rows)
    LaneReader in;
    in.Start(w.words + w.tile_words[tile] + lane, last);
    float acc[kRows][kTokens > 0 ? kTokens : 1];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int k = 0; k < (kTokens > 0 ? kTokens : 1); ++k) acc[r][k] = 0.0f;
    }
    for (int64_t c = lane; c < chunks; c += 32) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows) break;
        const int64_t e0 = (first + r) * w.cols + 8 * c;
        const uint2 s = __ldcs(reinterpret_cast<const uint2*>(sm + e0));  // in flight while decoding
        const uint2 ex = DecodeGroup(in, table, t);
        const uint2 a = Compose4(ex.x, s.x), b = Compose4(ex.y, s.y);
        const uint4 wv = make_uint4(a.x, a.y, b.x, b.y);
        if constexpr (kTokens == 0) {
          *reinterpret_cast<uint4*>(y + e0) = wv;
        } else if constexpr (kTokens < 0) {
          const uint4 want = *reinterpret_cast<const uint4*>(y + e0);
          if (want.x != wv.x || want.y != wv.y || want.z != wv.z || want.w != wv.w) atomicAdd(mismatches, 1u);
        } else {
#pragma unroll
          for (int k = 0; k < kTokens; ++k) {
            cuda::GemvDot8(wv, __ldg(reinterpret_cast<const uint4*>(x) + k * chunks + c), acc[r][k]);
          }
        }
      }
    }
    if constexpr (kTokens > 0) cuda::GemvStore<kRows, kTokens>(acc, first, w.rows, bias, accumulate, y);
  }
}

template <int kTokens, int kRows>
Status Launch(const uint16_t* x, const DeviceLanes& w, const Df11Tables& t, const uint8_t* sm, const float* bias,
              bool accumulate, uint16_t* y, GpuStream stream, uint32_t* mismatches) {
  static thread_local cuda::PersistentFit fit;  // per kernel instance
  return cuda::LaunchPersistent(LanesKernel<kTokens, kRows>, (w.num_tiles() + kWarps - 1) / kWarps, kWarps * 32, fit,
                                reinterpret_cast<cudaStream_t>(stream), "LanesKernel", x, w, t, sm, bias, accumulate, y,
                                mismatches);
}

template <int kTokens>
Status LaunchTokens(const uint16_t* x, const DeviceLanes& w, const Df11Tables& t, const uint8_t* sm, const float* bias,
                    bool accumulate, uint16_t* y, GpuStream stream, uint32_t* mismatches = nullptr) {
  return w.rows_per_tile == 4 ? Launch<kTokens, 4>(x, w, t, sm, bias, accumulate, y, stream, mismatches)
                              : Launch<kTokens, 1>(x, w, t, sm, bias, accumulate, y, stream, mismatches);
}

// Whether w carries a split state in the layout GemvSplitChunk names: fixed lanes of 4 rows per
// tile whose split block starts at its chunk.
bool HasGemvSplitState(const DeviceLanes& w) {
  return w.code == LaneCode::kFixed3 && w.rows_per_tile == 4 && w.split_block != 0 && w.tile_split != nullptr &&
         int64_t{w.split_block} * kLanes == GemvSplitChunk(w.rows, w.cols);
}

Status CheckOperands(const DeviceLanes& w, const uint8_t* sm) {
  const bool fixed = w.code == LaneCode::kFixed3;
  const bool tile_ok = w.rows_per_tile == 1 || w.rows_per_tile == 4 || (fixed && w.rows_per_tile == 2);
  if (w.rows <= 0 || w.cols <= 0 || w.cols % 8 != 0 || !tile_ok || reinterpret_cast<uintptr_t>(sm) % 8 != 0 ||
      (fixed && (w.num_escape_words == 0 || w.num_rare == 0))) {
    return InvalidArgument("DF11 lanes: [" + std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] with " +
                           std::to_string(w.rows_per_tile) +
                           " rows per tile needs cols % 8 == 0, 1 or 4 rows per tile (2 for fixed lanes), 8-byte "
                           "aligned sign_mantissa and, for fixed lanes, non-empty escape arrays");
  }
  // A split state only where the BF16 Gemv splits (GemvSplitChunk), in the layout it names.
  if (w.split_block != 0 && !HasGemvSplitState(w)) {
    return InvalidArgument("DF11 lanes: [" + std::to_string(w.rows) + ", " + std::to_string(w.cols) +
                           "] carry a split state at block " + std::to_string(w.split_block) +
                           " that is not GemvSplitChunk's for fixed lanes of 4 rows per tile");
  }
  return Status::Ok();
}

// The Huffman or the fixed lanes' kernel; tokens as LaunchFixedLanes's.
template <int kTokens>
Status LaunchCode(const uint16_t* x, const DeviceLanes& w, const Df11Tables& t, const uint8_t* sm, const float* bias,
                  bool accumulate, uint16_t* y, GpuStream stream, uint32_t* mismatches = nullptr) {
  if (w.code == LaneCode::kFixed3) return LaunchFixedLanes<kTokens>(x, w, sm, bias, accumulate, y, mismatches, stream);
  return LaunchTokens<kTokens>(x, w, t, sm, bias, accumulate, y, stream, mismatches);
}

}  // namespace

StatusOr<DeviceLanesBuffer> DeviceLanesBuffer::Upload(const LaneStreams& lanes, GpuStream stream) {
  return Make(lanes, lanes.words.size(), lanes.escapes.size(), lanes.rare.size(), true, stream);
}

StatusOr<DeviceLanesBuffer> DeviceLanesBuffer::UploadTiles(const LaneStreams& lanes, uint64_t words,
                                                           uint64_t escape_words, uint64_t rare, GpuStream stream) {
  return Make(lanes, words, escape_words, rare, false, stream);
}

StatusOr<DeviceLanesBuffer> DeviceLanesBuffer::Make(const LaneStreams& lanes, uint64_t words, uint64_t escape_words,
                                                    uint64_t rare, bool with_streams, GpuStream stream) {
  DeviceLanesBuffer b;
  const std::pair<const void*, uint64_t> regions[kRegions] = {
      {lanes.tile_words.data(), 4 * lanes.tile_words.size()},
      {with_streams ? lanes.words.data() : nullptr, 4 * words},
      {with_streams ? lanes.escapes.data() : nullptr, 4 * escape_words},
      {lanes.tile_escapes.data(), 4 * lanes.tile_escapes.size()},
      {lanes.tile_rare.data(), 4 * lanes.tile_rare.size()},
      {lanes.tile_split.data(), 4 * lanes.tile_split.size()},
      {with_streams ? lanes.rare.data() : nullptr, rare}};
  uint64_t total = 0;
  for (int r = 0; r < kRegions; ++r) {
    b.offsets_[r] = total;
    total += (regions[r].second + 255) / 256 * 256;
  }
  DF11_ASSIGN_OR_RETURN(b.buffer_, cuda::DeviceBuffer::Allocate(total, "DF11 lane streams"));
  if (!with_streams) DF11_RETURN_IF_ERROR(cuda::FillZero(b.buffer_.data(), total, stream));
  for (int r = 0; r < kRegions; ++r) {
    if (regions[r].second == 0 || regions[r].first == nullptr) continue;
    DF11_RETURN_IF_ERROR(
        cuda::CopyToDevice(b.buffer_.as<char>() + b.offsets_[r], regions[r].first, regions[r].second, stream));
  }
  DF11_RETURN_IF_ERROR(cuda::Synchronize(stream));
  DeviceLanes& d = b.lanes_;
  d.code = lanes.code;
  d.num_words = words;
  d.rows = lanes.rows;
  d.cols = lanes.cols;
  d.rows_per_tile = lanes.rows_per_tile;
  d.tile_stride = lanes.tile_stride;
  d.split_block = lanes.tile_split.empty() ? 0 : lanes.split_block;
  d.num_escape_words = escape_words;
  d.num_rare = rare;
  std::memcpy(d.primary, lanes.primary.data(), sizeof(d.primary));
  std::memcpy(d.secondary, lanes.secondary.data(), sizeof(d.secondary));
  b.Point();
  return b;
}

void DeviceLanesBuffer::Point() {
  const char* base = buffer_.as<const char>();
  auto at = [&](Region r) { return reinterpret_cast<const uint32_t*>(base + offsets_[r]); };
  lanes_.tile_words = lanes_.code == LaneCode::kHuffman ? at(kTileWords) : nullptr;
  lanes_.words = at(kWords);
  lanes_.escapes = at(kEscapes);
  lanes_.tile_escapes = at(kTileEscapes);
  lanes_.tile_rare = at(kTileRare);
  lanes_.tile_split = lanes_.split_block != 0 ? at(kTileSplit) : nullptr;
  lanes_.rare = reinterpret_cast<const uint8_t*>(base + offsets_[kRare]);
}

void DeviceLanesBuffer::Release() { buffer_.Release(); }

Status DeviceLanesBuffer::Reacquire(const void* host, GpuStream stream) {
  DF11_RETURN_IF_ERROR(buffer_.Reacquire(host, stream, "DF11 lane streams"));
  Point();
  return Status::Ok();
}

Status Df11Gemv(const uint16_t* x, const DeviceLanes& w, const Df11Tables& tables, const uint8_t* sign_mantissa,
                const float* bias, int64_t tokens, bool accumulate, uint16_t* y, GpuStream stream) {
  DF11_RETURN_IF_ERROR(CheckOperands(w, sign_mantissa));
  if (tokens < 1 || tokens > cuda::kGemvMaxTokens || reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return InvalidArgument("Df11Gemv: " + std::to_string(tokens) + " tokens (1.." +
                           std::to_string(cuda::kGemvMaxTokens) + ") with 16-byte aligned x");
  }
  if (!Df11GemvTakes(w, tokens)) {
    return InvalidArgument("Df11Gemv: the 1-token GEMV of [" + std::to_string(w.rows) + ", " + std::to_string(w.cols) +
                           "] splits each row's sum at chunk " + std::to_string(GemvSplitChunk(w.rows, w.cols)) +
                           " (GemvSplitChunk); these lanes hold no split state (fixed lanes built with it do)");
  }
  switch (tokens) {
    case 1:
      return LaunchCode<1>(x, w, tables, sign_mantissa, bias, accumulate, y, stream);
    case 2:
      return LaunchCode<2>(x, w, tables, sign_mantissa, bias, accumulate, y, stream);
    case 3:
      return LaunchCode<3>(x, w, tables, sign_mantissa, bias, accumulate, y, stream);
    default:
      return LaunchCode<4>(x, w, tables, sign_mantissa, bias, accumulate, y, stream);
  }
}

bool Df11GemvTakes(const DeviceLanes& w, int64_t tokens) {
  return tokens != 1 || GemvSplitChunk(w.rows, w.cols) == 0 || HasGemvSplitState(w);
}

bool Df11TileGemmApplies(const uint16_t* x, const DeviceLanes& w, int64_t tokens) {
  // x stands in for W too: fixed lanes have no BF16 W to align.
  return w.code == LaneCode::kFixed3 && w.rows_per_tile == FixedRowsPerTile(w.rows, w.cols) &&
         cuda::TileGemmApplies(x, x, tokens, w.cols);
}

Status Df11TileGemm(const uint16_t* x, const DeviceLanes& w, const uint8_t* sign_mantissa, const float* bias,
                    int64_t tokens, bool accumulate, uint16_t* y, GpuStream stream) {
  DF11_RETURN_IF_ERROR(CheckOperands(w, sign_mantissa));
  if (w.code != LaneCode::kFixed3 || !cuda::TileGemmApplies(x, x, tokens, w.cols) || w.cols > (int64_t{1} << 24)) {
    return InvalidArgument("Df11TileGemm: " + std::to_string(tokens) + " tokens x [" + std::to_string(w.rows) + ", " +
                           std::to_string(w.cols) + "] needs fixed lanes, " + std::to_string(cuda::kTileGemmMinTokens) +
                           ".." + std::to_string(cuda::kTileGemmMaxTokens) +
                           " tokens, at most 2^24 columns and 16-byte aligned x");
  }
  return LaunchFixedTileGemm(x, w, sign_mantissa, bias, tokens, accumulate, y, stream);
}

bool Df11TileGemmGatedApplies(const uint16_t* x, const DeviceLanes& w, int64_t tokens, int64_t inter) {
  return Df11TileGemmApplies(x, w, tokens) && w.rows == 2 * inter &&
         cuda::TileGemmGatedApplies(x, x, tokens, inter, w.cols, w.rows_per_tile);
}

Status Df11TileGemmGated(Activation act, const uint16_t* x, const DeviceLanes& w, const uint8_t* sign_mantissa,
                         const float* bias, int64_t tokens, int64_t inter, uint16_t* out, GpuStream stream) {
  DF11_RETURN_IF_ERROR(CheckOperands(w, sign_mantissa));
  if (w.code != LaneCode::kFixed3 || w.rows != 2 * inter ||
      !cuda::TileGemmGatedApplies(x, x, tokens, inter, w.cols, w.rows_per_tile)) {
    return InvalidArgument("Df11TileGemmGated: " + std::to_string(tokens) + " tokens x [" + std::to_string(w.rows) +
                           ", " + std::to_string(w.cols) + "] for " + std::to_string(inter) +
                           " gate|up pairs needs fixed lanes, 2 inter rows, what Df11TileGemm needs and inter a "
                           "multiple of 8 x the rows per tile");
  }
  return LaunchFixedTileGemm(x, w, sign_mantissa, bias, tokens, false, out, stream, act, inter);
}

Status LaunchLanesDecode(const DeviceLanes& w, const Df11Tables& tables, const uint8_t* sign_mantissa, uint16_t* out,
                         GpuStream stream, bool after_fixed_decode) {
  DF11_RETURN_IF_ERROR(CheckOperands(w, sign_mantissa));
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0) return InvalidArgument("LaunchLanesDecode: out not 16-byte aligned");
  if (w.code == LaneCode::kFixed3) return LaunchFixedLanesDecode(w, sign_mantissa, out, after_fixed_decode, stream);
  return LaunchTokens<0>(nullptr, w, tables, sign_mantissa, nullptr, false, out, stream, nullptr);
}

Status LaunchLanesCompare(const DeviceLanes& w, const Df11Tables& tables, const uint8_t* sign_mantissa,
                          const uint16_t* expected, uint32_t* mismatches, GpuStream stream) {
  DF11_RETURN_IF_ERROR(CheckOperands(w, sign_mantissa));
  if (reinterpret_cast<uintptr_t>(expected) % 16 != 0) {
    return InvalidArgument("LaunchLanesCompare: expected not 16-byte aligned");
  }
  return LaunchCode<-1>(nullptr, w, tables, sign_mantissa, nullptr, false, const_cast<uint16_t*>(expected), stream,
                        mismatches);
}

}  // namespace df11
