// model_step_bench: forward-step latency of a BF16 model and its DF11 twin on the GPU.
// Usage: model_step_bench BF16_DIR DF11_DIR [--json OUT] [--reps N] [--context P] [--prefill N]
//                         [--batches 1,8,32,64,128] [--profile] [--eager] [--logits] [--no-lanes]
//                         [--lane-code auto|huffman|fixed] [--no-prefetch] [--no-prefetch-graphs] [--tile-max-tokens
//                         32|64]
//                         [--no-wgmma-tile] [--check-bits]
// Per model (loaded one after the other): every sequence first gets P (default 512) cached
// positions of real KV written by prefill steps (4 sequences per step); then, per batch size B,
// decode steps where sequences 0..B-1 each append one token at position P (the same work every
// repetition), and one prefill of a fresh N-token prompt (default 2048). Each timed step is
// Model::Step wall time up to its output on the host (sampled tokens for decode steps, logits for
// the prefill; it synchronizes), after warm-up steps: at least 3 and at least 1 s of them
// (kWarmupSeconds), so that the GPU's clock has settled to what this step sustains (see there);
// decompression time is the sum of CUDA events around the DF11 decode launches. One StepOutput is
// reused across steps (a fresh logits vector per step adds page faults: 128 x 152k fp32 is 78 MB).
// Medians of --reps (default 15, >= 10) runs. Prints a table and the DF11/BF16 ratio per batch size.
// --profile: after the timed runs, --reps more with CUDA events around every GEMM and the
// attention (KV write + kernel); prints medians of gemm / attention / decompress / rest, where rest
// (norms, rope, activations, host work, logits copy) = profiled step - the three.
// Decode steps sample greedily on the device (SequenceInput::sample, as the engine's decode steps
// do: only the token ids come back); --logits copies every row's fp32 logits to the host instead
// (78 MB at batch 128), as this benchmark did before.
// Decode steps replay CUDA graphs (ModelOptions::cuda_graphs; profiled runs never do); --eager
// runs them op by op. DF11 linears run fused DF11 linears up to 64 tokens (ModelOptions::
// df11_lanes: the GEMV at 1-2 tokens, the tensor-core TileGemm at 3-64; --tile-max-tokens 32
// stops it, and the BF16 model's, at 32, but for the wgmma tile linear's matrices, which keep it
// to 128: ModelOptions::tile_max_tokens); --no-lanes decodes
// every unit into the scratch first, as before. --lane-code picks
// how lane streams code exponents (ModelOptions::df11_lane_code; default auto); --no-prefetch
// decodes each unit just before its first linear instead of while the layer before runs
// (ModelOptions::df11_prefetch); --no-prefetch-graphs does so only in steps that replay graphs
// (ModelOptions::df11_prefetch_graphs). --no-wgmma-tile: the matrices of 4 rows per tile run the
// TileGemm pair at 33-64 tokens instead of the wgmma tile linear (ModelOptions::wgmma_tile).
// --check-bits: after each decode batch's timing, one more step of it copies every row's fp32 logits
// back, and the DF11 model's are compared with the BF16 model's bit for bit (a line per batch, and
// "bits" in the JSON: batch -> logits that differ); any difference makes the exit status 1.
// Every decode line also gives its floor: the model's weights plus each sequence's KV read once at
// the read roofline measured first (read_roofline.h), and the step's ratio to it, and its host time:
// the step's wall time minus its GPU span (StepOutput::gpu_seconds), median over the reps.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/read_roofline.h"
#include "runtime/model/model.h"

namespace df11 {
namespace {

using json = nlohmann::json;

struct Options {
  std::string bf16_dir, df11_dir, json_out;
  int reps = 15;
  int64_t context = 512, prefill = 2048;
  std::vector<int64_t> batches = {1, 8, 32, 64, 128};
  bool profile = false;
  bool eager = false;
  bool no_lanes = false;
  bool no_prefetch = false;
  bool no_prefetch_graphs = false;
  int tile_max_tokens = 64;
  bool no_wgmma_tile = false;
  ModelOptions::LaneCodeChoice lane_code = ModelOptions::LaneCodeChoice::kAuto;
  bool logits = false;      // decode steps copy fp32 logits to the host instead of sampling
  bool check_bits = false;  // each decode batch's logits, BF16 against DF11, bit for bit
};

constexpr int64_t kBlockSize = 16;
constexpr int kWarmup = 3;
// The first batch is timed right after the KV fill's prefill steps, which run at the GPU's power
// cap. The power controller lowers the SM clock there and takes a moment to raise it again: with 3
// warm-up steps (~20 ms at batch 1) the DF11 batch-1 steps, bound by the decoder's instructions,
// ran at that lowered clock (1,170-1,875 MHz sampled against 1,980) and measured 6.2-7.9 ms on one
// H200 where batch 1 alone, after a one-sequence fill, measured 5.68-5.73 (BF16, bound by memory,
// 4.67-4.75 either way; bench/results/ab_h200_b1_power_settle.log). Warm-up steps for at least this
// long take that transient out of every batch's numbers.
constexpr double kWarmupSeconds = 1.0;

int Fail(const Status& st) {
  std::fprintf(stderr, "model_step_bench: %s\n", st.ToString().c_str());
  return 1;
}

// Deterministic token ids in [1, vocab).
std::vector<int32_t> Tokens(int64_t n, int64_t seed, int64_t vocab) {
  std::vector<int32_t> t(n);
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (auto& id : t) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>(1 + (x >> 33) % (vocab - 1));
  }
  return t;
}

struct Timing {
  double step_ms = 0, decompress_ms = 0;
  double host_ms = 0;  // median of step - GPU span (StepOutput::gpu_seconds): Model::Step's host work
  // --profile (medians of the profiled runs; 0 otherwise).
  double profiled_step_ms = 0, gemm_ms = 0, attention_ms = 0, profiled_decompress_ms = 0;
};

// Runs `input` for the warm-up (kWarmup steps and kWarmupSeconds), then reps times; medians of
// step and decompression time; with `profile`, reps more profiled runs.
StatusOr<Timing> TimeStep(Model& model, const StepInput& input, int reps, bool profile) {
  std::vector<double> step, decomp, host, p_step, p_gemm, p_attn, p_decomp;
  StepOutput out;  // reused, as a serving loop should: logits keep their (up to 78 MB) capacity
  const auto warmup_start = std::chrono::steady_clock::now();
  auto warming = [&](int i) {
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - warmup_start;
    return i < kWarmup || spent.count() < kWarmupSeconds;
  };
  for (int i = 0; warming(i); ++i) DF11_RETURN_IF_ERROR(model.Step(input, out));
  for (int i = 0; i < reps; ++i) {
    DF11_RETURN_IF_ERROR(model.Step(input, out));
    step.push_back(out.step_seconds * 1e3);
    decomp.push_back(out.decompress_seconds * 1e3);
    host.push_back((out.step_seconds - out.gpu_seconds) * 1e3);
  }
  Timing t{Median(step), Median(decomp), Median(host)};
  if (!profile) return t;
  StepInput profiled = input;
  profiled.profile = true;
  for (int i = 0; i < reps; ++i) {
    DF11_RETURN_IF_ERROR(model.Step(profiled, out));
    p_step.push_back(out.step_seconds * 1e3);
    p_gemm.push_back(out.gemm_seconds * 1e3);
    p_attn.push_back(out.attention_seconds * 1e3);
    p_decomp.push_back(out.decompress_seconds * 1e3);
  }
  t.profiled_step_ms = Median(p_step);
  t.gemm_ms = Median(p_gemm);
  t.attention_ms = Median(p_attn);
  t.profiled_decompress_ms = Median(p_decomp);
  return t;
}

// The --profile line and JSON object of one timing.
json ProfileOf(const Timing& t, const char* label) {
  const double rest = t.profiled_step_ms - t.gemm_ms - t.attention_ms - t.profiled_decompress_ms;
  std::printf("    profile %s: step %8.3f = gemm %8.3f + attention %8.3f + decompress %8.3f + rest %8.3f ms\n", label,
              t.profiled_step_ms, t.gemm_ms, t.attention_ms, t.profiled_decompress_ms, rest);
  return {{"step_ms", t.profiled_step_ms},
          {"gemm_ms", t.gemm_ms},
          {"attention_ms", t.attention_ms},
          {"decompress_ms", t.profiled_decompress_ms},
          {"rest_ms", rest}};
}

// read_bytes_per_s: the read roofline (read_roofline.h); a decode step's floor is its weights plus
// every sequence's KV read once at that rate.
// --check-bits: per decode batch, the fp32 logits of one more step that does not sample (every
// sequence's row), for Main to compare across the two models.
using BatchLogits = std::map<int64_t, std::vector<float>>;

StatusOr<json> BenchModel(const std::string& dir, const Options& o, double read_bytes_per_s, BatchLogits* logits) {
  DF11_ASSIGN_OR_RETURN(auto model, Model::Load(dir, {.device = Device::kCuda,
                                                      .cuda_graphs = !o.eager,
                                                      .df11_lanes = !o.no_lanes,
                                                      .df11_lane_code = o.lane_code,
                                                      .df11_prefetch = !o.no_prefetch,
                                                      .df11_prefetch_graphs = !o.no_prefetch_graphs,
                                                      .tile_max_tokens = o.tile_max_tokens,
                                                      .wgmma_tile = !o.no_wgmma_tile}));
  const ModelConfig& c = model->config();
  const LoadReport& r = model->load_report();
  const int64_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  const int64_t ctx_blocks = (o.context + 1 + kBlockSize - 1) / kBlockSize;
  const int64_t prefill_blocks = (o.prefill + kBlockSize - 1) / kBlockSize;
  DF11_ASSIGN_OR_RETURN(KvCache cache,
                        KvCache::Create(c, max_batch * ctx_blocks + prefill_blocks, kBlockSize, Device::kCuda));
  std::vector<SequenceInput> seqs(max_batch);
  for (int64_t s = 0; s < max_batch; ++s) {
    for (int64_t b = 0; b < ctx_blocks; ++b) seqs[s].block_table.push_back(static_cast<int32_t>(s * ctx_blocks + b));
  }
  std::printf(
      "%s: loaded in %.2f s (open %.2f, units to the device %.2f; lane streams: decode %.2f, build %.2f, upload %.2f, "
      "check %.2f, slim %.2f)\n",
      dir.c_str(), r.load_seconds, r.open_seconds, r.units_upload_seconds, r.lanes_decode_seconds,
      r.lanes_build_seconds, r.lanes_upload_seconds, r.lanes_check_seconds, r.lanes_slim_seconds);
  // Fill the context: 4 sequences of `context` tokens per prefill step.
  std::printf("%s: filling %lld x %lld positions of KV\n", dir.c_str(), static_cast<long long>(max_batch),
              static_cast<long long>(o.context));
  for (int64_t s0 = 0; s0 < max_batch; s0 += 4) {
    StepInput in;
    in.kv_cache = &cache;
    for (int64_t s = s0; s < std::min(max_batch, s0 + 4); ++s) {
      SequenceInput seq = seqs[s];
      seq.tokens = Tokens(o.context, s, c.vocab_size);
      in.sequences.push_back(std::move(seq));
    }
    StepOutput out;
    DF11_RETURN_IF_ERROR(model->Step(in, out));
  }
  const int64_t kv_bytes_per_sequence = KvCache::BytesPerBlock(c, kBlockSize, Device::kCuda) * ctx_blocks;
  json result = {{"dir", dir},
                 {"cuda_graphs", !o.eager},
                 {"warmup_seconds", kWarmupSeconds},
                 {"df11_lane_matrices", r.lane_matrices},
                 {"df11_fixed_lane_matrices", r.fixed_lane_matrices},
                 {"load_warnings", r.warnings},
                 {"load_seconds", r.load_seconds},
                 {"open_seconds", r.open_seconds},
                 {"units_upload_seconds", r.units_upload_seconds},
                 {"lanes_seconds",
                  {{"decode", r.lanes_decode_seconds},
                   {"build", r.lanes_build_seconds},
                   {"upload", r.lanes_upload_seconds},
                   {"gpu_check", r.lanes_check_seconds},
                   {"slim_units", r.lanes_slim_seconds}}},
                 {"decode_samples_on_device", !o.logits},
                 {"df11", r.df11},
                 {"weight_bytes", r.weight_bytes},
                 {"bf16_weight_bytes", r.bf16_weight_bytes},
                 {"scratch_bytes", r.scratch_bytes},
                 {"kv_bytes", cache.bytes()},
                 {"kv_bytes_per_sequence", kv_bytes_per_sequence},
                 {"load_seconds", r.load_seconds}};
  for (int64_t batch : o.batches) {
    StepInput in;
    in.kv_cache = &cache;
    for (int64_t s = 0; s < batch; ++s) {
      SequenceInput seq = seqs[s];
      seq.num_cached = o.context;
      seq.tokens = Tokens(1, 1000 + s, c.vocab_size);
      seq.logits_for = {0};
      if (!o.logits) {  // greedy on the device, no logprobs: what the engine asks of a decode step
        RowSampling greedy;
        greedy.params.temperature = 0.0f;
        greedy.context.want_logprobs = false;
        seq.sample = greedy;
      }
      in.sequences.push_back(std::move(seq));
    }
    DF11_ASSIGN_OR_RETURN(const Timing t, TimeStep(*model, in, o.reps, o.profile));
    if (o.check_bits) {
      StepInput plain = in;
      for (SequenceInput& seq : plain.sequences) seq.sample.reset();
      StepOutput lo;
      DF11_RETURN_IF_ERROR(model->Step(plain, lo));
      (*logits)[batch] = lo.logits;
    }
    const double floor_ms = (static_cast<double>(r.weight_bytes) + static_cast<double>(batch) * kv_bytes_per_sequence) /
                            read_bytes_per_s * 1e3;
    json entry = {{"batch", batch},
                  {"step_ms", t.step_ms},
                  {"floor_ms", floor_ms},
                  {"step_over_floor", t.step_ms / floor_ms},
                  {"decompress_ms", t.decompress_ms},
                  {"rest_ms", t.step_ms - t.decompress_ms},
                  {"host_ms", t.host_ms},
                  {"tokens_per_s", batch / (t.step_ms * 1e-3)}};
    std::printf(
        "  decode batch %4lld: %8.3f ms/step (decompress %7.3f, rest %7.3f), floor %6.3f ms (x%.2f), host %6.3f ms\n",
        static_cast<long long>(batch), t.step_ms, t.decompress_ms, t.step_ms - t.decompress_ms, floor_ms,
        t.step_ms / floor_ms, t.host_ms);
    if (o.profile) entry["profile"] = ProfileOf(t, "decode");
    result["decode"].push_back(entry);
    std::fflush(stdout);
  }
  StepInput in;
  in.kv_cache = &cache;
  SequenceInput prompt;
  prompt.tokens = Tokens(o.prefill, 77, c.vocab_size);
  for (int64_t b = 0; b < prefill_blocks; ++b)
    prompt.block_table.push_back(static_cast<int32_t>(max_batch * ctx_blocks + b));
  prompt.logits_for = {o.prefill - 1};
  in.sequences.push_back(prompt);
  DF11_ASSIGN_OR_RETURN(const Timing t, TimeStep(*model, in, o.reps, o.profile));
  result["prefill"] = {{"tokens", o.prefill},
                       {"step_ms", t.step_ms},
                       {"decompress_ms", t.decompress_ms},
                       {"rest_ms", t.step_ms - t.decompress_ms},
                       {"tokens_per_s", o.prefill / (t.step_ms * 1e-3)}};
  std::printf("  prefill %lld tokens: %8.3f ms (decompress %7.3f), %.0f tokens/s\n", static_cast<long long>(o.prefill),
              t.step_ms, t.decompress_ms, o.prefill / (t.step_ms * 1e-3));
  if (o.profile) result["prefill"]["profile"] = ProfileOf(t, "prefill");
  return result;
}

bool ParseArgs(int argc, char** argv, Options& o) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--json") {
      o.json_out = value();
    } else if (a == "--reps") {
      o.reps = std::max(10, std::atoi(value().c_str()));
    } else if (a == "--context") {
      o.context = std::atoll(value().c_str());
    } else if (a == "--prefill") {
      o.prefill = std::atoll(value().c_str());
    } else if (a == "--profile") {
      o.profile = true;
    } else if (a == "--eager") {
      o.eager = true;
    } else if (a == "--no-lanes") {
      o.no_lanes = true;
    } else if (a == "--no-prefetch") {
      o.no_prefetch = true;
    } else if (a == "--no-prefetch-graphs") {
      o.no_prefetch_graphs = true;
    } else if (a == "--no-wgmma-tile") {
      o.no_wgmma_tile = true;
    } else if (a == "--tile-max-tokens") {
      o.tile_max_tokens = std::atoi(value().c_str());
    } else if (a == "--lane-code") {
      const std::string v = value();
      if (v != "auto" && v != "huffman" && v != "fixed") return false;
      o.lane_code = v == "fixed"     ? ModelOptions::LaneCodeChoice::kFixed3
                    : v == "huffman" ? ModelOptions::LaneCodeChoice::kHuffman
                                     : ModelOptions::LaneCodeChoice::kAuto;
    } else if (a == "--check-bits") {
      o.check_bits = true;
    } else if (a == "--logits") {
      o.logits = true;
    } else if (a == "--batches") {
      o.batches.clear();
      std::stringstream in(value());
      for (std::string item; std::getline(in, item, ',');) o.batches.push_back(std::atoll(item.c_str()));
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2 || o.context < 1 || o.prefill < 1 || o.batches.empty()) return false;
  o.bf16_dir = positional[0];
  o.df11_dir = positional[1];
  return std::all_of(o.batches.begin(), o.batches.end(), [](int64_t b) { return b >= 1; });
}

int Main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: model_step_bench BF16_DIR DF11_DIR [--json OUT] [--reps N] [--context P] "
                 "[--prefill N] [--batches 1,8,32,64,128] [--profile] [--eager] [--logits] [--no-lanes] "
                 "[--lane-code auto|huffman|fixed] [--no-prefetch] [--no-prefetch-graphs] [--tile-max-tokens 32|64] "
                 "[--no-wgmma-tile] [--check-bits]\n");
    return 2;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return Fail(FailedPrecondition("no CUDA device"));
  json out = {{"gpu", prop.name},
              {"method",
               "Model::Step wall time to its output on host (decode: greedy tokens sampled on the "
               "device, unless --logits); median of reps after warm-up steps (at least 3, and at least "
               "kWarmupSeconds = 1 s of them); decode at "
               "`context` cached positions of real KV per sequence"},
              {"reps", o.reps},
              {"context", o.context}};
  const double read_bytes_per_s = ReadBandwidthBytesPerSecond();
  if (read_bytes_per_s <= 0) return Fail(Internal("the read-bandwidth roofline could not be measured"));
  out["read_roofline_tb_s"] = read_bytes_per_s * 1e-12;
  std::printf("read roofline: %.3f TB/s (4 GiB read-only kernel, median of 10)\n", read_bytes_per_s * 1e-12);
  BatchLogits bf16_logits, df11_logits;
  bool bits_equal = true;
  auto bf16 = BenchModel(o.bf16_dir, o, read_bytes_per_s, &bf16_logits);
  if (!bf16.ok()) return Fail(bf16.status());
  auto df11 = BenchModel(o.df11_dir, o, read_bytes_per_s, &df11_logits);
  if (!df11.ok()) return Fail(df11.status());
  for (const auto& [batch, a] : bf16_logits) {
    const std::vector<float>& b = df11_logits[batch];
    int64_t differ = a.size() == b.size() ? 0 : -1;
    for (size_t i = 0; differ >= 0 && i < a.size(); ++i)
      differ += std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]);
    std::printf("bits, batch %lld: DF11 logits %s BF16's (%lld of %zu differ)\n", static_cast<long long>(batch),
                differ == 0 ? "==" : "!=", static_cast<long long>(differ), a.size());
    out["bits"][std::to_string(batch)] = differ;
    bits_equal = bits_equal && differ == 0;
  }
  out["bf16"] = *bf16;
  out["df11"] = *df11;
  std::printf("\n%-10s %12s %12s %12s %14s\n", "batch", "bf16 ms", "df11 ms", "df11/bf16", "df11 decomp ms");
  for (size_t i = 0; i < o.batches.size(); ++i) {
    const double a = (*bf16)["decode"][i]["step_ms"], b = (*df11)["decode"][i]["step_ms"];
    const double d = (*df11)["decode"][i]["decompress_ms"];
    out["ratio_df11_over_bf16"].push_back({{"batch", o.batches[i]}, {"ratio", b / a}});
    std::printf("%-10lld %12.3f %12.3f %12.2f %14.3f\n", static_cast<long long>(o.batches[i]), a, b, b / a, d);
  }
  const double pa = (*bf16)["prefill"]["step_ms"], pb = (*df11)["prefill"]["step_ms"];
  out["prefill_ratio_df11_over_bf16"] = pb / pa;
  std::printf("%-10s %12.3f %12.3f %12.2f\n", "prefill", pa, pb, pb / pa);
  std::printf("memory (GB): weights bf16 %.2f / df11 %.2f, scratch df11 %.2f, kv %.2f\n",
              double((*bf16)["weight_bytes"]) / 1e9, double((*df11)["weight_bytes"]) / 1e9,
              double((*df11)["scratch_bytes"]) / 1e9, double((*df11)["kv_bytes"]) / 1e9);
  if (!o.json_out.empty()) std::ofstream(o.json_out) << out.dump(2) << "\n";
  return bits_equal ? 0 : 1;  // --check-bits found DF11 logits that differ from BF16's
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("model_step_bench", df11::Main, argc, argv); }
