// Chat templates: renders a model's Jinja chat template (tokenizer_config.json "chat_template"
// or chat_template.jinja) for a list of messages, byte-for-byte as Hugging Face transformers'
// apply_chat_template(tokenize=False) does, using the Jinja engine in runtime/template/jinja/.
//
// Variables seen by the template, in override order: the tokenizer's special tokens (like
// transformers' special_tokens_map: bos_token, eos_token, unk_token, sep_token, pad_token,
// cls_token, mask_token, additional_special_tokens; unset or empty ones stay undefined), then
// tools=None and documents=None, then `extra_vars` (enable_thinking, tools, date_string, ...),
// then messages and add_generation_prompt.
//
// Thread-safety: a ChatTemplate is immutable after Parse/Load; Render is safe to call
// concurrently.
#pragma once

#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/template/jinja/template.h"

namespace df11 {

class ChatTemplate {
 public:
  // Parses a template. INVALID_ARGUMENT (syntax) or UNIMPLEMENTED (unsupported construct),
  // with line/column.
  static StatusOr<ChatTemplate> Parse(std::string source);

  // Renders `messages` (a JSON array of {"role", "content", ...}). Pass nlohmann::ordered_json
  // where key order matters (tool schemas printed with `tojson`): nlohmann::json sorts keys.
  // Errors: INVALID_ARGUMENT for template failures (raise_exception(msg) yields exactly msg),
  // UNIMPLEMENTED for unsupported operations, RESOURCE_EXHAUSTED for runaway templates.
  StatusOr<std::string> Render(const nlohmann::json& messages, bool add_generation_prompt,
                               const nlohmann::json& extra_vars = nlohmann::json::object()) const;
  StatusOr<std::string> Render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                               const nlohmann::ordered_json& extra_vars = nlohmann::ordered_json::object()) const;

  // Special tokens exposed to the template by name ("bos_token", "pad_token", ...); nullopt or
  // "" removes one. additional_special_tokens is a list (empty: undefined).
  void set_special_token(const std::string& name, std::optional<std::string> text);
  void set_additional_special_tokens(std::vector<std::string> tokens) { additional_special_tokens_ = std::move(tokens); }
  std::optional<std::string> special_token(const std::string& name) const;
  void set_bos_token(std::optional<std::string> t) { set_special_token("bos_token", std::move(t)); }
  void set_eos_token(std::optional<std::string> t) { set_special_token("eos_token", std::move(t)); }
  std::optional<std::string> bos_token() const { return special_token("bos_token"); }
  std::optional<std::string> eos_token() const { return special_token("eos_token"); }
  const std::string& source() const { return source_; }

  // Clock for strftime_now() (tests inject a fixed time); default: local time now.
  void set_clock(std::function<std::tm()> clock) { options_.now = std::move(clock); }
  void set_limits(const jinja::RenderLimits& limits) { options_.limits = limits; }

 private:
  StatusOr<std::string> RenderValues(jinja::Value messages, bool add_generation_prompt,
                                     const jinja::Value& extra_vars) const;

  std::string source_;
  jinja::Template template_;
  std::vector<std::pair<std::string, std::string>> special_tokens_;  // name -> text, non-empty
  std::vector<std::string> additional_special_tokens_;
  jinja::RenderOptions options_;
};

// Loads the chat template of a model directory as transformers does: chat_template.jinja if
// present, else tokenizer_config.json "chat_template" (a string, or a list of
// {"name", "template"} from which `name` is used; transformers picks "tool_use" when tools
// are passed and the model has one). Special tokens come from tokenizer_config.json (strings
// or {"content": ...} objects). NOT_FOUND if there is no such template.
StatusOr<ChatTemplate> LoadChatTemplate(const std::string& model_dir, const std::string& name = "default");

}  // namespace df11
