// Metrics: HTTP /metrics export of engine and server metrics (see metrics.h).
#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <exception>
#include <sstream>
#include <thread>

#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "server/metrics_engine_collector.h"
#include "server/metrics_instruments.h"

namespace df11 {
void KeepThreadStackFloor();  // metrics_thread_stack.cc

namespace {

constexpr std::chrono::milliseconds kSampleInterval(100);

// "host:port" with a non-empty host and a port in [0, 65535].
Status ValidateAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("metrics address '" + address + "': expected host:port");
  }
  const std::string port = address.substr(colon + 1);
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 0 || value > 65535) {
    return InvalidArgument("metrics address '" + address + "': port '" + port + "' is not in 0..65535");
  }
  return Status::Ok();
}

// civetweb notices a stop request only between polls of its listening socket (up to 2 s apart);
// connecting to it wakes the poll, so shutdown takes milliseconds.
void StopExposer(std::unique_ptr<prometheus::Exposer>& exposer) {
  if (!exposer) return;
  const int port = exposer->GetListeningPorts().empty() ? 0 : exposer->GetListeningPorts().front();
  std::atomic<bool> stopped{false};
  std::thread waker([&] {
    while (!stopped.load() && port > 0) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) return;
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer.reset();
  stopped = true;
  waker.join();
}

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
      engine_collector_(std::make_shared<EngineCollector>(QueryBuildInfo())) {}

Metrics::~Metrics() {
  StopExposer(exposer_);  // no scrape after this
  sampler_.reset();
  engine_collector_->SetSource({});
}

StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& http_address) {
  DF11_RETURN_IF_ERROR(ValidateAddress(http_address));
  KeepThreadStackFloor();
  std::unique_ptr<Metrics> metrics(new Metrics());
  try {
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(http_address, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return Unavailable("metrics: cannot serve HTTP on '" + http_address + "': " + e.what());
  }
  if (metrics->exposer_->GetListeningPorts().empty()) {
    return Unavailable("metrics: no listening port on '" + http_address + "'");
  }
  metrics->exposer_->RegisterCollectable(metrics->instruments_->registry());
  metrics->exposer_->RegisterCollectable(metrics->engine_collector_);
  metrics->sampler_ = std::make_unique<Sampler>(metrics->engine_collector_);
  return metrics;
}

int Metrics::port() const { return exposer_->GetListeningPorts().front(); }

EngineObserver Metrics::Observer() {
  EngineObserver observer;
  // The callbacks own the instruments, so they stay valid if the engine outlives this object.
  observer.on_step = [instruments = instruments_](const StepRecord& step) { instruments->OnStep(step); };
  observer.on_request = [instruments = instruments_](const RequestRecord& request) {
    instruments->OnRequest(request);
  };
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

std::string Metrics::Scrape() const {
  std::vector<prometheus::MetricFamily> families = instruments_->registry()->Collect();
  std::vector<prometheus::MetricFamily> engine = engine_collector_->Collect();
  families.insert(families.end(), engine.begin(), engine.end());
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace df11
