// Wire <-> engine translation (see translate.h).
#include "server/translate.h"

#include <cmath>

#include "kernels/base/utf8.h"

namespace df11::server {
namespace {

Status Invalid(const std::string& field, const std::string& what) {
  return InvalidArgument(field + ": " + what);
}

template <typename T>
Status CheckRange(const std::string& field, T value, T lo, T hi, bool lo_open, const char* range) {
  bool ok = std::isfinite(static_cast<double>(value)) && (lo_open ? value > lo : value >= lo) && value <= hi;
  if (ok) return Status();
  return Invalid(field, std::string("must be in ") + range + ", got " + std::to_string(value));
}

Status TranslateSampling(const pb::SamplingParams& in, SamplingParams* out) {
  if (in.has_temperature()) {
    DF11_RETURN_IF_ERROR(CheckRange("sampling.temperature", in.temperature(), 0.0f, 100.0f, false, "[0, 100]"));
    out->temperature = in.temperature();
  }
  if (in.has_top_p()) {
    DF11_RETURN_IF_ERROR(CheckRange("sampling.top_p", in.top_p(), 0.0f, 1.0f, true, "(0, 1]"));
    out->top_p = in.top_p();
  }
  if (in.has_top_k()) {
    if (in.top_k() < 0) return Invalid("sampling.top_k", "must be >= 0, got " + std::to_string(in.top_k()));
    out->top_k = in.top_k();
  }
  if (in.has_min_p()) {
    DF11_RETURN_IF_ERROR(CheckRange("sampling.min_p", in.min_p(), 0.0f, 1.0f, false, "[0, 1]"));
    out->min_p = in.min_p();
  }
  if (in.has_repetition_penalty()) {
    DF11_RETURN_IF_ERROR(
        CheckRange("sampling.repetition_penalty", in.repetition_penalty(), 0.0f, 100.0f, true, "(0, 100]"));
    out->repetition_penalty = in.repetition_penalty();
  }
  if (in.has_presence_penalty()) {
    DF11_RETURN_IF_ERROR(CheckRange("sampling.presence_penalty", in.presence_penalty(), -2.0f, 2.0f, false, "[-2, 2]"));
    out->presence_penalty = in.presence_penalty();
  }
  if (in.has_frequency_penalty()) {
    DF11_RETURN_IF_ERROR(
        CheckRange("sampling.frequency_penalty", in.frequency_penalty(), -2.0f, 2.0f, false, "[-2, 2]"));
    out->frequency_penalty = in.frequency_penalty();
  }
  if (in.has_seed()) out->seed = in.seed();
  return Status();
}

Status TranslateStops(const pb::GenerateRequest& in, GenerateRequest* out) {
  if (in.stop_size() > kMaxStopStrings) {
    return Invalid("stop", "at most " + std::to_string(kMaxStopStrings) + " strings, got " + std::to_string(in.stop_size()));
  }
  for (int i = 0; i < in.stop_size(); ++i) {
    const std::string field = "stop[" + std::to_string(i) + "]";
    const std::string& s = in.stop(i);
    if (s.empty()) return Invalid(field, "must not be empty");
    if (s.size() > kMaxStopStringBytes) return Invalid(field, "longer than " + std::to_string(kMaxStopStringBytes) + " bytes");
    DF11_RETURN_IF_ERROR(CheckUtf8(s, field));
    out->stop_strings.push_back(s);
  }
  if (in.stop_token_ids_size() > kMaxStopTokenIds) {
    return Invalid("stop_token_ids", "at most " + std::to_string(kMaxStopTokenIds) + " ids");
  }
  for (int i = 0; i < in.stop_token_ids_size(); ++i) {
    if (in.stop_token_ids(i) < 0) return Invalid("stop_token_ids[" + std::to_string(i) + "]", "must be >= 0");
    out->stop_token_ids.push_back(in.stop_token_ids(i));
  }
  return Status();
}

}  // namespace

grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

Status CheckUtf8(std::string_view bytes, const std::string& field) {
  size_t bad = FindInvalidUtf8(bytes);
  if (bad == std::string_view::npos) return Status();
  return Invalid(field, "invalid UTF-8 at byte " + std::to_string(bad));
}

StatusOr<std::string> RenderChat(const pb::ChatInput& chat, const ChatTemplate& chat_template) {
  if (chat.messages_size() == 0) return Invalid("chat.messages", "at least one message is required");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (int i = 0; i < chat.messages_size(); ++i) {
    const auto& m = chat.messages(i);
    const std::string field = "chat.messages[" + std::to_string(i) + "]";
    if (m.role().empty()) return Invalid(field + ".role", "must not be empty");
    DF11_RETURN_IF_ERROR(CheckUtf8(m.role(), field + ".role"));
    DF11_RETURN_IF_ERROR(CheckUtf8(m.content(), field + ".content"));
    messages.push_back({{"role", m.role()}, {"content", m.content()}});
  }
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  if (!chat.template_vars_json().empty()) {
    vars = nlohmann::ordered_json::parse(chat.template_vars_json(), nullptr, /*allow_exceptions=*/false);
    if (!vars.is_object()) return Invalid("chat.template_vars_json", "must be a JSON object");
  }
  auto rendered = chat_template.Render(messages, !chat.continue_final_message(), vars);
  if (!rendered.ok()) return Status(rendered.status().code(), "chat template: " + rendered.status().message());
  return rendered;
}

StatusOr<std::vector<int32_t>> BuildPrompt(const pb::GenerateRequest& request, const PromptSources& sources) {
  switch (request.input_case()) {
    case pb::GenerateRequest::kTokens: {
      if (request.tokens().ids_size() == 0) return Invalid("tokens.ids", "at least one token id is required");
      for (int i = 0; i < request.tokens().ids_size(); ++i) {
        const int32_t id = request.tokens().ids(i);
        if (sources.vocab_size > 0 && (id < 0 || id >= sources.vocab_size)) {
          return Invalid("tokens.ids[" + std::to_string(i) + "]", std::to_string(id) + " is outside the vocabulary [0, " +
                                                                      std::to_string(sources.vocab_size) + ")");
        }
      }
      return std::vector<int32_t>(request.tokens().ids().begin(), request.tokens().ids().end());
    }
    case pb::GenerateRequest::kText: {
      if (request.text().empty()) return Invalid("text", "must not be empty");
      DF11_RETURN_IF_ERROR(CheckUtf8(request.text(), "text"));
      if (!sources.tokenizer) return FailedPrecondition("text: model '" + request.model() + "' has no tokenizer; send tokens");
      return sources.tokenizer->Encode(request.text(), /*add_special_tokens=*/true);
    }
    case pb::GenerateRequest::kChat: {
      if (!sources.tokenizer || !sources.chat_template) {
        return FailedPrecondition("chat: model '" + request.model() + "' has no tokenizer or chat template");
      }
      DF11_ASSIGN_OR_RETURN(std::string text, RenderChat(request.chat(), *sources.chat_template));
      return sources.tokenizer->Encode(text, /*add_special_tokens=*/false);
    }
    default:
      return Invalid("input", "one of text, chat or tokens is required");
  }
}

StatusOr<GenerateRequest> TranslateGenerateRequest(const pb::GenerateRequest& in) {
  GenerateRequest out;
  if (in.model().empty()) return Invalid("model", "required");
  out.model = in.model();
  DF11_RETURN_IF_ERROR(TranslateSampling(in.sampling(), &out.sampling));
  if (in.has_max_tokens()) {
    if (in.max_tokens() < 1 || in.max_tokens() > kMaxTokensLimit) {
      return Invalid("max_tokens", "must be in [1, " + std::to_string(kMaxTokensLimit) + "], got " + std::to_string(in.max_tokens()));
    }
    out.max_tokens = in.max_tokens();
  }
  DF11_RETURN_IF_ERROR(TranslateStops(in, &out));
  if (in.top_logprobs() < 0 || in.top_logprobs() > kMaxTopLogprobs) {
    return Invalid("top_logprobs", "must be in [0, " + std::to_string(kMaxTopLogprobs) + "], got " + std::to_string(in.top_logprobs()));
  }
  out.sampling.top_logprobs = in.top_logprobs();
  out.logprobs = in.logprobs() || in.top_logprobs() > 0;
  out.ignore_eos = in.ignore_eos();
  out.skip_special_tokens = in.has_skip_special_tokens() ? in.skip_special_tokens() : true;
  out.priority = in.priority();
  if (in.request_id().size() > kMaxRequestIdBytes) {
    return Invalid("request_id", "longer than " + std::to_string(kMaxRequestIdBytes) + " bytes");
  }
  out.client_request_id = in.request_id();
  return out;
}

void FillResponse(const RequestEvent& event, const std::string& request_id, pb::GenerateResponse* out) {
  out->set_request_id(request_id);
  out->set_text(event.text);
  for (int32_t id : event.token_ids) out->add_token_ids(id);
  for (const auto& lp : event.logprobs) {
    auto* o = out->add_logprobs();
    o->set_token(lp.token);
    o->set_logprob(lp.logprob);
    for (const auto& [token, logprob] : lp.top) {
      auto* t = o->add_top();
      t->set_token(token);
      t->set_logprob(logprob);
    }
  }
  if (!event.finished) return;
  switch (event.finish_reason) {
    case FinishReason::kStop: out->set_finish_reason(pb::FINISH_REASON_STOP); break;
    case FinishReason::kLength: out->set_finish_reason(pb::FINISH_REASON_LENGTH); break;
    case FinishReason::kEos: out->set_finish_reason(pb::FINISH_REASON_EOS); break;
    default: break;
  }
  out->mutable_usage()->set_prompt_tokens(event.usage.prompt_tokens);
  out->mutable_usage()->set_cached_prompt_tokens(event.usage.prefix_hit_tokens);
  out->mutable_usage()->set_completion_tokens(event.usage.generated_tokens);
  auto* t = out->mutable_timings();
  t->set_queue_seconds(event.timings.queue_seconds);
  t->set_first_token_seconds(event.timings.first_token_seconds);
  t->set_prefill_seconds(event.timings.prefill_seconds);
  t->set_decode_seconds(event.timings.decode_seconds);
  t->set_total_seconds(event.timings.total_seconds);
}

grpc::Status FinalStatus(const RequestEvent& event) {
  switch (event.finish_reason) {
    case FinishReason::kStop:
    case FinishReason::kLength:
    case FinishReason::kEos:
      return grpc::Status::OK;
    case FinishReason::kDeadline:
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "request deadline passed");
    case FinishReason::kCancelled:
      if (!event.status.ok()) return ToGrpc(event.status);
      return grpc::Status(grpc::StatusCode::CANCELLED, "request cancelled");
    default:
      if (!event.status.ok()) return ToGrpc(event.status);
      return grpc::Status(grpc::StatusCode::INTERNAL, "request ended without a finish reason");
  }
}

int RetryAfterMs(const Status& status) {
  if (status.code() == StatusCode::kResourceExhausted) return 500;
  if (status.code() == StatusCode::kUnavailable) return 1000;
  return 0;
}

void FillModelInfo(const ModelInfo& info, pb::ModelInfo* out) {
  out->set_name(info.name);
  out->set_path(info.path);
  out->set_architecture(info.architecture);
  switch (info.state) {
    case ModelState::kLoading: out->set_state(pb::MODEL_STATE_LOADING); break;
    case ModelState::kReady: out->set_state(pb::MODEL_STATE_READY); break;
    case ModelState::kUnloading: out->set_state(pb::MODEL_STATE_UNLOADING); break;
  }
  out->set_context_length(info.max_positions);
  out->set_vocab_size(info.vocab_size);
  out->set_df11(info.df11);
  out->set_weight_bytes(info.weight_bytes);
  out->set_bf16_weight_bytes(info.bf16_weight_bytes);
  out->set_compression_ratio(info.bf16_weight_bytes ? double(info.weight_bytes) / double(info.bf16_weight_bytes) : 0.0);
  out->set_scratch_bytes(info.scratch_bytes);
  out->set_kv_bytes(info.kv_bytes);
  out->set_kv_blocks_total(info.kv_blocks_total);
  out->set_load_seconds(info.load_seconds);
  switch (info.tier) {
    case ModelTier::kResident: out->set_tier(pb::MODEL_TIER_RESIDENT); break;
    case ModelTier::kHost: out->set_tier(pb::MODEL_TIER_HOST); break;
    case ModelTier::kDisk: out->set_tier(pb::MODEL_TIER_DISK); break;
  }
  out->set_pinned(info.pinned);
  out->set_moving(info.moving);
  out->set_tier_error(info.tier_error);
  for (const std::string& w : info.load_warnings) out->add_load_warnings(w);
}

}  // namespace df11::server
