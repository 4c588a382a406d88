// The shared admission path of generation requests (see admission.h).
#include "server/admission.h"

namespace df11::server {
namespace {

// Key, draining, translation, prompt, Engine::Submit; `reason` says why a request was refused.
Status AdmitChecked(ServiceContext& ctx, const pb::GenerateRequest& request, std::optional<std::string_view> authorization,
                    std::optional<Clock::time_point> deadline, EventSink& sink, RejectReason* reason, Admitted* out) {
  if (Status auth = ctx.keys->CheckBearer(authorization, /*admin=*/false); !auth.ok()) {
    RecordRejected(ctx, request.model(), "unauthenticated");
    *reason = RejectReason::kNone;  // counted here
    return auth;
  }
  if (ctx.draining.load()) {
    *reason = RejectReason::kUnavailable;
    return Unavailable("server is draining; retry on another replica");
  }
  DF11_ASSIGN_OR_RETURN(GenerateRequest engine_request, TranslateGenerateRequest(request));
  auto sources = ctx.resources->Get(request.model());
  if (!sources.ok()) *reason = RejectReason::kUnknownModel;
  DF11_RETURN_IF_ERROR(sources.status());
  *reason = RejectReason::kInvalid;
  DF11_ASSIGN_OR_RETURN(engine_request.prompt_tokens, BuildPrompt(request, *sources));
  engine_request.deadline = deadline;
  out->prompt_tokens = static_cast<int64_t>(engine_request.prompt_tokens.size());
  out->sources = *sources;
  DF11_ASSIGN_OR_RETURN(out->id, ctx.engine->Submit(std::move(engine_request), std::move(sink), reason));
  return Status();
}

}  // namespace

StatusOr<Admitted> AdmitGenerate(ServiceContext& ctx, const pb::GenerateRequest& request,
                                 std::optional<std::string_view> authorization,
                                 std::optional<Clock::time_point> deadline, EventSink sink) {
  RejectReason reason = RejectReason::kInvalid;
  Admitted admitted;
  Status status = GuardExceptions(
      [&] { return AdmitChecked(ctx, request, authorization, deadline, sink, &reason, &admitted); });
  if (status.ok()) return admitted;
  if (reason != RejectReason::kUnknownModel && reason != RejectReason::kNone) {
    RecordRejected(ctx, request.model(), RejectReasonName(reason));
  }
  return status;
}

}  // namespace df11::server
