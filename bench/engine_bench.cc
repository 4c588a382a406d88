// engine_bench: serving throughput of the Engine (scheduler/engine.h) at several concurrency
// levels: C client streams each keep one request in flight (prompt P random ids, exactly O
// generated tokens, greedy unless --temperature > 0, ignore_eos) until every stream has finished R requests (R = 1 by
// default, so a level submits C requests at once). With several --model flags, every stream's
// requests go round-robin over the models (all served at once by one engine).
// Reports per level: output tokens/s (generated tokens / wall seconds), mean and p99 inter-token
// latency (gaps between consecutive tokens of one request, from RequestRecord), mean time to first
// token, and the engine's mean step/decompression time per model.
// Usage: engine_bench --model NAME=DIR [--model NAME=DIR ...] [--device cpu|cuda]
//          [--concurrency 1,8,32,64,128] [--prompt 512] [--output 256] [--requests-per-stream 1]
//          [--max-batched-tokens 2048] [--kv-memory BYTES] [--max-model-bytes BYTES]
//          [--max-host-model-bytes BYTES] [--resident-bf16] [--tile-max-tokens 32|64] [--no-host-overlap] [--json]
//          [--temperature T] [--top-p P] [--frequency-penalty F]  (seeded: request n uses seed n)
//          [--warmup-prompt N]
// Before the levels, per model, df11d's warm-up requests one after another (prompts of
// kWarmupPromptTokens ids, at most the model's positions less 2, 2 generated tokens each; with
// --warmup-prompt N, one prompt of N), so the first use of the step's kernels stays out of the levels.
// On CUDA without --kv-memory the KV budget is 0.9 x the free memory after the first model's
// weights; to serve two models pass --max-model-bytes (room kept for all weights) or --kv-memory.
// Models beyond --max-model-bytes are served from the host (--max-host-model-bytes) or disk tier.
// --resident-bf16 holds DF11 models decoded as BF16 (ModelSpec::resident_bf16): the BF16 original,
// from the DF11 files alone (a model too large to keep on disk in both formats).
// --tile-max-tokens sets every model's ModelSpec::tile_max_tokens (default 64; 32: cuBLAS from 33
// tokens but for the wgmma tile linear's matrices).
// --no-host-overlap: EngineOptions::host_overlap kNever (each step's tokens streamed before the next
// step is launched; the default overlaps them on CUDA).
// Per level also: the largest and mean number of sequences in one step (how many run at once);
// per model: its KV blocks and how many full prompt + output sequences they hold. On CUDA, the host
// time of a decode-only step (host_per_decode_step_ms: mean, median, p90; Collected::host_seconds):
// the time between consecutive steps' records minus the step's GPU span (StepOutput::gpu_seconds).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "kernels/gpu.h"
#include "scheduler/engine.h"

namespace df11 {
namespace {

struct BenchOptions {
  std::vector<std::pair<std::string, std::string>> models;  // name, dir
  Device device = Device::kCpu;
  std::vector<int> concurrency = {1, 8, 32, 64, 128};
  int prompt = 512, output = 256, requests_per_stream = 1;
  int warmup_prompt = 0;  // 0: kWarmupPromptTokens
  int64_t max_batched_tokens = 2048, kv_memory = 0, max_model_bytes = 0, max_host_model_bytes = 0;
  bool json = false, resident_bf16 = false, host_overlap = true;
  int tile_max_tokens = 64;  // ModelSpec::tile_max_tokens of every model
  float temperature = 0.0f, top_p = 1.0f, frequency_penalty = 0.0f;  // every request's sampling
};

[[noreturn]] void Usage(const std::string& error) {
  std::cerr << "engine_bench: " << error << "\n"
            << "usage: engine_bench --model NAME=DIR [--model ...] [--device cpu|cuda] [--concurrency 1,8,32]\n"
            << "                    [--prompt N] [--output N] [--requests-per-stream N] [--max-batched-tokens N]\n"
            << "                    [--kv-memory BYTES] [--max-model-bytes BYTES] [--max-host-model-bytes BYTES]\n"
            << "                    [--resident-bf16] [--tile-max-tokens 32|64] [--no-host-overlap] [--json]\n"
            << "                    [--temperature T] [--top-p P] [--frequency-penalty F] [--warmup-prompt N]\n";
  std::exit(2);
}

// `v` read whole by `parse` (std::stoll, std::stof) and accepted by `ok`, else Usage naming the flag.
template <typename ParseFn, typename OkFn>
auto ParseWhole(const std::string& flag, const std::string& v, const char* what, ParseFn parse, OkFn ok) {
  try {
    size_t used = 0;
    const auto x = parse(v, &used);
    if (used == v.size() && ok(x)) return x;
  } catch (const std::exception&) {
  }
  Usage(flag + " needs " + what + ", got '" + v + "'");
}

int64_t ParseInt(const std::string& flag, const std::string& v) {
  return ParseWhole(
      flag, v, "a positive integer", [](const std::string& s, size_t* used) { return std::stoll(s, used); },
      [](long long n) { return n > 0; });
}

float ParseFloat(const std::string& flag, const std::string& v) {
  return ParseWhole(
      flag, v, "a number", [](const std::string& s, size_t* used) { return std::stof(s, used); },
      [](float) { return true; });
}

BenchOptions Parse(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model") {
      const std::string v = value();
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) Usage("--model needs NAME=DIR, got '" + v + "'");
      o.models.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--device") {
      const std::string v = value();
      if (v != "cpu" && v != "cuda") Usage("--device is cpu or cuda, got '" + v + "'");
      o.device = v == "cuda" ? Device::kCuda : Device::kCpu;
    } else if (a == "--concurrency") {
      o.concurrency.clear();
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) o.concurrency.push_back(ParseInt(a, item));
    } else if (a == "--prompt") {
      o.prompt = ParseInt(a, value());
    } else if (a == "--output") {
      o.output = ParseInt(a, value());
    } else if (a == "--warmup-prompt") {
      o.warmup_prompt = ParseInt(a, value());
    } else if (a == "--requests-per-stream") {
      o.requests_per_stream = ParseInt(a, value());
    } else if (a == "--max-batched-tokens") {
      o.max_batched_tokens = ParseInt(a, value());
    } else if (a == "--kv-memory") {
      o.kv_memory = ParseInt(a, value());
    } else if (a == "--max-model-bytes") {
      o.max_model_bytes = ParseInt(a, value());
    } else if (a == "--max-host-model-bytes") {
      o.max_host_model_bytes = ParseInt(a, value());
    } else if (a == "--resident-bf16") {
      o.resident_bf16 = true;
    } else if (a == "--no-host-overlap") {
      o.host_overlap = false;
    } else if (a == "--tile-max-tokens") {
      o.tile_max_tokens = static_cast<int>(ParseInt(a, value()));
      if (o.tile_max_tokens != 32 && o.tile_max_tokens != 64) Usage("--tile-max-tokens: 32 or 64");
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--temperature") {
      o.temperature = ParseFloat(a, value());
    } else if (a == "--top-p") {
      o.top_p = ParseFloat(a, value());
    } else if (a == "--frequency-penalty") {
      o.frequency_penalty = ParseFloat(a, value());
    } else {
      Usage("unknown argument '" + a + "'");
    }
  }
  if (o.models.empty()) Usage("at least one --model NAME=DIR is required");
  return o;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Shared by the observer (engine thread) and the bench thread.
struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<double> gaps, ttft;
  std::map<std::string, std::pair<double, double>> step_seconds;  // model -> (step, decompress) sums
  std::map<std::string, int64_t> steps;
  int64_t max_step_sequences = 0, step_sequences = 0;  // over all models' steps
  int64_t generated = 0;
  int finished = 0;
  std::vector<std::string> errors;
  int64_t promotions = 0, demotions = 0;  // model tiers (--max-model-bytes), since the last level
  double promotion_seconds = 0;
  // Host time of a decode-only step (CUDA): the time since the previous step's record minus the
  // step's GPU span (StepRecord::gpu_seconds), i.e. what the GPU waited for: the engine loop's
  // scheduling, detokenizing and events, and Model::Step's host work before and after its span.
  std::vector<double> host_seconds;
  std::chrono::steady_clock::time_point last_step{};
  bool have_last_step = false;
};

nlohmann::json RunLevel(Engine& engine, const BenchOptions& o, int concurrency, Collected& c) {
  {
    std::lock_guard lock(c.mu);
    c.gaps.clear(), c.ttft.clear(), c.step_seconds.clear(), c.steps.clear(), c.errors.clear();
    c.generated = 0, c.finished = 0, c.max_step_sequences = 0, c.step_sequences = 0;
    c.host_seconds.clear(), c.have_last_step = false;
  }
  std::mt19937 rng(concurrency);
  std::map<std::string, int64_t> vocab;
  for (const ModelInfo& m : engine.Models()) vocab[m.name] = m.vocab_size;
  const int total = concurrency * o.requests_per_stream;
  int submitted = 0;
  auto make = [&](int n) {
    const std::string& model = o.models[n % o.models.size()].first;
    GenerateRequest r;
    r.model = model;
    std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(std::min<int64_t>(vocab[model], 30000)) - 1);
    for (int i = 0; i < o.prompt; ++i) r.prompt_tokens.push_back(id(rng));
    r.sampling.temperature = o.temperature;
    r.sampling.top_p = o.top_p;
    r.sampling.frequency_penalty = o.frequency_penalty;
    r.sampling.seed = static_cast<uint64_t>(n);
    r.max_tokens = o.output;
    r.ignore_eos = true;
    return r;
  };
  const auto start = std::chrono::steady_clock::now();
  // Each stream submits its next request when the previous one ends (from the bench thread).
  std::unique_lock lock(c.mu);
  auto sink = [&](RequestEvent&& e) {
    if (!e.finished) return;
    std::lock_guard inner(c.mu);
    if (!e.status.ok()) c.errors.push_back(e.status.ToString());
    ++c.finished;
    c.cv.notify_all();
  };
  auto try_submit = [&] {
    auto id = engine.Submit(make(submitted), sink);
    if (!id.ok()) {
      std::lock_guard inner(c.mu);
      c.errors.push_back(id.status().ToString());
      ++c.finished;
    }
    ++submitted;
  };
  lock.unlock();
  for (int s = 0; s < concurrency && submitted < total; ++s) try_submit();
  lock.lock();
  while (c.finished < total) {
    c.cv.wait(lock, [&] { return (submitted < total && c.finished + concurrency > submitted) || c.finished >= total; });
    while (submitted < total && c.finished + concurrency > submitted) {
      lock.unlock();
      try_submit();
      lock.lock();
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json r;
  r["concurrency"] = concurrency;
  r["requests"] = total;
  r["wall_seconds"] = wall;
  r["output_tokens"] = c.generated;
  r["output_tokens_per_second"] = static_cast<double>(c.generated) / wall;
  double sum = 0;
  for (double g : c.gaps) sum += g;
  r["itl_mean_ms"] = c.gaps.empty() ? 0 : 1000 * sum / static_cast<double>(c.gaps.size());
  r["itl_p99_ms"] = 1000 * Percentile(c.gaps, 0.99);
  double ttft = 0;
  for (double t : c.ttft) ttft += t;
  r["ttft_mean_ms"] = c.ttft.empty() ? 0 : 1000 * ttft / static_cast<double>(c.ttft.size());
  int64_t all_steps = 0;
  for (const auto& [model, n] : c.steps) all_steps += n;
  r["max_step_sequences"] = c.max_step_sequences;
  r["mean_step_sequences"] = static_cast<double>(c.step_sequences) / static_cast<double>(std::max<int64_t>(1, all_steps));
  for (const auto& [model, sums] : c.step_seconds) {
    const double n = static_cast<double>(std::max<int64_t>(1, c.steps[model]));
    r["models"][model] = {{"steps", c.steps[model]}, {"step_mean_ms", 1000 * sums.first / n},
                          {"decompress_mean_ms", 1000 * sums.second / n}};
  }
  if (!c.host_seconds.empty()) {
    double host = 0;
    for (double h : c.host_seconds) host += h;
    r["host_per_decode_step_ms"] = {{"steps", c.host_seconds.size()},
                                    {"mean", 1000 * host / static_cast<double>(c.host_seconds.size())},
                                    {"median", 1000 * Percentile(c.host_seconds, 0.5)},
                                    {"p90", 1000 * Percentile(c.host_seconds, 0.9)}};
  }
  if (!c.errors.empty()) r["errors"] = c.errors;
  return r;
}

int Main(int argc, char** argv) {
  const BenchOptions o = Parse(argc, argv);
  Collected c;
  EngineObserver observer;
  observer.on_request = [&c](const RequestRecord& rec) {
    std::lock_guard lock(c.mu);
    c.gaps.insert(c.gaps.end(), rec.inter_token_seconds.begin(), rec.inter_token_seconds.end());
    if (rec.usage.generated_tokens > 0) c.ttft.push_back(rec.timings.first_token_seconds);
    c.generated += rec.usage.generated_tokens;
  };
  observer.on_step = [&c](const StepRecord& s) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(c.mu);
    if (c.have_last_step && s.tokens == s.sequences && s.gpu_seconds > 0) {
      c.host_seconds.push_back(std::chrono::duration<double>(now - c.last_step).count() - s.gpu_seconds);
    }
    c.last_step = now;
    c.have_last_step = true;
    c.step_seconds[s.model].first += s.step_seconds;
    c.step_seconds[s.model].second += s.decompress_seconds;
    ++c.steps[s.model];
    c.max_step_sequences = std::max(c.max_step_sequences, s.sequences);
    c.step_sequences += s.sequences;
  };
  observer.on_move = [&c](const MoveRecord& m) {
    std::lock_guard lock(c.mu);
    if (m.promotion) {
      ++c.promotions;
      c.promotion_seconds += m.seconds;
    } else {
      ++c.demotions;
    }
  };
  EngineOptions eo;
  eo.device = o.device;
  eo.max_batched_tokens = o.max_batched_tokens;
  eo.max_seqs = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  eo.kv_memory_bytes = o.kv_memory;
  eo.max_model_bytes = o.max_model_bytes;
  eo.max_host_model_bytes = o.max_host_model_bytes;
  eo.max_waiting = 1 << 20;
  eo.host_overlap = o.host_overlap ? HostOverlap::kAuto : HostOverlap::kNever;
  auto engine = Engine::Create(eo, observer);
  if (!engine.ok()) {
    std::cerr << "engine_bench: " << engine.status().ToString() << "\n";
    return 1;
  }
  nlohmann::json out;
  std::vector<ModelSpec> specs;
  for (const auto& [name, dir] : o.models) {
    ModelSpec spec;
    spec.name = name;
    spec.path = dir;
    spec.kv_min_blocks = (o.prompt + o.output + eo.block_size - 1) / eo.block_size;
    spec.resident_bf16 = o.resident_bf16;
    spec.tile_max_tokens = o.tile_max_tokens;
    specs.push_back(spec);
  }
  if (Status st = (*engine)->LoadModels(specs); !st.ok()) {  // as df11d does: tiers beyond --max-model-bytes
    std::cerr << "engine_bench: " << st.ToString() << "\n";
    return 1;
  }
  // Warm-up (see the header): prompts with no prefix in common, one request at a time.
  std::vector<int64_t> warmup_prompts(kWarmupPromptTokens.begin(), kWarmupPromptTokens.end());
  if (o.warmup_prompt > 0) warmup_prompts = {o.warmup_prompt};
  std::map<std::string, ModelInfo> infos;
  for (const ModelInfo& m : (*engine)->Models()) infos[m.name] = m;
  for (const auto& [name, dir] : o.models) {
    for (size_t w = 0; w < warmup_prompts.size(); ++w) {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      GenerateRequest r;
      r.model = name;
      r.max_tokens = 2;
      const ModelInfo& info = infos[name];
      r.prompt_tokens = WarmupPrompt(warmup_prompts[w], static_cast<int64_t>(w), r.max_tokens, info.vocab_size,
                                     info.max_positions);
      auto id = (*engine)->Submit(r, [&](RequestEvent&& e) {
        if (!e.finished) return;
        std::lock_guard lock(mu);
        done = true;
        cv.notify_all();
      });
      if (!id.ok()) {
        std::cerr << "engine_bench: warm-up on " << name << ": " << id.status().ToString() << "\n";
        return 1;
      }
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return done; });
    }
  }
  out["device"] = DeviceName(o.device);
  if (o.device == Device::kCuda) out["gpu"] = GpuName();  // the result names its GPU
  out["prompt"] = o.prompt;
  out["tile_max_tokens"] = o.tile_max_tokens;
  out["host_overlap"] = o.host_overlap;
  out["sampling"] = {{"temperature", o.temperature}, {"top_p", o.top_p}, {"frequency_penalty", o.frequency_penalty}};
  out["output"] = o.output;
  for (int level : o.concurrency) {
    {
      std::lock_guard lock(c.mu);
      c.promotions = c.demotions = 0;
      c.promotion_seconds = 0;
    }
    nlohmann::json r = RunLevel(**engine, o, level, c);
    {
      std::lock_guard lock(c.mu);
      r["promotions"] = c.promotions;
      r["demotions"] = c.demotions;
      r["promotion_seconds"] = c.promotion_seconds;
    }
    {  // with --json on stderr, so that a run cut short still leaves its finished levels
      std::fprintf(o.json ? stderr : stdout,
          "concurrency %4d: %9.1f tok/s  itl mean %7.2f ms  p99 %7.2f ms  ttft %8.1f ms  promotions %lld  "
          "sequences/step max %lld  host/decode step median %.3f ms\n",
          level, r["output_tokens_per_second"].get<double>(), r["itl_mean_ms"].get<double>(),
          r["itl_p99_ms"].get<double>(), r["ttft_mean_ms"].get<double>(),
          static_cast<long long>(r["promotions"].get<int64_t>()),
          static_cast<long long>(r["max_step_sequences"].get<int64_t>()),
          r.contains("host_per_decode_step_ms") ? r["host_per_decode_step_ms"]["median"].get<double>() : 0.0);
      std::fflush(o.json ? stderr : stdout);
    }
    out["levels"].push_back(r);
  }
  const int64_t blocks_per_sequence = (o.prompt + o.output + eo.block_size - 1) / eo.block_size;
  for (const ModelInfo& m : (*engine)->Models()) {
    out["models"][m.name] = {{"path", m.path},
                             {"df11", m.df11},
                             {"weight_bytes", m.weight_bytes},
                             {"kv_blocks", m.kv_blocks_total},
                             {"kv_bytes", m.kv_bytes},
                             {"kv_sequences", m.kv_blocks_total / blocks_per_sequence},  // full prompt + output
                             {"load_seconds", m.load_seconds},
                             {"tier", TierName(m.tier)}};
  }
  if (o.json) std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("engine_bench", df11::Main, argc, argv); }
