// KvCache: the paged key/value cache, owned by the caller (the scheduler); the model is stateless
// between steps and only reads/writes the slots a step's block tables name.
// Layout, as arrays (FlashInfer style):
//   per layer l:  K[l], V[l]   [num_blocks, block_size, num_kv_heads, head_dim]
//                              fp32 in host memory (Device::kCpu), bf16 in device memory (kCuda)
//   per sequence: block_table  int32 [ceil(num_positions / block_size)], ids into [0, num_blocks)
// Position p of a sequence lives in block block_table[p / block_size], slot p % block_size.
// Keys are stored after k-norm and rotary embedding. ("block" here is a KV-cache block, never a
// DF11 chunk.)
// Thread-safety: none; one step at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/base/status.h"
#include "kernels/cpu_ops.h"
#include "kernels/cuda_ops.h"
#include "runtime/format/model_config.h"
#include "runtime/model/device.h"

namespace df11 {

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  friend bool operator==(const KvCacheShape&, const KvCacheShape&) = default;
};

class KvCache {
 public:
  // Allocates num_blocks blocks of block_size positions for every layer of `config` on `device`
  // (zero-filled). INVALID_ARGUMENT for non-positive sizes, RESOURCE_EXHAUSTED when it would not
  // fit in memory, UNIMPLEMENTED for kCuda in a build without CUDA.
  static StatusOr<KvCache> Create(const ModelConfig& config, int64_t num_blocks, int64_t block_size,
                                  Device device = Device::kCpu);

  // Bytes one block takes over all layers (K and V) on `device`: fp32 on the CPU, bf16 on CUDA.
  static int64_t BytesPerBlock(const ModelConfig& config, int64_t block_size, Device device);

  const KvCacheShape& shape() const { return shape_; }
  Device device() const { return device_; }
  // Bytes of all pools (K and V, every layer) on the cache's device.
  int64_t bytes() const;
  // Blocks needed to hold `positions` positions.
  int64_t BlocksFor(int64_t positions) const { return (positions + shape_.block_size - 1) / shape_.block_size; }
  // The pools of one layer (0 <= layer < num_layers) of a kCpu cache.
  cpu::PagedKvLayer Layer(int64_t layer);
  // The device pools of one layer of a kCuda cache.
  cuda::PagedKvLayer DeviceLayer(int64_t layer);

 private:
  KvCacheShape shape_;
  Device device_ = Device::kCpu;
  std::vector<std::vector<float>> k_, v_;  // kCpu: [num_layers][num_blocks * block_size * kv_heads * head_dim]
  cuda::DeviceBuffer device_pools_;        // kCuda: K of every layer, then V of every layer, bf16
};

}  // namespace df11
