// Generate: one write in flight per stream, engine events queued by a non-blocking sink.
#include "server/generate_reactor.h"

#include <deque>
#include <mutex>

#include "server/admission.h"
#include "server/raw_message.h"
#include "server/request_log.h"

namespace df11::server {
namespace {

class GenerateReactor;

// Shared between the reactor (gRPC threads) and the engine's sink (engine thread).
struct StreamState {
  std::mutex mu;
  GenerateReactor* reactor = nullptr;  // valid while !finish_called (see Pump)
  std::deque<pb::GenerateResponse> queue;
  bool write_in_flight = false;
  bool finish_called = false;
  std::optional<grpc::Status> finish_status;  // set once: the status the call will end with
  RequestLine log;                            // completed by the final event
  bool final_event_seen = false;              // log.usage/timings come from the engine
  int64_t streamed_tokens = 0;                // token ids queued for the client so far
  Clock::time_point started = Clock::now();
};

class GenerateReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  GenerateReactor(ServiceContext& ctx, grpc::CallbackServerContext* call) : ctx_(ctx), call_(call) {
    state_ = std::make_shared<StreamState>();
    state_->reactor = this;
    state_->log.peer = call->peer();
  }

  void Start(const grpc::ByteBuffer* bytes) {
    pb::GenerateRequest request;
    Status parsed = GuardExceptions([&] { return ParseRequest(call_, "Generate", bytes, &request); });
    grpc::Status rejected = parsed.ok() ? Submit(request) : ToGrpc(parsed);
    if (!rejected.ok()) EndWith(state_, rejected);
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->write_in_flight = false;
      if (!ok) {
        state_->queue.clear();
        // The stream broke: the client went away, its deadline fired, or the server shut down.
        if (!state_->finish_status) state_->finish_status = CancelStatus();
      }
    }
    if (!ok) CancelEngineRequest();
    Pump(state_);
  }

  void OnCancel() override {
    CancelEngineRequest();
    EndWith(state_, CancelStatus());
  }

  void OnDone() override {
    RequestLine line;
    grpc::Status status;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->reactor = nullptr;
      line = state_->log;
      status = state_->finish_status.value_or(grpc::Status::OK);
      if (!state_->final_event_seen && state_->log.id != 0) {
        // Ended before the engine's final event (cancel, deadline, drain): log what was streamed.
        line.usage.generated_tokens = state_->streamed_tokens;
        line.timings.total_seconds = std::chrono::duration<double>(Clock::now() - state_->started).count();
        line.finish_reason = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? FinishReason::kDeadline
                                                                                       : FinishReason::kCancelled;
      }
    }
    line.code = status.error_code();
    line.message = status.error_message();
    LogRequest(line);
    RecordRpc(ctx_, "Generate", status.error_code());
    delete this;
  }

  // Engine thread: queue the event's message; the final event also fixes the call's status.
  static void OnEvent(const std::shared_ptr<StreamState>& state, RequestEvent&& event) {
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (event.finished && state->reactor != nullptr) {
        // The log line wants the engine's counts even when the call already ended (cancel).
        state->final_event_seen = true;
        state->log.finish_reason = event.finish_reason;
        state->log.usage = event.usage;
        state->log.timings = event.timings;
      }
      if (state->finish_called || state->finish_status) return;
      state->streamed_tokens += static_cast<int64_t>(event.token_ids.size());
      if (!event.finished || event.finish_reason == FinishReason::kStop || event.finish_reason == FinishReason::kLength ||
          event.finish_reason == FinishReason::kEos) {
        pb::GenerateResponse message;
        FillResponse(event, state->log.client_request_id.empty() ? std::to_string(event.id) : state->log.client_request_id,
                     &message);
        if (state->queue.empty()) {
          state->queue.push_back(std::move(message));
        } else {
          // A slow client: coalesce into the message still waiting, so memory stays bounded by
          // the request's output rather than by the number of engine steps.
          pb::GenerateResponse& waiting = state->queue.back();
          waiting.mutable_text()->append(message.text());
          message.clear_text();
          waiting.MergeFrom(message);
        }
      }
      if (event.finished) state->finish_status = FinalStatus(event);
    }
    Pump(state);
  }

 private:
  // Admits the request (admission.h, which counts a refusal under its typed RejectReason, never
  // by reading the message); a refusal comes back as the call's status, with its retry hint.
  grpc::Status Submit(const pb::GenerateRequest& request) {
    state_->log.model = request.model();
    state_->log.client_request_id = request.request_id().substr(0, kMaxRequestIdBytes);
    std::optional<std::string_view> authorization;
    if (auto it = call_->client_metadata().find("authorization"); it != call_->client_metadata().end()) {
      authorization = std::string_view(it->second.data(), it->second.size());
    }
    std::shared_ptr<StreamState> state = state_;
    auto admitted = AdmitGenerate(ctx_, request, authorization, EngineDeadline(*call_),
                                  [state](RequestEvent&& event) { OnEvent(state, std::move(event)); });
    if (!admitted.ok()) return Retryable(admitted.status());
    bool cancelled_meanwhile;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      request_id_ = admitted->id;
      state_->log.id = admitted->id;
      if (state_->log.usage.prompt_tokens == 0) state_->log.usage.prompt_tokens = admitted->prompt_tokens;
      cancelled_meanwhile = state_->finish_status.has_value();
    }
    if (cancelled_meanwhile) ctx_.engine->Cancel(admitted->id);
    return grpc::Status::OK;
  }

  // The status of a call that gRPC cancelled: its deadline passed, the server shut down (drain
  // grace expired), or the client cancelled.
  grpc::Status CancelStatus() const {
    if (ctx_.draining.load()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server shut down before the request finished");
    }
    if (call_->deadline() <= std::chrono::system_clock::now() + kDeadlineCancelTolerance) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the client's deadline passed");
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
  }

  grpc::Status Retryable(const Status& status) {
    int retry_ms = RetryAfterMs(status);
    if (retry_ms > 0) call_->AddTrailingMetadata("retry-after-ms", std::to_string(retry_ms));
    return ToGrpc(status);
  }

  void CancelEngineRequest() {
    std::optional<RequestId> id;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      id = request_id_;
    }
    if (id) ctx_.engine->Cancel(*id);
  }

  static void EndWith(const std::shared_ptr<StreamState>& state, grpc::Status status) {
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (!state->finish_status) state->finish_status = std::move(status);
    }
    Pump(state);
  }

  // Starts the next write, or finishes the call once the queue is empty and the status is known.
  // The action is chosen under the mutex; the reactor stays alive while a write is in flight or
  // until Finish is called, and only the thread that claimed the action performs it.
  static void Pump(const std::shared_ptr<StreamState>& state) {
    GenerateReactor* reactor = nullptr;
    bool finish = false;
    grpc::Status status;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (state->reactor == nullptr || state->finish_called || state->write_in_flight) return;
      reactor = state->reactor;
      if (!state->queue.empty()) {
        // A message that cannot be serialized is dropped (cannot happen for our own messages).
        (void)SerializeResponse(state->queue.front(), &reactor->current_);
        state->queue.pop_front();
        state->write_in_flight = true;
      } else if (state->finish_status) {
        state->finish_called = true;
        finish = true;
        status = *state->finish_status;
      } else {
        return;
      }
    }
    if (finish) {
      reactor->Finish(status);
    } else {
      reactor->StartWrite(&reactor->current_);
    }
  }

  ServiceContext& ctx_;
  grpc::CallbackServerContext* call_;
  std::shared_ptr<StreamState> state_;
  std::optional<RequestId> request_id_;  // guarded by state_->mu
  grpc::ByteBuffer current_;             // the serialized message being written
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* StartGenerate(ServiceContext& ctx, grpc::CallbackServerContext* call,
                                                          const grpc::ByteBuffer* request) {
  auto* reactor = new GenerateReactor(ctx, call);
  reactor->Start(request);
  return reactor;
}

}  // namespace df11::server
