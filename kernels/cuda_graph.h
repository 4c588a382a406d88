// CUDA graphs of a stream's work: capture what the host enqueues between BeginCapture and
// EndCapture once, then replay it with one launch (no per-kernel host cost). The captured work
// keeps every pointer and launch parameter it was enqueued with: the caller replays it only while
// those still hold. Compiles without nvcc; defined only when DF11_HAVE_CUDA.
#pragma once

#include "kernels/base/status.h"
#include "kernels/df11_decode_cuda.h"  // GpuStream

namespace df11::cuda {

// An instantiated graph (cudaGraphExec_t). Move-only; destroyed with the object.
class GraphExec {
 public:
  GraphExec() = default;
  ~GraphExec();
  GraphExec(GraphExec&& other) noexcept;
  GraphExec& operator=(GraphExec&& other) noexcept;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;

  bool empty() const { return exec_ == nullptr; }
  Status Launch(GpuStream stream) const;

 private:
  friend StatusOr<GraphExec> EndCapture(GpuStream stream);
  // Ends a capture that failed half way and drops what it recorded (errors ignored).
  void AbortCapture(GpuStream stream);
  void* exec_ = nullptr;
};

// Starts capturing `stream` (this thread's CUDA calls on it are recorded, not run).
Status BeginCapture(GpuStream stream);
// Ends the capture and instantiates the graph. On an error inside the capture the stream is out of
// capture mode again and the error names the failing step.
StatusOr<GraphExec> EndCapture(GpuStream stream);
// Ends a capture that failed half way and drops what it recorded (errors ignored).
void AbortCapture(GpuStream stream);

}  // namespace df11::cuda
