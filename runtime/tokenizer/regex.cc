// Oniguruma wrapper of the tokenizer (see regex.h).
#include "runtime/tokenizer/regex.h"

#include <oniguruma.h>

#include "runtime/format/onig_init.h"
#include "runtime/tokenizer/unicode.h"

namespace df11::tokenizer_internal {
namespace {

// One match region per thread, reused across searches.
struct RegionHolder {
  OnigRegion* region = onig_region_new();
  ~RegionHolder() { onig_region_free(region, 1); }
};
OnigRegion* ThreadRegion() {
  thread_local RegionHolder holder;
  return holder.region;
}

}  // namespace

StatusOr<std::shared_ptr<const Regex>> Regex::Compile(std::string_view pattern) {
  EnsureOnigInitialized();
  OnigRegex regex = nullptr;
  OnigErrorInfo info;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  int rc = onig_new(&regex, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, rc, &info);
    return InvalidArgument("invalid regex /" + std::string(pattern) + "/: " + reinterpret_cast<char*>(message));
  }
  return std::shared_ptr<const Regex>(new Regex(regex));
}

Regex::~Regex() { onig_free(static_cast<OnigRegex>(regex_)); }

void Regex::FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  auto regex = static_cast<OnigRegex>(regex_);
  OnigRegion* region = ThreadRegion();
  const auto* begin = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = begin + text.size();
  size_t search_from = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (search_from <= text.size()) {
    onig_region_clear(region);
    int rc = onig_search(regex, begin, end, begin + search_from, end, region, ONIG_OPTION_NONE);
    if (rc < 0) return;  // ONIG_MISMATCH (or a search error: treated as no more matches)
    auto start = static_cast<size_t>(region->beg[0]);
    auto stop = static_cast<size_t>(region->end[0]);
    if (start == stop && have_last && last_match_end == stop) {
      // An empty match right after the previous one: step over one character.
      search_from += search_from < text.size() ? Utf8SequenceLength(static_cast<unsigned char>(text[search_from])) : 1;
      continue;
    }
    search_from = stop;
    have_last = true;
    last_match_end = stop;
    out.emplace_back(start, stop);
  }
}

bool Regex::Search(std::string_view text) const {
  auto regex = static_cast<OnigRegex>(regex_);
  OnigRegion* region = ThreadRegion();
  const auto* begin = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = begin + text.size();
  onig_region_clear(region);
  return onig_search(regex, begin, end, begin, end, region, ONIG_OPTION_NONE) >= 0;
}

}  // namespace df11::tokenizer_internal
