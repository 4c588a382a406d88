// ModelSpec: one model to serve (name, directory, KV share, fairness weight, batch limit) and the
// one check of it, shared by the config file, the Admin service and Engine::LoadModel.
// Thread-safety: plain values and a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/base/status.h"

namespace df11 {

// One model to serve.
struct ModelSpec {
  std::string name;            // served name; unique within the engine
  std::string path;            // DF11 or BF16 model directory (tokenizer files optional)
  double kv_share = 1.0;       // weight of this model in the shared KV remainder (> 0)
  int64_t kv_min_blocks = 0;   // 0 = enough for one max-length sequence
  double weight = 1.0;         // fairness weight between models with pending work (> 0)
  int64_t max_seqs = 0;        // 0 = EngineOptions::max_seqs
  bool pinned = false;         // never demoted from the device (residency.h)
  bool resident_bf16 = false;  // a DF11 model decoded at load and held as BF16 (ModelOptions::resident_bf16)
  int tile_max_tokens = 64;    // 32 or 64 (ModelOptions::tile_max_tokens)
};

// Bounds of the ModelSpec fields (docs/api.md, "Configuration").
inline constexpr double kMaxModelShare = 1e6;      // kv_share and weight: (0, 1e6]
inline constexpr int64_t kMaxModelSeqs = 1000000;  // max_seqs: [0, 1e6]
inline constexpr int64_t kMaxKvMinBlocks = int64_t{1} << 40;
inline constexpr size_t kMaxModelNameBytes = 128;
// The one check of a ModelSpec, used by the config file, the Admin service and LoadModel:
// INVALID_ARGUMENT whose message starts with the field name ("kv_share: must be in (0, 1e6], got
// inf"). A name is 1-128 bytes of printable ASCII without spaces; a path is non-empty without
// control characters.
Status ValidateModelSpec(const ModelSpec& spec);

}  // namespace df11
