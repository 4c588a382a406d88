// Test helpers for anything that serves a model (scheduler, server, metrics tests), header-only:
//   - ScopedTempDir: a fresh directory under the system temp dir, removed (recursively) on scope exit;
//   - WriteTinyModel: a random-weight tiny checkpoint (runtime/format/random_model.h preset, BF16) plus the
//     hand-written tokenizer of tests/fixtures/tiny-tokenizer/ (byte-level BPE, 331 ids, ChatML
//     template, eos "<|im_end|>") into one directory, with the model's vocab equal to the
//     tokenizer's so every generated id decodes to text.
// Needs DF11_TEST_FIXTURES (defined for every tests/<layer> binary by tests/CMakeLists.txt).
// Usage:
//   df11::ScopedTempDir tmp("server");
//   ASSERT_TRUE(df11::WriteTinyModel(tmp.path() + "/m").ok());
//   // -> engine.LoadModel({.name = "tiny", .path = tmp.path() + "/m"})
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>

#include "kernels/base/status.h"
#include "runtime/format/random_model.h"

namespace df11 {

// Ids of the tiny tokenizer (tests/fixtures/tiny-tokenizer/README.md).
inline constexpr int64_t kTinyTokenizerVocab = 331;  // 256 bytes + 72 merges + 3 added tokens
inline constexpr int32_t kTinyEndOfText = 328;       // "<|endoftext|>"
inline constexpr int32_t kTinyImStart = 329;         // "<|im_start|>"
inline constexpr int32_t kTinyImEnd = 330;           // "<|im_end|>" (eos_token)

inline std::string TinyTokenizerDir() { return std::string(DF11_TEST_FIXTURES) + "/tiny-tokenizer"; }

// A unique empty directory; removed with everything in it when the object goes away.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& tag = "df11") {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            (tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

struct TinyModelOptions {
  std::string preset = "qwen3-tiny";  // or "llama-tiny", any *-tiny preset of random_model.h
  uint32_t seed = 1;                  // different seeds give different weights (and outputs)
  bool tokenizer = true;              // copy the tiny tokenizer's files into the directory
};

// Writes config.json + model.safetensors (+ tokenizer.json, tokenizer_config.json,
// generation_config.json) into `dir` (created).
inline Status WriteTinyModel(const std::string& dir, const TinyModelOptions& options = {}) {
  RandomModelOptions random;
  random.seed = options.seed;
  random.vocab_size = kTinyTokenizerVocab;
  DF11_RETURN_IF_ERROR(WriteRandomModel(options.preset, dir, random));
  if (!options.tokenizer) return Status::Ok();
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    std::error_code ec;
    std::filesystem::copy_file(TinyTokenizerDir() + "/" + name, dir + "/" + name,
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return Internal(dir + "/" + name + ": copy failed: " + ec.message());
  }
  return Status::Ok();
}

}  // namespace df11
