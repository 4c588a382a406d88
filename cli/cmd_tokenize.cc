// `df11 tokenize DIR`: text -> ids (or ids -> text with --decode) with a model directory's
// tokenizer, one stdin line at a time, for checking the tokenizer against Hugging Face.
//   encode: each line is the text (with --json: a JSON string literal, so any text can be given);
//           prints the ids separated by spaces.
//   decode: each line is ids separated by spaces; prints the text (with --json: as a JSON string).
// --no-special: encode without the post-processor's special tokens / decode skipping special ids.
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/command.h"
#include "runtime/tokenizer/tokenizer.h"

namespace df11::cli {
namespace {

struct TokenizeOptions {
  std::string dir;
  bool json = false;
  bool no_special = false;
  bool decode = false;
};

std::string LineError(size_t line, const std::string& what) { return "line " + std::to_string(line) + ": " + what; }

void EncodeLines(const Tokenizer& tok, const TokenizeOptions& opts) {
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    std::string text = line;
    if (opts.json) {
      nlohmann::json value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!value.is_string()) throw CommandFailed(1, LineError(n, "expected a JSON string literal"));
      text = value.get<std::string>();
    }
    StatusOr<std::vector<int32_t>> ids = tok.Encode(text, !opts.no_special);
    if (!ids.ok()) throw CommandFailed(1, LineError(n, ids.status().ToString()));
    std::string out;
    for (size_t i = 0; i < ids->size(); ++i) {
      if (i > 0) out += ' ';
      out += std::to_string((*ids)[i]);
    }
    std::cout << out << '\n';
  }
}

void DecodeLines(const Tokenizer& tok, const TokenizeOptions& opts) {
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    std::istringstream in(line);
    std::vector<int32_t> ids;
    std::string word;
    while (in >> word) {
      size_t used = 0;
      long long id = 0;
      try {
        id = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != word.size() || id < INT32_MIN || id > INT32_MAX) {
        throw CommandFailed(1, LineError(n, "\"" + word + "\" is not a token id"));
      }
      ids.push_back(static_cast<int32_t>(id));
    }
    std::string text = tok.Decode(ids, opts.no_special);
    if (opts.json) {
      std::cout << nlohmann::json(text).dump() << '\n';
    } else {
      std::cout << text << '\n';
    }
  }
}

void RegisterTokenize(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode stdin lines to token ids (or decode ids with --decode)");
  cmd->add_option("dir", opts->dir, "Model directory with tokenizer.json and tokenizer_config.json")->required();
  cmd->add_flag("--json", opts->json, "Lines are JSON string literals (encode input / decode output)");
  cmd->add_flag("--no-special", opts->no_special,
                "Encode without the special tokens the post-processor adds; decode skipping special tokens");
  cmd->add_flag("--decode", opts->decode, "Read lines of space-separated ids and print their text");
  cmd->callback([opts] {
    std::unique_ptr<Tokenizer> tok = Check(Tokenizer::Load(opts->dir));
    if (opts->decode) {
      DecodeLines(*tok, *opts);
    } else {
      EncodeLines(*tok, *opts);
    }
    std::cout.flush();
  });
}

}  // namespace
}  // namespace df11::cli

DF11_REGISTER_COMMAND(df11::cli::RegisterTokenize);
