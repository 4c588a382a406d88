// PcieRoofline: the host <-> device copy speed a benchmark compares its copies with, measured in
// the same run. Shared by tier_bench and upload_bench (CUDA builds only).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kernels/cuda_ops.h"

namespace df11 {

// Page-locked host <-> device copy of 1 GiB, best of 5, GB/s: {to device, to host}. Exits the
// program (status 1, a line on stderr) when it cannot get its buffers or copy.
inline std::pair<double, double> PcieRoofline() {
  constexpr uint64_t kBytes = uint64_t{1} << 30;
  auto fail = [](const char* what) {
    std::fprintf(stderr, "PCIe roofline: %s failed\n", what);
    std::exit(1);
  };
  auto host = cuda::PinnedHostBuffer::Allocate(kBytes, "roofline");
  auto device = cuda::DeviceBuffer::Allocate(kBytes, "roofline");
  auto stream = cuda::CreateStream();
  if (!host.ok() || !device.ok() || !stream.ok()) fail("allocating its buffers");
  std::memset(host->data(), 1, kBytes);
  auto seconds = [](std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  };
  double best_h2d = 0, best_d2h = 0;
  for (int i = 0; i < 5; ++i) {
    auto t = std::chrono::steady_clock::now();
    if (!cuda::CopyToDevice(device->data(), host->data(), kBytes, *stream).ok() || !cuda::Synchronize(*stream).ok()) {
      fail("the copy to the device");
    }
    best_h2d = std::max(best_h2d, kBytes / seconds(t) / 1e9);
    t = std::chrono::steady_clock::now();
    if (!cuda::CopyToHost(host->data(), device->data(), kBytes, *stream).ok()) fail("the copy to the host");
    best_d2h = std::max(best_d2h, kBytes / seconds(t) / 1e9);
  }
  cuda::DestroyStream(*stream);
  return {best_h2d, best_d2h};
}

}  // namespace df11
