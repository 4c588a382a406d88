// Metrics: the HTTP endpoint, the observer's histograms and the server-side counters, driven by
// hand-made records with hand-worked bucket counts.
#include "server/metrics.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include "tests/server/metrics_test_util.h"

namespace df11 {
namespace {

using testing::HttpGet;
using testing::SampleValue;

std::unique_ptr<Metrics> StartOnFreePort() {
  StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Start("127.0.0.1:0");
  EXPECT_TRUE(metrics.ok()) << metrics.status().ToString();
  return metrics.ok() ? std::move(metrics).value() : nullptr;
}

TEST(Metrics, ServesTheExpositionOverHttp) {
  std::unique_ptr<Metrics> metrics = StartOnFreePort();
  ASSERT_NE(metrics, nullptr);
  ASSERT_GT(metrics->port(), 0);
  std::optional<std::string> body = HttpGet(metrics->port(), "/metrics");
  ASSERT_TRUE(body.has_value());
  EXPECT_EQ(SampleValue(*body, "df11_build_info"), 1);
  EXPECT_EQ(HttpGet(metrics->port(), "/nothing-here"), std::nullopt);
}

TEST(Metrics, RejectsBadAddresses) {
  for (const char* address : {"", "8000", ":8000", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:80x"}) {
    StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Start(address);
    ASSERT_FALSE(metrics.ok()) << address;
    EXPECT_EQ(metrics.status().code(), StatusCode::kInvalidArgument) << address;
    EXPECT_NE(metrics.status().message().find(address), std::string::npos) << metrics.status().ToString();
  }
}

TEST(Metrics, PortInUseIsUnavailable) {
  std::unique_ptr<Metrics> first = StartOnFreePort();
  ASSERT_NE(first, nullptr);
  StatusOr<std::unique_ptr<Metrics>> second = Metrics::Start("127.0.0.1:" + std::to_string(first->port()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
}

TEST(Metrics, RequestRecordsFillTheLatencyHistograms) {
  std::unique_ptr<Metrics> metrics = StartOnFreePort();
  ASSERT_NE(metrics, nullptr);
  EngineObserver observer = metrics->Observer();
  RequestRecord r;
  r.model = "m";
  r.finish_reason = FinishReason::kLength;
  r.usage = {.prompt_tokens = 5, .prefix_hit_tokens = 0, .generated_tokens = 4};
  r.timings = {.queue_seconds = 0.004, .first_token_seconds = 0.3, .prefill_seconds = 0.296,
               .decode_seconds = 0.09, .total_seconds = 0.39};
  r.inter_token_seconds = {0.01, 0.02, 0.06};
  observer.on_request(r);
  r.finish_reason = FinishReason::kStop;
  r.timings.first_token_seconds = 1.2;
  r.inter_token_seconds = {0.012};
  observer.on_request(r);

  const std::string text = metrics->Scrape();
  const testing::Labels m = {{"model", "m"}};
  EXPECT_EQ(SampleValue(text, "df11_time_to_first_token_seconds_count", m), 2);
  EXPECT_DOUBLE_EQ(*SampleValue(text, "df11_time_to_first_token_seconds_sum", m), 1.5);
  EXPECT_EQ(SampleValue(text, "df11_time_to_first_token_seconds_bucket", {{"model", "m"}, {"le", "0.2"}}), 0);
  EXPECT_EQ(SampleValue(text, "df11_time_to_first_token_seconds_bucket", {{"model", "m"}, {"le", "0.3"}}), 1);
  EXPECT_EQ(SampleValue(text, "df11_time_to_first_token_seconds_bucket", {{"model", "m"}, {"le", "1.5"}}), 2);
  EXPECT_EQ(SampleValue(text, "df11_time_to_first_token_seconds_bucket", {{"model", "m"}, {"le", "+Inf"}}), 2);
  // Gaps 0.01, 0.02, 0.06, 0.012: two at or below 0.015, three at or below 0.02, all four by 0.075.
  EXPECT_EQ(SampleValue(text, "df11_inter_token_latency_seconds_count", m), 4);
  EXPECT_EQ(SampleValue(text, "df11_inter_token_latency_seconds_bucket", {{"model", "m"}, {"le", "0.015"}}), 2);
  EXPECT_EQ(SampleValue(text, "df11_inter_token_latency_seconds_bucket", {{"model", "m"}, {"le", "0.02"}}), 3);
  EXPECT_EQ(SampleValue(text, "df11_inter_token_latency_seconds_bucket", {{"model", "m"}, {"le", "0.05"}}), 3);
  EXPECT_EQ(SampleValue(text, "df11_inter_token_latency_seconds_bucket", {{"model", "m"}, {"le", "0.075"}}), 4);
  EXPECT_EQ(SampleValue(text, "df11_request_queue_seconds_bucket", {{"model", "m"}, {"le", "0.005"}}), 2);
  EXPECT_EQ(SampleValue(text, "df11_request_queue_seconds_bucket", {{"model", "m"}, {"le", "0.0025"}}), 0);
  EXPECT_EQ(SampleValue(text, "df11_request_prefill_seconds_bucket", {{"model", "m"}, {"le", "0.3"}}), 2);
  EXPECT_EQ(SampleValue(text, "df11_request_decode_seconds_bucket", {{"model", "m"}, {"le", "0.1"}}), 2);
  EXPECT_EQ(SampleValue(text, "df11_request_duration_seconds_bucket", {{"model", "m"}, {"le", "0.25"}}), 0);
  EXPECT_EQ(SampleValue(text, "df11_request_duration_seconds_bucket", {{"model", "m"}, {"le", "0.5"}}), 2);
  EXPECT_EQ(SampleValue(text, "df11_requests_total", {{"model", "m"}, {"finish_reason", "length"}}), 1);
  EXPECT_EQ(SampleValue(text, "df11_requests_total", {{"model", "m"}, {"finish_reason", "stop"}}), 1);
}

TEST(Metrics, RequestWithoutTokensCountsOnlyItsDuration) {
  std::unique_ptr<Metrics> metrics = StartOnFreePort();
  ASSERT_NE(metrics, nullptr);
  RequestRecord r;
  r.model = "m";
  r.finish_reason = FinishReason::kCancelled;
  r.timings.total_seconds = 2;
  metrics->Observer().on_request(r);
  const std::string text = metrics->Scrape();
  EXPECT_EQ(SampleValue(text, "df11_request_duration_seconds_count", {{"model", "m"}}), 1);
  EXPECT_EQ(SampleValue(text, "df11_time_to_first_token_seconds_count", {{"model", "m"}}), 0);
  EXPECT_EQ(SampleValue(text, "df11_request_queue_seconds_count", {{"model", "m"}}), 0);
  EXPECT_EQ(SampleValue(text, "df11_requests_total", {{"model", "m"}, {"finish_reason", "cancelled"}}), 1);
}

TEST(Metrics, StepRecordsFillStepDecompressionAndGpuHistograms) {
  std::unique_ptr<Metrics> metrics = StartOnFreePort();
  ASSERT_NE(metrics, nullptr);
  EngineObserver observer = metrics->Observer();
  observer.on_step({.model = "m",
                    .sequences = 4,
                    .tokens = 4,
                    .step_seconds = 0.012,
                    .decompress_seconds = 0.004,
                    .gpu_seconds = 0.0118});
  observer.on_step({.model = "m", .sequences = 1, .tokens = 64, .step_seconds = 0.04, .decompress_seconds = 0.0045});
  const std::string text = metrics->Scrape();
  EXPECT_EQ(SampleValue(text, "df11_step_duration_seconds_bucket", {{"model", "m"}, {"le", "0.015"}}), 1);
  EXPECT_EQ(SampleValue(text, "df11_step_duration_seconds_bucket", {{"model", "m"}, {"le", "0.05"}}), 2);
  EXPECT_DOUBLE_EQ(*SampleValue(text, "df11_step_decompress_seconds_sum", {{"model", "m"}}), 0.0085);
  EXPECT_EQ(SampleValue(text, "df11_step_decompress_seconds_bucket", {{"model", "m"}, {"le", "0.003"}}), 0);
  EXPECT_EQ(SampleValue(text, "df11_step_decompress_seconds_bucket", {{"model", "m"}, {"le", "0.005"}}), 2);
  // Only the step with a GPU span (a CUDA step) is observed.
  EXPECT_EQ(SampleValue(text, "df11_step_gpu_seconds_count", {{"model", "m"}}), 1);
  EXPECT_DOUBLE_EQ(*SampleValue(text, "df11_step_gpu_seconds_sum", {{"model", "m"}}), 0.0118);
  EXPECT_EQ(SampleValue(text, "df11_step_gpu_seconds_bucket", {{"model", "m"}, {"le", "0.01"}}), 0);
  EXPECT_EQ(SampleValue(text, "df11_step_gpu_seconds_bucket", {{"model", "m"}, {"le", "0.015"}}), 1);
}

TEST(Metrics, RpcAndRejectionCountersBoundTheirLabels) {
  std::unique_ptr<Metrics> metrics = StartOnFreePort();
  ASSERT_NE(metrics, nullptr);
  metrics->OnRpcFinished("Generate", 0);
  metrics->OnRpcFinished("Generate", 0);
  metrics->OnRpcFinished("Generate", 8);
  metrics->OnRpcFinished("Generate", 99);
  metrics->OnRpcFinished("Generate", -1);
  // No engine attached: no model is served, so every model name counts as "unknown".
  metrics->OnRejected("some-model", "queue_full");
  metrics->OnRejected("random-name-from-a-client", "unauthenticated");
  metrics->OnRejected("x", "made-up reason");
  const std::string text = metrics->Scrape();
  EXPECT_EQ(SampleValue(text, "df11_rpcs_total", {{"method", "Generate"}, {"code", "OK"}}), 2);
  EXPECT_EQ(SampleValue(text, "df11_rpcs_total", {{"method", "Generate"}, {"code", "RESOURCE_EXHAUSTED"}}), 1);
  EXPECT_EQ(SampleValue(text, "df11_rpcs_total", {{"method", "Generate"}, {"code", "UNKNOWN"}}), 2);
  EXPECT_EQ(SampleValue(text, "df11_requests_rejected_total", {{"model", "unknown"}, {"reason", "queue_full"}}), 1);
  EXPECT_EQ(SampleValue(text, "df11_requests_rejected_total", {{"model", "unknown"}, {"reason", "unauthenticated"}}),
            1);
  EXPECT_EQ(SampleValue(text, "df11_requests_rejected_total", {{"model", "unknown"}, {"reason", "other"}}), 1);
  EXPECT_EQ(text.find("random-name-from-a-client"), std::string::npos);
}

TEST(Metrics, ObserverOutlivesMetrics) {
  EngineObserver observer;
  {
    std::unique_ptr<Metrics> metrics = StartOnFreePort();
    ASSERT_NE(metrics, nullptr);
    observer = metrics->Observer();
  }
  RequestRecord r;
  r.model = "m";
  observer.on_request(r);  // must not touch freed memory (ASan would say)
  observer.on_step({.model = "m"});
}

}  // namespace
}  // namespace df11
