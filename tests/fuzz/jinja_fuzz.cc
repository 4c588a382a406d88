// libFuzzer target: parse and render arbitrary template bytes against a fixed conversation.
// Any input must give a result or a Status: no crash, sanitizer report, stack overflow or hang.
// Limits are tightened so each input runs in milliseconds.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/template/jinja/json.h"
#include "runtime/template/jinja/template.h"

namespace {

const df11::jinja::Dict& Vars() {
  static const df11::jinja::Dict* vars = [] {
    auto j = nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What's the weather in Paris? <tool_response>x</tool_response>"},
        {"role": "assistant", "content": "<think>\nLook it up.\n</think>\n\nChecking.", "reasoning_content": null,
         "tool_calls": [{"id": "abc123XYZ", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 2.5}}}]},
        {"role": "tool", "tool_call_id": "abc123XYZ", "content": "{\"t\": 21}"},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " héllo ß 日本 "}]}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
      "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>",
      "n": 3, "f": -1.5, "xs": [3, 1, 2], "d": {"b": 1, "a": [true, null]}
    })");
    return new df11::jinja::Dict(df11::jinja::FromJson(j).value().dict());
  }();
  return *vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  auto t = df11::jinja::Template::Parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!t.ok()) return 0;
  df11::jinja::RenderOptions options;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_string_bytes = 1 << 20;
  options.limits.max_loop_iterations = 20000;
  options.limits.max_steps = 200000;
  options.limits.max_call_depth = 32;
  options.now = [] { return std::tm{}; };
  auto out = t->Render(Vars(), options);
  (void)out;
  return 0;
}
