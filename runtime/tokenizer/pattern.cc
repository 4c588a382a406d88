// Split/Replace patterns of the tokenizer (see Pattern in components.h).
#include "runtime/tokenizer/components.h"

namespace df11::tokenizer_internal {

StatusOr<Pattern> Pattern::FromLiteral(std::string literal) {
  Pattern p;
  if (literal.empty()) {
    // HF compiles the escaped literal; an empty one is the empty regex (matches everywhere).
    DF11_ASSIGN_OR_RETURN(p.regex_, Regex::Compile(""));
  }
  p.literal_ = std::move(literal);
  return p;
}

StatusOr<Pattern> Pattern::FromRegex(const std::string& regex) {
  Pattern p;
  DF11_ASSIGN_OR_RETURN(p.regex_, Regex::Compile(regex));
  return p;
}

StatusOr<Pattern> Pattern::Parse(const JsonNode& component) {
  DF11_ASSIGN_OR_RETURN(JsonNode node, component.Get("pattern"));
  if (node.value().is_string()) {  // a bare string is a literal
    return FromLiteral(node.value().get<std::string>());
  }
  if (std::optional<JsonNode> s = node.Find("String")) {
    DF11_ASSIGN_OR_RETURN(std::string literal, s->AsString());
    return FromLiteral(std::move(literal));
  }
  if (std::optional<JsonNode> r = node.Find("Regex")) {
    DF11_ASSIGN_OR_RETURN(std::string regex, r->AsString());
    StatusOr<Pattern> p = FromRegex(regex);
    if (!p.ok()) return r->Error(p.status().message());
    return p;
  }
  return node.Error("expected {\"String\": ...} or {\"Regex\": ...}");
}

void Pattern::FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  if (regex_ != nullptr) {
    regex_->FindAll(text, out);
    return;
  }
  for (size_t pos = text.find(literal_); pos != std::string_view::npos;
       pos = text.find(literal_, pos + literal_.size())) {
    out.emplace_back(pos, pos + literal_.size());
  }
}

void Pattern::FindPieces(std::string_view text, std::vector<Piece>& out) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  std::vector<std::pair<size_t, size_t>> matches;
  FindAll(text, matches);
  size_t prev = 0;
  for (auto [start, end] : matches) {
    if (prev != start) out.push_back({prev, start, false});
    out.push_back({start, end, true});
    prev = end;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
}

std::string Pattern::Replace(std::string_view text, std::string_view content) const {
  std::vector<Piece> pieces;
  FindPieces(text, pieces);
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (const Piece& p : pieces) out += p.is_match ? content : text.substr(p.start, p.end - p.start);
  return out;
}

}  // namespace df11::tokenizer_internal
