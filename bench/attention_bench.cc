// attention_bench: the CUDA PagedAttention (kernels/cuda_attention.cu) alone, on a Qwen3-8B layer's
// shape (32 query heads, 8 KV heads, head_dim 128, 16-position KV blocks), against the read
// roofline measured in the same run.
// Also PrepareAttention (qk-norm, rope, KV write) on each case's batch, against its read + write floor.
// Usage: attention_bench [--context P] [--batches 1,8,64,128] [--prefill N,...] [--reps R] [--json OUT]
// Decode: B sequences of P cached positions each append one token (the model's decode step: the
// cache holds positions 0..P, max_keys rounded up to a power of two, the split workspace given).
// Its floor is the K and V bytes of the P + 1 keys of every sequence read once at the roofline.
// Prefill: one fresh N-token sequence, causal (each N of the list; default 2048); reported in TFLOP/s (4 * head_dim
// FLOPs per visible (query head, key) pair: q.k and p.v). Every timed call reads its own copy of the KV pools (copies
// fill > 400 MB, so the 50 MB L2 never holds a previous call's keys); random N(0, 1) bf16 q, k, v
// (the KV pools repeat their first 2^24 values).
// CUDA events around `kCalls` calls, 3 warm-up rounds, median of R rounds (default 15). Prints one
// line per case; --json writes them.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_main.h"
#include "bench/cuda_check.h"
#include "bench/linear_timing.h"
#include "bench/read_roofline.h"
#include "kernels/batch_layout.h"
#include "kernels/cuda_ops.h"

namespace df11 {
namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlockSize = 16;
constexpr int kCalls = 8;                            // calls per timed round, each on its own KV copy
constexpr int64_t kRandomPeriod = int64_t{1} << 24;  // random pool values drawn, then repeated

void Check(const Status& s) { CheckOk("attention_bench", s); }

template <typename T>
T* Upload(const std::vector<T>& v) {
  T* d = nullptr;
  CK(cudaMalloc(&d, std::max<size_t>(v.size(), 1) * sizeof(T)));
  CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

struct Case {
  std::string name;
  int64_t batch = 0, tokens = 0, context = 0;
  double ms = 0, floor_ms = 0, tflops = 0, kv_bytes = 0;
  // PrepareAttention on the same batch (qk-norm, rope over all 128 dims, k and v into the cache):
  // its time and its floor, the q|k|v rows read and q, k, v written once at the roofline.
  double prepare_ms = 0, prepare_floor_ms = 0;
};

// Times PagedAttention over `seqs` sequences, sequence s with `cached[s]` positions already in the
// cache and `fresh[s]` new tokens (at positions cached .. cached + fresh - 1, also in the cache).
Case Run(const std::string& name, const std::vector<int64_t>& cached, const std::vector<int64_t>& fresh, int reps,
         double roofline, std::mt19937& rng) {
  const int64_t seqs = static_cast<int64_t>(cached.size());
  BatchArrays arrays;
  int64_t blocks = 0, keys_total = 0, max_keys = 0, pairs = 0;
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t n = cached[s] + fresh[s];
    const int64_t nb = (n + kBlockSize - 1) / kBlockSize;
    std::vector<int32_t> table(nb);
    for (int64_t b = 0; b < nb; ++b) table[b] = static_cast<int32_t>(blocks + b);
    blocks += nb;
    arrays.AddSequence(cached[s], fresh[s], table, kBlockSize);
    keys_total += n;
    max_keys = std::max(max_keys, n);
    for (int64_t t = 0; t < fresh[s]; ++t) pairs += cached[s] + t + 1;
  }
  const int64_t tokens = arrays.num_tokens();
  const bool decode = std::all_of(fresh.begin(), fresh.end(), [](int64_t f) { return f == 1; });
  int64_t tile_tokens = decode ? 1 : cuda::AttentionTileTokens(kHeads, kKvHeads, kHeadDim), max_count = 0;
  const std::vector<int32_t> tiles = AttentionTiles(arrays.token_seq, arrays.positions, tile_tokens, &max_count);
  int64_t rounded = 1;
  while (rounded < max_keys) rounded *= 2;

  // KV pools: one random copy, replicated so that the calls of a round never find keys in L2.
  const int64_t pool_elems = blocks * kBlockSize * kKvHeads * kHeadDim;
  const int copies = static_cast<int>(std::max<int64_t>(kCalls, (int64_t{400} << 20) / (4 * pool_elems) + 1));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // At most kRandomPeriod random values, repeated: drawing every element of a long context's pools
  // on the host took most of a sweep's time (~30 s a run at 9 batches over 4,096 positions); the
  // kernel's timing does not depend on which keys repeat.
  std::vector<uint16_t> host(pool_elems);
  const int64_t period = std::min<int64_t>(pool_elems, kRandomPeriod);
  for (int64_t i = 0; i < period; ++i) host[i] = Bf16(dist(rng));
  for (int64_t i = period; i < pool_elems; ++i) host[i] = host[i - period];
  std::vector<uint16_t*> k(copies), v(copies);
  for (int c = 0; c < copies; ++c) {
    CK(cudaMalloc(&k[c], pool_elems * 2));
    CK(cudaMalloc(&v[c], pool_elems * 2));
    if (c == 0) {
      CK(cudaMemcpy(k[c], host.data(), pool_elems * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(v[c], host.data(), pool_elems * 2, cudaMemcpyHostToDevice));  // same values, other lines
    } else {
      CK(cudaMemcpy(k[c], k[0], pool_elems * 2, cudaMemcpyDeviceToDevice));
      CK(cudaMemcpy(v[c], v[0], pool_elems * 2, cudaMemcpyDeviceToDevice));
    }
  }
  std::vector<uint16_t> q_host(tokens * kHeads * kHeadDim);
  for (auto& x : q_host) x = Bf16(dist(rng));
  uint16_t* q = Upload(q_host);
  uint16_t* out = nullptr;
  CK(cudaMalloc(&out, q_host.size() * 2));
  int32_t* positions = Upload(arrays.positions);
  int32_t* token_seq = Upload(arrays.token_seq);
  int32_t* table_begin = Upload(arrays.table_begin);
  int32_t* tables = Upload(arrays.tables);
  int32_t* tiles_d = Upload(tiles);
  float* workspace = nullptr;
  CK(cudaMalloc(&workspace, cuda::AttentionWorkspaceFloats(kHeadDim) * sizeof(float)));

  BatchLayout layout;
  layout.num_tokens = tokens;
  layout.positions = positions;
  layout.token_seq = token_seq;
  layout.table_begin = table_begin;
  layout.tables = tables;
  layout.tiles = tiles_d;
  layout.num_tiles = static_cast<int64_t>(tiles.size() / 2);
  layout.tile_tokens = max_count;
  layout.max_keys = decode ? rounded : 0;
  layout.split_workspace = decode ? workspace : nullptr;
  AttentionParams params;
  params.num_heads = kHeads;
  params.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));

  // PrepareAttention's inputs: the q|k|v rows of the fused projection, norm weights, rope.
  constexpr int64_t kRowWidth = (kHeads + 2 * kKvHeads) * kHeadDim;
  std::vector<uint16_t> qkv_host(tokens * kRowWidth);
  for (auto& x : qkv_host) x = Bf16(dist(rng));
  std::vector<float> norm_host(2 * kHeadDim), freq_host(kHeadDim / 2);
  for (auto& x : norm_host) {  // BF16 values, as the model holds its norm weights
    const uint32_t bits = static_cast<uint32_t>(Bf16(1.0f + 0.1f * dist(rng))) << 16;
    std::memcpy(&x, &bits, 4);
  }
  for (int64_t i = 0; i < kHeadDim / 2; ++i) freq_host[i] = std::pow(1e6f, -2.0f * i / kHeadDim);
  uint16_t* qkv = Upload(qkv_host);
  float* norms = Upload(norm_host);
  float* inv_freq = Upload(freq_host);
  uint16_t* q_prepared = nullptr;
  CK(cudaMalloc(&q_prepared, tokens * kHeads * kHeadDim * 2));
  const cuda::QkvRows rows{qkv, qkv + kHeads * kHeadDim, qkv + (kHeads + kKvHeads) * kHeadDim, kRowWidth, kRowWidth};
  cuda::QkNormRope rope;
  rope.q_norm = norms;
  rope.k_norm = norms + kHeadDim;
  rope.eps = 1e-6f;
  rope.rotary_dim = kHeadDim;
  rope.inv_freq = inv_freq;

  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  auto timed = [&](auto&& round) {
    for (int i = 0; i < 3; ++i) round();
    CK(cudaDeviceSynchronize());
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      CK(cudaEventRecord(start));
      round();
      CK(cudaEventRecord(stop));
      CK(cudaEventSynchronize(stop));
      float t = 0;
      CK(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t / kCalls);
    }
    return Median(std::move(ms));
  };
  const double prepare_ms = timed([&]() {
    for (int i = 0; i < kCalls; ++i) {
      const int c = i % copies;
      const cuda::PagedKvLayer cache{k[c], v[c], blocks, kBlockSize, kKvHeads, kHeadDim};
      Check(cuda::PrepareAttention(cache, layout, kHeads, rows, rope, q_prepared, nullptr));
    }
  });
  auto round = [&]() {
    for (int i = 0; i < kCalls; ++i) {
      const int c = i % copies;
      const cuda::PagedKvLayer cache{k[c], v[c], blocks, kBlockSize, kKvHeads, kHeadDim};
      Check(cuda::PagedAttention(cache, layout, params, q, out, nullptr));
    }
  };
  const double attention_ms = timed(round);
  Case c;
  c.name = name;
  c.batch = seqs;
  c.tokens = tokens;
  c.context = max_keys;
  c.ms = attention_ms;
  c.prepare_ms = prepare_ms;
  c.prepare_floor_ms = static_cast<double>(tokens) * kRowWidth * 2 * 2 / roofline * 1e3;
  c.kv_bytes = static_cast<double>(keys_total) * kKvHeads * kHeadDim * 2 * 2;
  c.floor_ms = c.kv_bytes / roofline * 1e3;
  c.tflops = static_cast<double>(pairs) * kHeads * kHeadDim * 4 / (c.ms * 1e-3) / 1e12;

  for (int i = 0; i < copies; ++i) {
    CK(cudaFree(k[i]));
    CK(cudaFree(v[i]));
  }
  for (void* p : {static_cast<void*>(q), static_cast<void*>(out), static_cast<void*>(positions),
                  static_cast<void*>(token_seq), static_cast<void*>(table_begin), static_cast<void*>(tables),
                  static_cast<void*>(tiles_d), static_cast<void*>(workspace), static_cast<void*>(qkv),
                  static_cast<void*>(norms), static_cast<void*>(inv_freq), static_cast<void*>(q_prepared)}) {
    CK(cudaFree(p));
  }
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(stop));
  return c;
}

int Main(int argc, char** argv) {
  const std::string json_path = JsonPathArg(argc, argv);
  int64_t context = 512;
  std::vector<int64_t> prefills = {2048};
  int reps = 15;
  std::vector<int64_t> batches = {1, 8, 64, 128};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--context") context = std::stoll(value());
    if (a == "--prefill") prefills = ParseList(value());
    if (a == "--reps") reps = std::max(3, std::stoi(value()));
    if (a == "--batches") batches = ParseList(value());
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const double roofline = ReadBandwidthBytesPerSecond();
  std::printf("GPU: %s; read roofline %.3f TB/s; %lld heads, %lld KV heads, head_dim %lld\n", prop.name,
              roofline / 1e12, static_cast<long long>(kHeads), static_cast<long long>(kKvHeads),
              static_cast<long long>(kHeadDim));
  std::mt19937 rng(1);
  std::vector<Case> cases;
  cases.reserve(batches.size() + prefills.size());
  for (int64_t b : batches) {
    cases.push_back(Run("decode", std::vector<int64_t>(b, context), std::vector<int64_t>(b, 1), reps, roofline, rng));
  }
  for (int64_t n : prefills) {
    if (n > 0) cases.push_back(Run("prefill", {0}, {n}, reps, roofline, rng));
  }
  std::string json = "{\"gpu\": \"" + std::string(prop.name) +
                     "\", \"read_roofline_tbs\": " + std::to_string(roofline / 1e12) + ", \"cases\": [";
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::printf(
        "%-8s batch %4lld tokens %5lld keys %5lld: %8.4f ms/layer (x36 %7.3f ms), KV %7.1f MB, %.3f TB/s "
        "(%.0f%% of roofline), floor x%.2f, %.1f TFLOP/s\n",
        c.name.c_str(), static_cast<long long>(c.batch), static_cast<long long>(c.tokens),
        static_cast<long long>(c.context), c.ms, 36 * c.ms, c.kv_bytes / 1e6, c.kv_bytes / (c.ms * 1e-3) / 1e12,
        100.0 * c.floor_ms / c.ms, c.ms / c.floor_ms, c.tflops);
    std::printf("%-8s batch %4lld tokens %5lld: PrepareAttention %8.4f ms/layer (x36 %7.3f ms), floor x%.2f\n",
                c.name.c_str(), static_cast<long long>(c.batch), static_cast<long long>(c.tokens), c.prepare_ms,
                36 * c.prepare_ms, c.prepare_ms / c.prepare_floor_ms);
    json += std::string(i ? ", " : "") + "{\"case\": \"" + c.name + "\", \"batch\": " + std::to_string(c.batch) +
            ", \"tokens\": " + std::to_string(c.tokens) + ", \"keys\": " + std::to_string(c.context) +
            ", \"ms\": " + std::to_string(c.ms) + ", \"floor_ms\": " + std::to_string(c.floor_ms) +
            ", \"kv_bytes\": " + std::to_string(c.kv_bytes) + ", \"tflops\": " + std::to_string(c.tflops) +
            ", \"prepare_ms\": " + std::to_string(c.prepare_ms) +
            ", \"prepare_floor_ms\": " + std::to_string(c.prepare_floor_ms) + "}";
  }
  json += "]}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("attention_bench", df11::Main, argc, argv); }
