// cuBLAS BF16 GEMM wrapper (see cuda_gemm.h).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda_gemm.h"

namespace df11::cuda {
namespace {

constexpr uint64_t kWorkspaceBytes = 32ull << 20;

Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(std::string(what) + ": cuBLAS error " + cublasGetStatusString(st));
}

}  // namespace

GemmHandle::~GemmHandle() {
  if (handle_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

Status GemmHandle::Init(GpuStream stream) {
  cublasHandle_t h = nullptr;
  DF11_RETURN_IF_ERROR(CublasStatus(cublasCreate(&h), "cublasCreate"));
  handle_ = h;
  DF11_ASSIGN_OR_RETURN(workspace_, DeviceBuffer::Allocate(kWorkspaceBytes, "cuBLAS workspace"));
  DF11_RETURN_IF_ERROR(CublasStatus(cublasSetStream(h, reinterpret_cast<cudaStream_t>(stream)), "cublasSetStream"));
  DF11_RETURN_IF_ERROR(
      CublasStatus(cublasSetWorkspace(h, workspace_.data(), workspace_.bytes()), "cublasSetWorkspace"));
  DF11_RETURN_IF_ERROR(CublasStatus(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode"));
  return Status::Ok();
}

Status GemmHandle::Gemm(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t n, int64_t k, bool accumulate,
                        uint16_t* y) {
  if (handle_ == nullptr) return FailedPrecondition("GEMM handle not initialised");
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  // Column-major view: Y^T [n, tokens] = W^T^T · X^T, i.e. op(A) = W (stored k x n, transposed).
  const cublasStatus_t st =
      cublasGemmEx(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
                   static_cast<int>(tokens), static_cast<int>(k), &alpha, w, CUDA_R_16BF, static_cast<int>(k), x,
                   CUDA_R_16BF, static_cast<int>(k), &beta, y, CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
  const std::string what = "cublasGemmEx [" + std::to_string(tokens) + ", " + std::to_string(k) + "] x [" +
                           std::to_string(n) + ", " + std::to_string(k) + "]^T";
  return CublasStatus(st, what.c_str());
}

}  // namespace df11::cuda
