// Unparsable requests and library log routing (see raw_message.h).
#include "server/raw_message.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>

#include "server/request_log.h"

namespace df11::server {

Status UnparsableRequest(grpc::CallbackServerContext* call, const char* method, const std::string& type_name,
                         size_t bytes) {
  LogEvent("warn", "unparsable_request",
           {{"method", method}, {"peer", call->peer()}, {"bytes", std::to_string(bytes)}});
  return InvalidArgument("could not parse request: " + std::to_string(bytes) + " bytes are not a valid " + type_name +
                         " message (malformed protobuf, or invalid UTF-8 in a string field)");
}

namespace {

void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  const char* our_level = level >= google::protobuf::LOGLEVEL_ERROR ? "warn" : "info";
  LogEvent(our_level, "protobuf_log", {{"message", message}, {"at", std::string(file) + ":" + std::to_string(line)}});
}

void GrpcLog(gpr_log_func_args* args) {
  const char* level = args->severity == GPR_LOG_SEVERITY_ERROR ? "error" : "info";
  LogEvent(level, "grpc_log", {{"message", args->message}, {"at", std::string(args->file) + ":" + std::to_string(args->line)}});
}

}  // namespace

void RouteLibraryLogs() {
  google::protobuf::SetLogHandler(&ProtobufLog);
  gpr_set_log_function(&GrpcLog);
}

}  // namespace df11::server
