// The streaming Generate call: one ServerWriteReactor per stream.
//
// Flow: the RPC thread validates and translates the request, Submit()s it to the engine with an
// EventSink, and returns. The sink runs on the engine thread: it appends the event's message to
// this stream's queue (merged into the waiting message when the client is slow, so memory is
// bounded by the output, not the step count) and, when no write is in flight, starts one — it
// never blocks. OnWriteDone starts the next write; after the final event's message the call finishes with its status.
// Client cancel or deadline (OnCancel) -> Engine::Cancel, which frees the request's KV blocks.
//
// Lifetime: the reactor deletes itself in OnDone. The sink holds only a shared StreamState, so
// events that arrive after the call is finished are dropped safely. StartWrite/Finish are called
// without the state's mutex held (gRPC may run reactions inline).
#pragma once

#include <grpcpp/grpcpp.h>

#include "proto/df11.pb.h"
#include "server/service_context.h"

namespace df11::server {

// Creates the reactor for one call (it starts work immediately and owns itself). `request` is the
// raw GenerateRequest (parsed here: bad bytes end the call with INVALID_ARGUMENT); responses are
// serialized GenerateResponse messages.
grpc::ServerWriteReactor<grpc::ByteBuffer>* StartGenerate(ServiceContext& ctx, grpc::CallbackServerContext* call,
                                                          const grpc::ByteBuffer* request);

}  // namespace df11::server
