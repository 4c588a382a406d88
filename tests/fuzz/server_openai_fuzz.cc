// libFuzzer target for the OpenAI HTTP API's JSON mapping (server/openai_request.h,
// openai_response.h): the first byte picks the endpoint, the rest is the request body a client
// can send. Parsed -> the shared translation and prompt building (tiny tokenizer) -> error object
// or, for an accepted request, the response JSON built from the fuzz bytes as generated text and
// the prompt's ids as logprob tokens. Any crash, exception, hang or sanitizer report is a bug;
// errors must be statuses, and every error object must be JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"
#include "server/openai_response.h"
#include "tests/fuzz/tiny_prompt_sources.h"

namespace {

void CheckError(const df11::Status& status, df11::server::OpenAiEndpoint endpoint) {
  df11::server::OpenAiError e = df11::server::ToOpenAiError(status, endpoint);
  if (e.http_status < 400 || nlohmann::json::parse(df11::server::ErrorJson(e), nullptr, false).is_discarded()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using df11::server::OpenAiEndpoint;
  const OpenAiEndpoint endpoint = data[0] & 1 ? OpenAiEndpoint::kChat : OpenAiEndpoint::kCompletion;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto parsed = df11::server::ParseOpenAiRequest(endpoint, body);
  if (!parsed.ok()) {
    if (parsed.status().code() != df11::StatusCode::kInvalidArgument) std::abort();
    CheckError(parsed.status(), endpoint);
    return 0;
  }
  auto translated = df11::server::TranslateGenerateRequest(parsed->generate);
  if (!translated.ok()) return CheckError(translated.status(), endpoint), 0;
  auto prompt = df11::server::BuildPrompt(parsed->generate, df11::fuzz::TinyPromptSources());
  if (!prompt.ok()) return CheckError(prompt.status(), endpoint), 0;
  df11::server::OpenAiResponseMeta meta{endpoint, "id", parsed->generate.model(), 0, true,
                                        df11::fuzz::TinyPromptSources().tokenizer.get()};
  df11::RequestEvent event;
  event.text = body;  // any bytes: the JSON writer must replace invalid UTF-8, not throw
  for (int32_t id : *prompt) event.logprobs.push_back({id, -1.0f, {{id, -1.0f}}});
  event.finished = true;
  event.finish_reason = df11::FinishReason::kLength;
  df11::server::CompletionJson(meta, event);
  df11::server::EventChunk(meta, event);
  return 0;
}
