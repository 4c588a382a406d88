// Every tensor of a decoder layer, declared once. The table below drives the expected-weights list
// and the DF11 pattern_dict (model_config_weights.cc), the CPU load and the CUDA upload of a layer
// (runtime/model), and the random-model presets (through ExpectedWeights). An architecture that
// only needs existing flags is a builder in model_config.cc; a new tensor is one enum value and
// one row here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/format/model_config.h"

namespace df11 {

// Where a tensor goes in the layer (decoder_layer.h reads weights by these ids). In checkpoint
// order: the order ExpectedWeights lists a layer's tensors.
// clang-format off
enum class LayerTensor : uint8_t {
  kInputNorm,
  kQ, kQBias, kK, kKBias, kV, kVBias,  // separate projections (+ Qwen2 biases)
  kQkv,                                // fused q | k | v rows (Phi-3)
  kO,
  kQNorm, kKNorm,                      // per-head RMSNorm of q and k (Qwen3, Gemma 3)
  kPostAttentionNorm,                  // the MLP's input norm, or (sandwich) the attention output's
  kPreFeedforwardNorm, kPostFeedforwardNorm,  // sandwich norms (Gemma 3)
  kGate, kUp,                          // separate MLP projections
  kGateUp,                             // fused gate | up rows (Phi-3)
  kDown,
};
// clang-format on
inline constexpr int kNumLayerTensors = static_cast<int>(LayerTensor::kDown) + 1;

struct LayerTensorSpec {
  LayerTensor id;
  const char* name;  // under "<weight_prefix>layers.<i>.", e.g. "self_attn.q_proj.weight"
  TensorKind kind;   // kMatrix: a linear [rows, cols] whose module is a DF11 unit member
  LayerTensor of;    // kBias: the linear it is added to (else == id)
  bool (*present)(const ModelConfig&);
  int64_t (*rows)(const ModelConfig&);  // out_features, or the vector's length
  int64_t (*cols)(const ModelConfig&);  // in_features; null for vectors
};

namespace layer_dims {
constexpr bool Always(const ModelConfig&) { return true; }
constexpr bool Split(const ModelConfig& c) { return !c.fused_qkv; }
constexpr bool SplitBias(const ModelConfig& c) { return !c.fused_qkv && c.qkv_bias; }
constexpr bool Fused(const ModelConfig& c) { return c.fused_qkv; }
constexpr bool QkNorm(const ModelConfig& c) { return c.qk_norm; }
constexpr bool Sandwich(const ModelConfig& c) { return c.sandwich_norms; }
constexpr bool SplitMlp(const ModelConfig& c) { return !c.fused_gate_up; }
constexpr bool FusedMlp(const ModelConfig& c) { return c.fused_gate_up; }
constexpr int64_t Hidden(const ModelConfig& c) { return c.hidden_size; }
constexpr int64_t HeadDim(const ModelConfig& c) { return c.head_dim; }
constexpr int64_t QRows(const ModelConfig& c) { return c.num_heads * c.head_dim; }
constexpr int64_t KvRows(const ModelConfig& c) { return c.num_kv_heads * c.head_dim; }
constexpr int64_t QkvRows(const ModelConfig& c) { return (c.num_heads + 2 * c.num_kv_heads) * c.head_dim; }
constexpr int64_t Inter(const ModelConfig& c) { return c.intermediate_size; }
constexpr int64_t GateUpRows(const ModelConfig& c) { return 2 * c.intermediate_size; }
}  // namespace layer_dims

inline constexpr LayerTensorSpec kLayerTensors[kNumLayerTensors] = {
    // clang-format off
    // id                               name                                          kind                  of                       present                 rows                    cols
    {LayerTensor::kInputNorm,           "input_layernorm.weight",                     TensorKind::kNorm,   LayerTensor::kInputNorm,  layer_dims::Always,     layer_dims::Hidden,     nullptr},
    {LayerTensor::kQ,                   "self_attn.q_proj.weight",                    TensorKind::kMatrix, LayerTensor::kQ,          layer_dims::Split,      layer_dims::QRows,      layer_dims::Hidden},
    {LayerTensor::kQBias,               "self_attn.q_proj.bias",                      TensorKind::kBias,   LayerTensor::kQ,          layer_dims::SplitBias,  layer_dims::QRows,      nullptr},
    {LayerTensor::kK,                   "self_attn.k_proj.weight",                    TensorKind::kMatrix, LayerTensor::kK,          layer_dims::Split,      layer_dims::KvRows,     layer_dims::Hidden},
    {LayerTensor::kKBias,               "self_attn.k_proj.bias",                      TensorKind::kBias,   LayerTensor::kK,          layer_dims::SplitBias,  layer_dims::KvRows,     nullptr},
    {LayerTensor::kV,                   "self_attn.v_proj.weight",                    TensorKind::kMatrix, LayerTensor::kV,          layer_dims::Split,      layer_dims::KvRows,     layer_dims::Hidden},
    {LayerTensor::kVBias,               "self_attn.v_proj.bias",                      TensorKind::kBias,   LayerTensor::kV,          layer_dims::SplitBias,  layer_dims::KvRows,     nullptr},
    {LayerTensor::kQkv,                 "self_attn.qkv_proj.weight",                  TensorKind::kMatrix, LayerTensor::kQkv,        layer_dims::Fused,      layer_dims::QkvRows,    layer_dims::Hidden},
    {LayerTensor::kO,                   "self_attn.o_proj.weight",                    TensorKind::kMatrix, LayerTensor::kO,          layer_dims::Always,     layer_dims::Hidden,     layer_dims::QRows},
    {LayerTensor::kQNorm,               "self_attn.q_norm.weight",                    TensorKind::kNorm,   LayerTensor::kQNorm,      layer_dims::QkNorm,     layer_dims::HeadDim,    nullptr},
    {LayerTensor::kKNorm,               "self_attn.k_norm.weight",                    TensorKind::kNorm,   LayerTensor::kKNorm,      layer_dims::QkNorm,     layer_dims::HeadDim,    nullptr},
    {LayerTensor::kPostAttentionNorm,   "post_attention_layernorm.weight",            TensorKind::kNorm,   LayerTensor::kPostAttentionNorm,   layer_dims::Always,   layer_dims::Hidden, nullptr},
    {LayerTensor::kPreFeedforwardNorm,  "pre_feedforward_layernorm.weight",           TensorKind::kNorm,   LayerTensor::kPreFeedforwardNorm,  layer_dims::Sandwich, layer_dims::Hidden, nullptr},
    {LayerTensor::kPostFeedforwardNorm, "post_feedforward_layernorm.weight",          TensorKind::kNorm,   LayerTensor::kPostFeedforwardNorm, layer_dims::Sandwich, layer_dims::Hidden, nullptr},
    {LayerTensor::kGate,                "mlp.gate_proj.weight",                       TensorKind::kMatrix, LayerTensor::kGate,       layer_dims::SplitMlp,   layer_dims::Inter,      layer_dims::Hidden},
    {LayerTensor::kUp,                  "mlp.up_proj.weight",                         TensorKind::kMatrix, LayerTensor::kUp,         layer_dims::SplitMlp,   layer_dims::Inter,      layer_dims::Hidden},
    {LayerTensor::kGateUp,              "mlp.gate_up_proj.weight",                    TensorKind::kMatrix, LayerTensor::kGateUp,     layer_dims::FusedMlp,   layer_dims::GateUpRows, layer_dims::Hidden},
    {LayerTensor::kDown,                "mlp.down_proj.weight",                       TensorKind::kMatrix, LayerTensor::kDown,       layer_dims::Always,     layer_dims::Hidden,     layer_dims::Inter},
    // clang-format on
};

// The row of `id` (the table is indexed by id; a static_assert in model_config_weights.cc checks).
inline const LayerTensorSpec& SpecOf(LayerTensor id) { return kLayerTensors[static_cast<int>(id)]; }

// The tensors `config` has in a layer, in checkpoint order.
std::vector<const LayerTensorSpec*> LayerTensorsOf(const ModelConfig& config);

// The shape of a tensor of `config`: {rows, cols} or {rows}.
std::vector<int64_t> ShapeOf(const LayerTensorSpec& spec, const ModelConfig& config);

// "<weight_prefix>layers.<layer>." + spec.name.
std::string TensorName(const ModelConfig& config, int64_t layer, const LayerTensorSpec& spec);

}  // namespace df11
