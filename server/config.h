// df11d configuration: command-line flags (CLI11), each also read from an environment variable
// DF11D_<FLAG_NAME> (e.g. --grpc-address <- DF11D_GRPC_ADDRESS), plus an optional JSON config
// file listing the models to serve (docs/api.md, "Configuration"):
//   {"models": [{"name": "qwen", "path": "/models/qwen3-8b-df11", "kv_share": 1.0,
//                "weight": 1.0, "max_seqs": 0, "kv_min_blocks": 0, "pinned": false,
//                "resident_bf16": false}]}
// ("priority" is accepted as an alias of "weight"). Unknown keys are errors.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "scheduler/engine.h"

namespace df11::server {

struct ServerConfig {
  std::string grpc_address = "0.0.0.0:50051";
  std::string metrics_address = "0.0.0.0:8000";  // "" = no HTTP metrics endpoint
  std::string http_address;                      // OpenAI-compatible HTTP API; "" = off
  // Both HTTP listeners (API and /metrics): close a connection silent for this long (the
  // request-read timeout), and at most this many connections per client IP.
  double http_idle_timeout_seconds = 10;
  int64_t http_max_connections_per_client = 64;
  std::string config_file;
  std::vector<std::string> model_flags;  // --model NAME=PATH
  std::vector<ModelSpec> models;         // from config_file and --model (Finish fills it)

  std::string device = "cpu";  // "cpu" | "cuda"
  EngineOptions engine;
  int64_t warmup_tokens = 1;   // a model is SERVING after one request of this many tokens

  std::vector<std::string> api_keys, admin_api_keys;
  std::string api_keys_file, admin_api_keys_file;
  std::string tls_cert, tls_key, tls_client_ca;  // PEM files; cert + key enable TLS
  bool tls_require_client_cert = false;          // mTLS (needs tls_client_ca)

  int64_t max_message_bytes = 4 << 20;
  int64_t keepalive_time_ms = 30000;
  int64_t keepalive_timeout_ms = 10000;
  int64_t max_connection_idle_ms = 0;  // 0 = unlimited
  int64_t max_connection_age_ms = 0;   // 0 = unlimited
  int64_t max_connection_age_grace_ms = 0;

  double drain_grace_seconds = 30.0;
  std::string log_format = "text";  // "text" | "json"
  std::string log_level = "info";   // trace, debug, info, warn, error, off
};

// Registers every flag on `app`, writing into `config` (which must outlive parsing).
void AddServerFlags(CLI::App& app, ServerConfig& config);

// After parsing: reads the config file, turns --model flags into specs, checks values.
// INVALID_ARGUMENT naming the flag or the file and JSON path; NOT_FOUND for a missing file.
Status FinishConfig(ServerConfig& config);

// The "models" list of a config file's text; `source` names it in errors.
StatusOr<std::vector<ModelSpec>> ParseModelsConfig(std::string_view json_text, const std::string& source);

}  // namespace df11::server
