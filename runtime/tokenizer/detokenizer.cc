// Streaming detokenization (see detokenizer.h).
#include "runtime/tokenizer/detokenizer.h"

#include <algorithm>

#include "runtime/tokenizer/impl.h"

namespace df11 {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::Push(int32_t id) {
  const tokenizer_internal::TokenizerImpl& impl = tokenizer_.impl();
  std::optional<std::string_view> token = impl.DecodedToken(id, skip_special_tokens_);
  if (!token) return "";
  window_.emplace_back(*token);
  if (!streamable_) return "";
  tokenizer_internal::DecodeState state;
  std::string text = impl.DecodeWindow(window_, {window_at_start_, /*at_end=*/false}, state);
  if (!state.streamable) {
    streamable_ = false;
    return "";
  }
  // NOTE: decoders guarantee `text` extends what was decoded from this window before.
  std::string fresh = text.size() > emitted_ ? text.substr(emitted_) : std::string();
  emitted_ = std::max(emitted_, text.size());
  if (!state.held) {  // nothing pending: later tokens cannot change this window's text
    window_.clear();
    window_at_start_ = false;
    emitted_ = 0;
  }
  return fresh;
}

std::string IncrementalDetokenizer::Flush() {
  const tokenizer_internal::TokenizerImpl& impl = tokenizer_.impl();
  tokenizer_internal::DecodeState state;
  std::string text = impl.DecodeWindow(window_, {window_at_start_, /*at_end=*/true}, state);
  std::string rest = text.size() > emitted_ ? text.substr(emitted_) : std::string();
  window_.clear();
  window_at_start_ = true;
  emitted_ = 0;
  return rest;
}

}  // namespace df11
