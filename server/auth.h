// API keys: every RPC of Generation and Admin carries `authorization: Bearer <key>` metadata when
// keys are configured. Keys are compared in constant time (per candidate length).
// Rules: no keys at all -> everything open. User keys set -> Generation needs a user or admin key.
// Admin keys set -> Admin needs an admin key; else Admin needs a user key (when user keys are set).
// Health and reflection are never authenticated (load balancers and grpcurl use them).
// Thread-safety: immutable after Load; Check is safe to call concurrently.
#pragma once

#include <grpcpp/grpcpp.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"

namespace df11::server {

// True when a == b; time depends only on the lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

class ApiKeys {
 public:
  // Keys from flags plus files (one key per line; blank lines and lines starting with '#'
  // skipped). NOT_FOUND for a missing file; INVALID_ARGUMENT for a key with spaces or control
  // characters (names the file and line).
  static StatusOr<ApiKeys> Load(std::vector<std::string> user_keys, const std::string& user_keys_file,
                                std::vector<std::string> admin_keys, const std::string& admin_keys_file);

  bool enabled() const { return !user_keys_.empty() || !admin_keys_.empty(); }
  // UNAUTHENTICATED with a reason ("missing authorization metadata", "invalid API key") or OK.
  Status Check(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, bool admin) const;
  // The same check for a credential taken from any protocol (gRPC metadata or an HTTP
  // Authorization header): `authorization` is its value ("Bearer <key>") or nullopt when absent.
  Status CheckBearer(std::optional<std::string_view> authorization, bool admin) const;

 private:
  std::vector<std::string> user_keys_, admin_keys_;
};

}  // namespace df11::server
