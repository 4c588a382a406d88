// `df11 chat-template DIR --messages FILE.json [--add-generation-prompt] [--var key=value]...`:
// renders a model directory's chat template for a JSON list of messages and prints the prompt
// exactly as transformers' apply_chat_template(tokenize=False) would. Each --var value is
// parsed as JSON when it parses (true, 3, ["a"], {"k": 1}), else taken as a string.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "runtime/template/chat_template.h"

namespace df11::cli {
namespace {

struct ChatTemplateOptions {
  std::string dir;
  std::string messages_path;
  bool add_generation_prompt = false;
  std::vector<std::string> vars;
  std::string template_name = "default";
};

nlohmann::ordered_json ReadMessages(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CommandFailed(1, "cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  // ordered_json keeps the key order of tool schemas, which `tojson` prints.
  nlohmann::ordered_json messages = nlohmann::ordered_json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (messages.is_discarded()) throw CommandFailed(1, path + ": not valid JSON");
  if (!messages.is_array()) throw CommandFailed(1, path + ": expected a JSON array of messages");
  return messages;
}

nlohmann::ordered_json ParseVars(const std::vector<std::string>& vars) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const std::string& kv : vars) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw CommandFailed(2, "--var expects key=value, got \"" + kv + "\"");
    std::string value = kv.substr(eq + 1);
    nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(value, nullptr, /*allow_exceptions=*/false);
    out[kv.substr(0, eq)] = parsed.is_discarded() ? nlohmann::ordered_json(value) : parsed;
  }
  return out;
}

void RunChatTemplate(const ChatTemplateOptions& opts) {
  nlohmann::ordered_json vars = ParseVars(opts.vars);
  nlohmann::ordered_json messages = ReadMessages(opts.messages_path);
  ChatTemplate tmpl = Check(LoadChatTemplate(opts.dir, opts.template_name));
  std::string prompt = Check(tmpl.Render(messages, opts.add_generation_prompt, vars));
  std::cout << prompt << std::flush;
}

void RegisterChatTemplate(CLI::App& app) {
  auto opts = std::make_shared<ChatTemplateOptions>();
  CLI::App* cmd = app.add_subcommand("chat-template", "Render a model's chat template for a list of messages");
  cmd->add_option("dir", opts->dir, "Model directory with tokenizer_config.json or chat_template.jinja")->required();
  cmd->add_option("--messages", opts->messages_path, "JSON file with a list of {role, content, ...} messages")->required();
  cmd->add_flag("--add-generation-prompt", opts->add_generation_prompt, "Append the assistant turn header");
  cmd->add_option("--var", opts->vars, "Template variable key=value (JSON if it parses, else a string); repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--template", opts->template_name, "Named template when the config has several (default: \"default\")");
  cmd->callback([opts] { RunChatTemplate(*opts); });
}

}  // namespace

DF11_REGISTER_COMMAND(RegisterChatTemplate);

}  // namespace df11::cli
