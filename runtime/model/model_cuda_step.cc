// Model::LaunchCuda / CollectCuda: the CUDA backend of the decoder layer (decoder_layer.h), bf16 activations.
// One stream; LaunchCuda enqueues the whole step, CollectCuda waits for it once (a step that
// returns logits instead of samples waits in LaunchCuda, for their copy). DF11 linears with
// lane streams run a fused DF11 linear up to ModelOptions::tile_max_tokens tokens (the GEMV at 1 token, below
// kTileGemmMinTokens, the tensor-core TileGemm from there for fixed lanes), fixed lanes of 4 rows
// per tile on the wgmma tile linear to 128 on Hopper (whatever tile_max_tokens); otherwise DF11 units decode into the
// scratch right before their layer (leaving out the matrices that run fused); embedding rows of DF11 models decode in
// one launch (only the step's distinct tokens).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>

#include "runtime/model/model_cuda.h"
#include "runtime/model/step_batch.h"

namespace df11 {

#if DF11_HAVE_CUDA

namespace {

// The step's int32 arrays (step_batch.h), packed for one upload: tokens, embedding row per token,
// the BatchLayout arrays, logits rows, attention tiles, block tables (then the DF11 embedding's
// decode items); offsets in int32 elements.
struct PackedBatch {
  size_t num_tokens = 0;
  std::vector<int32_t> data;
  size_t tokens = 0, embed_index = 0, positions = 0, token_seq = 0, table_begin = 0, tables = 0, rows = 0;
  size_t tiles = 0, num_tiles = 0;       // attention tiles (AttentionTiles)
  int64_t tile_tokens = 0;               // the largest tile
  std::vector<int32_t> distinct_tokens;  // DF11 embedding: rows to decode, in embed_index order

  // The layout over the packed arrays once they are at `base` (device memory).
  BatchLayout Layout(const int32_t* base) const {
    return {static_cast<int64_t>(num_tokens),
            base + positions,
            base + token_seq,
            base + table_begin,
            base + tables,
            base + tiles,
            static_cast<int64_t>(num_tiles),
            tile_tokens};
  }
};

PackedBatch Pack(const StepBatch& batch, int64_t tile_tokens) {
  PackedBatch p;
  p.num_tokens = batch.tokens.size();
  std::map<int32_t, int32_t> distinct;
  std::vector<int32_t> embed_index;
  for (int32_t t : batch.tokens) {
    auto [it, inserted] = distinct.emplace(t, static_cast<int32_t>(distinct.size()));
    if (inserted) p.distinct_tokens.push_back(t);
    embed_index.push_back(it->second);
  }
  auto append = [&](const std::vector<int32_t>& v) {
    const size_t at = p.data.size();
    p.data.insert(p.data.end(), v.begin(), v.end());
    p.data.resize(AlignUp(p.data.size()));
    return at;
  };
  const BatchArrays& a = batch.arrays;
  p.tokens = append(batch.tokens);
  p.embed_index = append(embed_index);
  p.positions = append(a.positions);
  p.token_seq = append(a.token_seq);
  p.table_begin = append(a.table_begin);
  p.rows = append(batch.row_tokens);
  const std::vector<int32_t> tiles = AttentionTiles(a.token_seq, a.positions, tile_tokens, &p.tile_tokens);
  p.num_tiles = tiles.size() / 2;
  p.tiles = append(tiles);
  // Last: the only array whose length changes between decode steps of one batch (CUDA graphs
  // keep every offset before it).
  p.tables = append(a.tables);
  return p;
}

}  // namespace

StatusOr<StepBuffers> Model::CudaState::PrepareBuffers(const ModelConfig& c, int64_t tokens, int64_t rows) {
  const uint64_t T = tokens, R = std::max<int64_t>(rows, 1), H = c.hidden_size;
  // After the layer's activations: embedding rows, selected rows, bf16 logits, fp32 logits.
  const uint64_t tail[] = {T * H, R * H, R * c.vocab_size, 2 * R * c.vocab_size};
  uint64_t total = LayOutLayerBuffers<uint16_t>(c, stacked, tokens, kAlignElements, nullptr, nullptr);
  for (uint64_t s : tail) total += AlignUp(s);
  DF11_RETURN_IF_ERROR(activations.Reserve(total * 2, "step activations"));
  StepBuffers b;
  uint16_t* p = activations.as<uint16_t>();
  p += LayOutLayerBuffers(c, stacked, tokens, kAlignElements, p, &b.layer);
  uint16_t* slots[std::size(tail)];
  for (size_t i = 0; i < std::size(tail); ++i) {
    slots[i] = p;
    p += AlignUp(tail[i]);
  }
  b.embed_rows = slots[0];
  b.selected = slots[1];
  b.logits = slots[2];
  b.logits_f32 = reinterpret_cast<float*>(slots[3]);
  return b;
}

bool Model::CudaState::FusedWithoutScratch(const DeviceLanes& l, int64_t tokens) const {
  return tokens > gemm.tile_max_tokens() && Df11WgmmaTileLanes(l) &&
         cuda::WgmmaTileApplies(nullptr, tokens, l.rows, l.cols, gemm.wgmma_tile_max_tokens());
}

Status Model::CudaState::DecodeUnit(int unit, uint16_t* dst, GpuStream s, int64_t tokens) {
  const DeviceUnitPlan& plan = *units[unit];
  const DeviceUnit& u = plan.buffer.unit();
  DF11_RETURN_IF_ERROR(decode_timer.Begin(s));
  if (plan.slim) {             // every matrix from its lane streams, each into its own rows of dst
    bool after_fixed = false;  // the stream's previous operation is the decode of a fixed-lane matrix before it
    for (const DeviceUnitPlan::LaneMatrix& m : plan.lane_matrices) {
      const DeviceLanes& l = lanes[m.lanes].lanes();
      if (FusedWithoutScratch(l, tokens)) continue;  // its linear reads the lanes at these tokens
      const Status st =
          LaunchLanesDecode(l, TablesOf(u), u.sign_mantissa + m.unit_offset, dst + m.scratch_offset, s, after_fixed);
      if (!st.ok()) return st.WithContext(plan.host->path);
      after_fixed = l.code == LaneCode::kFixed3;
    }
  } else {
    for (const DeviceUnitPlan::Range& r : plan.ranges) {
      const Status st = LaunchDf11Decode(u, plan.buffer.layout(), r.begin, r.end, dst + r.scratch_offset, s);
      if (!st.ok()) return st.WithContext(plan.host->path);
    }
  }
  return decode_timer.End(s);
}

Status Model::CudaState::JoinDecodes() {
  if (pending >= 0) DF11_RETURN_IF_ERROR(decode_ready.Wait(stream));
  pending = -1;
  half_unit[0] = half_unit[1] = -1;
  current_unit = -1;
  return Status::Ok();
}

StatusOr<const uint16_t*> Model::CudaState::WeightData(const DeviceLinear& w, int64_t tokens) {
  if (w.unit < 0) return w.plain;
  const bool ahead =
      decode_stream != nullptr && (!capturing || ahead_in_graphs) && units[w.unit]->scratch_elements <= half_elements;
  if (!ahead) {  // one unit at the scratch's start, decoded on the step's stream
    if (half_unit[0] >= 0 || half_unit[1] >= 0 || pending >= 0) {
      DF11_RETURN_IF_ERROR(JoinDecodes());
      loaded_unit = -1;
    }
    if (loaded_unit != w.unit) {
      loaded_unit = -1;
      DF11_RETURN_IF_ERROR(DecodeUnit(w.unit, scratch->data(), stream, tokens));
      loaded_unit = w.unit;
    }
    return static_cast<const uint16_t*>(scratch->data() + w.scratch_offset);
  }
  loaded_unit = -1;  // the scratch's start is half 0 now
  int h = half_unit[0] == w.unit ? 0 : half_unit[1] == w.unit ? 1 : -1;
  if (h >= 0 && pending == w.unit) {  // decoded ahead: wait for it here, not before
    DF11_RETURN_IF_ERROR(decode_ready.Wait(stream));
    pending = -1;
  }
  if (h < 0) {           // not decoded ahead: now, on the stream, into the half the current unit is not in
    if (pending >= 0) {  // (its half stays valid; the decode below may reuse it)
      DF11_RETURN_IF_ERROR(decode_ready.Wait(stream));
      pending = -1;
    }
    h = half_unit[0] == current_unit && current_unit >= 0 ? 1 : 0;
    half_unit[h] = -1;
    DF11_RETURN_IF_ERROR(DecodeUnit(w.unit, scratch->data() + h * half_elements, stream, tokens));
    half_unit[h] = w.unit;
  }
  if (w.unit != current_unit) {  // the unit's first linear: start its successor's decode
    current_unit = w.unit;
    const int next = next_unit[w.unit];
    if (next >= 0 && pending < 0 && half_unit[1 - h] != next && units[next]->scratch_elements <= half_elements) {
      // The other half is free once the stream's work so far (the previous unit's linears) is done.
      DF11_RETURN_IF_ERROR(scratch_free.Record(stream));
      DF11_RETURN_IF_ERROR(scratch_free.Wait(decode_stream));
      half_unit[1 - h] = -1;
      DF11_RETURN_IF_ERROR(DecodeUnit(next, scratch->data() + (1 - h) * half_elements, decode_stream, tokens));
      DF11_RETURN_IF_ERROR(decode_ready.Record(decode_stream));
      half_unit[1 - h] = next;
      pending = next;
    }
  }
  return static_cast<const uint16_t*>(scratch->data() + h * half_elements + w.scratch_offset);
}

Status Model::CudaState::Linear(const DeviceLinear& w, const uint16_t* x, int64_t tokens, uint16_t* y) {
  if (w.lanes >= 0) {
    // Fused DF11 linears, each with the bits of what GemmHandle runs for the BF16 twin at these
    // tokens: the GEMV (Gemv's) below kTileGemmMinTokens, the tensor-core linear (TileGemm's) up to
    // gemm.tile_max_tokens() for fixed lanes, the wgmma tile linear (WgmmaTileGemm's) instead where
    // cuda::WgmmaTileApplies.
    const DeviceLanes& l = lanes[w.lanes].lanes();
    if (cuda::WgmmaTileApplies(x, tokens, w.out_features, w.in_features, gemm.wgmma_tile_max_tokens())) {
      if (Df11WgmmaTileLanes(l)) {
        return TimedGemm([&] {
          return Df11WgmmaTileGemm(x, l, SignMantissa(w), w.bias, tokens, false, y, stream,
                                   cuda::WgmmaTileDf11Config(false, tokens));
        });
      }
      // Other lanes: through the scratch into GemmHandle, which runs WgmmaTileGemm (or cuBLAS with
      // its bits) here.
    } else if (FusedWithoutScratch(l, tokens)) {  // never: step buffers are 256-byte aligned
      return Internal("DF11 linear [" + std::to_string(w.out_features) + ", " + std::to_string(w.in_features) +
                      "] at " + std::to_string(tokens) +
                      " tokens: x not 16-byte aligned for the wgmma tile linear, and its unit's decode left it out");
    } else if (const bool gemv = tokens < cuda::kTileGemmMinTokens && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                                 Df11GemvTakes(l, tokens);
               gemv || (tokens <= gemm.tile_max_tokens() && Df11TileGemmApplies(x, l, tokens))) {
      const DeviceUnit& u = units[w.unit]->buffer.unit();
      return TimedGemm([&] {
        return gemv ? Df11Gemv(x, l, TablesOf(u), SignMantissa(w), w.bias, tokens, false, y, stream)
                    : Df11TileGemm(x, l, SignMantissa(w), w.bias, tokens, false, y, stream);
      });
    }
  }
  DF11_ASSIGN_OR_RETURN(const uint16_t* data, WeightData(w, tokens));
  return TimedGemm([&] {
    return w.bias != nullptr ? gemm.GemmBias(x, data, w.bias, tokens, w.out_features, w.in_features, y, stream)
                             : gemm.Gemm(x, data, tokens, w.out_features, w.in_features, false, y);
  });
}

// The most tokens a BF16 gate|up linear runs a one-launch gated twin for (cuda::TileGemmGated, or on
// Hopper WgmmaTileGemmGated); above, cuBLAS then the activation where it has the bits (GateUpActivation).
constexpr int64_t kBf16TileGatedMaxTokens = 32;

Status Model::CudaState::GateUpActivation(const DeviceLinear& w, const uint16_t* x, int64_t tokens, Activation act,
                                          int64_t inter, uint16_t* gate_up, uint16_t* out) {
  // One launch where measured faster (H100, Qwen3-8B shape). GEMV (bench/results/ab_h100_gated_gemv.log):
  // BF16 W at 1 token (step 5.87-5.93 ms against 6.01-6.04; at 2 tokens 6.26-6.29 against
  // 6.24-6.27; fixed lanes at 1 token 7.46-7.54 against 7.18-7.21, so not there; 2 tokens run the tile
  // linear since, both formats). Tile linear (bench/results/ab_h100_gated_tile.log, two runs
  // each): fixed lanes at 3-64 tokens (DF11 step at batch 3 / 8 / 32 / 64 8.05-8.16 / 8.20-8.23 /
  // 11.45-11.61 / 14.98 ms against 8.52-8.60 / 8.32 / 11.69-11.80 / 15.74-15.88), BF16 W at 3-32
  // (6.28-6.31 / 6.43-6.46 / 8.18-8.20 against 6.39-6.44 / 6.54-6.55 / 8.43-8.47; at 64 tokens the
  // graph step 11.40-11.51 against 11.46-11.51 but a 64-token prefill 9.77-9.82 against 9.37-9.38).
  // Either way the same bits.
  if (w.out_features == 2 * inter) {
    if (cuda::WgmmaTileGatedApplies(x, tokens, inter, w.in_features, gemm.wgmma_tile_max_tokens())) {
      // Both formats on the wgmma tile linear (cuda_gemm.h, WgmmaTileApplies).
      if (w.lanes >= 0) {
        const DeviceLanes& l = lanes[w.lanes].lanes();
        if (Df11WgmmaTileLanes(l)) {
          return TimedGemm([&] {
            return Df11WgmmaTileGemmGated(act, x, l, SignMantissa(w), w.bias, tokens, inter, out, stream,
                                          cuda::WgmmaTileDf11Config(true, tokens));
          });
        }
      }
      // A BF16 W from 33 tokens where cuBLAS gives WgmmaTileGemm's bits (GemmHandle::CheckCublasBits):
      // cuBLAS then the activation below, the pair's bits (tests/kernels/df11_lanes_test.cc,
      // FusedWgmmaTileGatedIsWgmmaTileGatedBitForBit). On an H200 cuBLAS takes 0.060-0.063 ms for the
      // 8B shape's gate|up at 33-64 tokens against the tile linear's 0.074-0.081; at 17-32 the fused
      // twin is as fast as cuBLAS (wgmma_tile_h200_16_warps.log) and one launch, so it stays there.
      const bool cublas = w.lanes < 0 && w.bias == nullptr && tokens > kBf16TileGatedMaxTokens &&
                          gemm.CublasKeepsBits(w.out_features, w.in_features, tokens);
      if (!cublas) {
        DF11_ASSIGN_OR_RETURN(const uint16_t* data, WeightData(w, tokens));
        return TimedGemm([&] {
          return cuda::WgmmaTileGemmGated(act, x, data, w.bias, tokens, inter, w.in_features, out, stream,
                                          cuda::kWgmmaTileModelConfig);
        });
      }
    }
    const bool tile = tokens >= cuda::kTileGemmMinTokens && tokens <= gemm.tile_max_tokens();
    if (tile && w.lanes >= 0 && Df11TileGemmGatedApplies(x, lanes[w.lanes].lanes(), tokens, inter)) {
      return TimedGemm([&] {
        return Df11TileGemmGated(act, x, lanes[w.lanes].lanes(), SignMantissa(w), w.bias, tokens, inter, out, stream);
      });
    }
    if (tile && w.lanes < 0 && tokens <= kBf16TileGatedMaxTokens) {
      DF11_ASSIGN_OR_RETURN(const uint16_t* data, WeightData(w, tokens));
      if (cuda::TileGemmGatedApplies(x, data, tokens, inter, w.in_features)) {
        return TimedGemm(
            [&] { return cuda::TileGemmGated(act, x, data, w.bias, tokens, inter, w.in_features, out, stream); });
      }
    }
    if (tokens == 1 && w.lanes < 0) {
      DF11_ASSIGN_OR_RETURN(const uint16_t* data, WeightData(w, tokens));
      if (cuda::GemvApplies(x, data, tokens, w.in_features)) {
        return TimedGemm(
            [&] { return cuda::GemvGated(act, x, data, w.bias, tokens, inter, w.in_features, out, stream); });
      }
    }
  }
  DF11_RETURN_IF_ERROR(Linear(w, x, tokens, gate_up));
  return cuda::GatedActivation(act, gate_up, 2 * inter, gate_up + inter, 2 * inter, tokens, inter, out, stream);
}

Status Model::CudaState::ReplayOrCapture(int64_t tokens, int64_t max_keys, const std::array<uint64_t, 6>& pointers,
                                         const std::function<Status()>& forward) {
  for (const StepGraph& g : graphs) {
    if (g.tokens == tokens && g.max_keys == max_keys && g.pointers == pointers) {
      if (g.exec.empty()) break;  // seen once: captured the second time
      decode_timer.Restore(decode_timer.used() + g.decode_events);
      replayed_graph = true;
      return g.exec.Launch(stream);
    }
  }
  // Graphs whose buffers moved (a bigger step grew them) can never replay again.
  std::erase_if(graphs, [&](const StepGraph& g) { return g.pointers != pointers; });
  auto seen = std::find_if(graphs.begin(), graphs.end(),
                           [&](const StepGraph& g) { return g.tokens == tokens && g.max_keys == max_keys; });
  if (seen == graphs.end() || graphs_failed) {
    // The first step of a shape runs op by op: every kernel it needs is loaded before any capture.
    if (seen == graphs.end() && !graphs_failed) {
      if (graphs.size() >= kMaxStepGraphs) graphs.erase(graphs.begin());
      graphs.push_back({tokens, max_keys, pointers, 0, {}});
    }
    return forward();
  }
  const size_t events_before = decode_timer.used();
  Status st = cuda::BeginCapture(stream);
  capturing = true;  // decoding ahead inside the capture only with ahead_in_graphs
  if (st.ok()) st = forward();
  capturing = false;
  if (!st.ok()) {
    cuda::AbortCapture(stream);
    decode_timer.Restore(events_before);
  } else {
    StatusOr<cuda::GraphExec> exec = cuda::EndCapture(stream);
    if (exec.ok()) {
      seen->decode_events = decode_timer.used() - events_before;
      seen->exec = std::move(exec).value();
      replayed_graph = true;
      return seen->exec.Launch(stream);
    }
    decode_timer.Restore(events_before);
    st = exec.status();
  }
  // A capture the runtime refused: this model captures no more graphs (same kernels, same bits
  // op by op; a real error shows again there); those already captured still replay.
  graphs_failed = true;
  return forward();
}

// The CUDA ops of the decoder layer (decoder_layer.h): bf16 activations on one stream.
struct Model::CudaOps {
  using Element = uint16_t;
  using Vector = const float*;
  using Layer = DeviceLayer;

  const Model& model;
  CudaState& st;
  const BatchLayout batch;  // device arrays of the step
  KvCache& cache;

  Status RmsNorm(const uint16_t* x, const float* w, int64_t rows, int64_t dim, uint16_t* out) {
    const ModelConfig& c = model.config_;
    return cuda::RmsNorm(x, w, rows, dim, static_cast<float>(c.rms_norm_eps), c.norm_adds_one, out, st.stream);
  }
  Status Linear(const DeviceLinear& w, const uint16_t* x, int64_t tokens, uint16_t* y) {
    return st.Linear(w, x, tokens, y);
  }
  // One launch: qk-norm, rope, q out, k and v into the cache (k, v unused).
  Status PrepareAttention(int64_t layer, bool sliding, const uint16_t* qkv, const Vector* q_norm, const Vector* k_norm,
                          int64_t tokens, uint16_t* q, const uint16_t* k, const uint16_t* v) {
    (void)tokens;  // the batch's
    const ModelConfig& c = model.config_;
    const int64_t qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
    const cuda::QkvRows rows = qkv != nullptr ? cuda::QkvRows{qkv, qkv + qd, qkv + qd + kvd, qd + 2 * kvd, qd + 2 * kvd}
                                              : cuda::QkvRows{q, k, v, qd, kvd};
    cuda::QkNormRope p;
    p.q_norm = q_norm != nullptr ? *q_norm : nullptr;
    p.k_norm = k_norm != nullptr ? *k_norm : nullptr;
    p.eps = static_cast<float>(c.rms_norm_eps);
    p.add_one = c.norm_adds_one;
    p.rotary_dim = (sliding ? model.rope_local_ : model.rope_global_).rotary_dim;
    p.inv_freq = sliding ? st.inv_freq_local : st.inv_freq_global;
    return cuda::PrepareAttention(cache.DeviceLayer(layer), batch, c.num_heads, rows, p, q, st.stream);
  }
  Status Attention(int64_t layer, AttentionParams params, const uint16_t* q, uint16_t* out) {
    if (st.profile) DF11_RETURN_IF_ERROR(st.attention_timer.Begin(st.stream));
    DF11_RETURN_IF_ERROR(cuda::PagedAttention(cache.DeviceLayer(layer), batch, params, q, out, st.stream));
    return st.profile ? st.attention_timer.End(st.stream) : Status::Ok();
  }
  Status AddThenNorm(uint16_t* hidden, const uint16_t* y, const float* w, int64_t tokens, int64_t dim,
                     uint16_t* normed) {
    const ModelConfig& c = model.config_;
    return cuda::AddRmsNorm(hidden, y, w, tokens, dim, static_cast<float>(c.rms_norm_eps), c.norm_adds_one, normed,
                            st.stream);
  }
  Status GatedActivation(Activation act, const uint16_t* gate, int64_t gate_stride, const uint16_t* up,
                         int64_t up_stride, int64_t tokens, int64_t inter, uint16_t* out) {
    return cuda::GatedActivation(act, gate, gate_stride, up, up_stride, tokens, inter, out, st.stream);
  }
  Status GateUpActivation(const DeviceLinear& w, const uint16_t* x, int64_t tokens, Activation act, int64_t inter,
                          uint16_t* gate_up, uint16_t* out) {
    return st.GateUpActivation(w, x, tokens, act, inter, gate_up, out);
  }
  Status AddInPlace(uint16_t* x, const uint16_t* y, int64_t n) { return cuda::AddInPlace(x, y, n, st.stream); }
};

Status Model::LaunchCuda(const StepInput& input, StepOutput& output) {
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& c = config_;
  CudaState& st = *cuda_;
  const GpuStream stream = st.stream;
  const StepBatch batch = BuildStepBatch(input, input.kv_cache->shape().block_size);
  const int64_t T = batch.num_tokens();
  if (T > 65535) return InvalidArgument("step: " + std::to_string(T) + " new tokens, at most 65535 on CUDA");
  PackedBatch hb = Pack(batch, cuda::AttentionTileTokens(c.num_heads, c.num_kv_heads, c.head_dim));
  output.rows = batch.rows;
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
  if (hb.data.size() * 4 > st.batch_arrays.bytes()) {  // doubling: decode steps' tables grow a little each
    DF11_RETURN_IF_ERROR(st.batch_arrays.Reserve(hb.data.size() * 8, "step batch arrays"));
  }
  st.span_timer.Reset();
  DF11_RETURN_IF_ERROR(st.span_timer.Begin(stream));
  DF11_RETURN_IF_ERROR(cuda::CopyToDevice(st.batch_arrays.data(), hb.data.data(), hb.data.size() * 4, stream));
  const int32_t* arrays = st.batch_arrays.as<const int32_t>();
  BatchLayout layout = hb.Layout(arrays);
  for (const SequenceInput& s : input.sequences) {  // split-KV decode: the longest sequence's keys
    layout.max_keys = std::max<int64_t>(layout.max_keys, s.num_cached + static_cast<int64_t>(s.tokens.size()));
  }
  // Rounded up to a power of two (at least 64), so a graph captured for one decode step serves the
  // next ones; eager steps round alike and split their keys the same way (same bits).
  int64_t keys = 64;
  while (keys < layout.max_keys) keys *= 2;
  layout.max_keys = keys;
  DF11_RETURN_IF_ERROR(
      st.attention_workspace.Reserve(cuda::AttentionWorkspaceFloats(c.head_dim) * 4, "attention split-KV workspace"));
  layout.split_workspace = st.attention_workspace.as<float>();
  st.loaded_unit = -1;  // a shared scratch may hold another model's unit
  DF11_RETURN_IF_ERROR(st.JoinDecodes());
  st.decode_timer.Reset();
  st.gemm_timer.Reset();
  st.attention_timer.Reset();
  st.profile = input.profile;

  const int64_t H = c.hidden_size, vocab = c.vocab_size;
  output.vocab_size = vocab;
  if (st.embedding.unit >= 0) {  // DF11 embedding rows: decoded outside any graph (items vary)
    const DeviceUnitPlan& plan = *st.units[st.embedding.unit];
    DF11_RETURN_IF_ERROR(st.decode_timer.Begin(stream));
    DF11_RETURN_IF_ERROR(
        LaunchDf11DecodeItems(plan.buffer.unit(), reinterpret_cast<const Df11DecodeItem*>(arrays + embed_items),
                              static_cast<uint32_t>(num_embed_items), embed_vector_ok, b.embed_rows, stream));
    DF11_RETURN_IF_ERROR(st.decode_timer.End(stream));
  }
  // The forward pass from the embedding rows to fp32 logits: enqueued as is, or captured once per
  // decode shape and replayed (CUDA graphs, one launch instead of ~600).
  auto forward = [&]() -> Status {
    const float scale = static_cast<float>(c.embedding_scale);
    uint16_t* hidden = b.layer.hidden;
    if (st.embedding.unit < 0) {
      DF11_RETURN_IF_ERROR(cuda::EmbeddingGather(st.embedding.plain, arrays + hb.tokens, T, H, scale, hidden, stream));
    } else {
      DF11_RETURN_IF_ERROR(cuda::EmbeddingGather(b.embed_rows, arrays + hb.embed_index, T, H, scale, hidden, stream));
    }
    CudaOps ops{*this, st, layout, *input.kv_cache};
    DF11_RETURN_IF_ERROR(RunDecoderLayers(ops, c, st.layers, b.layer, T));
    if (R == 0) return st.JoinDecodes();
    DF11_RETURN_IF_ERROR(cuda::GatherRows(hidden, arrays + hb.rows, R, H, b.selected, stream));
    DF11_RETURN_IF_ERROR(ops.RmsNorm(b.selected, st.final_norm, R, H, b.selected));
    DF11_RETURN_IF_ERROR(st.Linear(st.lm_head, b.selected, R, b.logits));
    DF11_RETURN_IF_ERROR(st.JoinDecodes());  // nothing of this step left on the decode stream
    return cuda::LogitsToFloat(b.logits, R * vocab, static_cast<float>(c.final_logit_softcapping), b.logits_f32,
                               stream);
  };
  const bool decode_only = std::all_of(input.sequences.begin(), input.sequences.end(), [](const SequenceInput& s) {
    return s.tokens.size() == 1 && s.logits_for.size() == 1;
  });
  st.replayed_graph = false;
  if (options_.cuda_graphs && decode_only && !input.profile) {
    const cuda::PagedKvLayer kv = input.kv_cache->DeviceLayer(0);
    auto address = [](const void* p) { return reinterpret_cast<uint64_t>(p); };
    const std::array<uint64_t, 6> pointers = {address(st.activations.data()),
                                              address(st.batch_arrays.data()),
                                              address(st.attention_workspace.data()),
                                              address(st.scratch->data()),
                                              address(kv.k),
                                              static_cast<uint64_t>(kv.num_blocks)};
    DF11_RETURN_IF_ERROR(st.ReplayOrCapture(T, layout.max_keys, pointers, forward));
  } else {
    DF11_RETURN_IF_ERROR(forward());
  }

  // Then one copy of the logits (waits for the step), or of the sampled tokens into page-locked
  // memory (does not: CollectCuda reads them).
  output.samples.clear();
  st.sampled_rows = 0;
  if (SamplesRows(input, output)) {
    output.logits.clear();
    DF11_RETURN_IF_ERROR(st.Sample(input, output, b.logits_f32, vocab));
  } else {
    output.logits.resize(R * vocab);
    DF11_RETURN_IF_ERROR(cuda::CopyToHost(output.logits.data(), b.logits_f32, R * vocab * 4, stream));
  }
  DF11_RETURN_IF_ERROR(st.span_timer.End(stream));
  st.launch_time = start;
  return Status::Ok();
}

Status Model::CollectCuda(StepOutput& output) {
  CudaState& st = *cuda_;
  DF11_RETURN_IF_ERROR(cuda::Synchronize(st.stream));  // also when no rows were copied: the step is done
  if (st.sampled_rows > 0) st.CollectSamples(output);
  DF11_ASSIGN_OR_RETURN(output.gpu_seconds, st.span_timer.Seconds());
  DF11_ASSIGN_OR_RETURN(output.decompress_seconds, st.decode_timer.Seconds());
  DF11_ASSIGN_OR_RETURN(output.gemm_seconds, st.gemm_timer.Seconds());
  DF11_ASSIGN_OR_RETURN(output.attention_seconds, st.attention_timer.Seconds());
  output.replayed_graph = st.replayed_graph;
  output.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.launch_time).count();
  return Status::Ok();
}

#else

Status Model::LaunchCuda(const StepInput&, StepOutput&) { return Unimplemented("this build has no CUDA"); }
Status Model::CollectCuda(StepOutput&) { return Unimplemented("this build has no CUDA"); }

#endif

}  // namespace df11
