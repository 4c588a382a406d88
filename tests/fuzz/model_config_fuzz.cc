// libFuzzer target for config.json parsing (ParseModelConfig): any byte string must either be
// rejected with a message, or give a config whose every size is inside the documented bounds
// (runtime/format/model_config.h), so that nothing sized from it can allocate or loop without bound.
// Seeds: tests/fixtures/configs/*.json (real configs of the supported architectures).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/format/model_config.h"

namespace {

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  const auto parsed = df11::ParseModelConfig(json, "config.json");
  if (!parsed.ok()) {
    Require(!parsed.status().message().empty());
    return 0;
  }
  const df11::ModelConfig& c = *parsed;
  Require(c.num_layers > 0 && c.num_layers <= df11::kMaxLayers);
  Require(c.num_heads > 0 && c.num_heads <= df11::kMaxHeads);
  Require(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0);
  Require(c.head_dim > 0 && c.head_dim <= df11::kMaxHeadDim);
  Require(c.hidden_size > 0 && c.hidden_size <= df11::kMaxHiddenSize);
  Require(c.intermediate_size > 0 && c.intermediate_size <= df11::kMaxIntermediateSize);
  Require(c.vocab_size > 0 && c.vocab_size <= df11::kMaxVocabSize);
  Require(c.max_position_embeddings > 0 && c.max_position_embeddings <= df11::kMaxPositions);
  Require(c.sliding_window >= 0 && c.sliding_window <= df11::kMaxPositions);
  Require(static_cast<int64_t>(c.layer_is_sliding.size()) == c.num_layers);
  Require(c.rope.theta > 0 && c.rope.theta <= 1e12 && c.rope_local.theta > 0 && c.rope_local.theta <= 1e12);
  // The tensor list is bounded by the layer count: a few tensors per layer plus the heads.
  Require(df11::ExpectedWeights(c).size() <= static_cast<size_t>(16 * c.num_layers + 4));
  return 0;
}
