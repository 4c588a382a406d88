// MetricsInstruments: the histograms and counters that events update (the engine's observer and
// the server's RPC callbacks), registered in one prometheus::Registry. Part of Metrics
// (server/metrics.h); names, units and buckets are listed in docs/metrics.md.
// Thread-safety: every method is thread-safe; OnStep/OnRequest run on the engine thread and take
// only short in-memory locks.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "scheduler/engine.h"

namespace prometheus {
class Registry;
class Histogram;
class Counter;
template <typename T>
class Family;
}  // namespace prometheus

namespace df11 {

// Histogram bucket upper bounds, seconds (see docs/metrics.md for why these).
namespace metrics_buckets {
extern const std::vector<double> kTimeToFirstToken;
extern const std::vector<double> kInterToken;
extern const std::vector<double> kRequest;  // end-to-end and decode time per request
extern const std::vector<double> kQueue;
extern const std::vector<double> kPrefill;
extern const std::vector<double> kStep;     // engine step, its decompression and its GPU span
extern const std::vector<double> kPromotion;  // a model brought to the device
}  // namespace metrics_buckets

class MetricsInstruments {
 public:
  MetricsInstruments();
  ~MetricsInstruments();

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  void OnStep(const StepRecord& step);
  void OnRequest(const RequestRecord& request);
  void OnMove(const MoveRecord& move);
  void OnRpcFinished(const std::string& method, int grpc_status_code);
  // `model_label` is already bounded by the caller (Metrics maps unknown names to "unknown").
  void OnRejected(const std::string& model_label, const std::string& reason);

 private:
  struct ModelInstruments;  // one model's histograms and counters, created on first use
  ModelInstruments& ForModel(const std::string& model);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>* time_to_first_token_;
  prometheus::Family<prometheus::Histogram>* inter_token_;
  prometheus::Family<prometheus::Histogram>* request_;
  prometheus::Family<prometheus::Histogram>* queue_;
  prometheus::Family<prometheus::Histogram>* prefill_;
  prometheus::Family<prometheus::Histogram>* decode_;
  prometheus::Family<prometheus::Histogram>* step_;
  prometheus::Family<prometheus::Histogram>* decompress_;
  prometheus::Family<prometheus::Histogram>* gpu_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* rpcs_;
  prometheus::Family<prometheus::Counter>* rejected_;
  prometheus::Family<prometheus::Counter>* promotions_;
  prometheus::Family<prometheus::Counter>* demotions_;
  prometheus::Family<prometheus::Counter>* moved_bytes_;
  prometheus::Family<prometheus::Histogram>* promotion_seconds_;

  std::mutex mutex_;  // guards models_
  std::unordered_map<std::string, std::unique_ptr<ModelInstruments>> models_;
};

}  // namespace df11
