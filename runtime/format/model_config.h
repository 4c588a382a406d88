// ModelConfig: a Hugging Face config.json reduced to the flags that drive one generic decoder
// layer (see docs/ARCHITECTURE.md). A model architecture is data: HF `architectures[0]` maps to
// a builder that sets these flags. Both config styles found in the wild load: transformers 4.5x
// (rope_theta, rope_scaling, Gemma 3's nested text_config, sliding_window_pattern,
// rope_local_base_freq) and transformers 5 (rope_parameters, layer_types).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kernels/base/status.h"

namespace df11 {

enum class Arch { kLlama, kMistral, kQwen2, kQwen3, kPhi3, kGemma3 };

// Rotary embedding of one attention kind (global or sliding-window layers).
struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // "default" | "linear" | "llama3"
  double factor = 1.0;           // linear and llama3
  double low_freq_factor = 1.0;  // llama3
  double high_freq_factor = 4.0; // llama3
  int64_t original_max_position_embeddings = 0;  // llama3
  double partial_rotary_factor = 1.0;            // fraction of head_dim rotated (Phi-3 family)

  friend bool operator==(const RopeConfig&, const RopeConfig&) = default;
};

struct ModelConfig {
  std::string architecture;  // HF architectures[0], e.g. "Qwen3ForCausalLM"
  Arch arch = Arch::kLlama;
  std::string model_type;    // text model_type, e.g. "qwen3", "gemma3_text"

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // may differ from hidden_size / num_heads (Mistral-Nemo, Gemma 3, Qwen3)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;

  // Layer flags.
  bool qkv_bias = false;         // Qwen2: biases on q/k/v projections
  bool qk_norm = false;          // Qwen3, Gemma 3: RMSNorm over each head of q and k
  bool fused_qkv = false;        // Phi-3: self_attn.qkv_proj
  bool fused_gate_up = false;    // Phi-3: mlp.gate_up_proj
  bool sandwich_norms = false;   // Gemma 3: post_attention_layernorm / pre_ and post_feedforward_layernorm
  bool norm_adds_one = false;    // Gemma 3: RMSNorm scales by (1 + w)
  std::string hidden_act = "silu";  // "silu" (SwiGLU) | "gelu_pytorch_tanh" (GeGLU tanh)
  double embedding_scale = 1.0;     // Gemma 3: sqrt(hidden_size), applied in bf16 as transformers does
  double attention_scale = 0.0;     // softmax scale; 1/sqrt(head_dim) or 1/sqrt(query_pre_attn_scalar)
  double final_logit_softcapping = 0.0;  // 0 = none
  double attn_logit_softcapping = 0.0;   // 0 = none

  // Attention kinds per layer: true = sliding-window layer.
  int64_t sliding_window = 0;  // 0 = no sliding-window layers
  std::vector<bool> layer_is_sliding;
  RopeConfig rope;             // global (full-attention) layers
  RopeConfig rope_local;       // sliding-window layers (== rope unless the model says otherwise)

  // Prefix of the text model's tensors as found in the checkpoint, e.g. "model." or
  // "language_model.model." (Gemma 3 multimodal, transformers 4.5x) or "model.language_model.".
  std::string weight_prefix = "model.";
  std::string lm_head_name = "lm_head.weight";

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

// Bounds ParseModelConfig enforces before any size is used to allocate or loop: far above every
// published model (Llama 3.1 405B: 126 layers, hidden 16384, intermediate 53248; Gemma 3: vocab
// 262144, head_dim 256), so that a hostile config.json cannot make a load allocate without bound.
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxHeadDim = 1024;
inline constexpr int64_t kMaxHiddenSize = int64_t{1} << 16;
inline constexpr int64_t kMaxIntermediateSize = int64_t{1} << 18;
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 22;
inline constexpr int64_t kMaxPositions = int64_t{1} << 24;  // max_position_embeddings, sliding_window

// Parses a config.json object. `source` names the file in errors. Unsupported architectures or
// values (e.g. an unknown rope_scaling type, hidden_act) are INVALID_ARGUMENT naming the field.
StatusOr<ModelConfig> ParseModelConfig(const nlohmann::json& config, const std::string& source);
// Reads DIR/config.json.
StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);
// Reads one config file (any name). NOT_FOUND if it cannot be opened, INVALID_ARGUMENT if it is
// not JSON or not a supported config; errors name `path`.
StatusOr<ModelConfig> LoadModelConfigFile(const std::string& path);

// Sets weight_prefix and lm_head_name from the tensor names present in a checkpoint (tries the
// known prefixes; NOT_FOUND if the embedding is under none of them).
Status ResolveWeightNames(ModelConfig& config, const std::vector<std::string>& tensor_names);

// What a tensor is to the forward step: a BF16 matrix (linear or embedding), a norm weight, a bias.
enum class TensorKind : uint8_t { kMatrix, kNorm, kBias };

struct WeightSpec {
  std::string name;             // full tensor name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;   // e.g. {num_heads * head_dim, hidden_size}
  TensorKind kind = TensorKind::kMatrix;
};
// Every tensor of the text model's BF16 checkpoint with its shape, in a stable order
// (embedding, layers in order, final norm, lm_head unless tied). Uses weight_prefix.
std::vector<WeightSpec> ExpectedWeights(const ModelConfig& config);

// The DF11 pattern_dict for compressing this model, in published form: ordered pairs of
// (Python regex over module paths, sub-module attribute paths). E.g. for Qwen3:
//   {"model\\.embed_tokens", {}}, {"model\\.layers\\.\\d+", {"self_attn.q_proj", ...}}, {"lm_head", {}}
using PatternDict = std::vector<std::pair<std::string, std::vector<std::string>>>;
PatternDict Df11PatternDict(const ModelConfig& config);

}  // namespace df11
