// Compression of a Hugging Face BF16 checkpoint into a DF11 directory in the published layout
// (loadable by the reference dfloat11 package): one safetensors file per compressed unit named
// after its module path (model_layers_0.safetensors, ...) holding the unit's six tensors and the
// module's other parameters, model.safetensors with the rest, config.json with dfloat11_config,
// and every other file of the source directory (tokenizer, generation config) copied.
// Units and pattern_dict are chosen per architecture (Df11PatternDict). Every unit is decoded and
// compared bit for bit before it is written. A unit whose weights hold exponents >= 240 (inf,
// NaN, huge values) is stored as plain BF16 with a warning naming the weight.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace df11 {

struct CompressOptions {
  int threads = 0;  // 0 = all cores
  // Called after each unit: (units done, units total, unit path).
  std::function<void(size_t, size_t, const std::string&)> progress;
};

struct CompressedUnitReport {
  std::string path;
  uint64_t elements = 0;
  uint64_t compressed_bytes = 0;  // all six tensors
  bool stored_plain = false;      // exponent >= 240 somewhere: kept as BF16
  double bits_per_weight() const { return elements ? 8.0 * compressed_bytes / elements : 0; }
};

struct CompressReport {
  std::vector<CompressedUnitReport> units;
  std::vector<std::string> warnings;
  uint64_t bf16_bytes = 0;   // all tensors of the source, BF16
  uint64_t df11_bytes = 0;   // all tensors of the result
  double seconds = 0;
};

// Compresses SRC (a BF16 checkpoint directory) into DST (created; must not exist or be empty).
// Errors: SRC unreadable or already DF11, unknown architecture, a unit weight missing or not
// BF16, DST not writable, a verification mismatch (INTERNAL: a bug, never written).
StatusOr<CompressReport> CompressCheckpoint(const std::string& src, const std::string& dst, const CompressOptions& options);

}  // namespace df11
