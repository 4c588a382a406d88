// Model::StepCuda: the generic decoder layer on the GPU (see model_step.cc for the per-layer
// formulas, identical here with bf16 activations). One stream; the host enqueues the whole step
// and waits once, for the logits. DF11 units decode into the scratch right before their layer;
// embedding rows of DF11 models decode in one launch (only the step's distinct tokens).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "runtime/model/model_cuda.h"

namespace df11 {

#if DF11_HAVE_CUDA

namespace {

constexpr uint64_t kAlign = 128;  // elements (256 bytes of bf16)
// Split-KV (flash-decoding) attention for small batches over long contexts; false = one block
// per (tile, KV head, head chunk). OFF: on an H100 (2026-11-22) the split path differed from the
// unsplit kernel by 3-14% relative (bench/results/gpu_split_kv_check_h100.log) in CudaOps.PagedAttentionMatchesCpu; not fixed yet.
constexpr bool kSplitKv = false;

// Prefill attention on tensor cores (cuda::AttentionParams::tensor_cores): on by default since it
// passed the op tests and every fixture's greedy parity with transformers on an H100 and halves
// the 2048-token prefill; DF11_ATTENTION_TC=0 selects the FMA kernel.
bool TensorCoreAttention() {
  static const bool on = [] {
    const char* v = std::getenv("DF11_ATTENTION_TC");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The step's int32 arrays, uploaded in one copy: tokens, embedding row per token, positions,
// token -> sequence, per-sequence table start, block tables, logits rows.
struct HostBatch {
  std::vector<int32_t> data;
  size_t tokens = 0, embed_index = 0, positions = 0, token_seq = 0, table_begin = 0, tables = 0, rows = 0;
  size_t tiles = 0, num_tiles = 0;  // attention tiles (cuda::AttentionTiles)
  int64_t tile_tokens = 0;           // the largest tile
  std::vector<int32_t> distinct_tokens;  // DF11 embedding: rows to decode, in embed_index order
};

HostBatch BuildBatch(const StepInput& input, const KvCacheShape& kv, int64_t tile_tokens,
                     std::vector<std::pair<int64_t, int64_t>>& rows) {
  std::vector<int32_t> tokens, positions, token_seq, table_begin, tables, row_index;
  rows.clear();
  for (size_t s = 0; s < input.sequences.size(); ++s) {
    const SequenceInput& seq = input.sequences[s];
    const int64_t n = static_cast<int64_t>(seq.tokens.size());
    for (int64_t index : seq.logits_for) {
      rows.emplace_back(static_cast<int64_t>(s), index);
      row_index.push_back(static_cast<int32_t>(tokens.size() + index));
    }
    for (int64_t i = 0; i < n; ++i) {
      tokens.push_back(seq.tokens[i]);
      positions.push_back(static_cast<int32_t>(seq.num_cached + i));
      token_seq.push_back(static_cast<int32_t>(s));
    }
    table_begin.push_back(static_cast<int32_t>(tables.size()));
    const int64_t blocks = (seq.num_cached + n + kv.block_size - 1) / kv.block_size;
    tables.insert(tables.end(), seq.block_table.begin(), seq.block_table.begin() + blocks);
  }
  HostBatch b;
  std::map<int32_t, int32_t> distinct;
  std::vector<int32_t> embed_index;
  for (int32_t t : tokens) {
    auto [it, inserted] = distinct.emplace(t, static_cast<int32_t>(distinct.size()));
    if (inserted) b.distinct_tokens.push_back(t);
    embed_index.push_back(it->second);
  }
  auto append = [&](const std::vector<int32_t>& v) {
    const size_t at = b.data.size();
    b.data.insert(b.data.end(), v.begin(), v.end());
    b.data.resize(AlignUp(b.data.size()));
    return at;
  };
  b.tokens = append(tokens);
  b.embed_index = append(embed_index);
  b.positions = append(positions);
  b.token_seq = append(token_seq);
  b.table_begin = append(table_begin);
  b.tables = append(tables);
  b.rows = append(row_index);
  const std::vector<int32_t> tiles = cuda::AttentionTiles(token_seq, tile_tokens, &b.tile_tokens);
  b.num_tiles = tiles.size() / 2;
  b.tiles = append(tiles);
  return b;
}

}  // namespace

StatusOr<StepBuffers> Model::CudaState::PrepareBuffers(const ModelConfig& c, int64_t tokens, int64_t rows) {
  const uint64_t T = tokens, R = std::max<int64_t>(rows, 1), H = c.hidden_size, I = c.intermediate_size;
  const uint64_t qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  const uint64_t sizes[] = {T * H, T * H, T * qd, T * kvd, T * kvd, c.fused_qkv ? T * (qd + 2 * kvd) : 0, T * qd,
                            T * H, T * I * (c.fused_gate_up ? 2 : 1), c.fused_gate_up ? 0 : T * I, T * I, T * H,
                            R * H, R * c.vocab_size, 2 * R * c.vocab_size};
  uint64_t total = 0;
  for (uint64_t s : sizes) total += AlignUp(s);
  DF11_RETURN_IF_ERROR(activations.Reserve(total * 2, "step activations"));
  uint16_t* p = activations.as<uint16_t>();
  uint16_t* slots[std::size(sizes)];
  for (size_t i = 0; i < std::size(sizes); ++i) {
    slots[i] = p;
    p += AlignUp(sizes[i]);
  }
  return StepBuffers{slots[0], slots[1],  slots[2],  slots[3],  slots[4],
                     slots[5], slots[6],  slots[7],  slots[8],  slots[9],
                     slots[10], slots[11], slots[12], slots[13], reinterpret_cast<float*>(slots[14])};
}

StatusOr<const uint16_t*> Model::CudaState::WeightData(const DeviceLinear& w) {
  if (w.unit < 0) return w.plain;
  if (loaded_unit != w.unit) {
    const DeviceUnitPlan& plan = *units[w.unit];
    loaded_unit = -1;
    DF11_RETURN_IF_ERROR(decode_timer.Begin(stream));
    for (const DeviceUnitPlan::Range& r : plan.ranges) {
      const Status st = LaunchDf11Decode(plan.buffer.unit(), plan.buffer.layout(), r.begin, r.end,
                                         scratch->data() + r.scratch_offset, stream);
      if (!st.ok()) return st.WithContext(plan.host->path);
    }
    DF11_RETURN_IF_ERROR(decode_timer.End(stream));
    loaded_unit = w.unit;
  }
  return static_cast<const uint16_t*>(scratch->data() + w.scratch_offset);
}

Status Model::CudaState::Linear(const DeviceLinear& w, const uint16_t* x, int64_t tokens, uint16_t* y) {
  DF11_ASSIGN_OR_RETURN(const uint16_t* data, WeightData(w));
  if (profile) DF11_RETURN_IF_ERROR(gemm_timer.Begin(stream));
  if (w.bias != nullptr) {
    DF11_RETURN_IF_ERROR(gemm.GemmBias(x, data, w.bias, tokens, w.out_features, w.in_features, y, stream));
  } else {
    DF11_RETURN_IF_ERROR(gemm.Gemm(x, data, tokens, w.out_features, w.in_features, false, y));
  }
  return profile ? gemm_timer.End(stream) : Status::Ok();
}

Status Model::StepCuda(const StepInput& input, StepOutput& output) {
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& c = config_;
  CudaState& st = *cuda_;
  const GpuStream stream = st.stream;
  KvCache& cache = *input.kv_cache;
  const int64_t tile_tokens = cuda::AttentionTileTokens(c.num_heads, c.num_kv_heads);
  HostBatch hb = BuildBatch(input, cache.shape(), tile_tokens, output.rows);
  int64_t T = 0;
  for (const SequenceInput& s : input.sequences) T += static_cast<int64_t>(s.tokens.size());
  if (T > 65535) return InvalidArgument("step: " + std::to_string(T) + " new tokens, at most 65535 on CUDA");
  const int64_t R = static_cast<int64_t>(output.rows.size());
  DF11_ASSIGN_OR_RETURN(const StepBuffers b, st.PrepareBuffers(c, T, R));
  // DF11 embedding: the step's distinct rows decode in one launch; its items travel with the arrays.
  size_t embed_items = 0, num_embed_items = 0;
  bool embed_vector_ok = false;
  if (st.embedding.unit >= 0) {
    const uint64_t H = c.hidden_size;
    std::vector<Df11Range> ranges;
    for (size_t i = 0; i < hb.distinct_tokens.size(); ++i) {
      const uint64_t begin = st.embedding.unit_offset + static_cast<uint64_t>(hb.distinct_tokens[i]) * H;
      ranges.push_back({begin, begin + H, i * H});
    }
    DF11_ASSIGN_OR_RETURN(const std::vector<Df11DecodeItem> items,
                          Df11DecodeItems(st.units[st.embedding.unit]->buffer.layout(), ranges, &embed_vector_ok));
    embed_items = hb.data.size();
    num_embed_items = items.size();
    hb.data.resize(AlignUp(embed_items + items.size() * sizeof(Df11DecodeItem) / 4));
    std::memcpy(hb.data.data() + embed_items, items.data(), items.size() * sizeof(Df11DecodeItem));
  }
  DF11_RETURN_IF_ERROR(st.batch_arrays.Reserve(hb.data.size() * 4, "step batch arrays"));
  DF11_RETURN_IF_ERROR(cuda::CopyToDevice(st.batch_arrays.data(), hb.data.data(), hb.data.size() * 4, stream));
  const int32_t* arrays = st.batch_arrays.as<const int32_t>();
  int64_t max_keys = 0;  // the longest sequence's keys after this step (split-KV attention)
  for (const SequenceInput& s : input.sequences) {
    max_keys = std::max<int64_t>(max_keys, s.num_cached + static_cast<int64_t>(s.tokens.size()));
  }
  if (kSplitKv) {
    DF11_RETURN_IF_ERROR(st.attention_workspace.Reserve(cuda::AttentionWorkspaceFloats(c.head_dim) * 4,
                                                        "attention split-KV workspace"));
  }
  const cuda::BatchLayout batch{T,
                                arrays + hb.positions,
                                arrays + hb.token_seq,
                                arrays + hb.table_begin,
                                arrays + hb.tables,
                                arrays + hb.tiles,
                                static_cast<int64_t>(hb.num_tiles),
                                hb.tile_tokens,
                                max_keys,
                                kSplitKv ? st.attention_workspace.as<float>() : nullptr};
  st.loaded_unit = -1;  // a shared scratch may hold another model's unit
  st.decode_timer.Reset();
  st.gemm_timer.Reset();
  st.attention_timer.Reset();
  st.profile = input.profile;

  // Embedding.
  const int64_t H = c.hidden_size;
  const float scale = static_cast<float>(c.embedding_scale);
  if (st.embedding.unit < 0) {
    DF11_RETURN_IF_ERROR(cuda::EmbeddingGather(st.embedding.plain, arrays + hb.tokens, T, H, scale, b.hidden, stream));
  } else {
    const DeviceUnitPlan& plan = *st.units[st.embedding.unit];
    DF11_RETURN_IF_ERROR(st.decode_timer.Begin(stream));
    DF11_RETURN_IF_ERROR(LaunchDf11DecodeItems(plan.buffer.unit(),
                                               reinterpret_cast<const Df11DecodeItem*>(arrays + embed_items),
                                               static_cast<uint32_t>(num_embed_items), embed_vector_ok, b.embed_rows,
                                               stream));
    DF11_RETURN_IF_ERROR(st.decode_timer.End(stream));
    DF11_RETURN_IF_ERROR(
        cuda::EmbeddingGather(b.embed_rows, arrays + hb.embed_index, T, H, scale, b.hidden, stream));
  }

  const bool tensor_core_attention = TensorCoreAttention();
  const int64_t hd = c.head_dim, qd = c.num_heads * hd, kvd = c.num_kv_heads * hd, I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const bool add_one = c.norm_adds_one;
  const cuda::Activation act =
      c.hidden_act == "gelu_pytorch_tanh" ? cuda::Activation::kGeluTanh : cuda::Activation::kSilu;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const DeviceLayer& w = st.layers[layer];
    // Attention block.
    DF11_RETURN_IF_ERROR(cuda::RmsNorm(b.hidden, w.input_norm, T, H, eps, add_one, b.normed, stream));
    if (c.fused_qkv) {
      DF11_RETURN_IF_ERROR(st.Linear(w.qkv, b.normed, T, b.qkv));
      DF11_RETURN_IF_ERROR(cuda::SplitColumns(b.qkv, T, qd, kvd, kvd, b.q, b.k, b.v, stream));
    } else {
      DF11_RETURN_IF_ERROR(st.Linear(w.q, b.normed, T, b.q));
      DF11_RETURN_IF_ERROR(st.Linear(w.k, b.normed, T, b.k));
      DF11_RETURN_IF_ERROR(st.Linear(w.v, b.normed, T, b.v));
    }
    if (c.qk_norm) {
      DF11_RETURN_IF_ERROR(cuda::RmsNorm(b.q, w.q_norm, T * c.num_heads, hd, eps, add_one, b.q, stream));
      DF11_RETURN_IF_ERROR(cuda::RmsNorm(b.k, w.k_norm, T * c.num_kv_heads, hd, eps, add_one, b.k, stream));
    }
    const bool sliding = c.layer_is_sliding[layer];
    const RopeKind& rope = sliding ? rope_local_ : rope_global_;
    const float* inv_freq = sliding ? st.inv_freq_local : st.inv_freq_global;
    DF11_RETURN_IF_ERROR(cuda::ApplyRope(b.q, T, c.num_heads, hd, rope.rotary_dim, batch.positions, inv_freq, stream));
    DF11_RETURN_IF_ERROR(
        cuda::ApplyRope(b.k, T, c.num_kv_heads, hd, rope.rotary_dim, batch.positions, inv_freq, stream));
    const cuda::PagedKvLayer kv = cache.DeviceLayer(layer);
    if (st.profile) DF11_RETURN_IF_ERROR(st.attention_timer.Begin(stream));
    DF11_RETURN_IF_ERROR(cuda::WriteKv(kv, batch, b.k, b.v, stream));
    const cuda::AttentionParams params{c.num_heads, static_cast<float>(c.attention_scale),
                                       sliding ? c.sliding_window : 0, static_cast<float>(c.attn_logit_softcapping),
                                       tensor_core_attention};
    DF11_RETURN_IF_ERROR(cuda::PagedAttention(kv, batch, params, b.q, b.attn, stream));
    if (st.profile) DF11_RETURN_IF_ERROR(st.attention_timer.End(stream));
    DF11_RETURN_IF_ERROR(st.Linear(w.o, b.attn, T, b.proj));
    if (c.sandwich_norms) {
      DF11_RETURN_IF_ERROR(cuda::RmsNorm(b.proj, w.post_attention_norm, T, H, eps, add_one, b.proj, stream));
    }
    DF11_RETURN_IF_ERROR(cuda::AddInPlace(b.hidden, b.proj, T * H, stream));
    // MLP block.
    const float* norm = c.sandwich_norms ? w.pre_feedforward_norm : w.post_attention_norm;
    DF11_RETURN_IF_ERROR(cuda::RmsNorm(b.hidden, norm, T, H, eps, add_one, b.normed, stream));
    if (c.fused_gate_up) {
      DF11_RETURN_IF_ERROR(st.Linear(w.gate_up, b.normed, T, b.gate));
      DF11_RETURN_IF_ERROR(cuda::GatedActivation(act, b.gate, 2 * I, b.gate + I, 2 * I, T, I, b.act, stream));
    } else {
      DF11_RETURN_IF_ERROR(st.Linear(w.gate, b.normed, T, b.gate));
      DF11_RETURN_IF_ERROR(st.Linear(w.up, b.normed, T, b.up));
      DF11_RETURN_IF_ERROR(cuda::GatedActivation(act, b.gate, I, b.up, I, T, I, b.act, stream));
    }
    DF11_RETURN_IF_ERROR(st.Linear(w.down, b.act, T, b.proj));
    if (c.sandwich_norms) {
      DF11_RETURN_IF_ERROR(cuda::RmsNorm(b.proj, w.post_feedforward_norm, T, H, eps, add_one, b.proj, stream));
    }
    DF11_RETURN_IF_ERROR(cuda::AddInPlace(b.hidden, b.proj, T * H, stream));
  }

  // Logits of the requested rows: final norm, lm_head, soft-cap and fp32 on the device, one copy.
  const int64_t vocab = c.vocab_size;
  output.vocab_size = vocab;
  if (R > 0) {
    DF11_RETURN_IF_ERROR(cuda::GatherRows(b.hidden, arrays + hb.rows, R, H, b.selected, stream));
    DF11_RETURN_IF_ERROR(cuda::RmsNorm(b.selected, st.final_norm, R, H, eps, add_one, b.selected, stream));
    DF11_RETURN_IF_ERROR(st.Linear(st.lm_head, b.selected, R, b.logits));
    DF11_RETURN_IF_ERROR(cuda::LogitsToFloat(b.logits, R * vocab, static_cast<float>(c.final_logit_softcapping),
                                             b.logits_f32, stream));
  }
  output.logits.resize(R * vocab);
  DF11_RETURN_IF_ERROR(cuda::CopyToHost(output.logits.data(), b.logits_f32, R * vocab * 4, stream));
  DF11_RETURN_IF_ERROR(cuda::Synchronize(stream));  // also when no rows were copied: the step is done
  DF11_ASSIGN_OR_RETURN(output.decompress_seconds, st.decode_timer.Seconds());
  DF11_ASSIGN_OR_RETURN(output.gemm_seconds, st.gemm_timer.Seconds());
  DF11_ASSIGN_OR_RETURN(output.attention_seconds, st.attention_timer.Seconds());
  output.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

#else

Status Model::StepCuda(const StepInput&, StepOutput&) { return Unimplemented("this build has no CUDA"); }

#endif

}  // namespace df11
