// Model::LoadCuda: weights into VRAM (see model_cuda.h). DF11 units are uploaded compressed,
// BF16 tensors copied as BF16, norm weights and biases as fp32; no BF16 copy of a DF11 weight.
// DF11 linears are re-arranged into lane streams (TranscodeLinear), and a unit whose every
// element then lives in lane streams drops its own stream (SlimUnits).
#include <algorithm>
#include <array>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "kernels/df11_codec.h"
#include "kernels/df11_lanes_fixed.h"
#include "runtime/model/model_cuda.h"

namespace df11 {

#if DF11_HAVE_CUDA

FusedGroups FusedGroupsOf(const ModelConfig& c) {
  const uint64_t H = c.hidden_size, I = c.intermediate_size;
  const uint64_t qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  auto aligned = [](std::initializer_list<uint64_t> sizes) {
    return std::all_of(sizes.begin(), sizes.end(), [](uint64_t n) { return n % kAlignElements == 0; });
  };
  FusedGroups f;
  if (!c.fused_qkv && aligned({qd * H, kvd * H})) {
    f.groups.push_back({LayerTensor::kQkv, {LayerTensor::kQ, LayerTensor::kK, LayerTensor::kV}});
  }
  if (!c.fused_gate_up && aligned({I * H}))
    f.groups.push_back({LayerTensor::kGateUp, {LayerTensor::kGate, LayerTensor::kUp}});
  return f;
}

StackedLinears CudaStackedLinears(const ModelConfig& c) {
  const FusedGroups fused = FusedGroupsOf(c);
  return {c.fused_qkv || fused.Covers(LayerTensor::kQ), c.fused_gate_up || fused.Covers(LayerTensor::kGate)};
}

StatusOr<const float*> Model::CudaState::UploadFloats(const std::vector<float>& values, const char* what) {
  if (values.empty()) return static_cast<const float*>(nullptr);
  const uint64_t bytes = values.size() * sizeof(float);
  DF11_ASSIGN_OR_RETURN(cuda::DeviceBuffer buffer, cuda::DeviceBuffer::Allocate(bytes, what));
  DF11_RETURN_IF_ERROR(cuda::CopyToDevice(buffer.data(), values.data(), bytes, stream));
  weight_bytes += bytes;
  bf16_weight_bytes += values.size() * 2;
  resident.push_back(std::move(buffer));
  return resident.back().as<const float>();
}

Status Model::CudaState::CopyWeights(void* dst, const void* src, uint64_t bytes) {
  if (uploader != nullptr) return uploader->Copy(dst, src, bytes);
  DF11_RETURN_IF_ERROR(cuda::CopyToDevice(dst, src, bytes, stream));
  return cuda::Synchronize(stream);  // the host side may be a temporary copy
}

StatusOr<int> Model::CudaState::UploadUnit(const Df11Unit& unit) {
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i]->host == &unit) return static_cast<int>(i);
  }
  auto plan = std::make_unique<DeviceUnitPlan>();
  plan->host = &unit;
  const auto start = std::chrono::steady_clock::now();
  StatusOr<DeviceUnitBuffer> buffer = DeviceUnitBuffer::Upload(unit.view, unit.layout, uploader.get());
  if (!buffer.ok()) return buffer.status().WithContext(unit.path);
  units_upload_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  plan->buffer = std::move(buffer).value();
  const bool aligned = std::all_of(unit.weights.begin(), unit.weights.end(),
                                   [](const UnitWeight& w) { return w.offset % kAlignElements == 0; });
  if (aligned) {
    plan->ranges.push_back({0, unit.layout.num_elements, 0});
    plan->scratch_elements = unit.layout.num_elements;
  } else {  // NOTE: odd slice offsets (tiny models): decode each slice to an aligned place.
    for (const UnitWeight& w : unit.weights) {
      plan->ranges.push_back({w.offset, w.offset + w.numel, plan->scratch_elements});
      plan->scratch_elements = AlignUp(plan->scratch_elements + w.numel);
    }
  }
  weight_bytes += plan->buffer.device_bytes();
  bf16_weight_bytes += 2 * unit.layout.num_elements;
  units.push_back(std::move(plan));
  return static_cast<int>(units.size() - 1);
}

StatusOr<DeviceLinear> Model::CudaState::UploadLinear(const Checkpoint& checkpoint, const LinearWeight& w, bool decoded,
                                                      bool transcode) {
  DeviceLinear d;
  d.out_features = w.out_features;
  d.in_features = w.in_features;
  DF11_ASSIGN_OR_RETURN(d.bias, UploadFloats(w.bias, "bias"));
  if (w.unit != nullptr) {
    DF11_ASSIGN_OR_RETURN(d.unit, UploadUnit(*w.unit));
    DeviceUnitPlan& plan = *units[d.unit];
    d.unit_offset = w.unit_offset;
    bool found = false;
    for (const DeviceUnitPlan::Range& r : plan.ranges) {
      if (w.unit_offset >= r.begin && w.unit_offset < r.end) {
        d.scratch_offset = r.scratch_offset + (w.unit_offset - r.begin);
        found = true;
      }
    }
    if (!found) return Internal(checkpoint.dir() + ": " + w.name + " is not inside its DF11 unit");
    if (decoded) scratch_needed = std::max(scratch_needed, 2 * plan.scratch_elements);
    if (!decoded) plan.keep_stream = true;
    if (decoded && transcode) DF11_RETURN_IF_ERROR(TranscodeLinear(d, w.name));
    return d;
  }
  DF11_ASSIGN_OR_RETURN(const uint16_t* host, df11::WeightData(w, UnitScratch()));
  const uint64_t bytes = static_cast<uint64_t>(w.out_features) * w.in_features * 2;
  DF11_ASSIGN_OR_RETURN(cuda::DeviceBuffer buffer, cuda::DeviceBuffer::Allocate(bytes, w.name.c_str()));
  DF11_RETURN_IF_ERROR(CopyWeights(buffer.data(), host, bytes));
  weight_bytes += bytes;
  bf16_weight_bytes += bytes;
  resident.push_back(std::move(buffer));
  d.plain = resident.back().as<const uint16_t>();
  return d;
}

StatusOr<DeviceLinear> Model::CudaState::UploadFused(const Checkpoint& checkpoint,
                                                     const std::vector<const LinearWeight*>& parts) {
  DeviceLinear d;
  d.in_features = parts[0]->in_features;
  std::vector<float> bias;
  bool any_bias = false;
  for (const LinearWeight* w : parts) {
    d.out_features += w->out_features;
    any_bias = any_bias || !w->bias.empty();
  }
  if (any_bias) {  // a part without a bias adds zeros
    for (const LinearWeight* w : parts) {
      if (w->bias.empty()) bias.insert(bias.end(), w->out_features, 0.0f);
      bias.insert(bias.end(), w->bias.begin(), w->bias.end());
    }
  }
  DF11_ASSIGN_OR_RETURN(d.bias, UploadFloats(bias, "bias"));
  if (parts[0]->unit != nullptr) {  // DF11: slices of one unit, decoded next to each other
    uint64_t next = 0, unit_next = 0;
    bool unit_adjacent = true;  // and back to back in the unit (lane streams cover them as one)
    for (size_t i = 0; i < parts.size(); ++i) {
      LinearWeight slice = *parts[i];
      slice.bias.clear();
      DF11_ASSIGN_OR_RETURN(const DeviceLinear p, UploadLinear(checkpoint, slice, true, false));
      if (i == 0) {
        d.unit = p.unit;
        d.unit_offset = p.unit_offset;
        d.scratch_offset = p.scratch_offset;
      } else if (p.unit != d.unit || p.scratch_offset != next) {
        return Unimplemented(checkpoint.dir() + ": " + slice.name + " does not follow " + parts[i - 1]->name +
                             " in its DF11 unit; the CUDA backend runs them as one matrix");
      }
      if (i > 0 && p.unit_offset != unit_next) unit_adjacent = false;
      next = p.scratch_offset + static_cast<uint64_t>(p.out_features) * p.in_features;
      unit_next = p.unit_offset + static_cast<uint64_t>(p.out_features) * p.in_features;
    }
    if (unit_adjacent) {
      DF11_RETURN_IF_ERROR(TranscodeLinear(d, parts[0]->name + " (stacked)"));
    } else if (use_lanes) {
      warnings.push_back(parts[0]->name +
                         " (stacked): parts not back to back in their DF11 unit; decoded before its GEMM");
    }
    return d;
  }
  const uint64_t bytes = static_cast<uint64_t>(d.out_features) * d.in_features * 2;
  DF11_ASSIGN_OR_RETURN(cuda::DeviceBuffer buffer, cuda::DeviceBuffer::Allocate(bytes, parts[0]->name.c_str()));
  uint64_t offset = 0;
  for (const LinearWeight* w : parts) {
    DF11_ASSIGN_OR_RETURN(const uint16_t* host, df11::WeightData(*w, UnitScratch()));
    const uint64_t part = static_cast<uint64_t>(w->out_features) * w->in_features * 2;
    DF11_RETURN_IF_ERROR(CopyWeights(buffer.as<char>() + offset, host, part));
    offset += part;
  }
  weight_bytes += bytes;
  bf16_weight_bytes += bytes;
  resident.push_back(std::move(buffer));
  d.plain = resident.back().as<const uint16_t>();
  return d;
}

namespace {

// Whether W's fixed lanes stay within 1.03x W's share of its unit's published bytes: W's
// sign_mantissa bytes plus its Huffman codes' bits at the unit's bytes per stream byte (the
// stream with its gaps and chunk index).
bool FixedLanesFit(const std::array<uint64_t, 256>& histogram, const std::array<SymbolCode, 256>& codes,
                   const UnitView& unit, int64_t rows, int64_t cols, int rows_per_tile) {
  uint64_t bits = 0;
  for (int e = 0; e < 256; ++e) bits += histogram[e] * codes[e].length;
  const double stream = static_cast<double>(std::max<size_t>(unit.encoded_exponent.size(), 1));
  const double per_stream_byte =
      (stream + static_cast<double>(unit.gaps.size() + unit.output_positions.size())) / stream;
  const double n = static_cast<double>(rows) * static_cast<double>(cols);
  const double share = n + static_cast<double>(bits) / 8 * per_stream_byte;
  return n + static_cast<double>(FixedLanesBytesBound(histogram, rows, cols, rows_per_tile)) <= 1.03 * share;
}

}  // namespace

Status Model::CudaState::TranscodeLinear(DeviceLinear& d, const std::string& name) {
  if (!use_lanes || d.unit < 0) return Status::Ok();
  DeviceUnitPlan& plan = *units[d.unit];
  if (plan.keep_stream) return Status::Ok();  // a tied lm_head: the embedding's unit keeps its stream
  const Df11Unit& unit = *plan.host;
  const int64_t rows = d.out_features, cols = d.in_features;
  const uint64_t n = static_cast<uint64_t>(rows) * cols;
  if (cols % 8 != 0 || d.unit_offset % 8 != 0) {
    warnings.push_back(name + ": in_features " + std::to_string(cols) + " or unit offset " +
                       std::to_string(d.unit_offset) + " not a multiple of 8; decoded before its GEMM");
    return Status::Ok();
  }
  auto t0 = std::chrono::steady_clock::now();
  auto lap = [&](int phase) {
    const auto now = std::chrono::steady_clock::now();
    lanes_seconds[phase] += std::chrono::duration<double>(now - t0).count();
    t0 = now;
  };
  // The matrix's words, decoded on the GPU by the unit's own decoder, in slices of <= 16 Mi
  // elements: into one device buffer of the whole matrix, where fixed lanes are then built
  // (BuildFixedLanesOnDevice: BuildFixedLaneStreams's bytes; on an H200 the 8B model's 145 matrices
  // in 0.07 s against 4.4-5.6 s on the host's 16 cores, its load 2.17 s against 7.75-9.54,
  // bench/results/model_load_h200_device_build.log), or, for Huffman lanes or where that buffer
  // does not fit, to the host, which builds them.
  const DeviceUnit& du = plan.buffer.unit();
  const int rows_per_tile = LaneRowsPerTile(rows);
  const int64_t tile_elements = static_cast<int64_t>(rows_per_tile) * cols;
  const int64_t tiles = (rows + rows_per_tile - 1) / rows_per_tile;
  const int64_t per_slice = std::max<int64_t>(1, (int64_t{16} << 20) / tile_elements);
  auto host_words = [&]() {  // lane_words holds n words: grown, then page-locked (unlocked copies are slower)
    if (lane_words.size() >= n) return;
    if (lane_words_pinned) cuda::UnpinHost(lane_words.data());
    lane_words = std::vector<uint16_t>(n);
    lane_words_pinned = cuda::PinHost(lane_words.data(), 2 * n).ok();
  };
  StatusOr<cuda::DeviceBuffer> whole = cuda::DeviceBuffer::Allocate(2 * n, "a matrix for its lane streams");
  cuda::DeviceBuffer slices;  // without `whole`: one slice at a time
  if (!whole.ok()) {
    DF11_ASSIGN_OR_RETURN(slices, cuda::DeviceBuffer::Allocate(2 * std::min<int64_t>(tiles, per_slice) * tile_elements,
                                                               "lane stream slices"));
  }
  for (int64_t t = 0; t < tiles; t += per_slice) {
    const uint64_t first = static_cast<uint64_t>(t) * tile_elements;
    const uint64_t count = std::min<uint64_t>(n - first, static_cast<uint64_t>(per_slice) * tile_elements);
    uint16_t* out = whole.ok() ? whole->as<uint16_t>() + first : slices.as<uint16_t>();
    const Status st =
        LaunchDf11Decode(du, plan.buffer.layout(), d.unit_offset + first, d.unit_offset + first + count, out, stream);
    if (!st.ok()) return st.WithContext(unit.path);
    if (!whole.ok()) {
      host_words();
      DF11_RETURN_IF_ERROR(cuda::CopyToHost(lane_words.data() + first, out, 2 * count, stream));
    }
  }
  // A matrix without lane streams keeps the decode-then-GEMM path, and the load a warning.
  auto no_lanes = [&](const Status& why) {
    warnings.push_back(name + ": no lane streams (" + why.ToString() + "); decoded before its GEMM");
    return Status::Ok();
  };
  const StatusOr<std::array<SymbolCode, 256>> codes = CodesFromLuts(unit.view.luts);
  auto histogram_of = [&]() -> StatusOr<std::array<uint64_t, 256>> {  // the exponents counted where the words are
    if (!codes.ok()) return codes.status();
    if (whole.ok()) return DeviceExponentHistogram(whole->as<uint16_t>(), n, stream);
    return ExponentHistogram(std::span<const uint16_t>(lane_words.data(), n));
  };
  const StatusOr<std::array<uint64_t, 256>> histogram = histogram_of();
  lap(0);
  if (!histogram.ok()) return no_lanes(histogram.status());
  const int fixed_rows = FixedRowsPerTile(rows, cols);
  const bool fixed = lane_code == ModelOptions::LaneCodeChoice::kFixed3 ||
                     (lane_code == ModelOptions::LaneCodeChoice::kAuto &&
                      FixedLanesFit(*histogram, *codes, unit.view, rows, cols, fixed_rows));
  const bool on_device = fixed && whole.ok();
  if (!on_device && whole.ok()) {  // Huffman lanes: built on the host
    host_words();
    DF11_RETURN_IF_ERROR(cuda::CopyToHost(lane_words.data(), whole->data(), 2 * n, stream));
  }
  auto build_on_host = [&]() -> StatusOr<DeviceLanesBuffer> {
    const std::span<const uint16_t> words(lane_words.data(), n);
    const StatusOr<LaneStreams> host_lanes =
        fixed ? BuildFixedLaneStreams(words, *histogram, rows, cols, fixed_rows, name)
              : BuildLaneStreams(*codes, words, rows, cols, rows_per_tile, name);
    lap(1);
    if (!host_lanes.ok()) return host_lanes.status();
    StatusOr<DeviceLanesBuffer> uploaded = DeviceLanesBuffer::Upload(*host_lanes, stream);
    lap(2);
    return uploaded;
  };
  StatusOr<DeviceLanesBuffer> built =
      on_device ? BuildFixedLanesOnDevice(whole->as<uint16_t>(), *histogram, rows, cols, fixed_rows, stream, name)
                : build_on_host();
  if (on_device) lap(1);
  if (!built.ok()) return no_lanes(built.status());
  DeviceLanesBuffer buffer = std::move(built).value();
  // Verify on the device: the lane decoder gives the words the unit's decoder gives, slice by slice
  // (decoded again into the slice buffer, or already in the whole matrix's).
  DF11_ASSIGN_OR_RETURN(cuda::DeviceBuffer mismatches, cuda::DeviceBuffer::Allocate(4, "lane stream check"));
  DF11_RETURN_IF_ERROR(cuda::FillZero(mismatches.data(), 4, stream));
  for (int64_t t = 0; t < tiles; t += per_slice) {
    const DeviceLanes slice = TileSlice(buffer.lanes(), t, std::min(per_slice, tiles - t));
    const uint64_t first = static_cast<uint64_t>(t) * tile_elements, count = slice.rows * cols;
    const uint16_t* expected = whole.ok() ? whole->as<uint16_t>() + first : slices.as<uint16_t>();
    if (!whole.ok()) {
      DF11_RETURN_IF_ERROR(LaunchDf11Decode(du, plan.buffer.layout(), d.unit_offset + first,
                                            d.unit_offset + first + count, slices.as<uint16_t>(), stream));
    }
    DF11_RETURN_IF_ERROR(LaunchLanesCompare(slice, TablesOf(du), du.sign_mantissa + d.unit_offset + first, expected,
                                            mismatches.as<uint32_t>(), stream));
  }
  uint32_t differ = 0;
  DF11_RETURN_IF_ERROR(cuda::CopyToHost(&differ, mismatches.data(), 4, stream));
  if (differ != 0) {
    warnings.push_back(name + ": lane streams decode to other bits in " + std::to_string(differ) +
                       " groups of 8 on this GPU; decoded before its GEMM");
    return Status::Ok();
  }
  lap(3);
  fixed_lanes += buffer.lanes().code == LaneCode::kFixed3;
  weight_bytes += buffer.device_bytes();
  lanes.push_back(std::move(buffer));
  d.lanes = static_cast<int>(lanes.size() - 1);
  plan.lane_matrices.push_back({d.lanes, d.unit_offset, d.scratch_offset, n});
  return Status::Ok();
}

Status Model::CudaState::SlimUnits() {
  const auto start = std::chrono::steady_clock::now();
  for (auto& plan : units) {
    if (plan->slim || plan->keep_stream) continue;
    uint64_t covered = 0;
    for (const DeviceUnitPlan::LaneMatrix& m : plan->lane_matrices) covered += m.elements;
    if (covered != plan->host->layout.num_elements) continue;
    const uint64_t before = plan->buffer.device_bytes();
    StatusOr<DeviceUnitBuffer> slim = plan->buffer.WithoutStream();
    if (!slim.ok()) return slim.status().WithContext(plan->host->path);
    plan->buffer = std::move(slim).value();  // frees the stream
    weight_bytes = weight_bytes - before + plan->buffer.device_bytes();
    plan->slim = true;
  }
  lanes_seconds[4] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

Status Model::CudaState::CheckCublasBits() {
  if (gemm.wgmma_tile_max_tokens() == 0) return Status::Ok();  // wgmma_tile false
  std::vector<const DeviceLinear*> plain;  // BF16 matrices that reach GemmHandle::Gemm without a bias
  for (const DeviceLayer& layer : layers) {
    for (const DeviceLinear& w : layer.linears) plain.push_back(&w);
  }
  plain.push_back(&lm_head);
  std::vector<std::pair<int64_t, int64_t>> done;
  for (const DeviceLinear* w : plain) {
    const std::pair<int64_t, int64_t> shape{w->out_features, w->in_features};
    if (w->plain == nullptr || w->unit >= 0 || w->bias != nullptr || std::ranges::find(done, shape) != done.end()) {
      continue;
    }
    done.push_back(shape);
    DF11_ASSIGN_OR_RETURN(const std::vector<int64_t> differed,
                          gemm.CheckCublasBits(w->plain, shape.first, shape.second));
    if (differed.empty()) continue;
    std::string counts;
    for (size_t i = 0; i < differed.size(); ++i) {
      size_t j = i;
      while (j + 1 < differed.size() && differed[j + 1] == differed[j] + 1) ++j;
      if (!counts.empty()) counts += ", ";
      counts += std::to_string(differed[i]);
      if (j > i) counts.append(1, '-').append(std::to_string(differed[j]));
      i = j;
    }
    warnings.push_back("cuBLAS does not give the wgmma tile linear's bits for a [" + std::to_string(shape.first) +
                       ", " + std::to_string(shape.second) + "] matrix at " + counts +
                       " tokens on this GPU: the tile linear runs there (slower than cuBLAS)");
  }
  return Status::Ok();
}

Status Model::LoadCuda() {
  if (CudaDeviceCount() == 0) return FailedPrecondition(checkpoint_->dir() + ": no CUDA device");
  cuda_ = std::make_unique<CudaState>();
  CudaState& st = *cuda_;
  st.use_lanes = options_.df11_lanes;
  st.lane_code = options_.df11_lane_code;
  // The step's stream at the greatest priority: a DF11 unit decoding ahead on decode_stream (the
  // least) takes the SMs its kernels leave.
  DF11_ASSIGN_OR_RETURN(st.stream, cuda::CreateStream(/*high_priority=*/true));
  if (options_.tile_max_tokens != 32 && options_.tile_max_tokens != 64) {
    return InvalidArgument(checkpoint_->dir() + ": tile_max_tokens must be 32 or 64, got " +
                           std::to_string(options_.tile_max_tokens));
  }
  DF11_RETURN_IF_ERROR(st.gemm.Init(st.stream));
  // Staging for the weights' copies, freed when the load ends. A host that refuses page-locked
  // memory still loads, through plain copies, with a warning.
  if (StatusOr<cuda::HostUploader> uploader = cuda::HostUploader::Create(); uploader.ok()) {
    st.uploader = std::make_unique<cuda::HostUploader>(std::move(uploader).value());
  } else {
    st.warnings.push_back("weights copied to the device without page-locked staging (slower load): " +
                          uploader.status().message());
  }
  st.gemm.set_tile_max_tokens(options_.tile_max_tokens);
  st.gemm.set_wgmma_tile(options_.wgmma_tile);
  st.scratch = options_.scratch ? options_.scratch : std::make_shared<DeviceScratch>();
  const Checkpoint& ckpt = *checkpoint_;
  st.layers.resize(layers_.size());
  // Separate q/k/v and gate/up run as one matrix each (kQkv, kGateUp: one read of the input, one
  // launch), for DF11 and BF16 alike; their own slots stay empty.
  const FusedGroups fused = FusedGroupsOf(config_);
  st.stacked = CudaStackedLinears(config_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    for (const LayerTensorSpec* spec : LayerTensorsOf(config_)) {
      if (spec->kind == TensorKind::kNorm) {
        DF11_ASSIGN_OR_RETURN(st.layers[l].vector(spec->id), st.UploadFloats(layers_[l].vector(spec->id), spec->name));
      } else if (spec->kind == TensorKind::kMatrix && !fused.Covers(spec->id)) {  // with its bias
        DF11_ASSIGN_OR_RETURN(st.layers[l].linear(spec->id), st.UploadLinear(ckpt, layers_[l].linear(spec->id), true));
      }
    }
    for (const auto& [target, members] : fused.groups) {
      std::vector<const LinearWeight*> parts;
      for (LayerTensor id : members) parts.push_back(&layers_[l].linear(id));
      DF11_ASSIGN_OR_RETURN(st.layers[l].linear(target), st.UploadFused(ckpt, parts));
    }
    DF11_RETURN_IF_ERROR(st.SlimUnits());  // a layer at a time: at most one unit twice in VRAM
  }
  DF11_ASSIGN_OR_RETURN(st.embedding, st.UploadLinear(ckpt, embedding_, false));
  if (lm_head_is_embedding_ && embedding_.unit == nullptr) {
    st.lm_head = st.embedding;  // tied BF16: one resident copy
  } else {
    DF11_ASSIGN_OR_RETURN(st.lm_head, st.UploadLinear(ckpt, lm_head_, true));
  }
  DF11_RETURN_IF_ERROR(st.SlimUnits());
  if (st.lane_words_pinned) cuda::UnpinHost(st.lane_words.data());
  st.lane_words_pinned = false;
  st.lane_words = {};
  DF11_ASSIGN_OR_RETURN(st.final_norm, st.UploadFloats(final_norm_, "final norm"));
  const uint64_t weights = st.weight_bytes, bf16 = st.bf16_weight_bytes;
  DF11_ASSIGN_OR_RETURN(st.inv_freq_global, st.UploadFloats(rope_global_.inv_freq, "rope"));
  DF11_ASSIGN_OR_RETURN(st.inv_freq_local, st.UploadFloats(rope_local_.inv_freq, "rope"));
  st.weight_bytes = weights;  // rotary tables are not weights
  st.bf16_weight_bytes = bf16;
  int64_t longest_bias = 0;  // GemmBias's buffer sized now: CUDA graphs keep its address
  for (const DeviceLayer& layer : st.layers) {
    for (const DeviceLinear& w : layer.linears) {
      if (w.bias != nullptr) longest_bias = std::max(longest_bias, w.out_features);
    }
  }
  if (st.lm_head.bias != nullptr) longest_bias = std::max(longest_bias, st.lm_head.out_features);
  if (longest_bias > 0) DF11_RETURN_IF_ERROR(st.gemm.ReserveBias(longest_bias));
  st.next_unit.assign(st.units.size(), -1);
  if (options_.df11_prefetch) {  // the layers' units in forward order, each decoded while the one before runs
    std::vector<int> chain;
    for (const DeviceLayer& layer : st.layers) {
      for (const DeviceLinear& w : layer.linears) {
        if (w.unit >= 0 && (chain.empty() || chain.back() != w.unit)) chain.push_back(w.unit);
      }
    }
    for (size_t i = 0; i < chain.size(); ++i) {
      st.half_elements = std::max(st.half_elements, st.units[chain[i]]->scratch_elements);
      if (i + 1 < chain.size()) st.next_unit[chain[i]] = chain[i + 1];
    }
    if (chain.size() >= 2) {
      st.scratch_needed = std::max(st.scratch_needed, uint64_t{4} * st.half_elements);  // bytes of two halves
      DF11_ASSIGN_OR_RETURN(st.decode_stream, cuda::CreateStream());
      st.ahead_in_graphs = options_.df11_prefetch_graphs;
    }
  }
  DF11_RETURN_IF_ERROR(st.scratch->Reserve(st.scratch_needed));
  DF11_RETURN_IF_ERROR(st.PrepareBuffers(config_, 256, 1).status());
  DF11_RETURN_IF_ERROR(
      st.sampler_workspace.Reserve(cuda::SamplingWorkspaceBytes(config_.vocab_size), "sampler workspace"));
  DF11_RETURN_IF_ERROR(st.CheckCublasBits());
  DF11_RETURN_IF_ERROR(cuda::Synchronize(st.stream));
  st.uploader.reset();
  report_.device = Device::kCuda;
  report_.df11 = resident_df11();
  report_.weight_bytes = st.weight_bytes;
  report_.bf16_weight_bytes = st.bf16_weight_bytes;
  report_.scratch_bytes = st.activations.bytes() + st.batch_arrays.bytes() + st.sampler_workspace.bytes();
  report_.shared_scratch_bytes = st.scratch_needed;
  report_.warnings.insert(report_.warnings.end(), st.warnings.begin(), st.warnings.end());
  report_.lane_matrices = static_cast<int>(st.lanes.size());
  report_.fixed_lane_matrices = st.fixed_lanes;
  report_.lanes_decode_seconds = st.lanes_seconds[0];
  report_.lanes_build_seconds = st.lanes_seconds[1];
  report_.lanes_upload_seconds = st.lanes_seconds[2];
  report_.lanes_check_seconds = st.lanes_seconds[3];
  report_.lanes_slim_seconds = st.lanes_seconds[4];
  report_.units_upload_seconds = st.units_upload_seconds;
  return Status::Ok();
}

#else

Status Model::LoadCuda() { return Unimplemented(checkpoint_->dir() + ": this build has no CUDA"); }

#endif

}  // namespace df11
