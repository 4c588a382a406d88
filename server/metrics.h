// Metrics: the daemon's Prometheus export (HTTP GET /metrics on server/http_server.h, the
// exposition written by prometheus-cpp's TextSerializer).
// Every metric, its unit, labels and buckets is listed in docs/metrics.md.
//
// Where values come from:
//   - the engine's observer (Observer(), engine thread): latency histograms per request and per
//     step, request counters by finish reason;
//   - the server (OnRpcFinished / OnRejected / OnHttpRequest, RPC and HTTP threads): RPCs by
//     status code, HTTP API requests by route and status, rejections;
//   - the attached engine (AttachEngine) at scrape time: running/waiting, KV blocks, token and
//     preemption counters, memory per model, model info; plus GPU memory and build info.
//
// Thread-safety: every method is thread-safe. Observer callbacks only update in-memory
// instruments (a short mutex per histogram/counter): no I/O, no engine calls. The observer keeps
// the instruments alive by itself, so Metrics and the Engine may be destroyed in either order as
// long as AttachEngine(nullptr) (or ~Metrics) runs before the attached engine is destroyed.
#pragma once

#include <memory>
#include <string>

#include "kernels/base/status.h"
#include "scheduler/engine.h"
#include "server/http_server.h"

namespace prometheus {
class Counter;
template <typename T>
class Family;
}  // namespace prometheus

namespace df11 {

class MetricsInstruments;   // server/metrics_instruments.h
class EngineCollector;      // server/metrics_engine_collector.h

class Metrics {
 public:
  // Serves /metrics on `http_address` ("host:port"; port 0 picks a free one), plain HTTP, with
  // the read timeout and per-client connection limit of `limits` (slow clients cannot stall it).
  // INVALID_ARGUMENT if the address is malformed, UNAVAILABLE if it cannot be bound.
  static StatusOr<std::unique_ptr<Metrics>> Start(const std::string& http_address,
                                                  const server::HttpLimits& limits = {});
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  int port() const;  // the bound TCP port

  // For Engine::Create. Called on the engine thread; never blocks on I/O.
  EngineObserver Observer();
  // Gauges read engine->Stats() / Models() at scrape time. nullptr detaches (waits for a scrape
  // in progress); call that before destroying an attached engine that outlives this object.
  void AttachEngine(const Engine* engine);

  // One finished RPC. `method` is a short fixed name ("Generate"); the code is a grpc::StatusCode
  // value (0..16; others count as "UNKNOWN").
  void OnRpcFinished(const std::string& method, int grpc_status_code);
  // A request refused before it reached the engine's queue (or refused by Submit).
  // reason: "queue_full", "too_long", "unauthenticated", "invalid" (anything else counts as
  // "other"). A model name the attached engine does not serve is counted as model="unknown", so
  // clients cannot create series at will.
  void OnRejected(const std::string& model, const std::string& reason);
  // One answered request of the OpenAI HTTP API: df11_http_requests_total{route, code}.
  void OnHttpRequest(const std::string& route, int http_status);

  // The text exposition /metrics serves (tests and debugging).
  std::string Scrape() const;

 private:
  class Sampler;  // thread raising memory peaks every 100 ms
  Metrics();

  std::shared_ptr<MetricsInstruments> instruments_;
  std::shared_ptr<EngineCollector> engine_collector_;
  std::unique_ptr<Sampler> sampler_;
  prometheus::Family<prometheus::Counter>* http_requests_ = nullptr;
  std::unique_ptr<server::HttpServer> http_;  // last: stopped first
};

}  // namespace df11
