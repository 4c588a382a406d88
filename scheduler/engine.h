// Engine: continuous batching of generation requests over several resident models on one device.
// The contract between scheduler/ and server/ (the server translates RPCs into these calls),
// with the request and event types (request.h), ModelSpec (model_spec.h) and what the engine
// reports (observer.h).
//
// Threads (see docs/ARCHITECTURE.md):
//   - one engine thread per Engine owns every request, every KV block and the model choice; it
//     runs Model::Step, samples, detokenizes and calls each request's EventSink;
//   - any thread may call Submit / Cancel / LoadModel / UnloadModel / Models / Stats / Tokenizer;
//     they only post to the engine's queue or read snapshots under a mutex, never touch
//     scheduling state directly;
//   - an EventSink is called on the engine thread and must not block (append to a queue, notify,
//     return). The engine never waits on a client.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/model/model.h"
#include "runtime/tokenizer/tokenizer.h"
#include "scheduler/model_spec.h"
#include "scheduler/observer.h"
#include "scheduler/request.h"

namespace df11 {

struct EngineOptions {
  Device device = Device::kCpu;
  int threads = 0;                     // CPU backend: 0 = all cores
  int64_t max_batched_tokens = 2048;   // tokens per step (decode tokens + prefill chunks)
  int64_t max_seqs = 64;               // running sequences per model
  int64_t block_size = 16;             // KV positions per block
  // KV memory for all models together: bytes if kv_memory_bytes > 0, else this fraction of the
  // device memory left after weights and scratch.
  // Policy (scheduler/kv_budget.h): CPU without kv_memory_bytes: 1 GiB. CUDA without it:
  // kv_memory_fraction x (free memory at Create - max_model_bytes) when max_model_bytes is set,
  // else kv_memory_fraction x the free memory after the weights of the first LoadModel/LoadModels
  // call (df11d: every configured model); a model loaded later needs its weights to fit in what
  // is left, else it is refused up front with the bytes it needs and the bytes free. Each model gets its
  // minimum (ModelSpec::kv_min_blocks), the rest is shared by kv_share; a model's cache is resized
  // to its share when one is loaded or unloaded, once none of its blocks is in use.
  int64_t kv_memory_bytes = 0;
  double kv_memory_fraction = 0.9;
  int64_t max_waiting = 1024;          // waiting requests per engine; over it: RESOURCE_EXHAUSTED
  bool prefix_caching = true;
  // Host work beside the GPU's: a step's tokens are appended, the next step scheduled and
  // launched, and only then the tokens detokenized, matched against stop strings and streamed,
  // while that step runs. A stop string is then known a step late: the sequence's row in the
  // step in flight is dropped (its blocks are freed once the step is collected). Outputs are the
  // same either way.
  HostOverlap host_overlap = HostOverlap::kAuto;
  // Device memory budget for the resident models' weights + own workspaces, plus the shared
  // decode scratch once (0 = ask the device). Models beyond it wait in the host or disk tier
  // (residency.h) and are promoted on demand; on CUDA serving more models than fit at once
  // needs it set (the KV pool takes the rest of the device).
  int64_t max_model_bytes = 0;
  // Host tier budget: bytes of demoted models' weights kept in host memory (page-locked on
  // CUDA); a demoted model that does not fit goes to the disk tier. 0 = no host tier. At most
  // the machine's physical memory.
  int64_t max_host_model_bytes = 0;
};

enum class ModelState { kLoading, kReady, kUnloading };


struct ModelInfo {
  std::string name, path, architecture;
  ModelState state = ModelState::kLoading;
  int64_t max_positions = 0;
  int64_t vocab_size = 0;
  bool df11 = false;
  uint64_t weight_bytes = 0;          // resident (compressed when DF11)
  uint64_t bf16_weight_bytes = 0;     // the same weights as BF16
  uint64_t scratch_bytes = 0;         // this model's own step workspace (LoadReport::scratch_bytes)
  uint64_t kv_bytes = 0;
  int64_t kv_blocks_total = 0;
  double load_seconds = 0;
  uint64_t shared_scratch_bytes = 0;  // what it needs of the engine's shared decode scratch (CUDA)
  ModelTier tier = ModelTier::kResident;
  bool moving = false;         // being promoted or demoted now
  bool pinned = false;
  std::string tier_error;      // why its last promotion failed ("" after a success)
  // LoadReport::warnings of its first load: what the checkpoint warned about, then what the load
  // left slower than it could be, and why (a DF11 matrix decoded before its GEMM, ...).
  std::vector<std::string> load_warnings;
};

struct EngineStats {
  std::vector<ModelStats> models;
  int64_t rejected_queue_full_total = 0;
  uint64_t shared_scratch_bytes = 0;  // CUDA: the one DF11 decode scratch all models share
};

class Engine {
 public:
  // Starts the engine thread. No models yet.
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options, EngineObserver observer = {});
  // Cancels every request (final events with kCancelled), stops the thread.
  ~Engine();

  // Loads and registers a model (blocking the caller, not the engine). ALREADY_EXISTS for a
  // duplicate name, RESOURCE_EXHAUSTED when weights + scratch + minimum KV would not fit, load
  // errors as Model::Load reports them. With tiers (max_model_bytes), a model that does not fit
  // first makes room as a promotion would: idle unpinned resident models leave the device, least
  // recently used first (to host when their image fits, else disk); RESOURCE_EXHAUSTED only when
  // no such model is left.
  Status LoadModel(const ModelSpec& spec);
  // Loads several models as one, all or nothing: every model's weights first, then (when the KV
  // budget is still undecided: CUDA without kv_memory_bytes or max_model_bytes) the KV budget is
  // sized from the memory they leave, and split over all of them. df11d loads its configured
  // models this way, so several models need no memory flags.
  Status LoadModels(const std::vector<ModelSpec>& specs);
  // Cancels the model's requests, waits for them to end, frees the model. NOT_FOUND if unknown.
  Status UnloadModel(const std::string& name);

  // Tiers (residency.h); each returns once done. Promote brings a model to the device, demoting
  // idle unpinned models (least recently used first) as the device budget needs; Demote moves an
  // idle unpinned resident model to `to` (kHost or kDisk); SetPinned pins or unpins (a pinned
  // model is never demoted; one that is not resident is promoted by its next request).
  // Errors: NOT_FOUND (model), INVALID_ARGUMENT (Demote to kResident), FAILED_PRECONDITION
  // (pinned, busy or moving; no room now, naming the models in the way), RESOURCE_EXHAUSTED (the
  // host budget; no room ever: the pinned models leave too little), and the move's own error
  // (the model stays where it was). A request whose model can never fit ends with that
  // RESOURCE_EXHAUSTED at once instead of waiting.
  Status Promote(const std::string& name);
  Status Demote(const std::string& name, ModelTier to);
  Status SetPinned(const std::string& name, bool pinned);

  // Queues a request. Errors are returned here, and then `sink` is never called:
  // NOT_FOUND (model), INVALID_ARGUMENT (empty prompt, token out of vocab, prompt + 1 longer than
  // the model's max positions, bad sampling params), RESOURCE_EXHAUSTED (waiting queue full;
  // retryable), UNAVAILABLE (shutting down). On success `sink` receives events until a final one.
  // `reason`, when given, is set to why a request was refused (kNone on success).
  StatusOr<RequestId> Submit(GenerateRequest request, EventSink sink, RejectReason* reason = nullptr);
  // Ends a request in the next step with kCancelled and frees its blocks. Unknown ids are ignored.
  void Cancel(RequestId id);

  std::vector<ModelInfo> Models() const;
  EngineStats Stats() const;
  // The model's tokenizer (nullptr when the directory has none or the model is unknown). Valid
  // until the model is unloaded; the shared_ptr keeps it alive past that.
  std::shared_ptr<const Tokenizer> GetTokenizer(const std::string& model) const;

  // Stops taking requests (Submit returns UNAVAILABLE); running ones continue.
  void Drain();
  // Number of requests not yet finished.
  int64_t InFlight() const;

 private:
  struct Impl;  // engine.cc
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace df11
