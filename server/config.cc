// df11d flags, environment variables and the models config file (see config.h).
#include "server/config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace df11::server {
namespace {

std::string EnvName(const std::string& flag) {
  std::string env = "DF11D_";
  for (char c : flag) env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

template <typename T>
CLI::Option* Flag(CLI::App& app, const std::string& name, T& value, const std::string& help) {
  return app.add_option("--" + name, value, help)->envname(EnvName(name))->capture_default_str();
}

StatusOr<ModelSpec> ParseModelEntry(const nlohmann::json& m, const std::string& where) {
  if (!m.is_object()) return InvalidArgument(where + ": expected an object");
  static const std::set<std::string> kKeys = {"name", "path", "kv_share", "weight", "priority", "max_seqs", "kv_min_blocks", "pinned", "resident_bf16", "tile_max_tokens"};
  for (const auto& [key, value] : m.items()) {
    if (!kKeys.count(key)) return InvalidArgument(where + "." + key + ": unknown key");
  }
  ModelSpec spec;
  auto get_string = [&](const char* key, std::string* out) -> Status {
    if (!m.contains(key)) return InvalidArgument(where + "." + key + ": required");
    if (!m[key].is_string() || m[key].get<std::string>().empty()) return InvalidArgument(where + "." + key + ": expected a non-empty string");
    *out = m[key].get<std::string>();
    return Status();
  };
  auto get_number = [&](const char* key, double* out, bool integer) -> Status {
    if (!m.contains(key)) return Status();
    const auto& v = m[key];
    if (!v.is_number() || (integer && !v.is_number_integer())) {
      return InvalidArgument(where + "." + key + (integer ? ": expected an integer" : ": expected a number"));
    }
    *out = v.get<double>();
    return Status();
  };
  DF11_RETURN_IF_ERROR(get_string("name", &spec.name));
  DF11_RETURN_IF_ERROR(get_string("path", &spec.path));
  double kv_share = 1, weight = 1, max_seqs = 0, kv_min_blocks = 0;
  DF11_RETURN_IF_ERROR(get_number("kv_share", &kv_share, false));
  DF11_RETURN_IF_ERROR(get_number("priority", &weight, false));
  DF11_RETURN_IF_ERROR(get_number("weight", &weight, false));
  DF11_RETURN_IF_ERROR(get_number("max_seqs", &max_seqs, true));
  DF11_RETURN_IF_ERROR(get_number("kv_min_blocks", &kv_min_blocks, true));
  // Range checks happen in ValidateModelSpec; here only what a double cannot hold as an int64.
  if (std::fabs(max_seqs) > 9e15 || std::fabs(kv_min_blocks) > 9e15) {
    return InvalidArgument(where + (std::fabs(max_seqs) > 9e15 ? ".max_seqs" : ".kv_min_blocks") + ": out of range");
  }
  spec.kv_share = kv_share;
  spec.weight = weight;
  spec.max_seqs = static_cast<int64_t>(max_seqs);
  spec.kv_min_blocks = static_cast<int64_t>(kv_min_blocks);
  if (m.contains("pinned")) {
    if (!m["pinned"].is_boolean()) return InvalidArgument(where + ".pinned: expected true or false");
    spec.pinned = m["pinned"].get<bool>();
  }
  if (m.contains("resident_bf16")) {
    if (!m["resident_bf16"].is_boolean()) return InvalidArgument(where + ".resident_bf16: expected true or false");
    spec.resident_bf16 = m["resident_bf16"].get<bool>();
  }
  if (m.contains("tile_max_tokens")) {
    const auto& t = m["tile_max_tokens"];
    if (!t.is_number_integer()) return InvalidArgument(where + ".tile_max_tokens: expected 32 or 64");
    if (t != 32 && t != 64) return InvalidArgument(where + ".tile_max_tokens: must be 32 or 64, got " + t.dump());
    spec.tile_max_tokens = t.get<int>();
  }
  if (Status valid = ValidateModelSpec(spec); !valid.ok()) return InvalidArgument(where + "." + valid.message());
  return spec;
}

Status CheckPositive(int64_t v, const char* flag) {
  if (v <= 0) return InvalidArgument(std::string("--") + flag + ": must be > 0, got " + std::to_string(v));
  return Status();
}

Status CheckHttpFlags(const ServerConfig& c) {
  if (!(c.http_idle_timeout_seconds >= 1 && c.http_idle_timeout_seconds <= 3600)) {
    return InvalidArgument("--http-idle-timeout-seconds: must be in [1, 3600]");
  }
  if (c.http_max_connections_per_client < 1 || c.http_max_connections_per_client > 100000) {
    return InvalidArgument("--http-max-connections-per-client: must be in [1, 100000]");
  }
  if (c.http_address.empty()) return Status();
  const bool any_port = c.http_address.size() >= 2 && c.http_address.compare(c.http_address.size() - 2, 2, ":0") == 0;
  if (c.http_address == c.metrics_address && !any_port) {
    return InvalidArgument("--http-address: must differ from --metrics-address (/metrics has its own listener)");
  }
  if (c.tls_require_client_cert) {
    return InvalidArgument("--http-address: the HTTP API does not do mutual TLS (--tls-require-client-cert)");
  }
  return Status();
}

}  // namespace

void AddServerFlags(CLI::App& app, ServerConfig& c) {
  Flag(app, "grpc-address", c.grpc_address, "gRPC listen address (host:port; port 0 picks one)");
  Flag(app, "metrics-address", c.metrics_address, "HTTP /metrics listen address; empty disables it");
  Flag(app, "http-address", c.http_address, "OpenAI-compatible HTTP API listen address (/v1/...); empty disables it");
  Flag(app, "http-idle-timeout-seconds", c.http_idle_timeout_seconds,
       "HTTP listeners: close a connection that sends nothing for this long (request-read timeout)");
  Flag(app, "http-max-connections-per-client", c.http_max_connections_per_client,
       "HTTP listeners: connections one client IP may hold open");
  Flag(app, "config", c.config_file, "JSON file listing models to serve (see docs/api.md)");
  Flag(app, "model", c.model_flags, "a model to serve, NAME=PATH (repeatable; env: comma separated)")->delimiter(',');
  Flag(app, "device", c.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  Flag(app, "threads", c.engine.threads, "CPU backend threads (0 = all cores)");
  Flag(app, "max-batched-tokens", c.engine.max_batched_tokens, "tokens per engine step");
  Flag(app, "max-seqs", c.engine.max_seqs, "running sequences per model");
  Flag(app, "block-size", c.engine.block_size, "KV positions per block");
  Flag(app, "kv-memory-bytes", c.engine.kv_memory_bytes, "KV cache bytes for all models (CPU: required > 0)");
  Flag(app, "kv-memory-fraction", c.engine.kv_memory_fraction, "GPU: fraction of free memory for KV when kv-memory-bytes is 0");
  Flag(app, "max-waiting", c.engine.max_waiting, "waiting requests before RESOURCE_EXHAUSTED");
  Flag(app, "prefix-caching", c.engine.prefix_caching, "reuse KV blocks of shared prompt prefixes");
  Flag(app, "host-overlap", c.host_overlap,
       "CUDA: detokenize and stream a step's tokens while the next step runs (a stop string is seen a step late; "
       "outputs are the same)");
  Flag(app, "max-model-bytes", c.engine.max_model_bytes,
       "device memory budget for the resident models' weights (0 = ask the device); models beyond it wait in the "
       "host or disk tier and are brought in on demand");
  Flag(app, "max-host-model-bytes", c.engine.max_host_model_bytes,
       "host memory for demoted models' weights (page-locked on CUDA); 0 = none: demoted models go to disk");
  Flag(app, "warmup-tokens", c.warmup_tokens, "tokens the first warm-up request generates before a model is SERVING (0 = no warm-up)");
  Flag(app, "api-key", c.api_keys, "API key accepted on Generation calls (repeatable; env: comma separated)")->delimiter(',');
  Flag(app, "api-keys-file", c.api_keys_file, "file with API keys, one per line");
  Flag(app, "admin-api-key", c.admin_api_keys, "API key required on Admin calls (repeatable)")->delimiter(',');
  Flag(app, "admin-api-keys-file", c.admin_api_keys_file, "file with admin API keys, one per line");
  Flag(app, "tls-cert", c.tls_cert, "server certificate chain (PEM); with --tls-key enables TLS");
  Flag(app, "tls-key", c.tls_key, "server private key (PEM)");
  Flag(app, "tls-client-ca", c.tls_client_ca, "CA bundle (PEM) for client certificates");
  Flag(app, "tls-require-client-cert", c.tls_require_client_cert, "mutual TLS: reject clients without a certificate signed by --tls-client-ca");
  Flag(app, "max-message-bytes", c.max_message_bytes, "largest request or response message");
  Flag(app, "keepalive-time-ms", c.keepalive_time_ms, "HTTP/2 keepalive ping interval");
  Flag(app, "keepalive-timeout-ms", c.keepalive_timeout_ms, "close a connection whose ping is not answered within this");
  Flag(app, "max-connection-idle-ms", c.max_connection_idle_ms, "close idle connections after this (0 = never)");
  Flag(app, "max-connection-age-ms", c.max_connection_age_ms, "close connections after this age, for load balancers (0 = never)");
  Flag(app, "max-connection-age-grace-ms", c.max_connection_age_grace_ms, "time given to calls on a connection closed for age");
  Flag(app, "drain-grace-seconds", c.drain_grace_seconds, "on SIGTERM/SIGINT: time in-flight requests get to finish");
  Flag(app, "log-format", c.log_format, "text or json (one JSON object per line)")->check(CLI::IsMember({"text", "json"}));
  Flag(app, "log-level", c.log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
}

StatusOr<std::vector<ModelSpec>> ParseModelsConfig(std::string_view json_text, const std::string& source) {
  auto root = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return InvalidArgument(source + ": not valid JSON");
  if (!root.is_object()) return InvalidArgument(source + ": expected a JSON object");
  for (const auto& [key, value] : root.items()) {
    if (key != "models") return InvalidArgument(source + ": " + key + ": unknown key");
  }
  std::vector<ModelSpec> specs;
  if (!root.contains("models")) return specs;
  if (!root["models"].is_array()) return InvalidArgument(source + ": models: expected an array");
  std::set<std::string> names;
  for (size_t i = 0; i < root["models"].size(); ++i) {
    std::string where = source + ": models[" + std::to_string(i) + "]";
    DF11_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelEntry(root["models"][i], where));
    if (!names.insert(spec.name).second) return InvalidArgument(where + ".name: duplicate model name '" + spec.name + "'");
    specs.push_back(std::move(spec));
  }
  return specs;
}

Status FinishConfig(ServerConfig& c) {
  c.models.clear();
  if (!c.config_file.empty()) {
    std::ifstream in(c.config_file);
    if (!in) return NotFound(c.config_file + ": cannot open config file");
    std::stringstream text;
    text << in.rdbuf();
    DF11_ASSIGN_OR_RETURN(c.models, ParseModelsConfig(text.str(), c.config_file));
  }
  for (const auto& flag : c.model_flags) {
    size_t eq = flag.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
      return InvalidArgument("--model: expected NAME=PATH, got '" + flag + "'");
    }
    ModelSpec spec;
    spec.name = flag.substr(0, eq);
    spec.path = flag.substr(eq + 1);
    if (Status valid = ValidateModelSpec(spec); !valid.ok()) return InvalidArgument("--model " + flag + ": " + valid.message());
    for (const auto& m : c.models) {
      if (m.name == spec.name) return InvalidArgument("--model: duplicate model name '" + spec.name + "'");
    }
    c.models.push_back(spec);
  }
  c.engine.device = c.device == "cuda" ? Device::kCuda : Device::kCpu;
  c.engine.host_overlap = c.host_overlap ? HostOverlap::kAuto : HostOverlap::kNever;
  DF11_RETURN_IF_ERROR(CheckPositive(c.engine.max_batched_tokens, "max-batched-tokens"));
  DF11_RETURN_IF_ERROR(CheckPositive(c.engine.max_seqs, "max-seqs"));
  DF11_RETURN_IF_ERROR(CheckPositive(c.engine.block_size, "block-size"));
  DF11_RETURN_IF_ERROR(CheckPositive(c.engine.max_waiting, "max-waiting"));
  DF11_RETURN_IF_ERROR(CheckPositive(c.max_message_bytes, "max-message-bytes"));
  if (c.engine.device == Device::kCpu && c.engine.kv_memory_bytes <= 0) {
    return InvalidArgument("--kv-memory-bytes: required (> 0) with --device cpu");
  }
  if (c.warmup_tokens < 0) return InvalidArgument("--warmup-tokens: must be >= 0");
  if (!(c.drain_grace_seconds >= 0)) return InvalidArgument("--drain-grace-seconds: must be >= 0");
  if (c.tls_cert.empty() != c.tls_key.empty()) return InvalidArgument("--tls-cert and --tls-key go together");
  if (c.tls_require_client_cert && c.tls_client_ca.empty()) {
    return InvalidArgument("--tls-require-client-cert needs --tls-client-ca");
  }
  if (!c.tls_client_ca.empty() && c.tls_cert.empty()) return InvalidArgument("--tls-client-ca needs --tls-cert and --tls-key");
  return CheckHttpFlags(c);
}

}  // namespace df11::server
