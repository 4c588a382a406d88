// Device facts for metrics: build identity and GPU memory (cudaMemGetInfo when built with CUDA).
// Thread-safety: thread-safe; each call queries the CUDA runtime afresh (microseconds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace df11 {

struct BuildInfo {
  std::string version;  // kernels/base/version.h
  std::string cuda;     // CUDA runtime version "12.4", or "none"
  std::string gpu;      // name of the current CUDA device, or "none"
};
BuildInfo QueryBuildInfo();

struct GpuMemory {
  int index = 0;           // CUDA device ordinal (the calling thread's current device)
  uint64_t total_bytes = 0, free_bytes = 0;
};
// The current CUDA device's memory; nullopt without CUDA or without a usable device.
std::optional<GpuMemory> QueryGpuMemory();

}  // namespace df11
