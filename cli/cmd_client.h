// Shared pieces of the df11 client commands (generate, models, health, bench) that talk to df11d
// over gRPC: connection flags, channel creation (plaintext, TLS with a CA, mTLS), per-call
// metadata (authorization: Bearer) and deadlines, and status checking.
#pragma once

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cli/command.h"

namespace df11::cli {

struct ClientOptions {
  std::string addr = "localhost:50051";  // env DF11_ADDR
  std::string api_key;                   // env DF11_API_KEY
  std::string tls_ca;                    // PEM: server CA; turns TLS on
  std::string tls_cert, tls_key;         // PEM: client certificate for mTLS
  double timeout_seconds = 0;            // per call; 0 = none
};

// Adds --addr, --api-key, --tls-ca, --tls-cert, --tls-key, --timeout to `sub`.
void AddClientOptions(CLI::App* sub, ClientOptions& options);
// Throws CommandFailed(2, ...) for unreadable PEM files.
std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& options);
// Adds the API key and the deadline.
void PrepareContext(grpc::ClientContext& context, const ClientOptions& options);
// Throws CommandFailed(1, "<what>: <CODE>: <message>") when !status.ok().
void CheckRpc(const grpc::Status& status, const std::string& what);

}  // namespace df11::cli
