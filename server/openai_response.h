// The OpenAI-compatible HTTP API's response side: engine events -> chat.completion(.chunk) and
// text_completion JSON, server-sent-event framing, and statuses -> OpenAI error objects
// ({"error": {"message", "type", "param", "code"}}) with their HTTP status.
// Thread-safety: free functions; Tokenizer is only read.
#pragma once

#include <string>

#include "kernels/base/status.h"
#include "runtime/tokenizer/tokenizer.h"
#include "scheduler/engine.h"
#include "server/openai_request.h"

namespace df11::server {

struct OpenAiError {
  int http_status = 500;
  std::string type, code, param, message;
  int retry_after_seconds = 0;  // > 0: send Retry-After
};

// INVALID_ARGUMENT / FAILED_PRECONDITION -> 400 (param named), UNAUTHENTICATED -> 401,
// NOT_FOUND -> 404 (model_not_found), RESOURCE_EXHAUSTED -> 429, UNAVAILABLE -> 503 (both with
// Retry-After), DEADLINE_EXCEEDED -> 504, CANCELLED -> 499, others -> 500.
OpenAiError ToOpenAiError(const Status& status, OpenAiEndpoint endpoint);
std::string ErrorJson(const OpenAiError& error);

// What every response of one request repeats.
struct OpenAiResponseMeta {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kChat;
  std::string id;     // "chatcmpl-<n>" / "cmpl-<n>"
  std::string model;
  int64_t created = 0;  // Unix seconds
  bool logprobs = false;
  const Tokenizer* tokenizer = nullptr;  // names tokens in logprobs; may be null
};

// "stop" (stop string, stop id, eos), "length", or nullptr while running / for other endings.
const char* OpenAiFinishReason(FinishReason reason);

// Appends `next` (a later event of the same request) to `into`; final fields come from `next`.
void MergeEvent(RequestEvent& into, RequestEvent&& next);

// The non-streaming body for a finished request whose events were merged into `all`.
std::string CompletionJson(const OpenAiResponseMeta& meta, const RequestEvent& all);
// One SSE chunk ("data: {...}\n\n") for an event; the chat stream's first chunk is RoleChunk.
std::string RoleChunk(const OpenAiResponseMeta& meta);
std::string EventChunk(const OpenAiResponseMeta& meta, const RequestEvent& event);
std::string UsageChunk(const OpenAiResponseMeta& meta, const RequestUsage& usage);
std::string ErrorChunk(const OpenAiError& error);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace df11::server
