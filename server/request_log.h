// Logging through spdlog: text lines or JSON lines (one object per line, correctly escaped).
// One line per finished request (id, model, tokens, timings, status), plus startup, shutdown and
// model events through LogEvent.
// Thread-safety: all functions may be called from any thread (spdlog's logger is thread-safe).
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/base/status.h"
#include "scheduler/engine.h"

namespace df11::server {

// Sets up the default spdlog logger (stderr). format: "text" | "json"; level as spdlog names it.
void InitLogging(const std::string& format, const std::string& level);

struct RequestLine {
  RequestId id = 0;
  std::string client_request_id;
  std::string model;
  std::string peer;
  FinishReason finish_reason = FinishReason::kNone;
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;  // status message when not OK
  RequestUsage usage;
  RequestTimings timings;
};
void LogRequest(const RequestLine& line);

// An informational event: `event` names it ("model_loaded", "draining", ...), fields add detail.
// level: "info" | "warn" | "error".
void LogEvent(const std::string& level, const std::string& event,
              const std::vector<std::pair<std::string, std::string>>& fields = {});

// A value as the text log format writes it: as is when it is non-empty and only letters, digits
// and ._-:/@+,'()[]; otherwise in double quotes with \" \\ \n \r \t and \xHH for every other
// byte below 0x20 or from 0x7f (non-ASCII included). Client-controlled text can then neither start a
// new line nor pose as another field.
std::string LogValue(std::string_view value);

// The gRPC name of a status code ("INVALID_ARGUMENT").
const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace df11::server
