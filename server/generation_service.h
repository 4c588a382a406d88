// gRPC services: df11.v1.Generation (Generate streams through generate_reactor.h; the unary calls
// answer inline, they only read engine snapshots or tokenize) and df11.v1.Admin (model loads run
// on one worker thread with a bounded queue, so no gRPC thread blocks for a load and a flood of
// Admin calls costs neither threads nor unbounded memory).
// Thread-safety: handlers run on gRPC's threads concurrently; state lives in ServiceContext.
#pragma once

#include <grpcpp/grpcpp.h>


#include "proto/df11.grpc.pb.h"
#include "server/service_context.h"
#include "server/work_queue.h"

namespace df11::server {

// Every method is registered raw (grpc::ByteBuffer in and out, see raw_message.h) so that we
// parse requests ourselves and answer bad bytes with INVALID_ARGUMENT.
using RawGenerationBase = pb::Generation::WithRawCallbackMethod_Generate<
    pb::Generation::WithRawCallbackMethod_Tokenize<pb::Generation::WithRawCallbackMethod_Detokenize<
        pb::Generation::WithRawCallbackMethod_ListModels<pb::Generation::WithRawCallbackMethod_GetModelInfo<
            pb::Generation::WithRawCallbackMethod_GetLoadReport<pb::Generation::Service>>>>>>;
using RawAdminBase =
    pb::Admin::WithRawCallbackMethod_LoadModel<pb::Admin::WithRawCallbackMethod_UnloadModel<
        pb::Admin::WithRawCallbackMethod_SetModelTier<pb::Admin::Service>>>;

class GenerationService final : public RawGenerationBase {
 public:
  explicit GenerationService(ServiceContext& ctx) : ctx_(ctx) {}
  using Raw = grpc::ByteBuffer;

  grpc::ServerWriteReactor<Raw>* Generate(grpc::CallbackServerContext* call, const Raw* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* call, const Raw* request, Raw* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* call, const Raw* request, Raw* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* call, const Raw* request, Raw* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* call, const Raw* request, Raw* response) override;
  grpc::ServerUnaryReactor* GetLoadReport(grpc::CallbackServerContext* call, const Raw* request, Raw* response) override;

 private:
  // Authenticates, parses `in` as Req, runs `handle` (exceptions become statuses), serializes
  // the response into `out`, and finishes the call recording the metric.
  template <typename Req, typename Resp>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* call, const char* method, const Raw* in, Raw* out,
                                  const std::function<Status(const Req&, Resp*)>& handle);
  ServiceContext& ctx_;
};

// Admin operations that may wait behind the running one; more are RESOURCE_EXHAUSTED.
inline constexpr size_t kMaxQueuedAdminOps = 16;

class AdminService final : public RawAdminBase {
 public:
  explicit AdminService(ServiceContext& ctx) : ctx_(ctx), queue_(kMaxQueuedAdminOps) {}
  ~AdminService() override = default;  // queue_ finishes the running operation, cancels the queued
  using Raw = grpc::ByteBuffer;

  grpc::ServerUnaryReactor* LoadModel(grpc::CallbackServerContext* call, const Raw* request, Raw* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* call, const Raw* request, Raw* response) override;
  grpc::ServerUnaryReactor* SetModelTier(grpc::CallbackServerContext* call, const Raw* request, Raw* response) override;

 private:
  // Checks the admin key, parses the request and runs `validate` (cheap, on this thread), then
  // runs `work` on the worker and finishes the call with its status. A call refused by the queue,
  // or whose work throws, finishes with an error status; none is left unanswered.
  template <typename Req>
  grpc::ServerUnaryReactor* RunAsync(grpc::CallbackServerContext* call, const char* method, const Raw* in,
                                     const std::function<Status(const Req&)>& validate,
                                     const std::function<std::function<Status()>(const Req&)>& make_work);
  ServiceContext& ctx_;
  WorkQueue queue_;  // last: destroyed first, while ctx_ is still valid
};

// Loads models as one (Engine::LoadModels: all weights first, then the KV budget), runs each
// one's warm-up requests (kWarmupPromptTokens; the first generates `warmup_tokens` tokens, 0 =
// none), then marks it SERVING through ctx.set_model_serving. Blocks the caller. All or nothing
// per model: a model whose load or warm-up fails is unloaded again, so nothing of it remains
// (name, KV share, memory).
Status LoadAndWarm(ServiceContext& ctx, const std::vector<ModelSpec>& specs, int64_t warmup_tokens);

}  // namespace df11::server
