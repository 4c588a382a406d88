// CUDA graph capture and replay (see cuda_graph.h).
#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda_graph.h"
#include "kernels/cuda_ops_internal.cuh"

namespace df11::cuda {

GraphExec::~GraphExec() {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

GraphExec::GraphExec(GraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}

GraphExec& GraphExec::operator=(GraphExec&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

Status GraphExec::Launch(GpuStream stream) const {
  if (exec_ == nullptr) return FailedPrecondition("cudaGraphLaunch: no graph");
  return CheckCuda(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), reinterpret_cast<cudaStream_t>(stream)),
                   "cudaGraphLaunch");
}

Status BeginCapture(GpuStream stream) {
  return CheckCuda(cudaStreamBeginCapture(reinterpret_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal),
                   "cudaStreamBeginCapture");
}

StatusOr<GraphExec> EndCapture(GpuStream stream) {
  cudaGraph_t graph = nullptr;
  DF11_RETURN_IF_ERROR(
      CheckCuda(cudaStreamEndCapture(reinterpret_cast<cudaStream_t>(stream), &graph), "cudaStreamEndCapture"));
  cudaGraphExec_t exec = nullptr;
  // Kernel nodes keep the priority of the stream they were captured on (a second stream's branch
  // runs at its own).
  const Status st = CheckCuda(cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagUseNodePriority),
                              "cudaGraphInstantiate");
  cudaGraphDestroy(graph);
  DF11_RETURN_IF_ERROR(st);
  GraphExec out;
  out.exec_ = exec;
  return out;
}

void AbortCapture(GpuStream stream) {
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(reinterpret_cast<cudaStream_t>(stream), &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();  // the capture's error is the caller's to report, not the next launch's
}

}  // namespace df11::cuda
