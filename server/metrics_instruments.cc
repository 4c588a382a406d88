// Histograms and counters updated by engine and server events (see metrics_instruments.h).
#include "server/metrics_instruments.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace df11 {
namespace metrics_buckets {
// Interactive SLOs sit around TTFT 0.2-2 s and 20-100 ms per output token; the buckets are dense
// there and sparse in the tails so histogram_quantile stays accurate where alerts look.
const std::vector<double> kTimeToFirstToken = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75,
                                               1,    1.5,   2,    3,     5,   7.5,  10,  20,  30,  60};
const std::vector<double> kInterToken = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03,
                                         0.04,  0.05,   0.075, 0.1,    0.15, 0.2,   0.3,  0.5,   1};
const std::vector<double> kRequest = {0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600};
const std::vector<double> kQueue = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                    0.5,   1,      2.5,   5,    10,    30,   60};
const std::vector<double> kPrefill = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
                                      0.5,   0.75, 1,     1.5,  2,     3,   5,    10,  30};
const std::vector<double> kStep = {0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02,
                                   0.03,   0.05,  0.075, 0.1,   0.15,  0.2,    0.5,  1,     2};
// A tiny model from host memory takes milliseconds, an 8B one ~1 s over PCIe, a reload from disk tens of seconds.
const std::vector<double> kPromotion = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120};
}  // namespace metrics_buckets

namespace {

prometheus::Family<prometheus::Histogram>* HistogramFamily(prometheus::Registry& registry, const char* name,
                                                           const char* help) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}
prometheus::Family<prometheus::Counter>* CounterFamily(prometheus::Registry& registry, const char* name,
                                                       const char* help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

bool KnownRejectReason(const std::string& reason) {
  return reason == "queue_full" || reason == "too_long" || reason == "unauthenticated" || reason == "invalid" ||
         reason == "unavailable";
}

}  // namespace

struct MetricsInstruments::ModelInstruments {
  prometheus::Histogram* time_to_first_token;
  prometheus::Histogram* inter_token;
  prometheus::Histogram* request;
  prometheus::Histogram* queue;
  prometheus::Histogram* prefill;
  prometheus::Histogram* decode;
  prometheus::Histogram* step;
  prometheus::Histogram* decompress;
  prometheus::Histogram* gpu;  // CUDA steps only
};

MetricsInstruments::MetricsInstruments() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  time_to_first_token_ = HistogramFamily(r, "df11_time_to_first_token_seconds",
                                         "Request submitted to its first generated token.");
  inter_token_ = HistogramFamily(r, "df11_inter_token_latency_seconds",
                                 "Gap between consecutive generated tokens of one request.");
  request_ = HistogramFamily(r, "df11_request_duration_seconds", "Request submitted to finished (end to end).");
  queue_ = HistogramFamily(r, "df11_request_queue_seconds", "Request submitted to first scheduled.");
  prefill_ = HistogramFamily(r, "df11_request_prefill_seconds",
                             "Request first scheduled to its first generated token.");
  decode_ = HistogramFamily(r, "df11_request_decode_seconds", "Request first generated token to finished.");
  step_ = HistogramFamily(r, "df11_step_duration_seconds",
                          "One engine step, from its launch until its sampled tokens are on the host.");
  decompress_ = HistogramFamily(r, "df11_step_decompress_seconds",
                                "DF11 weight decompression inside one engine step.");
  gpu_ = HistogramFamily(r, "df11_step_gpu_seconds",
                         "One engine step's span on the GPU (CUDA steps only).");
  requests_ = CounterFamily(r, "df11_requests_total", "Requests finished, by finish reason.");
  promotions_ = CounterFamily(r, "df11_model_promotions_total",
                              "Models brought to the device, by reason (request, admin) and result (ok, error).");
  demotions_ = CounterFamily(r, "df11_model_demotions_total",
                             "Models moved off the device, by reason (capacity, admin) and tier (host, disk).");
  moved_bytes_ = CounterFamily(r, "df11_model_moved_bytes_total",
                               "Weight bytes copied between tiers, by direction (promotion, demotion).");
  promotion_seconds_ = HistogramFamily(r, "df11_model_promotion_seconds", "Wall time to bring a model to the device.");
  rpcs_ = CounterFamily(r, "df11_rpcs_total", "gRPC calls finished, by method and status code name.");
  rejected_ = CounterFamily(r, "df11_requests_rejected_total",
                            "Requests refused before generation, by reason.");
}

MetricsInstruments::~MetricsInstruments() = default;

MetricsInstruments::ModelInstruments& MetricsInstruments::ForModel(const std::string& model) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = models_[model];
  if (!slot) {
    const prometheus::Labels labels = {{"model", model}};
    slot = std::make_unique<ModelInstruments>(ModelInstruments{
        &time_to_first_token_->Add(labels, metrics_buckets::kTimeToFirstToken),
        &inter_token_->Add(labels, metrics_buckets::kInterToken),
        &request_->Add(labels, metrics_buckets::kRequest),
        &queue_->Add(labels, metrics_buckets::kQueue),
        &prefill_->Add(labels, metrics_buckets::kPrefill),
        &decode_->Add(labels, metrics_buckets::kRequest),
        &step_->Add(labels, metrics_buckets::kStep),
        &decompress_->Add(labels, metrics_buckets::kStep),
        &gpu_->Add(labels, metrics_buckets::kStep),
    });
  }
  return *slot;
}

void MetricsInstruments::OnStep(const StepRecord& step) {
  ModelInstruments& m = ForModel(step.model);
  m.step->Observe(step.step_seconds);
  m.decompress->Observe(step.decompress_seconds);
  if (step.gpu_seconds > 0) m.gpu->Observe(step.gpu_seconds);  // CPU steps have no GPU span
}

void MetricsInstruments::OnRequest(const RequestRecord& request) {
  if (request.warmup) return;  // the daemon's own warm-up is no client request (docs/metrics.md)
  ModelInstruments& m = ForModel(request.model);
  const RequestTimings& t = request.timings;
  m.request->Observe(t.total_seconds);
  // Latencies up to the first token exist only for requests that produced one (a request
  // cancelled while waiting has no queue time worth recording either).
  if (request.usage.generated_tokens > 0) {
    m.queue->Observe(t.queue_seconds);
    m.prefill->Observe(t.prefill_seconds);
    m.time_to_first_token->Observe(t.first_token_seconds);
    m.decode->Observe(t.decode_seconds);
  }
  for (double gap : request.inter_token_seconds) m.inter_token->Observe(gap);
  requests_->Add({{"model", request.model}, {"finish_reason", FinishReasonName(request.finish_reason)}}).Increment();
}

void MetricsInstruments::OnRpcFinished(const std::string& method, int grpc_status_code) {
  const char* code = "UNKNOWN";
  if (grpc_status_code >= 0 && grpc_status_code <= static_cast<int>(StatusCode::kUnauthenticated)) {
    code = StatusCodeName(static_cast<StatusCode>(grpc_status_code));
  }
  rpcs_->Add({{"method", method}, {"code", code}}).Increment();
}

void MetricsInstruments::OnRejected(const std::string& model_label, const std::string& reason) {
  rejected_->Add({{"model", model_label}, {"reason", KnownRejectReason(reason) ? reason : "other"}}).Increment();
}

void MetricsInstruments::OnMove(const MoveRecord& move) {
  const std::string direction = move.promotion ? "promotion" : "demotion";
  if (move.promotion) {
    promotions_->Add({{"model", move.model}, {"reason", move.reason}, {"result", move.status.ok() ? "ok" : "error"}})
        .Increment();
    if (move.status.ok()) promotion_seconds_->Add({{"model", move.model}}, metrics_buckets::kPromotion).Observe(move.seconds);
  } else {
    demotions_->Add({{"model", move.model}, {"reason", move.reason}, {"tier", TierName(move.to)}}).Increment();
  }
  moved_bytes_->Add({{"model", move.model}, {"direction", direction}}).Increment(static_cast<double>(move.bytes));
}

}  // namespace df11
