// The OpenAI HTTP API's JSON mapping (server/openai_request.h, openai_response.h): every field to
// its proto field, every malformed body to a 400 naming the parameter, statuses to OpenAI errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/translate.h"

namespace df11::server {
namespace {

using Json = nlohmann::json;

OpenAiRequest ParseOk(OpenAiEndpoint endpoint, const std::string& body) {
  auto r = ParseOpenAiRequest(endpoint, body);
  EXPECT_TRUE(r.ok()) << body << " -> " << r.status().ToString();
  return r.ok() ? *r : OpenAiRequest{};
}

TEST(OpenAiMapping, ChatFieldsMapToTheProto) {
  OpenAiRequest r = ParseOk(OpenAiEndpoint::kChat, R"({
    "model": "m", "messages": [{"role": "system", "content": "be brief"},
                               {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]}],
    "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 4, "min_p": 0.1,
    "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1, "seed": 42,
    "stop": ["a", "b"], "logprobs": true, "top_logprobs": 3, "stream": true,
    "stream_options": {"include_usage": true}, "user": "u1", "n": 1,
    "chat_template_kwargs": {"enable_thinking": false}, "ignore_eos": true})");
  const pb::GenerateRequest& g = r.generate;
  EXPECT_EQ(g.model(), "m");
  ASSERT_EQ(g.chat().messages_size(), 2);
  EXPECT_EQ(g.chat().messages(1).content(), "hi there");
  EXPECT_EQ(Json::parse(g.chat().template_vars_json()), Json::parse(R"({"enable_thinking": false})"));
  EXPECT_FALSE(g.chat().continue_final_message());
  EXPECT_EQ(g.max_tokens(), 7);
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().top_k(), 4);
  EXPECT_FLOAT_EQ(g.sampling().min_p(), 0.1f);
  EXPECT_FLOAT_EQ(g.sampling().presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().frequency_penalty(), -0.5f);
  EXPECT_FLOAT_EQ(g.sampling().repetition_penalty(), 1.1f);
  EXPECT_EQ(g.sampling().seed(), 42u);
  ASSERT_EQ(g.stop_size(), 2);
  EXPECT_TRUE(g.logprobs());
  EXPECT_EQ(g.top_logprobs(), 3);
  EXPECT_TRUE(g.ignore_eos());
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  // The shared translation accepts what the mapping produced.
  EXPECT_TRUE(TranslateGenerateRequest(g).ok());
}

TEST(OpenAiMapping, CompletionPromptsAndDefaults) {
  OpenAiRequest text = ParseOk(OpenAiEndpoint::kCompletion, R"({"model": "m", "prompt": "def f(", "stop": "\n"})");
  EXPECT_EQ(text.generate.text(), "def f(");
  EXPECT_EQ(text.generate.stop(0), "\n");
  EXPECT_FALSE(text.generate.has_max_tokens());  // the gRPC default applies
  EXPECT_FALSE(text.stream);
  OpenAiRequest ids = ParseOk(OpenAiEndpoint::kCompletion, R"({"model": "m", "prompt": [1, 2, 3], "logprobs": 2})");
  ASSERT_EQ(ids.generate.tokens().ids_size(), 3);
  EXPECT_TRUE(ids.generate.logprobs());
  EXPECT_EQ(ids.generate.top_logprobs(), 2);
  EXPECT_EQ(ParseOk(OpenAiEndpoint::kCompletion, R"({"model": "m", "prompt": ["x"]})").generate.text(), "x");
  EXPECT_EQ(ParseOk(OpenAiEndpoint::kCompletion, R"({"model": "m", "prompt": [[5, 6]]})").generate.tokens().ids_size(), 2);
  EXPECT_FALSE(ParseOk(OpenAiEndpoint::kCompletion, R"({"model": "m", "prompt": "x", "top_k": -1})").generate.sampling().has_top_k());
  // Nulls are "not set", as OpenAI clients send them.
  OpenAiRequest nulls = ParseOk(OpenAiEndpoint::kCompletion, R"({"model": "m", "prompt": "x", "temperature": null, "stop": null})");
  EXPECT_FALSE(nulls.generate.sampling().has_temperature());
}

// Every malformed body: INVALID_ARGUMENT whose parameter is the one at fault.
TEST(OpenAiMapping, MalformedBodiesNameTheParameter) {
  struct Case {
    OpenAiEndpoint endpoint;
    const char* body;
    const char* param;  // "" = the body itself
  };
  const OpenAiEndpoint chat = OpenAiEndpoint::kChat, completion = OpenAiEndpoint::kCompletion;
  const Case cases[] = {
      {chat, "", ""},
      {chat, "{", ""},
      {chat, "[1]", ""},
      {chat, R"({"messages": []})", "model"},
      {chat, R"({"model": 3, "messages": []})", "model"},
      {chat, R"({"model": "m"})", "messages"},
      {chat, R"({"model": "m", "messages": "hi"})", "messages"},
      {chat, R"({"model": "m", "messages": [3]})", "messages[0]"},
      {chat, R"({"model": "m", "messages": [{"content": "x"}]})", "messages[0].role"},
      {chat, R"({"model": "m", "messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {chat, R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content[0].type"},
      {chat, R"({"model": "m", "messages": [], "temperature": 1e999})", ""},  // nlohmann's out_of_range (fuzzer)
      {completion, "664e964999", ""},
      {chat, R"({"model": "m", "messages": [], "response_format": {"type": 5}})", "response_format"},
      {chat, R"({"model": "m", "messages": [{"role": "user", "content": [{"type": 5}]}]})", "messages[0].content[0].type"},
      {chat, R"({"model": "m", "messages": [], "temperature": "hot"})", "temperature"},
      {chat, R"({"model": "m", "messages": [], "top_k": 1.5})", "top_k"},
      {chat, R"({"model": "m", "messages": [], "seed": 18446744073709551615})", "seed"},
      {chat, R"({"model": "m", "messages": [], "n": 2})", "n"},
      {chat, R"({"model": "m", "messages": [], "stop": 3})", "stop"},
      {chat, R"({"model": "m", "messages": [], "stop": ["a", 3]})", "stop"},
      {chat, R"({"model": "m", "messages": [], "stream": "yes"})", "stream"},
      {chat, R"({"model": "m", "messages": [], "stream_options": {"include_usage": 1}})", "stream_options.include_usage"},
      {chat, R"({"model": "m", "messages": [], "tools": [{"type": "function"}]})", "tools"},
      {chat, R"({"model": "m", "messages": [], "response_format": {"type": "json_object"}})", "response_format"},
      {chat, R"({"model": "m", "messages": [], "chat_template_kwargs": []})", "chat_template_kwargs"},
      {chat, R"({"model": "m", "messages": [], "top_logprobs": -1})", "top_logprobs"},
      {chat, R"({"model": "m", "messages": [], "max_tokens": "9"})", "max_tokens"},
      {chat, R"({"model": "m", "messages": [], "user": 7})", "user"},
      {completion, R"({"model": "m"})", "prompt"},
      {completion, R"({"model": "m", "prompt": ["a", "b"]})", "prompt"},
      {completion, R"({"model": "m", "prompt": [1, -2]})", "prompt[1]"},
      {completion, R"({"model": "m", "prompt": [1, "x"]})", "prompt[1]"},
      {completion, R"({"model": "m", "prompt": {}})", "prompt"},
      {completion, R"({"model": "m", "prompt": "x", "echo": true})", "echo"},
      {completion, R"({"model": "m", "prompt": "x", "best_of": 3})", "best_of"},
      {completion, R"({"model": "m", "prompt": "x", "logprobs": true})", "logprobs"},
      {completion, R"({"model": "m", "prompt": "x", "stop_token_ids": [-1]})", "stop_token_ids[0]"},
  };
  for (const Case& c : cases) {
    auto r = ParseOpenAiRequest(c.endpoint, c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.body;
    OpenAiError e = ToOpenAiError(r.status(), c.endpoint);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << r.status().message();
    EXPECT_FALSE(e.message.empty());
  }
}

// Values are checked by the shared translation; the error names the OpenAI parameter.
TEST(OpenAiMapping, TranslationErrorsUseOpenAiNames) {
  struct Case {
    OpenAiEndpoint endpoint;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {OpenAiEndpoint::kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": 1.5})", "top_p"},
      {OpenAiEndpoint::kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 1e300})", "temperature"},
      {OpenAiEndpoint::kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens"},
      {OpenAiEndpoint::kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 21})", "top_logprobs"},
      {OpenAiEndpoint::kCompletion, R"({"model": "m", "prompt": "x", "logprobs": 21})", "logprobs"},
      {OpenAiEndpoint::kCompletion, R"({"model": "m", "prompt": "x", "stop": [""]})", "stop"},
      {OpenAiEndpoint::kCompletion, R"({"model": "", "prompt": "x"})", "model"},
  };
  for (const Case& c : cases) {
    OpenAiRequest r = ParseOk(c.endpoint, c.body);
    auto translated = TranslateGenerateRequest(r.generate);
    ASSERT_FALSE(translated.ok()) << c.body;
    OpenAiError e = ToOpenAiError(translated.status(), c.endpoint);
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.param, c.param) << translated.status().message();
    EXPECT_EQ(e.message.rfind(c.param, 0), 0u) << e.message;
    EXPECT_EQ(e.message.find("sampling."), std::string::npos) << e.message;
  }
}

TEST(OpenAiMapping, ProtoPathsBecomeOpenAiParams) {
  EXPECT_EQ(OpenAiParam("sampling.min_p: must be in [0, 1]", OpenAiEndpoint::kChat), "min_p");
  EXPECT_EQ(OpenAiParam("chat.messages[2].content: invalid UTF-8 at byte 1", OpenAiEndpoint::kChat), "messages[2].content");
  EXPECT_EQ(OpenAiParam("chat.template_vars_json: must be a JSON object", OpenAiEndpoint::kChat), "chat_template_kwargs");
  EXPECT_EQ(OpenAiParam("text: must not be empty", OpenAiEndpoint::kCompletion), "prompt");
  EXPECT_EQ(OpenAiParam("tokens.ids[1] = 999 is outside the vocabulary", OpenAiEndpoint::kCompletion), "prompt[1]");
  EXPECT_EQ(OpenAiParam("prompt_tokens[1] = 999 ...", OpenAiEndpoint::kChat), "messages");
  EXPECT_EQ(OpenAiParam("prompt of 900 tokens does not fit model 'm'", OpenAiEndpoint::kCompletion), "prompt");
  EXPECT_EQ(OpenAiParam("server is draining; retry", OpenAiEndpoint::kChat), "");
  EXPECT_EQ(OpenAiMessage("sampling.top_p: must be in (0, 1], got 1.5", OpenAiEndpoint::kChat), "top_p: must be in (0, 1], got 1.5");
}

TEST(OpenAiMapping, StatusesBecomeHttpErrors) {
  struct Case {
    Status status;
    int http;
    const char* code;
    int retry_after;
  };
  const Case cases[] = {
      {Status(StatusCode::kUnauthenticated, "invalid API key"), 401, "invalid_api_key", 0},
      {NotFound("model 'x' is not loaded"), 404, "model_not_found", 0},
      {ResourceExhausted("waiting queue full"), 429, "queue_full", 1},
      {Unavailable("server is draining"), 503, "unavailable", 1},
      {FailedPrecondition("chat: model 'm' has no tokenizer or chat template"), 400, "unsupported_input", 0},
      {InvalidArgument("sampling.top_p: must be in (0, 1], got 1.5"), 400, "invalid_value", 0},
      {Status(StatusCode::kInternal, "bug"), 500, "internal_error", 0},
  };
  for (const Case& c : cases) {
    OpenAiError e = ToOpenAiError(c.status, OpenAiEndpoint::kChat);
    EXPECT_EQ(e.http_status, c.http) << c.status.ToString();
    EXPECT_EQ(e.code, c.code);
    EXPECT_EQ(e.retry_after_seconds, c.retry_after);
    Json body = Json::parse(ErrorJson(e));
    EXPECT_EQ(body["error"]["message"], OpenAiMessage(c.status.message(), OpenAiEndpoint::kChat));
    EXPECT_TRUE(body["error"].contains("type") && body["error"].contains("param") && body["error"].contains("code"));
  }
  OpenAiError unknown = ToOpenAiError(NotFound("model 'x' is not loaded (see ListModels)"), OpenAiEndpoint::kChat);
  EXPECT_EQ(unknown.param, "model");
  EXPECT_EQ(unknown.message, "model 'x' is not loaded (see GET /v1/models)");
}

TEST(OpenAiMapping, ResponsesHaveOpenAiShapes) {
  OpenAiResponseMeta meta{OpenAiEndpoint::kChat, "chatcmpl-1", "m", 1700000000, false, nullptr};
  RequestEvent all;
  all.text = "hello";
  all.finished = true;
  all.finish_reason = FinishReason::kEos;
  all.usage = {.prompt_tokens = 3, .prefix_hit_tokens = 0, .generated_tokens = 2};
  Json chat = Json::parse(CompletionJson(meta, all));
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chat["usage"]["total_tokens"], 5);

  RequestEvent delta;
  delta.text = "lo";
  std::string chunk = EventChunk(meta, delta);
  ASSERT_EQ(chunk.rfind("data: ", 0), 0u);
  ASSERT_EQ(chunk.substr(chunk.size() - 2), "\n\n");
  Json c = Json::parse(chunk.substr(6));
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["content"], "lo");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(Json::parse(RoleChunk(meta).substr(6))["choices"][0]["delta"]["role"], "assistant");
  Json usage = Json::parse(UsageChunk(meta, all.usage).substr(6));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);

  meta.endpoint = OpenAiEndpoint::kCompletion;
  meta.logprobs = true;
  all.finish_reason = FinishReason::kLength;
  all.logprobs = {{.token = 65, .logprob = -0.5f, .top = {{65, -0.5f}, {66, -1.5f}}}};
  Json completion = Json::parse(CompletionJson(meta, all));
  EXPECT_EQ(completion["object"], "text_completion");
  EXPECT_EQ(completion["choices"][0]["text"], "hello");
  EXPECT_EQ(completion["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(completion["choices"][0]["logprobs"]["token_logprobs"][0], -0.5);
  EXPECT_EQ(completion["choices"][0]["logprobs"]["top_logprobs"][0].size(), 2u);
}

}  // namespace
}  // namespace df11::server
