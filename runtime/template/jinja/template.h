// Public entry point of the Jinja engine: parse once, render many times (thread-safe).
// Semantics are those of jinja2 3.1 in transformers' chat-template environment; see
// runtime/template/chat_template.h for the chat-specific API.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/template/jinja/interp.h"

namespace df11::jinja {

class Template {
 public:
  // INVALID_ARGUMENT for syntax errors, UNIMPLEMENTED for valid Jinja we do not support;
  // messages carry the line and column.
  static StatusOr<Template> Parse(std::string_view source);

  // Renders with `vars` as the template's variables. Errors carry the line/column of the
  // failing construct, except raise_exception(msg), whose status message is exactly msg.
  StatusOr<std::string> Render(const Dict& vars, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const Stmt> root_;
};

}  // namespace df11::jinja
