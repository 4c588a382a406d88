// The OpenAI-compatible HTTP API of df11d on its own listener (--http-address):
//   POST /v1/chat/completions, POST /v1/completions (JSON, or server-sent events with "stream"),
//   GET /v1/models, GET /health (200 once startup is done and until a drain, else 503).
// Requests become proto GenerateRequests (openai_request.h) and run the admission path gRPC
// Generate runs (admission.h); answers and errors are OpenAI's JSON shapes (openai_response.h).
// API keys as gRPC's (Authorization: Bearer), TLS with the same certificate. A client that goes
// away cancels its engine request (its KV blocks are freed in the next step).
// Counted in df11_http_requests_total{route, code}, logged as one request line per generation.
// Thread-safety: handlers run on HTTP threads; engine events are formatted on the engine thread
// and handed to the connection without blocking.
#pragma once

#include <memory>
#include <string>

#include "server/http_server.h"
#include "server/service_context.h"

namespace df11::server {

class OpenAiApi {
 public:
  // `ctx` must outlive the API. Errors as HttpServer::Start.
  static StatusOr<std::unique_ptr<OpenAiApi>> Start(ServiceContext& ctx, const std::string& address,
                                                    const HttpLimits& limits, const HttpTls& tls);
  void Stop() { http_->Stop(); }
  int port() const { return http_->port(); }

 private:
  std::unique_ptr<HttpServer> http_;
};

}  // namespace df11::server
