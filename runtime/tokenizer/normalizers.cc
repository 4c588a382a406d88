// Normalizers of the tokenizer: NFC, NFD, Replace, Prepend, Strip, ByteLevel, Sequence (HF
// `tokenizers` normalizers of the same "type").
#include <algorithm>

#include "runtime/tokenizer/components.h"
#include "runtime/tokenizer/unicode.h"

namespace df11::tokenizer_internal {
namespace {

class NfcNormalizer : public Normalizer {
 public:
  void Normalize(std::string& text) const override { text = NormalizeNfc(text); }
};

class NfdNormalizer : public Normalizer {
 public:
  void Normalize(std::string& text) const override { text = NormalizeNfd(text); }
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void Normalize(std::string& text) const override { text = pattern_.Replace(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void Normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(std::string& text) const override {
    const size_t begin = left_ ? LeadingSpaceLength(text) : 0;
    const size_t end = right_ ? std::max(begin, TrailingSpaceStart(text)) : text.size();
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class ByteLevelNormalizer : public Normalizer {
 public:
  void Normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size() * 2);
    for (char c : text) out += ByteLevelChar(static_cast<uint8_t>(c));  // rare: no fast path needed
    text = std::move(out);
  }
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void Normalize(std::string& text) const override {
    for (const auto& step : steps_) step->Normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const JsonNode& node) {
  if (node.is_null()) return std::unique_ptr<Normalizer>();
  DF11_ASSIGN_OR_RETURN(std::string type, node.Type());
  if (type == "NFC") return std::unique_ptr<Normalizer>(new NfcNormalizer);
  if (type == "NFD") return std::unique_ptr<Normalizer>(new NfdNormalizer);
  if (type == "ByteLevel") return std::unique_ptr<Normalizer>(new ByteLevelNormalizer);
  if (type == "Replace") {
    DF11_ASSIGN_OR_RETURN(Pattern pattern, Pattern::Parse(node));
    DF11_ASSIGN_OR_RETURN(std::string content, node.GetString("content"));
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer(std::move(pattern), std::move(content)));
  }
  if (type == "Prepend") {
    DF11_ASSIGN_OR_RETURN(std::string prefix, node.GetString("prepend"));
    return std::unique_ptr<Normalizer>(new PrependNormalizer(std::move(prefix)));
  }
  if (type == "Strip") {
    DF11_ASSIGN_OR_RETURN(bool left, node.GetBool("strip_left"));
    DF11_ASSIGN_OR_RETURN(bool right, node.GetBool("strip_right"));
    return std::unique_ptr<Normalizer>(new StripNormalizer(left, right));
  }
  if (type == "Sequence") {
    return ParseSequence<SequenceNormalizer, Normalizer>(node, "normalizers", "normalizer", ParseNormalizer);
  }
  return Unimplemented(node.file() + ": " + node.path() + ": normalizer type \"" + type + "\" is not supported");
}

}  // namespace df11::tokenizer_internal
