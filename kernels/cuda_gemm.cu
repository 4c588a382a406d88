// cuBLAS BF16 GEMM wrapper (see cuda_gemm.h).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_ops.h"
#include "kernels/cuda_gemm.h"

namespace df11::cuda {
namespace {

constexpr uint64_t kWorkspaceBytes = 32ull << 20;

Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(std::string(what) + ": cuBLAS error " + cublasGetStatusString(st));
}

// The largest power of two up to 256 dividing the address (PyTorch's _getAlignment).
uint32_t Alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (a % alignment != 0) alignment /= 2;
  return alignment;
}

// Owns cublasLt descriptors for one call.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescriptors() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

// *count += the number of elements i < n where a[i] != b[i] (bit patterns).
__global__ void CountUnequalKernel(const uint16_t* a, const uint16_t* b, int64_t n, unsigned long long* count) {
  unsigned int differ = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    differ += a[i] != b[i];
  }
  if (differ != 0) atomicAdd(count, static_cast<unsigned long long>(differ));
}

// Random N(0, 1) bf16 values (fixed seed), rounded to nearest even.
std::vector<uint16_t> RandomBf16(size_t n) {
  std::mt19937 rng(20261129);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t& e : v) e = cpu::FloatToBf16(dist(rng));
  return v;
}

}  // namespace

GemmHandle::~GemmHandle() {
  if (lt_handle_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(lt_handle_));
  if (handle_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

Status GemmHandle::Init(GpuStream stream) {
  stream_ = stream;
  cublasHandle_t h = nullptr;
  DF11_RETURN_IF_ERROR(CublasStatus(cublasCreate(&h), "cublasCreate"));
  handle_ = h;
  DF11_ASSIGN_OR_RETURN(workspace_, DeviceBuffer::Allocate(kWorkspaceBytes, "cuBLAS workspace"));
  DF11_RETURN_IF_ERROR(CublasStatus(cublasSetStream(h, reinterpret_cast<cudaStream_t>(stream)), "cublasSetStream"));
  DF11_RETURN_IF_ERROR(
      CublasStatus(cublasSetWorkspace(h, workspace_.data(), workspace_.bytes()), "cublasSetWorkspace"));
  DF11_RETURN_IF_ERROR(CublasStatus(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode"));
  cublasLtHandle_t lt = nullptr;
  DF11_RETURN_IF_ERROR(CublasStatus(cublasLtCreate(&lt), "cublasLtCreate"));
  lt_handle_ = lt;
  return Status::Ok();
}

Status GemmHandle::Gemm(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t n, int64_t k, bool accumulate,
                        uint16_t* y) {
  if (handle_ == nullptr) return FailedPrecondition("GEMM handle not initialised");
  if (RunsWgmmaTile(x, w, tokens, n, k)) {
    if (!accumulate && Alignment(x) == 256 && Alignment(y) == 256 && CublasKeepsBits(n, k, tokens)) {
      return CublasGemm(x, w, tokens, n, k, false, y);
    }
    return WgmmaTileGemm(x, w, nullptr, tokens, n, k, accumulate, y, stream_, kWgmmaTileModelConfig);
  }
  if (RunsTile(x, w, tokens, k)) return cuda::TileGemm(x, w, nullptr, tokens, n, k, accumulate, y, stream_);
  if (GemvApplies(x, w, tokens, k)) return cuda::Gemv(x, w, nullptr, tokens, n, k, accumulate, y, stream_);
  return CublasGemm(x, w, tokens, n, k, accumulate, y);
}

bool GemmHandle::CublasKeepsBits(int64_t n, int64_t k, int64_t tokens) const {
  if (tokens < 0 || tokens > kWgmmaTileMaxTokens) return false;
  for (const CublasBits& c : cublas_bits_) {
    if (c.n == n && c.k == k) return c.tokens.test(static_cast<size_t>(tokens));
  }
  return false;
}

StatusOr<std::vector<int64_t>> GemmHandle::CheckCublasBits(const uint16_t* w, int64_t n, int64_t k) {
  if (handle_ == nullptr) return FailedPrecondition("GEMM handle not initialised");
  std::vector<int64_t> differed;
  const int64_t first = kWgmmaTileModelMinTokens, last = kWgmmaTileMaxTokens;
  // WgmmaTileApplies with an aligned x: the shapes the tile linear takes (and a GPU that runs it).
  if (!WgmmaTileApplies(w, first, n, k, kWgmmaTileMaxTokens) || reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    return differed;
  }
  const uint64_t y_bytes = static_cast<uint64_t>(last) * static_cast<uint64_t>(n) * 2;
  DF11_ASSIGN_OR_RETURN(DeviceBuffer x, DeviceBuffer::Allocate(static_cast<uint64_t>(last * k) * 2, "cuBLAS bits check x"));
  DF11_ASSIGN_OR_RETURN(DeviceBuffer y_cublas, DeviceBuffer::Allocate(y_bytes, "cuBLAS bits check y"));
  DF11_ASSIGN_OR_RETURN(DeviceBuffer y_tile, DeviceBuffer::Allocate(y_bytes, "cuBLAS bits check y"));
  DF11_ASSIGN_OR_RETURN(DeviceBuffer counts,
                        DeviceBuffer::Allocate(static_cast<uint64_t>(last + 1) * 8, "cuBLAS bits check counts"));
  const std::vector<uint16_t> host_x = RandomBf16(static_cast<size_t>(last * k));
  DF11_RETURN_IF_ERROR(CopyToDevice(x.data(), host_x.data(), host_x.size() * 2, stream_));
  DF11_RETURN_IF_ERROR(FillZero(counts.data(), counts.bytes(), stream_));
  const auto s = reinterpret_cast<cudaStream_t>(stream_);
  for (int64_t t = first; t <= last; ++t) {
    DF11_RETURN_IF_ERROR(CublasGemm(x.as<uint16_t>(), w, t, n, k, false, y_cublas.as<uint16_t>()));
    DF11_RETURN_IF_ERROR(WgmmaTileGemm(x.as<uint16_t>(), w, nullptr, t, n, k, false, y_tile.as<uint16_t>(), stream_,
                                       kWgmmaTileModelConfig));
    CountUnequalKernel<<<264, 256, 0, s>>>(y_cublas.as<uint16_t>(), y_tile.as<uint16_t>(), t * n,
                                           counts.as<unsigned long long>() + t);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
      return Internal(std::string("cuBLAS bits check: ") + cudaGetErrorString(e));
    }
  }
  std::vector<unsigned long long> host_counts(static_cast<size_t>(last + 1));
  DF11_RETURN_IF_ERROR(CopyToHost(host_counts.data(), counts.data(), counts.bytes(), stream_));
  CublasBits found{n, k, {}};
  for (int64_t t = first; t <= last; ++t) {
    if (host_counts[static_cast<size_t>(t)] == 0) {
      found.tokens.set(static_cast<size_t>(t));
    } else {
      differed.push_back(t);
    }
  }
  std::erase_if(cublas_bits_, [&](const CublasBits& c) { return c.n == n && c.k == k; });
  cublas_bits_.push_back(found);
  return differed;
}

Status GemmHandle::CublasGemm(const uint16_t* x, const uint16_t* w, int64_t tokens, int64_t n, int64_t k,
                              bool accumulate, uint16_t* y, int64_t ldy) {
  if (handle_ == nullptr) return FailedPrecondition("GEMM handle not initialised");
  if (ldy == 0) ldy = n;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  // Column-major view: Y^T [n, tokens] = W^T^T · X^T, i.e. op(A) = W (stored k x n, transposed).
  const cublasStatus_t st =
      cublasGemmEx(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
                   static_cast<int>(tokens), static_cast<int>(k), &alpha, w, CUDA_R_16BF, static_cast<int>(k), x,
                   CUDA_R_16BF, static_cast<int>(k), &beta, y, CUDA_R_16BF, static_cast<int>(ldy), CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
  const std::string what = "cublasGemmEx [" + std::to_string(tokens) + ", " + std::to_string(k) + "] x [" +
                           std::to_string(n) + ", " + std::to_string(k) + "]^T";
  return CublasStatus(st, what.c_str());
}

Status GemmHandle::LtGemmBias(const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t tokens, int64_t n,
                              int64_t k, uint16_t* y, GpuStream stream, bool* done) {
  *done = false;
  LtDescriptors d;
  if (cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return Status::Ok();
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  const cudaDataType_t bias_type = CUDA_R_16BF;
  const uint64_t workspace = workspace_.bytes();
  const uint32_t align_w = Alignment(w), align_x = Alignment(x), align_y = Alignment(y);
  bool ok = cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)) == 0 &&
            cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)) == 0 &&
            cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)) == 0 &&
            cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)) == 0 &&
            cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                           sizeof(bias_type)) == 0 &&
            // Column-major: A = W stored [k, n] (transposed), B = X [k, tokens], C = D = Y^T [n, tokens].
            cublasLtMatrixLayoutCreate(&d.a, CUDA_R_16BF, k, n, k) == 0 &&
            cublasLtMatrixLayoutCreate(&d.b, CUDA_R_16BF, k, tokens, k) == 0 &&
            cublasLtMatrixLayoutCreate(&d.c, CUDA_R_16BF, n, tokens, n) == 0 &&
            cublasLtMatmulPreferenceCreate(&d.pref) == 0 &&
            cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                 sizeof(workspace)) == 0 &&
            cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_w,
                                                 sizeof(align_w)) == 0 &&
            cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_x,
                                                 sizeof(align_x)) == 0 &&
            cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_y,
                                                 sizeof(align_y)) == 0 &&
            cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_y,
                                                 sizeof(align_y)) == 0;
  if (!ok) return Status::Ok();
  const auto lt = static_cast<cublasLtHandle_t>(lt_handle_);
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(lt, d.op, d.a, d.b, d.c, d.c, d.pref, 1, &heuristic, &found) != 0 ||
      found == 0) {
    return Status::Ok();  // not supported here: the caller falls back
  }
  const float alpha = 1.0f, beta = 0.0f;
  const std::string what = "cublasLtMatmul+bias [" + std::to_string(tokens) + ", " + std::to_string(k) + "] x [" +
                           std::to_string(n) + ", " + std::to_string(k) + "]^T";
  DF11_RETURN_IF_ERROR(CublasStatus(cublasLtMatmul(lt, d.op, &alpha, w, d.a, x, d.b, &beta, y, d.c, y, d.c,
                                                   &heuristic.algo, workspace_.data(), workspace,
                                                   reinterpret_cast<cudaStream_t>(stream)),
                                    what.c_str()));
  *done = true;
  return Status::Ok();
}

Status GemmHandle::GemmBias(const uint16_t* x, const uint16_t* w, const float* bias, int64_t tokens, int64_t n,
                            int64_t k, uint16_t* y, GpuStream stream) {
  if (handle_ == nullptr) return FailedPrecondition("GEMM handle not initialised");
  if (RunsWgmmaTile(x, w, tokens, n, k)) {
    return WgmmaTileGemm(x, w, bias, tokens, n, k, false, y, stream, kWgmmaTileModelConfig);
  }
  if (RunsTile(x, w, tokens, k)) return cuda::TileGemm(x, w, bias, tokens, n, k, false, y, stream);
  if (GemvApplies(x, w, tokens, k)) return cuda::Gemv(x, w, bias, tokens, n, k, false, y, stream);
  if (tokens > 1) {
    DF11_RETURN_IF_ERROR(bias_bf16_.Reserve(static_cast<uint64_t>(n) * 2, "bf16 bias"));
    DF11_RETURN_IF_ERROR(BroadcastBias(bias, 1, n, bias_bf16_.as<uint16_t>(), stream));
    bool done = false;
    DF11_RETURN_IF_ERROR(LtGemmBias(x, w, bias_bf16_.as<const uint16_t>(), tokens, n, k, y, stream, &done));
    if (done) return Status::Ok();
  }
  DF11_RETURN_IF_ERROR(BroadcastBias(bias, tokens, n, y, stream));
  return Gemm(x, w, tokens, n, k, /*accumulate=*/true, y);
}

}  // namespace df11::cuda
