// Metrics: HTTP /metrics export of engine and server metrics (see metrics.h).
#include "server/metrics.h"

#include <condition_variable>
#include <sstream>
#include <thread>

#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "server/metrics_engine_collector.h"
#include "server/metrics_instruments.h"

namespace df11 {
namespace {

constexpr std::chrono::milliseconds kSampleInterval(100);

}  // namespace

// Raises the memory peaks every kSampleInterval until destroyed.
class Metrics::Sampler {
 public:
  explicit Sampler(std::shared_ptr<EngineCollector> collector)
      : collector_(std::move(collector)), thread_([this] { Run(); }) {}
  ~Sampler() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, kSampleInterval, [this] { return stop_; })) {
      lock.unlock();
      collector_->Sample();
      lock.lock();
    }
  }
  std::shared_ptr<EngineCollector> collector_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it reads
};

Metrics::Metrics()
    : instruments_(std::make_shared<MetricsInstruments>()),
      engine_collector_(std::make_shared<EngineCollector>(QueryBuildInfo())) {
  http_requests_ = &prometheus::BuildCounter()
                        .Name("df11_http_requests_total")
                        .Help("Requests answered by the OpenAI-compatible HTTP API, by route and HTTP status")
                        .Register(*instruments_->registry());
}

Metrics::~Metrics() {
  if (http_) http_->Stop();  // no scrape after this
  sampler_.reset();
  engine_collector_->SetSource({});
}

StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& http_address, const server::HttpLimits& limits) {
  DF11_RETURN_IF_ERROR(server::ValidateHostPort(http_address, "metrics address"));
  std::unique_ptr<Metrics> metrics(new Metrics());
  Metrics* raw = metrics.get();
  auto serve = [raw](const server::HttpRequest& request, const std::shared_ptr<server::HttpExchange>& exchange) {
    server::HttpResponse response;
    if (request.path != "/metrics") {
      response.status = 404;
      response.content_type = "text/plain";
      response.body = "not found: the exposition is at /metrics\n";
    } else if (request.method != "GET" && request.method != "HEAD") {
      response.status = 405;
      response.content_type = "text/plain";
      response.body = "use GET\n";
    } else {
      response.content_type = "text/plain; version=0.0.4; charset=utf-8";
      response.body = raw->Scrape();
    }
    exchange->Respond(std::move(response));
  };
  auto http = server::HttpServer::Start(http_address, limits, {}, serve);
  if (!http.ok()) return Status(http.status().code(), "metrics: " + http.status().message());
  metrics->http_ = std::move(http).value();
  metrics->sampler_ = std::make_unique<Sampler>(metrics->engine_collector_);
  return metrics;
}

int Metrics::port() const { return http_->port(); }

EngineObserver Metrics::Observer() {
  EngineObserver observer;
  // The callbacks own the instruments, so they stay valid if the engine outlives this object.
  observer.on_step = [instruments = instruments_](const StepRecord& step) { instruments->OnStep(step); };
  observer.on_request = [instruments = instruments_](const RequestRecord& request) {
    instruments->OnRequest(request);
  };
  observer.on_move = [instruments = instruments_](const MoveRecord& move) { instruments->OnMove(move); };
  return observer;
}

void Metrics::AttachEngine(const Engine* engine) {
  if (engine == nullptr) {
    engine_collector_->SetSource({});
    return;
  }
  engine_collector_->SetSource([engine] { return EngineSnapshot{engine->Stats(), engine->Models()}; });
}

void Metrics::OnRpcFinished(const std::string& method, int grpc_status_code) {
  instruments_->OnRpcFinished(method, grpc_status_code);
}

void Metrics::OnRejected(const std::string& model, const std::string& reason) {
  instruments_->OnRejected(engine_collector_->Serves(model) ? model : "unknown", reason);
}

void Metrics::OnHttpRequest(const std::string& route, int http_status) {
  http_requests_->Add({{"route", route}, {"code", std::to_string(http_status)}}).Increment();
}

std::string Metrics::Scrape() const {
  std::vector<prometheus::MetricFamily> families = instruments_->registry()->Collect();
  std::vector<prometheus::MetricFamily> engine = engine_collector_->Collect();
  families.insert(families.end(), engine.begin(), engine.end());
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace df11
