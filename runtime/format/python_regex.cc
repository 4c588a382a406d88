// Python re.fullmatch on Oniguruma (see python_regex.h).
#include "runtime/format/python_regex.h"

#include <oniguruma.h>

#include "runtime/format/onig_init.h"

namespace df11 {
namespace {
constexpr unsigned long kRetryLimit = 100000;  // backtracking steps per match
}  // namespace

StatusOr<std::shared_ptr<const PythonRegex>> PythonRegex::Compile(const std::string& pattern) {
  EnsureOnigInitialized();
  // fullmatch: the pattern must end exactly at the end of the subject.
  const std::string anchored = "(?:" + pattern + ")\\Z";
  OnigRegex regex = nullptr;
  OnigErrorInfo info;
  const auto* p = reinterpret_cast<const OnigUChar*>(anchored.data());
  const int r = onig_new(&regex, p, p + anchored.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_PYTHON, &info);
  if (r != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &info);
    return InvalidArgument("regex \"" + pattern + "\": " + reinterpret_cast<char*>(msg));
  }
  return std::shared_ptr<const PythonRegex>(new PythonRegex(regex, pattern));
}

PythonRegex::~PythonRegex() { onig_free(static_cast<OnigRegex>(regex_)); }

StatusOr<bool> PythonRegex::FullMatch(std::string_view text) const {
  const auto* s = reinterpret_cast<const OnigUChar*>(text.data());
  OnigMatchParam* param = onig_new_match_param();
  onig_initialize_match_param(param);
  onig_set_retry_limit_in_match_of_match_param(param, kRetryLimit);
  const int r = onig_match_with_param(static_cast<OnigRegex>(regex_), s, s + text.size(), s, nullptr,
                                      ONIG_OPTION_NONE, param);
  onig_free_match_param(param);
  if (r >= 0) return static_cast<size_t>(r) == text.size();
  if (r == ONIG_MISMATCH) return false;
  return InvalidArgument("regex \"" + pattern_ + "\" is too expensive to match against \"" + std::string(text) + "\"");
}

}  // namespace df11
