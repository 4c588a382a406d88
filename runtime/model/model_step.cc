// Model::Step: validation of a ragged batch, the generic decoder layer, logits (see model.h).
// Per layer, as transformers computes it:
//   a = attn(norm_in(h))            q/k/v (+bias) -> qk-norm -> rope -> cache -> attention -> o
//   h = h + (sandwich ? norm_post_attn(a) : a)
//   m = mlp(sandwich ? norm_pre_ff(h) : norm_post_attn(h))      down(act(gate) * up)
//   h = h + (sandwich ? norm_post_ff(m) : m)
#include <algorithm>
#include <cmath>
#include <tuple>

#include "kernels/cpu_ops.h"
#include "kernels/df11_codec.h"
#include "runtime/model/model.h"

namespace df11 {

// The step's token layout: new tokens of all sequences concatenated, in sequence order.
struct Model::Plan {
  int64_t num_tokens = 0;
  std::vector<int32_t> tokens;                    // [T]
  std::vector<int64_t> positions;                 // [T]
  std::vector<cpu::AttentionSequence> sequences;  // token ranges, first positions, block tables
  std::vector<float> cos_global, sin_global;      // [T, rotary_dim / 2] per rope kind
  std::vector<float> cos_local, sin_local;
};

// Activations of one layer, reused by every layer.
struct Model::Workspace {
  std::vector<float> normed;    // [T, hidden]
  std::vector<float> q, k, v;   // [T, heads * head_dim], [T, kv_heads * head_dim] x 2
  std::vector<float> qkv;       // [T, (heads + 2 kv_heads) * head_dim] (fused_qkv)
  std::vector<float> attn;      // [T, heads * head_dim]
  std::vector<float> proj;      // [T, hidden] output of o_proj / down_proj
  std::vector<float> gate, up;  // [T, inter] each, or gate = [T, 2 inter] (fused_gate_up)
  std::vector<float> act;       // [T, inter]
};

namespace {

std::string Where(size_t seq) { return "sequence " + std::to_string(seq); }

}  // namespace

Status Model::Validate(const StepInput& input) const {
  if (input.kv_cache == nullptr) return InvalidArgument("step: no KV cache");
  const KvCacheShape& kv = input.kv_cache->shape();
  if (kv.num_layers != config_.num_layers || kv.num_kv_heads != config_.num_kv_heads ||
      kv.head_dim != config_.head_dim) {
    return InvalidArgument("step: KV cache shape (layers " + std::to_string(kv.num_layers) + ", kv heads " +
                           std::to_string(kv.num_kv_heads) + ", head_dim " + std::to_string(kv.head_dim) +
                           ") does not match the model");
  }
  if (input.kv_cache->device() != options_.device) {
    return InvalidArgument(std::string("step: KV cache on ") + DeviceName(input.kv_cache->device()) + ", model on " +
                           DeviceName(options_.device));
  }
  if (input.sequences.empty()) return InvalidArgument("step: no sequences");
  std::vector<int64_t> slots;
  for (size_t s = 0; s < input.sequences.size(); ++s) {
    const SequenceInput& seq = input.sequences[s];
    const int64_t n = static_cast<int64_t>(seq.tokens.size());
    if (n == 0) return InvalidArgument(Where(s) + ": no new tokens");
    for (int64_t i = 0; i < n; ++i) {
      if (seq.tokens[i] < 0 || seq.tokens[i] >= config_.vocab_size) {
        return InvalidArgument(Where(s) + ": token " + std::to_string(i) + " has id " + std::to_string(seq.tokens[i]) +
                               " outside the vocabulary [0, " + std::to_string(config_.vocab_size) + ")");
      }
    }
    if (seq.num_cached < 0) return InvalidArgument(Where(s) + ": negative num_cached");
    if (seq.num_cached + n > config_.max_position_embeddings) {
      return OutOfRange(Where(s) + ": positions up to " + std::to_string(seq.num_cached + n - 1) +
                        " exceed max_position_embeddings " + std::to_string(config_.max_position_embeddings));
    }
    const int64_t needed = input.kv_cache->BlocksFor(seq.num_cached + n);
    if (static_cast<int64_t>(seq.block_table.size()) < needed) {
      return InvalidArgument(Where(s) + ": block table has " + std::to_string(seq.block_table.size()) +
                             " blocks, positions [0, " + std::to_string(seq.num_cached + n) + ") need " +
                             std::to_string(needed));
    }
    for (int64_t b = 0; b < needed; ++b) {
      if (seq.block_table[b] < 0 || seq.block_table[b] >= kv.num_blocks) {
        return OutOfRange(Where(s) + ": block_table[" + std::to_string(b) +
                          "] = " + std::to_string(seq.block_table[b]) + " is outside the cache's " +
                          std::to_string(kv.num_blocks) + " blocks");
      }
    }
    for (int64_t index : seq.logits_for) {
      if (index < 0 || index >= n) {
        return InvalidArgument(Where(s) + ": logits_for index " + std::to_string(index) + " outside [0, " +
                               std::to_string(n) + ")");
      }
    }
    for (int64_t pos = seq.num_cached; pos < seq.num_cached + n; ++pos) {
      slots.push_back(int64_t{seq.block_table[pos / kv.block_size]} * kv.block_size + pos % kv.block_size);
    }
  }
  std::sort(slots.begin(), slots.end());
  if (std::adjacent_find(slots.begin(), slots.end()) != slots.end()) {
    return InvalidArgument("step: two new tokens map to the same KV cache slot (block tables overlap)");
  }
  return Status::Ok();
}

Status Model::Embed(const std::vector<int32_t>& tokens, float* hidden) {
  const int64_t h = config_.hidden_size;
  // NOTE: transformers multiplies by the normalizer cast to the hidden dtype; ours is fp32.
  const float scale = static_cast<float>(config_.embedding_scale);
  if (embedding_.unit == nullptr) {
    DF11_ASSIGN_OR_RETURN(const uint16_t* table, WeightData(embedding_, scratch_));
    cpu::EmbeddingGather(table, tokens, h, scale, hidden);
    return Status::Ok();
  }
  std::vector<uint16_t> row(h);
  for (size_t t = 0; t < tokens.size(); ++t) {  // random access: only this row's chunks decode
    const uint64_t begin = embedding_.unit_offset + static_cast<uint64_t>(tokens[t]) * h;
    DF11_RETURN_IF_ERROR(DecodeUnitCpuFast(embedding_.unit->view, embedding_.unit->layout, begin, begin + h, row.data(),
                                       options_.threads, checkpoint_->dir() + ": " + embedding_.unit->path));
    const int32_t zero = 0;
    cpu::EmbeddingGather(row.data(), std::span<const int32_t>(&zero, 1), h, scale, hidden + t * h);
  }
  return Status::Ok();
}

Status Model::Linear(const LinearWeight& w, const float* x, int64_t tokens, float* y) {
  if (w.unit != nullptr) DF11_RETURN_IF_ERROR(scratch_.Load(*w.unit, checkpoint_->dir(), options_.threads));
  return ApplyLinear(w, scratch_, x, tokens, y, options_.threads);
}

Status Model::AttentionBlock(int64_t layer, const Plan& plan, KvCache& cache, Workspace& ws, float* hidden) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[layer];
  const int64_t T = plan.num_tokens, hd = c.head_dim, qd = c.num_heads * hd, kvd = c.num_kv_heads * hd;
  const int threads = options_.threads;
  const float eps = static_cast<float>(c.rms_norm_eps);
  cpu::RmsNorm(hidden, w.input_norm.data(), T, c.hidden_size, eps, c.norm_adds_one, ws.normed.data(), threads);
  if (c.fused_qkv) {  // rows: q | k | v
    DF11_RETURN_IF_ERROR(Linear(w.qkv, ws.normed.data(), T, ws.qkv.data()));
    for (int64_t t = 0; t < T; ++t) {
      const float* row = &ws.qkv[t * (qd + 2 * kvd)];
      std::copy(row, row + qd, &ws.q[t * qd]);
      std::copy(row + qd, row + qd + kvd, &ws.k[t * kvd]);
      std::copy(row + qd + kvd, row + qd + 2 * kvd, &ws.v[t * kvd]);
    }
  } else {
    DF11_RETURN_IF_ERROR(Linear(w.q, ws.normed.data(), T, ws.q.data()));
    DF11_RETURN_IF_ERROR(Linear(w.k, ws.normed.data(), T, ws.k.data()));
    DF11_RETURN_IF_ERROR(Linear(w.v, ws.normed.data(), T, ws.v.data()));
  }
  if (c.qk_norm) {
    cpu::RmsNorm(ws.q.data(), w.q_norm.data(), T * c.num_heads, hd, eps, c.norm_adds_one, ws.q.data(), threads);
    cpu::RmsNorm(ws.k.data(), w.k_norm.data(), T * c.num_kv_heads, hd, eps, c.norm_adds_one, ws.k.data(), threads);
  }
  const bool sliding = c.layer_is_sliding[layer];
  const RopeKind& rope = sliding ? rope_local_ : rope_global_;
  const float* cos = sliding ? plan.cos_local.data() : plan.cos_global.data();
  const float* sin = sliding ? plan.sin_local.data() : plan.sin_global.data();
  cpu::ApplyRope(ws.q.data(), T, c.num_heads, hd, rope.rotary_dim, cos, sin, threads);
  cpu::ApplyRope(ws.k.data(), T, c.num_kv_heads, hd, rope.rotary_dim, cos, sin, threads);
  const cpu::PagedKvLayer kv = cache.Layer(layer);
  cpu::WriteKv(kv, plan.sequences, ws.k.data(), ws.v.data(), threads);
  const cpu::AttentionParams params{c.num_heads, static_cast<float>(c.attention_scale), sliding ? c.sliding_window : 0,
                                    static_cast<float>(c.attn_logit_softcapping)};
  cpu::PagedAttention(kv, plan.sequences, params, ws.q.data(), ws.attn.data(), threads);
  DF11_RETURN_IF_ERROR(Linear(w.o, ws.attn.data(), T, ws.proj.data()));
  if (c.sandwich_norms) {
    cpu::RmsNorm(ws.proj.data(), w.post_attention_norm.data(), T, c.hidden_size, eps, c.norm_adds_one, ws.proj.data(),
                 threads);
  }
  for (int64_t i = 0; i < T * c.hidden_size; ++i) hidden[i] += ws.proj[i];
  return Status::Ok();
}

Status Model::MlpBlock(int64_t layer, const Plan& plan, Workspace& ws, float* hidden) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[layer];
  const int64_t T = plan.num_tokens, inter = c.intermediate_size;
  const int threads = options_.threads;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const std::vector<float>& norm = c.sandwich_norms ? w.pre_feedforward_norm : w.post_attention_norm;
  cpu::RmsNorm(hidden, norm.data(), T, c.hidden_size, eps, c.norm_adds_one, ws.normed.data(), threads);
  const cpu::Activation act = c.hidden_act == "gelu_pytorch_tanh" ? cpu::Activation::kGeluTanh : cpu::Activation::kSilu;
  if (c.fused_gate_up) {  // rows: gate | up
    DF11_RETURN_IF_ERROR(Linear(w.gate_up, ws.normed.data(), T, ws.gate.data()));
    cpu::GatedActivation(act, ws.gate.data(), 2 * inter, ws.gate.data() + inter, 2 * inter, T, inter, ws.act.data(),
                         threads);
  } else {
    DF11_RETURN_IF_ERROR(Linear(w.gate, ws.normed.data(), T, ws.gate.data()));
    DF11_RETURN_IF_ERROR(Linear(w.up, ws.normed.data(), T, ws.up.data()));
    cpu::GatedActivation(act, ws.gate.data(), inter, ws.up.data(), inter, T, inter, ws.act.data(), threads);
  }
  DF11_RETURN_IF_ERROR(Linear(w.down, ws.act.data(), T, ws.proj.data()));
  if (c.sandwich_norms) {
    cpu::RmsNorm(ws.proj.data(), w.post_feedforward_norm.data(), T, c.hidden_size, eps, c.norm_adds_one, ws.proj.data(),
                 threads);
  }
  for (int64_t i = 0; i < T * c.hidden_size; ++i) hidden[i] += ws.proj[i];
  return Status::Ok();
}

Status Model::Logits(const StepInput& input, const Plan& plan, const float* hidden, StepOutput& output) {
  const int64_t h = config_.hidden_size, vocab = config_.vocab_size;
  output.vocab_size = vocab;
  output.rows.clear();
  for (size_t s = 0; s < input.sequences.size(); ++s) {
    for (int64_t index : input.sequences[s].logits_for) output.rows.emplace_back(static_cast<int64_t>(s), index);
  }
  const int64_t rows = static_cast<int64_t>(output.rows.size());
  output.logits.assign(rows * vocab, 0.0f);
  if (rows == 0) return Status::Ok();
  std::vector<float> selected(rows * h);
  for (int64_t r = 0; r < rows; ++r) {
    const auto [s, index] = output.rows[r];
    const float* src = hidden + (plan.sequences[s].token_begin + index) * h;
    std::copy(src, src + h, &selected[r * h]);
  }
  cpu::RmsNorm(selected.data(), final_norm_.data(), rows, h, static_cast<float>(config_.rms_norm_eps),
               config_.norm_adds_one, selected.data(), options_.threads);
  DF11_RETURN_IF_ERROR(Linear(lm_head_, selected.data(), rows, output.logits.data()));
  if (config_.final_logit_softcapping > 0) {
    cpu::SoftCap(output.logits.data(), rows * vocab, static_cast<float>(config_.final_logit_softcapping));
  }
  return Status::Ok();
}

Status Model::Step(const StepInput& input, StepOutput& output) {
  DF11_RETURN_IF_ERROR(Validate(input));
  if (options_.device == Device::kCuda) return StepCuda(input, output);
  const ModelConfig& c = config_;
  Plan plan;
  for (const SequenceInput& seq : input.sequences) {
    const int64_t n = static_cast<int64_t>(seq.tokens.size());
    plan.sequences.push_back({plan.num_tokens, n, seq.num_cached, seq.block_table});
    plan.tokens.insert(plan.tokens.end(), seq.tokens.begin(), seq.tokens.end());
    for (int64_t i = 0; i < n; ++i) plan.positions.push_back(seq.num_cached + i);
    plan.num_tokens += n;
  }
  const int64_t T = plan.num_tokens;
  for (auto [kind, cos, sin] : {std::tuple{&rope_global_, &plan.cos_global, &plan.sin_global},
                                std::tuple{&rope_local_, &plan.cos_local, &plan.sin_local}}) {
    cos->resize(T * kind->inv_freq.size());
    sin->resize(T * kind->inv_freq.size());
    cpu::RopeTables(kind->inv_freq, plan.positions, cos->data(), sin->data());
  }
  const int64_t qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  Workspace ws;
  ws.normed.resize(T * c.hidden_size);
  ws.q.resize(T * qd);
  ws.k.resize(T * kvd);
  ws.v.resize(T * kvd);
  if (c.fused_qkv) ws.qkv.resize(T * (qd + 2 * kvd));
  ws.attn.resize(T * qd);
  ws.proj.resize(T * c.hidden_size);
  ws.gate.resize(T * c.intermediate_size * (c.fused_gate_up ? 2 : 1));
  if (!c.fused_gate_up) ws.up.resize(T * c.intermediate_size);
  ws.act.resize(T * c.intermediate_size);
  std::vector<float> hidden(T * c.hidden_size);  // [T, hidden] residual stream
  DF11_RETURN_IF_ERROR(Embed(plan.tokens, hidden.data()));
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    DF11_RETURN_IF_ERROR(AttentionBlock(layer, plan, *input.kv_cache, ws, hidden.data()));
    DF11_RETURN_IF_ERROR(MlpBlock(layer, plan, ws, hidden.data()));
  }
  return Logits(input, plan, hidden.data(), output);
}

}  // namespace df11
