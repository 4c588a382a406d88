// The tensors a ModelConfig implies: where they live in a checkpoint (ResolveWeightNames), every
// BF16 tensor with its HF name and shape (ExpectedWeights), and the DF11 pattern_dict that groups
// them into compressed units (Df11PatternDict). See model_config.h.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/format/model_config.h"

namespace df11 {
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

// The attention tensors of one layer; `p` ends with "self_attn.".
void AppendAttention(const ModelConfig& c, const std::string& p, std::vector<WeightSpec>& out) {
  const int64_t q = c.num_heads * c.head_dim;
  const int64_t kv = c.num_kv_heads * c.head_dim;
  if (c.fused_qkv) {
    out.push_back({p + "qkv_proj.weight", {q + 2 * kv, c.hidden_size}});  // rows: q | k | v
  } else {
    for (const auto& [name, rows] : {std::pair{"q_proj", q}, std::pair{"k_proj", kv}, std::pair{"v_proj", kv}}) {
      out.push_back({p + name + ".weight", {rows, c.hidden_size}});
      if (c.qkv_bias) out.push_back({p + name + ".bias", {rows}});
    }
  }
  out.push_back({p + "o_proj.weight", {c.hidden_size, q}});
  if (c.qk_norm) {
    out.push_back({p + "q_norm.weight", {c.head_dim}});
    out.push_back({p + "k_norm.weight", {c.head_dim}});
  }
}

// The MLP tensors of one layer; `p` ends with "mlp.".
void AppendMlp(const ModelConfig& c, const std::string& p, std::vector<WeightSpec>& out) {
  if (c.fused_gate_up) {
    out.push_back({p + "gate_up_proj.weight", {2 * c.intermediate_size, c.hidden_size}});  // rows: gate | up
  } else {
    out.push_back({p + "gate_proj.weight", {c.intermediate_size, c.hidden_size}});
    out.push_back({p + "up_proj.weight", {c.intermediate_size, c.hidden_size}});
  }
  out.push_back({p + "down_proj.weight", {c.hidden_size, c.intermediate_size}});
}

void AppendLayer(const ModelConfig& c, int64_t layer, std::vector<WeightSpec>& out) {
  const std::string p = c.weight_prefix + "layers." + std::to_string(layer) + ".";
  out.push_back({p + "input_layernorm.weight", {c.hidden_size}});
  AppendAttention(c, p + "self_attn.", out);
  // Gemma 3 normalizes the attention output with post_attention_layernorm and wraps the MLP in
  // pre_/post_feedforward_layernorm; others use post_attention_layernorm as the MLP's input norm.
  out.push_back({p + "post_attention_layernorm.weight", {c.hidden_size}});
  if (c.sandwich_norms) {
    out.push_back({p + "pre_feedforward_layernorm.weight", {c.hidden_size}});
    out.push_back({p + "post_feedforward_layernorm.weight", {c.hidden_size}});
  }
  AppendMlp(c, p + "mlp.", out);
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

std::vector<WeightSpec> ExpectedWeights(const ModelConfig& config) {
  std::vector<WeightSpec> out;
  out.push_back({config.weight_prefix + "embed_tokens.weight", {config.vocab_size, config.hidden_size}});
  for (int64_t layer = 0; layer < config.num_layers; ++layer) AppendLayer(config, layer, out);
  out.push_back({config.weight_prefix + "norm.weight", {config.hidden_size}});
  if (!config.tie_word_embeddings) out.push_back({config.lm_head_name, {config.vocab_size, config.hidden_size}});
  return out;
}

PatternDict Df11PatternDict(const ModelConfig& config) {
  const std::string prefix = EscapeRegex(config.weight_prefix);
  std::vector<std::string> layer_modules;
  if (config.fused_qkv) {
    layer_modules = {"self_attn.qkv_proj", "self_attn.o_proj"};
  } else {
    layer_modules = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"};
  }
  if (config.fused_gate_up) {
    layer_modules.insert(layer_modules.end(), {"mlp.gate_up_proj", "mlp.down_proj"});
  } else {
    layer_modules.insert(layer_modules.end(), {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"});
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
