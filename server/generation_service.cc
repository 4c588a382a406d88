// Generation and Admin handlers (see generation_service.h).
#include "server/generation_service.h"

#include <future>

#include "server/generate_reactor.h"
#include "server/request_log.h"

namespace df11::server {

// ---- Generation -------------------------------------------------------------------------------

Status GenerationService::Authenticate(grpc::CallbackServerContext* call) {
  return ctx_.keys->Check(call->client_metadata(), /*admin=*/false);
}

grpc::ServerUnaryReactor* GenerationService::Reply(grpc::CallbackServerContext* call, const char* method,
                                                   const Status& status) {
  grpc::Status g = ToGrpc(status);
  RecordRpc(ctx_, method, g.error_code());
  auto* reactor = call->DefaultReactor();
  reactor->Finish(g);
  return reactor;
}

grpc::ServerWriteReactor<pb::GenerateResponse>* GenerationService::Generate(grpc::CallbackServerContext* call,
                                                                            const pb::GenerateRequest* request) {
  return StartGenerate(ctx_, call, request);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* call,
                                                      const pb::TokenizeRequest* request,
                                                      pb::TokenizeResponse* response) {
  auto run = [&]() -> Status {
    DF11_RETURN_IF_ERROR(Authenticate(call));
    if (request->model().empty()) return InvalidArgument("model: required");
    DF11_ASSIGN_OR_RETURN(PromptSources sources, ctx_.resources->Get(request->model()));
    if (!sources.tokenizer) return FailedPrecondition("model '" + request->model() + "' has no tokenizer");
    std::vector<int32_t> ids;
    if (request->input_case() == pb::TokenizeRequest::kText) {
      DF11_RETURN_IF_ERROR(CheckUtf8(request->text(), "text"));
      bool special = request->has_add_special_tokens() ? request->add_special_tokens() : true;
      DF11_ASSIGN_OR_RETURN(ids, sources.tokenizer->Encode(request->text(), special));
    } else if (request->input_case() == pb::TokenizeRequest::kChat) {
      if (!sources.chat_template) return FailedPrecondition("model '" + request->model() + "' has no chat template");
      DF11_ASSIGN_OR_RETURN(std::string text, RenderChat(request->chat(), *sources.chat_template));
      DF11_ASSIGN_OR_RETURN(ids, sources.tokenizer->Encode(text, /*add_special_tokens=*/false));
    } else {
      return InvalidArgument("input: one of text or chat is required");
    }
    for (int32_t id : ids) response->add_ids(id);
    return Status();
  };
  return Reply(call, "Tokenize", run());
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* call,
                                                        const pb::DetokenizeRequest* request,
                                                        pb::DetokenizeResponse* response) {
  auto run = [&]() -> Status {
    DF11_RETURN_IF_ERROR(Authenticate(call));
    if (request->model().empty()) return InvalidArgument("model: required");
    DF11_ASSIGN_OR_RETURN(PromptSources sources, ctx_.resources->Get(request->model()));
    if (!sources.tokenizer) return FailedPrecondition("model '" + request->model() + "' has no tokenizer");
    const int64_t vocab = sources.tokenizer->vocab_size();
    for (int i = 0; i < request->ids_size(); ++i) {
      if (request->ids(i) < 0 || request->ids(i) >= vocab) {
        return InvalidArgument("ids[" + std::to_string(i) + "]: " + std::to_string(request->ids(i)) +
                               " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
      }
    }
    std::vector<int32_t> ids(request->ids().begin(), request->ids().end());
    bool skip = request->has_skip_special_tokens() ? request->skip_special_tokens() : true;
    response->set_text(sources.tokenizer->Decode(ids, skip));
    return Status();
  };
  return Reply(call, "Detokenize", run());
}

grpc::ServerUnaryReactor* GenerationService::ListModels(grpc::CallbackServerContext* call,
                                                        const pb::ListModelsRequest*,
                                                        pb::ListModelsResponse* response) {
  Status status = Authenticate(call);
  if (status.ok()) {
    for (const auto& info : ctx_.engine->Models()) FillModelInfo(info, response->add_models());
  }
  return Reply(call, "ListModels", status);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* call,
                                                          const pb::GetModelInfoRequest* request,
                                                          pb::ModelInfo* response) {
  auto run = [&]() -> Status {
    DF11_RETURN_IF_ERROR(Authenticate(call));
    if (request->model().empty()) return InvalidArgument("model: required");
    for (const auto& info : ctx_.engine->Models()) {
      if (info.name == request->model()) {
        FillModelInfo(info, response);
        return Status();
      }
    }
    return NotFound("model '" + request->model() + "' is not loaded (see ListModels)");
  };
  return Reply(call, "GetModelInfo", run());
}

grpc::ServerUnaryReactor* GenerationService::GetLoadReport(grpc::CallbackServerContext* call,
                                                           const pb::GetLoadReportRequest*,
                                                           pb::LoadReport* response) {
  Status status = Authenticate(call);
  if (status.ok()) {
    for (const auto& m : ctx_.engine->Stats().models) {
      auto* o = response->add_models();
      o->set_name(m.name);
      o->set_running(m.running);
      o->set_waiting(m.waiting);
      o->set_kv_blocks_used(m.kv_blocks_used);
      o->set_kv_blocks_total(m.kv_blocks_total);
      o->set_kv_usage(m.kv_blocks_total > 0 ? double(m.kv_blocks_used) / double(m.kv_blocks_total) : 0.0);
    }
    response->set_in_flight(ctx_.engine->InFlight());
    response->set_draining(ctx_.draining.load());
  }
  return Reply(call, "GetLoadReport", status);
}

// ---- Admin ------------------------------------------------------------------------------------

Status LoadAndWarm(ServiceContext& ctx, const ModelSpec& spec, int64_t warmup_tokens) {
  LogEvent("info", "model_loading", {{"model", spec.name}, {"path", spec.path}});
  Status loaded = ctx.engine->LoadModel(spec);
  if (!loaded.ok()) {
    LogEvent("error", "model_load_failed", {{"model", spec.name}, {"error", loaded.ToString()}});
    return loaded;
  }
  if (warmup_tokens > 0) {
    GenerateRequest warm;
    warm.model = spec.name;
    warm.prompt_tokens = {0};
    warm.max_tokens = warmup_tokens;
    warm.ignore_eos = true;
    warm.client_request_id = "warmup";
    auto done = std::make_shared<std::promise<Status>>();
    auto id = ctx.engine->Submit(std::move(warm), [done](RequestEvent&& event) {
      if (event.finished) done->set_value(event.status);
    });
    Status warmed = id.ok() ? done->get_future().get() : id.status();
    if (!warmed.ok()) {
      LogEvent("error", "model_warmup_failed", {{"model", spec.name}, {"error", warmed.ToString()}});
      return warmed;
    }
  }
  if (ctx.set_model_serving) ctx.set_model_serving(spec.name, true);
  // The load report: what the model holds in memory and how long loading took.
  std::vector<std::pair<std::string, std::string>> fields = {{"model", spec.name}};
  for (const ModelInfo& m : ctx.engine->Models()) {
    if (m.name != spec.name) continue;
    fields.insert(fields.end(), {{"format", m.df11 ? "df11" : "bf16"},
                                 {"weight_bytes", std::to_string(m.weight_bytes)},
                                 {"bf16_weight_bytes", std::to_string(m.bf16_weight_bytes)},
                                 {"scratch_bytes", std::to_string(m.scratch_bytes)},
                                 {"kv_bytes", std::to_string(m.kv_bytes)},
                                 {"load_seconds", std::to_string(m.load_seconds)}});
  }
  LogEvent("info", "model_ready", fields);
  return Status();
}

AdminService::~AdminService() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
  }
  for (auto& t : workers) t.join();
}

grpc::ServerUnaryReactor* AdminService::RunAsync(grpc::CallbackServerContext* call, const char* method,
                                                 std::function<Status()> work) {
  auto* reactor = call->DefaultReactor();
  Status auth = ctx_.keys->Check(call->client_metadata(), /*admin=*/true);
  if (!auth.ok()) {
    RecordRpc(ctx_, method, grpc::StatusCode::UNAUTHENTICATED);
    reactor->Finish(ToGrpc(auth));
    return reactor;
  }
  std::lock_guard<std::mutex> lock(mu_);
  workers_.emplace_back([this, reactor, method, work = std::move(work)] {
    grpc::Status status = ToGrpc(work());
    RecordRpc(ctx_, method, status.error_code());
    reactor->Finish(status);
  });
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::LoadModel(grpc::CallbackServerContext* call,
                                                  const pb::LoadModelRequest* request,
                                                  pb::LoadModelResponse* response) {
  return RunAsync(call, "LoadModel", [this, request, response]() -> Status {
    if (request->name().empty()) return InvalidArgument("name: required");
    if (request->path().empty()) return InvalidArgument("path: required");
    if (request->kv_share() < 0) return InvalidArgument("kv_share: must be > 0");
    if (request->weight() < 0) return InvalidArgument("weight: must be > 0");
    if (request->max_seqs() < 0) return InvalidArgument("max_seqs: must be >= 0");
    if (ctx_.draining.load()) return Unavailable("server is draining");
    ModelSpec spec;
    spec.name = request->name();
    spec.path = request->path();
    if (request->kv_share() > 0) spec.kv_share = request->kv_share();
    if (request->weight() > 0) spec.weight = request->weight();
    spec.max_seqs = request->max_seqs();
    DF11_RETURN_IF_ERROR(LoadAndWarm(ctx_, spec, ctx_.warmup_tokens));
    for (const auto& info : ctx_.engine->Models()) {
      if (info.name == spec.name) FillModelInfo(info, response->mutable_model());
    }
    return Status();
  });
}

grpc::ServerUnaryReactor* AdminService::UnloadModel(grpc::CallbackServerContext* call,
                                                    const pb::UnloadModelRequest* request,
                                                    pb::UnloadModelResponse*) {
  return RunAsync(call, "UnloadModel", [this, request]() -> Status {
    if (request->name().empty()) return InvalidArgument("name: required");
    bool known = false;
    for (const auto& info : ctx_.engine->Models()) known |= info.name == request->name();
    if (!known) return NotFound("model '" + request->name() + "' is not loaded");
    if (ctx_.set_model_serving) ctx_.set_model_serving(request->name(), false);
    Status status = ctx_.engine->UnloadModel(request->name());
    ctx_.resources->Forget(request->name());
    if (status.ok()) LogEvent("info", "model_unloaded", {{"model", request->name()}});
    return status;
  });
}

}  // namespace df11::server
