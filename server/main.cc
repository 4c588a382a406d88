// df11d: the df11-serve daemon. Flags/env/config file -> engine + metrics + gRPC server; loads the
// configured models (health SERVING once all are warm; exit 1 if one fails); SIGTERM/SIGINT
// drains and exits 0.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <exception>
#include <string_view>
#include <thread>

#include "server/config.h"
#include "server/metrics.h"
#include "server/raw_message.h"
#include "server/request_log.h"
#include "server/server.h"

namespace {

// Blocks SIGTERM/SIGINT in every thread (call before any thread starts); WaitForSignal takes them.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int Fail(const df11::Status& status) {
  df11::server::LogEvent("error", "startup_failed", {{"error", status.ToString()}});
  std::fprintf(stderr, "df11d: %s\n", status.ToString().c_str());
  return 1;
}

// Secrets on the command line are visible to every user of the machine (ps, /proc); a client CA
// without --tls-require-client-cert verifies certificates that clients send but accepts clients
// that send none. Both are allowed, and said loudly at start.
void WarnAboutRiskyFlags(const df11::server::ServerConfig& config, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    for (std::string_view flag : {"--api-key", "--admin-api-key"}) {
      if (arg == flag || (arg.substr(0, flag.size()) == flag && arg.size() > flag.size() && arg[flag.size()] == '=')) {
        df11::server::LogEvent("warn", "api_key_on_command_line",
                               {{"flag", std::string(flag)},
                                {"advice", "keys on the command line are visible in the process list; use "
                                           "--api-keys-file / --admin-api-keys-file or DF11D_API_KEY / DF11D_ADMIN_API_KEY"}});
      }
    }
  }
  if (!config.tls_client_ca.empty() && !config.tls_require_client_cert) {
    df11::server::LogEvent("warn", "tls_client_cert_optional",
                           {{"advice", "--tls-client-ca without --tls-require-client-cert accepts clients that send no "
                                       "certificate; add --tls-require-client-cert for mutual TLS"}});
  }
}

}  // namespace

static int RunDaemon(int argc, char** argv) {
  using namespace df11;
  using namespace df11::server;
  ServerConfig config;
  CLI::App app{"df11d: serves DFloat11-compressed LLMs over gRPC (df11.v1, see docs/api.md).\n"
               "Every flag can also be set by the environment variable DF11D_<FLAG> (dashes as underscores)."};
  AddServerFlags(app, config);
  app.set_version_flag("--version", "df11d 0.1.0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (Status s = FinishConfig(config); !s.ok()) {
    std::fprintf(stderr, "df11d: %s\n", s.ToString().c_str());
    return 2;
  }
  sigset_t stop_signals = BlockStopSignals();
  InitLogging(config.log_format, config.log_level);
  RouteLibraryLogs();
  WarnAboutRiskyFlags(config, argc, argv);

  std::unique_ptr<Metrics> metrics;
  if (!config.metrics_address.empty()) {
    auto started = Metrics::Start(config.metrics_address, HttpListenerLimits(config));
    if (!started.ok()) return Fail(started.status());
    metrics = std::move(started).value();
    LogEvent("info", "metrics_listening", {{"address", config.metrics_address}, {"port", std::to_string(metrics->port())}});
  }
  // Health follows promotions: a model whose promotion failed reads NOT_SERVING until one
  // succeeds (a model off the device is otherwise SERVING: it will be served). The server, made
  // after the engine, is known to the hook once it starts; moves happen only after loading.
  // Before the server goes, ctx is cleared and main waits until no callback still uses it
  // (seq_cst: a callback that read a non-null ctx had raised `using` first).
  struct HealthHook {
    std::atomic<ServiceContext*> ctx{nullptr};
    std::atomic<int> using_ctx{0};
  };
  HealthHook hook;  // outlives the engine (destroyed after it)
  HealthHook* health = &hook;
  EngineObserver observer = metrics ? metrics->Observer() : EngineObserver{};
  observer.on_move = [metrics_move = observer.on_move, health](const MoveRecord& move) {
    if (metrics_move) metrics_move(move);
    health->using_ctx.fetch_add(1);
    ServiceContext* ctx = health->ctx.load();
    if (move.promotion && ctx != nullptr && ctx->set_model_serving) ctx->set_model_serving(move.model, move.status.ok());
    health->using_ctx.fetch_sub(1);
    if (move.promotion && !move.status.ok()) {
      LogEvent("error", "model_promotion_failed", {{"model", move.model}, {"error", move.status.ToString()}});
    } else {
      LogEvent("info", move.promotion ? "model_promoted" : "model_demoted",
               {{"model", move.model}, {"tier", TierName(move.to)}, {"reason", move.reason},
                {"seconds", std::to_string(move.seconds)}});
    }
  };
  auto engine = Engine::Create(config.engine, observer);
  if (!engine.ok()) return Fail(engine.status());
  if (metrics) metrics->AttachEngine(engine->get());
  auto server = Server::Start(config, engine->get(), metrics.get());
  if (!server.ok()) return Fail(server.status());
  health->ctx.store(&(*server)->context());

  // Models load on their own thread so that a signal during startup still drains promptly. A
  // configured model that fails to load stops the daemon (exit 1): an orchestrator sees it.
  std::atomic<bool> startup_failed{false};
  std::thread loader([&] {
    // All configured models as one load: every model's weights first, then the KV pool from what
    // they leave (no memory flags needed for several models on one GPU).
    if (Status s = LoadAndWarm((*server)->context(), config.models, config.warmup_tokens); !s.ok()) {
      LogEvent("error", "startup_model_failed", {{"error", s.ToString()}});
      std::fprintf(stderr, "df11d: %s\n", s.ToString().c_str());
      startup_failed = true;
      ::kill(::getpid(), SIGTERM);
      return;
    }
    (*server)->SetStartupDone();
    LogEvent("info", "serving", {{"models", std::to_string(config.models.size())}});
  });

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  if (!startup_failed.load()) LogEvent("info", "signal", {{"signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"}});
  (*server)->Drain(std::chrono::duration<double>(config.drain_grace_seconds));
  loader.join();
  health->ctx.store(nullptr);
  while (health->using_ctx.load() != 0) std::this_thread::yield();
  server->reset();
  if (metrics) metrics->AttachEngine(nullptr);
  engine->reset();
  LogEvent("info", "exit");
  return startup_failed.load() ? 1 : 0;
}

// An exception that escapes (out of memory at start, a thread the system refuses) ends the daemon
// with one line and exit status 1 instead of std::terminate.
int main(int argc, char** argv) {
  try {
    return RunDaemon(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "df11d: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "df11d: unknown exception\n");
  }
  return 1;
}
