// Server assembly and drain (see server.h).
#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "server/request_log.h"

namespace df11::server {
namespace {

StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(std::string(flag) + ": cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  if (s.str().find("-----BEGIN") == std::string::npos) {
    return InvalidArgument(std::string(flag) + ": " + path + " is not a PEM file");
  }
  return s.str();
}

StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const ServerConfig& c) {
  if (c.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      c.tls_require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
      : c.tls_client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  DF11_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(c.tls_cert, "--tls-cert"));
  DF11_ASSIGN_OR_RETURN(pair.private_key, ReadPem(c.tls_key, "--tls-key"));
  options.pem_key_cert_pairs.push_back(pair);
  if (!c.tls_client_ca.empty()) {
    DF11_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(c.tls_client_ca, "--tls-client-ca"));
  }
  return grpc::SslServerCredentials(options);
}

void SetTransportOptions(const ServerConfig& c, grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(static_cast<int>(c.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(c.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(c.keepalive_time_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(c.keepalive_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  if (c.max_connection_idle_ms > 0) builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, static_cast<int>(c.max_connection_idle_ms));
  if (c.max_connection_age_ms > 0) builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, static_cast<int>(c.max_connection_age_ms));
  if (c.max_connection_age_grace_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, static_cast<int>(c.max_connection_age_grace_ms));
  }
}

// The OpenAI-compatible API on --http-address, with the gRPC listener's certificate.
StatusOr<std::unique_ptr<OpenAiApi>> StartHttpApi(const ServerConfig& c, ServiceContext& ctx) {
  HttpTls tls;
  if (!c.tls_cert.empty()) {
    DF11_ASSIGN_OR_RETURN(tls.cert, ReadPem(c.tls_cert, "--tls-cert"));
    DF11_ASSIGN_OR_RETURN(tls.key, ReadPem(c.tls_key, "--tls-key"));
  }
  auto api = OpenAiApi::Start(ctx, c.http_address, HttpListenerLimits(c), tls);
  if (!api.ok()) return Status(api.status().code(), "--http-address: " + api.status().message());
  LogEvent("info", "http_listening", {{"address", c.http_address}, {"port", std::to_string((*api)->port())},
                                      {"tls", c.tls_cert.empty() ? "off" : "on"}});
  return api;
}

}  // namespace

HttpLimits HttpListenerLimits(const ServerConfig& config) {
  HttpLimits limits;
  limits.idle_timeout_seconds = config.http_idle_timeout_seconds;
  limits.max_connections_per_client = static_cast<int>(config.http_max_connections_per_client);
  limits.max_body_bytes = config.max_message_bytes;
  return limits;
}

StatusOr<std::unique_ptr<Server>> Server::Start(const ServerConfig& config, Engine* engine, Metrics* metrics) {
  std::unique_ptr<Server> s(new Server());
  DF11_ASSIGN_OR_RETURN(s->keys_, ApiKeys::Load(config.api_keys, config.api_keys_file, config.admin_api_keys,
                                                config.admin_api_keys_file));
  s->resources_ = std::make_unique<ModelResources>(engine);
  s->ctx_.engine = engine;
  s->ctx_.keys = &s->keys_;
  s->ctx_.metrics = metrics;
  s->ctx_.resources = s->resources_.get();
  s->ctx_.warmup_tokens = config.warmup_tokens;
  Server* raw = s.get();
  s->ctx_.set_model_serving = [raw](const std::string& model, bool serving) { raw->SetServing(model, serving); };
  s->generation_ = std::make_unique<GenerationService>(s->ctx_);
  s->admin_ = std::make_unique<AdminService>(s->ctx_);

  DF11_ASSIGN_OR_RETURN(auto credentials, Credentials(config));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.grpc_address, credentials, &s->port_);
  SetTransportOptions(config, builder);
  builder.RegisterService(s->generation_.get());
  builder.RegisterService(s->admin_.get());
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0) return Unavailable("cannot listen on " + config.grpc_address);
  s->SetServing("", false);
  LogEvent("info", "listening", {{"address", config.grpc_address}, {"port", std::to_string(s->port_)},
                                 {"tls", config.tls_cert.empty() ? "off" : config.tls_require_client_cert ? "mtls" : "on"},
                                 {"api_keys", s->keys_.enabled() ? "on" : "off"}});
  if (!config.http_address.empty()) {
    DF11_ASSIGN_OR_RETURN(s->http_api_, StartHttpApi(config, s->ctx_));
  }
  return s;
}

Server::~Server() {
  if (http_api_) http_api_->Stop();
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

void Server::SetServing(const std::string& service, bool serving) {
  std::lock_guard<std::mutex> lock(health_mu_);
  if (shut_down_ || !server_) return;
  if (ctx_.draining.load()) serving = false;
  server_->GetHealthCheckService()->SetServingStatus(service, serving);
}

void Server::SetStartupDone() {
  ctx_.startup_done = true;
  SetServing("", true);
}

void Server::Drain(std::chrono::duration<double> grace) {
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    ctx_.draining = true;
    server_->GetHealthCheckService()->SetServingStatus(false);  // every service
  }
  ctx_.engine->Drain();
  LogEvent("info", "draining", {{"in_flight", std::to_string(ctx_.engine->InFlight())},
                                {"grace_seconds", std::to_string(grace.count())}});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(grace);
  while (ctx_.engine->InFlight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int64_t left = ctx_.engine->InFlight();
  if (left > 0) LogEvent("warn", "drain_grace_expired", {{"cancelled", std::to_string(left)}});
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    shut_down_ = true;
  }
  // HTTP streams whose requests ended have their last bytes queued; the rest are cut.
  if (http_api_) http_api_->Stop();
  // Let the last stream messages flush, then cancel whatever is still open.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(left > 0 ? 0 : 2));
  server_->Wait();
  LogEvent("info", "stopped");
}

}  // namespace df11::server
