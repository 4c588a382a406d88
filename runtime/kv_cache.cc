// Paged KV cache allocation (see kv_cache.h).
#include "runtime/kv_cache.h"

#include <new>
#include <string>

namespace df11 {

StatusOr<KvCache> KvCache::Create(const ModelConfig& config, int64_t num_blocks, int64_t block_size) {
  if (num_blocks <= 0 || block_size <= 0) {
    return InvalidArgument("KV cache: num_blocks (" + std::to_string(num_blocks) + ") and block_size (" +
                           std::to_string(block_size) + ") must be positive");
  }
  KvCache cache;
  cache.shape_ = {config.num_layers, num_blocks, block_size, config.num_kv_heads, config.head_dim};
  const double floats = static_cast<double>(num_blocks) * block_size * config.num_kv_heads * config.head_dim;
  if (floats * 4 * 2 * config.num_layers > 1e15) return ResourceExhausted("KV cache: too large");
  try {
    cache.k_.assign(config.num_layers, std::vector<float>(static_cast<size_t>(floats), 0.0f));
    cache.v_ = cache.k_;
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("KV cache: cannot allocate " + std::to_string(floats * 8 * config.num_layers / 1e9) +
                             " GB");
  }
  return cache;
}

int64_t KvCache::BytesPerBlock(const ModelConfig& config, int64_t block_size, Device device) {
  const int64_t element = device == Device::kCuda ? 2 : 4;
  return 2 * config.num_layers * block_size * config.num_kv_heads * config.head_dim * element;
}

cpu::PagedKvLayer KvCache::Layer(int64_t layer) {
  return {k_[layer].data(),  v_[layer].data(),    shape_.num_blocks,
          shape_.block_size, shape_.num_kv_heads, shape_.head_dim};
}

}  // namespace df11
