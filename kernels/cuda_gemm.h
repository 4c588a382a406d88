// BF16 GEMM through cuBLAS for the linear layers: y[T, N] = x[T, K] · W[N, K]^T (+ y when
// accumulate, used to add a broadcast bias), BF16 in and out, FP32 accumulation
// (cublasGemmEx, CUBLAS_COMPUTE_32F as PyTorch uses, default algorithm). Determinism and bit-identity:
// the handle owns a fixed workspace and one stream, so the same shapes and pointer alignments
// always run the same kernel; callers keep W 256-byte aligned wherever it lives (its own
// allocation or a slice of the decode scratch) so a DF11 weight and its BF16 twin give the same
// bits.
// Compiles without nvcc; defined only when DF11_HAVE_CUDA. Thread-safety: one user at a time.
#pragma once

#include <cstdint>

#include "kernels/cuda_ops.h"

namespace df11::cuda {

class GemmHandle {
 public:
  GemmHandle() = default;
  ~GemmHandle();
  GemmHandle(const GemmHandle&) = delete;
  GemmHandle& operator=(const GemmHandle&) = delete;

  // Creates the cuBLAS handle bound to `stream` with a 32 MiB workspace.
  Status Init(GpuStream stream);
  // Every pointer device memory; x, w, y 16-byte aligned. INTERNAL (naming the shapes) on a
  // cuBLAS error.
  Status Gemm(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t n, int64_t k, bool accumulate,
              uint16_t* y);

 private:
  void* handle_ = nullptr;  // cublasHandle_t
  DeviceBuffer workspace_;
};

}  // namespace df11::cuda
