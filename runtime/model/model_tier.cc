// Model::Offload / Restore: the weights' tiers (model.h). On CUDA every weight allocation
// (plain tensors, norms and biases in CudaState::resident, DF11 units, lane streams) is copied
// into one page-locked host image and freed, with the step workspaces and captured graphs;
// Restore allocates them again, copies the image back on the model's stream and moves every
// pointer that pointed into a re-allocated `resident` buffer (units and lanes move their own).
// Weights never change, so the image is kept after Restore: the next Offload only frees.
// On the CPU the weights live in host memory already: only the state changes.
#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/model/model_cuda.h"

namespace df11 {

Status Model::Offload() {
  DF11_RETURN_IF_ERROR(NoStepInFlight());
  if (offloaded_) return Status::Ok();
  if (options_.device == Device::kCuda) DF11_RETURN_IF_ERROR(OffloadCuda().WithContext(checkpoint_->dir()));
  offloaded_ = true;
  return Status::Ok();
}

Status Model::Restore() {
  DF11_RETURN_IF_ERROR(NoStepInFlight());
  if (!offloaded_) return Status::Ok();
  if (options_.device == Device::kCuda) DF11_RETURN_IF_ERROR(RestoreCuda().WithContext(checkpoint_->dir()));
  offloaded_ = false;
  return Status::Ok();
}

uint64_t Model::host_image_bytes() const {
#if DF11_HAVE_CUDA
  if (cuda_) return cuda_->image.bytes();
#endif
  return 0;
}

#if DF11_HAVE_CUDA

namespace {

uint64_t Align256(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

// Image layout: resident buffers, then units, then lanes, each at a 256-byte multiple.
Status Model::OffloadCuda() {
  CudaState& st = *cuda_;
  if (st.image.data() == nullptr) DF11_RETURN_IF_ERROR(MakeHostImageCuda());  // else kept from an earlier Offload
  // Nothing is released before every byte is on the host: a failure above leaves the model as it was.
  st.resident_bases.clear();  // where the pointers into `resident` point, for Restore to move them
  for (const cuda::DeviceBuffer& b : st.resident) st.resident_bases.push_back(b.as<const char>());
  ReleaseDeviceCuda();
  return Status::Ok();
}

Status Model::MakeHostImageCuda() {
  CudaState& st = *cuda_;
  uint64_t total = 0;
  for (const cuda::DeviceBuffer& b : st.resident) total += Align256(b.bytes());
  for (const auto& u : st.units) total += Align256(u->buffer.device_bytes());
  for (const DeviceLanesBuffer& l : st.lanes) total += Align256(l.device_bytes());
  DF11_ASSIGN_OR_RETURN(cuda::PinnedHostBuffer image, cuda::PinnedHostBuffer::Allocate(total, "the host tier"));
  uint64_t offset = 0;
  auto copy_out = [&](const void* device, uint64_t bytes) {
    Status s = cuda::CopyToHostAsync(image.data() + offset, device, bytes, st.stream);
    offset += Align256(bytes);
    return s;
  };
  for (const cuda::DeviceBuffer& b : st.resident) DF11_RETURN_IF_ERROR(copy_out(b.data(), b.bytes()));
  for (const auto& u : st.units) DF11_RETURN_IF_ERROR(copy_out(u->buffer.device_base(), u->buffer.device_bytes()));
  for (const DeviceLanesBuffer& l : st.lanes) DF11_RETURN_IF_ERROR(copy_out(l.device_base(), l.device_bytes()));
  DF11_RETURN_IF_ERROR(cuda::Synchronize(st.stream));
  st.image = std::move(image);
  return Status::Ok();
}

void Model::ReleaseDeviceCuda() {
  CudaState& st = *cuda_;
  for (cuda::DeviceBuffer& b : st.resident) b.Release();
  for (auto& u : st.units) u->buffer.Release();
  for (DeviceLanesBuffer& l : st.lanes) l.Release();
  st.graphs.clear();  // they baked in the workspaces' addresses
  st.loaded_unit = -1;
  for (cuda::DeviceBuffer* w : {&st.activations, &st.batch_arrays, &st.attention_workspace, &st.sampler_workspace,
                                &st.sampler_inputs, &st.sampler_outputs}) {
    w->Release();
  }
}

Status Model::RestoreCuda() {
  CudaState& st = *cuda_;
  uint64_t offset = 0;
  auto next = [&](uint64_t bytes) {
    const char* p = st.image.data() + offset;
    offset += Align256(bytes);
    return p;
  };
  Status s = Status::Ok();
  for (cuda::DeviceBuffer& b : st.resident) {
    if (s.ok()) s = b.Reacquire(next(b.bytes()), st.stream, "weights");
  }
  for (auto& u : st.units) {
    if (s.ok()) s = u->buffer.Reacquire(next(u->buffer.device_bytes()), st.stream);
  }
  for (DeviceLanesBuffer& l : st.lanes) {
    if (s.ok()) s = l.Reacquire(next(l.device_bytes()), st.stream);
  }
  // The workspaces at their load-time sizes (Release kept bytes()); the others grow on demand.
  if (s.ok()) s = st.activations.Reserve(st.activations.bytes(), "step activations");
  if (s.ok()) s = st.batch_arrays.Reserve(st.batch_arrays.bytes(), "step batch arrays");
  if (s.ok()) s = st.sampler_workspace.Reserve(st.sampler_workspace.bytes(), "sampler workspace");
  if (s.ok()) s = cuda::Synchronize(st.stream);
  if (!s.ok()) {
    static_cast<void>(cuda::Synchronize(st.stream));  // no copy may still read the image or write freed memory
    ReleaseDeviceCuda();
    return s;
  }
  // Every pointer into a resident buffer: same offset in the buffer's new allocation.
  std::vector<std::pair<const char*, size_t>> order;  // old base, index
  for (size_t i = 0; i < st.resident.size(); ++i) order.emplace_back(st.resident_bases[i], i);
  std::sort(order.begin(), order.end());
  Status moved = Status::Ok();
  auto move = [&](auto& p) {
    if (p == nullptr) return;
    using T = std::remove_reference_t<decltype(p)>;
    const char* old = reinterpret_cast<const char*>(p);
    auto it = std::upper_bound(order.begin(), order.end(), std::make_pair(old, st.resident.size()));
    if (it == order.begin()) {
      moved = Internal("a weight pointer outside every resident buffer");
      return;
    }
    --it;
    const cuda::DeviceBuffer& b = st.resident[it->second];
    if (old >= it->first + std::max<uint64_t>(b.bytes(), 1)) {
      moved = Internal("a weight pointer outside every resident buffer");
      return;
    }
    p = reinterpret_cast<T>(b.as<const char>() + (old - it->first));
  };
  auto move_linear = [&](DeviceLinear& w) {
    move(w.plain);
    move(w.bias);
  };
  for (DeviceLayer& layer : st.layers) {
    for (const float*& v : layer.vectors) move(v);
    for (DeviceLinear& w : layer.linears) move_linear(w);
  }
  move_linear(st.embedding);
  move_linear(st.lm_head);
  move(st.final_norm);
  move(st.inv_freq_global);
  move(st.inv_freq_local);
  if (!moved.ok()) {
    ReleaseDeviceCuda();
    return moved;
  }
  st.resident_bases.clear();
  return Status::Ok();  // the image stays: the next Offload needs no copy
}

#else

Status Model::OffloadCuda() { return Unimplemented("this build has no CUDA"); }
Status Model::MakeHostImageCuda() { return Unimplemented("this build has no CUDA"); }
void Model::ReleaseDeviceCuda() {}
Status Model::RestoreCuda() { return Unimplemented("this build has no CUDA"); }

#endif

}  // namespace df11
