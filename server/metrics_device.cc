// Build identity and GPU memory for metrics (see metrics_device.h).
#include "server/metrics_device.h"

#include "kernels/base/version.h"

#ifdef DF11_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace df11 {

#ifdef DF11_HAVE_CUDA
namespace {
std::optional<int> CurrentDevice() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return std::nullopt;
  }
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return std::nullopt;
  return device;
}
std::string DeviceName(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "unknown";
  return prop.name;
}
}  // namespace
#endif

BuildInfo QueryBuildInfo() {
  BuildInfo info{Version(), "none", "none"};
#ifdef DF11_HAVE_CUDA
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    info.cuda = std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
  }
  if (std::optional<int> device = CurrentDevice()) info.gpu = DeviceName(*device);
#endif
  return info;
}

std::optional<GpuMemory> QueryGpuMemory() {
#ifdef DF11_HAVE_CUDA
  std::optional<int> device = CurrentDevice();
  if (!device) return std::nullopt;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return GpuMemory{*device, total_bytes, free_bytes};
#else
  return std::nullopt;
#endif
}

}  // namespace df11
