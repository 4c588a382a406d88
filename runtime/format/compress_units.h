// The pieces DF11 compression is built from (compress.cc), shared by CompressCheckpoint (a BF16
// directory in) and the random-model writer (weights generated one unit at a time, never written
// as BF16). Both produce the same files for the same weights.
// Thread-safety: stateless functions; `threads` as in CompressOptions.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/format/compress.h"
#include "runtime/format/model_config.h"
#include "runtime/format/safetensors.h"

namespace df11 {

// One compressed unit to write: a module path and its weights in concatenation order.
struct PlannedUnit {
  std::string path;                  // e.g. "model.layers.0"
  std::vector<std::string> weights;  // e.g. "model.layers.0.self_attn.q_proj.weight", ...
};

// A source tensor's bytes (little-endian, as in safetensors); valid until the unit is written.
struct SourceTensor {
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;
};
// Looks a tensor up by name; called only for names the caller listed.
using TensorSource = std::function<SourceTensor(const std::string& name)>;

// The units of a checkpoint holding `names` (sorted, as TensorStore::Names): every module path
// matching a pattern_dict key, layers in numeric order; a tied model without an lm_head tensor
// gets an lm_head unit holding a copy of the embedding (the reference package needs it).
// NOT_FOUND naming the unit when one of its weights is absent.
StatusOr<std::vector<PlannedUnit>> PlanUnits(const std::vector<std::string>& names, const ModelConfig& config,
                                             const PatternDict& patterns, const std::string& where);

// Where the tensors that no unit encodes go: a unit's file when under its module path
// (`extras`, by unit path), else model.safetensors (`rest`). Both keep the order of `names`.
struct OtherTensors {
  std::map<std::string, std::vector<std::string>> extras;
  std::vector<std::string> rest;
};
OtherTensors PlaceOtherTensors(const std::vector<std::string>& names, const std::vector<PlannedUnit>& plan);

// Encodes one unit, decodes it again and compares bit for bit (INTERNAL on a mismatch: a bug),
// and writes DST/<path with _>.safetensors with the unit's tensors and `extras`. A unit holding
// exponents >= 240 is written as plain BF16 with a warning naming the weight.
StatusOr<CompressedUnitReport> CompressUnit(const TensorSource& source, const PlannedUnit& unit, const std::string& dst,
                                            const std::vector<std::string>& extras, int threads,
                                            std::vector<std::string>& warnings);

// DST/model.safetensors with the `rest` tensors, copied as they are.
Status WriteRestTensors(const TensorSource& source, const std::vector<std::string>& rest, const std::string& dst);

// DST/config.json: `config` plus the dfloat11_config block (version, threads_per_block,
// bytes_per_thread, pattern_dict) the reference writes.
Status WriteDf11Config(nlohmann::json config, const std::string& dst, const PatternDict& patterns);

}  // namespace df11
