// The request contract between server/ and scheduler/: a generation request, the events it
// produces (deltas, then one final event with usage and timings), and why it finished or was
// refused. Engine::Submit (engine.h) takes these; Sequence (sequence.h) carries them on the
// engine thread.
// Thread-safety: plain values; an EventSink is called on the engine thread and must not block.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/model/sampler.h"

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

// Whether a model's next step is launched before the last one's tokens are detokenized and
// streamed (EngineOptions::host_overlap): kAuto where the step runs asynchronously (CUDA), kAlways
// also on the CPU (tests: the same order of work as on CUDA), kNever never.
enum class HostOverlap { kAuto, kAlways, kNever };

// One generation request. Prompt tokens are final (the server has tokenized and applied the chat
// template); the engine does sampling, stop handling and incremental detokenization.
struct GenerateRequest {
  std::string model;                          // served model name (ModelSpec::name)
  std::vector<int32_t> prompt_tokens;         // [n >= 1], ids in [0, vocab)
  SamplingParams sampling;                    // sampling.top_logprobs > 0 also turns on logprobs
  bool logprobs = false;                      // report the chosen token's logprob (and top_logprobs)
  int64_t max_tokens = 256;                   // >= 1; also capped by the model's max positions
  std::vector<std::string> stop_strings;      // matched on the detokenized text; never emitted
  std::vector<int32_t> stop_token_ids;        // finish with kStop; the id is not emitted as text
  bool ignore_eos = false;                    // don't stop at the tokenizer's stop ids
  bool skip_special_tokens = true;            // in the text deltas
  int32_t priority = 0;                       // higher first among waiting requests of one model
  std::optional<Clock::time_point> deadline;  // past it: finish with kDeadline
  std::string client_request_id;              // echoed in logs, opaque to the engine
  // The server's own warm-up request: left out of request and token metrics.
  bool warmup = false;
};

// Prompt lengths of the warm-up requests, run one after another (df11d's before a model is
// SERVING, the first generating --warmup-tokens and the others one token; engine_bench's before its
// levels), each at most the model's max positions less the tokens it generates: one for each
// matrix-product path a prefill takes on CUDA (cuBLAS above 64 tokens, the tile kernel's token
// groups up to 64, 32, 16 and 8). The first use of a path's kernels in a process costs the step
// that meets it up to ~0.1 s, which a client request would otherwise pay (measured on an H100,
// bench/results/ab_h100_warmup_prompt.log: the first 512-token prompt's time to first token 87-147
// ms after one 4-token warm-up prompt, 12.6-12.7 ms after these).
inline constexpr std::array<int64_t, 5> kWarmupPromptTokens = {512, 64, 32, 16, 8};

// A warm-up prompt: `length` ids (at most max_positions - max_tokens, at least 1; max_positions 0 =
// unknown), first_id, first_id + 1, ... modulo vocab, so prompts of different first ids share no
// prefix in the prefix cache.
std::vector<int32_t> WarmupPrompt(int64_t length, int64_t first_id, int64_t max_tokens, int64_t vocab,
                                  int64_t max_positions);

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

// prefix_hit_tokens: prompt tokens found in the prefix cache at the first admission, not
// recomputed (on the wire: Usage.cached_prompt_tokens, OpenAI prompt_tokens_details.cached_tokens).
struct RequestUsage {
  int64_t prompt_tokens = 0;
  int64_t prefix_hit_tokens = 0;  // prompt tokens served by prefix-cache hits
  int64_t generated_tokens = 0;
};

// Seconds, measured on the engine thread with Clock.
struct RequestTimings {
  double queue_seconds = 0;           // submit -> first scheduled
  double first_token_seconds = 0;     // submit -> first generated token
  double prefill_seconds = 0;         // first scheduled -> first generated token
  double decode_seconds = 0;          // first generated token -> finish
  double total_seconds = 0;           // submit -> finish
  bool waited_for_promotion = false;  // it queued while its model was brought to the device
};

// What an EventSink receives: zero or more deltas, then exactly one final event (finished = true).
struct RequestEvent {
  RequestId id = 0;
  std::vector<int32_t> token_ids;      // new generated ids (stop-string tails included)
  std::string text;                    // new text, valid UTF-8, stop strings cut out
  std::vector<TokenLogprob> logprobs;  // one per token id when requested
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  Status status;           // non-OK only with kError (and kCancelled on shutdown)
  RequestUsage usage;      // final event only
  RequestTimings timings;  // final event only
};
using EventSink = std::function<void(RequestEvent&&)>;

}  // namespace df11
