// CUDA ops of the forward step (see cuda_ops.h): memory helpers, then kernels, then launchers.
// Attention lives in cuda_attention.cu.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/base/parallel.h"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_ops_internal.cuh"

namespace df11::cuda {

Status CheckCuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  const StatusCode code = err == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code, std::string(what) + ": " + cudaGetErrorString(err));
}

Status CheckLaunch(const char* kernel) { return CheckCuda(cudaGetLastError(), kernel); }

// ---- memory, streams, timing ----

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(uint64_t bytes, const char* what) {
  DeviceBuffer b;
  DF11_RETURN_IF_ERROR(b.Reserve(bytes, what));
  return b;
}

Status DeviceBuffer::Reserve(uint64_t bytes, const char* what) {
  if (bytes <= bytes_ && data_ != nullptr) return Status::Ok();
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
  const cudaError_t err = cudaMalloc(&data_, bytes == 0 ? 256 : bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    data_ = nullptr;
    return CheckCuda(err, (std::string("allocating ") + std::to_string(bytes) + " bytes for " + what).c_str());
  }
  bytes_ = bytes;
  return Status::Ok();
}

void DeviceBuffer::Release() {
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
}

Status DeviceBuffer::Reacquire(const void* host, GpuStream stream, const char* what) {
  const uint64_t bytes = bytes_;
  DF11_RETURN_IF_ERROR(Reserve(bytes, what));
  return CopyToDevice(data_, host, bytes, stream);
}

PinnedHostBuffer::~PinnedHostBuffer() { Free(); }

void PinnedHostBuffer::Free() {
  if (data_ == nullptr) return;
  if (mapped_ > 0) {
    cudaHostUnregister(data_);
    munmap(data_, mapped_);
  } else {
    cudaFreeHost(data_);
  }
  data_ = nullptr;
  bytes_ = mapped_ = 0;
}

PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer&& other) noexcept { *this = std::move(other); }

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& other) noexcept {
  if (this != &other) {
    Free();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

StatusOr<PinnedHostBuffer> PinnedHostBuffer::Allocate(uint64_t bytes, const char* what, PinnedAlloc how) {
  PinnedHostBuffer b;
  const uint64_t size = bytes == 0 ? 256 : bytes;
  auto refused = [&](const std::string& why) {
    return ResourceExhausted(std::string("allocating ") + std::to_string(bytes) +
                             " bytes of page-locked host memory for " + what + ": " + why);
  };
  if (how == PinnedAlloc::kCudaMallocHost) {
    void* p = nullptr;
    const cudaError_t err = cudaMallocHost(&p, size);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return refused(cudaGetErrorString(err));
    }
    b.data_ = static_cast<char*>(p);
    b.bytes_ = bytes;
    return b;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return refused(std::string("mmap: ") + std::strerror(errno));
  madvise(p, size, MADV_HUGEPAGE);  // best effort: fewer pages to fault in and to lock
  // First touch of every 4 KiB page, 64 MiB per task on every core: the kernel zeroes them here.
  constexpr uint64_t kChunk = uint64_t{64} << 20, kPage = 4096;
  char* base = static_cast<char*>(p);
  ParallelFor(static_cast<int64_t>((size + kChunk - 1) / kChunk), 0, [&](int64_t c0, int64_t c1, int) {
    for (uint64_t at = static_cast<uint64_t>(c0) * kChunk; at < std::min(size, static_cast<uint64_t>(c1) * kChunk);
         at += kPage) {
      static_cast<volatile char*>(base)[at] = 0;
    }
  });
  const cudaError_t err = cudaHostRegister(p, size, cudaHostRegisterDefault);
  if (err != cudaSuccess) {  // a host that refuses to register memory may still allocate it locked
    cudaGetLastError();
    munmap(p, size);
    StatusOr<PinnedHostBuffer> fallback = Allocate(bytes, what, PinnedAlloc::kCudaMallocHost);
    if (fallback.ok()) return fallback;
    return refused(std::string("cudaHostRegister: ") + cudaGetErrorString(err) + "; " + fallback.status().message());
  }
  b.data_ = base;
  b.bytes_ = bytes;
  b.mapped_ = size;
  return b;
}

Status CopyToHostAsync(void* dst, const void* src, uint64_t bytes, GpuStream stream) {
  if (bytes == 0) return Status::Ok();
  return CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, reinterpret_cast<cudaStream_t>(stream)),
                   "cudaMemcpyAsync to host");
}

Status CopyToDevice(void* dst, const void* src, uint64_t bytes, GpuStream stream) {
  if (bytes == 0) return Status::Ok();
  return CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, reinterpret_cast<cudaStream_t>(stream)),
                   "cudaMemcpyAsync to device");
}

Status CopyToHost(void* dst, const void* src, uint64_t bytes, GpuStream stream) {
  if (bytes == 0) return Status::Ok();
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  DF11_RETURN_IF_ERROR(
      CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync to host"));
  return CheckCuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

Status PinHost(void* p, uint64_t bytes) {
  return CheckCuda(cudaHostRegister(p, bytes, cudaHostRegisterDefault), "cudaHostRegister");
}

void UnpinHost(void* p) { cudaHostUnregister(p); }

Status FillZero(void* dst, uint64_t bytes, GpuStream stream) {
  return CheckCuda(cudaMemsetAsync(dst, 0, bytes, reinterpret_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
}

Status Synchronize(GpuStream stream) {
  return CheckCuda(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

StatusOr<GpuStream> CreateStream(bool high_priority) {
  int least = 0, greatest = 0;
  DF11_RETURN_IF_ERROR(
      CheckCuda(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange"));
  cudaStream_t s = nullptr;
  DF11_RETURN_IF_ERROR(CheckCuda(
      cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, high_priority ? greatest : least), "cudaStreamCreate"));
  return reinterpret_cast<GpuStream>(s);
}

void DestroyStream(GpuStream stream) {
  if (stream != nullptr) cudaStreamDestroy(reinterpret_cast<cudaStream_t>(stream));
}

StreamEvent::~StreamEvent() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

Status StreamEvent::Record(GpuStream stream) {
  if (event_ == nullptr) {
    cudaEvent_t e = nullptr;
    DF11_RETURN_IF_ERROR(CheckCuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
    event_ = e;
  }
  return CheckCuda(cudaEventRecord(static_cast<cudaEvent_t>(event_), reinterpret_cast<cudaStream_t>(stream)),
                   "cudaEventRecord");
}

Status StreamEvent::Wait(GpuStream waiter) const {
  if (event_ == nullptr) return Status::Ok();
  return CheckCuda(cudaStreamWaitEvent(reinterpret_cast<cudaStream_t>(waiter), static_cast<cudaEvent_t>(event_), 0),
                   "cudaStreamWaitEvent");
}

EventTimer::~EventTimer() {
  for (void* e : events_) {
    if (e != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  }
}

static Status Record(void** slot, GpuStream stream) {
  if (*slot == nullptr) {
    cudaEvent_t e = nullptr;
    DF11_RETURN_IF_ERROR(CheckCuda(cudaEventCreate(&e), "cudaEventCreate"));
    *slot = e;
  }
  // Under stream capture a plain record only orders streams; cudaEventRecordExternal makes it a
  // graph node that records the event on every replay.
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  DF11_RETURN_IF_ERROR(CheckCuda(cudaStreamIsCapturing(s, &capture), "cudaStreamIsCapturing"));
  const unsigned flags = capture == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : cudaEventRecordDefault;
  return CheckCuda(cudaEventRecordWithFlags(static_cast<cudaEvent_t>(*slot), s, flags), "cudaEventRecord");
}

Status EventTimer::Begin(GpuStream stream) {
  if (events_.size() < used_ + 2) events_.resize(used_ + 2, nullptr);
  return Record(&events_[used_], stream);
}

Status EventTimer::End(GpuStream stream) {
  DF11_RETURN_IF_ERROR(Record(&events_[used_ + 1], stream));
  used_ += 2;
  return Status::Ok();
}

StatusOr<double> EventTimer::Seconds() const {
  double total = 0;
  for (size_t i = 0; i < used_; i += 2) {
    float ms = 0;
    // The caller may not have synchronised the stream (a step with no logits rows copies
    // nothing): wait for the end event so its time is ready.
    DF11_RETURN_IF_ERROR(
        CheckCuda(cudaEventSynchronize(static_cast<cudaEvent_t>(events_[i + 1])), "cudaEventSynchronize"));
    DF11_RETURN_IF_ERROR(CheckCuda(
        cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_[i]), static_cast<cudaEvent_t>(events_[i + 1])),
        "cudaEventElapsedTime"));
    total += ms * 1e-3;
  }
  return total;
}

// ---- kernels ----
namespace {

// The per-thread sums over the row in order, then FinishRmsNorm in chunks (RowChunk).
template <int kChunk>
__global__ void RmsNormKernel(const uint16_t* x, const float* w, int64_t dim, float eps, bool add_one, uint16_t* out) {
  AllowDependents();  // the next kernel may be a Gemv that prefetches its weights
  const uint16_t* row = x + blockIdx.x * dim;
  uint16_t* dst = out + blockIdx.x * dim;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = Bf16ToFloat(row[i]);
    sum += v * v;
  }
  FinishRmsNorm<kChunk>(sum, row, w, dim, eps, add_one, dst);
}

// RmsNormKernel's bits by WarpRmsNormRow (rows of dim % 256 == 0): kVecNormWarps rows a block.
__global__ void __launch_bounds__(32 * kVecNormWarps)
    VecRmsNormKernel(const uint16_t* x, const float* w, int64_t rows, int64_t dim, float eps, bool add_one,
                     uint16_t* out) {
  AllowDependents();  // the next kernel may be a Gemv that prefetches its weights
  const int64_t r = int64_t{blockIdx.x} * kVecNormWarps + threadIdx.x / 32;
  if (r >= rows) return;
  // x is only read (add is null): the cast lets WarpRmsNormRow serve AddRmsNorm too.
  WarpRmsNormRow(const_cast<uint16_t*>(x + r * dim), nullptr, w, dim, eps, add_one, out + r * dim);
}

__global__ void RopeKernel(uint16_t* x, int64_t num_heads, int64_t head_dim, int64_t half, const int32_t* positions,
                           const float* inv_freq) {
  const int64_t t = blockIdx.x / num_heads;
  uint16_t* head = x + blockIdx.x * head_dim;
  const float pos = static_cast<float>(positions[t]);
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(pos * inv_freq[i], &s, &c);
    c = RoundBf16(c);
    s = RoundBf16(s);
    const float x1 = Bf16ToFloat(head[i]), x2 = Bf16ToFloat(head[i + half]);
    head[i] = FloatToBf16(RoundBf16(x1 * c) - RoundBf16(x2 * s));
    head[i + half] = FloatToBf16(RoundBf16(x2 * c) + RoundBf16(x1 * s));
  }
}

// One element per thread and step: any strides.
__global__ void GatedActivationKernel(Activation act, const uint16_t* gate, int64_t gate_stride, const uint16_t* up,
                                      int64_t up_stride, int64_t inter, uint16_t* out) {
  AllowDependents();  // the next kernel may be a Gemv that prefetches its weights
  const int64_t t = blockIdx.y;
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < inter; i += gridDim.x * blockDim.x) {
    out[t * inter + i] = Gated(act, gate[t * gate_stride + i], up[t * up_stride + i]);
  }
}

// Eight elements per thread and step in 16-byte loads and stores (16-byte aligned rows, inter a
// multiple of 8): the same values.
__global__ void GatedActivationKernel8(Activation act, const uint16_t* gate, int64_t gate_stride, const uint16_t* up,
                                       int64_t up_stride, int64_t inter, uint16_t* out) {
  WaitPrevious();     // gate and up come from the previous kernel (a dependent up to kDependentMaxRows)
  AllowDependents();  // then (no launch two kernels ahead) the next may be a Gemv that prefetches
  const int64_t t = blockIdx.y;
  for (int64_t c = blockIdx.x * blockDim.x + threadIdx.x; c < inter / 8; c += gridDim.x * blockDim.x) {
    const uint4 gv = *reinterpret_cast<const uint4*>(gate + t * gate_stride + c * 8);
    const uint4 uv = *reinterpret_cast<const uint4*>(up + t * up_stride + c * 8);
    const uint32_t g[4] = {gv.x, gv.y, gv.z, gv.w}, u[4] = {uv.x, uv.y, uv.z, uv.w};
    uint32_t o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = Gated(act, static_cast<uint16_t>(g[i] & 0xFFFFu), static_cast<uint16_t>(u[i] & 0xFFFFu));
      const uint32_t hi = Gated(act, static_cast<uint16_t>(g[i] >> 16), static_cast<uint16_t>(u[i] >> 16));
      o[i] = lo | hi << 16;
    }
    *reinterpret_cast<uint4*>(out + t * inter + c * 8) = make_uint4(o[0], o[1], o[2], o[3]);
  }
}

__global__ void AddKernel(uint16_t* x, const uint16_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = FloatToBf16(Bf16ToFloat(x[i]) + Bf16ToFloat(y[i]));
  }
}

__global__ void BroadcastBiasKernel(const float* bias, int64_t n, uint16_t* y) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[blockIdx.x * n + i] = FloatToBf16(bias[i]);
}

__global__ void SplitColumnsKernel(const uint16_t* src, int64_t a, int64_t b, int64_t c, uint16_t* da, uint16_t* db,
                                   uint16_t* dc) {
  const int64_t t = blockIdx.x, width = a + b + c;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    const uint16_t v = src[t * width + i];
    if (i < a) {
      da[t * a + i] = v;
    } else if (i < a + b) {
      db[t * b + i - a] = v;
    } else {
      dc[t * c + i - a - b] = v;
    }
  }
}

__global__ void EmbeddingGatherKernel(const uint16_t* table, const int32_t* ids, int64_t hidden, float scale,
                                      uint16_t* out) {
  const uint16_t* row = table + static_cast<int64_t>(ids[blockIdx.x]) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[blockIdx.x * hidden + i] = FloatToBf16(Bf16ToFloat(row[i]) * scale);
  }
}

__global__ void LogitsToFloatKernel(const uint16_t* src, int64_t n, float cap, float* dst) {
  const float inv = 1.0f / cap;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float x = Bf16ToFloat(src[i]);
    if (cap > 0) x = RoundBf16(RoundBf16(tanhf(RoundBf16(x * inv))) * cap);
    dst[i] = x;
  }
}

__global__ void GatherRowsKernel(const uint16_t* src, const int32_t* rows, int64_t width, uint16_t* out) {
  const uint16_t* row = src + static_cast<int64_t>(rows[blockIdx.x]) * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) out[blockIdx.x * width + i] = row[i];
}

__global__ void WriteKvKernel(PagedKvLayer cache, BatchLayout batch, const uint16_t* k, const uint16_t* v) {
  const int64_t t = blockIdx.x, row = cache.num_kv_heads * cache.head_dim;
  const int32_t pos = batch.positions[t];
  const int64_t block = batch.tables[batch.table_begin[batch.token_seq[t]] + pos / cache.block_size];
  const int64_t slot = block * cache.block_size + pos % cache.block_size;
  for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
    cache.k[slot * row + i] = k[t * row + i];
    cache.v[slot * row + i] = v[t * row + i];
  }
}

unsigned GridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

cudaStream_t S(GpuStream s) { return reinterpret_cast<cudaStream_t>(s); }

}  // namespace

// ---- launchers ----

Status RmsNorm(const uint16_t* x, const float* w, int64_t rows, int64_t dim, float eps, bool add_one, uint16_t* out,
               GpuStream stream) {
  if (rows == 0) return Status::Ok();
  if (VecNormApplies(rows, dim, x, out, nullptr, w)) {
    VecRmsNormKernel<<<static_cast<unsigned>((rows + kVecNormWarps - 1) / kVecNormWarps), 32 * kVecNormWarps, 0,
                       S(stream)>>>(x, w, rows, dim, eps, add_one, out);
    return CheckLaunch("VecRmsNormKernel");
  }
  const dim3 grid(static_cast<unsigned>(rows)), block(ThreadsFor(dim));
  if (RowChunk(rows) == 16) {
    RmsNormKernel<16><<<grid, block, 0, S(stream)>>>(x, w, dim, eps, add_one, out);
  } else {
    RmsNormKernel<8><<<grid, block, 0, S(stream)>>>(x, w, dim, eps, add_one, out);
  }
  return CheckLaunch("RmsNormKernel");
}

Status ApplyRope(uint16_t* x, int64_t tokens, int64_t num_heads, int64_t head_dim, int64_t rotary_dim,
                 const int32_t* positions, const float* inv_freq, GpuStream stream) {
  if (tokens == 0 || rotary_dim == 0) return Status::Ok();
  RopeKernel<<<static_cast<unsigned>(tokens * num_heads), 64, 0, S(stream)>>>(x, num_heads, head_dim, rotary_dim / 2,
                                                                              positions, inv_freq);
  return CheckLaunch("RopeKernel");
}

Status GatedActivation(Activation act, const uint16_t* gate, int64_t gate_stride, const uint16_t* up, int64_t up_stride,
                       int64_t tokens, int64_t inter, uint16_t* out, GpuStream stream) {
  if (tokens == 0) return Status::Ok();
  auto aligned = [](const void* p, int64_t stride) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && stride % 8 == 0;
  };
  if (inter % 8 == 0 && aligned(gate, gate_stride) && aligned(up, up_stride) && aligned(out, inter)) {
    const dim3 grid(static_cast<unsigned>((inter / 8 + 127) / 128), static_cast<unsigned>(tokens));
    if (tokens <= kDependentMaxRows) {
      LaunchDependent(GatedActivationKernel8, grid, dim3(128), S(stream), act, gate, gate_stride, up, up_stride, inter,
                      out);
    } else {
      GatedActivationKernel8<<<grid, 128, 0, S(stream)>>>(act, gate, gate_stride, up, up_stride, inter, out);
    }
    return CheckLaunch("GatedActivationKernel8");
  }
  const dim3 grid(static_cast<unsigned>((inter + 255) / 256), static_cast<unsigned>(tokens));
  GatedActivationKernel<<<grid, 256, 0, S(stream)>>>(act, gate, gate_stride, up, up_stride, inter, out);
  return CheckLaunch("GatedActivationKernel");
}

Status AddInPlace(uint16_t* x, const uint16_t* y, int64_t n, GpuStream stream) {
  if (n == 0) return Status::Ok();
  AddKernel<<<GridFor(n, 256), 256, 0, S(stream)>>>(x, y, n);
  return CheckLaunch("AddKernel");
}

Status BroadcastBias(const float* bias, int64_t tokens, int64_t n, uint16_t* y, GpuStream stream) {
  if (tokens == 0) return Status::Ok();
  BroadcastBiasKernel<<<static_cast<unsigned>(tokens), ThreadsFor(n), 0, S(stream)>>>(bias, n, y);
  return CheckLaunch("BroadcastBiasKernel");
}

Status SplitColumns(const uint16_t* src, int64_t tokens, int64_t a, int64_t b, int64_t c, uint16_t* dst_a,
                    uint16_t* dst_b, uint16_t* dst_c, GpuStream stream) {
  if (tokens == 0) return Status::Ok();
  SplitColumnsKernel<<<static_cast<unsigned>(tokens), 256, 0, S(stream)>>>(src, a, b, c, dst_a, dst_b, dst_c);
  return CheckLaunch("SplitColumnsKernel");
}

Status EmbeddingGather(const uint16_t* table, const int32_t* ids, int64_t tokens, int64_t hidden, float scale,
                       uint16_t* out, GpuStream stream) {
  if (tokens == 0) return Status::Ok();
  const float bf16_scale = __bfloat162float(__float2bfloat16_rn(scale));
  EmbeddingGatherKernel<<<static_cast<unsigned>(tokens), ThreadsFor(hidden), 0, S(stream)>>>(table, ids, hidden,
                                                                                             bf16_scale, out);
  return CheckLaunch("EmbeddingGatherKernel");
}

Status LogitsToFloat(const uint16_t* src, int64_t n, float cap, float* dst, GpuStream stream) {
  if (n == 0) return Status::Ok();
  LogitsToFloatKernel<<<GridFor(n, 256), 256, 0, S(stream)>>>(src, n, cap, dst);
  return CheckLaunch("LogitsToFloatKernel");
}

Status GatherRows(const uint16_t* src, const int32_t* rows, int64_t num_rows, int64_t width, uint16_t* out,
                  GpuStream stream) {
  if (num_rows == 0) return Status::Ok();
  GatherRowsKernel<<<static_cast<unsigned>(num_rows), ThreadsFor(width), 0, S(stream)>>>(src, rows, width, out);
  return CheckLaunch("GatherRowsKernel");
}

Status WriteKv(const PagedKvLayer& cache, const BatchLayout& batch, const uint16_t* k, const uint16_t* v,
               GpuStream stream) {
  if (batch.num_tokens == 0) return Status::Ok();
  WriteKvKernel<<<static_cast<unsigned>(batch.num_tokens), ThreadsFor(cache.num_kv_heads * cache.head_dim), 0,
                  S(stream)>>>(cache, batch, k, v);
  return CheckLaunch("WriteKvKernel");
}

}  // namespace df11::cuda
