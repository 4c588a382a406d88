// Internal pieces of the tokenizer (runtime/tokenizer/tokenizer.h): JSON access with error paths, split
// patterns, and the component interfaces (normalizer, pre-tokenizer, post-processor, decoder)
// with their parsers. Each mirrors the HF `tokenizers` component of the same JSON "type".
// All components are immutable after parsing and safe to use from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/tokenizer/regex.h"

namespace df11::tokenizer_internal {

// A JSON value plus where it came from, so errors read "tokenizer.json: model.merges[12]: ...".
class JsonNode {
 public:
  JsonNode(const nlohmann::json& value, std::string file, std::string path)
      : value_(&value), file_(std::move(file)), path_(std::move(path)) {}
  const nlohmann::json& value() const { return *value_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }

  // INVALID_ARGUMENT "file: path: what" (or "file: what" at the root).
  Status Error(std::string_view what) const;
  // The member `key`: required (absent or null is an error) or optional.
  StatusOr<JsonNode> Get(std::string_view key) const;
  std::optional<JsonNode> Find(std::string_view key) const;
  JsonNode At(size_t index) const;
  bool is_null() const { return value_->is_null(); }

  StatusOr<std::string> AsString() const;
  StatusOr<bool> AsBool() const;
  StatusOr<int64_t> AsInt() const;
  // Member accessors; `fallback` applies when the member is absent or null.
  StatusOr<std::string> GetString(std::string_view key) const;
  StatusOr<bool> GetBool(std::string_view key, std::optional<bool> fallback = std::nullopt) const;
  StatusOr<int64_t> GetInt(std::string_view key, std::optional<int64_t> fallback = std::nullopt) const;
  // The "type" member, for component dispatch.
  StatusOr<std::string> Type() const { return GetString("type"); }

 private:
  const nlohmann::json* value_;
  std::string file_;
  std::string path_;
};

// A "Sequence" component: node[key] must be an array whose items `parse` (a component parser
// returning StatusOr<std::unique_ptr<T>>) reads into the steps of a new `Sequence` (a T);
// `what` names an item in errors.
template <typename Sequence, typename T, typename Parse>
StatusOr<std::unique_ptr<T>> ParseSequence(const JsonNode& node, std::string_view key, std::string_view what,
                                           Parse parse) {
  DF11_ASSIGN_OR_RETURN(JsonNode list, node.Get(key));
  if (!list.value().is_array()) return list.Error("expected an array");
  std::vector<std::unique_ptr<T>> steps;
  for (size_t i = 0; i < list.value().size(); ++i) {
    JsonNode child = list.At(i);
    if (child.is_null()) return child.Error("expected a " + std::string(what));
    DF11_ASSIGN_OR_RETURN(std::unique_ptr<T> step, parse(child));
    steps.push_back(std::move(step));
  }
  return std::unique_ptr<T>(new Sequence(std::move(steps)));
}

// Parses `text` as JSON; INVALID_ARGUMENT "file: invalid JSON: ..." on failure.
StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& file);

// model.vocab and model.merges of a tokenizer.json: hundreds of thousands of entries, read while
// parsing rather than built into the JSON DOM (which gets empty placeholders for them).
struct BpeTables {
  struct Merge {
    size_t index;  // position in model.merges, for errors
    bool legacy;   // "left right" in `left`, not yet split
    std::string left;
    std::string right;
  };
  bool has_vocab = false;                              // model.vocab was an object
  bool has_merges = false;                             // model.merges was an array
  std::vector<std::pair<std::string, int64_t>> vocab;  // in file order
  std::vector<Merge> merges;
  std::string error;  // the first malformed entry, e.g. "model.merges[12]: expected string or pair"
};
// ParseJson for tokenizer.json, with model.vocab and model.merges going to `tables`.
StatusOr<nlohmann::json> ParseTokenizerJson(std::string_view text, BpeTables& tables);

// A piece of the input on its way through Encode.
struct Split {
  std::string text;
  int32_t token_id = -1;   // >= 0: an added token matched here; final, not processed further
  bool at_origin = false;  // starts at byte 0 of the original text (Metaspace prepend "first")
};

// A Split/Replace pattern: {"String": literal} or {"Regex": oniguruma}. As in HF both compile
// to an Oniguruma regex (a literal is escaped); non-empty literals use plain substring search.
class Pattern {
 public:
  // The "pattern" member of a Split/Replace `component`.
  static StatusOr<Pattern> Parse(const JsonNode& component);
  static StatusOr<Pattern> FromLiteral(std::string literal);
  static StatusOr<Pattern> FromRegex(const std::string& regex);
  bool is_literal() const { return regex_ == nullptr; }
  const std::string& literal() const { return literal_; }

  // Non-overlapping matches (start, end), left to right, as HF's onig find_iter.
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  // HF Pattern::find_matches: ((start, end), is_match) pieces covering `text`.
  struct Piece {
    size_t start;
    size_t end;
    bool is_match;
  };
  void FindPieces(std::string_view text, std::vector<Piece>& out) const;
  // `text` with every match replaced by `content` (HF Replace).
  std::string Replace(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

// GPT-2 byte-level alphabet: the character (UTF-8) standing for each byte, and back (-1 for a
// character outside the alphabet).
const std::string& ByteLevelChar(uint8_t byte);
int ByteLevelByte(char32_t cp);

// How a split pattern's matches become pieces (HF SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
StatusOr<SplitBehavior> ParseSplitBehavior(const JsonNode& node);
// Appends to `out` the non-empty pieces of `in` cut per `pieces` (see Pattern::FindPieces).
void SplitByPieces(const Split& in, std::vector<Pattern::Piece> pieces, bool invert, SplitBehavior behavior,
                   std::vector<Split>& out);

// ---- Normalizers: NFC, NFD, Replace, Prepend, Strip, ByteLevel, Sequence. -----------------
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Valid UTF-8 in, valid UTF-8 out.
  virtual void Normalize(std::string& text) const = 0;
};
// `node` is a normalizer object; a JSON null yields nullptr (no normalizer).
StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const JsonNode& node);

// Metaspace (pre-tokenizer and decoder): "replacement" (one character) and "prepend_scheme",
// checked against the legacy add_prefix_space as HF does.
enum class PrependScheme { kAlways, kFirst, kNever };
struct MetaspaceOptions {
  std::string replacement;
  PrependScheme scheme = PrependScheme::kAlways;
};
StatusOr<MetaspaceOptions> ParseMetaspaceOptions(const JsonNode& node);

// ---- Pre-tokenizers: Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit,
// Punctuation, Sequence. ------------------------------------------------------------------------
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits every split without a token_id further (dropping empty ones); others stay as they are.
  virtual void PreTokenize(std::vector<Split>& splits) const = 0;
};
StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const JsonNode& node);

// ---- Post-processors: TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing,
// Sequence. Single sequences only. --------------------------------------------------------------
class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void Process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};
StatusOr<std::unique_ptr<PostProcessor>> ParsePostProcessor(const JsonNode& node);
// transformers' update_post_processor(): "[bos] $A [eos]" with the given (present) ids.
std::unique_ptr<PostProcessor> MakeBosEosProcessor(std::optional<int32_t> bos, std::optional<int32_t> eos);

// ---- Decoders: ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, Sequence. -----------
// Decoders run over a window of tokens, so that streaming (runtime/tokenizer/detokenizer.h) can decode a
// suffix of the ids without re-decoding everything: `context` says where the window sits, and
// each decoder holds back what later tokens could still change.
struct DecodeContext {
  bool at_start = true;  // the window's first token is the text's first token
  bool at_end = true;    // no token follows the window
};
struct DecodeState {
  bool fused = false;      // tokens were joined into one string (the text's token 0)
  bool held = false;       // output was held back, or the window cannot end here yet
  bool streamable = true;  // false: a window's output is not a prefix of the final output
};
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void Decode(std::vector<std::string>& tokens, const DecodeContext& context, DecodeState& state) const = 0;
};
StatusOr<std::unique_ptr<Decoder>> ParseDecoder(const JsonNode& node);

}  // namespace df11::tokenizer_internal
