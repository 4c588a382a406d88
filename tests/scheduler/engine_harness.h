// Test harness for Engine tests: an EventSink that records every event per request (thread-safe)
// and lets the test wait for final events, plus shortcuts to build engines over tiny models.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "scheduler/engine.h"
#include "tests/scheduler/engine_test_util.h"

namespace df11 {

// Everything one request received, concatenated.
struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  int finals = 0;  // must end as 1
  FinishReason reason = FinishReason::kNone;
  Status status;
  RequestUsage usage;
  RequestTimings timings;
};

class Recorder {
 public:
  EventSink Sink(int key) {
    return [this, key](RequestEvent&& e) {
      std::lock_guard lock(mu_);
      Outcome& o = outcomes_[key];
      o.tokens.insert(o.tokens.end(), e.token_ids.begin(), e.token_ids.end());
      o.text += e.text;
      o.logprobs.insert(o.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      if (e.finished) {
        ++o.finals;
        o.reason = e.finish_reason;
        o.status = e.status;
        o.usage = e.usage;
        o.timings = e.timings;
        ++finished_;
        cv_.notify_all();
      }
    };
  }
  // Waits until `n` requests have finished (fails the test after `timeout`).
  bool WaitFinished(int n, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return finished_ >= n; });
  }
  Outcome Get(int key) {
    std::lock_guard lock(mu_);
    return outcomes_[key];
  }
  int finished() {
    std::lock_guard lock(mu_);
    return finished_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, Outcome> outcomes_;
  int finished_ = 0;
};

inline GenerateRequest Greedy(const std::string& model, std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerateRequest r;
  r.model = model;
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

// A prompt of `n` ids derived from `seed` (all < kTinyTokenizerVocab, no special ids).
inline std::vector<int32_t> TestPrompt(int n, int seed) {
  std::vector<int32_t> p;
  p.reserve(n);
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((seed * 131 + i * 17 + i * i) % 300));
  return p;
}

// EngineOptions::host_overlap for the engine tests: DF11_TEST_HOST_OVERLAP=always runs them with
// the host work beside the step's, as on CUDA (tests/CMakeLists.txt runs the Engine* tests twice).
inline HostOverlap TestHostOverlap() {
  const char* v = std::getenv("DF11_TEST_HOST_OVERLAP");
  return v != nullptr && std::string(v) == "always" ? HostOverlap::kAlways : HostOverlap::kAuto;
}

inline EngineOptions SmallEngineOptions() {
  EngineOptions o;
  o.host_overlap = TestHostOverlap();
  o.threads = 2;
  o.block_size = 4;
  o.max_batched_tokens = 256;
  o.max_seqs = 32;
  o.kv_memory_bytes = 64 << 20;
  return o;
}

// Bytes of `blocks` KV blocks of `block_size` positions for the model in `dir` on the CPU: a
// kv_memory_bytes that gives a cache of exactly that many blocks.
inline int64_t KvBytesOfBlocks(const std::string& dir, int64_t blocks, int64_t block_size) {
  const StatusOr<ModelConfig> config = LoadModelConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? blocks * KvCache::BytesPerBlock(*config, block_size, Device::kCpu) : 0;
}

// Runs one request alone on `engine` and returns its outcome.
inline Outcome RunAlone(Engine& engine, GenerateRequest request) {
  Recorder rec;
  EXPECT_TRUE(engine.Submit(std::move(request), rec.Sink(0)).ok());
  EXPECT_TRUE(rec.WaitFinished(1));
  return rec.Get(0);
}

}  // namespace df11
