// Generation and Admin handlers (see generation_service.h).
#include "server/generation_service.h"

#include <future>

#include "server/generate_reactor.h"
#include "server/raw_message.h"
#include "server/request_log.h"

namespace df11::server {

// ---- Generation -------------------------------------------------------------------------------

template <typename Req, typename Resp>
grpc::ServerUnaryReactor* GenerationService::Unary(grpc::CallbackServerContext* call, const char* method,
                                                   const Raw* in, Raw* out,
                                                   const std::function<Status(const Req&, Resp*)>& handle) {
  Status status = GuardExceptions([&]() -> Status {
    DF11_RETURN_IF_ERROR(ctx_.keys->Check(call->client_metadata(), /*admin=*/false));
    Req request;
    DF11_RETURN_IF_ERROR(ParseRequest(call, method, in, &request));
    Resp response;
    DF11_RETURN_IF_ERROR(handle(request, &response));
    return SerializeResponse(response, out);
  });
  grpc::Status g = ToGrpc(status);
  RecordRpc(ctx_, method, g.error_code());
  auto* reactor = call->DefaultReactor();
  reactor->Finish(g);
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(grpc::CallbackServerContext* call,
                                                                        const Raw* request) {
  return StartGenerate(ctx_, call, request);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* call, const Raw* in, Raw* out) {
  std::function<Status(const pb::TokenizeRequest&, pb::TokenizeResponse*)> handle =
      [this](const pb::TokenizeRequest& request, pb::TokenizeResponse* response) -> Status {
    if (request.model().empty()) return InvalidArgument("model: required");
    DF11_ASSIGN_OR_RETURN(PromptSources sources, ctx_.resources->Get(request.model()));
    if (!sources.tokenizer) return FailedPrecondition("model '" + request.model() + "' has no tokenizer");
    std::vector<int32_t> ids;
    if (request.input_case() == pb::TokenizeRequest::kText) {
      DF11_RETURN_IF_ERROR(CheckUtf8(request.text(), "text"));
      bool special = request.has_add_special_tokens() ? request.add_special_tokens() : true;
      DF11_ASSIGN_OR_RETURN(ids, sources.tokenizer->Encode(request.text(), special));
    } else if (request.input_case() == pb::TokenizeRequest::kChat) {
      if (!sources.chat_template) return FailedPrecondition("model '" + request.model() + "' has no chat template");
      DF11_ASSIGN_OR_RETURN(std::string text, RenderChat(request.chat(), *sources.chat_template));
      DF11_ASSIGN_OR_RETURN(ids, sources.tokenizer->Encode(text, /*add_special_tokens=*/false));
    } else {
      return InvalidArgument("input: one of text or chat is required");
    }
    for (int32_t id : ids) response->add_ids(id);
    return Status();
  };
  return Unary(call, "Tokenize", in, out, handle);
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* call, const Raw* in, Raw* out) {
  std::function<Status(const pb::DetokenizeRequest&, pb::DetokenizeResponse*)> handle =
      [this](const pb::DetokenizeRequest& request, pb::DetokenizeResponse* response) -> Status {
    if (request.model().empty()) return InvalidArgument("model: required");
    DF11_ASSIGN_OR_RETURN(PromptSources sources, ctx_.resources->Get(request.model()));
    if (!sources.tokenizer) return FailedPrecondition("model '" + request.model() + "' has no tokenizer");
    const int64_t vocab = sources.tokenizer->vocab_size();
    for (int i = 0; i < request.ids_size(); ++i) {
      if (request.ids(i) < 0 || request.ids(i) >= vocab) {
        return InvalidArgument("ids[" + std::to_string(i) + "]: " + std::to_string(request.ids(i)) +
                               " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
      }
    }
    std::vector<int32_t> ids(request.ids().begin(), request.ids().end());
    bool skip = request.has_skip_special_tokens() ? request.skip_special_tokens() : true;
    response->set_text(sources.tokenizer->Decode(ids, skip));
    return Status();
  };
  return Unary(call, "Detokenize", in, out, handle);
}

grpc::ServerUnaryReactor* GenerationService::ListModels(grpc::CallbackServerContext* call, const Raw* in, Raw* out) {
  std::function<Status(const pb::ListModelsRequest&, pb::ListModelsResponse*)> handle =
      [this](const pb::ListModelsRequest&, pb::ListModelsResponse* response) -> Status {
    for (const auto& info : ctx_.engine->Models()) FillModelInfo(info, response->add_models());
    return Status();
  };
  return Unary(call, "ListModels", in, out, handle);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* call, const Raw* in, Raw* out) {
  std::function<Status(const pb::GetModelInfoRequest&, pb::ModelInfo*)> handle =
      [this](const pb::GetModelInfoRequest& request, pb::ModelInfo* response) -> Status {
    if (request.model().empty()) return InvalidArgument("model: required");
    for (const auto& info : ctx_.engine->Models()) {
      if (info.name == request.model()) {
        FillModelInfo(info, response);
        return Status();
      }
    }
    return NotFound("model '" + request.model() + "' is not loaded (see ListModels)");
  };
  return Unary(call, "GetModelInfo", in, out, handle);
}

grpc::ServerUnaryReactor* GenerationService::GetLoadReport(grpc::CallbackServerContext* call, const Raw* in, Raw* out) {
  std::function<Status(const pb::GetLoadReportRequest&, pb::LoadReport*)> handle =
      [this](const pb::GetLoadReportRequest&, pb::LoadReport* response) -> Status {
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
    return Status();
  };
  return Unary(call, "GetLoadReport", in, out, handle);
}

// ---- Admin ------------------------------------------------------------------------------------

namespace {

// The warm-up requests of a registered model (WarmupPrompt of each kWarmupPromptTokens length; the
// first generates warmup_tokens tokens, the others one); on failure the model is unloaded again.
Status WarmUp(ServiceContext& ctx, const ModelSpec& spec, int64_t warmup_tokens) {
  if (warmup_tokens <= 0) return Status();
  int64_t vocab = 0, max_positions = 0;
  for (const ModelInfo& m : ctx.engine->Models()) {
    if (m.name == spec.name) vocab = m.vocab_size, max_positions = m.max_positions;
  }
  Status warmed;
  for (size_t i = 0; i < kWarmupPromptTokens.size() && warmed.ok(); ++i) {
    GenerateRequest warm;
    warm.model = spec.name;
    warm.max_tokens = i == 0 ? warmup_tokens : 1;
    warm.prompt_tokens =
        WarmupPrompt(kWarmupPromptTokens[i], static_cast<int64_t>(i), warm.max_tokens, vocab, max_positions);
    warm.ignore_eos = true;
    warm.client_request_id = "warmup";
    warm.warmup = true;
    auto done = std::make_shared<std::promise<Status>>();
    auto id = ctx.engine->Submit(std::move(warm), [done](RequestEvent&& event) {
      if (event.finished) done->set_value(event.status);
    });
    warmed = id.ok() ? done->get_future().get() : id.status();
  }
  if (warmed.ok()) return Status();
  LogEvent("error", "model_warmup_failed", {{"model", spec.name}, {"error", warmed.ToString()}});
  // All or nothing: the model leaves no name, KV share or memory behind.
  Status unloaded = ctx.engine->UnloadModel(spec.name);
  ctx.resources->Forget(spec.name);
  if (!unloaded.ok()) LogEvent("error", "model_unload_failed", {{"model", spec.name}, {"error", unloaded.ToString()}});
  return Status(warmed.code(), "model '" + spec.name + "' failed its warm-up request and was unloaded: " + warmed.message());
}

// The load report line: what the model holds in memory and how long loading took.
void LogModelReady(ServiceContext& ctx, const std::string& name) {
  std::vector<std::pair<std::string, std::string>> fields = {{"model", name}};
  for (const ModelInfo& m : ctx.engine->Models()) {
    if (m.name != name) continue;
    fields.insert(fields.end(), {{"format", m.df11 ? "df11" : "bf16"},
                                 {"weight_bytes", std::to_string(m.weight_bytes)},
                                 {"bf16_weight_bytes", std::to_string(m.bf16_weight_bytes)},
                                 {"scratch_bytes", std::to_string(m.scratch_bytes)},
                                 {"shared_scratch_bytes", std::to_string(m.shared_scratch_bytes)},
                                 {"kv_bytes", std::to_string(m.kv_bytes)},
                                 {"load_seconds", std::to_string(m.load_seconds)},
                                 {"load_warnings", std::to_string(m.load_warnings.size())}});
    for (const std::string& w : m.load_warnings) LogEvent("warn", "model_load_warning", {{"model", name}, {"warning", w}});
  }
  LogEvent("info", "model_ready", fields);
}

}  // namespace

Status LoadAndWarm(ServiceContext& ctx, const std::vector<ModelSpec>& specs, int64_t warmup_tokens) {
  for (const ModelSpec& spec : specs) LogEvent("info", "model_loading", {{"model", spec.name}, {"path", spec.path}});
  Status loaded = ctx.engine->LoadModels(specs);
  if (!loaded.ok()) {
    for (const ModelSpec& spec : specs) {
      LogEvent("error", "model_load_failed", {{"model", spec.name}, {"error", loaded.ToString()}});
    }
    return loaded;
  }
  std::map<std::string, ModelTier> tiers;
  for (const ModelInfo& info : ctx.engine->Models()) tiers[info.name] = info.tier;
  for (const ModelSpec& spec : specs) {
    // A model off the device is warmed by its first promotion's request, not brought in now.
    if (tiers[spec.name] == ModelTier::kResident) DF11_RETURN_IF_ERROR(WarmUp(ctx, spec, warmup_tokens));
    if (ctx.set_model_serving) ctx.set_model_serving(spec.name, true);
    LogModelReady(ctx, spec.name);
  }
  return Status();
}

template <typename Req>
grpc::ServerUnaryReactor* AdminService::RunAsync(grpc::CallbackServerContext* call, const char* method, const Raw* in,
                                                 const std::function<Status(const Req&)>& validate,
                                                 const std::function<std::function<Status()>(const Req&)>& make_work) {
  auto* reactor = call->DefaultReactor();
  auto finish = [this, reactor, method](const Status& status) {
    grpc::Status g = ToGrpc(status);
    RecordRpc(ctx_, method, g.error_code());
    reactor->Finish(g);
  };
  Status checked = GuardExceptions([&]() -> Status {
    DF11_RETURN_IF_ERROR(ctx_.keys->Check(call->client_metadata(), /*admin=*/true));
    Req request;
    DF11_RETURN_IF_ERROR(ParseRequest(call, method, in, &request));
    DF11_RETURN_IF_ERROR(validate(request));
    if (ctx_.draining.load()) return Unavailable("server is draining");
    return queue_.TryPost([finish, work = make_work(request)](bool run) {
      finish(run ? GuardExceptions(work) : Unavailable("server shut down before the operation ran"));
    });
  });
  if (!checked.ok()) finish(checked);
  return reactor;
}

namespace {

// A LoadModelRequest as a ModelSpec (0 = the default for kv_share, weight and max_seqs).
ModelSpec SpecOf(const pb::LoadModelRequest& request) {
  ModelSpec spec;
  spec.name = request.name();
  spec.path = request.path();
  if (request.kv_share() != 0) spec.kv_share = request.kv_share();
  if (request.weight() != 0) spec.weight = request.weight();
  spec.max_seqs = request.max_seqs();
  spec.pinned = request.pinned();
  return spec;
}

}  // namespace

grpc::ServerUnaryReactor* AdminService::LoadModel(grpc::CallbackServerContext* call, const Raw* in, Raw* out) {
  // The same check as the config file's models (ValidateModelSpec), naming the request field.
  std::function<Status(const pb::LoadModelRequest&)> validate = [](const pb::LoadModelRequest& request) {
    return ValidateModelSpec(SpecOf(request));
  };
  std::function<std::function<Status()>(const pb::LoadModelRequest&)> make_work =
      [this, out](const pb::LoadModelRequest& request) -> std::function<Status()> {
    return [this, out, spec = SpecOf(request)]() -> Status {
      DF11_RETURN_IF_ERROR(LoadAndWarm(ctx_, {spec}, ctx_.warmup_tokens));
      pb::LoadModelResponse response;
      for (const auto& info : ctx_.engine->Models()) {
        if (info.name == spec.name) FillModelInfo(info, response.mutable_model());
      }
      return SerializeResponse(response, out);
    };
  };
  return RunAsync(call, "LoadModel", in, validate, make_work);
}

grpc::ServerUnaryReactor* AdminService::UnloadModel(grpc::CallbackServerContext* call, const Raw* in, Raw* out) {
  std::function<Status(const pb::UnloadModelRequest&)> validate = [this](const pb::UnloadModelRequest& request) {
    if (request.name().empty()) return InvalidArgument("name: required");
    for (const auto& info : ctx_.engine->Models()) {
      if (info.name == request.name()) return Status();
    }
    return NotFound("model '" + request.name() + "' is not loaded");
  };
  std::function<std::function<Status()>(const pb::UnloadModelRequest&)> make_work =
      [this, out](const pb::UnloadModelRequest& request) -> std::function<Status()> {
    return [this, out, name = request.name()]() -> Status {
      if (ctx_.set_model_serving) ctx_.set_model_serving(name, false);
      Status status = ctx_.engine->UnloadModel(name);
      ctx_.resources->Forget(name);
      if (status.ok()) LogEvent("info", "model_unloaded", {{"model", name}});
      DF11_RETURN_IF_ERROR(status);
      return SerializeResponse(pb::UnloadModelResponse(), out);
    };
  };
  return RunAsync(call, "UnloadModel", in, validate, make_work);
}

grpc::ServerUnaryReactor* AdminService::SetModelTier(grpc::CallbackServerContext* call, const Raw* in, Raw* out) {
  std::function<Status(const pb::SetModelTierRequest&)> validate = [this](const pb::SetModelTierRequest& request) {
    if (request.name().empty()) return InvalidArgument("name: required");
    if (!pb::ModelTier_IsValid(request.tier())) {
      return InvalidArgument("tier: unknown value " + std::to_string(static_cast<int>(request.tier())));
    }
    for (const auto& info : ctx_.engine->Models()) {
      if (info.name == request.name()) return Status();
    }
    return NotFound("model '" + request.name() + "' is not loaded");
  };
  std::function<std::function<Status()>(const pb::SetModelTierRequest&)> make_work =
      [this, out](const pb::SetModelTierRequest& request) -> std::function<Status()> {
    return [this, out, request]() -> Status {
      Engine& engine = *ctx_.engine;
      const std::string& name = request.name();
      // Unpin before a demotion, pin after a promotion.
      if (request.has_pinned() && !request.pinned()) DF11_RETURN_IF_ERROR(engine.SetPinned(name, false));
      switch (request.tier()) {
        case pb::MODEL_TIER_RESIDENT:
          DF11_RETURN_IF_ERROR(engine.Promote(name));
          break;
        case pb::MODEL_TIER_HOST:
          DF11_RETURN_IF_ERROR(engine.Demote(name, ModelTier::kHost));
          break;
        case pb::MODEL_TIER_DISK:
          DF11_RETURN_IF_ERROR(engine.Demote(name, ModelTier::kDisk));
          break;
        default:
          break;
      }
      if (request.has_pinned() && request.pinned()) DF11_RETURN_IF_ERROR(engine.SetPinned(name, true));
      LogEvent("info", "model_tier_set", {{"model", name}});
      pb::SetModelTierResponse response;
      for (const auto& info : engine.Models()) {
        if (info.name == name) FillModelInfo(info, response.mutable_model());
      }
      return SerializeResponse(response, out);
    };
  };
  return RunAsync(call, "SetModelTier", in, validate, make_work);
}

}  // namespace df11::server
