// Our own parsing of request messages. df11d registers its services as "raw" gRPC methods
// (grpc::ByteBuffer in and out) so that a request that does not parse (random bytes, a truncated
// message, invalid UTF-8 in a string field) is answered INVALID_ARGUMENT "could not parse
// request", counted and logged, instead of gRPC's empty UNIMPLEMENTED.
// Thread-safety: free functions.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <string>

#include "kernels/base/status.h"

namespace df11::server {

// INVALID_ARGUMENT "could not parse request: ..." naming the message type and size; logs one
// "unparsable_request" line with the method and peer (the caller counts the call by its status).
template <typename Message>
Status ParseRequest(grpc::CallbackServerContext* call, const char* method, const grpc::ByteBuffer* bytes, Message* out);

// `message` serialized into `out`, replacing what it held (OK unless serialization fails: INTERNAL).
template <typename Message>
Status SerializeResponse(const Message& message, grpc::ByteBuffer* out) {
  out->Clear();
  bool own_buffer = false;
  grpc::Status s = grpc::SerializationTraits<Message>::Serialize(message, out, &own_buffer);
  return s.ok() ? Status() : Internal("could not serialize the response: " + s.error_message());
}

// Logs one unparsable request and returns its status (see ParseRequest).
Status UnparsableRequest(grpc::CallbackServerContext* call, const char* method, const std::string& type_name,
                         size_t bytes);

template <typename Message>
Status ParseRequest(grpc::CallbackServerContext* call, const char* method, const grpc::ByteBuffer* bytes,
                    Message* out) {
  const size_t size = bytes ? bytes->Length() : 0;
  if (bytes != nullptr) {
    grpc::ByteBuffer copy(*bytes);  // Deserialize consumes its buffer; the copy shares the slices
    if (grpc::SerializationTraits<Message>::Deserialize(&copy, out).ok()) return Status();
  }
  return UnparsableRequest(call, method, Message::descriptor()->full_name(), size);
}

// Routes libprotobuf's and gRPC core's own log lines through the daemon's logger (text or JSON
// lines, see request_log.h) instead of raw stderr writes. Call once at startup.
void RouteLibraryLogs();

}  // namespace df11::server
