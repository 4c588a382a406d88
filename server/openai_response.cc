// Engine events and statuses -> OpenAI JSON (see openai_response.h).
#include "server/openai_response.h"

#include <nlohmann/json.hpp>

#include "server/translate.h"

namespace df11::server {
namespace {

using Json = nlohmann::ordered_json;

// Token text may be a partial UTF-8 sequence: replaced, never thrown on.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string Sse(const Json& j) { return "data: " + Dump(j) + "\n\n"; }

std::string TokenText(const OpenAiResponseMeta& meta, int32_t id) {
  if (meta.tokenizer == nullptr) return "token_id:" + std::to_string(id);
  const int32_t ids[] = {id};
  return meta.tokenizer->Decode(ids, /*skip_special_tokens=*/false);
}

Json Bytes(const std::string& s) {
  Json out = Json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
Json ChatLogprobs(const OpenAiResponseMeta& meta, const std::vector<TokenLogprob>& logprobs) {
  Json content = Json::array();
  for (const auto& lp : logprobs) {
    const std::string text = TokenText(meta, lp.token);
    Json top = Json::array();
    for (const auto& [token, logprob] : lp.top) {
      const std::string t = TokenText(meta, token);
      top.push_back({{"token", t}, {"logprob", logprob}, {"bytes", Bytes(t)}});
    }
    content.push_back({{"token", text}, {"logprob", lp.logprob}, {"bytes", Bytes(text)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
Json CompletionLogprobs(const OpenAiResponseMeta& meta, const std::vector<TokenLogprob>& logprobs) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  size_t offset = 0;
  for (const auto& lp : logprobs) {
    const std::string text = TokenText(meta, lp.token);
    tokens.push_back(text);
    token_logprobs.push_back(lp.logprob);
    Json alternatives = Json::object();
    for (const auto& [token, logprob] : lp.top) alternatives[TokenText(meta, token)] = logprob;
    top.push_back(alternatives);
    offsets.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

Json Logprobs(const OpenAiResponseMeta& meta, const RequestEvent& event) {
  if (!meta.logprobs) return nullptr;
  return meta.endpoint == OpenAiEndpoint::kChat ? ChatLogprobs(meta, event.logprobs)
                                                : CompletionLogprobs(meta, event.logprobs);
}

Json Finish(const RequestEvent& event) {
  const char* reason = event.finished ? OpenAiFinishReason(event.finish_reason) : nullptr;
  return reason ? Json(reason) : Json(nullptr);
}

Json Usage(const RequestUsage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.generated_tokens},
          {"total_tokens", usage.prompt_tokens + usage.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.prefix_hit_tokens}}}};
}

Json Envelope(const OpenAiResponseMeta& meta, bool chunk) {
  const bool chat = meta.endpoint == OpenAiEndpoint::kChat;
  return {{"id", meta.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", meta.created},
          {"model", meta.model}};
}

}  // namespace

OpenAiError ToOpenAiError(const Status& status, OpenAiEndpoint endpoint) {
  struct Kind {
    StatusCode status;
    int http;
    const char* type;
    const char* code;
  };
  static constexpr Kind kKinds[] = {
      {StatusCode::kInvalidArgument, 400, "invalid_request_error", "invalid_value"},
      {StatusCode::kFailedPrecondition, 400, "invalid_request_error", "unsupported_input"},
      {StatusCode::kUnauthenticated, 401, "authentication_error", "invalid_api_key"},
      {StatusCode::kNotFound, 404, "invalid_request_error", "model_not_found"},
      {StatusCode::kResourceExhausted, 429, "rate_limit_error", "queue_full"},
      {StatusCode::kUnavailable, 503, "server_error", "unavailable"},
      {StatusCode::kDeadlineExceeded, 504, "server_error", "timeout"},
      {StatusCode::kCancelled, 499, "invalid_request_error", "cancelled"},  // nginx's "client closed request"
  };
  Kind kind{status.code(), 500, "server_error", "internal_error"};
  for (const Kind& k : kKinds) {
    if (k.status == status.code()) kind = k;
  }
  OpenAiError e;
  e.http_status = kind.http;
  e.type = kind.type;
  e.code = kind.code;
  e.message = OpenAiMessage(status.message(), endpoint);
  if (kind.http == 400) e.param = OpenAiParam(status.message(), endpoint);
  if (status.code() == StatusCode::kNotFound) {
    e.param = "model";
    if (size_t at = e.message.find("(see ListModels)"); at != std::string::npos) e.message.replace(at, 16, "(see GET /v1/models)");
  }
  if (int ms = RetryAfterMs(status); ms > 0) e.retry_after_seconds = (ms + 999) / 1000;
  return e;
}

std::string ErrorJson(const OpenAiError& error) {
  Json e = {{"message", error.message},
            {"type", error.type},
            {"param", error.param.empty() ? Json(nullptr) : Json(error.param)},
            {"code", error.code.empty() ? Json(nullptr) : Json(error.code)}};
  return Dump({{"error", e}});
}

const char* OpenAiFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
    case FinishReason::kEos: return "stop";
    case FinishReason::kLength: return "length";
    default: return nullptr;
  }
}

void MergeEvent(RequestEvent& into, RequestEvent&& next) {
  into.text += next.text;
  into.token_ids.insert(into.token_ids.end(), next.token_ids.begin(), next.token_ids.end());
  for (auto& lp : next.logprobs) into.logprobs.push_back(std::move(lp));
  into.id = next.id;
  into.finished = next.finished;
  into.finish_reason = next.finish_reason;
  into.status = next.status;
  into.usage = next.usage;
  into.timings = next.timings;
}

std::string CompletionJson(const OpenAiResponseMeta& meta, const RequestEvent& all) {
  Json body = Envelope(meta, /*chunk=*/false);
  Json choice = {{"index", 0}};
  if (meta.endpoint == OpenAiEndpoint::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", all.text}};
  } else {
    choice["text"] = all.text;
  }
  choice["logprobs"] = Logprobs(meta, all);
  choice["finish_reason"] = Finish(all);
  body["choices"] = Json::array({choice});
  body["usage"] = Usage(all.usage);
  return Dump(body);
}

std::string RoleChunk(const OpenAiResponseMeta& meta) {
  Json body = Envelope(meta, /*chunk=*/true);
  body["choices"] = Json::array(
      {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return Sse(body);
}

std::string EventChunk(const OpenAiResponseMeta& meta, const RequestEvent& event) {
  Json body = Envelope(meta, /*chunk=*/true);
  Json choice = {{"index", 0}};
  if (meta.endpoint == OpenAiEndpoint::kChat) {
    choice["delta"] = event.text.empty() ? Json::object() : Json{{"content", event.text}};
  } else {
    choice["text"] = event.text;
  }
  choice["logprobs"] = Logprobs(meta, event);
  choice["finish_reason"] = Finish(event);
  body["choices"] = Json::array({choice});
  return Sse(body);
}

std::string UsageChunk(const OpenAiResponseMeta& meta, const RequestUsage& usage) {
  Json body = Envelope(meta, /*chunk=*/true);
  body["choices"] = Json::array();
  body["usage"] = Usage(usage);
  return Sse(body);
}

std::string ErrorChunk(const OpenAiError& error) { return "data: " + ErrorJson(error) + "\n\n"; }

}  // namespace df11::server
