// HostUploader: large host -> device copies at PCIe speed from pageable memory (a model's mapped
// checkpoint). A plain cudaMemcpy from pageable memory runs on one host thread through the
// driver's staging and faults the mapped file's pages in one at a time on that thread: the 8B
// model's weights went to an H200 at ~6-7 GB/s (upload_bench: 6.2-6.6 GB/s from a mapped file). Here several host
// threads each read their own contiguous share of the source into two page-locked slots in turn and queue each slot's
// copy on their own stream, so the page faults and memcpy run on several cores and overlap the DMA. This header
// compiles without nvcc; the definitions exist only when DF11_HAVE_CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/base/status.h"

namespace df11::cuda {

class HostUploader {
 public:
  // 4 MiB: with 8 threads a copy from a mapped file ran at 46-47 GB/s on an H200 host (83-86% of
  // the PCIe roofline), against 30 at 16 MiB and 21 at 64 (bench/results/upload_h200.log).
  static constexpr uint64_t kDefaultSlotBytes = uint64_t{4} << 20;

  HostUploader();
  ~HostUploader();
  HostUploader(HostUploader&& other) noexcept;
  HostUploader& operator=(HostUploader&& other) noexcept;
  HostUploader(const HostUploader&) = delete;
  HostUploader& operator=(const HostUploader&) = delete;

  // `threads` workers (0: half the host's cores, 1 to 8), each with two page-locked slots of
  // slot_bytes (> 0) and its own stream on the calling thread's current device; 2 * threads *
  // slot_bytes of page-locked memory in all (64 MiB for 8 threads of 4 MiB).
  // RESOURCE_EXHAUSTED when the host refuses the page-locked memory, INTERNAL for CUDA errors.
  static StatusOr<HostUploader> Create(int threads = 0, uint64_t slot_bytes = kDefaultSlotBytes);

  // device dst[0, bytes) <- host src[0, bytes) (any host memory); returns when the bytes are on the
  // device. A copy of fewer than two slots runs on the calling thread alone. Runs on the device
  // that was current at Create. Not reentrant: one Copy at a time. The copies run on the workers'
  // own non-blocking streams, unordered with work already queued elsewhere: the caller finishes
  // any earlier write to dst (a memset) before calling.
  Status Copy(void* dst, const void* src, uint64_t bytes);

  int threads() const { return static_cast<int>(workers_.size()); }
  uint64_t slot_bytes() const { return slot_bytes_; }

 private:
  struct Worker;
  std::vector<std::unique_ptr<Worker>> workers_;
  uint64_t slot_bytes_ = 0;
  int device_ = 0;
};

}  // namespace df11::cuda
