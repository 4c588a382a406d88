// Model loading: every weight of the generic decoder layer resolved once, rotary frequencies
// computed once (see model.h). The forward step lives in model_step.cc.
#include "runtime/model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "kernels/df11_codec.h"
#include "runtime/model/model_cuda.h"

namespace df11 {

std::vector<float> RopeInvFreq(const RopeConfig& rope, int64_t head_dim) {
  int64_t dim = static_cast<int64_t>(static_cast<double>(head_dim) * rope.partial_rotary_factor);
  dim -= dim % 2;
  std::vector<float> inv_freq(dim / 2);
  const float base = static_cast<float>(rope.theta);
  for (int64_t i = 0; i < dim / 2; ++i) {
    // 1.0 / (base ** (arange(0, dim, 2).float() / dim)), every operation in fp32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    inv_freq[i] = 1.0f / power;
  }
  const float factor = static_cast<float>(rope.factor);
  if (rope.type == "linear") {
    for (float& f : inv_freq) f /= factor;
  } else if (rope.type == "llama3") {
    const float low = static_cast<float>(rope.low_freq_factor);
    const float high = static_cast<float>(rope.high_freq_factor);
    const float old_context = static_cast<float>(rope.original_max_position_embeddings);
    const float low_freq_wavelen = static_cast<float>(rope.original_max_position_embeddings / rope.low_freq_factor);
    const float high_freq_wavelen = static_cast<float>(rope.original_max_position_embeddings / rope.high_freq_factor);
    const float two_pi = static_cast<float>(2 * M_PI);
    for (float& f : inv_freq) {
      const float wavelen = two_pi / f;
      const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
      const float smooth = (old_context / wavelen - low) / (high - low);
      const float smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
      const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
      f = medium ? smoothed : scaled;
    }
  }
  return inv_freq;
}

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& dir, const ModelOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Model> model(new Model());
  model->options_ = options;
  DF11_ASSIGN_OR_RETURN(model->checkpoint_, Checkpoint::Open(dir));
  DF11_RETURN_IF_ERROR(model->checkpoint_->CheckLayerCount());
  model->config_ = model->checkpoint_->config();
  const ModelConfig& c = model->config_;
  uint64_t largest_unit = 0;
  for (const Df11Unit& unit : model->checkpoint_->units())
    largest_unit = std::max(largest_unit, unit.layout.num_elements);
  // Refused up front, before anything is allocated for the weights: what they will hold resident.
  model->FillLoadReport(largest_unit);
  if (options.max_resident_bytes > 0 &&
      model->report_.weight_bytes + model->report_.scratch_bytes > options.max_resident_bytes) {
    return ResourceExhausted(dir + ": the weights need " + std::to_string(model->report_.weight_bytes) + " bytes (+ " +
                             std::to_string(model->report_.scratch_bytes) + " bytes of decode scratch) but " +
                             std::to_string(options.max_resident_bytes) + " bytes are available for them");
  }
  model->layers_.resize(c.num_layers);
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    DF11_RETURN_IF_ERROR(model->LoadLayer(layer, model->layers_[layer]));
  }
  DF11_RETURN_IF_ERROR(model->LoadHeads());
  if (!model->resident_df11()) DF11_RETURN_IF_ERROR(model->DecodeLinearsToBf16());
  model->rope_global_ = {RopeInvFreq(c.rope, c.head_dim), 0};
  model->rope_local_ = {RopeInvFreq(c.rope_local, c.head_dim), 0};
  for (RopeKind* kind : {&model->rope_global_, &model->rope_local_}) {
    kind->rotary_dim = 2 * static_cast<int64_t>(kind->inv_freq.size());
  }
  const double open_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.device == Device::kCuda) {
    DF11_RETURN_IF_ERROR(model->LoadCuda());  // replaces the report with what the device holds
    if (model->checkpoint_->is_df11() && options.resident_bf16) {
      // The decoded host copies served only the upload (the CUDA step never reads them): a CPU
      // read of one now fails with FAILED_PRECONDITION instead of holding BF16 bytes twice.
      auto drop = [](LinearWeight& w) {
        w.owned = {};
        w.plain = nullptr;
      };
      for (LayerWeights& layer : model->layers_) std::for_each(layer.linears.begin(), layer.linears.end(), drop);
      drop(model->embedding_);
      drop(model->lm_head_);
    }
  } else if (model->resident_df11()) {
    model->scratch_ = UnitScratch(largest_unit);
  }
  model->report_.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  model->report_.open_seconds = open_seconds;
  return model;
}

Model::~Model() = default;

// Every tensor of the layer's table rows (layer_tensors.h): norms as fp32, linears located in the
// checkpoint (plain BF16 or a DF11 unit slice), biases attached to their linear.
Status Model::LoadLayer(int64_t layer, LayerWeights& w) {
  const ModelConfig& c = config_;
  for (const LayerTensorSpec* spec : LayerTensorsOf(c)) {
    const std::string name = TensorName(c, layer, *spec);
    const int64_t rows = spec->rows(c);
    if (spec->kind == TensorKind::kNorm) {
      DF11_ASSIGN_OR_RETURN(w.vector(spec->id), ReadVectorF32(*checkpoint_, name, rows));
    } else if (spec->kind == TensorKind::kBias) {  // after its linear (table order)
      DF11_ASSIGN_OR_RETURN(w.linear(spec->of).bias, ReadVectorF32(*checkpoint_, name, rows));
    } else {
      DF11_ASSIGN_OR_RETURN(w.linear(spec->id), LocateLinear(*checkpoint_, name, rows, spec->cols(c)));
    }
  }
  return Status::Ok();
}

// Bytes: DF11 units count their five tensors, plain tensors their file bytes; the BF16
// equivalent counts every weight at 2 bytes per element (a tied model's lm_head copy once).
void Model::FillLoadReport(uint64_t largest_unit_elements) {
  LoadReport& r = report_;
  r.device = options_.device;
  r.warnings = checkpoint_->warnings();
  r.df11 = resident_df11();
  for (const Df11Unit& unit : checkpoint_->units()) {
    const UnitView& v = unit.view;
    r.weight_bytes +=
        v.luts.size() + v.encoded_exponent.size() + v.sign_mantissa.size() + v.output_positions.size() + v.gaps.size();
    // A tied model's lm_head unit is a copy of the embedding: resident, but not a weight of its own.
    const bool tied_copy =
        config_.tie_word_embeddings && std::any_of(unit.weights.begin(), unit.weights.end(),
                                                   [&](const UnitWeight& w) { return w.name == config_.lm_head_name; });
    if (!tied_copy) r.bf16_weight_bytes += 2 * unit.layout.num_elements;
  }
  const TensorStore& store = checkpoint_->store();
  for (const std::string& name : store.Names()) {
    const TensorStore::Entry e = store.Find(name);
    bool in_unit = false;
    for (const Df11Unit& unit : checkpoint_->units()) {
      const UnitView& v = unit.view;
      const uint8_t* p = store.Data(e).data();
      for (const auto& span : {v.luts, v.encoded_exponent, v.sign_mantissa, v.output_positions, v.gaps})
        in_unit = in_unit || (span.data() == p && !span.empty());
      // Its split sizes are read at load into the weights' offsets: neither resident nor a weight.
      in_unit = in_unit || name == unit.path + ".split_positions";
      if (in_unit) break;
    }
    if (in_unit) continue;
    r.weight_bytes += store.Data(e).size();
    r.bf16_weight_bytes += store.Data(e).size();
  }
  r.scratch_bytes = 2 * largest_unit_elements;
  if (!r.df11) {  // resident_bf16: nothing is decoded per step
    r.weight_bytes = r.bf16_weight_bytes;
    r.scratch_bytes = 0;
  }
}

// Embedding, final norm and lm_head. A tied model uses its lm_head unit when the checkpoint has
// one (a copy of the embedding, same bits), else the embedding itself.
Status Model::LoadHeads() {
  const ModelConfig& c = config_;
  const std::string embed_name = c.weight_prefix + "embed_tokens.weight";
  DF11_ASSIGN_OR_RETURN(embedding_, LocateLinear(*checkpoint_, embed_name, c.vocab_size, c.hidden_size));
  DF11_ASSIGN_OR_RETURN(final_norm_, ReadVectorF32(*checkpoint_, c.weight_prefix + "norm.weight", c.hidden_size));
  StatusOr<LinearWeight> head = LocateLinear(*checkpoint_, c.lm_head_name, c.vocab_size, c.hidden_size);
  if (head.ok()) {
    lm_head_ = std::move(head).value();
    return Status::Ok();
  }
  if (!c.tie_word_embeddings || head.status().code() != StatusCode::kNotFound) return head.status();
  DF11_ASSIGN_OR_RETURN(lm_head_, LocateLinear(*checkpoint_, embed_name, c.vocab_size, c.hidden_size));
  lm_head_is_embedding_ = lm_head_.owned.empty();
  return Status::Ok();
}

// A tied model's lm_head unit is a copy of the embedding (same bits): as the BF16 original, the
// head then reads the embedding's decoded words instead of a second copy.
Status Model::DecodeLinearsToBf16() {
  auto decode = [&](LinearWeight& w) -> Status {
    if (w.unit == nullptr) return Status::Ok();
    const uint64_t n = static_cast<uint64_t>(w.out_features) * static_cast<uint64_t>(w.in_features);
    w.owned.resize(n);
    DF11_RETURN_IF_ERROR(DecodeUnitCpuFast(w.unit->view, w.unit->layout, w.unit_offset, w.unit_offset + n,
                                           w.owned.data(), options_.threads, checkpoint_->dir() + ": " + w.name));
    w.unit = nullptr;
    w.unit_offset = 0;
    return Status::Ok();
  };
  for (LayerWeights& layer : layers_) {
    for (LinearWeight& w : layer.linears) DF11_RETURN_IF_ERROR(decode(w));
  }
  DF11_RETURN_IF_ERROR(decode(embedding_));
  if (config_.tie_word_embeddings) {
    lm_head_.unit = nullptr;
    lm_head_.owned = {};
    lm_head_.plain = embedding_.owned.empty() ? embedding_.plain : embedding_.owned.data();
    lm_head_is_embedding_ = true;
    return Status::Ok();
  }
  return decode(lm_head_);
}

}  // namespace df11
