// ChatTemplate: transformers' apply_chat_template variables on top of the Jinja engine.
#include "runtime/template/chat_template.h"

#include <algorithm>

#include "runtime/format/model_dir.h"
#include "runtime/template/jinja/json.h"

namespace df11 {
namespace {

// A special token in tokenizer_config.json: "text", {"content": "text", ...} or null.
std::optional<std::string> TokenText(const nlohmann::json& token) {
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object()) {
    auto c = token.find("content");
    if (c != token.end() && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

// transformers' SPECIAL_TOKENS_ATTRIBUTES (additional_special_tokens handled separately).
constexpr const char* kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

void SetSpecialTokens(const nlohmann::json& config, ChatTemplate* t) {
  for (const char* name : kSpecialTokens) {
    if (auto it = config.find(name); it != config.end()) t->set_special_token(name, TokenText(*it));
  }
  std::vector<std::string> additional;
  if (auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array()) {
    for (const auto& token : *it) {
      if (auto text = TokenText(token)) additional.push_back(*text);
    }
  }
  t->set_additional_special_tokens(std::move(additional));
}

}  // namespace

void ChatTemplate::set_special_token(const std::string& name, std::optional<std::string> text) {
  auto it = std::find_if(special_tokens_.begin(), special_tokens_.end(), [&](const auto& e) { return e.first == name; });
  if (it != special_tokens_.end()) special_tokens_.erase(it);
  // transformers' special_tokens_map leaves out unset and empty tokens.
  if (text && !text->empty()) special_tokens_.emplace_back(name, std::move(*text));
}

std::optional<std::string> ChatTemplate::special_token(const std::string& name) const {
  for (const auto& [n, text] : special_tokens_) {
    if (n == name) return text;
  }
  return std::nullopt;
}

StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source) {
  DF11_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::Parse(source));
  ChatTemplate ct;
  ct.source_ = std::move(source);
  ct.template_ = std::move(t);
  return ct;
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& messages, bool add_generation_prompt,
                                           const nlohmann::json& extra_vars) const {
  DF11_ASSIGN_OR_RETURN(jinja::Value m, jinja::FromJson(messages));
  DF11_ASSIGN_OR_RETURN(jinja::Value extra, jinja::FromJson(extra_vars));
  return RenderValues(std::move(m), add_generation_prompt, extra);
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                           const nlohmann::ordered_json& extra_vars) const {
  DF11_ASSIGN_OR_RETURN(jinja::Value m, jinja::FromJson(messages));
  DF11_ASSIGN_OR_RETURN(jinja::Value extra, jinja::FromJson(extra_vars));
  return RenderValues(std::move(m), add_generation_prompt, extra);
}

StatusOr<std::string> ChatTemplate::RenderValues(jinja::Value messages, bool add_generation_prompt,
                                                 const jinja::Value& extra_vars) const {
  if (!messages.is_list()) return InvalidArgument("chat messages must be a JSON array");
  if (!extra_vars.is_dict()) return InvalidArgument("chat template variables must be a JSON object");
  // Same variables, in the same override order, as transformers' apply_chat_template.
  jinja::Dict vars;
  for (const auto& [name, text] : special_tokens_) vars.Set(jinja::Value(name), jinja::Value(text));
  if (!additional_special_tokens_.empty()) {
    std::vector<jinja::Value> tokens(additional_special_tokens_.begin(), additional_special_tokens_.end());
    vars.Set(jinja::Value("additional_special_tokens"), jinja::Value::List(std::move(tokens)));
  }
  vars.Set(jinja::Value("tools"), jinja::Value::None());
  vars.Set(jinja::Value("documents"), jinja::Value::None());
  for (const auto& [k, v] : extra_vars.dict().entries()) vars.Set(k, v);
  vars.Set(jinja::Value("messages"), std::move(messages));
  vars.Set(jinja::Value("add_generation_prompt"), jinja::Value(add_generation_prompt));
  return template_.Render(vars, options_);
}

StatusOr<ChatTemplate> LoadChatTemplate(const std::string& model_dir, const std::string& name) {
  const std::string config_path = ModelDirPath(model_dir, "tokenizer_config.json");
  DF11_ASSIGN_OR_RETURN(std::optional<std::string> config_text, ReadOptionalModelDirFile(model_dir, "tokenizer_config.json"));
  nlohmann::json config = nlohmann::json::object();
  if (config_text) {
    config = nlohmann::json::parse(*config_text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) return InvalidArgument(config_path + ": not a JSON object");
  }
  // As in transformers, a chat_template.jinja file takes priority over the config entry.
  std::optional<std::string> source;
  if (name == "default") {
    DF11_ASSIGN_OR_RETURN(source, ReadOptionalModelDirFile(model_dir, "chat_template.jinja"));
  }
  if (auto it = config.find("chat_template"); !source && it != config.end()) {
    if (it->is_string()) {
      if (name == "default") source = it->get<std::string>();
    } else if (it->is_array()) {
      for (const auto& entry : *it) {
        if (entry.is_object() && entry.contains("name") && entry["name"].is_string() &&
            entry["name"].get<std::string>() == name && entry.contains("template") && entry["template"].is_string()) {
          source = entry["template"].get<std::string>();
        }
      }
    } else if (!it->is_null()) {
      return InvalidArgument(config_path + ": chat_template must be a string or a list of {name, template}");
    }
  }
  if (!source) return NotFound(model_dir + ": no chat template named '" + name + "' (tokenizer_config.json or chat_template.jinja)");
  StatusOr<ChatTemplate> t = ChatTemplate::Parse(std::move(*source));
  if (!t.ok()) return t.status().WithContext(model_dir + " chat template");
  SetSpecialTokens(config, &*t);
  return t;
}

}  // namespace df11
