// Shared RPC-handler helpers (see service_context.h).
#include "server/service_context.h"

#include <new>
#include <system_error>

#include "server/metrics.h"

namespace df11::server {

StatusOr<PromptSources> ModelResources::Get(const std::string& model) {
  std::string path;
  bool found = false;
  PromptSources sources;
  for (const auto& info : engine_->Models()) {
    if (info.name == model && info.state == ModelState::kReady) {
      path = info.path;
      sources.vocab_size = info.vocab_size;
      found = true;
    }
  }
  if (!found) return NotFound("model '" + model + "' is not loaded (see ListModels)");
  sources.tokenizer = engine_->GetTokenizer(model);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = templates_.find(model);
  if (it == templates_.end()) {
    std::shared_ptr<const ChatTemplate> loaded;
    auto chat_template = LoadChatTemplate(path);
    if (chat_template.ok()) loaded = std::make_shared<const ChatTemplate>(std::move(chat_template).value());
    it = templates_.emplace(model, std::move(loaded)).first;
  }
  sources.chat_template = it->second;
  return sources;
}

void ModelResources::Forget(const std::string& model) {
  std::lock_guard<std::mutex> lock(mu_);
  templates_.erase(model);
}

void RecordRpc(ServiceContext& ctx, const std::string& method, grpc::StatusCode code) {
  if (ctx.metrics) ctx.metrics->OnRpcFinished(method, static_cast<int>(code));
}

void RecordRejected(ServiceContext& ctx, const std::string& model, const std::string& reason) {
  if (ctx.metrics) ctx.metrics->OnRejected(model, reason);
}

void RecordHttp(ServiceContext& ctx, const std::string& route, int http_status) {
  if (ctx.metrics) ctx.metrics->OnHttpRequest(route, http_status);
}

Status GuardExceptions(const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while serving the request");
  } catch (const std::system_error& e) {
    return Unavailable(std::string("the server is out of a system resource: ") + e.what());
  } catch (const std::exception& e) {
    return Internal(std::string("unexpected error: ") + e.what());
  }
}

std::optional<Clock::time_point> EngineDeadline(const grpc::CallbackServerContext& context) {
  auto deadline = context.deadline();
  if (deadline >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) return std::nullopt;
  auto remaining = deadline - std::chrono::system_clock::now();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(remaining);
}

}  // namespace df11::server
