// Private to runtime/format/model_config*.cc: a typed, non-throwing reader over one JSON object of a
// config.json, whose errors name the file and the field ("config.json: text_config.head_dim:
// expected an integer, got string"), and the rope reader shared by every architecture.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kernels/base/status.h"
#include "runtime/format/model_config.h"

namespace df11 {

// Read-only view of one JSON object plus its path for messages. Holds pointers: the object and
// `source` must outlive the reader. Thread-compatible.
class ConfigReader {
 public:
  // `object` must be a JSON object; `prefix` is prepended to field names ("" or "text_config.").
  ConfigReader(const nlohmann::json& object, const std::string& source, std::string prefix)
      : object_(&object), source_(&source), prefix_(std::move(prefix)) {}

  // Present, possibly null.
  bool Contains(const std::string& key) const { return object_->find(key) != object_->end(); }
  // Present and not null (HF writes a Python None as null, meaning "use the default").
  bool Has(const std::string& key) const {
    auto it = object_->find(key);
    return it != object_->end() && !it->is_null();
  }
  // The value at `key`; requires Contains(key).
  const nlohmann::json& At(const std::string& key) const { return *object_->find(key); }

  // INVALID_ARGUMENT "<source>: <prefix><field>: <what>".
  Status Error(const std::string& field, const std::string& what) const {
    return InvalidArgument(*source_ + ": " + prefix_ + field + ": " + what);
  }

  // Optional readers: `out` is left unchanged when the key is absent or null; a value of the
  // wrong JSON type is an error. Integers accept integral JSON floats (e.g. 4096.0).
  Status Int(const std::string& key, int64_t& out) const;
  Status Double(const std::string& key, double& out) const;
  Status Bool(const std::string& key, bool& out) const;
  Status String(const std::string& key, std::string& out) const;
  // Required readers: absent or null is "missing required key".
  Status RequiredInt(const std::string& key, int64_t& out) const;
  Status RequiredDouble(const std::string& key, double& out) const;
  // The object at `key` (required), with prefix "<prefix><key>.".
  StatusOr<ConfigReader> Object(const std::string& key) const;

 private:
  Status TypeError(const std::string& key, const char* expected) const;
  // out = At(key) when (At(key).*is)() (absent or null: unchanged), else TypeError naming `what`.
  template <typename T>
  Status Typed(const std::string& key, bool (nlohmann::json::*is)() const noexcept, const char* what, T& out) const;

  const nlohmann::json* object_;
  const std::string* source_;
  std::string prefix_;
};

// Reads the rotary embedding of global (`rope`) and sliding-window (`rope_local`) layers from
//   transformers 4.5x: rope_theta + rope_scaling {rope_type | type, factor, ...}, or
//   transformers 5:    rope_parameters {rope_type, rope_theta, ...} or, keyed by layer type,
//                      {"full_attention": {...}, "sliding_attention": {...}}.
// `base` holds the class defaults (theta); `local_base`, when set, is the default of sliding
// layers (Gemma 3: rope_local_base_freq, no scaling); otherwise rope_local = rope.
// Rope types other than default | linear | llama3 are INVALID_ARGUMENT naming the key.
Status ReadRope(const ConfigReader& r, const RopeConfig& base, const std::optional<RopeConfig>& local_base,
                RopeConfig& rope, RopeConfig& rope_local);

}  // namespace df11
