// OpenAI JSON -> proto GenerateRequest (see openai_request.h).
#include "server/openai_request.h"

#include <limits>
#include <nlohmann/json.hpp>

namespace df11::server {
namespace {

using Json = nlohmann::json;

Status Bad(const std::string& param, const std::string& what) { return InvalidArgument(param + ": " + what); }

std::string TypeName(const Json& v) { return v.type_name(); }

// Each getter leaves `out` alone when the key is absent or null (OpenAI clients send nulls).
const Json* Find(const Json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

Status GetBool(const Json& body, const char* key, bool* out) {
  const Json* v = Find(body, key);
  if (v == nullptr) return Status();
  if (!v->is_boolean()) return Bad(key, "expected a boolean, got " + TypeName(*v));
  *out = v->get<bool>();
  return Status();
}

Status GetInt(const Json& v, const std::string& param, int64_t* out) {
  if (!v.is_number_integer()) return Bad(param, "expected an integer, got " + TypeName(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Bad(param, "integer out of range");
  }
  *out = v.get<int64_t>();
  return Status();
}

Status GetNumber(const Json& body, const char* key, std::optional<double>* out) {
  const Json* v = Find(body, key);
  if (v == nullptr) return Status();
  if (!v->is_number()) return Bad(key, "expected a number, got " + TypeName(*v));
  *out = v->get<double>();
  return Status();
}

Status GetString(const Json& v, const std::string& param, std::string* out) {
  if (!v.is_string()) return Bad(param, "expected a string, got " + TypeName(v));
  *out = v.get<std::string>();
  return Status();
}

Status Sampling(const Json& body, pb::SamplingParams* s) {
  const std::pair<const char*, void (pb::SamplingParams::*)(float)> kFloats[] = {
      {"temperature", &pb::SamplingParams::set_temperature},
      {"top_p", &pb::SamplingParams::set_top_p},
      {"min_p", &pb::SamplingParams::set_min_p},
      {"presence_penalty", &pb::SamplingParams::set_presence_penalty},
      {"frequency_penalty", &pb::SamplingParams::set_frequency_penalty},
      {"repetition_penalty", &pb::SamplingParams::set_repetition_penalty},
  };
  for (const auto& [key, setter] : kFloats) {
    std::optional<double> value;
    DF11_RETURN_IF_ERROR(GetNumber(body, key, &value));
    if (value) (s->*setter)(static_cast<float>(*value));  // out of float range -> inf: refused by the translation
  }
  if (const Json* v = Find(body, "top_k")) {
    int64_t k = 0;
    DF11_RETURN_IF_ERROR(GetInt(*v, "top_k", &k));
    if (k != -1) s->set_top_k(k);  // -1: no top-k (vLLM's convention)
  }
  if (const Json* v = Find(body, "seed")) {
    int64_t seed = 0;
    DF11_RETURN_IF_ERROR(GetInt(*v, "seed", &seed));
    s->set_seed(static_cast<uint64_t>(seed));
  }
  return Status();
}

Status Stops(const Json& body, pb::GenerateRequest* out) {
  if (const Json* v = Find(body, "stop")) {
    if (v->is_string()) {
      out->add_stop(v->get<std::string>());
    } else if (v->is_array()) {
      for (size_t i = 0; i < v->size(); ++i) DF11_RETURN_IF_ERROR(GetString((*v)[i], "stop[" + std::to_string(i) + "]", out->add_stop()));
    } else {
      return Bad("stop", "expected a string or a list of strings, got " + TypeName(*v));
    }
  }
  if (const Json* v = Find(body, "stop_token_ids")) {
    if (!v->is_array()) return Bad("stop_token_ids", "expected a list of integers, got " + TypeName(*v));
    for (size_t i = 0; i < v->size(); ++i) {
      int64_t id = 0;
      const std::string param = "stop_token_ids[" + std::to_string(i) + "]";
      DF11_RETURN_IF_ERROR(GetInt((*v)[i], param, &id));
      if (id < 0 || id > std::numeric_limits<int32_t>::max()) return Bad(param, "must be a token id >= 0");
      out->add_stop_token_ids(static_cast<int32_t>(id));
    }
  }
  return Status();
}

// Features this server does not have: a clear 400 rather than a silently different answer.
Status Unsupported(const Json& body) {
  for (const char* key : {"n", "best_of"}) {
    if (const Json* v = Find(body, key)) {
      if (!v->is_number_integer() || v->get<int64_t>() != 1) return Bad(key, "only 1 is supported");
    }
  }
  for (const char* key : {"tools", "functions", "logit_bias"}) {
    if (const Json* v = Find(body, key); v != nullptr && !v->empty()) return Bad(key, "not supported by this server");
  }
  if (const Json* v = Find(body, "response_format")) {
    const Json* type = v->is_object() ? Find(*v, "type") : nullptr;
    if (!v->is_object() || (type != nullptr && *type != "text")) {
      return Bad("response_format", "only {\"type\": \"text\"} is supported");
    }
  }
  if (const Json* v = Find(body, "echo"); v != nullptr && *v != false) return Bad("echo", "not supported by this server");
  if (const Json* v = Find(body, "suffix"); v != nullptr && *v != "") return Bad("suffix", "not supported by this server");
  return Status();
}

// content: a string, or a list of {"type": "text", "text": ...} parts (joined).
Status MessageContent(const Json& content, const std::string& param, std::string* out) {
  if (content.is_null()) return Status();
  if (content.is_string()) {
    *out = content.get<std::string>();
    return Status();
  }
  if (!content.is_array()) return Bad(param, "expected a string or a list of text parts, got " + TypeName(content));
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string part = param + "[" + std::to_string(j) + "]";
    const Json& p = content[j];
    if (!p.is_object()) return Bad(part, "expected an object, got " + TypeName(p));
    if (const Json* type = Find(p, "type"); type == nullptr || *type != "text") {
      return Bad(part + ".type", "only \"text\" parts are supported");
    }
    if (!p.contains("text")) return Bad(part + ".text", "required");
    std::string text;
    DF11_RETURN_IF_ERROR(GetString(p["text"], part + ".text", &text));
    *out += text;
  }
  return Status();
}

Status ChatInput(const Json& body, pb::GenerateRequest* out) {
  const Json* messages = Find(body, "messages");
  if (messages == nullptr) return Bad("messages", "required");
  if (!messages->is_array()) return Bad("messages", "expected a list of messages, got " + TypeName(*messages));
  pb::ChatInput* chat = out->mutable_chat();
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string param = "messages[" + std::to_string(i) + "]";
    const Json& m = (*messages)[i];
    if (!m.is_object()) return Bad(param, "expected an object, got " + TypeName(m));
    pb::ChatMessage* message = chat->add_messages();
    if (!m.contains("role")) return Bad(param + ".role", "required");
    DF11_RETURN_IF_ERROR(GetString(m["role"], param + ".role", message->mutable_role()));
    if (m.contains("content")) DF11_RETURN_IF_ERROR(MessageContent(m["content"], param + ".content", message->mutable_content()));
  }
  if (const Json* v = Find(body, "chat_template_kwargs")) {
    if (!v->is_object()) return Bad("chat_template_kwargs", "expected an object, got " + TypeName(*v));
    chat->set_template_vars_json(v->dump());
  }
  bool continue_final = false, add_generation_prompt = true;
  DF11_RETURN_IF_ERROR(GetBool(body, "continue_final_message", &continue_final));
  DF11_RETURN_IF_ERROR(GetBool(body, "add_generation_prompt", &add_generation_prompt));
  chat->set_continue_final_message(continue_final || !add_generation_prompt);
  chat->set_add_generation_prompt(add_generation_prompt && !continue_final);
  bool logprobs = false;
  DF11_RETURN_IF_ERROR(GetBool(body, "logprobs", &logprobs));
  out->set_logprobs(logprobs);
  if (const Json* v = Find(body, "top_logprobs")) {
    int64_t n = 0;
    DF11_RETURN_IF_ERROR(GetInt(*v, "top_logprobs", &n));
    if (n < 0 || n > std::numeric_limits<int32_t>::max()) return Bad("top_logprobs", "must be in [0, 20], got " + std::to_string(n));
    out->set_top_logprobs(static_cast<int32_t>(n));
  }
  return Status();
}

Status TokenIds(const Json& ids, const std::string& param, pb::TokenIds* out) {
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t id = 0;
    const std::string p = param + "[" + std::to_string(i) + "]";
    DF11_RETURN_IF_ERROR(GetInt(ids[i], p, &id));
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) return Bad(p, "must be a token id >= 0, got " + std::to_string(id));
    out->add_ids(static_cast<int32_t>(id));
  }
  return Status();
}

// prompt: "text", [ids...], ["text"] or [[ids...]]; several prompts in one request are refused.
Status CompletionInput(const Json& body, pb::GenerateRequest* out) {
  const Json* prompt = Find(body, "prompt");
  if (prompt == nullptr) return Bad("prompt", "required");
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    prompt = &(*prompt)[0];
  }
  if (prompt->is_string()) {
    out->set_text(prompt->get<std::string>());
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    DF11_RETURN_IF_ERROR(TokenIds(*prompt, "prompt", out->mutable_tokens()));
  } else if (prompt->is_array() && prompt->size() > 1) {
    return Bad("prompt", "several prompts in one request are not supported; send one request per prompt");
  } else {
    return Bad("prompt", "expected a string or a list of token ids");
  }
  if (const Json* v = Find(body, "logprobs")) {
    int64_t n = 0;
    DF11_RETURN_IF_ERROR(GetInt(*v, "logprobs", &n));
    if (n < 0 || n > std::numeric_limits<int32_t>::max()) return Bad("logprobs", "must be in [0, 20], got " + std::to_string(n));
    out->set_logprobs(true);
    out->set_top_logprobs(static_cast<int32_t>(n));
  }
  return Status();
}

Status Limits(const Json& body, pb::GenerateRequest* out) {
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {  // the second wins
    if (const Json* v = Find(body, key)) {
      int64_t n = 0;
      DF11_RETURN_IF_ERROR(GetInt(*v, key, &n));
      out->set_max_tokens(n);
    }
  }
  bool ignore_eos = false, skip_special = true;
  DF11_RETURN_IF_ERROR(GetBool(body, "ignore_eos", &ignore_eos));
  DF11_RETURN_IF_ERROR(GetBool(body, "skip_special_tokens", &skip_special));
  out->set_ignore_eos(ignore_eos);
  if (!skip_special) out->set_skip_special_tokens(false);
  if (const Json* v = Find(body, "priority")) {
    int64_t p = 0;
    DF11_RETURN_IF_ERROR(GetInt(*v, "priority", &p));
    if (p < std::numeric_limits<int32_t>::min() || p > std::numeric_limits<int32_t>::max()) return Bad("priority", "out of range");
    out->set_priority(static_cast<int32_t>(p));
  }
  return Status();
}

StatusOr<OpenAiRequest> ParseBody(OpenAiEndpoint endpoint, const Json& body) {
  if (!body.is_object()) return InvalidArgument("request body: expected a JSON object, got " + TypeName(body));
  OpenAiRequest r;
  r.endpoint = endpoint;
  const Json* model = Find(body, "model");
  if (model == nullptr) return Bad("model", "required");
  DF11_RETURN_IF_ERROR(GetString(*model, "model", r.generate.mutable_model()));
  DF11_RETURN_IF_ERROR(Unsupported(body));
  DF11_RETURN_IF_ERROR(endpoint == OpenAiEndpoint::kChat ? ChatInput(body, &r.generate) : CompletionInput(body, &r.generate));
  DF11_RETURN_IF_ERROR(Sampling(body, r.generate.mutable_sampling()));
  DF11_RETURN_IF_ERROR(Stops(body, &r.generate));
  DF11_RETURN_IF_ERROR(Limits(body, &r.generate));
  DF11_RETURN_IF_ERROR(GetBool(body, "stream", &r.stream));
  if (const Json* v = Find(body, "stream_options")) {
    if (!v->is_object()) return Bad("stream_options", "expected an object, got " + TypeName(*v));
    if (const Json* u = Find(*v, "include_usage")) {
      if (!u->is_boolean()) return Bad("stream_options.include_usage", "expected a boolean, got " + TypeName(*u));
      r.include_usage = u->get<bool>();
    }
  }
  if (const Json* v = Find(body, "user"); v != nullptr && !v->is_string()) return Bad("user", "expected a string, got " + TypeName(*v));
  return r;
}

}  // namespace

StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view text) {
  // NOTE: nlohmann throws more than parse_error: a number literal beyond double's range is
  // out_of_range (found by tests/fuzz/server_openai_fuzz.cc). Every json exception is a 400.
  try {
    return ParseBody(endpoint, Json::parse(text));
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("request body: not valid JSON (") + e.what() + ")");
  }
}

std::string OpenAiParam(std::string_view message, OpenAiEndpoint endpoint) {
  const bool chat = endpoint == OpenAiEndpoint::kChat;
  const std::string input = chat ? "messages" : "prompt";
  const size_t end = message.find_first_of(": =");
  std::string field(message.substr(0, end));
  if (field.empty() || end == std::string_view::npos) return "";
  // An engine message about the prompt as a whole ("prompt of 900 tokens does not fit ...").
  if (field == "prompt" || field.rfind("prompt_tokens", 0) == 0) return input;
  if (field == "request" || field == "server") return "";  // "request body: ...", "server is draining"
  if (field.rfind("sampling.", 0) == 0) return field.substr(9);
  if (field == "text" || field == "input") return input;
  if (field.rfind("tokens.ids", 0) == 0) return "prompt" + field.substr(10);
  if (field == "chat.template_vars_json") return "chat_template_kwargs";
  if (field.rfind("chat.messages", 0) == 0) return field.substr(5);
  if (field == "chat") return "messages";
  if (field.rfind("stop[", 0) == 0) return "stop";
  if (field == "top_logprobs" && !chat) return "logprobs";
  // Everything else is already the OpenAI name ("max_tokens", "stop_token_ids[0]", ...), as long
  // as it looks like a parameter rather than the first word of a sentence.
  for (char c : field) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_' ||
          c == '.' || c == '[' || c == ']')) {
      return "";
    }
  }
  return field;
}

std::string OpenAiMessage(const std::string& message, OpenAiEndpoint endpoint) {
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return message;
  const std::string param = OpenAiParam(message, endpoint);
  if (param.empty() || message.find_first_of(" =") < colon) return message;
  return param + message.substr(colon);
}

}  // namespace df11::server
