// PythonRegex: a Python `re` pattern (as pattern_dict keys are written) matched with Python's
// re.fullmatch semantics, on Oniguruma's Python syntax with a backtracking limit, so a hostile
// pattern fails with an error instead of hanging. Thread-safe after Compile.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kernels/base/status.h"

namespace df11 {

class PythonRegex {
 public:
  // INVALID_ARGUMENT naming the pattern when it does not compile.
  static StatusOr<std::shared_ptr<const PythonRegex>> Compile(const std::string& pattern);
  ~PythonRegex();
  PythonRegex(const PythonRegex&) = delete;
  PythonRegex& operator=(const PythonRegex&) = delete;

  // True when the whole of `text` matches; INVALID_ARGUMENT when matching exceeds the
  // backtracking limit.
  StatusOr<bool> FullMatch(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  PythonRegex(void* regex, std::string pattern) : regex_(regex), pattern_(std::move(pattern)) {}
  void* regex_;  // OnigRegex
  std::string pattern_;
};

}  // namespace df11
