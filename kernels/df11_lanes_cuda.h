// The fused DF11 GEMV and the lane-stream decoder on CUDA (lane streams: df11_lanes.h).
// Df11Gemv decodes W tile by tile into registers, one warp per tile, and multiplies it at once: the
// BF16 matrix never goes to memory. Its arithmetic is the BF16 Gemv's (cuda_gemv_internal.cuh), so
// for the same x, bias and W it gives the same bits as cuda::Gemv on W's BF16 twin. Host functions
// return Status and never abort; kernels are memory-safe on any lane streams (a lane never reads
// past the array, whatever its bits).
// Compiles without nvcc; defined only when DF11_HAVE_CUDA. Thread-safety: as the CUDA stream.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "kernels/base/status.h"
#include "kernels/cuda_gemm.h"  // kGemvMaxTokens, cuda_ops.h
#include "kernels/df11_decode_cuda.h"
#include "kernels/df11_lanes.h"

namespace df11 {

// Device view of one matrix's lane streams (LaneStreams, df11_lanes.h / df11_lanes_fixed.h).
struct DeviceLanes {
  LaneCode code = LaneCode::kHuffman;
  const uint32_t* words = nullptr;       // [num_words]
  const uint32_t* tile_words = nullptr;  // kHuffman: [tiles + 1]
  uint64_t num_words = 0;                // kHuffman: tile_words[tiles] + 64 (the zero rows included)
  int64_t rows = 0, cols = 0;
  int rows_per_tile = 1;
  // kFixed3: tile t of this view is tile tile0 + t of words, tile_escapes and tile_rare.
  int64_t tile0 = 0;
  uint64_t tile_stride = 0;
  const uint32_t* escapes = nullptr;  // [num_escape_words]
  uint64_t num_escape_words = 0;
  const uint32_t* tile_escapes = nullptr;
  const uint8_t* rare = nullptr;  // [num_rare]
  uint64_t num_rare = 0;
  const uint32_t* tile_rare = nullptr;
  const uint32_t* tile_split = nullptr;  // LaneStreams::tile_split; null when split_block is 0
  uint32_t split_block = 0;
  uint32_t primary[2] = {}, secondary[4] = {};  // LaneStreams' tables, little-endian
  int64_t num_tiles() const { return (rows + rows_per_tile - 1) / rows_per_tile; }
};

// Tiles [first, first + count) of w as a matrix of their rows (W's sign_mantissa then starts
// first * rows_per_tile * cols bytes on), without the split state: the slice's own shape says where
// its 1-token sums split (GemvSplitChunk), and Df11Gemv refuses it where they do.
inline DeviceLanes TileSlice(const DeviceLanes& w, int64_t first, int64_t count) {
  DeviceLanes s = w;
  s.split_block = 0;
  s.tile_split = nullptr;
  if (w.code == LaneCode::kFixed3) {
    s.tile0 = w.tile0 + first;
  } else {
    s.tile_words = w.tile_words + first;
  }
  const int64_t row0 = first * w.rows_per_tile;
  s.rows = std::min<int64_t>(w.rows, (first + count) * w.rows_per_tile) - row0;
  return s;
}

// The decode tables of the unit the matrix comes from (DeviceUnit's pair_table, luts, num_luts).
struct Df11Tables {
  const uint32_t* pair_table = nullptr;  // [kFastTableSize]
  const uint8_t* luts = nullptr;         // [num_luts * 256]
  int num_luts = 0;
};
inline Df11Tables TablesOf(const DeviceUnit& u) { return {u.pair_table, u.luts, u.num_luts}; }

// Owns one matrix's lane streams in VRAM (one allocation). Move-only.
class DeviceLanesBuffer {
 public:
  // Copies `lanes` to the device on `stream` and waits. RESOURCE_EXHAUSTED when out of memory.
  static StatusOr<DeviceLanesBuffer> Upload(const LaneStreams& lanes, GpuStream stream);
  // For a builder on the device (BuildFixedLanesOnDevice): lanes' tile arrays and tables copied,
  // the words, escapes and rare regions sized `words` / `escape_words` (32-bit) / `rare` (bytes)
  // and zeroed, for kernels to fill. Waits for the copies.
  static StatusOr<DeviceLanesBuffer> UploadTiles(const LaneStreams& lanes, uint64_t words, uint64_t escape_words,
                                                 uint64_t rare, GpuStream stream);
  const DeviceLanes& lanes() const { return lanes_; }
  uint64_t device_bytes() const { return buffer_.bytes(); }
  const void* device_base() const { return buffer_.data(); }
  // Model tiers, as cuda::DeviceBuffer's; Reacquire moves lanes()'s pointers to the new address.
  void Release();
  Status Reacquire(const void* host, GpuStream stream);

 private:
  // Byte offsets in buffer_ of tile_words, words, escapes, tile_escapes, tile_rare, tile_split, rare.
  enum Region { kTileWords, kWords, kEscapes, kTileEscapes, kTileRare, kTileSplit, kRare, kRegions };
  void Point();  // lanes_'s pointers from buffer_ and offsets_
  static StatusOr<DeviceLanesBuffer> Make(const LaneStreams& lanes, uint64_t words, uint64_t escape_words,
                                          uint64_t rare, bool with_streams, GpuStream stream);
  cuda::DeviceBuffer buffer_;
  uint64_t offsets_[kRegions] = {};
  DeviceLanes lanes_;
};

// The exponent counts of n BF16 words on the device (ExponentHistogram's, df11_codec.h). Waits.
StatusOr<std::array<uint64_t, 256>> DeviceExponentHistogram(const uint16_t* w, uint64_t n, GpuStream stream);
// W [rows, cols]'s fixed lanes (df11_lanes_fixed.h) built on the device from its BF16 words `w`
// (device, row-major, 16-byte aligned) and their exponent counts: byte for byte
// BuildFixedLaneStreams(w, histogram, rows, cols, rows_per_tile)'s arrays, on the device. Waits.
// INVALID_ARGUMENT (naming `what`) for a shape the host builder refuses or an unaligned w.
StatusOr<DeviceLanesBuffer> BuildFixedLanesOnDevice(const uint16_t* w, const std::array<uint64_t, 256>& histogram,
                                                    int64_t rows, int64_t cols, int rows_per_tile, GpuStream stream,
                                                    const std::string& what);

// y[T, rows] = x[T, cols] · W^T (+ bias [rows] fp32) (+ y's old value when accumulate), bf16, for
// 1 <= T <= cuda::kGemvMaxTokens. `tables` are unused for LaneCode::kFixed3. sign_mantissa: W's first byte in its
// unit's array (element order), 8-byte aligned; x 16-byte aligned. Launched as a dependent (it waits for the previous
// kernel before reading x or writing y). INVALID_ARGUMENT for other token counts or alignments.
// At 1 token the sums split where the BF16 Gemv's do (GemvSplitChunk, df11_lanes_fixed.h): only fixed lanes that
// carry the split state (Df11GemvTakes) run such a matrix.
Status Df11Gemv(const uint16_t* x, const DeviceLanes& w, const Df11Tables& tables, const uint8_t* sign_mantissa,
                const float* bias, int64_t tokens, bool accumulate, uint16_t* y, GpuStream stream);
// Whether Df11Gemv runs W at these tokens with its BF16 twin's bits: always, but at 1 token on a matrix whose sums
// split (GemvSplitChunk), where it needs fixed lanes of 4 rows per tile with their split state (what
// BuildFixedLaneStreams gives at FixedRowsPerTile).
bool Df11GemvTakes(const DeviceLanes& w, int64_t tokens);

// The fused DF11 tensor-core linear for cuda::kTileGemmMinTokens <= T <= cuda::kTileGemmMaxTokens: W's fixed lanes
// decoded into shared memory stage by stage, then the arithmetic of cuda::TileGemm with the same rows per tile (the
// same bits as TileGemm on W's BF16 twin with rows_per_tile = w.rows_per_tile). Operands as Df11Gemv's.
// INVALID_ARGUMENT for Huffman lanes, other token counts or alignments.
Status Df11TileGemm(const uint16_t* x, const DeviceLanes& w, const uint8_t* sign_mantissa, const float* bias,
                    int64_t tokens, bool accumulate, uint16_t* y, GpuStream stream);
// Whether a model's linear takes Df11TileGemm for these tokens with the bits its BF16 twin gets from GemmHandle: fixed
// lanes of FixedRowsPerTile(rows, cols) rows per tile, and cuda::TileGemmApplies.
bool Df11TileGemmApplies(const uint16_t* x, const DeviceLanes& w, int64_t tokens);
// Df11TileGemm of a gate|up linear and its gated activation in one launch: out[T, inter] as
// cuda::TileGemmGated gives on W's BF16 twin with rows_per_tile = w.rows_per_tile (and as Df11TileGemm
// followed by cuda::GatedActivation). For fixed lanes with w.rows == 2 inter and inter a multiple of
// cuda::TileGemmGatedRows(w.rows_per_tile); INVALID_ARGUMENT otherwise.
Status Df11TileGemmGated(Activation act, const uint16_t* x, const DeviceLanes& w, const uint8_t* sign_mantissa,
                         const float* bias, int64_t tokens, int64_t inter, uint16_t* out, GpuStream stream);
// Whether a model's gate|up linear takes Df11TileGemmGated with the bits its BF16 twin gets from
// cuda::TileGemmGated (rows_per_tile 0): Df11TileGemmApplies and the shape Df11TileGemmGated needs.
bool Df11TileGemmGatedApplies(const uint16_t* x, const DeviceLanes& w, int64_t tokens, int64_t inter);

// The fused DF11 linear on the Hopper tensor cores (cuda_wgmma_tile.cu; sm_90a) for 1 <= T <=
// cuda::kWgmmaTileMaxTokens: fixed lanes of 4 rows per tile decoded into shared memory stage by
// stage, multiplied by wgmma as cuda::WgmmaTileGemm does (the same bits as WgmmaTileGemm on W's
// BF16 twin with a `config` of the same warps, cuda_gemm.h). Operands as Df11Gemv's. INVALID_ARGUMENT for other lanes,
// token counts or alignments; FAILED_PRECONDITION on a GPU that is not compute capability 9.0.
Status Df11WgmmaTileGemm(const uint16_t* x, const DeviceLanes& w, const uint8_t* sign_mantissa, const float* bias,
                         int64_t tokens, bool accumulate, uint16_t* y, GpuStream stream, int config = 0);
// Whether Df11WgmmaTileGemm(Gated) takes these lanes: fixed lanes of 4 rows per tile. A model's linear
// runs it where this holds and cuda::WgmmaTileApplies (its BF16 twin's choice) does; other lanes there
// go through the scratch into GemmHandle.
inline bool Df11WgmmaTileLanes(const DeviceLanes& w) { return w.code == LaneCode::kFixed3 && w.rows_per_tile == 4; }
// Df11WgmmaTileGemm of a gate|up linear and its gated activation in one launch: out[T, inter] as
// cuda::WgmmaTileGemmGated gives on W's BF16 twin with a `config` of the same warps. For fixed lanes
// of 4 rows per tile with w.rows == 2 inter and inter % 32 == 0; INVALID_ARGUMENT otherwise.
Status Df11WgmmaTileGemmGated(Activation act, const uint16_t* x, const DeviceLanes& w, const uint8_t* sign_mantissa,
                              const float* bias, int64_t tokens, int64_t inter, uint16_t* out, GpuStream stream,
                              int config = 0);

// W [rows, cols] as BF16 into out (16-byte aligned, row-major); sign_mantissa as for Df11Gemv. Asynchronous; returns
// the launch error. after_fixed_decode: the stream's previous operation is a LaunchLanesDecode of fixed lanes whose
// output does not overlap this one's out (a unit's matrices, one after another); where these lanes are fixed too,
// this decode then starts while that one's last tiles run instead of after them (it still completes only after that
// one has); other lanes ignore it. Where the previous operation is anything else, it must be false.
Status LaunchLanesDecode(const DeviceLanes& w, const Df11Tables& tables, const uint8_t* sign_mantissa, uint16_t* out,
                         GpuStream stream, bool after_fixed_decode = false);

// Adds to *mismatches (device memory) the number of 8-element groups where W decoded from its lane
// streams differs from `expected` [rows, cols] (device, 16-byte aligned): the load-time check.
// Asynchronous; returns the launch error.
Status LaunchLanesCompare(const DeviceLanes& w, const Df11Tables& tables, const uint8_t* sign_mantissa,
                          const uint16_t* expected, uint32_t* mismatches, GpuStream stream);

}  // namespace df11
