// Translation between the wire contract (proto/df11.proto) and the engine contract
// (scheduler/engine.h): request validation with messages naming the proto field, prompt building
// (text, chat messages through the model's chat template, or token ids), events to stream
// messages, and df11::Status to grpc::Status.
// Thread-safety: free functions; PromptSources is immutable after construction.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "kernels/base/status.h"
#include "proto/df11.pb.h"
#include "runtime/template/chat_template.h"
#include "runtime/tokenizer/tokenizer.h"
#include "scheduler/engine.h"

namespace df11::server {

namespace pb = ::df11::v1;

// Limits on request fields (docs/api.md lists them).
inline constexpr int kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;
inline constexpr int kMaxStopTokenIds = 64;
// kMaxTopLogprobs: kernels/sampling.h (the sampler's own bound).
inline constexpr size_t kMaxRequestIdBytes = 128;
inline constexpr int64_t kMaxTokensLimit = 1 << 20;

grpc::Status ToGrpc(const Status& status);

// What a model offers for prompt building; either may be null (then text / chat input is
// FAILED_PRECONDITION for that model).
struct PromptSources {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const ChatTemplate> chat_template;
  int64_t vocab_size = 0;  // the model's; token ids are checked against it (0 = unchecked)
};

// INVALID_ARGUMENT naming the field and byte offset when `bytes` is not valid UTF-8.
Status CheckUtf8(std::string_view bytes, const std::string& field);

// Renders a chat input with the template (add_generation_prompt unless continue_final_message).
StatusOr<std::string> RenderChat(const pb::ChatInput& chat, const ChatTemplate& chat_template);

// The prompt token ids of a request's input (field names as in the proto: "text", "chat",
// "tokens.ids"). Text gets the tokenizer's special tokens; rendered chat does not (as
// transformers' apply_chat_template(tokenize=True)).
StatusOr<std::vector<int32_t>> BuildPrompt(const pb::GenerateRequest& request, const PromptSources& sources);

// Everything but the prompt and the deadline: sampling, limits, stops, flags. INVALID_ARGUMENT
// naming the field (e.g. "sampling.top_p: must be in (0, 1], got 1.5").
StatusOr<GenerateRequest> TranslateGenerateRequest(const pb::GenerateRequest& request);

// One stream message from an engine event.
void FillResponse(const RequestEvent& event, const std::string& request_id, pb::GenerateResponse* out);
// The status a stream ends with after its final event.
grpc::Status FinalStatus(const RequestEvent& event);
// RESOURCE_EXHAUSTED and UNAVAILABLE from Submit are retryable: the retry hint in milliseconds
// sent as trailing metadata "retry-after-ms"; 0 = not retryable.
int RetryAfterMs(const Status& status);

void FillModelInfo(const ModelInfo& info, pb::ModelInfo* out);

}  // namespace df11::server
