// Parses Hugging Face config.json files into ModelConfig (see model_config.h). One table maps
// HF `architectures[0]` to the defaults of its transformers config class and a small function
// setting its layer flags; everything else (sizes, rope, layer kinds, validation) is shared.
// Errors are INVALID_ARGUMENT "<file>: <field>: <problem>" and nothing here throws.
#include "runtime/format/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "runtime/format/model_config_reader.h"

namespace df11 {
namespace {

using Json = nlohmann::json;

// Values a transformers config class uses for keys a config.json leaves out (or sets to null).
struct ArchDefaults {
  bool sizes_required = true;  // false: every size has a default (Gemma3TextConfig)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // 0: num_heads
  int64_t head_dim = 0;      // 0: hidden_size / num_heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  int64_t sliding_window = 0;  // used only where the SlidingRule reads a window
  const char* act_key = "hidden_act";
  const char* hidden_act = "silu";
  const char* model_type = "";
};

// How an architecture assigns sliding-window attention to layers when `layer_types` is absent.
enum class SlidingRule {
  kNone,              // Llama: full attention everywhere
  kAllIfWindow,       // Mistral, Phi-3: every layer, iff sliding_window is non-null
  kQwenWindowLayers,  // Qwen2/3: layers >= max_window_layers, iff use_sliding_window
  kGemmaPattern,      // Gemma 3: layer i is sliding iff (i + 1) % sliding_window_pattern != 0
};

struct ArchSpec {
  const char* architecture;  // HF architectures[0]
  Arch arch;
  bool nested_text_config;  // the text model's keys live under "text_config"
  ArchDefaults defaults;
  SlidingRule sliding;
  Status (*set_flags)(const ConfigReader& text, ModelConfig& config);
};

// Architectures whose attention/MLP projections have no bias terms.
Status RejectBiases(const ConfigReader& r) {
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    bool bias = false;
    DF11_RETURN_IF_ERROR(r.Bool(key, bias));
    if (bias) return r.Error(key, "unsupported value true (projection biases are not supported)");
  }
  return Status::Ok();
}

Status SetLlamaFlags(const ConfigReader& r, ModelConfig& c) { return RejectBiases(r); }

// Qwen2Attention: q/k/v always carry a bias, o_proj never (no config key).
Status SetQwen2Flags(const ConfigReader& r, ModelConfig& c) {
  c.qkv_bias = true;
  return Status::Ok();
}

Status SetQwen3Flags(const ConfigReader& r, ModelConfig& c) {
  c.qk_norm = true;
  return RejectBiases(r);
}

Status SetPhi3Flags(const ConfigReader& r, ModelConfig& c) {
  c.fused_qkv = true;
  c.fused_gate_up = true;
  return RejectBiases(r);
}

// Gemma 3: sandwich norms scaled by (1 + w), qk-norm, embeddings scaled by sqrt(hidden_size),
// softmax scale 1/sqrt(query_pre_attn_scalar) (not head_dim), optional tanh soft-capping.
Status SetGemma3Flags(const ConfigReader& r, ModelConfig& c) {
  c.qk_norm = true;
  c.sandwich_norms = true;
  c.norm_adds_one = true;
  c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
  double query_pre_attn_scalar = 256.0;
  DF11_RETURN_IF_ERROR(r.Double("query_pre_attn_scalar", query_pre_attn_scalar));
  if (!(query_pre_attn_scalar > 0)) return r.Error("query_pre_attn_scalar", "must be positive");
  c.attention_scale = 1.0 / std::sqrt(query_pre_attn_scalar);
  DF11_RETURN_IF_ERROR(r.Double("final_logit_softcapping", c.final_logit_softcapping));
  DF11_RETURN_IF_ERROR(r.Double("attn_logit_softcapping", c.attn_logit_softcapping));
  if (c.final_logit_softcapping < 0) return r.Error("final_logit_softcapping", "must not be negative");
  if (c.attn_logit_softcapping < 0) return r.Error("attn_logit_softcapping", "must not be negative");
  // NOTE: transformers' Gemma 3 attention does not apply attn_logit_softcapping (Gemma 2's did);
  // published Gemma 3 configs leave it null. Validated above, then ignored to match transformers.
  c.attn_logit_softcapping = 0.0;
  return RejectBiases(r);
}

constexpr ArchDefaults kQwenDefaults{.max_position_embeddings = 32768, .sliding_window = 4096};
constexpr ArchDefaults kGemma3Defaults{.sizes_required = false,
                                       .vocab_size = 262208,
                                       .hidden_size = 2304,
                                       .intermediate_size = 9216,
                                       .num_layers = 26,
                                       .num_heads = 8,
                                       .num_kv_heads = 4,
                                       .head_dim = 256,
                                       .max_position_embeddings = 131072,
                                       .rms_norm_eps = 1e-6,
                                       .rope_theta = 1000000.0,
                                       .tie_word_embeddings = true,
                                       .sliding_window = 4096,
                                       .act_key = "hidden_activation",
                                       .hidden_act = "gelu_pytorch_tanh",
                                       .model_type = "gemma3_text"};

ArchDefaults WithModelType(ArchDefaults d, const char* model_type) {
  d.model_type = model_type;
  return d;
}

// Defaults follow LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, Phi3Config and
// Gemma3TextConfig (transformers 4.5x).
const ArchSpec kArchSpecs[] = {
    {"LlamaForCausalLM", Arch::kLlama, false, ArchDefaults{.model_type = "llama"}, SlidingRule::kNone, SetLlamaFlags},
    {"MistralForCausalLM", Arch::kMistral, false,
     ArchDefaults{.max_position_embeddings = 4096 * 32, .sliding_window = 4096, .model_type = "mistral"},
     SlidingRule::kAllIfWindow, SetLlamaFlags},
    {"Qwen2ForCausalLM", Arch::kQwen2, false, WithModelType(kQwenDefaults, "qwen2"), SlidingRule::kQwenWindowLayers,
     SetQwen2Flags},
    {"Qwen3ForCausalLM", Arch::kQwen3, false, WithModelType(kQwenDefaults, "qwen3"), SlidingRule::kQwenWindowLayers,
     SetQwen3Flags},
    {"Phi3ForCausalLM", Arch::kPhi3, false,
     ArchDefaults{.max_position_embeddings = 4096, .rms_norm_eps = 1e-5, .model_type = "phi3"},
     SlidingRule::kAllIfWindow, SetPhi3Flags},
    {"Gemma3ForCausalLM", Arch::kGemma3, false, kGemma3Defaults, SlidingRule::kGemmaPattern, SetGemma3Flags},
    {"Gemma3ForConditionalGeneration", Arch::kGemma3, true, kGemma3Defaults, SlidingRule::kGemmaPattern,
     SetGemma3Flags},
};

const ArchSpec* FindArchSpec(const std::string& architecture) {
  for (const ArchSpec& spec : kArchSpecs) {
    if (architecture == spec.architecture) return &spec;
  }
  return nullptr;
}

std::string SupportedArchitectures() {
  std::string names;
  for (const ArchSpec& spec : kArchSpecs) names += (names.empty() ? "" : ", ") + std::string(spec.architecture);
  return names;
}

// architectures[0]: a non-empty array whose first entry is a string.
StatusOr<std::string> ReadArchitecture(const ConfigReader& top) {
  if (!top.Has("architectures")) return top.Error("architectures", "missing required key");
  const Json& list = top.At("architectures");
  if (!list.is_array()) return top.Error("architectures", std::string("expected an array, got ") + list.type_name());
  if (list.empty()) return top.Error("architectures", "must not be empty");
  if (!list[0].is_string()) {
    return top.Error("architectures[0]", std::string("expected a string, got ") + list[0].type_name());
  }
  return list[0].get<std::string>();
}

struct SizeField {
  const char* key;
  int64_t ModelConfig::*member;
  int64_t ArchDefaults::*fallback;
  int64_t max;  // sane bound, far above every published model, checked before anything is sized
};
constexpr SizeField kSizeFields[] = {
    {"vocab_size", &ModelConfig::vocab_size, &ArchDefaults::vocab_size, kMaxVocabSize},
    {"hidden_size", &ModelConfig::hidden_size, &ArchDefaults::hidden_size, kMaxHiddenSize},
    {"intermediate_size", &ModelConfig::intermediate_size, &ArchDefaults::intermediate_size, kMaxIntermediateSize},
    {"num_hidden_layers", &ModelConfig::num_layers, &ArchDefaults::num_layers, kMaxLayers},
    {"num_attention_heads", &ModelConfig::num_heads, &ArchDefaults::num_heads, kMaxHeads},
};

// Head counts and head_dim; num_heads must already be valid. Contract: on OK, num_kv_heads
// divides num_heads and head_dim > 0.
Status ReadHeads(const ConfigReader& r, const ArchDefaults& d, ModelConfig& c) {
  c.num_kv_heads = d.num_kv_heads > 0 ? d.num_kv_heads : c.num_heads;
  DF11_RETURN_IF_ERROR(r.Int("num_key_value_heads", c.num_kv_heads));
  if (c.num_kv_heads <= 0)
    return r.Error("num_key_value_heads", "must be positive, got " + std::to_string(c.num_kv_heads));
  if (c.num_heads % c.num_kv_heads != 0) {
    return r.Error("num_key_value_heads", "num_attention_heads " + std::to_string(c.num_heads) +
                                              " is not a multiple of num_key_value_heads " +
                                              std::to_string(c.num_kv_heads));
  }
  if (r.Has("head_dim")) {
    DF11_RETURN_IF_ERROR(r.Int("head_dim", c.head_dim));
  } else if (d.head_dim > 0) {
    c.head_dim = d.head_dim;
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      return r.Error("head_dim", "absent and hidden_size " + std::to_string(c.hidden_size) +
                                     " is not a multiple of num_attention_heads " + std::to_string(c.num_heads));
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim <= 0) return r.Error("head_dim", "must be positive, got " + std::to_string(c.head_dim));
  if (c.head_dim > kMaxHeadDim) {
    return r.Error("head_dim", std::to_string(c.head_dim) + " is above the supported maximum " + std::to_string(kMaxHeadDim));
  }
  return Status::Ok();
}

// Sizes, norms, activation, tying. Contract: on OK every size is positive.
Status ReadSizes(const ConfigReader& r, const ArchDefaults& d, ModelConfig& c) {
  for (const SizeField& f : kSizeFields) {
    c.*f.member = d.*f.fallback;
    DF11_RETURN_IF_ERROR(d.sizes_required ? r.RequiredInt(f.key, c.*f.member) : r.Int(f.key, c.*f.member));
    if (c.*f.member <= 0) return r.Error(f.key, "must be positive, got " + std::to_string(c.*f.member));
    if (c.*f.member > f.max) {
      return r.Error(f.key, std::to_string(c.*f.member) + " is above the supported maximum " + std::to_string(f.max));
    }
  }
  DF11_RETURN_IF_ERROR(ReadHeads(r, d, c));
  c.max_position_embeddings = d.max_position_embeddings;
  DF11_RETURN_IF_ERROR(r.Int("max_position_embeddings", c.max_position_embeddings));
  if (c.max_position_embeddings <= 0) return r.Error("max_position_embeddings", "must be positive");
  if (c.max_position_embeddings > kMaxPositions) {
    return r.Error("max_position_embeddings", std::to_string(c.max_position_embeddings) +
                                                  " is above the supported maximum " + std::to_string(kMaxPositions));
  }
  c.rms_norm_eps = d.rms_norm_eps;
  DF11_RETURN_IF_ERROR(r.Double("rms_norm_eps", c.rms_norm_eps));
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) return r.Error("rms_norm_eps", "must be in (0, 1)");
  c.tie_word_embeddings = d.tie_word_embeddings;
  DF11_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", c.tie_word_embeddings));
  c.hidden_act = d.hidden_act;
  DF11_RETURN_IF_ERROR(r.String(d.act_key, c.hidden_act));
  if (c.hidden_act != "silu" && c.hidden_act != "gelu_pytorch_tanh") {
    return r.Error(d.act_key, "unsupported value \"" + c.hidden_act + "\" (supported: silu, gelu_pytorch_tanh)");
  }
  c.model_type = d.model_type;
  return r.String("model_type", c.model_type);
}

// layer_types (transformers >= 4.53 / 5): one of "sliding_attention" | "full_attention" per layer.
Status ReadLayerTypes(const ConfigReader& r, ModelConfig& c) {
  const Json& types = r.At("layer_types");
  if (!types.is_array()) return r.Error("layer_types", std::string("expected an array, got ") + types.type_name());
  if (static_cast<int64_t>(types.size()) != c.num_layers) {
    return r.Error("layer_types", "has " + std::to_string(types.size()) + " entries, num_hidden_layers is " +
                                      std::to_string(c.num_layers));
  }
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string field = "layer_types[" + std::to_string(i) + "]";
    if (!types[i].is_string()) return r.Error(field, std::string("expected a string, got ") + types[i].type_name());
    const std::string type = types[i].get<std::string>();
    if (type != "sliding_attention" && type != "full_attention") {
      return r.Error(field, "unsupported value \"" + type + "\" (supported: sliding_attention, full_attention)");
    }
    c.layer_is_sliding[i] = type == "sliding_attention";
  }
  return Status::Ok();
}

// Gemma 3 before layer_types: sliding_window_pattern (4.5x) or _sliding_window_pattern (later
// saves), default 6. Layer i is global iff (i + 1) % pattern == 0.
Status ApplyGemmaPattern(const ConfigReader& r, ModelConfig& c) {
  const char* key = r.Has("sliding_window_pattern") || !r.Has("_sliding_window_pattern") ? "sliding_window_pattern"
                                                                                         : "_sliding_window_pattern";
  int64_t pattern = 6;
  DF11_RETURN_IF_ERROR(r.Int(key, pattern));
  if (pattern <= 0) return r.Error(key, "must be positive, got " + std::to_string(pattern));
  for (int64_t i = 0; i < c.num_layers; ++i) c.layer_is_sliding[i] = (i + 1) % pattern != 0;
  return Status::Ok();
}

// Qwen2/Qwen3: sliding only with use_sliding_window, and only for layers >= max_window_layers.
Status ApplyQwenWindowLayers(const ConfigReader& r, int64_t window, ModelConfig& c) {
  bool use_sliding_window = false;
  int64_t max_window_layers = 28;
  DF11_RETURN_IF_ERROR(r.Bool("use_sliding_window", use_sliding_window));
  DF11_RETURN_IF_ERROR(r.Int("max_window_layers", max_window_layers));
  if (!use_sliding_window || window <= 0) return Status::Ok();
  for (int64_t i = std::max<int64_t>(max_window_layers, 0); i < c.num_layers; ++i) c.layer_is_sliding[i] = true;
  return Status::Ok();
}

// Sets layer_is_sliding ([num_layers]) and sliding_window (0 when no layer slides).
Status ReadLayerKinds(const ConfigReader& r, const ArchDefaults& d, SlidingRule rule, ModelConfig& c) {
  c.layer_is_sliding.assign(c.num_layers, false);
  // Absent: the config class default; null: no sliding window (Mistral-Nemo, Phi-4).
  int64_t window = r.Contains("sliding_window") ? 0 : d.sliding_window;
  DF11_RETURN_IF_ERROR(r.Int("sliding_window", window));
  if (r.Has("layer_types")) {
    DF11_RETURN_IF_ERROR(ReadLayerTypes(r, c));
  } else if (rule == SlidingRule::kGemmaPattern) {
    DF11_RETURN_IF_ERROR(ApplyGemmaPattern(r, c));
  } else if (rule == SlidingRule::kQwenWindowLayers) {
    DF11_RETURN_IF_ERROR(ApplyQwenWindowLayers(r, window, c));
  } else if (rule == SlidingRule::kAllIfWindow && window > 0) {
    c.layer_is_sliding.assign(c.num_layers, true);
  }
  const bool any_sliding =
      std::find(c.layer_is_sliding.begin(), c.layer_is_sliding.end(), true) != c.layer_is_sliding.end();
  if (any_sliding && window <= 0) {
    return r.Error("sliding_window", "must be positive when layers use sliding-window attention");
  }
  if (any_sliding && window > kMaxPositions) {
    return r.Error("sliding_window", std::to_string(window) + " is above the supported maximum " + std::to_string(kMaxPositions));
  }
  c.sliding_window = any_sliding ? window : 0;
  return Status::Ok();
}

// The text model's keys: `r` is the top level or text_config.
Status ParseText(const ConfigReader& r, const ArchSpec& spec, ModelConfig& c) {
  const ArchDefaults& d = spec.defaults;
  DF11_RETURN_IF_ERROR(ReadSizes(r, d, c));
  RopeConfig base;
  base.theta = d.rope_theta;
  std::optional<RopeConfig> local_base;
  if (spec.arch == Arch::kGemma3) {  // sliding layers: plain rope at rope_local_base_freq
    local_base = RopeConfig{};
    DF11_RETURN_IF_ERROR(r.Double("rope_local_base_freq", local_base->theta));
    if (!(local_base->theta > 0)) return r.Error("rope_local_base_freq", "must be positive");
  }
  DF11_RETURN_IF_ERROR(ReadRope(r, base, local_base, c.rope, c.rope_local));
  DF11_RETURN_IF_ERROR(ReadLayerKinds(r, d, spec.sliding, c));
  c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  return spec.set_flags(r, c);
}

StatusOr<ModelConfig> ParseImpl(const Json& config, const std::string& source) {
  if (!config.is_object()) {
    return InvalidArgument(source + ": expected a JSON object, got " + std::string(config.type_name()));
  }
  const ConfigReader top(config, source, "");
  DF11_ASSIGN_OR_RETURN(const std::string architecture, ReadArchitecture(top));
  const ArchSpec* spec = FindArchSpec(architecture);
  if (spec == nullptr) {
    return top.Error("architectures[0]",
                     "unsupported architecture \"" + architecture + "\" (supported: " + SupportedArchitectures() + ")");
  }
  ModelConfig c;
  c.architecture = architecture;
  c.arch = spec->arch;
  if (!spec->nested_text_config) {
    DF11_RETURN_IF_ERROR(ParseText(top, *spec, c));
    return c;
  }
  // Gemma3ForConditionalGeneration: an absent text_config means Gemma3TextConfig() defaults.
  static const Json kEmptyObject = Json::object();
  ConfigReader text(kEmptyObject, source, "text_config.");
  if (top.Has("text_config")) {
    DF11_ASSIGN_OR_RETURN(text, top.Object("text_config"));
  }
  DF11_RETURN_IF_ERROR(ParseText(text, *spec, c));
  // transformers ties through the text config; a top-level key counts only if it has none.
  if (!text.Has("tie_word_embeddings")) DF11_RETURN_IF_ERROR(top.Bool("tie_word_embeddings", c.tie_word_embeddings));
  c.weight_prefix = "language_model.model.";  // transformers 4.5x; ResolveWeightNames may change it
  c.lm_head_name = "language_model.lm_head.weight";
  return c;
}

}  // namespace

StatusOr<ModelConfig> ParseModelConfig(const nlohmann::json& config, const std::string& source) {
  // NOTE: the readers check JSON types before every get<>(); this is a last line of defence so
  // that no nlohmann exception can escape into the daemon.
  try {
    return ParseImpl(config, source);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(source + ": " + e.what());
  } catch (const std::exception& e) {
    return Internal(source + ": " + e.what());
  }
}

StatusOr<ModelConfig> LoadModelConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return DataLoss(path + ": read error");
  try {
    return ParseModelConfig(Json::parse(text.str()), path);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(path + ": invalid JSON: " + e.what());
  }
}

StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) { return LoadModelConfigFile(dir + "/config.json"); }

}  // namespace df11
