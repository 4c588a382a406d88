// CUDA DF11 decoder: a unit uploaded once (compressed, with its derived tables) and decoded on
// demand, whole or as an element range, into a device BF16 buffer. Bit-exact with DecodeUnitCpu
// on every unit that passes it; memory-safe (no out-of-bounds access) on any unit that passes
// ValidateUnit. Host functions return Status (a failed CUDA call as INTERNAL, or
// RESOURCE_EXHAUSTED when out of memory, naming the call with file:line) and never abort.
// Thread-safety: a DeviceUnit is immutable after upload; launches on different streams may run
// concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/df11_format.h"
#include "kernels/base/status.h"
#include "kernels/gpu.h"  // GpuStream, CudaDeviceCount

namespace df11 {
namespace cuda {
class HostUploader;  // cuda_upload.h
}

// Device pointers of one uploaded unit (all inside one allocation owned by DeviceUnitBuffer).
struct DeviceUnit {
  const uint32_t* pair_table = nullptr;     // [4096] see BuildPairTable (df11_fast_table.h)
  const uint8_t* luts = nullptr;            // [num_luts * 256]
  const uint8_t* stream = nullptr;          // [num_chunks * chunk bytes + 16], zero past num_bytes; null
                                            // in a WithoutStream copy (then chunk_starts, gaps too)
  const uint8_t* sign_mantissa = nullptr;   // [n], 16-byte aligned
  const uint32_t* chunk_starts = nullptr;   // [num_chunks + 1]
  const uint8_t* gaps = nullptr;            // [windows of all chunks * 5 / 8 + 8], zero padded
  uint64_t num_elements = 0;
  uint64_t num_bytes = 0;
  uint32_t num_chunks = 0;
  uint32_t max_chunk_elements = 0;
  int num_luts = 0;
  int threads_per_block = kDefaultThreadsPerBlock;
};

// Owns the device allocation behind a DeviceUnit. Move-only.
class DeviceUnitBuffer {
 public:
  DeviceUnitBuffer() = default;
  ~DeviceUnitBuffer();
  DeviceUnitBuffer(DeviceUnitBuffer&& other) noexcept;
  DeviceUnitBuffer& operator=(DeviceUnitBuffer&& other) noexcept;
  DeviceUnitBuffer(const DeviceUnitBuffer&) = delete;
  DeviceUnitBuffer& operator=(const DeviceUnitBuffer&) = delete;

  // Uploads a validated unit (synchronously); its stream and sign_mantissa through `uploader`
  // when one is given (cudaMemcpy otherwise). Errors: RESOURCE_EXHAUSTED when device memory runs
  // out, INVALID_ARGUMENT for threads_per_block other than 512, INTERNAL for other CUDA errors.
  static StatusOr<DeviceUnitBuffer> Upload(const UnitView& unit, const UnitLayout& layout,
                                           cuda::HostUploader* uploader = nullptr);

  // A copy on the device with only the tables and sign_mantissa (the unit's matrices live on as
  // lane streams, df11_lanes_cuda.h), made by device-to-device copies: stream, chunk_starts and
  // gaps are null and the decoders refuse it. RESOURCE_EXHAUSTED when out of memory.
  StatusOr<DeviceUnitBuffer> WithoutStream() const;

  const DeviceUnit& unit() const { return unit_; }
  uint64_t device_bytes() const { return bytes_; }
  const void* device_base() const { return base_; }  // the allocation, device_bytes() long
  // Model tiers, as cuda::DeviceBuffer's: Release frees the device memory (device_bytes() stays);
  // Reacquire allocates it again, copies host[0, device_bytes()) into it on `stream`
  // (asynchronous) and moves unit()'s pointers to the new address.
  void Release();
  Status Reacquire(const void* host, GpuStream stream);
  // Host copy of output_positions, for choosing the chunks of a range.
  const UnitLayout& layout() const { return layout_; }

 private:
  DeviceUnit unit_;
  void* base_ = nullptr;
  uint64_t bytes_ = 0;
  const void* released_base_ = nullptr;  // base_ before Release: unit_'s pointers are relative to it
  UnitLayout layout_;
};

// Decodes elements [begin, end) of `unit` into out[0, end - begin) (device memory) on `stream`.
// `layout` is the host copy (DeviceUnitBuffer::layout()). Asynchronous; returns the launch error.
// Fastest when begin % 8 == 0 and `out` is 16-byte aligned.
Status LaunchDf11Decode(const DeviceUnit& unit, const UnitLayout& layout, uint64_t begin, uint64_t end,
                        uint16_t* out, GpuStream stream);

// Several ranges in one launch (e.g. the embedding rows of a step): range i decodes elements
// [begin, end) of the unit to out + out_offset (elements). Items are built on the host
// (Df11DecodeItems: one per (range, chunk it touches), validated against the layout), copied to
// the device by the caller, then launched. Output ranges must not overlap.
struct Df11Range {
  uint64_t begin = 0, end = 0, out_offset = 0;
};
struct Df11DecodeItem {
  uint64_t begin, end, out_offset;
  uint32_t chunk, reserved;
};
// OUT_OF_RANGE for a range outside the unit. *vector_ok: every range allows 16-byte stores
// (begin and out_offset multiples of 8); pass it to LaunchDf11DecodeItems.
StatusOr<std::vector<Df11DecodeItem>> Df11DecodeItems(const UnitLayout& layout, std::span<const Df11Range> ranges,
                                                      bool* vector_ok);
// `items`: device copy of Df11DecodeItems' result. Asynchronous; returns the launch error.
Status LaunchDf11DecodeItems(const DeviceUnit& unit, const Df11DecodeItem* items, uint32_t num_items, bool vector_ok,
                             uint16_t* out, GpuStream stream);

// Shared memory per thread block the kernel needs for this unit (bytes).
uint64_t Df11DecodeSharedBytes(const DeviceUnit& unit);

}  // namespace df11
