// gRPC services: df11.v1.Generation (Generate streams through generate_reactor.h; the unary calls
// answer inline, they only read engine snapshots or tokenize) and df11.v1.Admin (model loads run
// on a worker thread so no gRPC thread blocks for the load).
// Thread-safety: handlers run on gRPC's threads concurrently; state lives in ServiceContext.
#pragma once

#include <grpcpp/grpcpp.h>

#include <mutex>
#include <thread>
#include <vector>

#include "proto/df11.grpc.pb.h"
#include "server/service_context.h"

namespace df11::server {

class GenerationService final : public pb::Generation::CallbackService {
 public:
  explicit GenerationService(ServiceContext& ctx) : ctx_(ctx) {}

  grpc::ServerWriteReactor<pb::GenerateResponse>* Generate(grpc::CallbackServerContext* call,
                                                           const pb::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* call, const pb::TokenizeRequest* request,
                                     pb::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* call, const pb::DetokenizeRequest* request,
                                       pb::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* call, const pb::ListModelsRequest* request,
                                       pb::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* call, const pb::GetModelInfoRequest* request,
                                         pb::ModelInfo* response) override;
  grpc::ServerUnaryReactor* GetLoadReport(grpc::CallbackServerContext* call, const pb::GetLoadReportRequest* request,
                                          pb::LoadReport* response) override;

 private:
  // Finishes a unary call with `status` (auth checked first), recording the metric.
  grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* call, const char* method, const Status& status);
  Status Authenticate(grpc::CallbackServerContext* call);
  ServiceContext& ctx_;
};

class AdminService final : public pb::Admin::CallbackService {
 public:
  explicit AdminService(ServiceContext& ctx) : ctx_(ctx) {}
  ~AdminService() override;  // joins running load/unload workers

  grpc::ServerUnaryReactor* LoadModel(grpc::CallbackServerContext* call, const pb::LoadModelRequest* request,
                                      pb::LoadModelResponse* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* call, const pb::UnloadModelRequest* request,
                                        pb::UnloadModelResponse* response) override;

 private:
  // Runs `work` on a worker thread and finishes the call with its status.
  grpc::ServerUnaryReactor* RunAsync(grpc::CallbackServerContext* call, const char* method, std::function<Status()> work);
  ServiceContext& ctx_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
};

// Loads a model, runs the warm-up request (`warmup_tokens` tokens, 0 = none), then marks it
// SERVING through ctx.set_model_serving. Blocks the caller.
Status LoadAndWarm(ServiceContext& ctx, const ModelSpec& spec, int64_t warmup_tokens);

}  // namespace df11::server
