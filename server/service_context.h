// What the RPC handlers share: the engine, API keys, metrics, per-model prompt sources (tokenizer
// and chat template, cached), and the drain flag.
// Thread-safety: every member is safe to use from any RPC thread; ModelResources locks a mutex.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "scheduler/engine.h"
#include "server/auth.h"
#include "server/translate.h"

namespace df11 {
class Metrics;
}

namespace df11::server {

// Tokenizer (from the engine) and chat template (loaded from the model directory once, on first
// use) per model name.
class ModelResources {
 public:
  explicit ModelResources(const Engine* engine) : engine_(engine) {}
  // NOT_FOUND for an unknown model; sources may be null when the model directory has none.
  StatusOr<PromptSources> Get(const std::string& model);
  void Forget(const std::string& model);  // after an unload

 private:
  const Engine* engine_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const ChatTemplate>> templates_;  // null: model has none
};

struct ServiceContext {
  Engine* engine = nullptr;
  const ApiKeys* keys = nullptr;
  Metrics* metrics = nullptr;  // optional
  ModelResources* resources = nullptr;
  std::atomic<bool> draining{false};
  std::atomic<bool> startup_done{false};  // the configured models are loaded (Server::SetStartupDone)
  int64_t warmup_tokens = 1;  // see LoadAndWarm
  // Called when a model's readiness changes (health); set by Server.
  std::function<void(const std::string& model, bool serving)> set_model_serving;
};

// Metrics hooks that tolerate a null Metrics.
void RecordRpc(ServiceContext& ctx, const std::string& method, grpc::StatusCode code);
void RecordRejected(ServiceContext& ctx, const std::string& model, const std::string& reason);
// One answered HTTP API request: `route` is one of the API's paths or "other".
void RecordHttp(ServiceContext& ctx, const std::string& route, int http_status);

// Runs `fn`, turning an exception into a status so that no request path can terminate the
// daemon: std::bad_alloc -> RESOURCE_EXHAUSTED, std::system_error (e.g. no thread could be
// started) -> UNAVAILABLE, anything else -> INTERNAL; each names what failed.
Status GuardExceptions(const std::function<Status()>& fn);

// The client's deadline as the engine's clock, if it set one.
std::optional<Clock::time_point> EngineDeadline(const grpc::CallbackServerContext& context);

}  // namespace df11::server
