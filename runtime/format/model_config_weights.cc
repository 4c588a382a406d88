// The tensors a ModelConfig implies: where they live in a checkpoint (ResolveWeightNames), every
// BF16 tensor with its HF name and shape (ExpectedWeights), and the DF11 pattern_dict that groups
// them into compressed units (Df11PatternDict). A layer's tensors come from one table
// (layer_tensors.h). See model_config.h.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/format/layer_tensors.h"
#include "runtime/format/model_config.h"

namespace df11 {

// The table is indexed by id (SpecOf).
static_assert([] {
  for (int i = 0; i < kNumLayerTensors; ++i) {
    if (static_cast<int>(kLayerTensors[i].id) != i) return false;
  }
  return true;
}());

namespace {

// Text-model prefixes in checkpoints, with the lm_head tensor that goes with each.
struct WeightLayout {
  const char* prefix;
  const char* lm_head_name;
};
constexpr WeightLayout kWeightLayouts[] = {
    {"model.", "lm_head.weight"},                                // text models
    {"language_model.model.", "language_model.lm_head.weight"},  // Gemma 3 multimodal, transformers 4.5x
    {"model.language_model.", "lm_head.weight"},                 // Gemma 3 multimodal, transformers >= 4.52
};

// Escapes the characters Python's `re` treats specially (the prefixes only hold [a-z_.]).
std::string EscapeRegex(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (std::string_view(".^$*+?{}[]\\|()").find(ch) != std::string_view::npos) out += '\\';
    out += ch;
  }
  return out;
}

std::string StripSuffix(const std::string& text, const std::string& suffix) {
  if (text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return text.substr(0, text.size() - suffix.size());
  }
  return text;
}

}  // namespace

Status ResolveWeightNames(ModelConfig& config, const std::vector<std::string>& tensor_names) {
  const std::unordered_set<std::string> names(tensor_names.begin(), tensor_names.end());
  std::string tried;
  for (const WeightLayout& layout : kWeightLayouts) {
    const std::string embed = std::string(layout.prefix) + "embed_tokens.";
    // A BF16 checkpoint stores the matrix; a DF11 one stores the embedding as a compressed unit.
    if (names.count(embed + "weight") || names.count(embed + "encoded_exponent")) {
      config.weight_prefix = layout.prefix;
      config.lm_head_name = layout.lm_head_name;
      return Status::Ok();
    }
    tried += (tried.empty() ? "" : ", ") + embed + "weight";
  }
  return NotFound("no token embedding among " + std::to_string(tensor_names.size()) + " tensors (tried " + tried +
                  " and their DF11 encoded_exponent)");
}

std::vector<const LayerTensorSpec*> LayerTensorsOf(const ModelConfig& config) {
  std::vector<const LayerTensorSpec*> out;
  for (const LayerTensorSpec& spec : kLayerTensors) {
    if (spec.present(config)) out.push_back(&spec);
  }
  return out;
}

std::vector<int64_t> ShapeOf(const LayerTensorSpec& spec, const ModelConfig& config) {
  if (spec.cols == nullptr) return {spec.rows(config)};
  return {spec.rows(config), spec.cols(config)};
}

std::string TensorName(const ModelConfig& config, int64_t layer, const LayerTensorSpec& spec) {
  return config.weight_prefix + "layers." + std::to_string(layer) + "." + spec.name;
}

std::vector<WeightSpec> ExpectedWeights(const ModelConfig& config) {
  std::vector<WeightSpec> out;
  out.push_back({config.weight_prefix + "embed_tokens.weight", {config.vocab_size, config.hidden_size}});
  const std::vector<const LayerTensorSpec*> layer = LayerTensorsOf(config);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    for (const LayerTensorSpec* spec : layer) {
      out.push_back({TensorName(config, l, *spec), ShapeOf(*spec, config), spec->kind});
    }
  }
  out.push_back({config.weight_prefix + "norm.weight", {config.hidden_size}, TensorKind::kNorm});
  if (!config.tie_word_embeddings) out.push_back({config.lm_head_name, {config.vocab_size, config.hidden_size}});
  return out;
}

PatternDict Df11PatternDict(const ModelConfig& config) {
  const std::string prefix = EscapeRegex(config.weight_prefix);
  std::vector<std::string> layer_modules;  // every linear of the layer, in checkpoint order
  for (const LayerTensorSpec* spec : LayerTensorsOf(config)) {
    if (spec->kind == TensorKind::kMatrix) layer_modules.push_back(StripSuffix(spec->name, ".weight"));
  }
  PatternDict dict = {{prefix + "embed_tokens", {}}, {prefix + "layers\\.\\d+", layer_modules}};
  // NOTE: lm_head is listed for tied models too. The reference package compresses every module
  // a pattern matches, and a tied lm_head is a module of its own there: without an lm_head unit
  // it would run with an uninitialised weight. So tied models carry a copy of the embedding as
  // the lm_head unit (see compress.cc), exactly as the reference encoder writes them.
  dict.push_back({EscapeRegex(StripSuffix(config.lm_head_name, ".weight")), {}});
  return dict;
}

}  // namespace df11
