// GPU facts in one place: how many CUDA devices there are, the current device's memory and name,
// the CUDA runtime version, the stream handle type, and the one helper that turns a failed CUDA
// runtime call into a Status naming the call and its file:line. Only kernels/gpu.cc asks the
// CUDA runtime for these facts; the scheduler, metrics and the decoders ask here.
// Builds without CUDA (DF11_HAVE_CUDA unset): every query answers "no device" (0, nullopt, "none").
// Thread-safety: every function is safe from any thread; "current device" is the calling thread's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/base/status.h"

struct CUstream_st;

namespace df11 {

using GpuStream = CUstream_st*;  // == cudaStream_t

// Number of CUDA devices (0 when CUDA, the driver or a device is missing; never fails).
int CudaDeviceCount();

struct GpuMemory {
  int index = 0;  // CUDA device ordinal (the calling thread's current device)
  uint64_t total_bytes = 0, free_bytes = 0;
};
// The current device's memory (cudaMemGetInfo); nullopt without CUDA or without a usable device.
std::optional<GpuMemory> QueryGpuMemory();

// Name of the current device ("NVIDIA H100 80GB HBM3"), "unknown" when the query fails, "none"
// without a device.
std::string GpuName();
// The CUDA runtime version as "major.minor" ("12.4"), or "none" without CUDA.
std::string CudaRuntimeVersion();

// OK for cudaSuccess (0); else RESOURCE_EXHAUSTED for cudaErrorMemoryAllocation and INTERNAL for
// every other error, as "<call>: <CUDA's error string> (<file>:<line>)". `error` is a cudaError_t.
Status CudaCallStatus(int error, const char* call, const char* file, int line);

}  // namespace df11

// The checked CUDA call: DF11_CUDA_STATUS(cudaMalloc(&p, n)) is its Status; DF11_CUDA_RETURN(...)
// returns that Status from the enclosing function (Status or StatusOr) when it is not OK.
#define DF11_CUDA_STATUS(call) ::df11::CudaCallStatus(static_cast<int>(call), #call, __FILE__, __LINE__)
#define DF11_CUDA_RETURN(call) DF11_RETURN_IF_ERROR(DF11_CUDA_STATUS(call))
