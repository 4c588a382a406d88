// df11 client plumbing (cmd_client.h) and the small commands: `df11 models`, `df11 health`.
#include "cli/cmd_client.h"

#include <grpcpp/generic/generic_stub.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "proto/df11.grpc.pb.h"

namespace df11::cli {
namespace {

namespace pb = ::df11::v1;

std::string ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) throw CommandFailed(2, std::string(flag) + ": cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const char* StateName(pb::ModelState s) {
  switch (s) {
    case pb::MODEL_STATE_LOADING: return "loading";
    case pb::MODEL_STATE_READY: return "ready";
    case pb::MODEL_STATE_UNLOADING: return "unloading";
    default: return "?";
  }
}

void RunModels(const ClientOptions& options, bool as_json) {
  auto stub = pb::Generation::NewStub(MakeChannel(options));
  grpc::ClientContext ctx;
  PrepareContext(ctx, options);
  pb::ListModelsResponse list;
  CheckRpc(stub->ListModels(&ctx, pb::ListModelsRequest(), &list), "ListModels");
  if (as_json) {  // built with nlohmann::json: names and warnings may hold quotes
    nlohmann::json out = nlohmann::json::array();
    for (const auto& m : list.models()) {
      out.push_back({{"name", m.name()},
                     {"architecture", m.architecture()},
                     {"state", StateName(m.state())},
                     {"context_length", m.context_length()},
                     {"df11", m.df11()},
                     {"weight_bytes", m.weight_bytes()},
                     {"bf16_weight_bytes", m.bf16_weight_bytes()},
                     {"kv_bytes", m.kv_bytes()},
                     {"load_warnings", std::vector<std::string>(m.load_warnings().begin(), m.load_warnings().end())}});
    }
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("%-24s %-28s %-9s %8s %5s %12s %7s %12s\n", "NAME", "ARCHITECTURE", "STATE", "CONTEXT", "DF11",
              "WEIGHTS_MB", "RATIO", "KV_MB");
  for (const auto& m : list.models()) {
    std::printf("%-24s %-28s %-9s %8lld %5s %12.1f %7.3f %12.1f\n", m.name().c_str(), m.architecture().c_str(),
                StateName(m.state()), static_cast<long long>(m.context_length()), m.df11() ? "yes" : "no",
                m.weight_bytes() / 1e6, m.compression_ratio(), m.kv_bytes() / 1e6);
    for (const std::string& w : m.load_warnings()) std::printf("  load warning: %s\n", w.c_str());
  }
}

// grpc.health.v1 Check by hand-encoded messages (no generated health stubs needed).
int RunHealth(const ClientOptions& options, const std::string& service) {
  grpc::GenericStub stub(MakeChannel(options));
  grpc::ClientContext ctx;
  PrepareContext(ctx, options);
  if (options.timeout_seconds <= 0) ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::string req;
  if (!service.empty()) {
    if (service.size() > 127) throw CommandFailed(2, "service name too long");
    req = std::string("\x0a", 1) + static_cast<char>(service.size()) + service;
  }
  grpc::Slice slice(req);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](const grpc::Status& s) { done.set_value(s); });
  CheckRpc(done.get_future().get(), "Health/Check");
  std::vector<grpc::Slice> slices;
  response.Dump(&slices);
  std::string bytes;
  for (auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  int status = bytes.size() >= 2 && bytes[0] == 0x08 ? bytes[1] : 0;
  static const char* kNames[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  std::printf("%s\n", kNames[status >= 0 && status <= 3 ? status : 0]);
  return status == 1 ? 0 : 1;
}

void Register(CLI::App& app) {
  auto options = std::make_shared<ClientOptions>();
  auto as_json = std::make_shared<bool>(false);
  auto* models = app.add_subcommand("models", "List the models a df11d serves");
  AddClientOptions(models, *options);
  models->add_flag("--json", *as_json, "print JSON");
  models->callback([options, as_json] { RunModels(*options, *as_json); });

  auto health_options = std::make_shared<ClientOptions>();
  auto service = std::make_shared<std::string>();
  auto* health = app.add_subcommand("health", "grpc.health.v1 status of a df11d (exit 0 when SERVING)");
  AddClientOptions(health, *health_options);
  health->add_option("--service", *service, "a model name; empty = the whole server");
  health->callback([health_options, service] {
    int code = RunHealth(*health_options, *service);
    if (code != 0) throw CommandFailed(code, "not serving");
  });
}
DF11_REGISTER_COMMAND(Register);

}  // namespace

void AddClientOptions(CLI::App* sub, ClientOptions& o) {
  sub->add_option("--addr", o.addr, "df11d address host:port")->envname("DF11_ADDR")->capture_default_str();
  sub->add_option("--api-key", o.api_key, "API key (sent as authorization: Bearer)")->envname("DF11_API_KEY");
  sub->add_option("--tls-ca", o.tls_ca, "CA certificate (PEM) of the server; enables TLS");
  sub->add_option("--tls-cert", o.tls_cert, "client certificate (PEM) for mutual TLS");
  sub->add_option("--tls-key", o.tls_key, "client private key (PEM) for mutual TLS");
  sub->add_option("--timeout", o.timeout_seconds, "per-call deadline in seconds (0 = none)");
}

std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& o) {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!o.tls_ca.empty() || !o.tls_cert.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!o.tls_ca.empty()) ssl.pem_root_certs = ReadPem(o.tls_ca, "--tls-ca");
    if (!o.tls_cert.empty()) ssl.pem_cert_chain = ReadPem(o.tls_cert, "--tls-cert");
    if (!o.tls_key.empty()) ssl.pem_private_key = ReadPem(o.tls_key, "--tls-key");
    creds = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(o.addr, creds, args);
}

void PrepareContext(grpc::ClientContext& ctx, const ClientOptions& o) {
  if (!o.api_key.empty()) ctx.AddMetadata("authorization", "Bearer " + o.api_key);
  if (o.timeout_seconds > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::microseconds(static_cast<int64_t>(o.timeout_seconds * 1e6)));
  }
}

void CheckRpc(const grpc::Status& status, const std::string& what) {
  if (status.ok()) return;
  throw CommandFailed(1, what + ": " + StatusCodeName(static_cast<StatusCode>(status.error_code())) + ": " + status.error_message());
}

}  // namespace df11::cli
