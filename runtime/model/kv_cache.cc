// Paged KV cache allocation (see kv_cache.h).
#include "runtime/model/kv_cache.h"

#include <new>
#include <string>

namespace df11 {

StatusOr<KvCache> KvCache::Create(const ModelConfig& config, int64_t num_blocks, int64_t block_size, Device device) {
  if (num_blocks <= 0 || block_size <= 0) {
    return InvalidArgument("KV cache: num_blocks (" + std::to_string(num_blocks) + ") and block_size (" +
                           std::to_string(block_size) + ") must be positive");
  }
  KvCache cache;
  cache.shape_ = {config.num_layers, num_blocks, block_size, config.num_kv_heads, config.head_dim};
  cache.device_ = device;
  const double elements = static_cast<double>(num_blocks) * block_size * config.num_kv_heads * config.head_dim;
  if (elements * 4 * 2 * config.num_layers > 1e15) return ResourceExhausted("KV cache: too large");
  if (device == Device::kCuda) {
#if DF11_HAVE_CUDA
    const uint64_t bytes = static_cast<uint64_t>(cache.bytes());
    DF11_ASSIGN_OR_RETURN(cache.device_pools_, cuda::DeviceBuffer::Allocate(bytes, "KV cache"));
    DF11_RETURN_IF_ERROR(cuda::FillZero(cache.device_pools_.data(), bytes, nullptr));
    DF11_RETURN_IF_ERROR(cuda::Synchronize(nullptr));
    return cache;
#else
    return Unimplemented("KV cache: this build has no CUDA");
#endif
  }
  try {
    cache.k_.assign(config.num_layers, std::vector<float>(static_cast<size_t>(elements), 0.0f));
    cache.v_ = cache.k_;
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("KV cache: cannot allocate " + std::to_string(elements * 8 * config.num_layers / 1e9) +
                             " GB");
  }
  return cache;
}

int64_t KvCache::BytesPerBlock(const ModelConfig& config, int64_t block_size, Device device) {
  const int64_t element = device == Device::kCuda ? 2 : 4;
  return 2 * config.num_layers * block_size * config.num_kv_heads * config.head_dim * element;
}

int64_t KvCache::bytes() const {
  const int64_t element = device_ == Device::kCuda ? 2 : 4;
  return 2 * shape_.num_layers * shape_.num_blocks * shape_.block_size * shape_.num_kv_heads * shape_.head_dim *
         element;
}

cpu::PagedKvLayer KvCache::Layer(int64_t layer) {
  return {k_[layer].data(),  v_[layer].data(),    shape_.num_blocks,
          shape_.block_size, shape_.num_kv_heads, shape_.head_dim};
}

cuda::PagedKvLayer KvCache::DeviceLayer(int64_t layer) {
  const int64_t per_layer = shape_.num_blocks * shape_.block_size * shape_.num_kv_heads * shape_.head_dim;
  uint16_t* base = device_pools_.as<uint16_t>();
  return {base + layer * per_layer, base + (shape_.num_layers + layer) * per_layer, shape_.num_blocks,
          shape_.block_size, shape_.num_kv_heads, shape_.head_dim};
}

}  // namespace df11
