// Metrics driven by a real CPU Engine (tiny random model): every metric moves as generations run,
// read over HTTP from /metrics; counts are checked against what the test sent.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "server/metrics.h"
#include "tests/scheduler/engine_harness.h"
#include "tests/server/metrics_test_util.h"

namespace df11 {
namespace {

using testing::HttpGet;
using testing::SampleValue;

class MetricsEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir("df11_metrics");
    ASSERT_TRUE(WriteTinyModel(dir_->path() + "/m").ok());
  }
  static void TearDownTestSuite() { delete dir_; }

  void SetUp() override {
    auto metrics = Metrics::Start("127.0.0.1:0");
    ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
    metrics_ = std::move(metrics).value();
    auto engine = Engine::Create(SmallEngineOptions(), metrics_->Observer());
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value();
    ASSERT_TRUE(engine_->LoadModel({.name = "tiny", .path = dir_->path() + "/m"}).ok());
    metrics_->AttachEngine(engine_.get());
  }
  void TearDown() override {
    if (metrics_) metrics_->AttachEngine(nullptr);
    engine_.reset();
    metrics_.reset();
  }

  std::string Scrape() {
    std::optional<std::string> body = HttpGet(metrics_->port(), "/metrics");
    EXPECT_TRUE(body.has_value());
    return body.value_or("");
  }
  // Scrapes until `name{model="tiny"}` equals `want` (engine stats trail final events by one
  // engine loop iteration); returns the last value seen.
  double WaitFor(const std::string& name, double want) {
    double seen = -1;
    for (int i = 0; i < 400; ++i) {
      seen = SampleValue(Scrape(), name, {{"model", "tiny"}}).value_or(-1);
      if (seen == want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return seen;
  }

  static ScopedTempDir* dir_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Engine> engine_;
};
ScopedTempDir* MetricsEngineTest::dir_ = nullptr;

const testing::Labels kTiny = {{"model", "tiny"}};

TEST_F(MetricsEngineTest, GenerationsMoveEveryRequestMetric) {
  const std::string before = Scrape();
  // The engine may list a model's stats only after its first step: absent or 0 both read as 0.
  EXPECT_EQ(SampleValue(before, "df11_requests_running", kTiny).value_or(0), 0);
  EXPECT_EQ(SampleValue(before, "df11_generated_tokens_total", kTiny).value_or(0), 0);
  EXPECT_EQ(SampleValue(before, "df11_time_to_first_token_seconds_count", kTiny), std::nullopt);

  // Prompts of 5, 9 and 17 tokens, 6 + 4 + 8 generated tokens, run together.
  struct Sent { int prompt, max_tokens; };
  const std::vector<Sent> sent = {{5, 6}, {9, 4}, {17, 8}};
  Recorder rec;
  for (size_t i = 0; i < sent.size(); ++i) {
    ASSERT_TRUE(engine_->Submit(Greedy("tiny", TestPrompt(sent[i].prompt, 10 + i), sent[i].max_tokens),
                                rec.Sink(static_cast<int>(i))).ok());
  }
  ASSERT_TRUE(rec.WaitFinished(3));
  EXPECT_EQ(WaitFor("df11_generated_tokens_total", 18), 18);

  const std::string text = Scrape();
  EXPECT_EQ(SampleValue(text, "df11_requests_total", {{"model", "tiny"}, {"finish_reason", "length"}}), 3);
  EXPECT_EQ(SampleValue(text, "df11_prompt_tokens_total", kTiny), 5 + 9 + 17);
  EXPECT_EQ(SampleValue(text, "df11_time_to_first_token_seconds_count", kTiny), 3);
  EXPECT_EQ(SampleValue(text, "df11_request_duration_seconds_count", kTiny), 3);
  EXPECT_EQ(SampleValue(text, "df11_request_queue_seconds_count", kTiny), 3);
  EXPECT_EQ(SampleValue(text, "df11_request_prefill_seconds_count", kTiny), 3);
  EXPECT_EQ(SampleValue(text, "df11_request_decode_seconds_count", kTiny), 3);
  EXPECT_EQ(SampleValue(text, "df11_inter_token_latency_seconds_count", kTiny), 5 + 3 + 7);
  EXPECT_GT(*SampleValue(text, "df11_time_to_first_token_seconds_sum", kTiny), 0);
  // One step record per engine step of the model: the histogram and the engine's counter agree.
  const double steps = SampleValue(text, "df11_steps_total", kTiny).value_or(0);
  EXPECT_GE(steps, 8);  // the longest request needs at least 8 steps
  EXPECT_EQ(SampleValue(text, "df11_step_duration_seconds_count", kTiny), steps);
  EXPECT_EQ(SampleValue(text, "df11_step_decompress_seconds_count", kTiny), steps);
  EXPECT_EQ(SampleValue(text, "df11_step_gpu_seconds_count", kTiny), 0);  // CPU steps have no GPU span
  EXPECT_EQ(SampleValue(text, "df11_requests_running", kTiny), 0);
  EXPECT_EQ(SampleValue(text, "df11_requests_waiting", kTiny), 0);
  EXPECT_EQ(SampleValue(text, "df11_kv_cache_blocks_used", kTiny), 0);
}

TEST_F(MetricsEngineTest, GaugesFollowARunningRequest) {
  Recorder rec;
  auto id = engine_->Submit(Greedy("tiny", TestPrompt(12, 3), 100000), rec.Sink(0));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(WaitFor("df11_requests_running", 1), 1);
  const std::string text = Scrape();
  const ModelInfo info = engine_->Models().at(0);
  EXPECT_GE(SampleValue(text, "df11_kv_cache_blocks_used", kTiny).value_or(0), 3);  // 12 tokens, 4 per block
  EXPECT_EQ(SampleValue(text, "df11_kv_cache_blocks_capacity", kTiny), info.kv_blocks_total);
  EXPECT_GT(SampleValue(text, "df11_kv_cache_usage_ratio", kTiny).value_or(0), 0);
  EXPECT_EQ(SampleValue(text, "df11_batch_sequences", kTiny), 1);
  EXPECT_EQ(SampleValue(text, "df11_batch_tokens", kTiny), 1);  // decoding one token a step
  engine_->Cancel(*id);
  ASSERT_TRUE(rec.WaitFinished(1));
  EXPECT_EQ(WaitFor("df11_requests_running", 0), 0);
  EXPECT_EQ(WaitFor("df11_kv_cache_blocks_used", 0), 0);
  EXPECT_EQ(SampleValue(Scrape(), "df11_requests_total", {{"model", "tiny"}, {"finish_reason", "cancelled"}}), 1);
  // The peak remembers the blocks the request held.
  EXPECT_GT(SampleValue(Scrape(), "df11_model_kv_cache_used_peak_bytes", kTiny).value_or(0), 0);
}

TEST_F(MetricsEngineTest, MemoryAndInfoMatchTheEngineReport) {
  const ModelInfo info = engine_->Models().at(0);
  const std::string text = Scrape();
  EXPECT_EQ(SampleValue(text, "df11_model_weight_bytes", kTiny), double(info.weight_bytes));
  EXPECT_EQ(SampleValue(text, "df11_model_weight_bf16_bytes", kTiny), double(info.bf16_weight_bytes));
  EXPECT_EQ(SampleValue(text, "df11_model_scratch_bytes", kTiny), double(info.scratch_bytes));
  EXPECT_EQ(SampleValue(text, "df11_model_kv_cache_bytes", kTiny), double(info.kv_bytes));
  EXPECT_GT(info.weight_bytes, 0u);
  EXPECT_EQ(SampleValue(text, "df11_model_compression_ratio", kTiny), 1);  // a BF16 checkpoint
  EXPECT_EQ(SampleValue(text, "df11_model_load_warnings", kTiny), 0);
  EXPECT_EQ(SampleValue(text, "df11_model_info", {{"model", "tiny"}, {"format", "bf16"}, {"state", "ready"},
                                                  {"architecture", info.architecture}}),
            1);
  metrics_->OnRejected("tiny", "too_long");
  metrics_->OnRejected("not-served", "invalid");
  const std::string after = Scrape();
  EXPECT_EQ(SampleValue(after, "df11_requests_rejected_total", {{"model", "tiny"}, {"reason", "too_long"}}), 1);
  EXPECT_EQ(SampleValue(after, "df11_requests_rejected_total", {{"model", "unknown"}, {"reason", "invalid"}}), 1);
}

// docs/metrics.md stays true: every metric it lists (but the GPU ones, absent without a device)
// is exported once a generation has run, and every exported df11_ metric is listed.
TEST_F(MetricsEngineTest, DocsListExactlyTheExportedMetrics) {
  RunAlone(*engine_, Greedy("tiny", TestPrompt(4, 1), 3));
  metrics_->OnRpcFinished("Generate", 0);
  metrics_->OnRejected("tiny", "queue_full");
  metrics_->OnHttpRequest("/v1/completions", 200);
  // A promotion and a demotion (model tiers; their end-to-end counts are in daemon_tier_test).
  const EngineObserver observer = metrics_->Observer();
  MoveRecord promotion;
  promotion.model = "tiny";
  promotion.from = ModelTier::kHost;
  promotion.promotion = true;
  promotion.reason = "request";
  promotion.seconds = 0.5;
  promotion.bytes = 100;
  observer.on_move(promotion);
  MoveRecord demotion = promotion;
  demotion.from = ModelTier::kResident;
  demotion.to = ModelTier::kHost;
  demotion.promotion = false;
  demotion.reason = "capacity";
  observer.on_move(demotion);
  WaitFor("df11_generated_tokens_total", 3);
  std::ifstream docs(std::string(DF11_TEST_FIXTURES) + "/../../docs/metrics.md");
  ASSERT_TRUE(docs.good());
  std::set<std::string> documented;
  const std::regex row(R"(^\|\s*`(df11_[a-z0-9_]+)`)");
  for (std::string line; std::getline(docs, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) documented.insert(m[1]);
  }
  std::set<std::string> exported;
  const std::regex type_line(R"(^# TYPE (df11_[a-z0-9_]+) )");
  std::istringstream in(Scrape());
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, type_line)) exported.insert(m[1]);
  }
  for (const std::string& name : documented) {
    if (name.rfind("df11_gpu_", 0) == 0) continue;
    EXPECT_TRUE(exported.count(name)) << name << " is in docs/metrics.md but not exported";
  }
  for (const std::string& name : exported) {
    EXPECT_TRUE(documented.count(name)) << name << " is exported but not in docs/metrics.md";
  }
}

}  // namespace
}  // namespace df11
