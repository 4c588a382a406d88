// The CUDA backend of Model (internal to model*.cc): weights resident in VRAM and the per-step
// buffers. A DeviceLinear is the device form of a LinearWeight: a BF16 matrix in its own
// allocation, or a DF11 unit plus where the matrix lands in the DeviceScratch once that unit is
// decoded. Every matrix sits 256-byte aligned either way, so cuBLAS runs the same kernel on a
// DF11 weight and its BF16 twin (bit-identical logits).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/model/model.h"

#if DF11_HAVE_CUDA
#include "kernels/cuda_gemm.h"
#include "kernels/cuda_graph.h"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_sampling.h"
#include "kernels/cuda_upload.h"
#include "kernels/df11_decode_cuda.h"
#include "kernels/df11_lanes_cuda.h"
#endif

namespace df11 {

#if DF11_HAVE_CUDA

// Every matrix and step buffer starts at a multiple of 128 elements (256 bytes of bf16).
constexpr uint64_t kAlignElements = 128;
inline uint64_t AlignUp(uint64_t elements) { return (elements + kAlignElements - 1) / kAlignElements * kAlignElements; }

struct DeviceLinear {
  int64_t out_features = 0;
  int64_t in_features = 0;
  const uint16_t* plain = nullptr;  // BF16 [out, in] in VRAM, or
  int unit = -1;                    // index into CudaState::units (DF11)
  uint64_t scratch_offset = 0;      // elements into the scratch where the decoded matrix starts
  uint64_t unit_offset = 0;         // elements into the unit (embedding rows, sign_mantissa)
  int lanes = -1;                   // DF11 as lane streams: index into CudaState::lanes (fused linears)
  const float* bias = nullptr;      // [out] fp32 or null
};

// One uploaded DF11 unit and how it decodes into the scratch: element ranges [begin, end) of
// the unit to scratch offsets, all multiples of 128 elements (one range when the unit's slices
// already are).
struct DeviceUnitPlan {
  struct Range {
    uint64_t begin = 0, end = 0, scratch_offset = 0;
  };
  // A matrix of the unit kept as lane streams (df11_lanes.h): lanes index, where it starts in the
  // unit and in the scratch, and its elements.
  struct LaneMatrix {
    int lanes = -1;
    uint64_t unit_offset = 0, scratch_offset = 0, elements = 0;
  };
  const Df11Unit* host = nullptr;
  DeviceUnitBuffer buffer;
  std::vector<Range> ranges;
  uint64_t scratch_elements = 0;
  std::vector<LaneMatrix> lane_matrices;
  bool keep_stream = false;  // something reads the unit by element ranges (the embedding)
  bool slim = false;         // kept without its stream: every element is in lane_matrices
};

// A layer in VRAM: norm weights as fp32 device vectors, linears as DeviceLinear (decoder_layer.h).
using DeviceLayer = LayerWeightsOf<const float*, DeviceLinear>;

// The linears the CUDA backend stacks into one matrix: separate q/k/v into kQkv and gate/up into
// kGateUp, when every part has a multiple of kAlignElements elements (then a DF11 unit in
// checkpoint order holds them back to back, and both formats decide alike from the config).
struct FusedGroups {
  std::vector<std::pair<LayerTensor, std::vector<LayerTensor>>> groups;  // target, parts in row order
  bool Covers(LayerTensor id) const {
    for (const auto& [target, parts] : groups) {
      if (std::find(parts.begin(), parts.end(), id) != parts.end()) return true;
    }
    return false;
  }
};
FusedGroups FusedGroupsOf(const ModelConfig& c);
// Which projections a CUDA layer runs as one matrix: the checkpoint's fused ones and FusedGroupsOf's.
StackedLinears CudaStackedLinears(const ModelConfig& c);

// Buffers of one step, carved from CudaState::activations (each 256-byte aligned), bf16.
struct StepBuffers {
  LayerBuffers<uint16_t> layer;  // the decoder layer's activations
  uint16_t* embed_rows;          // [T, hidden] decoded DF11 embedding rows
  uint16_t *selected, *logits;   // [R, hidden], [R, vocab]
  float* logits_f32;             // [R, vocab] (soft-capped), copied to the host
};

struct Model::CudaState {
  CudaState() = default;
  ~CudaState() {
    if (lane_words_pinned) cuda::UnpinHost(lane_words.data());
    cuda::DestroyStream(decode_stream);
    cuda::DestroyStream(stream);
  }
  CudaState(const CudaState&) = delete;
  CudaState& operator=(const CudaState&) = delete;

  GpuStream stream = nullptr;
  cuda::GemmHandle gemm;
  std::shared_ptr<DeviceScratch> scratch;
  uint64_t scratch_needed = 0;               // bytes this model needs of the scratch
  std::vector<cuda::DeviceBuffer> resident;  // BF16 weights, norms, biases, inverse frequencies
  std::vector<std::unique_ptr<DeviceUnitPlan>> units;
  std::vector<DeviceLanesBuffer> lanes;  // DF11 matrices as lane streams (DeviceLinear::lanes)
  bool use_lanes = true;                 // ModelOptions::df11_lanes
  ModelOptions::LaneCodeChoice lane_code = ModelOptions::LaneCodeChoice::kAuto;
  int fixed_lanes = 0;                // lanes with LaneCode::kFixed3
  std::vector<std::string> warnings;  // what the load left slower than it could be, and why
  double lanes_seconds[5] = {};       // TranscodeLinear: decode, build, upload, check; SlimUnits
  double units_upload_seconds = 0;    // UploadUnit: DF11 units copied to the device
  // The load's host -> device copies of weights (units' streams, BF16 matrices); null after load,
  // or when the host refused its page-locked staging (plain copies then).
  std::unique_ptr<cuda::HostUploader> uploader;
  // TranscodeLinear's host copy of a matrix, reused (page-locked while `pinned`), freed after load.
  std::vector<uint16_t> lane_words;
  bool lane_words_pinned = false;
  std::vector<DeviceLayer> layers;
  DeviceLinear embedding, lm_head;
  const float* final_norm = nullptr;
  const float *inv_freq_global = nullptr, *inv_freq_local = nullptr;

  // Per step.
  StackedLinears stacked;  // CudaStackedLinears(config), set at load
  int loaded_unit = -1;    // unit decoded in the scratch now (-1: none / unknown)
  // Decoding ahead (ModelOptions::df11_prefetch; graph steps too with df11_prefetch_graphs): layer units decode into
  // two halves of the scratch, each unit's successor (next_unit) on decode_stream while the
  // current unit's linears run. half_unit: the unit in (or decoding into) each half; `pending`:
  // the unit whose decode `decode_ready` marks, not yet waited for by `stream`.
  GpuStream decode_stream = nullptr;  // null: no decoding ahead
  std::vector<int> next_unit;         // per unit: the unit the forward pass decodes next, or -1
  uint64_t half_elements = 0;         // elements of a half: the largest unit in a next_unit chain
  int half_unit[2] = {-1, -1};
  int pending = -1, current_unit = -1;  // current: the unit the last WeightData returned
  bool capturing = false;               // a CUDA graph capture is under way
  bool ahead_in_graphs = false;         // ModelOptions::df11_prefetch_graphs: decode ahead when capturing
  cuda::StreamEvent decode_ready, scratch_free;
  cuda::DeviceBuffer activations;          // bf16 buffers of the step, grown on demand
  cuda::DeviceBuffer batch_arrays;         // int32 token/position/table arrays of the step
  cuda::DeviceBuffer attention_workspace;  // split-KV partials (cuda::AttentionWorkspaceFloats)
  cuda::DeviceBuffer sampler_workspace;    // cuda::SamplingWorkspaceBytes, reserved at load
  cuda::DeviceBuffer sampler_inputs;       // DeviceSampleRow rows, then PenaltyEntry rows
  cuda::DeviceBuffer sampler_outputs;      // SampledRow rows
  // The step in flight's sampled rows: copied into `sampled_host` (page-locked, grown on demand)
  // by Sample, read by CollectSamples; with each row's error found on the host and whether it
  // asked for logprobs. sampled_rows 0: the step samples nothing.
  cuda::PinnedHostBuffer sampled_host;
  int64_t sampled_rows = 0;
  std::vector<Status> sample_errors;
  std::vector<uint8_t> sample_logprobs;
  std::chrono::steady_clock::time_point launch_time;  // of the step in flight (StepOutput::step_seconds)
  // Decode steps replay a graph per (tokens, rounded max keys) once captured, while the buffers,
  // scratch and KV pools it baked in stay where they were.
  struct StepGraph {
    int64_t tokens = 0, max_keys = 0;
    std::array<uint64_t, 6> pointers{};  // buffers, scratch and KV pool it baked in, KV blocks
    size_t decode_events = 0;            // decode_timer events the graph records
    cuda::GraphExec exec;
  };
  static constexpr size_t kMaxStepGraphs = 64;
  std::vector<StepGraph> graphs;  // an entry without exec: its shape ran once, eagerly
  bool graphs_failed = false;     // the runtime refused a capture: no more captures
  bool replayed_graph = false;    // the current step's forward pass ran as a graph
  cuda::EventTimer decode_timer;
  cuda::EventTimer span_timer;                   // StepOutput::gpu_seconds
  cuda::EventTimer gemm_timer, attention_timer;  // StepInput::profile
  bool profile = false;
  uint64_t weight_bytes = 0, bf16_weight_bytes = 0;  // for the LoadReport
  // Model::Offload: every weight allocation's bytes (model_tier.cc lays them out), and where each
  // `resident` buffer was (the pointers into it are moved by Restore).
  cuda::PinnedHostBuffer image;
  std::vector<const char*> resident_bases;

  // Load helpers (model_cuda_load.cc).
  // device dst[0, bytes) <- host src (a weight in the mapped checkpoint or a temporary); returns
  // when the copy is done.
  Status CopyWeights(void* dst, const void* src, uint64_t bytes);
  StatusOr<const float*> UploadFloats(const std::vector<float>& values, const char* what);
  StatusOr<int> UploadUnit(const Df11Unit& unit);
  // `decoded`: the weight goes through Linear (its unit must fit the scratch); `transcode`: a DF11
  // weight also gets lane streams (TranscodeLinear).
  StatusOr<DeviceLinear> UploadLinear(const Checkpoint& checkpoint, const LinearWeight& w, bool decoded,
                                      bool transcode = true);
  // Gives DF11 matrix d ([out, in] at d.unit_offset of its unit) lane streams when use_lanes and its
  // shape allows: decoded by the unit's CUDA decoder and copied to the host, re-arranged, uploaded,
  // then decoded by the lane decoder and compared with those words bit for bit. A matrix that fails
  // stays on the decode-then-GEMM path with a warning naming it; only CUDA errors fail the load.
  Status TranscodeLinear(DeviceLinear& d, const std::string& name);
  // Replaces the units whose every element is in lane streams by copies without their streams.
  Status SlimUnits();
  // GemmHandle::CheckCublasBits for each shape of the BF16 matrices without a bias (the shapes the
  // wgmma tile linear takes, at 17-128 tokens); token counts where cuBLAS differs become warnings.
  Status CheckCublasBits();
  // One matrix of `parts` stacked by rows (biases concatenated, zeros for a part without one): a
  // BF16 copy in one allocation, or DF11 slices that lie next to each other in the scratch
  // (UNIMPLEMENTED, naming them, when the unit orders them otherwise).
  StatusOr<DeviceLinear> UploadFused(const Checkpoint& checkpoint, const std::vector<const LinearWeight*>& parts);
  // Step helpers (model_cuda_step.cc).
  StatusOr<StepBuffers> PrepareBuffers(const ModelConfig& c, int64_t tokens, int64_t rows);
  // Makes w's BF16 matrix available for a linear of `tokens` tokens (decoding its unit into the
  // scratch if needed, and, decoding ahead, starting its successor's decode).
  StatusOr<const uint16_t*> WeightData(const DeviceLinear& w, int64_t tokens);
  // The sign_mantissa bytes of w's lane streams (w.lanes >= 0): its slice of its unit's.
  const uint8_t* SignMantissa(const DeviceLinear& w) const {
    return units[w.unit]->buffer.unit().sign_mantissa + w.unit_offset;
  }
  // Decodes unit `unit` into dst (its scratch layout) on `s` for linears of `tokens` tokens, timed by
  // decode_timer: the matrices FusedWithoutScratch at those tokens are left out.
  Status DecodeUnit(int unit, uint16_t* dst, GpuStream s, int64_t tokens);
  // Whether a linear on lanes `l` runs fused at `tokens` tokens where its unit would otherwise be
  // decoded into the scratch: above gemm.tile_max_tokens() (32 or 64), fixed lanes of 4 rows per
  // tile on the wgmma tile linear (cuda::WgmmaTileApplies; x is 16-byte aligned, as every step buffer is).
  bool FusedWithoutScratch(const DeviceLanes& l, int64_t tokens) const;
  // Makes `stream` wait for a decode ahead still pending, and forgets what the halves hold.
  Status JoinDecodes();
  // launch(), which enqueues one linear on the stream, between gemm_timer's events when profiling.
  template <typename Launch>
  Status TimedGemm(Launch&& launch) {
    if (profile) DF11_RETURN_IF_ERROR(gemm_timer.Begin(stream));
    DF11_RETURN_IF_ERROR(launch());
    return profile ? gemm_timer.End(stream) : Status::Ok();
  }
  // y[T, out] = x[T, in] · W^T (+ bias), bf16.
  Status Linear(const DeviceLinear& w, const uint16_t* x, int64_t tokens, uint16_t* y);
  // out[T, inter] = the gated activation of a gate|up linear (W [2 inter, in]: gate rows, then up
  // rows): one launch at the token counts where that measured faster (cuda::GemvGated for a BF16 W
  // at 1 token, cuda::TileGemmGated for a BF16 W at 2-32, Df11TileGemmGated for fixed lanes at 2-64,
  // and on Hopper for 4 rows per tile from 17 tokens the wgmma tile linear's gated form,
  // (Df11)WgmmaTileGemmGated, to 128 for DF11 and 32 for BF16), else Linear into gate_up
  // [T, 2 inter] and cuda::GatedActivation. The same bits either way.
  Status GateUpActivation(const DeviceLinear& w, const uint16_t* x, int64_t tokens, Activation act, int64_t inter,
                          uint16_t* gate_up, uint16_t* out);
  // Enqueues `forward` on the stream: the first time for a shape as is, the second time captured
  // and replayed, then replayed. After a capture the runtime refuses, new shapes run op by op.
  Status ReplayOrCapture(int64_t tokens, int64_t max_keys, const std::array<uint64_t, 6>& pointers,
                         const std::function<Status()>& forward);
  // Enqueues the sampling of logits [rows, vocab] fp32 on the device, rows as output.rows, and the
  // copy of the sampled rows into sampled_host (model_cuda_sample.cc); does not wait.
  Status Sample(const StepInput& input, const StepOutput& output, float* logits, int64_t vocab);
  // output.samples from sampled_host, once the stream is done.
  void CollectSamples(StepOutput& output) const;
};

#else

struct Model::CudaState {};

#endif

}  // namespace df11
