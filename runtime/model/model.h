// Model: the forward step of every supported architecture: one generic decoder layer
// (decoder_layer.h, written once for both backends) driven by ModelConfig flags (qkv bias,
// qk-norm, fused projections, sandwich norms, GeGLU/SwiGLU, sliding windows, rope variants,
// soft-capping). Weights stay as loaded: a DF11 layer unit is decoded into one scratch buffer just
// before the layer runs; embedding rows are decoded one by one.
// Step runs a ragged batch of sequences against a caller-owned paged KvCache (kv_cache.h); the
// model keeps no per-sequence state between steps.
// On kCuda, weights live in VRAM (DF11 units compressed, BF16 tensors as BF16, norms fp32), each
// layer's unit is decoded into a DeviceScratch just before the layer, activations are bf16.
// Files: model.cc (load), model_step.cc (validation, the CPU backend, logits), step_batch.cc (the
// batch both backends run), model_cuda_load.cc and model_cuda_step.cc (the CUDA backend,
// model_cuda.h).
// Thread-safety: Load'ed models are immutable except for the scratch buffer: one Step at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/format/checkpoint.h"
#include "runtime/model/decoder_layer.h"
#include "runtime/model/device.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/sampler.h"
#include "runtime/model/weights.h"

namespace df11 {

struct StepBatch;  // step_batch.h

struct ModelOptions {
  Device device = Device::kCpu;
  int threads = 0;  // 0 = all cores
  // kCuda: the DF11 decode scratch, shareable between models on one GPU; allocated if null.
  std::shared_ptr<DeviceScratch> scratch = nullptr;
  // > 0: RESOURCE_EXHAUSTED before any weight is uploaded when the resident weights plus the
  // decode scratch would need more bytes than this (the engine passes what its budget leaves).
  uint64_t max_resident_bytes = 0;
  // kCuda: decode-only steps (one new token per sequence, not profiled) replay a CUDA graph per
  // batch size once captured; false runs every step op by op (the same kernels, the same bits).
  bool cuda_graphs = true;
  // kCuda, DF11: linears keep their weights as lane streams (kernels/df11_lanes.h) and run fused
  // DF11 linears, with the bits of what the BF16 model runs: the GEMV at 1 token (Gemv's),
  // the tensor-core TileGemm from 2 to tile_max_tokens for fixed lanes; false decodes every unit
  // into the scratch before its GEMMs, as before.
  bool df11_lanes = true;
  // How lane streams code exponents (kernels/df11_lanes_fixed.h). kAuto: 3-bit codes with escapes
  // (no lookup chain) for a matrix whose bytes so stay within 1.03x its share of the unit's
  // published bytes, else the unit's own Huffman codes; kHuffman, kFixed3: that code for every
  // matrix, whatever its size (tests and measurements).
  enum class LaneCodeChoice { kAuto, kHuffman, kFixed3 };
  LaneCodeChoice df11_lane_code = LaneCodeChoice::kAuto;
  // kCuda, DF11: a layer's unit that goes through the scratch (steps above tile_max_tokens, or
  // without lane streams) decodes on a second stream while the layer before it computes (two
  // halves of the scratch, which then holds twice the largest layer unit if that is more than it
  // held). Same kernels, same bits; false decodes each unit just before its first linear.
  bool df11_prefetch = true;
  // kCuda, DF11, with df11_prefetch: decode steps that replay CUDA graphs decode ahead too (the
  // second stream's work is a branch of the graph; the step's stream has the device's greatest
  // priority, so the layer's own kernels get SMs first). false: graph steps decode in line.
  bool df11_prefetch_graphs = true;
  // kCuda: the most tokens a step's linears run the tensor-core TileGemm with (a DF11 model:
  // Df11TileGemm on fixed lanes), 32 or 64; above, cuBLAS (a DF11 model decodes into the scratch
  // first), but for the matrices on the wgmma tile linear (wgmma_tile, below), which it does not
  // bound. A DF11 model and its BF16 twin give the same bits when both load with the same value.
  // On an H100, 8B shape, batch 64 (bench/results/model_step_h100_tile64_final.json, _tile32_run*):
  // 64 makes a DF11 step 17.0 ms instead of 21.0 and a BF16 step 12.6 instead of 10.4 (cuBLAS is
  // faster than the BF16 TileGemm there). On an H200 (bench/results/gpu_tile32_wgmma_h200.log) 32
  // makes a BF16 step at batch 33 / 64 5.9-6.0 / 6.8 ms instead of 7.1-7.2 / 8.9 and a DF11 one
  // 11.0 / 12.4-12.5 instead of 10.3-10.5 / 12.1-12.3: 64 favours DF11, 32 BF16 (docs/api.md).
  // Others: INVALID_ARGUMENT.
  int tile_max_tokens = 64;
  // kCuda on a compute capability 9.0 GPU: the matrices a DF11 model keeps at 4 rows per tile
  // (gate|up and lm_head of the 8B shape) run the Hopper wgmma tile linear from 17 to 128 tokens,
  // whatever tile_max_tokens (kernels/cuda_gemm.h, WgmmaTileApplies): DF11 fused, a BF16 W by
  // WgmmaTileGemm or by cuBLAS where the load found that cuBLAS gives its bits on this GPU
  // (GemmHandle::CheckCublasBits; a token count where it does not is a load warning; gate|up with
  // its activation keeps its one-launch twin at 17-32); false: the TileGemm pair to tile_max_tokens, then
  // decode-then-cuBLAS as before. A DF11 model and its BF16 twin give the same bits when both load
  // with the same value.
  bool wgmma_tile = true;
  // DF11 checkpoint: every unit is decoded once at load (on the CPU) and kept as BF16, so the model
  // holds and runs exactly as its BF16 original would (same bits, same kernels, BF16's bytes and
  // speed) from the DF11 files alone. No effect on a BF16 checkpoint.
  bool resident_bf16 = false;
};

// How to sample a sequence's logits rows (sampler.h).
struct RowSampling {
  SamplingParams params;  // passed ValidateSamplingParams
  SampleContext context;
};

// One sequence of a step: its new tokens, appended after `num_cached` cached positions.
struct SequenceInput {
  std::vector<int32_t> tokens;       // [n] new token ids, n >= 1
  int64_t num_cached = 0;            // positions already in the cache = position of tokens[0]
  std::vector<int32_t> block_table;  // KV blocks of positions [0, num_cached + n) (more are ignored)
  std::vector<int64_t> logits_for;   // indices into `tokens` whose next-token logits are wanted
  // Set: the step samples the logits_for rows itself, on the model's device (CUDA: only the
  // SampleResults come back, never the logits); the context's spans must outlive Step.
  std::optional<RowSampling> sample;
};

struct StepInput {
  std::vector<SequenceInput> sequences;
  KvCache* kv_cache = nullptr;  // the new tokens' K/V are written into it; must match the model
  bool profile = false;         // CUDA: time GEMMs and attention with events (StepOutput)
};

struct StepOutput {
  int64_t vocab_size = 0;
  double step_seconds = 0;        // wall time from Launch to the end of Collect (host work between included)
  double decompress_seconds = 0;  // of which DF11 decoding (units and embedding rows)
  double gemm_seconds = 0;        // of which GEMMs (CUDA, StepInput::profile only)
  double attention_seconds = 0;   // of which KV writes + attention (CUDA, StepInput::profile only)
  // CUDA: the step's span on its stream, from the batch arrays' copy to the device to the last copy
  // back (events); with Step (or a Collect right after Launch) step_seconds minus this is host work
  // the GPU waited for. 0 on the CPU.
  double gpu_seconds = 0;
  bool replayed_graph = false;  // CUDA: the forward pass ran as a captured graph (ModelOptions::cuda_graphs)
  // [rows.size(), vocab_size] fp32; empty when the sequences asked for sampling. Reuse one
  // StepOutput across steps: the vector keeps its capacity (a fresh one per step pays page faults
  // on up to rows x vocab x 4 bytes, 78 MB at 128 rows of a 152k vocabulary).
  std::vector<float> logits;
  // [rows.size()] when the sequences asked for sampling (SequenceInput::sample): each row's token
  // or the row's error (INVALID_ARGUMENT: NaN logits, a context token outside the vocabulary).
  std::vector<StatusOr<SampleResult>> samples;
  std::vector<std::pair<int64_t, int64_t>> rows;  // per logits row: (sequence, index into tokens)
};

// What loading did, for logs and metrics. Bytes are device bytes of the model's device.
struct LoadReport {
  Device device = Device::kCpu;
  bool df11 = false;
  uint64_t weight_bytes = 0;       // resident weights: compressed units + plain tensors (+ norms)
  uint64_t bf16_weight_bytes = 0;  // the same weights as BF16
  uint64_t scratch_bytes = 0;      // this model's own: step workspace (CPU: + its decode scratch)
  // CUDA: the DF11 decode scratch this model needs in the buffer that every model on the GPU
  // shares (ModelOptions::scratch), so counted once per GPU, not per model; 0 on the CPU.
  uint64_t shared_scratch_bytes = 0;
  double load_seconds = 0;
  int lane_matrices = 0;        // CUDA, DF11: linears kept as lane streams (fused linears)
  int fixed_lane_matrices = 0;  // of those, with 3-bit codes (ModelOptions::df11_lane_code)
  // CUDA, DF11: seconds of load spent making lane streams: decoding matrices on the GPU and counting
  // their exponents (copied to the host only where the host builds them), building the streams (on
  // the GPU; Huffman lanes, or where a matrix's temporary buffer does not fit, on the host),
  // uploading host-built ones, decoding them back on the GPU and comparing, re-uploading units
  // without their streams.
  double lanes_decode_seconds = 0, lanes_build_seconds = 0, lanes_upload_seconds = 0, lanes_check_seconds = 0,
         lanes_slim_seconds = 0;
  // Seconds of load before the device's part: opening the checkpoint (headers, unit validation),
  // resolving every weight on the host (with resident_bf16, decoding them too). CUDA, DF11: seconds
  // copying the units to the device (DeviceUnitBuffer::Upload).
  double open_seconds = 0, units_upload_seconds = 0;
  // What the checkpoint warned about (a DF11 pattern matching no unit, ...), then what the load left
  // slower than it could be, and why (a DF11 matrix decoded before its GEMM, copies without staging).
  std::vector<std::string> warnings;
};

class Model {
 public:
  // Opens DIR (DF11 or BF16 checkpoint) and resolves every weight. Errors name the directory and
  // the tensor (missing, wrong shape or dtype). UNIMPLEMENTED for a device other than kCpu.
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& dir, const ModelOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return config_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  const LoadReport& load_report() const { return report_; }

  // Runs one forward step. The KV cache must live on the model's device. Validates first and
  // touches nothing on error:
  //   INVALID_ARGUMENT: no sequences / no tokens, token id outside [0, vocab), negative
  //     num_cached, a block table too short for its positions, logits_for out of range, two new
  //     tokens mapping to the same cache slot, a KV cache of another shape;
  //     some sequences with logits_for asking for sampling and others not;
  //   OUT_OF_RANGE: a position >= max_position_embeddings, a block id outside the cache.
  Status Step(const StepInput& input, StepOutput& output);

  // Step in two halves, for a caller with host work to do while the GPU runs the step (Step is
  // Launch then Collect). Launch validates (Step's errors, touching nothing) and enqueues the
  // step; `input` may go once it returns. Collect waits for the step and fills the rest of
  // `output`, the one Launch was given (samples, logits, timings); the caller leaves it alone in
  // between. On the CPU Launch runs the whole step and Collect only returns. Launch with a step in
  // flight, Collect with none, Offload or Restore with one: FAILED_PRECONDITION. A Launch that
  // fails leaves no step in flight; a failed Collect ends the step (its output is not valid).
  Status Launch(const StepInput& input, StepOutput& output);
  Status Collect(StepOutput& output);
  bool step_in_flight() const { return step_in_flight_; }
  // Whether Launch returns before the step's work is done (CUDA).
  bool launches_async() const { return options_.device == Device::kCuda; }

  // Weight tiers (the scheduler decides when: scheduler/residency.h). Offload copies every
  // device weight into one page-locked host image the model owns and frees the device memory
  // (weights, step workspaces, captured graphs); Restore allocates it again and copies the image
  // back on the model's own stream. The image is kept (weights never change): a later Offload
  // only frees. Step is FAILED_PRECONDITION in between.
  // Another model may step on another thread meanwhile (the shared decode scratch is untouched).
  // On the CPU the weights already live in host memory: both only change offloaded().
  // Errors (naming the model directory): RESOURCE_EXHAUSTED (host or device memory), INTERNAL
  // (CUDA). An Offload that fails leaves the model resident; a Restore that fails frees what it
  // allocated and keeps the image, so it can be tried again. model_tier.cc.
  Status Offload();
  Status Restore();
  bool offloaded() const { return offloaded_; }
  uint64_t host_image_bytes() const;  // CUDA: the page-locked image once made (0 before the first Offload)

 private:
  // Norm weights as fp32 vectors, linears as LinearWeight (decoder_layer.h).
  using LayerWeights = LayerWeightsOf<std::vector<float>, LinearWeight>;
  struct RopeKind {
    std::vector<float> inv_freq;  // [rotary_dim / 2]
    int64_t rotary_dim = 0;
  };
  struct CpuOps;     // model_step.cc: the CPU backend of the decoder layer
  struct CudaOps;    // model_cuda_step.cc: the CUDA backend
  struct CudaState;  // model_cuda.h

  Model() = default;
  Status LoadLayer(int64_t layer, LayerWeights& out);
  Status LoadHeads();
  void FillLoadReport(uint64_t largest_unit_elements);
  // ModelOptions::resident_bf16: each linear's unit slice decoded into LinearWeight::owned.
  Status DecodeLinearsToBf16();
  // Whether the weights stay DF11 in memory (a DF11 checkpoint without resident_bf16).
  bool resident_df11() const { return checkpoint_->is_df11() && !options_.resident_bf16; }

  Status Validate(const StepInput& input) const;
  // FAILED_PRECONDITION while a step is in flight (Launch, Offload, Restore).
  Status NoStepInFlight() const;
  Status Embed(const std::vector<int32_t>& tokens, float* hidden);
  Status Linear(const LinearWeight& w, const float* x, int64_t tokens, float* y);
  Status Logits(const StepBatch& batch, const float* hidden, StepOutput& output);
  // Whether the step samples its rows (Validate: every sequence with rows asks, or none does).
  static bool SamplesRows(const StepInput& input, const StepOutput& output);
  // CPU backend: output.samples from output.logits, rows in parallel; clears the logits.
  void SampleOnHost(const StepInput& input, StepOutput& output);
  Status LoadCuda();                                              // model_cuda_load.cc
  Status StepCpu(const StepInput& input, StepOutput& output);     // the whole step: Launch on the CPU
  Status LaunchCuda(const StepInput& input, StepOutput& output);  // model_cuda_step.cc
  Status CollectCuda(StepOutput& output);
  Status OffloadCuda();  // model_tier.cc
  Status RestoreCuda();
  Status MakeHostImageCuda();  // every device weight copied into CudaState::image
  void ReleaseDeviceCuda();    // frees every device weight and workspace (the image holds the weights)

  std::unique_ptr<Checkpoint> checkpoint_;
  ModelConfig config_;
  ModelOptions options_;
  std::vector<LayerWeights> layers_;
  std::vector<float> final_norm_;
  LinearWeight embedding_;             // [vocab, hidden]; gathered row by row, never decoded whole
  LinearWeight lm_head_;               // [vocab, hidden]; the lm_head unit/tensor, or the embedding when tied
  bool lm_head_is_embedding_ = false;  // tied, and lm_head_ reads the embedding's own words
  RopeKind rope_global_, rope_local_;
  UnitScratch scratch_;
  LoadReport report_;
  std::unique_ptr<CudaState> cuda_;  // kCuda only
  bool offloaded_ = false;           // Offload / Restore
  bool step_in_flight_ = false;      // Launch .. Collect
};

// Inverse rotary frequencies [rotary_dim / 2] computed in fp32 exactly as transformers'
// _compute_default_rope_parameters / _compute_linear_scaling_rope_parameters /
// _compute_llama3_parameters; rotary_dim = int(head_dim * partial_rotary_factor), even.
std::vector<float> RopeInvFreq(const RopeConfig& rope, int64_t head_dim);

}  // namespace df11
