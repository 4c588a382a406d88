// spdlog setup and the per-request / event lines (see request_log.h).
#include "server/request_log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>

#include "kernels/base/status.h"

namespace df11::server {
namespace {

std::atomic<bool> g_json{false};

spdlog::level::level_enum LevelOf(const std::string& level) {
  if (level == "warn") return spdlog::level::warn;
  if (level == "error") return spdlog::level::err;
  return spdlog::level::info;
}

void Emit(spdlog::level::level_enum level, nlohmann::ordered_json fields, const std::string& text) {
  if (!spdlog::should_log(level)) return;
  if (g_json.load()) {
    nlohmann::ordered_json line;
    auto now = std::chrono::system_clock::now();
    line["ts"] = std::chrono::duration<double>(now.time_since_epoch()).count();
    line["level"] = spdlog::level::to_string_view(level).data();
    for (auto& [k, v] : fields.items()) line[k] = v;
    // Replace invalid UTF-8 rather than throw: client ids and messages are untrusted.
    spdlog::log(level, "{}", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    spdlog::log(level, "{}", text);
  }
}

}  // namespace

std::string LogValue(std::string_view value) {
  auto safe = [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("._-:/@+,'()[]").find(static_cast<char>(c)) != std::string_view::npos;
  };
  if (!value.empty() && std::all_of(value.begin(), value.end(), [&](char c) { return safe(static_cast<unsigned char>(c)); })) {
    return std::string(value);
  }
  std::string out = "\"";
  for (char ch : value) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

void InitLogging(const std::string& format, const std::string& level) {
  auto logger = spdlog::stderr_logger_mt("df11d");
  g_json = format == "json";
  logger->set_pattern(g_json ? "%v" : "%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::flush_on(spdlog::level::info);
}

const char* GrpcCodeName(grpc::StatusCode code) {
  return StatusCodeName(static_cast<StatusCode>(code));  // our codes are numbered as gRPC's
}

void LogRequest(const RequestLine& r) {
  nlohmann::ordered_json f;
  f["event"] = "request";
  f["id"] = r.id;
  f["request_id"] = r.client_request_id;
  f["model"] = r.model;
  f["peer"] = r.peer;
  f["status"] = GrpcCodeName(r.code);
  if (!r.message.empty()) f["message"] = r.message;
  f["finish_reason"] = FinishReasonName(r.finish_reason);
  f["prompt_tokens"] = r.usage.prompt_tokens;
  f["cached_prompt_tokens"] = r.usage.prefix_hit_tokens;
  f["completion_tokens"] = r.usage.generated_tokens;
  f["queue_s"] = r.timings.queue_seconds;
  f["ttft_s"] = r.timings.first_token_seconds;
  f["total_s"] = r.timings.total_seconds;
  if (r.timings.waited_for_promotion) f["waited_for_promotion"] = true;
  std::string text = fmt::format(
      "request id={} request_id={} model={} peer={} status={} finish={} prompt_tokens={} cached={} "
      "completion_tokens={} queue_s={:.4f} ttft_s={:.4f} total_s={:.4f}{}{}",
      r.id, LogValue(r.client_request_id), LogValue(r.model), LogValue(r.peer), GrpcCodeName(r.code),
      FinishReasonName(r.finish_reason), r.usage.prompt_tokens, r.usage.prefix_hit_tokens, r.usage.generated_tokens,
      r.timings.queue_seconds, r.timings.first_token_seconds, r.timings.total_seconds,
      r.timings.waited_for_promotion ? " waited_for_promotion=true" : "",
      r.message.empty() ? "" : " message=" + LogValue(r.message));
  Emit(r.code == grpc::StatusCode::OK || r.code == grpc::StatusCode::CANCELLED ? spdlog::level::info : spdlog::level::warn,
       std::move(f), text);
}

void LogEvent(const std::string& level, const std::string& event,
              const std::vector<std::pair<std::string, std::string>>& fields) {
  nlohmann::ordered_json f;
  f["event"] = event;
  std::string text = event;
  for (const auto& [k, v] : fields) {
    f[k] = v;
    text += " " + k + "=" + LogValue(v);
  }
  Emit(LevelOf(level), std::move(f), text);
}

}  // namespace df11::server
