// The shared admission path of generation requests (see admission.h).
#include "server/admission.h"

namespace df11::server {
namespace {

// Counts a refusal by reason and passes the status through.
Status Rejected(ServiceContext& ctx, const std::string& model, const Status& status) {
  const char* reason = status.code() == StatusCode::kResourceExhausted ? "queue_full"
                       : status.message().find("long") != std::string::npos ? "too_long"
                       : status.code() == StatusCode::kInvalidArgument ? "invalid"
                                                                        : "other";
  if (status.code() != StatusCode::kNotFound) RecordRejected(ctx, model, reason);
  return status;
}

}  // namespace

StatusOr<Admitted> AdmitGenerate(ServiceContext& ctx, const pb::GenerateRequest& request,
                                 std::optional<std::string_view> authorization,
                                 std::optional<Clock::time_point> deadline, EventSink sink) {
  if (Status auth = ctx.keys->CheckBearer(authorization, /*admin=*/false); !auth.ok()) {
    RecordRejected(ctx, request.model(), "unauthenticated");
    return auth;
  }
  if (ctx.draining.load()) return Unavailable("server is draining; retry on another replica");
  auto translated = TranslateGenerateRequest(request);
  if (!translated.ok()) return Rejected(ctx, request.model(), translated.status());
  GenerateRequest engine_request = std::move(translated).value();
  auto sources = ctx.resources->Get(request.model());
  if (!sources.ok()) return Rejected(ctx, request.model(), sources.status());
  auto prompt = BuildPrompt(request, *sources);
  if (!prompt.ok()) return Rejected(ctx, request.model(), prompt.status());
  engine_request.prompt_tokens = std::move(prompt).value();
  engine_request.deadline = deadline;
  Admitted admitted;
  admitted.prompt_tokens = static_cast<int64_t>(engine_request.prompt_tokens.size());
  admitted.sources = *sources;
  auto id = ctx.engine->Submit(std::move(engine_request), std::move(sink));
  if (!id.ok()) return Rejected(ctx, request.model(), id.status());
  admitted.id = *id;
  return admitted;
}

}  // namespace df11::server
