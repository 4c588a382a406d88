// Random-weight BF16 checkpoints in the Hugging Face layout, for tests, demos and benchmarks:
// real architecture configs at small sizes (or real sizes with few layers), Gaussian matrices
// (std 0.02, like trained LLMs), norms near 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace df11 {

// Known presets: "qwen3-tiny", "llama-tiny", "qwen2-tiny", "mistral-tiny", "phi3-tiny",
// "gemma3-tiny", "gemma3-mm-tiny" (Gemma3ForConditionalGeneration: language_model. prefix, a
// vision tensor kept plain), "qwen3-8b-2layers" (Qwen3-8B shapes, 2 layers), "qwen3-8b" (all 36 layers,
// 8.19 G weights, 16.4 GB).
std::vector<std::string> RandomModelPresets();

struct RandomModelOptions {
  uint32_t seed = 1;
  int shards = 1;          // > 1: model-0000K-of-0000N.safetensors + model.safetensors.index.json
  float stddev = 0.02f;
  int64_t vocab_size = 0;  // > 0: replaces the preset's vocab_size (e.g. to match a test tokenizer)
};

// Writes config.json and safetensors for `preset` into `dir` (created). NOT_FOUND for an
// unknown preset.
Status WriteRandomModel(const std::string& preset, const std::string& dir, const RandomModelOptions& options);

}  // namespace df11
