// ConfigReader (typed JSON access with file/field error messages) and the rope reader shared by
// all architectures; see model_config_reader.h.
#include "runtime/format/model_config_reader.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace df11 {

using Json = nlohmann::json;

Status ConfigReader::TypeError(const std::string& key, const char* expected) const {
  return Error(key, std::string("expected ") + expected + ", got " + At(key).type_name());
}

Status ConfigReader::Int(const std::string& key, int64_t& out) const {
  if (!Has(key)) return Status::Ok();
  const Json& v = At(key);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Error(key, "integer out of range");
    out = static_cast<int64_t>(u);
    return Status::Ok();
  }
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return Status::Ok();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^53: every integer below is exact in a double.
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= 9007199254740992.0) {
      out = static_cast<int64_t>(d);
      return Status::Ok();
    }
    return Error(key, "expected an integer, got " + v.dump());
  }
  return TypeError(key, "an integer");
}

template <typename T>
Status ConfigReader::Typed(const std::string& key, bool (Json::*is)() const noexcept, const char* what, T& out) const {
  if (!Has(key)) return Status::Ok();
  if (!(At(key).*is)()) return TypeError(key, what);
  out = At(key).get<T>();
  return Status::Ok();
}

Status ConfigReader::Double(const std::string& key, double& out) const {
  return Typed(key, &Json::is_number, "a number", out);
}

Status ConfigReader::Bool(const std::string& key, bool& out) const {
  return Typed(key, &Json::is_boolean, "a boolean", out);
}

Status ConfigReader::String(const std::string& key, std::string& out) const {
  return Typed(key, &Json::is_string, "a string", out);
}

Status ConfigReader::RequiredInt(const std::string& key, int64_t& out) const {
  if (!Has(key)) return Error(key, "missing required key");
  return Int(key, out);
}

Status ConfigReader::RequiredDouble(const std::string& key, double& out) const {
  if (!Has(key)) return Error(key, "missing required key");
  return Double(key, out);
}

StatusOr<ConfigReader> ConfigReader::Object(const std::string& key) const {
  if (!Has(key)) return Error(key, "missing required key");
  if (!At(key).is_object()) return TypeError(key, "an object");
  return ConfigReader(At(key), *source_, prefix_ + key + ".");
}

namespace {

// Positive and at most 1e12 (rope thetas, factors, context lengths: far below it), so that no
// rope parameter can overflow what is computed from it.
Status RequirePositive(const ConfigReader& r, const std::string& key, double value) {
  if (value > 0 && value <= 1e12) return Status::Ok();
  return r.Error(key, "must be in (0, 1e12], got " + std::to_string(value));
}

// llama3 (Llama 3.1): all four keys are required, as transformers' validation requires them.
Status ReadLlama3Keys(const ConfigReader& r, RopeConfig& rope) {
  DF11_RETURN_IF_ERROR(r.RequiredDouble("low_freq_factor", rope.low_freq_factor));
  DF11_RETURN_IF_ERROR(r.RequiredDouble("high_freq_factor", rope.high_freq_factor));
  DF11_RETURN_IF_ERROR(r.RequiredInt("original_max_position_embeddings", rope.original_max_position_embeddings));
  DF11_RETURN_IF_ERROR(RequirePositive(r, "low_freq_factor", rope.low_freq_factor));
  if (!(rope.high_freq_factor > rope.low_freq_factor)) {
    return r.Error("high_freq_factor", "must be greater than low_freq_factor");
  }
  return RequirePositive(r, "original_max_position_embeddings",
                         static_cast<double>(rope.original_max_position_embeddings));
}

// One rope dict (rope_scaling, rope_parameters or one of its per-layer-type entries). Keys it
// lacks keep the values already in `rope`.
Status ReadRopeDict(const ConfigReader& r, RopeConfig& rope) {
  // Older configs spell the key "type" (e.g. {"type": "llama3"}); transformers accepts both.
  const std::string type_key = r.Has("rope_type") || !r.Has("type") ? "rope_type" : "type";
  std::string type = "default";
  DF11_RETURN_IF_ERROR(r.String(type_key, type));
  DF11_RETURN_IF_ERROR(r.Double("rope_theta", rope.theta));
  DF11_RETURN_IF_ERROR(RequirePositive(r, "rope_theta", rope.theta));
  DF11_RETURN_IF_ERROR(r.Double("partial_rotary_factor", rope.partial_rotary_factor));
  if (type != "default" && type != "linear" && type != "llama3") {
    return r.Error(type_key, "unsupported value \"" + type + "\" (supported: default, linear, llama3)");
  }
  rope.type = type;
  if (type == "default") return Status::Ok();
  DF11_RETURN_IF_ERROR(r.RequiredDouble("factor", rope.factor));
  DF11_RETURN_IF_ERROR(RequirePositive(r, "factor", rope.factor));
  return type == "llama3" ? ReadLlama3Keys(r, rope) : Status::Ok();
}

// rope_parameters of transformers 5: either one dict, or one per layer type.
Status ReadRopeParameters(const ConfigReader& r, const std::optional<RopeConfig>& local_base, RopeConfig& rope,
                          RopeConfig& rope_local, bool& local_given) {
  DF11_ASSIGN_OR_RETURN(const ConfigReader params, r.Object("rope_parameters"));
  if (!params.Contains("full_attention") && !params.Contains("sliding_attention")) {
    return ReadRopeDict(params, rope);
  }
  const RopeConfig start = rope;
  if (params.Contains("full_attention")) {
    DF11_ASSIGN_OR_RETURN(const ConfigReader full, params.Object("full_attention"));
    DF11_RETURN_IF_ERROR(ReadRopeDict(full, rope));
  }
  if (params.Contains("sliding_attention")) {
    DF11_ASSIGN_OR_RETURN(const ConfigReader sliding, params.Object("sliding_attention"));
    rope_local = local_base ? *local_base : start;
    DF11_RETURN_IF_ERROR(ReadRopeDict(sliding, rope_local));
    local_given = true;
  }
  return Status::Ok();
}

}  // namespace

Status ReadRope(const ConfigReader& r, const RopeConfig& base, const std::optional<RopeConfig>& local_base,
                RopeConfig& rope, RopeConfig& rope_local) {
  rope = base;
  DF11_RETURN_IF_ERROR(r.Double("rope_theta", rope.theta));
  DF11_RETURN_IF_ERROR(RequirePositive(r, "rope_theta", rope.theta));
  DF11_RETURN_IF_ERROR(r.Double("partial_rotary_factor", rope.partial_rotary_factor));
  bool local_given = false;
  if (r.Has("rope_parameters")) {  // transformers 5 wins over any legacy keys beside it
    DF11_RETURN_IF_ERROR(ReadRopeParameters(r, local_base, rope, rope_local, local_given));
  } else if (r.Has("rope_scaling")) {
    DF11_ASSIGN_OR_RETURN(const ConfigReader scaling, r.Object("rope_scaling"));
    DF11_RETURN_IF_ERROR(ReadRopeDict(scaling, rope));
  }
  if (!local_given) rope_local = local_base ? *local_base : rope;
  for (const RopeConfig* kind : {&rope, &rope_local}) {
    if (!(kind->partial_rotary_factor > 0 && kind->partial_rotary_factor <= 1)) {
      return r.Error("partial_rotary_factor", "must be in (0, 1]");
    }
  }
  return Status::Ok();
}

}  // namespace df11
