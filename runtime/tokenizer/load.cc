// Loading of the tokenizer: tokenizer.json (model, components, added tokens), then
// tokenizer_config.json (special tokens, add_bos/add_eos as transformers applies them) and
// generation_config.json (stop ids), read with runtime/format/model_dir.h.
#include <algorithm>
#include <optional>

#include "runtime/format/model_dir.h"
#include "runtime/tokenizer/impl.h"
#include "runtime/tokenizer/tokenizer.h"

namespace df11 {
namespace tokenizer_internal {
namespace {

const std::string kTokenizerFile = "tokenizer.json";
const std::string kConfigFile = "tokenizer_config.json";
const std::string kGenerationFile = "generation_config.json";

StatusOr<std::vector<AddedToken>> ParseAddedTokens(const JsonNode& root) {
  std::vector<AddedToken> tokens;
  std::optional<JsonNode> list = root.Find("added_tokens");
  if (!list) return tokens;
  if (!list->value().is_array()) return list->Error("expected an array");
  for (size_t i = 0; i < list->value().size(); ++i) {
    JsonNode item = list->At(i);
    AddedToken t;
    DF11_ASSIGN_OR_RETURN(t.content, item.GetString("content"));
    DF11_ASSIGN_OR_RETURN(t.single_word, item.GetBool("single_word", false));
    DF11_ASSIGN_OR_RETURN(t.lstrip, item.GetBool("lstrip", false));
    DF11_ASSIGN_OR_RETURN(t.rstrip, item.GetBool("rstrip", false));
    DF11_ASSIGN_OR_RETURN(t.normalized, item.GetBool("normalized", true));
    DF11_ASSIGN_OR_RETURN(t.special, item.GetBool("special", false));
    tokens.push_back(std::move(t));
  }
  return tokens;
}

// Builds `impl` from tokenizer.json; *post_processor_type gets the file's post-processor type.
Status BuildFromTokenizerJson(const JsonNode& root, BpeTables& tables, TokenizerImpl& impl,
                              std::string* post_processor_type) {
  if (!root.value().is_object()) return root.Error("expected an object");
  if (std::optional<JsonNode> version = root.Find("version")) {
    DF11_ASSIGN_OR_RETURN(std::string v, version->AsString());
    if (v != "1.0") return version->Error("unknown tokenizer version \"" + v + "\"");
  }
  DF11_ASSIGN_OR_RETURN(JsonNode model, root.Get("model"));
  if (!model.value().is_object()) return model.Error("expected an object");
  std::string type = "BPE";
  if (model.Find("type")) {
    DF11_ASSIGN_OR_RETURN(type, model.Type());
  } else if (!model.Find("merges")) {
    return Unimplemented(kTokenizerFile + ": model: only BPE models are supported");
  }
  if (type != "BPE")
    return Unimplemented(kTokenizerFile + ": model.type: model type \"" + type + "\" is not supported");
  DF11_ASSIGN_OR_RETURN(impl.model, BpeModel::Parse(model, tables));

  static const nlohmann::json kNull;
  JsonNode null_node(kNull, kTokenizerFile, "");
  DF11_ASSIGN_OR_RETURN(impl.normalizer, ParseNormalizer(root.Find("normalizer").value_or(null_node)));
  DF11_ASSIGN_OR_RETURN(impl.pre_tokenizer, ParsePreTokenizer(root.Find("pre_tokenizer").value_or(null_node)));
  std::optional<JsonNode> post = root.Find("post_processor");
  DF11_ASSIGN_OR_RETURN(impl.post_processor, ParsePostProcessor(post.value_or(null_node)));
  if (post && post->value().is_object() && post->value().contains("type") && post->value()["type"].is_string()) {
    post_processor_type->assign(post->value()["type"].get<std::string>());
  }
  DF11_ASSIGN_OR_RETURN(impl.decoder, ParseDecoder(root.Find("decoder").value_or(null_node)));

  DF11_ASSIGN_OR_RETURN(std::vector<AddedToken> added, ParseAddedTokens(root));
  return impl.added.Add(added, *impl.model, impl.normalizer.get());
}

std::optional<int32_t> LookupToken(const TokenizerImpl& impl, std::string_view token) {
  if (std::optional<int32_t> id = impl.added.TokenId(token)) return id;
  return impl.model->TokenId(token);
}

// bos_token & co: a string, an AddedToken object {"content": ...}, or null/absent.
StatusOr<std::optional<std::string>> SpecialTokenName(const JsonNode& config, std::string_view key) {
  std::optional<JsonNode> node = config.Find(key);
  if (!node) return std::optional<std::string>();
  if (node->value().is_object()) {
    DF11_ASSIGN_OR_RETURN(std::string content, node->GetString("content"));
    return std::optional<std::string>(std::move(content));
  }
  DF11_ASSIGN_OR_RETURN(std::string name, node->AsString());
  return std::optional<std::string>(std::move(name));
}

StatusOr<std::optional<int32_t>> SpecialTokenId(const JsonNode& config, std::string_view key,
                                                const TokenizerImpl& impl) {
  DF11_ASSIGN_OR_RETURN(std::optional<std::string> name, SpecialTokenName(config, key));
  if (!name) return std::optional<int32_t>();
  std::optional<int32_t> id = LookupToken(impl, *name);
  if (!id) return config.Find(key)->Error("\"" + *name + "\" is not in the vocabulary");
  return id;
}

StatusOr<std::optional<bool>> OptionalBool(const JsonNode& config, std::string_view key) {
  std::optional<JsonNode> node = config.Find(key);
  if (!node) return std::optional<bool>();
  DF11_ASSIGN_OR_RETURN(bool value, node->AsBool());
  return std::optional<bool>(value);
}

// transformers rebuilds the post-processor from add_bos_token/add_eos_token: always for
// Llama/Gemma-style tokenizer classes (defaults true/false), otherwise when either key is set
// and the file's post-processor is a TemplateProcessing or a Sequence (missing keys = false).
Status ApplyAddBosEos(const JsonNode& config, const std::string& post_processor_type, TokenizerImpl& impl) {
  DF11_ASSIGN_OR_RETURN(std::optional<bool> add_bos, OptionalBool(config, "add_bos_token"));
  DF11_ASSIGN_OR_RETURN(std::optional<bool> add_eos, OptionalBool(config, "add_eos_token"));
  std::string cls;
  if (std::optional<JsonNode> c = config.Find("tokenizer_class")) {
    DF11_ASSIGN_OR_RETURN(cls, c->AsString());
  }
  if (cls.size() > 4 && cls.compare(cls.size() - 4, 4, "Fast") == 0) cls.resize(cls.size() - 4);
  bool llama_like = cls == "LlamaTokenizer" || cls == "GemmaTokenizer" || cls == "CodeLlamaTokenizer";
  bool rebuild = llama_like || ((add_bos || add_eos) &&
                                (post_processor_type == "TemplateProcessing" || post_processor_type == "Sequence"));
  if (!rebuild) return Status::Ok();
  bool bos = add_bos.value_or(llama_like);
  bool eos = add_eos.value_or(false);
  if (bos && !impl.bos_id) return config.Error("add_bos_token is true but bos_token is not set");
  if (eos && !impl.eos_id) return config.Error("add_eos_token is true but eos_token is not set");
  impl.post_processor = MakeBosEosProcessor(bos ? impl.bos_id : std::nullopt, eos ? impl.eos_id : std::nullopt);
  return Status::Ok();
}

Status ApplyConfig(const JsonNode& config, const std::string& post_processor_type, TokenizerImpl& impl) {
  if (!config.value().is_object()) return config.Error("expected an object");
  DF11_ASSIGN_OR_RETURN(impl.bos_id, SpecialTokenId(config, "bos_token", impl));
  DF11_ASSIGN_OR_RETURN(impl.eos_id, SpecialTokenId(config, "eos_token", impl));
  DF11_ASSIGN_OR_RETURN(impl.pad_id, SpecialTokenId(config, "pad_token", impl));
  if (impl.eos_id) impl.stop_ids.push_back(*impl.eos_id);
  return ApplyAddBosEos(config, post_processor_type, impl);
}

Status ApplyGenerationConfig(const JsonNode& config, TokenizerImpl& impl) {
  if (!config.value().is_object()) return config.Error("expected an object");
  std::optional<JsonNode> eos = config.Find("eos_token_id");
  if (!eos) return Status::Ok();
  std::vector<JsonNode> items;
  if (eos->value().is_array()) {
    for (size_t i = 0; i < eos->value().size(); ++i) items.push_back(eos->At(i));
  } else {
    items.push_back(*eos);
  }
  for (const JsonNode& item : items) {
    DF11_ASSIGN_OR_RETURN(int64_t id, item.AsInt());
    if (id < 0 || id > INT32_MAX) return item.Error("id out of range");
    if (std::find(impl.stop_ids.begin(), impl.stop_ids.end(), id) == impl.stop_ids.end()) {
      impl.stop_ids.push_back(static_cast<int32_t>(id));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<TokenizerImpl>> BuildTokenizerImpl(std::string_view tokenizer_json,
                                                            std::string_view config_json,
                                                            std::string_view generation_config_json) {
  auto impl = std::make_unique<TokenizerImpl>();
  BpeTables tables;
  DF11_ASSIGN_OR_RETURN(nlohmann::json tokenizer, ParseTokenizerJson(tokenizer_json, tables));
  std::string post_processor_type;
  DF11_RETURN_IF_ERROR(
      BuildFromTokenizerJson(JsonNode(tokenizer, kTokenizerFile, ""), tables, *impl, &post_processor_type));

  nlohmann::json config = nlohmann::json::object();
  if (!config_json.empty()) {
    DF11_ASSIGN_OR_RETURN(config, ParseJson(config_json, kConfigFile));
  }
  DF11_RETURN_IF_ERROR(ApplyConfig(JsonNode(config, kConfigFile, ""), post_processor_type, *impl));
  if (!generation_config_json.empty()) {
    DF11_ASSIGN_OR_RETURN(nlohmann::json generation, ParseJson(generation_config_json, kGenerationFile));
    DF11_RETURN_IF_ERROR(ApplyGenerationConfig(JsonNode(generation, kGenerationFile, ""), *impl));
  }
  return impl;
}

}  // namespace tokenizer_internal

Tokenizer::Tokenizer(std::unique_ptr<tokenizer_internal::TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view tokenizer_json, std::string_view config_json,
                                                         std::string_view generation_config_json) {
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer_internal::TokenizerImpl> impl,
                        tokenizer_internal::BuildTokenizerImpl(tokenizer_json, config_json, generation_config_json));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& dir) {
  DF11_ASSIGN_OR_RETURN(std::string tokenizer_json, ReadModelDirFile(dir, tokenizer_internal::kTokenizerFile));
  DF11_ASSIGN_OR_RETURN(std::string config_json, ReadModelDirFile(dir, tokenizer_internal::kConfigFile));
  DF11_ASSIGN_OR_RETURN(std::optional<std::string> generation_json,
                        ReadOptionalModelDirFile(dir, tokenizer_internal::kGenerationFile));
  StatusOr<std::unique_ptr<tokenizer_internal::TokenizerImpl>> impl =
      tokenizer_internal::BuildTokenizerImpl(tokenizer_json, config_json, generation_json.value_or(""));
  if (!impl.ok()) return impl.status().WithContext(dir);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl).value()));
}

}  // namespace df11
