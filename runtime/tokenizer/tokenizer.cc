// Tokenizer: Encode/Decode and accessors (see runtime/tokenizer/tokenizer.h); loading is in
// load.cc, the components in tokenizer_*.cc.
#include "runtime/tokenizer/tokenizer.h"

#include "runtime/tokenizer/impl.h"
#include "runtime/tokenizer/unicode.h"

namespace df11 {
namespace tokenizer_internal {

std::optional<std::string_view> TokenizerImpl::TokenString(int32_t id) const {
  if (const std::string* s = added.TokenString(id)) return *s;
  return model->TokenString(id);
}

std::optional<std::string_view> TokenizerImpl::DecodedToken(int32_t id, bool skip_special_tokens) const {
  std::optional<std::string_view> token = TokenString(id);
  if (!token || (skip_special_tokens && added.IsSpecialContent(*token))) return std::nullopt;
  return token;
}

std::string TokenizerImpl::DecodeWindow(std::vector<std::string> tokens, const DecodeContext& context,
                                        DecodeState& state) const {
  std::string out;
  if (decoder == nullptr) {  // HF joins the tokens with spaces
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 || !context.at_start) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  decoder->Decode(tokens, context, state);
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace tokenizer_internal

StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  using tokenizer_internal::Split;
  if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return InvalidArgument("text is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  }
  const tokenizer_internal::TokenizerImpl& t = *impl_;
  std::vector<Split> splits(1);
  splits[0].text.assign(text);
  splits[0].at_origin = true;
  t.added.SplitRaw(splits);
  if (t.normalizer != nullptr) {
    for (Split& s : splits) {
      if (s.token_id < 0) t.normalizer->Normalize(s.text);
    }
  }
  t.added.SplitNormalized(splits);
  if (t.pre_tokenizer != nullptr) t.pre_tokenizer->PreTokenize(splits);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const Split& s : splits) {
    if (s.token_id >= 0) {
      ids.push_back(s.token_id);
    } else if (!s.text.empty()) {
      DF11_RETURN_IF_ERROR(t.model->Tokenize(s.text, ids));
    }
  }
  if (t.post_processor != nullptr) t.post_processor->Process(ids, add_special_tokens);
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (std::optional<std::string_view> token = impl_->DecodedToken(id, skip_special_tokens)) {
      tokens.emplace_back(*token);
    }
  }
  tokenizer_internal::DecodeState state;
  return impl_->DecodeWindow(std::move(tokens), tokenizer_internal::DecodeContext{}, state);
}

int64_t Tokenizer::vocab_size() const {
  int64_t n = static_cast<int64_t>(impl_->model->vocab_entries());
  for (const auto& [content, id] : impl_->added.contents()) {
    if (!impl_->model->TokenId(content)) ++n;
  }
  return n;
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view token) const {
  if (std::optional<int32_t> id = impl_->added.TokenId(token)) return id;
  return impl_->model->TokenId(token);
}

std::optional<std::string> Tokenizer::TokenString(int32_t id) const {
  std::optional<std::string_view> s = impl_->TokenString(id);
  if (!s) return std::nullopt;
  return std::string(*s);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  const std::string* s = impl_->added.TokenString(id);
  return s != nullptr && impl_->added.IsSpecialContent(*s);
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad_id; }
const std::vector<int32_t>& Tokenizer::stop_ids() const { return impl_->stop_ids; }

}  // namespace df11
