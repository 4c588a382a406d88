// The OpenAI-compatible routes (see openai_api.h).
#include "server/openai_api.h"

#include <atomic>
#include <ctime>
#include <random>

#include <nlohmann/json.hpp>

#include "server/admission.h"
#include "server/openai_response.h"
#include "server/request_log.h"

namespace df11::server {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

HttpResponse JsonResponse(int status, std::string body, Headers headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

HttpResponse ErrorResponse(const OpenAiError& e) {
  Headers headers;
  if (e.retry_after_seconds > 0) headers.emplace_back("Retry-After", std::to_string(e.retry_after_seconds));
  return JsonResponse(e.http_status, ErrorJson(e), std::move(headers));
}

OpenAiError RouteError(int status, std::string message, std::string code) {
  OpenAiError e;
  e.http_status = status;
  e.type = "invalid_request_error";
  e.code = std::move(code);
  e.message = std::move(message);
  return e;
}

// Answers at once and counts it.
void Reply(ServiceContext& ctx, const std::string& route, const std::shared_ptr<HttpExchange>& ex, HttpResponse r) {
  RecordHttp(ctx, route, r.status);
  ex->Respond(std::move(r));
}

// "chatcmpl-<16 hex digits>": unique per process run, not guessable from the engine's ids.
std::string NewResponseId(OpenAiEndpoint endpoint) {
  static std::atomic<uint64_t> next{std::random_device{}() * 0x9E3779B97F4A7C15ull};
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(next.fetch_add(0x9E3779B97F4A7C15ull)));
  return (endpoint == OpenAiEndpoint::kChat ? "chatcmpl-" : "cmpl-") + std::string(hex);
}

// The status a request that did not finish normally ends with.
Status EndStatus(const RequestEvent& event) {
  if (!event.status.ok()) return event.status;
  if (event.finish_reason == FinishReason::kDeadline) return Status(StatusCode::kDeadlineExceeded, "request deadline passed");
  if (event.finish_reason == FinishReason::kCancelled) return Status(StatusCode::kCancelled, "request cancelled");
  return Status(StatusCode::kInternal, "request ended without a finish reason");
}

// One generation over HTTP, shared by the engine's sink and the exchange's close callback.
struct HttpGeneration {
  ServiceContext* ctx = nullptr;
  std::shared_ptr<HttpExchange> exchange;
  std::string route;
  OpenAiResponseMeta meta;
  std::shared_ptr<const Tokenizer> tokenizer;  // keeps meta.tokenizer alive
  bool stream = false, include_usage = false;

  std::mutex mu;
  bool started = false;  // admitted: stream chunks go straight to the exchange
  std::string early;     // stream chunks that came before that
  RequestEvent merged;   // non-streaming: the output so far
  std::optional<RequestId> id;
  bool finished = false;  // the final event came
  int64_t streamed_tokens = 0;  // generated so far (the log line of a request cut short)
  int http_status = 200;
  RequestLine log;
};

// Engine thread: format the event and hand it over; never blocks.
void OnEvent(const std::shared_ptr<HttpGeneration>& g, RequestEvent&& event) {
  if (!event.finished && g->exchange->ClientGone()) g->exchange->Abort();  // -> OnClose cancels
  std::lock_guard<std::mutex> lock(g->mu);
  if (g->finished) return;
  const bool normal_end = !event.finished || OpenAiFinishReason(event.finish_reason) != nullptr;
  g->streamed_tokens += static_cast<int64_t>(event.token_ids.size());
  if (event.finished) {
    g->finished = true;
    g->log.finish_reason = event.finish_reason;
    g->log.usage = event.usage;
    g->log.timings = event.timings;
    const Status end = normal_end ? Status() : EndStatus(event);
    g->log.code = static_cast<grpc::StatusCode>(end.code());
    g->log.message = end.message();
  }
  if (!g->stream) {
    const bool finished = event.finished;
    MergeEvent(g->merged, std::move(event));
    if (!finished) return;
    HttpResponse r = normal_end ? JsonResponse(200, CompletionJson(g->meta, g->merged))
                                : ErrorResponse(ToOpenAiError(EndStatus(g->merged), g->meta.endpoint));
    g->http_status = r.status;
    g->exchange->Respond(std::move(r));
    return;
  }
  std::string out;
  if (normal_end) {
    if (!event.text.empty() || !event.logprobs.empty() || event.finished) out = EventChunk(g->meta, event);
    if (event.finished && g->include_usage) out += UsageChunk(g->meta, event.usage);
  } else {
    out = ErrorChunk(ToOpenAiError(EndStatus(event), g->meta.endpoint));
  }
  if (event.finished) out += kSseDone;
  if (!g->started) {
    g->early += out;
    return;
  }
  g->exchange->Write(out);
  if (event.finished) g->exchange->End();
}

// HTTP thread, once: the response was sent, or the client left / the server stopped first.
void OnClose(const std::shared_ptr<HttpGeneration>& g, bool complete) {
  std::optional<RequestId> cancel;
  RequestLine line;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    if (!g->finished) {
      cancel = g->id;
      g->finished = true;
      g->log.finish_reason = FinishReason::kCancelled;
      g->log.code = grpc::StatusCode::CANCELLED;
      g->log.message = "the HTTP client went away";
      g->log.usage.generated_tokens = g->streamed_tokens;
    }
    if (!complete) g->http_status = 499;  // nginx's "client closed request"
    line = g->log;
  }
  if (cancel) g->ctx->engine->Cancel(*cancel);
  LogRequest(line);
  RecordHttp(*g->ctx, g->route, g->http_status);
}

// A generation refused before it reached the engine: answered, counted and logged (as gRPC's).
void Refuse(ServiceContext& ctx, const std::string& route, const std::shared_ptr<HttpExchange>& ex, RequestLine line,
            const Status& status, OpenAiEndpoint endpoint) {
  line.code = static_cast<grpc::StatusCode>(status.code());
  line.message = status.message();
  LogRequest(line);
  Reply(ctx, route, ex, ErrorResponse(ToOpenAiError(status, endpoint)));
}

void Generate(ServiceContext& ctx, OpenAiEndpoint endpoint, const std::string& route, const HttpRequest& req,
              const std::shared_ptr<HttpExchange>& ex) {
  RequestLine refused;
  refused.peer = req.peer;
  auto parsed = ParseOpenAiRequest(endpoint, req.body);
  if (!parsed.ok()) {
    RecordRejected(ctx, "", "invalid");
    return Refuse(ctx, route, ex, refused, parsed.status(), endpoint);
  }
  OpenAiRequest& r = *parsed;
  if (auto id = req.Header("x-request-id")) r.generate.set_request_id(*id);
  auto g = std::make_shared<HttpGeneration>();
  g->ctx = &ctx;
  g->exchange = ex;
  g->route = route;
  g->stream = r.stream;
  g->include_usage = r.include_usage;
  g->meta = {endpoint, NewResponseId(endpoint), r.generate.model(), static_cast<int64_t>(std::time(nullptr)),
             r.generate.logprobs() || r.generate.top_logprobs() > 0, nullptr};
  if (g->meta.logprobs) g->tokenizer = ctx.engine->GetTokenizer(r.generate.model());
  g->meta.tokenizer = g->tokenizer.get();
  g->log.model = r.generate.model();
  g->log.client_request_id = r.generate.request_id().substr(0, kMaxRequestIdBytes);
  g->log.peer = req.peer;
  auto admitted = AdmitGenerate(ctx, r.generate, req.Header("authorization"), std::nullopt,
                                [g](RequestEvent&& event) { OnEvent(g, std::move(event)); });
  if (!admitted.ok()) return Refuse(ctx, route, ex, g->log, admitted.status(), endpoint);
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->id = admitted->id;
    g->log.id = admitted->id;
    if (g->log.usage.prompt_tokens == 0) g->log.usage.prompt_tokens = admitted->prompt_tokens;
    if (g->stream) {
      ex->StartStream("text/event-stream", {{"Cache-Control", "no-cache"}});
      ex->Write((endpoint == OpenAiEndpoint::kChat ? RoleChunk(g->meta) : std::string()) + g->early);
      g->early.clear();
      g->started = true;
      if (g->finished) ex->End();
    }
  }
  ex->OnClose([g](bool complete) { OnClose(g, complete); });
}

void ListModels(ServiceContext& ctx, const std::string& route, const HttpRequest& req,
                const std::shared_ptr<HttpExchange>& ex) {
  if (Status auth = ctx.keys->CheckBearer(req.Header("authorization"), /*admin=*/false); !auth.ok()) {
    return Reply(ctx, route, ex, ErrorResponse(ToOpenAiError(auth, OpenAiEndpoint::kChat)));
  }
  static const int64_t kStarted = static_cast<int64_t>(std::time(nullptr));
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const ModelInfo& m : ctx.engine->Models()) {
    if (m.state != ModelState::kReady) continue;
    data.push_back({{"id", m.name}, {"object", "model"}, {"created", kStarted}, {"owned_by", "df11-serve"},
                    {"max_model_len", m.max_positions}});
  }
  nlohmann::ordered_json body = {{"object", "list"}, {"data", data}};
  Reply(ctx, route, ex, JsonResponse(200, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
}

void Health(ServiceContext& ctx, const std::string& route, const std::shared_ptr<HttpExchange>& ex) {
  const bool draining = ctx.draining.load();
  const bool serving = ctx.startup_done.load() && !draining;
  const char* state = serving ? "serving" : draining ? "draining" : "starting";
  Reply(ctx, route, ex, JsonResponse(serving ? 200 : 503, std::string("{\"status\":\"") + state + "\"}"));
}

void Route(ServiceContext& ctx, const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex) {
  struct Entry {
    const char* path;
    const char* method;
  };
  static const Entry kRoutes[] = {{"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"},
                                  {"/v1/models", "GET"}, {"/health", "GET"}};
  for (const Entry& e : kRoutes) {
    if (req.path != e.path) continue;
    const std::string route = e.path;
    if (req.method != e.method) {
      OpenAiError err = RouteError(405, req.method + " is not allowed on " + route + "; use " + e.method, "method_not_allowed");
      HttpResponse r = ErrorResponse(err);
      r.headers.emplace_back("Allow", e.method);
      return Reply(ctx, route, ex, std::move(r));
    }
    if (route == "/v1/chat/completions") return Generate(ctx, OpenAiEndpoint::kChat, route, req, ex);
    if (route == "/v1/completions") return Generate(ctx, OpenAiEndpoint::kCompletion, route, req, ex);
    if (route == "/v1/models") return ListModels(ctx, route, req, ex);
    return Health(ctx, route, ex);
  }
  Reply(ctx, "other", ex, ErrorResponse(RouteError(404, "no route " + req.method + " " + req.path, "not_found")));
}

}  // namespace

StatusOr<std::unique_ptr<OpenAiApi>> OpenAiApi::Start(ServiceContext& ctx, const std::string& address,
                                                      const HttpLimits& limits, const HttpTls& tls) {
  std::unique_ptr<OpenAiApi> api(new OpenAiApi());
  DF11_ASSIGN_OR_RETURN(api->http_, HttpServer::Start(address, limits, tls,
                                                      [&ctx](const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex) {
                                                        Route(ctx, req, ex);
                                                      }));
  return api;
}

}  // namespace df11::server
