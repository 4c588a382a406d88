// Random-weight checkpoints in the Hugging Face layout, for tests, demos and benchmarks: real
// architecture configs at small sizes (or real sizes with few layers), Gaussian matrices (std
// 0.02, like trained LLMs), norms near 1. BF16, or DF11 written directly: each unit's weights are
// generated, compressed, verified and written in turn, so a model too large to hold as BF16 on disk
// (Qwen3-32B: 65.5 GB) needs only its DF11 bytes; the files equal `df11 compress` of the one-shard
// BF16 checkpoint with the same seed, byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace df11 {

// Known presets: "qwen3-tiny", "llama-tiny", "qwen2-tiny", "mistral-tiny", "phi3-tiny",
// "gemma3-tiny", "gemma3-mm-tiny" (Gemma3ForConditionalGeneration: language_model. prefix, a
// vision tensor kept plain), "qwen3-8b-2layers" (Qwen3-8B shapes, 2 layers), "qwen3-8b" (all 36 layers,
// 8.19 G weights, 16.4 GB), "qwen3-32b" (64 layers, hidden 5120, 64/8 heads, intermediate 25600:
// 32.8 G weights, 65.5 GB as BF16, ~44 GB as DF11).
std::vector<std::string> RandomModelPresets();

struct RandomModelOptions {
  uint32_t seed = 1;
  int shards = 1;          // BF16, > 1: model-0000K-of-0000N.safetensors + model.safetensors.index.json
  bool df11 = false;       // write the DF11 checkpoint directly (the weights of shards = 1)
  int threads = 0;         // DF11: encoder threads (0 = all cores)
  float stddev = 0.02f;
  int64_t vocab_size = 0;  // > 0: replaces the preset's vocab_size (e.g. to match a test tokenizer)
};

// Writes config.json and safetensors for `preset` into `dir` (created). NOT_FOUND for an
// unknown preset; DF11: INVALID_ARGUMENT when `dir` exists and is not empty.
Status WriteRandomModel(const std::string& preset, const std::string& dir, const RandomModelOptions& options);

}  // namespace df11
