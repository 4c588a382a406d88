// Free memory of the current CUDA device, for sizing the KV budget (kv_budget.h).
// Thread-safety: safe from any thread.
#pragma once

#include <cstdint>
#include <optional>

namespace df11 {

// cudaMemGetInfo's free bytes; nullopt in a build without CUDA or when no device is usable.
std::optional<int64_t> FreeDeviceBytes();

}  // namespace df11
