// The gRPC server of df11d: Generation + Admin services, grpc.health.v1, reflection, TLS/mTLS,
// keepalive / connection-age / message-size options, and the drain sequence.
//
// Health: service "" is SERVING once SetStartupDone() has been called and until a drain starts;
// each model's name is SERVING from its warm-up until its unload or the drain.
// Thread-safety: all methods may be called from any thread; Drain once.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

#include "server/auth.h"
#include "server/config.h"
#include "server/generation_service.h"
#include "server/http_server.h"
#include "server/openai_api.h"
#include "server/service_context.h"

namespace df11::server {

class Server {
 public:
  // Builds and starts listening. `engine` (and `metrics`, may be null) must outlive the Server.
  // INVALID_ARGUMENT for unreadable TLS files or bad keys, UNAVAILABLE when the address cannot be bound.
  static StatusOr<std::unique_ptr<Server>> Start(const ServerConfig& config, Engine* engine, Metrics* metrics);
  ~Server();  // shuts down immediately if Drain was not called

  int port() const { return port_; }
  int http_port() const { return http_api_ ? http_api_->port() : 0; }  // 0: no --http-address
  ServiceContext& context() { return ctx_; }

  // Marks startup model loading as finished: overall health SERVING (unless draining).
  void SetStartupDone();

  // Health NOT_SERVING everywhere (HTTP /health 503), new Generate calls (gRPC and HTTP) refused
  // with UNAVAILABLE / 503, in-flight ones get up to `grace` to finish; then the rest are
  // cancelled and both listeners stop.
  void Drain(std::chrono::duration<double> grace);

 private:
  Server() = default;
  void SetServing(const std::string& service, bool serving);

  ServiceContext ctx_;
  ApiKeys keys_;
  std::unique_ptr<ModelResources> resources_;
  std::unique_ptr<GenerationService> generation_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<OpenAiApi> http_api_;  // --http-address
  int port_ = 0;
  std::mutex health_mu_;  // orders health updates against the drain
  bool shut_down_ = false;
};

// The limits both HTTP listeners (the API and /metrics) run with, from the flags.
HttpLimits HttpListenerLimits(const ServerConfig& config);

}  // namespace df11::server
