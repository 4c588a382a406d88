// GPU facts from the CUDA runtime (see gpu.h); without CUDA, answers of a machine with no device.
#include "kernels/gpu.h"

#ifdef DF11_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace df11 {

#ifdef DF11_HAVE_CUDA

namespace {
// The current device, or nullopt (the sticky "no device" error cleared).
std::optional<int> CurrentDevice() {
  if (CudaDeviceCount() == 0) return std::nullopt;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return device;
}
}  // namespace

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::optional<GpuMemory> QueryGpuMemory() {
  const std::optional<int> device = CurrentDevice();
  if (!device) return std::nullopt;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return GpuMemory{*device, total_bytes, free_bytes};
}

std::string GpuName() {
  const std::optional<int> device = CurrentDevice();
  if (!device) return "none";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, *device) != cudaSuccess) return "unknown";
  return prop.name;
}

std::string CudaRuntimeVersion() {
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) return "none";
  return std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
}

Status CudaCallStatus(int error, const char* call, const char* file, int line) {
  const auto err = static_cast<cudaError_t>(error);
  if (err == cudaSuccess) return Status::Ok();
  const StatusCode code = err == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code,
                std::string(call) + ": " + cudaGetErrorString(err) + " (" + file + ":" + std::to_string(line) + ")");
}

#else  // no CUDA in this build

int CudaDeviceCount() { return 0; }
std::optional<GpuMemory> QueryGpuMemory() { return std::nullopt; }
std::string GpuName() { return "none"; }
std::string CudaRuntimeVersion() { return "none"; }

Status CudaCallStatus(int error, const char* call, const char* file, int line) {
  if (error == 0) return Status::Ok();
  return Internal(std::string(call) + ": CUDA error " + std::to_string(error) + " (" + file + ":" +
                  std::to_string(line) + ")");
}

#endif

}  // namespace df11
