// Checkpoint: a model directory opened for reading, DF11 or plain BF16 Hugging Face. Finds the
// DF11 compressed units by pattern_dict, maps each unit back to its named weights with shapes
// (from the model config), and exposes the BF16 passthrough tensors. Every weight of either kind
// of checkpoint can be read as BF16 on the CPU, so later layers run BF16 and DF11 side by side.
// Tensors are matched by name across all *.safetensors files; file names never matter.
// Thread-safety: immutable after Open; safe to share.
#pragma once

#include <memory>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/df11_format.h"
#include "runtime/format/model_config.h"
#include "runtime/format/safetensors.h"

namespace df11 {

// config.json "dfloat11_config".
struct Df11Config {
  std::string version;
  int threads_per_block = kDefaultThreadsPerBlock;
  int bytes_per_thread = kBytesPerWindow;
  PatternDict pattern_dict;
};
// Parses the block. INVALID_ARGUMENT naming the field for anything malformed or unsupported
// (bytes_per_thread other than 8, threads_per_block not one multiple of 32 in [32, 1024]).
StatusOr<Df11Config> ParseDf11Config(const nlohmann::json& block, const std::string& source);

// One weight inside a compressed unit: elements [offset, offset + numel) of the unit.
struct UnitWeight {
  std::string name;             // e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;   // from the model config; {numel} when the architecture is unknown
  uint64_t offset = 0;
  uint64_t numel = 0;
};

struct Df11Unit {
  std::string path;             // module path, e.g. "model.layers.0"
  std::string pattern;          // the pattern_dict key it matched
  UnitView view;                // borrowed from the checkpoint's memory maps
  UnitLayout layout;
  std::vector<UnitWeight> weights;  // in concatenation order
};

struct CheckpointOptions {
  // When false an unknown architecture is accepted and unit weights get flat shapes (inspect).
  bool require_known_architecture = true;
};

class Checkpoint {
 public:
  // Opens DIR (config.json + *.safetensors). Errors name the file, tensor and what is wrong:
  // missing config, unknown architecture, a unit with a missing/mistyped tensor, a unit that
  // matches no pattern, a pattern_dict that matches no unit, split sizes that disagree with the
  // config's shapes, a structurally invalid unit (see ValidateUnit).
  static StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir, const CheckpointOptions& options = {});

  const std::string& dir() const { return dir_; }
  bool is_df11() const { return df11_.has_value(); }
  const std::optional<Df11Config>& df11_config() const { return df11_; }
  // Valid only when the architecture is known (always, unless require_known_architecture=false).
  const ModelConfig& config() const { return config_; }
  bool architecture_known() const { return architecture_known_; }
  const std::vector<Df11Unit>& units() const { return units_; }
  const TensorStore& store() const { return store_; }
  // Non-fatal findings (e.g. a pattern that matched no unit, as lm_head in a tied model).
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Where a weight lives: inside a unit, or as a plain tensor.
  struct Location {
    const Df11Unit* unit = nullptr;     // non-null for a compressed weight
    const UnitWeight* weight = nullptr; // its slice of the unit
    TensorStore::Entry plain{};         // for a plain tensor (file != nullptr)
  };
  // NOT_FOUND naming the weight when it is in neither.
  StatusOr<Location> Locate(const std::string& name) const;
  // config.json's num_hidden_layers against the tensors: names "<prefix>layers.<i>." must reach
  // exactly layer num_layers - 1 (INVALID_ARGUMENT naming both otherwise), so that a config
  // cannot size a model the checkpoint does not hold. OK when the architecture is unknown.
  Status CheckLayerCount() const;
  // Names of all weights: every unit weight and every plain tensor.
  std::vector<std::string> WeightNames() const;
  // A weight as BF16 words, decoding DF11 on the CPU when needed. A plain tensor must be BF16.
  StatusOr<std::vector<uint16_t>> ReadBf16(const std::string& name, int threads = 0) const;

 private:
  Checkpoint() = default;
  Status FindUnits();
  Status BuildUnit(const std::string& path, const std::string& pattern, const std::vector<std::string>& attrs);

  std::string dir_;
  TensorStore store_;
  ModelConfig config_;
  bool architecture_known_ = false;
  std::optional<Df11Config> df11_;
  std::vector<Df11Unit> units_;
  std::vector<std::string> warnings_;
  std::map<std::string, std::vector<int64_t>> expected_shapes_;  // ExpectedWeights, computed once
};

}  // namespace df11
