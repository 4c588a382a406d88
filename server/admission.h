// Admission of one generation request, shared by every front end (gRPC Generate in
// generate_reactor.cc, the OpenAI HTTP API in openai_api.cc) so that they cannot drift:
//   API key -> draining -> TranslateGenerateRequest -> model's prompt sources -> BuildPrompt ->
//   Engine::Submit.
// Refusals are counted in df11_requests_rejected_total, labelled by the typed reason the refusing
// step gives (RejectReason from Engine::Submit; "unauthenticated" for a bad key), never by the
// message text; an unknown model is not counted. They are returned with the proto field named in
// the message (e.g. "sampling.top_p: must be ...").
// Thread-safety: safe from any thread (see ServiceContext).
#pragma once

#include <optional>
#include <string_view>

#include "server/service_context.h"

namespace df11::server {

struct Admitted {
  RequestId id = 0;
  int64_t prompt_tokens = 0;
  PromptSources sources;  // the model's tokenizer and template, e.g. to name tokens in logprobs
};

// `authorization`: the client's "Bearer <key>" credential, if it sent one. On success `sink`
// receives the request's events (engine thread); on error it is never called. Errors:
// UNAUTHENTICATED, UNAVAILABLE (draining), INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION,
// RESOURCE_EXHAUSTED (queue full); RetryAfterMs() gives the retry hint.
StatusOr<Admitted> AdmitGenerate(ServiceContext& ctx, const pb::GenerateRequest& request,
                                 std::optional<std::string_view> authorization,
                                 std::optional<Clock::time_point> deadline, EventSink sink);

}  // namespace df11::server
