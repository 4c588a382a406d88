// Model::Step: validation of a ragged batch, the CPU backend of the decoder layer (fp32
// activations), logits (see model.h and decoder_layer.h).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include "kernels/base/parallel.h"
#include "kernels/cpu_ops.h"
#include "kernels/df11_codec.h"
#include "runtime/model/model.h"
#include "runtime/model/step_batch.h"

namespace df11 {

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
  int sampled = 0, unsampled = 0;  // sequences with logits rows that ask for sampling / do not
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
    if (!seq.logits_for.empty()) ++(seq.sample ? sampled : unsampled);
    for (int64_t pos = seq.num_cached; pos < seq.num_cached + n; ++pos) {
      slots.push_back(int64_t{seq.block_table[pos / kv.block_size]} * kv.block_size + pos % kv.block_size);
    }
  }
  std::sort(slots.begin(), slots.end());
  if (std::adjacent_find(slots.begin(), slots.end()) != slots.end()) {
    return InvalidArgument("step: two new tokens map to the same KV cache slot (block tables overlap)");
  }
  if (sampled > 0 && unsampled > 0) {
    return InvalidArgument("step: " + std::to_string(sampled) + " sequences ask for sampling and " +
                           std::to_string(unsampled) + " for logits; a step does one or the other");
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

// The CPU ops of the decoder layer (decoder_layer.h): fp32 activations, BF16 weights upcast
// exactly, fp32 accumulation.
struct Model::CpuOps {
  using Element = float;
  using Vector = std::vector<float>;
  using Layer = LayerWeights;

  Model& model;
  const BatchLayout batch;  // host arrays of the step
  KvCache& cache;
  const std::array<std::vector<float>, 2>& cos;  // [T, rotary_dim / 2] per rope kind: global, sliding
  const std::array<std::vector<float>, 2>& sin;

  int threads() const { return model.options_.threads; }
  float eps() const { return static_cast<float>(model.config_.rms_norm_eps); }

  Status RmsNorm(const float* x, const std::vector<float>& w, int64_t rows, int64_t dim, float* out) {
    cpu::RmsNorm(x, w.data(), rows, dim, eps(), model.config_.norm_adds_one, out, threads());
    return Status::Ok();
  }
  Status Linear(const LinearWeight& w, const float* x, int64_t tokens, float* y) {
    return model.Linear(w, x, tokens, y);
  }
  // Split, qk-norm, rope, KV store in turn.
  Status PrepareAttention(int64_t layer, bool sliding, const float* qkv, const Vector* q_norm, const Vector* k_norm,
                          int64_t tokens, float* q, float* k, float* v) {
    const ModelConfig& c = model.config_;
    const int64_t hd = c.head_dim, qd = c.num_heads * hd, kvd = c.num_kv_heads * hd;
    if (qkv != nullptr) cpu::SplitColumns(qkv, tokens, qd, kvd, kvd, q, k, v);
    if (q_norm != nullptr) DF11_RETURN_IF_ERROR(RmsNorm(q, *q_norm, tokens * c.num_heads, hd, q));
    if (k_norm != nullptr) DF11_RETURN_IF_ERROR(RmsNorm(k, *k_norm, tokens * c.num_kv_heads, hd, k));
    const int64_t rotary_dim = (sliding ? model.rope_local_ : model.rope_global_).rotary_dim;
    cpu::ApplyRope(q, tokens, c.num_heads, hd, rotary_dim, cos[sliding].data(), sin[sliding].data(), threads());
    cpu::ApplyRope(k, tokens, c.num_kv_heads, hd, rotary_dim, cos[sliding].data(), sin[sliding].data(), threads());
    cpu::WriteKv(cache.Layer(layer), batch, k, v, threads());
    return Status::Ok();
  }
  Status Attention(int64_t layer, const AttentionParams& params, const float* q, float* out) {
    cpu::PagedAttention(cache.Layer(layer), batch, params, q, out, threads());
    return Status::Ok();
  }
  Status AddThenNorm(float* hidden, const float* y, const std::vector<float>& w, int64_t tokens, int64_t dim,
                     float* normed) {
    cpu::AddInPlace(hidden, y, tokens * dim);
    return RmsNorm(hidden, w, tokens, dim, normed);
  }
  Status GatedActivation(Activation act, const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
                         int64_t tokens, int64_t inter, float* out) {
    cpu::GatedActivation(act, gate, gate_stride, up, up_stride, tokens, inter, out, threads());
    return Status::Ok();
  }
  Status GateUpActivation(const LinearWeight& w, const float* x, int64_t tokens, Activation act, int64_t inter,
                          float* gate_up, float* out) {
    DF11_RETURN_IF_ERROR(Linear(w, x, tokens, gate_up));
    return GatedActivation(act, gate_up, 2 * inter, gate_up + inter, 2 * inter, tokens, inter, out);
  }
  Status AddInPlace(float* x, const float* y, int64_t n) {
    cpu::AddInPlace(x, y, n);
    return Status::Ok();
  }
};

Status Model::Logits(const StepBatch& batch, const float* hidden, StepOutput& output) {
  const int64_t h = config_.hidden_size, vocab = config_.vocab_size;
  output.vocab_size = vocab;
  output.rows = batch.rows;
  const int64_t rows = static_cast<int64_t>(batch.rows.size());
  output.logits.assign(rows * vocab, 0.0f);
  if (rows == 0) return Status::Ok();
  std::vector<float> selected(rows * h);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = hidden + int64_t{batch.row_tokens[r]} * h;
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
  DF11_RETURN_IF_ERROR(Launch(input, output));
  return Collect(output);
}

Status Model::Launch(const StepInput& input, StepOutput& output) {
  DF11_RETURN_IF_ERROR(NoStepInFlight());
  if (offloaded_)
    return FailedPrecondition(checkpoint_->dir() + ": the weights are offloaded to host memory (Restore first)");
  DF11_RETURN_IF_ERROR(Validate(input));
  if (options_.device == Device::kCuda) {
    DF11_RETURN_IF_ERROR(LaunchCuda(input, output));
  } else {
    DF11_RETURN_IF_ERROR(StepCpu(input, output));
  }
  step_in_flight_ = true;
  return Status::Ok();
}

Status Model::NoStepInFlight() const {
  if (step_in_flight_) return FailedPrecondition(checkpoint_->dir() + ": a step is in flight (Collect it first)");
  return Status::Ok();
}

Status Model::Collect(StepOutput& output) {
  if (!step_in_flight_) return FailedPrecondition(checkpoint_->dir() + ": no step in flight to collect");
  step_in_flight_ = false;
  return options_.device == Device::kCuda ? CollectCuda(output) : Status::Ok();
}

Status Model::StepCpu(const StepInput& input, StepOutput& output) {
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& c = config_;
  const StepBatch batch = BuildStepBatch(input, input.kv_cache->shape().block_size);
  const int64_t T = batch.num_tokens();
  std::array<std::vector<float>, 2> cos, sin;  // rope tables per kind: global, sliding
  for (const bool sliding : {false, true}) {
    const std::vector<float>& inv_freq = (sliding ? rope_local_ : rope_global_).inv_freq;
    cos[sliding].resize(T * inv_freq.size());
    sin[sliding].resize(T * inv_freq.size());
    cpu::RopeTables(inv_freq, batch.arrays.positions, cos[sliding].data(), sin[sliding].data());
  }
  const StackedLinears stacked{c.fused_qkv, c.fused_gate_up};
  std::vector<float> activations(LayOutLayerBuffers<float>(c, stacked, T, 1, nullptr, nullptr));
  LayerBuffers<float> buffers;
  LayOutLayerBuffers(c, stacked, T, 1, activations.data(), &buffers);
  CpuOps ops{*this, batch.arrays.HostLayout(), *input.kv_cache, cos, sin};
  DF11_RETURN_IF_ERROR(Embed(batch.tokens, buffers.hidden));
  DF11_RETURN_IF_ERROR(RunDecoderLayers(ops, c, layers_, buffers, T));
  DF11_RETURN_IF_ERROR(Logits(batch, buffers.hidden, output));
  SampleOnHost(input, output);
  output.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

bool Model::SamplesRows(const StepInput& input, const StepOutput& output) {
  return !output.rows.empty() && input.sequences[output.rows[0].first].sample.has_value();
}

void Model::SampleOnHost(const StepInput& input, StepOutput& output) {
  output.samples.clear();
  if (!SamplesRows(input, output)) return;
  const int64_t rows = static_cast<int64_t>(output.rows.size()), vocab = output.vocab_size;
  output.samples.assign(rows, StatusOr<SampleResult>(Internal("not sampled")));
  // Rows are independent and pure: they run in parallel, a few per thread.
  const int64_t per_thread_rows = 4;
  ParallelFor(rows, static_cast<int>((rows + per_thread_rows - 1) / per_thread_rows), [&](int64_t r0, int64_t r1, int) {
    for (int64_t row = r0; row < r1; ++row) {
      const RowSampling& s = *input.sequences[output.rows[row].first].sample;
      output.samples[row] =
          Sample(std::span<const float>(output.logits.data() + row * vocab, vocab), s.params, s.context);
    }
  });
  output.logits.clear();
}

}  // namespace df11
