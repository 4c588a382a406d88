// HostUploader (see cuda_upload.h).
#include "kernels/cuda_upload.h"

#ifdef DF11_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/base/parallel.h"
#include "kernels/cuda_ops.h"
#include "kernels/gpu.h"

namespace df11::cuda {

// One worker's staging: slots [0, slot_bytes) and [slot_bytes, 2 slot_bytes) of `staging`, the
// event recorded after each slot's copy, and the stream its copies run on.
struct HostUploader::Worker {
  PinnedHostBuffer staging;
  cudaEvent_t done[2] = {nullptr, nullptr};
  cudaStream_t stream = nullptr;
  Status result;  // of the last Copy

  ~Worker() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (cudaEvent_t e : done) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  // dst[0, bytes) <- src[0, bytes), slot by slot (a slot is filled again once its copy is done);
  // returns when its copies are done.
  Status Copy(char* dst, const char* src, uint64_t bytes, uint64_t slot_bytes) {
    const Status queued = Queue(dst, src, bytes, slot_bytes);
    const Status synced = DF11_CUDA_STATUS(cudaStreamSynchronize(stream));
    return queued.ok() ? synced : queued;
  }

  Status Queue(char* dst, const char* src, uint64_t bytes, uint64_t slot_bytes) {
    int slot = 0;
    for (uint64_t at = 0; at < bytes; at += slot_bytes, slot ^= 1) {
      const uint64_t n = std::min(slot_bytes, bytes - at);
      char* stage = staging.data() + static_cast<uint64_t>(slot) * slot_bytes;
      DF11_CUDA_RETURN(cudaEventSynchronize(done[slot]));
      std::memcpy(stage, src + at, n);
      DF11_CUDA_RETURN(cudaMemcpyAsync(dst + at, stage, n, cudaMemcpyHostToDevice, stream));
      DF11_CUDA_RETURN(cudaEventRecord(done[slot], stream));
    }
    return Status::Ok();
  }
};

HostUploader::HostUploader() = default;
HostUploader::~HostUploader() = default;
HostUploader::HostUploader(HostUploader&& other) noexcept = default;
HostUploader& HostUploader::operator=(HostUploader&& other) noexcept = default;

StatusOr<HostUploader> HostUploader::Create(int threads, uint64_t slot_bytes) {
  if (slot_bytes == 0) return InvalidArgument("HostUploader: slot_bytes must be > 0");
  if (threads <= 0) threads = std::clamp(HardwareThreads() / 2, 1, 8);
  HostUploader u;
  u.slot_bytes_ = slot_bytes;
  DF11_CUDA_RETURN(cudaGetDevice(&u.device_));
  for (int t = 0; t < threads; ++t) {
    auto w = std::make_unique<Worker>();
    DF11_ASSIGN_OR_RETURN(w->staging,
                          PinnedHostBuffer::Allocate(2 * slot_bytes, "upload staging", PinnedAlloc::kCudaMallocHost));
    DF11_CUDA_RETURN(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
    for (cudaEvent_t& e : w->done) DF11_CUDA_RETURN(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    u.workers_.push_back(std::move(w));
  }
  return u;
}

Status HostUploader::Copy(void* dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return Status::Ok();
  if (workers_.empty()) return FailedPrecondition("HostUploader::Copy on an uploader that was not created");
  // Each worker a contiguous share of whole slots, at least one.
  const uint64_t slots = (bytes + slot_bytes_ - 1) / slot_bytes_;
  const uint64_t used = std::min<uint64_t>(workers_.size(), slots);
  const uint64_t share = (slots + used - 1) / used * slot_bytes_;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // One share a worker (ParallelFor: share 0 on this thread, and any share whose thread the host
  // refuses to start).
  ParallelFor(static_cast<int64_t>(used), static_cast<int>(used), [&](int64_t first, int64_t last, int) {
    for (int64_t t = first; t < last; ++t) {
      Worker& w = *workers_[t];
      const uint64_t begin = std::min(bytes, static_cast<uint64_t>(t) * share), end = std::min(bytes, begin + share);
      w.result = t == 0 ? Status::Ok() : DF11_CUDA_STATUS(cudaSetDevice(device_));
      if (w.result.ok()) w.result = w.Copy(d + begin, s + begin, end - begin, slot_bytes_);
    }
  });
  for (uint64_t t = 0; t < used; ++t) {
    const Status& r = workers_[t]->result;
    if (!r.ok()) return r.WithContext("copying " + std::to_string(bytes) + " bytes to the device");
  }
  return Status::Ok();
}

}  // namespace df11::cuda

#endif  // DF11_HAVE_CUDA
