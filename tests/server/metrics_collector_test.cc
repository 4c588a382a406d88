// EngineCollector: scrape-time gauges and counters from hand-made engine snapshots.
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <sstream>

#include "server/metrics_engine_collector.h"
#include "tests/server/metrics_test_util.h"

namespace df11 {
namespace {

using testing::SampleValue;

std::string Expose(const EngineCollector& collector) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, collector.Collect());
  return out.str();
}

ModelInfo Info(const std::string& name) {
  ModelInfo info;
  info.name = name;
  info.architecture = "LlamaForCausalLM";
  info.state = ModelState::kReady;
  info.df11 = true;
  info.weight_bytes = 700;
  info.bf16_weight_bytes = 1000;
  info.scratch_bytes = 64;
  info.kv_bytes = 4000;
  info.kv_blocks_total = 40;
  info.load_seconds = 1.5;
  info.load_warnings = {"w1", "w2"};
  return info;
}

ModelStats Stats(const std::string& name, int64_t kv_used) {
  ModelStats s;
  s.name = name;
  s.running = 3;
  s.waiting = 2;
  s.kv_blocks_used = kv_used;
  s.kv_blocks_total = 40;
  s.preemptions_total = 1;
  s.prefix_hit_tokens_total = 16;
  s.prompt_tokens_total = 100;
  s.generated_tokens_total = 250;
  s.steps_total = 90;
  s.last_batch_sequences = 3;
  s.last_batch_tokens = 35;
  return s;
}

struct Fixture {
  EngineSnapshot snapshot;
  std::optional<GpuMemory> gpu;
  EngineCollector collector{BuildInfo{"9.9.9", "12.4", "Test GPU"}, [this] { return gpu; }};
  Fixture() {
    collector.SetSource([this] { return snapshot; });
  }
};

TEST(MetricsCollector, GaugesAndCountersFromTheSnapshot) {
  Fixture f;
  f.snapshot.models = {Info("a")};
  f.snapshot.stats.models = {Stats("a", 10)};
  const std::string text = Expose(f.collector);
  const testing::Labels a = {{"model", "a"}};
  EXPECT_EQ(SampleValue(text, "df11_build_info", {{"version", "9.9.9"}, {"cuda", "12.4"}, {"gpu", "Test GPU"}}), 1);
  EXPECT_EQ(SampleValue(text, "df11_requests_running", a), 3);
  EXPECT_EQ(SampleValue(text, "df11_requests_waiting", a), 2);
  EXPECT_EQ(SampleValue(text, "df11_kv_cache_blocks_used", a), 10);
  EXPECT_EQ(SampleValue(text, "df11_kv_cache_blocks_capacity", a), 40);
  EXPECT_EQ(SampleValue(text, "df11_kv_cache_usage_ratio", a), 0.25);
  EXPECT_EQ(SampleValue(text, "df11_batch_sequences", a), 3);
  EXPECT_EQ(SampleValue(text, "df11_batch_tokens", a), 35);
  EXPECT_EQ(SampleValue(text, "df11_prompt_tokens_total", a), 100);
  EXPECT_EQ(SampleValue(text, "df11_prompt_tokens_cached_total", a), 16);
  EXPECT_EQ(SampleValue(text, "df11_generated_tokens_total", a), 250);
  EXPECT_EQ(SampleValue(text, "df11_preemptions_total", a), 1);
  EXPECT_EQ(SampleValue(text, "df11_steps_total", a), 90);
  EXPECT_EQ(SampleValue(text, "df11_model_info",
                        {{"model", "a"}, {"architecture", "LlamaForCausalLM"}, {"format", "df11"}, {"state", "ready"}}),
            1);
  EXPECT_EQ(SampleValue(text, "df11_model_compression_ratio", a), 0.7);
  EXPECT_EQ(SampleValue(text, "df11_model_load_seconds", a), 1.5);
  EXPECT_EQ(SampleValue(text, "df11_model_load_warnings", a), 2);
  EXPECT_EQ(SampleValue(text, "df11_model_weight_bytes", a), 700);
  EXPECT_EQ(SampleValue(text, "df11_model_weight_bf16_bytes", a), 1000);
  EXPECT_EQ(SampleValue(text, "df11_model_scratch_bytes", a), 64);
  EXPECT_EQ(SampleValue(text, "df11_model_kv_cache_bytes", a), 4000);
  EXPECT_EQ(SampleValue(text, "df11_model_kv_cache_used_bytes", a), 1000);  // 10 of 40 blocks
  // TYPE lines: counters are counters, gauges gauges.
  EXPECT_NE(text.find("# TYPE df11_generated_tokens_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE df11_requests_running gauge"), std::string::npos);
  // No GPU: no GPU series.
  EXPECT_EQ(SampleValue(text, "df11_gpu_memory_total_bytes"), std::nullopt);
}

TEST(MetricsCollector, PeaksKeepTheHighestSampledValue) {
  Fixture f;
  f.snapshot.models = {Info("a")};
  f.snapshot.stats.models = {Stats("a", 30)};
  f.gpu = GpuMemory{0, 1000, 400};
  f.collector.Sample();
  f.snapshot.stats.models = {Stats("a", 4)};
  f.gpu = GpuMemory{0, 1000, 900};
  const std::string text = Expose(f.collector);
  EXPECT_EQ(SampleValue(text, "df11_model_kv_cache_used_bytes", {{"model", "a"}}), 400);
  EXPECT_EQ(SampleValue(text, "df11_model_kv_cache_used_peak_bytes", {{"model", "a"}}), 3000);
  EXPECT_EQ(SampleValue(text, "df11_model_weight_peak_bytes", {{"model", "a"}}), 700);
  EXPECT_EQ(SampleValue(text, "df11_gpu_memory_total_bytes", {{"gpu", "0"}}), 1000);
  EXPECT_EQ(SampleValue(text, "df11_gpu_memory_used_bytes", {{"gpu", "0"}}), 100);
  EXPECT_EQ(SampleValue(text, "df11_gpu_memory_free_bytes", {{"gpu", "0"}}), 900);
  EXPECT_EQ(SampleValue(text, "df11_gpu_memory_used_peak_bytes", {{"gpu", "0"}}), 600);
}

TEST(MetricsCollector, DetachedAndUnloadedModelsLeaveNoCurrentSeries) {
  Fixture f;
  f.snapshot.models = {Info("a"), Info("b")};
  f.snapshot.stats.models = {Stats("a", 1), Stats("b", 2)};
  EXPECT_TRUE(f.collector.Serves("b"));
  EXPECT_FALSE(f.collector.Serves("c"));
  f.collector.Sample();
  f.snapshot.models = {Info("a")};
  f.snapshot.stats.models = {Stats("a", 1)};
  std::string text = Expose(f.collector);
  EXPECT_EQ(SampleValue(text, "df11_requests_running", {{"model", "b"}}), std::nullopt);
  EXPECT_EQ(SampleValue(text, "df11_model_weight_bytes", {{"model", "b"}}), std::nullopt);
  // Peaks outlive an unload (the highest value the model ever used).
  EXPECT_EQ(SampleValue(text, "df11_model_weight_peak_bytes", {{"model", "b"}}), 700);

  f.collector.SetSource({});
  EXPECT_FALSE(f.collector.Serves("a"));
  text = Expose(f.collector);
  EXPECT_EQ(SampleValue(text, "df11_requests_running", {{"model", "a"}}), std::nullopt);
  EXPECT_EQ(SampleValue(text, "df11_build_info"), 1);
}

TEST(MetricsCollector, EmptyKvPoolAndBf16Model) {
  Fixture f;
  ModelInfo info = Info("plain");
  info.df11 = false;
  info.weight_bytes = info.bf16_weight_bytes = 1000;
  info.kv_blocks_total = 0;
  f.snapshot.models = {info};
  ModelStats stats = Stats("plain", 0);
  stats.kv_blocks_total = 0;
  f.snapshot.stats.models = {stats};
  const std::string text = Expose(f.collector);
  EXPECT_EQ(SampleValue(text, "df11_kv_cache_usage_ratio", {{"model", "plain"}}), 0);
  EXPECT_EQ(SampleValue(text, "df11_model_kv_cache_used_bytes", {{"model", "plain"}}), 0);
  EXPECT_EQ(SampleValue(text, "df11_model_compression_ratio", {{"model", "plain"}}), 1);
  EXPECT_EQ(SampleValue(text, "df11_model_info", {{"model", "plain"}, {"format", "bf16"}}), 1);
}

}  // namespace
}  // namespace df11
