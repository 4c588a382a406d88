// Conversions between nlohmann::json and Value, and Python json.dumps() byte-for-byte (what
// transformers' `tojson` filter calls: json.dumps(x, ensure_ascii=False, indent=None, ...)).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/template/jinja/value.h"

namespace df11::jinja {

// Converts parsed JSON into a Value (objects keep their key order: use nlohmann::ordered_json
// upstream if order matters; nlohmann::json sorts keys). Fails on invalid UTF-8, integers
// outside int64 and nesting deeper than 512.
StatusOr<Value> FromJson(const nlohmann::ordered_json& j);
StatusOr<Value> FromJson(const nlohmann::json& j);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: single line; "" or "  ": one item per line
  std::optional<std::string> item_separator;  // default ", " (or "," with indent)
  std::optional<std::string> key_separator;   // default ": "
  bool sort_keys = false;
  size_t max_bytes = SIZE_MAX;  // RESOURCE_EXHAUSTED once the output would exceed this
};

// Python json.dumps(v, ...) appended to *out. TypeError (INVALID_ARGUMENT) for values that are
// not JSON serializable (undefined, functions, namespaces, non-scalar dict keys).
Status DumpJson(const Value& v, const JsonDumpOptions& options, std::string* out);

}  // namespace df11::jinja
