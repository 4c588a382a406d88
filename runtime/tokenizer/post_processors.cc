// Post-processors of the tokenizer: TemplateProcessing, ByteLevel, RobertaProcessing,
// BertProcessing, Sequence (HF `tokenizers` post-processors, single sequence only).
#include "runtime/tokenizer/components.h"

namespace df11::tokenizer_internal {
namespace {

// A template: sequence A, or a run of special token ids.
struct TemplatePiece {
  bool is_sequence_a = false;
  bool is_sequence_b = false;
  std::vector<int32_t> special_ids;
};

class TemplateProcessor : public PostProcessor {
 public:
  explicit TemplateProcessor(std::vector<TemplatePiece> single) : single_(std::move(single)) {}
  void Process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const TemplatePiece& p : single_) {
      if (p.is_sequence_a) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else if (add_special_tokens) {
        out.insert(out.end(), p.special_ids.begin(), p.special_ids.end());
      }
    }
    ids = std::move(out);
  }

 private:
  std::vector<TemplatePiece> single_;
};

class NoOpProcessor : public PostProcessor {
 public:
  void Process(std::vector<int32_t>&, bool) const override {}
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void Process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& step : steps_) step->Process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

// Looks up a template's special token: special_tokens[name].ids.
StatusOr<std::vector<int32_t>> SpecialIds(const JsonNode& specials, const std::string& name, const JsonNode& where) {
  std::optional<JsonNode> entry = specials.Find(name);
  if (!entry) return where.Error("special token \"" + name + "\" is not in special_tokens");
  DF11_ASSIGN_OR_RETURN(JsonNode ids, entry->Get("ids"));
  if (!ids.value().is_array()) return ids.Error("expected an array of ids");
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.value().size(); ++i) {
    DF11_ASSIGN_OR_RETURN(int64_t id, ids.At(i).AsInt());
    if (id < 0 || id > INT32_MAX) return ids.At(i).Error("id out of range");
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

StatusOr<std::unique_ptr<PostProcessor>> ParseTemplate(const JsonNode& node) {
  DF11_ASSIGN_OR_RETURN(JsonNode single, node.Get("single"));
  if (!single.value().is_array()) return single.Error("expected an array of template pieces");
  static const nlohmann::json kEmpty = nlohmann::json::object();
  JsonNode specials = node.Find("special_tokens").value_or(JsonNode(kEmpty, node.file(), node.path()));
  std::vector<TemplatePiece> pieces;
  for (size_t i = 0; i < single.value().size(); ++i) {
    JsonNode piece = single.At(i);
    TemplatePiece p;
    if (std::optional<JsonNode> seq = piece.Find("Sequence")) {
      DF11_ASSIGN_OR_RETURN(std::string id, seq->GetString("id"));
      if (id != "A" && id != "B") return seq->Error("expected sequence id \"A\" or \"B\"");
      p.is_sequence_a = id == "A";
      p.is_sequence_b = id == "B";
    } else if (std::optional<JsonNode> special = piece.Find("SpecialToken")) {
      DF11_ASSIGN_OR_RETURN(std::string name, special->GetString("id"));
      DF11_ASSIGN_OR_RETURN(p.special_ids, SpecialIds(specials, name, *special));
    } else {
      return piece.Error("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    pieces.push_back(std::move(p));
  }
  return std::unique_ptr<PostProcessor>(new TemplateProcessor(std::move(pieces)));
}

// RobertaProcessing / BertProcessing: [cls] $A [sep], with "cls"/"sep" as [token, id].
StatusOr<std::unique_ptr<PostProcessor>> ParseClsSep(const JsonNode& node) {
  std::vector<TemplatePiece> pieces(3);
  const char* keys[] = {"cls", "sep"};
  for (int k = 0; k < 2; ++k) {
    DF11_ASSIGN_OR_RETURN(JsonNode pair, node.Get(keys[k]));
    if (!pair.value().is_array() || pair.value().size() != 2) return pair.Error("expected [token, id]");
    DF11_ASSIGN_OR_RETURN(int64_t id, pair.At(1).AsInt());
    if (id < 0 || id > INT32_MAX) return pair.At(1).Error("id out of range");
    pieces[k == 0 ? 0 : 2].special_ids = {static_cast<int32_t>(id)};
  }
  pieces[1].is_sequence_a = true;
  return std::unique_ptr<PostProcessor>(new TemplateProcessor(std::move(pieces)));
}

}  // namespace

std::unique_ptr<PostProcessor> MakeBosEosProcessor(std::optional<int32_t> bos, std::optional<int32_t> eos) {
  std::vector<TemplatePiece> pieces;
  if (bos) pieces.push_back({false, false, {*bos}});
  pieces.push_back({true, false, {}});
  if (eos) pieces.push_back({false, false, {*eos}});
  return std::make_unique<TemplateProcessor>(std::move(pieces));
}

StatusOr<std::unique_ptr<PostProcessor>> ParsePostProcessor(const JsonNode& node) {
  if (node.is_null()) return std::unique_ptr<PostProcessor>();
  DF11_ASSIGN_OR_RETURN(std::string type, node.Type());
  if (type == "TemplateProcessing") return ParseTemplate(node);
  if (type == "ByteLevel") return std::unique_ptr<PostProcessor>(new NoOpProcessor);  // offsets only
  if (type == "RobertaProcessing" || type == "BertProcessing") return ParseClsSep(node);
  if (type == "Sequence") {
    return ParseSequence<SequenceProcessor, PostProcessor>(node, "processors", "post-processor", ParsePostProcessor);
  }
  return Unimplemented(node.file() + ": " + node.path() + ": post-processor type \"" + type + "\" is not supported");
}

}  // namespace df11::tokenizer_internal
