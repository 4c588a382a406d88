// Pre-tokenizers of the tokenizer: Split, ByteLevel, Metaspace, Digits, Whitespace,
// WhitespaceSplit, Punctuation, Sequence (HF `tokenizers` pre-tokenizers of the same "type"),
// plus the split behaviors and the GPT-2 byte-level alphabet they share.
#include <algorithm>
#include <array>

#include "runtime/tokenizer/components.h"
#include "runtime/tokenizer/unicode.h"

namespace df11::tokenizer_internal {
namespace {

struct ByteLevelAlphabet {
  std::array<std::string, 256> chars;
  std::array<int16_t, 512> bytes;  // code point (< 512) -> byte, -1 if none
  ByteLevelAlphabet() {
    bytes.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      AppendUtf8(cp, &chars[b]);
      bytes[cp] = static_cast<int16_t>(b);
    }
  }
  // The byte-level characters of `text`'s bytes.
  std::string Map(std::string_view text) const {
    std::string out(text.size() * 2, '\0');
    size_t n = 0;
    for (char c : text) {
      const std::string& ch = chars[static_cast<uint8_t>(c)];
      out[n++] = ch[0];
      if (ch.size() == 2) out[n++] = ch[1];
    }
    out.resize(n);
    return out;
  }
};
const ByteLevelAlphabet& Alphabet() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

// HF's Pattern for a char predicate: each matching character is its own match.
template <typename Pred>
void CharPieces(std::string_view text, Pred pred, std::vector<Pattern::Piece>& out) {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t i = 0; i < text.size();) {
    size_t start = i;
    char32_t cp = NextCodePoint(text, i);
    if (!pred(cp)) continue;
    if (last < start) out.push_back({last, start, false});
    out.push_back({start, i, true});
    last = i;
  }
  if (last < text.size()) out.push_back({last, text.size(), false});
}

// Applies `split_one` to every split without a token id, keeping the others in place.
template <typename Fn>
void ForEachOpenSplit(std::vector<Split>& splits, Fn split_one) {
  std::vector<Split> out;
  out.reserve(splits.size() * 2);
  for (Split& s : splits) {
    if (s.token_id >= 0) {
      out.push_back(std::move(s));
    } else {
      split_one(s, out);
    }
  }
  splits = std::move(out);
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void PreTokenize(std::vector<Split>& splits) const override {
    std::vector<Pattern::Piece> pieces;
    ForEachOpenSplit(splits, [&](const Split& s, std::vector<Split>& out) {
      pattern_.FindPieces(s.text, pieces);
      SplitByPieces(s, pieces, invert_, behavior_, out);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::optional<Pattern> gpt2_regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(gpt2_regex)) {}
  void PreTokenize(std::vector<Split>& splits) const override {
    std::vector<Pattern::Piece> pieces;
    ForEachOpenSplit(splits, [&](Split& s, std::vector<Split>& out) {
      if (add_prefix_space_ && s.text[0] != ' ') s.text.insert(0, " ");
      size_t first = out.size();
      if (regex_) {
        regex_->FindPieces(s.text, pieces);
        SplitByPieces(s, pieces, false, SplitBehavior::kIsolated, out);
      } else {
        out.push_back(std::move(s));
      }
      const ByteLevelAlphabet& alphabet = Alphabet();
      for (size_t i = first; i < out.size(); ++i) out[i].text = alphabet.Map(out[i].text);
    });
  }

 private:
  bool add_prefix_space_;
  std::optional<Pattern> regex_;  // GPT-2 regex when use_regex
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split, Pattern pattern)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split), pattern_(std::move(pattern)) {}
  void PreTokenize(std::vector<Split>& splits) const override {
    std::vector<Pattern::Piece> pieces;
    ForEachOpenSplit(splits, [&](Split& s, std::vector<Split>& out) {
      std::string text;
      text.reserve(s.text.size() + replacement_.size());
      for (char c : s.text) {
        if (c == ' ') {
          text += replacement_;
        } else {
          text.push_back(c);
        }
      }
      bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && s.at_origin))) {
        text.insert(0, replacement_);
      }
      s.text = std::move(text);
      if (!split_) {
        out.push_back(std::move(s));
        return;
      }
      pattern_.FindPieces(s.text, pieces);
      SplitByPieces(s, pieces, false, SplitBehavior::kMergedWithNext, out);
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  Pattern pattern_;  // the replacement character, literal
};

// Splits on characters selected by a predicate (WhitespaceSplit, Punctuation).
template <typename Pred>
class CharClassPreTokenizer : public PreTokenizer {
 public:
  CharClassPreTokenizer(Pred pred, SplitBehavior behavior) : pred_(std::move(pred)), behavior_(behavior) {}
  void PreTokenize(std::vector<Split>& splits) const override {
    std::vector<Pattern::Piece> pieces;
    ForEachOpenSplit(splits, [&](const Split& s, std::vector<Split>& out) {
      CharPieces(s.text, pred_, pieces);
      SplitByPieces(s, pieces, false, behavior_, out);
    });
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};
template <typename Pred>
std::unique_ptr<PreTokenizer> MakeCharClass(Pred pred, SplitBehavior behavior) {
  return std::make_unique<CharClassPreTokenizer<Pred>>(std::move(pred), behavior);
}

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void PreTokenize(std::vector<Split>& splits) const override {
    for (const auto& step : steps_) step->PreTokenize(splits);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

StatusOr<std::unique_ptr<PreTokenizer>> ParseMetaspace(const JsonNode& node) {
  DF11_ASSIGN_OR_RETURN(MetaspaceOptions options, ParseMetaspaceOptions(node));
  DF11_ASSIGN_OR_RETURN(bool split, node.GetBool("split", true));
  DF11_ASSIGN_OR_RETURN(Pattern pattern, Pattern::FromLiteral(options.replacement));
  return std::unique_ptr<PreTokenizer>(
      new MetaspacePreTokenizer(std::move(options.replacement), options.scheme, split, std::move(pattern)));
}

StatusOr<std::unique_ptr<PreTokenizer>> FromRegex(const std::string& regex, SplitBehavior behavior, bool invert) {
  DF11_ASSIGN_OR_RETURN(Pattern pattern, Pattern::FromRegex(regex));
  return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(pattern), behavior, invert));
}

bool IsPunctuation(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '@') || (cp >= '[' && cp <= '`') || (cp >= '{' && cp <= '~');
  }
  static const std::shared_ptr<const Regex> punct = Regex::Compile("\\A\\p{P}").value();
  std::string s;
  AppendUtf8(cp, &s);
  return punct->Search(s);
}

}  // namespace

const std::string& ByteLevelChar(uint8_t byte) { return Alphabet().chars[byte]; }

int ByteLevelByte(char32_t cp) { return cp < 512 ? Alphabet().bytes[cp] : -1; }

StatusOr<MetaspaceOptions> ParseMetaspaceOptions(const JsonNode& node) {
  MetaspaceOptions options;
  DF11_ASSIGN_OR_RETURN(options.replacement, node.GetString("replacement"));
  if (CountCodePoints(options.replacement) != 1) return node.Error("replacement: expected one character");
  if (std::optional<JsonNode> s = node.Find("prepend_scheme")) {
    DF11_ASSIGN_OR_RETURN(std::string name, s->AsString());
    if (name == "first") {
      options.scheme = PrependScheme::kFirst;
    } else if (name == "never") {
      options.scheme = PrependScheme::kNever;
    } else if (name != "always") {
      return s->Error("expected \"always\", \"first\" or \"never\"");
    }
  }
  DF11_ASSIGN_OR_RETURN(bool add_prefix_space, node.GetBool("add_prefix_space", true));
  // HF: prepend_scheme defaults to "always" here, so add_prefix_space=false needs "never".
  if (!add_prefix_space && options.scheme != PrependScheme::kNever) {
    return node.Error("add_prefix_space does not match declared prepend_scheme");
  }
  return options;
}

StatusOr<SplitBehavior> ParseSplitBehavior(const JsonNode& node) {
  DF11_ASSIGN_OR_RETURN(std::string name, node.AsString());
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return node.Error("unknown split behavior \"" + name + "\"");
}

void SplitByPieces(const Split& in, std::vector<Pattern::Piece> pieces, bool invert, SplitBehavior behavior,
                   std::vector<Split>& out) {
  if (invert) {
    for (Pattern::Piece& p : pieces) p.is_match = !p.is_match;
  }
  // (start, end, keep) per HF NormalizedString::split.
  struct Cut {
    size_t start, end;
    bool keep;
  };
  std::vector<Cut> cuts;
  cuts.reserve(pieces.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& p : pieces) cuts.push_back({p.start, p.end, true});
      break;
    case SplitBehavior::kRemoved:
      for (const auto& p : pieces) cuts.push_back({p.start, p.end, !p.is_match});
      break;
    case SplitBehavior::kContiguous:          // a run of matches or of non-matches is one piece
    case SplitBehavior::kMergedWithPrevious:  // a match joins the non-match before it
      for (const auto& p : pieces) {
        const bool merge =
            behavior == SplitBehavior::kContiguous ? p.is_match == previous_match : p.is_match && !previous_match;
        if (merge && !cuts.empty()) {
          cuts.back().end = p.end;
        } else {
          cuts.push_back({p.start, p.end, true});
        }
        previous_match = p.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
        if (it->is_match && !previous_match && !cuts.empty()) {
          cuts.back().start = it->start;
        } else {
          cuts.push_back({it->start, it->end, true});
        }
        previous_match = it->is_match;
      }
      std::reverse(cuts.begin(), cuts.end());
      break;
  }
  for (const Cut& c : cuts) {
    if (!c.keep || c.end == c.start) continue;
    Split s;
    s.text = in.text.substr(c.start, c.end - c.start);
    s.at_origin = in.at_origin && c.start == 0;
    out.push_back(std::move(s));
  }
}

StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const JsonNode& node) {
  if (node.is_null()) return std::unique_ptr<PreTokenizer>();
  DF11_ASSIGN_OR_RETURN(std::string type, node.Type());
  if (type == "Split") {
    DF11_ASSIGN_OR_RETURN(Pattern pattern, Pattern::Parse(node));
    DF11_ASSIGN_OR_RETURN(JsonNode behavior_node, node.Get("behavior"));
    DF11_ASSIGN_OR_RETURN(SplitBehavior behavior, ParseSplitBehavior(behavior_node));
    DF11_ASSIGN_OR_RETURN(bool invert, node.GetBool("invert", false));
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(pattern), behavior, invert));
  }
  if (type == "ByteLevel") {
    DF11_ASSIGN_OR_RETURN(bool add_prefix_space, node.GetBool("add_prefix_space", true));
    DF11_ASSIGN_OR_RETURN(bool use_regex, node.GetBool("use_regex", true));
    std::optional<Pattern> regex;
    if (use_regex) {
      DF11_ASSIGN_OR_RETURN(
          regex, Pattern::FromRegex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"));
    }
    return std::unique_ptr<PreTokenizer>(new ByteLevelPreTokenizer(add_prefix_space, std::move(regex)));
  }
  if (type == "Metaspace") return ParseMetaspace(node);
  if (type == "Digits") {
    DF11_ASSIGN_OR_RETURN(bool individual, node.GetBool("individual_digits", false));
    return FromRegex(individual ? "\\p{N}" : "\\p{N}+", SplitBehavior::kIsolated, false);
  }
  if (type == "Whitespace") return FromRegex("\\w+|[^\\w\\s]+", SplitBehavior::kRemoved, true);
  if (type == "WhitespaceSplit") return MakeCharClass(IsWhiteSpace, SplitBehavior::kRemoved);
  if (type == "Punctuation") {
    SplitBehavior behavior = SplitBehavior::kIsolated;
    if (std::optional<JsonNode> b = node.Find("behavior")) {
      DF11_ASSIGN_OR_RETURN(behavior, ParseSplitBehavior(*b));
    }
    return MakeCharClass(IsPunctuation, behavior);
  }
  if (type == "Sequence") {
    return ParseSequence<SequencePreTokenizer, PreTokenizer>(node, "pretokenizers", "pre-tokenizer", ParsePreTokenizer);
  }
  return Unimplemented(node.file() + ": " + node.path() + ": pre-tokenizer type \"" + type + "\" is not supported");
}

}  // namespace df11::tokenizer_internal
