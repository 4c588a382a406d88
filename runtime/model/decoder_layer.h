// The decoder layer of every architecture, written once for every backend. A backend (the CPU's
// fp32 ops in model_step.cc, CUDA's bf16 ops in model_cuda_step.cc) supplies its ops and its
// Linear; each op keeps its backend's rounding, so a DF11 model and its BF16 twin run the same
// ops in the same order on each backend (bit-identical logits). Per layer, as transformers
// computes it:
//   a = attn(norm_in(h))            q/k/v (+bias) -> qk-norm -> rope -> cache -> attention -> o
//   h = h + (sandwich ? norm_post_attn(a) : a)
//   m = mlp(sandwich ? norm_pre_ff(h) : norm_post_attn(h))      down(act(gate) * up)
//   h = h + (sandwich ? norm_post_ff(m) : m)
//
// The Ops contract (E = Ops::Element: float on the CPU, bf16 words on CUDA; shapes row-major):
//   RmsNorm(const E* x, const Vector& w, rows, dim, E* out)  x, out [rows, dim], may alias; the
//       model's eps and (1 + w) flag
//   Linear(const Linear& w, const E* x, tokens, E* y)        y [T, out] = x [T, in] · W^T (+ bias)
//   PrepareAttention(layer, sliding, const E* qkv, q_norm, k_norm, tokens, E* q, E* k, E* v)
//       from the fused projection's rows qkv [T, q | k | v] (or, qkv null, from q, k, v as the
//       separate projections left them): per-head RmsNorm of q and k (q_norm, k_norm: const
//       Vector*, null for none), rope at the batch's positions, q into `q` [T, heads * head_dim],
//       k and v into the layer's KV cache (k, v: [T, kv_heads * head_dim], a backend's scratch);
//       one op so that a backend may fuse it
//   Attention(layer, params, q, E* out)                      attends over the layer's KV cache
//   AddThenNorm(E* hidden, const E* y, const Vector& w, tokens, dim, E* normed)
//       hidden += y, then normed = RmsNorm(hidden) (one op so that a backend may fuse the pair)
//   GatedActivation(act, gate, gate_stride, up, up_stride, tokens, inter, E* out)
//   GateUpActivation(const Linear& w, const E* x, tokens, act, inter, E* gate_up, E* out)
//       out [T, inter] = GatedActivation of Linear(w, x) [T, 2 inter] (gate rows, then up rows),
//       gate_up that linear's scratch (one op so that a backend may fuse the pair)
//   AddInPlace(E* x, const E* y, n)                          the residual add
// Every op returns Status.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "kernels/base/status.h"
#include "kernels/batch_layout.h"
#include "runtime/format/layer_tensors.h"

namespace df11 {

// The weights of one layer as a backend holds them, indexed by LayerTensor: norm weights as
// `Vector`, linears (with their biases) as `Linear`. Slots of tensors the architecture lacks, and
// the linear slots of norms and biases, stay default-constructed.
template <typename Vector, typename Linear>
struct LayerWeightsOf {
  std::array<Vector, kNumLayerTensors> vectors{};
  std::array<Linear, kNumLayerTensors> linears{};

  const Vector& vector(LayerTensor id) const { return vectors[static_cast<int>(id)]; }
  const Linear& linear(LayerTensor id) const { return linears[static_cast<int>(id)]; }
  Vector& vector(LayerTensor id) { return vectors[static_cast<int>(id)]; }
  Linear& linear(LayerTensor id) { return linears[static_cast<int>(id)]; }
};

// The activations of a layer, reused by every layer of a step ([T, ...] rows of new tokens).
template <typename Element>
struct LayerBuffers {
  Element* hidden = nullptr;  // [T, hidden] the residual stream
  Element* normed = nullptr;  // [T, hidden]
  Element* q = nullptr;       // [T, heads * head_dim]
  Element* k = nullptr;       // [T, kv_heads * head_dim]
  Element* v = nullptr;       // [T, kv_heads * head_dim]
  Element* qkv = nullptr;     // [T, (heads + 2 kv_heads) * head_dim] (stacked.qkv)
  Element* attn = nullptr;    // [T, heads * head_dim]
  Element* proj = nullptr;    // [T, hidden] output of o_proj / down_proj
  Element* gate = nullptr;    // [T, inter], or [T, 2 inter] (stacked.gate_up: gate | up)
  Element* up = nullptr;      // [T, inter] (separate gate and up)
  Element* act = nullptr;     // [T, inter]
};

// Which projections a backend runs as one matrix: the checkpoint's fused ones, or (CUDA) separate
// ones it stacked at load (the layer's kQkv / kGateUp linear is then set).
struct StackedLinears {
  bool qkv = false;
  bool gate_up = false;
};

// Lays out the layer's activations for `tokens` new tokens of `c` from `base`, each buffer starting
// at a multiple of `align` elements (buffers a configuration does not use get no room). Returns
// the elements used; with base == nullptr it only counts (`out` untouched).
template <typename Element>
uint64_t LayOutLayerBuffers(const ModelConfig& c, StackedLinears stacked, int64_t tokens, uint64_t align, Element* base,
                            LayerBuffers<Element>* out) {
  const uint64_t T = tokens, H = c.hidden_size, I = c.intermediate_size;
  const uint64_t qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  LayerBuffers<Element> b;
  const std::pair<Element**, uint64_t> fields[] = {{&b.hidden, T * H},
                                                   {&b.normed, T * H},
                                                   {&b.q, T * qd},
                                                   {&b.k, T * kvd},
                                                   {&b.v, T * kvd},
                                                   {&b.qkv, stacked.qkv ? T * (qd + 2 * kvd) : 0},
                                                   {&b.attn, T * qd},
                                                   {&b.proj, T * H},
                                                   {&b.gate, T * I * (stacked.gate_up ? 2 : 1)},
                                                   {&b.up, stacked.gate_up ? 0 : T * I},
                                                   {&b.act, T * I}};
  uint64_t used = 0;
  for (const auto& [field, elements] : fields) {
    if (base != nullptr) *field = base + used;
    used += (elements + align - 1) / align * align;
  }
  if (base != nullptr) *out = b;
  return used;
}

inline Activation ActivationOf(const ModelConfig& c) {
  return c.hidden_act == "gelu_pytorch_tanh" ? Activation::kGeluTanh : Activation::kSilu;
}

// Runs layer `layer` over the T new tokens of the step: b.hidden in, b.hidden out. `normed_in`:
// b.normed already holds the layer's input norm of b.hidden (the previous layer fused it into its
// last residual add). `next_norm` (the next layer's input norm weights, or null): the last residual
// add also leaves next_norm(b.hidden) in b.normed.
template <typename Ops>
Status RunDecoderLayer(Ops& ops, const ModelConfig& c, int64_t layer, const typename Ops::Layer& w,
                       const LayerBuffers<typename Ops::Element>& b, int64_t T, bool normed_in,
                       const typename Ops::Vector* next_norm) {
  using LT = LayerTensor;
  const int64_t H = c.hidden_size, inter = c.intermediate_size;
  const bool sliding = c.layer_is_sliding[layer];
  // Attention block.
  if (!normed_in) DF11_RETURN_IF_ERROR(ops.RmsNorm(b.hidden, w.vector(LT::kInputNorm), T, H, b.normed));
  const typename Ops::Element* qkv = nullptr;
  if (w.linear(LT::kQkv).out_features > 0) {  // rows: q | k | v
    DF11_RETURN_IF_ERROR(ops.Linear(w.linear(LT::kQkv), b.normed, T, b.qkv));
    qkv = b.qkv;
  } else {
    DF11_RETURN_IF_ERROR(ops.Linear(w.linear(LT::kQ), b.normed, T, b.q));
    DF11_RETURN_IF_ERROR(ops.Linear(w.linear(LT::kK), b.normed, T, b.k));
    DF11_RETURN_IF_ERROR(ops.Linear(w.linear(LT::kV), b.normed, T, b.v));
  }
  DF11_RETURN_IF_ERROR(ops.PrepareAttention(layer, sliding, qkv, c.qk_norm ? &w.vector(LT::kQNorm) : nullptr,
                                            c.qk_norm ? &w.vector(LT::kKNorm) : nullptr, T, b.q, b.k, b.v));
  AttentionParams params;
  params.num_heads = c.num_heads;
  params.scale = static_cast<float>(c.attention_scale);
  params.sliding_window = sliding ? c.sliding_window : 0;
  params.softcap = static_cast<float>(c.attn_logit_softcapping);
  DF11_RETURN_IF_ERROR(ops.Attention(layer, params, b.q, b.attn));
  DF11_RETURN_IF_ERROR(ops.Linear(w.linear(LT::kO), b.attn, T, b.proj));
  if (c.sandwich_norms) DF11_RETURN_IF_ERROR(ops.RmsNorm(b.proj, w.vector(LT::kPostAttentionNorm), T, H, b.proj));
  // MLP block.
  const LT mlp_norm = c.sandwich_norms ? LT::kPreFeedforwardNorm : LT::kPostAttentionNorm;
  DF11_RETURN_IF_ERROR(ops.AddThenNorm(b.hidden, b.proj, w.vector(mlp_norm), T, H, b.normed));
  const Activation act = ActivationOf(c);
  if (w.linear(LT::kGateUp).out_features > 0) {  // rows: gate | up
    DF11_RETURN_IF_ERROR(ops.GateUpActivation(w.linear(LT::kGateUp), b.normed, T, act, inter, b.gate, b.act));
  } else {
    DF11_RETURN_IF_ERROR(ops.Linear(w.linear(LT::kGate), b.normed, T, b.gate));
    DF11_RETURN_IF_ERROR(ops.Linear(w.linear(LT::kUp), b.normed, T, b.up));
    DF11_RETURN_IF_ERROR(ops.GatedActivation(act, b.gate, inter, b.up, inter, T, inter, b.act));
  }
  DF11_RETURN_IF_ERROR(ops.Linear(w.linear(LT::kDown), b.act, T, b.proj));
  if (c.sandwich_norms) DF11_RETURN_IF_ERROR(ops.RmsNorm(b.proj, w.vector(LT::kPostFeedforwardNorm), T, H, b.proj));
  if (next_norm != nullptr) return ops.AddThenNorm(b.hidden, b.proj, *next_norm, T, H, b.normed);
  return ops.AddInPlace(b.hidden, b.proj, T * H);
}

// Runs every layer of `layers` in turn, each fusing its last residual add with the next one's
// input norm.
template <typename Ops, typename Layers>
Status RunDecoderLayers(Ops& ops, const ModelConfig& c, const Layers& layers,
                        const LayerBuffers<typename Ops::Element>& b, int64_t T) {
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const bool last = layer + 1 == c.num_layers;
    const typename Ops::Vector* next = last ? nullptr : &layers[layer + 1].vector(LayerTensor::kInputNorm);
    DF11_RETURN_IF_ERROR(RunDecoderLayer(ops, c, layer, layers[layer], b, T, layer > 0, next));
  }
  return Status::Ok();
}

}  // namespace df11
