// Weights of the forward step as the CPU runtime sees them. Every linear layer goes through one
// interface, ApplyLinear(LinearWeight, UnitScratch, x, y): the weight is either a BF16 tensor
// (memory-mapped from a plain checkpoint) or a slice of a DF11 unit that must be decoded into the
// step's UnitScratch first. A fused decode-GEMV can later replace ApplyLinear without touching
// the model code.
// Thread-safety: LinearWeight is immutable after load; a UnitScratch belongs to one step at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "kernels/cuda_ops.h"
#include "runtime/format/checkpoint.h"

namespace df11 {

// A [out_features, in_features] BF16 matrix with an optional fp32 bias [out_features].
struct LinearWeight {
  std::string name;
  int64_t out_features = 0;
  int64_t in_features = 0;
  // Exactly one source is set:
  const uint16_t* plain = nullptr;  // BF16 words borrowed from the checkpoint's mmap
  std::vector<uint16_t> owned;      // a plain tensor copied because its mmap address was odd
  const Df11Unit* unit = nullptr;   // DF11: elements [unit_offset, unit_offset + out * in) of unit
  uint64_t unit_offset = 0;
  std::vector<float> bias;  // empty = no bias
};

// Looks up `name` (with `rows` = out_features) in the checkpoint: a BF16 plain tensor or a DF11
// unit slice whose element count must equal rows * cols. Errors name the tensor.
StatusOr<LinearWeight> LocateLinear(const Checkpoint& checkpoint, const std::string& name, int64_t rows, int64_t cols);
// Reads a BF16 vector tensor (norm weight, bias) as fp32; INVALID_ARGUMENT unless it has `size`
// elements.
StatusOr<std::vector<float>> ReadVectorF32(const Checkpoint& checkpoint, const std::string& name, int64_t size);

// The one scratch buffer DF11 units are decoded into, reused for every unit of a step (a layer's
// unit is decoded just before the layer runs). Sized once for the largest unit.
class UnitScratch {
 public:
  explicit UnitScratch(uint64_t capacity_elements = 0) : buffer_(capacity_elements) {}
  // Decodes all of `unit` (no-op when it is already the decoded one). `threads`: 0 = all cores.
  Status Load(const Df11Unit& unit, const std::string& what, int threads);
  const Df11Unit* loaded() const { return loaded_; }
  const uint16_t* data() const { return buffer_.data(); }

 private:
  std::vector<uint16_t> buffer_;
  const Df11Unit* loaded_ = nullptr;
};

// The device buffer (CUDA) DF11 units are decoded into just before use. Several models on one GPU
// may share one (pass the same shared_ptr in their ModelOptions); it grows to the largest need.
// Thread-safety: one Step at a time over all the models that share it.
class DeviceScratch {
 public:
  Status Reserve(uint64_t bytes) { return buffer_.Reserve(bytes, "DF11 decode scratch"); }
  uint16_t* data() const { return buffer_.as<uint16_t>(); }
  uint64_t bytes() const { return buffer_.bytes(); }

 private:
  cuda::DeviceBuffer buffer_;
};

// The BF16 words of `w`: its plain tensor, or its slice of `scratch` (FAILED_PRECONDITION if the
// scratch holds another unit: the caller forgot to Load it).
StatusOr<const uint16_t*> WeightData(const LinearWeight& w, const UnitScratch& scratch);

// y[T, out] = x[T, in] · W^T + bias, fp32 in and out. y must not alias x.
Status ApplyLinear(const LinearWeight& w, const UnitScratch& scratch, const float* x, int64_t tokens, float* y,
                   int threads);

}  // namespace df11
