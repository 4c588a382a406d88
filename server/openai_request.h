// The OpenAI-compatible HTTP API's request side: a JSON body of POST /v1/chat/completions or
// /v1/completions -> the proto GenerateRequest that gRPC Generate takes, so both fronts share
// TranslateGenerateRequest and BuildPrompt (server/admission.h). Only the JSON shape is checked
// here (types, unsupported features); values and limits are checked by the shared translation.
// Field mapping (docs/api.md, "HTTP API"): model; messages (text content or text parts) ->
// chat.messages; chat_template_kwargs -> chat.template_vars_json; prompt (string, token ids, or a
// list of one of those) -> text / tokens.ids; max_completion_tokens | max_tokens -> max_tokens;
// temperature, top_p, top_k (-1 = off), min_p, presence/frequency/repetition_penalty, seed ->
// sampling; stop (string or list); logprobs + top_logprobs (chat) or logprobs: N (completions);
// vLLM's ignore_eos, stop_token_ids, skip_special_tokens, add_generation_prompt,
// continue_final_message, priority. n and best_of must be 1; user is ignored.
// Thread-safety: free functions.
#pragma once

#include <string>
#include <string_view>

#include "kernels/base/status.h"
#include "proto/df11.pb.h"

namespace df11::server {

namespace pb = ::df11::v1;

enum class OpenAiEndpoint { kChat, kCompletion };

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kChat;
  pb::GenerateRequest generate;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
};

// INVALID_ARGUMENT whose message starts with the OpenAI parameter at fault
// ("temperature: expected a number, got string"), or "request body: ..." for a body that is not
// a JSON object.
StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body);

// The OpenAI parameter that a field path in an error message names: proto paths of the shared
// translation ("sampling.top_p" -> "top_p", "chat.messages[1].content" -> "messages[1].content",
// "text" -> "prompt") and OpenAI names (kept). "" when the message names no parameter.
std::string OpenAiParam(std::string_view message, OpenAiEndpoint endpoint);

// `message` with its leading field path replaced by OpenAiParam (so clients read their names).
std::string OpenAiMessage(const std::string& message, OpenAiEndpoint endpoint);

}  // namespace df11::server
