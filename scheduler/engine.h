// Engine: continuous batching of generation requests over several resident models on one device.
// The contract between scheduler/ and server/ (the server translates RPCs into these calls).
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

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/model/model.h"
#include "runtime/format/model_config.h"
#include "runtime/model/sampler.h"
#include "runtime/tokenizer/tokenizer.h"

namespace df11 {

using RequestId = uint64_t;
using Clock = std::chrono::steady_clock;

enum class FinishReason {
  kNone,       // still running (only in non-final events)
  kStop,       // a stop string or stop token id matched
  kLength,     // max_tokens reached, or the model's context is full
  kEos,        // an end-of-sequence token of the model
  kCancelled,  // Cancel() or engine shutdown
  kDeadline,   // the request's deadline passed
  kError,      // see RequestEvent::status
};
const char* FinishReasonName(FinishReason reason);  // "stop", "length", "eos", ...

// One generation request. Prompt tokens are final (the server has tokenized and applied the chat
// template); the engine does sampling, stop handling and incremental detokenization.
struct GenerateRequest {
  std::string model;                   // served model name (ModelSpec::name)
  std::vector<int32_t> prompt_tokens;  // [n >= 1], ids in [0, vocab)
  SamplingParams sampling;             // sampling.top_logprobs > 0 also turns on logprobs
  bool logprobs = false;               // report the chosen token's logprob (and top_logprobs)
  int64_t max_tokens = 256;            // >= 1; also capped by the model's max positions
  std::vector<std::string> stop_strings;  // matched on the detokenized text; never emitted
  std::vector<int32_t> stop_token_ids;    // finish with kStop; the id is not emitted as text
  bool ignore_eos = false;                // don't stop at the tokenizer's stop ids
  bool skip_special_tokens = true;        // in the text deltas
  int32_t priority = 0;                   // higher first among waiting requests of one model
  std::optional<Clock::time_point> deadline;  // past it: finish with kDeadline
  std::string client_request_id;              // echoed in logs, opaque to the engine
  bool warmup = false;  // the server's own warm-up request: left out of request and token metrics
};

// A cancellation that arrives this close to (or after) the request's deadline is the deadline
// firing: the client's own timer cancels the call a little before the server's deadline passes
// (network and queueing delay), so both the server's status and the engine count it as a deadline.
inline constexpr std::chrono::milliseconds kDeadlineCancelTolerance{250};

// Why Submit refused a request, for metrics labels (the Status says it to the client).
enum class RejectReason {
  kNone,
  kInvalid,        // a field out of range (INVALID_ARGUMENT)
  kPromptTooLong,  // the prompt does not fit the model's context or KV cache (INVALID_ARGUMENT)
  kQueueFull,      // max_waiting reached (RESOURCE_EXHAUSTED, retryable)
  kUnavailable,    // draining or shutting down (UNAVAILABLE)
  kUnknownModel,   // NOT_FOUND
};
const char* RejectReasonName(RejectReason reason);  // "invalid", "too_long", "queue_full", ...

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // the request's top_logprobs alternatives
};

struct RequestUsage {
  int64_t prompt_tokens = 0;
  // Prompt tokens found in the prefix cache at the first admission, not recomputed (on the wire:
  // Usage.cached_prompt_tokens, OpenAI usage.prompt_tokens_details.cached_tokens).
  int64_t prefix_hit_tokens = 0;
  int64_t generated_tokens = 0;
};

// Seconds, measured on the engine thread with Clock.
struct RequestTimings {
  double queue_seconds = 0;          // submit -> first scheduled
  double first_token_seconds = 0;    // submit -> first generated token
  double prefill_seconds = 0;        // first scheduled -> first generated token
  double decode_seconds = 0;         // first generated token -> finish
  double total_seconds = 0;          // submit -> finish
};

// What an EventSink receives: zero or more deltas, then exactly one final event (finished = true).
struct RequestEvent {
  RequestId id = 0;
  std::vector<int32_t> token_ids;        // new generated ids (stop-string tails included)
  std::string text;                      // new text, valid UTF-8, stop strings cut out
  std::vector<TokenLogprob> logprobs;    // one per token id when requested
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  Status status;                         // non-OK only with kError (and kCancelled on shutdown)
  RequestUsage usage;                    // final event only
  RequestTimings timings;                // final event only
};
using EventSink = std::function<void(RequestEvent&&)>;

// One model to serve.
struct ModelSpec {
  std::string name;        // served name; unique within the engine
  std::string path;        // DF11 or BF16 model directory (tokenizer files optional)
  double kv_share = 1.0;   // weight of this model in the shared KV remainder (> 0)
  int64_t kv_min_blocks = 0;  // 0 = enough for one max-length sequence
  double weight = 1.0;     // fairness weight between models with pending work (> 0)
  int64_t max_seqs = 0;    // 0 = EngineOptions::max_seqs
};

// Bounds of the ModelSpec fields (docs/api.md, "Configuration").
inline constexpr double kMaxModelShare = 1e6;          // kv_share and weight: (0, 1e6]
inline constexpr int64_t kMaxModelSeqs = 1000000;      // max_seqs: [0, 1e6]
inline constexpr int64_t kMaxKvMinBlocks = int64_t{1} << 40;
inline constexpr size_t kMaxModelNameBytes = 128;
// The one check of a ModelSpec, used by the config file, the Admin service and LoadModel:
// INVALID_ARGUMENT whose message starts with the field name ("kv_share: must be in (0, 1e6], got
// inf"). A name is 1-128 bytes of printable ASCII without spaces; a path is non-empty without
// control characters.
Status ValidateModelSpec(const ModelSpec& spec);

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
  int64_t max_model_bytes = 0;         // device memory budget for weights (0 = ask the device)
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
};

// Counters are totals since start; gauges are the values after the last step.
struct ModelStats {
  std::string name;
  int64_t running = 0, waiting = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  int64_t preemptions_total = 0;
  int64_t prefix_hit_tokens_total = 0;  // sum of RequestUsage::prefix_hit_tokens
  int64_t prompt_tokens_total = 0, generated_tokens_total = 0;
  int64_t steps_total = 0;
  int64_t last_batch_sequences = 0, last_batch_tokens = 0;
  double last_step_seconds = 0, last_decompress_seconds = 0;
};
struct EngineStats {
  std::vector<ModelStats> models;
  int64_t rejected_queue_full_total = 0;
  uint64_t shared_scratch_bytes = 0;  // CUDA: the one DF11 decode scratch all models share
};

// Called on the engine thread after every step and at every request's end; must not block.
// Metrics use these to fill histograms.
struct StepRecord {
  std::string model;
  int64_t sequences = 0, tokens = 0;
  double step_seconds = 0, decompress_seconds = 0;
};
struct RequestRecord {
  std::string model;
  RequestId id = 0;
  std::string client_request_id;
  FinishReason finish_reason = FinishReason::kNone;
  Status status;
  RequestUsage usage;
  RequestTimings timings;
  std::vector<double> inter_token_seconds;  // gaps between consecutive generated tokens
  bool warmup = false;                      // GenerateRequest::warmup
};
struct EngineObserver {
  std::function<void(const StepRecord&)> on_step;
  std::function<void(const RequestRecord&)> on_request;
};

class Engine {
 public:
  // Starts the engine thread. No models yet.
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options, EngineObserver observer = {});
  // Cancels every request (final events with kCancelled), stops the thread.
  ~Engine();

  // Loads and registers a model (blocking the caller, not the engine). ALREADY_EXISTS for a
  // duplicate name, RESOURCE_EXHAUSTED when weights + scratch + minimum KV would not fit, load
  // errors as Model::Load reports them.
  Status LoadModel(const ModelSpec& spec);
  // Loads several models as one, all or nothing: every model's weights first, then (when the KV
  // budget is still undecided: CUDA without kv_memory_bytes or max_model_bytes) the KV budget is
  // sized from the memory they leave, and split over all of them. df11d loads its configured
  // models this way, so several models need no memory flags.
  Status LoadModels(const std::vector<ModelSpec>& specs);
  // Cancels the model's requests, waits for them to end, frees the model. NOT_FOUND if unknown.
  Status UnloadModel(const std::string& name);

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
