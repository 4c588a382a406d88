// Device memory query (see device_memory.h).
#include "scheduler/device_memory.h"

#ifdef DF11_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace df11 {

std::optional<int64_t> FreeDeviceBytes() {
#ifdef DF11_HAVE_CUDA
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error (no device)
    return std::nullopt;
  }
  return static_cast<int64_t>(free_bytes);
#else
  return std::nullopt;
#endif
}

}  // namespace df11
