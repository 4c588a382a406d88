// CUDA ops of the forward step, twins of cpu_ops.h: plain functions over raw device buffers, no
// knowledge of models or requests. Activations are BF16 words (uint16_t) between ops, as
// transformers keeps them; norms, rope angles, softmax and accumulation run in fp32 and each op
// rounds to BF16 where transformers' bf16 run rounds. Every launcher checks the launch
// (cudaGetLastError) and returns a Status naming the kernel; all launches are asynchronous on
// `stream`. No atomics: the same inputs give the same bits.
// This header compiles without nvcc; the definitions exist only when DF11_HAVE_CUDA.
// Shapes are row-major; "[T, N]" means T rows of N contiguous elements. All pointers are device
// pointers unless the comment says host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "kernels/batch_layout.h"
#include "kernels/df11_decode_cuda.h"  // GpuStream

namespace df11::cuda {

// ---- memory, streams, timing ----

// One device allocation (cudaMalloc, 256-byte aligned). Move-only; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // RESOURCE_EXHAUSTED (naming `what` and the size) when the device is out of memory.
  static StatusOr<DeviceBuffer> Allocate(uint64_t bytes, const char* what);
  // Grows to at least `bytes` (contents lost when it grows).
  Status Reserve(uint64_t bytes, const char* what);
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  uint64_t bytes() const { return bytes_; }

  // Model tiers (runtime/model/model.h, Offload/Restore): Release frees the device memory and
  // keeps bytes() (data() becomes null); Reacquire allocates bytes() again and copies
  // host[0, bytes()) into it, asynchronously on `stream` (host must stay valid until the stream
  // is synchronized). The address changes. RESOURCE_EXHAUSTED when the device is out of memory.
  void Release();
  Status Reacquire(const void* host, GpuStream stream, const char* what);

 private:
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

// How PinnedHostBuffer gets its pages. kTouchThenRegister maps anonymous memory (transparent huge
// pages asked for), faults every page in on all cores, then page-locks it (cudaHostRegister): the
// zeroing the kernel does on first touch runs in parallel instead of inside one cudaMallocHost call.
// When the host refuses the registration, kTouchThenRegister falls back to cudaMallocHost.
enum class PinnedAlloc { kCudaMallocHost, kTouchThenRegister };

// Page-locked host memory, for copies at full PCIe speed. Move-only; freed on destruction.
// RESOURCE_EXHAUSTED (naming `what` and the size) when the host refuses.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  ~PinnedHostBuffer();
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  static StatusOr<PinnedHostBuffer> Allocate(uint64_t bytes, const char* what,
                                             PinnedAlloc how = PinnedAlloc::kTouchThenRegister);
  char* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }

 private:
  void Free();
  char* data_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t mapped_ = 0;  // kTouchThenRegister: the mapping's length (0: cudaMallocHost)
};

Status CopyToDevice(void* dst, const void* src, uint64_t bytes, GpuStream stream);     // async w.r.t. device
Status CopyToHost(void* dst, const void* src, uint64_t bytes, GpuStream stream);       // waits for it
Status CopyToHostAsync(void* dst, const void* src, uint64_t bytes, GpuStream stream);  // dst pinned
// Page-locks host memory [p, p + bytes) so copies to and from it run at full PCIe speed
// (cudaHostRegister); UnpinHost(p) undoes it. INTERNAL when the runtime refuses.
Status PinHost(void* p, uint64_t bytes);
void UnpinHost(void* p);
Status FillZero(void* dst, uint64_t bytes, GpuStream stream);
Status Synchronize(GpuStream stream);
// A non-blocking stream at the device's least priority, or its greatest (high_priority: its
// kernels' blocks are scheduled before those of lower-priority streams).
StatusOr<GpuStream> CreateStream(bool high_priority = false);
void DestroyStream(GpuStream stream);

// Pairs of CUDA events around regions of a stream; Seconds() waits for each end event, then sums.
class EventTimer {
 public:
  EventTimer() = default;
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void Reset() { used_ = 0; }
  Status Begin(GpuStream stream);
  Status End(GpuStream stream);
  StatusOr<double> Seconds() const;  // sum over Begin/End pairs since Reset
  // CUDA graphs: the pairs a captured region recorded (its events are graph nodes, recorded
  // again on each replay), and Restore to count them after a replay that skipped Begin/End.
  size_t used() const { return used_; }
  void Restore(size_t used) { used_ = used; }

 private:
  std::vector<void*> events_;  // cudaEvent_t, created lazily; pairs (begin, end)
  size_t used_ = 0;
};

// Orders work across two streams without timing it: Record marks what one stream has enqueued so
// far; Wait makes another stream wait for it. Created on first Record; not copyable.
class StreamEvent {
 public:
  StreamEvent() = default;
  ~StreamEvent();
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  Status Record(GpuStream stream);
  Status Wait(GpuStream waiter) const;  // no-op before the first Record

 private:
  void* event_ = nullptr;  // cudaEvent_t
};

// ---- ops ----

// out[r] = bf16(x[r] * rsqrt(mean(x[r]^2) + eps) ...) per transformers:
//   add_one (Gemma3RMSNorm): bf16(x * r * (1 + w))      (all fp32, one rounding)
//   else (LlamaRMSNorm):     bf16(w * bf16(x * r))
// x, out: [rows, dim] bf16, may alias; w: [dim] fp32 (BF16 values).
Status RmsNorm(const uint16_t* x, const float* w, int64_t rows, int64_t dim, float eps, bool add_one, uint16_t* out,
               GpuStream stream);

// ApplyRope, SplitColumns and WriteKv below are the step's former ops: the model now runs
// PrepareAttention, which the tests check bit for bit against these in turn (each of them checked
// against its CPU twin).

// In place, x [T, num_heads, head_dim] bf16, neox rotation of the first rotary_dim elements of
// each head: angle = float(positions[t]) * inv_freq[i] (fp32), cos/sin rounded to bf16, then
// x1' = bf16(bf16(x1 c) - bf16(x2 s)), x2' = bf16(bf16(x2 c) + bf16(x1 s)) as transformers does.
// positions: [T] int32; inv_freq: [rotary_dim / 2] fp32.
Status ApplyRope(uint16_t* x, int64_t tokens, int64_t num_heads, int64_t head_dim, int64_t rotary_dim,
                 const int32_t* positions, const float* inv_freq, GpuStream stream);

// out[T, I] = bf16(bf16(act(gate)) * up); gate row t at gate + t * gate_stride, up likewise.
Status GatedActivation(Activation act, const uint16_t* gate, int64_t gate_stride, const uint16_t* up, int64_t up_stride,
                       int64_t tokens, int64_t inter, uint16_t* out, GpuStream stream);

// x[i] = bf16(x[i] + y[i]) over n elements (the residual add).
Status AddInPlace(uint16_t* x, const uint16_t* y, int64_t n, GpuStream stream);

// Fused (cuda_fused.cu): hidden = AddInPlace(hidden, y), then normed = RmsNorm(hidden), in one
// launch and with the same bits. hidden, y, normed: [rows, dim] bf16; normed must not alias.
Status AddRmsNorm(uint16_t* hidden, const uint16_t* y, const float* w, int64_t rows, int64_t dim, float eps,
                  bool add_one, uint16_t* normed, GpuStream stream);

// y[T, N] = bf16(bias[N]) broadcast (bias fp32 holding BF16 values: exact). Used before a GEMM
// with beta = 1 so the bias joins the fp32 accumulator and the result rounds once.
Status BroadcastBias(const float* bias, int64_t tokens, int64_t n, uint16_t* y, GpuStream stream);

// Column split of a fused projection: src [T, a + b + c] -> dst_a [T, a], dst_b [T, b], dst_c [T, c].
Status SplitColumns(const uint16_t* src, int64_t tokens, int64_t a, int64_t b, int64_t c, uint16_t* dst_a,
                    uint16_t* dst_b, uint16_t* dst_c, GpuStream stream);

// out[t] = bf16(float(table[ids[t]]) * bf16(scale)); table [rows, hidden] bf16, ids [T] int32
// (validated by the caller). transformers multiplies by the scale cast to bf16.
Status EmbeddingGather(const uint16_t* table, const int32_t* ids, int64_t tokens, int64_t hidden, float scale,
                       uint16_t* out, GpuStream stream);

// dst[i] = float(src[i]) for i < n (exact). cap > 0 applies the final logit soft-cap first, rounded
// as transformers runs it on bf16 logits: bf16(bf16(tanh(bf16(x * (1/cap)))) * cap) (PyTorch
// divides by a scalar through its reciprocal on CUDA).
Status LogitsToFloat(const uint16_t* src, int64_t n, float cap, float* dst, GpuStream stream);

// out[r] = src[rows[r]] for r < num_rows; src [*, width] bf16, rows [num_rows] int32.
Status GatherRows(const uint16_t* src, const int32_t* rows, int64_t num_rows, int64_t width, uint16_t* out,
                  GpuStream stream);

// A layer of the paged KV cache on the device: bf16 pools (batch_layout.h).
using PagedKvLayer = PagedKvLayerOf<uint16_t>;

// Floats of BatchLayout::split_workspace PagedAttention may use for this head_dim.
int64_t AttentionWorkspaceFloats(int64_t head_dim);
// Tokens per attention tile (AttentionTiles) for a model: a prefill block's query rows (token x
// head of one KV group; 128 for head dims up to 128, else 64) over the group's heads.
int64_t AttentionTileTokens(int64_t num_heads, int64_t num_kv_heads, int64_t head_dim);
// Flash-decoding's key splits (>= 1) of a decode-only PagedAttention launch of `blocks` blocks (sequences x
// KV heads x head chunks) over max_keys keys (BatchLayout::max_keys) on a GPU that runs `slots` decode
// blocks at once; 1 without splits (max_keys <= one 64-key tile, or nothing known). Host code only.
int64_t DecodeKeySplits(int64_t blocks, int64_t max_keys, int64_t slots);
// The key splits (>= 1) of each block after the whole waves of such a launch where DecodeKeySplits gives
// 1 (the blocks before run unsplit); 1: none. Host code only.
int64_t DecodeTailSplits(int64_t blocks, int64_t max_keys, int64_t slots);

// Stores k, v [T, num_kv_heads, head_dim] bf16 into the slots of each token's position.
// Contract: no two tokens map to the same slot.
Status WriteKv(const PagedKvLayer& cache, const BatchLayout& batch, const uint16_t* k, const uint16_t* v,
               GpuStream stream);

// Each token's q, k, v rows: q [num_heads, head_dim] at q + t * q_stride, k and v
// [num_kv_heads, head_dim] at k + t * kv_stride, v + t * kv_stride (elements): the columns of a
// fused q|k|v projection, or separate buffers.
struct QkvRows {
  const uint16_t* q = nullptr;
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int64_t q_stride = 0, kv_stride = 0;
};
// Per-head RMSNorm of q and k (Qwen3, Gemma 3; null weights: none) and their rotary embedding.
struct QkNormRope {
  const float* q_norm = nullptr;  // [head_dim] fp32, BF16 values
  const float* k_norm = nullptr;
  float eps = 0;
  bool add_one = false;             // Gemma3RMSNorm's (1 + w)
  int64_t rotary_dim = 0;           // even, <= head_dim; 0: no rotation
  const float* inv_freq = nullptr;  // [rotary_dim / 2]
};
// Fused (cuda_fused.cu), one launch: q_out [T, num_heads, head_dim] = ApplyRope(RmsNorm(q)) and
// k = ApplyRope(RmsNorm(k)), v stored by WriteKv into the cache slots of the tokens' positions;
// the same bits as SplitColumns, RmsNorm, ApplyRope and WriteKv in turn. head_dim <= 256.
Status PrepareAttention(const PagedKvLayer& cache, const BatchLayout& batch, int64_t num_heads, const QkvRows& src,
                        const QkNormRope& params, uint16_t* q_out, GpuStream stream);

// Causal attention of every token over its sequence's cached keys [first, position] (the cache
// must already hold the new tokens): out [T, num_heads, head_dim] bf16 from q of the same shape.
// FlashAttention's numerics (transformers' sdpa path): fp32 scores, soft-cap and online-softmax
// statistics, probabilities in bf16 only as the tensor-core P·V operand, fp32 accumulation,
// out = bf16(O / sum). Needs batch.tiles; head_dim a multiple of 8, <= 256. Decode-only batches
// split keys across blocks (flash-decoding) when batch.split_workspace and max_keys are set.
// Deterministic (fixed reduction orders, no atomics). On Hopper, blocks of prefill tiles with head
// dims 65..128 run a wgmma kernel (cuda_attention_wgmma.cu) with the same numerics.
Status PagedAttention(const PagedKvLayer& cache, const BatchLayout& batch, const AttentionParams& params,
                      const uint16_t* q, uint16_t* out, GpuStream stream);

#if !DF11_HAVE_CUDA
// Without CUDA a DeviceBuffer can be held (e.g. by a CPU KvCache) but never allocated.
inline DeviceBuffer::~DeviceBuffer() = default;
inline DeviceBuffer::DeviceBuffer(DeviceBuffer&&) noexcept {}
inline DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept { return *this; }
inline StatusOr<DeviceBuffer> DeviceBuffer::Allocate(uint64_t, const char* what) {
  return Unimplemented(std::string(what) + ": this build has no CUDA");
}
inline Status DeviceBuffer::Reserve(uint64_t, const char* what) {
  return Unimplemented(std::string(what) + ": this build has no CUDA");
}
#endif

}  // namespace df11::cuda
