// Regex: an Oniguruma regex (UTF-8, ONIG_SYNTAX_DEFAULT, ONIG_OPTION_NONE), the engine and
// settings HF `tokenizers` uses for Split/Replace patterns and the ByteLevel pre-tokenizer.
// Thread-safe: a compiled regex is searched concurrently with per-thread match regions.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/base/status.h"

namespace df11::tokenizer_internal {

class Regex {
 public:
  // INVALID_ARGUMENT with Oniguruma's message if `pattern` does not compile.
  static StatusOr<std::shared_ptr<const Regex>> Compile(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends every match (start, end) of `text` (valid UTF-8) as the Rust onig crate's
  // find_iter does: left to right, non-overlapping, an empty match right after the previous
  // match skipped by one character.
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  // True if the regex matches somewhere in `text`.
  bool Search(std::string_view text) const;

 private:
  explicit Regex(void* regex) : regex_(regex) {}
  void* regex_;  // OnigRegex
};

}  // namespace df11::tokenizer_internal
