// Added tokens of the tokenizer (see added_tokens.h).
#include "runtime/tokenizer/added_tokens.h"

#include <algorithm>
#include <memory>

#include "runtime/tokenizer/unicode.h"

namespace df11::tokenizer_internal {
namespace {

// Rust regex \w (Unicode): Alphabetic, Mark, Decimal_Number, Connector_Punctuation, Join_Control.
bool IsWordChar(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  static const std::shared_ptr<const Regex> word =
      Regex::Compile("\\A[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]").value();
  std::string s;
  AppendUtf8(cp, &s);
  return word->Search(s);
}

char32_t LastCodePoint(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return NextCodePoint(s, start);
}

}  // namespace

void AddedVocabulary::Matcher::Build(const std::vector<std::pair<std::string, int32_t>>& patterns) {
  node_ids_.assign(1, -1);
  edges_.clear();
  std::fill(std::begin(first_byte_), std::end(first_byte_), false);
  for (const auto& [pattern, id] : patterns) {
    if (pattern.empty()) continue;
    int32_t node = 0;
    for (char c : pattern) {
      uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        it = edges_.emplace(key, static_cast<int32_t>(node_ids_.size())).first;
        node_ids_.push_back(-1);
      }
      node = it->second;
    }
    node_ids_[node] = id;
    first_byte_[static_cast<uint8_t>(pattern[0])] = true;
  }
}

void AddedVocabulary::Matcher::FindAll(std::string_view text, std::vector<Match>& out) const {
  for (size_t i = 0; i < text.size();) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) {
      ++i;
      continue;
    }
    int32_t node = 0;
    size_t best_len = 0;
    int32_t best_id = -1;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[j]));
      if (it == edges_.end()) break;
      node = it->second;
      if (node_ids_[node] >= 0) {
        best_len = j + 1 - i;
        best_id = node_ids_[node];
      }
    }
    if (best_len == 0) {
      ++i;
      continue;
    }
    out.push_back({i, i + best_len, best_id});
    i += best_len;
  }
}

Status AddedVocabulary::Add(const std::vector<AddedToken>& tokens, const BpeModel& model,
                            const Normalizer* normalizer) {
  int64_t next_id = static_cast<int64_t>(model.vocab_entries());
  if (!tokens_.empty()) {
    int64_t max_id = 0;
    for (const auto& [id, token] : tokens_) max_id = std::max<int64_t>(max_id, id);
    if (max_id >= next_id || next_id == 0) next_id = max_id + 1;
  }
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    auto known = ids_.find(token.content);
    if (known != ids_.end()) {
      auto same = tokens_.find(known->second);
      if (same != tokens_.end() && same->second == token) continue;
    }
    int32_t id;
    if (known != ids_.end()) {
      id = known->second;
    } else if (std::optional<int32_t> model_id = model.TokenId(token.content)) {
      id = *model_id;
    } else {
      if (next_id > INT32_MAX) return ResourceExhausted("too many added tokens");
      id = static_cast<int32_t>(next_id++);
    }
    if (token.normalized && normalizer != nullptr) {
      std::string normalized = token.content;
      normalizer->Normalize(normalized);
      if (normalized != token.content) normalized_contents_[id] = std::move(normalized);
    }
    ids_[token.content] = id;
    if (token.special) special_.insert(token.content);
    tokens_[id] = token;
  }
  std::vector<std::pair<std::string, int32_t>> raw, normalized;
  for (const auto& [id, token] : tokens_) {
    if (token.normalized) {
      auto n = normalized_contents_.find(id);
      normalized.emplace_back(n != normalized_contents_.end() ? n->second : token.content, id);
    } else {
      raw.emplace_back(token.content, id);
    }
  }
  // Deterministic trie contents when two ids share a pattern: the smaller id wins.
  std::sort(raw.begin(), raw.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::sort(normalized.begin(), normalized.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  raw_.Build(raw);
  normalized_.Build(normalized);
  return Status::Ok();
}

std::optional<int32_t> AddedVocabulary::TokenId(std::string_view content) const {
  auto it = ids_.find(content);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string* AddedVocabulary::TokenString(int32_t id) const {
  auto n = normalized_contents_.find(id);
  if (n != normalized_contents_.end()) return &n->second;
  auto it = tokens_.find(id);
  return it == tokens_.end() ? nullptr : &it->second.content;
}

void AddedVocabulary::FindSplits(const Matcher& matcher, const Split& in, std::vector<Split>& out) const {
  std::string_view text = in.text;
  std::vector<Matcher::Match> matches;
  matcher.FindAll(text, matches);
  auto emit = [&](size_t start, size_t stop, int32_t id) {
    if (stop <= start) return;  // empty pieces are dropped (PreTokenizedString::split)
    Split s;
    s.text = std::string(text.substr(start, stop - start));
    s.token_id = id;
    s.at_origin = in.at_origin && start == 0;
    out.push_back(std::move(s));
  };
  size_t start_offset = 0;
  for (const Matcher::Match& m : matches) {
    size_t start = m.start, stop = m.end;
    const AddedToken& token = tokens_.at(m.id);
    if (token.single_word) {
      bool start_space = start == 0 || !IsWordChar(LastCodePoint(text.substr(0, start)));
      bool stop_space = stop == text.size() || [&] {
        size_t i = stop;
        return !IsWordChar(NextCodePoint(text, i));
      }();
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) start = std::max(TrailingSpaceStart(text.substr(0, start)), start_offset);
    if (token.rstrip) stop += LeadingSpaceLength(text.substr(stop));
    if (start_offset < start) emit(start_offset, start, -1);
    emit(start, stop, m.id);
    start_offset = stop;
  }
  if (start_offset < text.size()) emit(start_offset, text.size(), -1);
}

void AddedVocabulary::SplitWith(const Matcher& matcher, std::vector<Split>& splits) const {
  std::vector<Split> out;
  out.reserve(splits.size());
  for (Split& s : splits) {
    if (s.token_id >= 0) {
      out.push_back(std::move(s));
    } else if (matcher.empty()) {
      if (!s.text.empty()) out.push_back(std::move(s));  // empty pieces are dropped
    } else {
      FindSplits(matcher, s, out);
    }
  }
  splits = std::move(out);
}

}  // namespace df11::tokenizer_internal
