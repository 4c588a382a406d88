// Several models in one engine: fairness under a flood on one model (bounded wait of the others'
// requests, read from the observer's step log), the KV budget split, and the bounded waiting
// queue (over it: RESOURCE_EXHAUSTED at Submit, counted in Stats).
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <thread>
#include <mutex>

#include "tests/scheduler/engine_harness.h"

namespace df11 {
namespace {

class EngineMultiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir("df11_engine_multi");
    ASSERT_TRUE(WriteTinyModel(dir_->path() + "/a", {.preset = "qwen3-tiny", .seed = 1}).ok());
    ASSERT_TRUE(WriteTinyModel(dir_->path() + "/b", {.preset = "llama-tiny", .seed = 2}).ok());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string Dir(const std::string& m) { return dir_->path() + "/" + m; }
  // SmallEngineOptions with a KV budget of exactly 100 blocks of model "a".
  static EngineOptions HundredBlockOptions() {
    EngineOptions o = SmallEngineOptions();
    o.kv_memory_bytes = KvBytesOfBlocks(Dir("a"), 100, o.block_size);
    return o;
  }
  static ScopedTempDir* dir_;
};
ScopedTempDir* EngineMultiTest::dir_ = nullptr;

// Runs a flood of requests on "flood" and a few on each other model; checks from the step log
// that, while a light model has work, every other model runs at most one step between two of its
// steps (equal weights), and that the light requests finish long before the flood.
void CheckFairness(Engine& engine, const std::vector<std::string>& light, std::mutex& log_mu,
                   std::vector<std::string>& log) {
  Recorder flood, few;
  constexpr int kFlood = 60;
  for (int i = 0; i < kFlood; ++i) {
    ASSERT_TRUE(engine.Submit(Greedy("flood", TestPrompt(8, i), 20), flood.Sink(i)).ok());
  }
  int n = 0;
  for (const std::string& m : light) {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine.Submit(Greedy(m, TestPrompt(6, i), 10), few.Sink(n++)).ok());
  }
  ASSERT_TRUE(few.WaitFinished(n));
  const int flood_done_when_light_done = flood.finished();
  ASSERT_TRUE(flood.WaitFinished(kFlood));
  EXPECT_LT(flood_done_when_light_done, kFlood / 2) << "light requests waited for the flood";

  std::lock_guard lock(log_mu);
  for (const std::string& m : light) {
    size_t first = log.size(), last = 0;
    for (size_t i = 0; i < log.size(); ++i) {
      if (log[i] == m) {
        first = std::min(first, i);
        last = i;
      }
    }
    ASSERT_LT(first, log.size()) << m << " never ran";
    std::map<std::string, int> others_since;
    for (size_t i = first; i <= last; ++i) {
      if (log[i] == m) {
        others_since.clear();
        continue;
      }
      EXPECT_LE(++others_since[log[i]], 1) << m << " waited more than one step of " << log[i] << " at step " << i;
    }
  }
}

TEST_F(EngineMultiTest, FairnessAcrossTwoAndThreeModels) {
  for (int models : {2, 3}) {
    std::mutex log_mu;
    std::vector<std::string> log;
    EngineObserver observer;
    observer.on_step = [&](const StepRecord& s) {
      std::lock_guard lock(log_mu);
      log.push_back(s.model);
    };
    EngineOptions o = SmallEngineOptions();
    o.max_seqs = 4;  // keeps the flood queued for many steps
    auto engine = Engine::Create(o, observer);
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->LoadModel({.name = "flood", .path = Dir("a"), .kv_min_blocks = 64}).ok());
    std::vector<std::string> light = {"b"};
    if (models == 3) light.push_back("c");
    for (const std::string& m : light) {
      ASSERT_TRUE((*engine)->LoadModel({.name = m, .path = Dir(m == "b" ? "b" : "a"), .kv_min_blocks = 64}).ok());
    }
    CheckFairness(**engine, light, log_mu, log);
    EXPECT_EQ((*engine)->Models().size(), static_cast<size_t>(models));
  }
}

TEST_F(EngineMultiTest, KvBudgetIsSplitByShareAfterMinimums) {
  auto engine = Engine::Create(HundredBlockOptions());
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->LoadModel({.name = "one", .path = Dir("a"), .kv_share = 3, .kv_min_blocks = 10}).ok());
  ASSERT_TRUE((*engine)->LoadModel({.name = "two", .path = Dir("a"), .kv_share = 1, .kv_min_blocks = 20}).ok());
  // 100 blocks: minimums 10 + 20, the other 70 split 3:1 -> 52 + 17 (floors).
  const Status too_big = (*engine)->LoadModel({.name = "three", .path = Dir("a"), .kv_min_blocks = 71});
  EXPECT_EQ(too_big.code(), StatusCode::kResourceExhausted) << too_big.ToString();
  // Both models serve (the first one shrank to its new size once idle).
  Recorder rec;
  ASSERT_TRUE((*engine)->Submit(Greedy("one", TestPrompt(5, 1), 4), rec.Sink(0)).ok());
  ASSERT_TRUE((*engine)->Submit(Greedy("two", TestPrompt(5, 1), 4), rec.Sink(1)).ok());
  ASSERT_TRUE(rec.WaitFinished(2));
  EXPECT_EQ(rec.Get(0).tokens, rec.Get(1).tokens);  // same weights
  std::map<std::string, int64_t> blocks;
  for (const ModelInfo& m : (*engine)->Models()) blocks[m.name] = m.kv_blocks_total;
  EXPECT_EQ(blocks["one"], 10 + 52);
  EXPECT_EQ(blocks["two"], 20 + 17);
  ASSERT_TRUE((*engine)->UnloadModel("two").ok());
  EXPECT_EQ((*engine)->Models().size(), 1u);
  // "one" owns the whole budget again: a prompt longer than its old 62 blocks (4 positions
  // each) but within 100 is accepted (the registry's target followed the unload).
  Recorder after;
  const Status fits = (*engine)->Submit(Greedy("one", TestPrompt(62 * 4 + 10, 1), 2), after.Sink(0)).status();
  EXPECT_TRUE(fits.ok()) << fits.ToString();
  if (fits.ok()) {
    ASSERT_TRUE(after.WaitFinished(1));
  }
}

// df11d loads its configured models as one: all weights, then one KV split over all of them,
// all or nothing.
TEST_F(EngineMultiTest, LoadModelsSplitsOnceAndIsAllOrNothing) {
  auto engine = Engine::Create(HundredBlockOptions());
  ASSERT_TRUE(engine.ok());
  // One bad model: none of the batch is registered, and the error names it.
  const Status bad = (*engine)->LoadModels({{.name = "one", .path = Dir("a"), .kv_min_blocks = 10},
                                            {.name = "gone", .path = Dir("missing")}});
  EXPECT_EQ(bad.code(), StatusCode::kNotFound) << bad.ToString();
  EXPECT_EQ(bad.message().rfind("model 'gone': ", 0), 0u) << bad.ToString();
  EXPECT_TRUE((*engine)->Models().empty());
  // A batch whose minimums do not fit together: refused whole.
  EXPECT_EQ((*engine)->LoadModels({{.name = "one", .path = Dir("a"), .kv_min_blocks = 60},
                                   {.name = "two", .path = Dir("a"), .kv_min_blocks = 60}})
                .code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE((*engine)->Models().empty());
  ASSERT_TRUE((*engine)->LoadModels({{.name = "one", .path = Dir("a"), .kv_share = 3, .kv_min_blocks = 10},
                                     {.name = "two", .path = Dir("a"), .kv_share = 1, .kv_min_blocks = 20}})
                  .ok());
  // The same split as two single loads give (see KvBudgetIsSplitByShareAfterMinimums).
  std::map<std::string, int64_t> blocks;
  for (const ModelInfo& m : (*engine)->Models()) blocks[m.name] = m.kv_blocks_total;
  EXPECT_EQ(blocks["one"], 10 + 52);
  EXPECT_EQ(blocks["two"], 20 + 17);
  Recorder rec;
  ASSERT_TRUE((*engine)->Submit(Greedy("one", TestPrompt(5, 1), 4), rec.Sink(0)).ok());
  ASSERT_TRUE((*engine)->Submit(Greedy("two", TestPrompt(5, 1), 4), rec.Sink(1)).ok());
  ASSERT_TRUE(rec.WaitFinished(2));
  EXPECT_EQ(rec.Get(0).tokens, rec.Get(1).tokens);
}

TEST_F(EngineMultiTest, QueueOverflowRejectsInsteadOfGrowing) {
  EngineOptions o = SmallEngineOptions();
  o.max_waiting = 4;
  auto engine = Engine::Create(o);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->LoadModel({.name = "m", .path = Dir("a"), .kv_min_blocks = 64}).ok());
  // The first request's first event holds the engine thread until the test has filled the queue
  // (a sink that blocks, on purpose, so the queue cannot drain meanwhile).
  std::latch filled(1);
  Recorder rec;
  EventSink first = rec.Sink(0);
  bool blocked_once = false;
  std::atomic<bool> in_sink{false};
  ASSERT_TRUE((*engine)
                  ->Submit(Greedy("m", TestPrompt(4, 0), 3),
                           [&](RequestEvent&& e) {
                             if (!blocked_once) {
                               blocked_once = true;
                               in_sink = true;
                               filled.wait();
                             }
                             first(std::move(e));
                           })
                  .ok());
  while (!in_sink) std::this_thread::yield();
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE((*engine)->Submit(Greedy("m", TestPrompt(4, i), 3), rec.Sink(i)).ok());
  auto over = (*engine)->Submit(Greedy("m", TestPrompt(4, 9), 3), rec.Sink(9));
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ((*engine)->Stats().rejected_queue_full_total, 1);
  filled.count_down();
  ASSERT_TRUE(rec.WaitFinished(5));
  for (int i = 0; i <= 4; ++i) EXPECT_EQ(rec.Get(i).reason, FinishReason::kLength);
  EXPECT_EQ(rec.Get(9).finals, 0);
}

TEST_F(EngineMultiTest, HigherPriorityWaitingRequestsGoFirst) {
  EngineOptions o = SmallEngineOptions();
  o.max_seqs = 1;  // one running request at a time: the queue order decides
  auto engine = Engine::Create(o);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->LoadModel({.name = "m", .path = Dir("a"), .kv_min_blocks = 64}).ok());
  std::latch queued(1);
  std::atomic<bool> in_sink{false};
  std::mutex mu;
  std::vector<int> order;
  auto sink = [&](int key) {
    return [&, key](RequestEvent&& e) {
      if (key == 0 && !in_sink.exchange(true)) queued.wait();  // hold the engine until all are queued
      if (!e.finished) return;
      std::lock_guard lock(mu);
      order.push_back(key);
    };
  };
  ASSERT_TRUE((*engine)->Submit(Greedy("m", TestPrompt(4, 0), 2), sink(0)).ok());
  while (!in_sink) std::this_thread::yield();
  for (int key : {1, 2, 3}) {
    GenerateRequest r = Greedy("m", TestPrompt(4, key), 2);
    r.priority = key == 2 ? 5 : 0;
    ASSERT_TRUE((*engine)->Submit(r, sink(key)).ok());
  }
  queued.count_down();
  while ((*engine)->InFlight() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::lock_guard lock(mu);
  EXPECT_EQ(order, (std::vector<int>{0, 2, 1, 3}));
}

TEST_F(EngineMultiTest, UnloadEndsTheModelsRequests) {
  auto engine = Engine::Create(SmallEngineOptions());
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->LoadModel({.name = "m", .path = Dir("a"), .kv_min_blocks = 64}).ok());
  Recorder rec;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*engine)->Submit(Greedy("m", TestPrompt(6, i), 1500), rec.Sink(i)).ok());
  ASSERT_TRUE((*engine)->UnloadModel("m").ok());
  EXPECT_EQ(rec.finished(), 3);  // UnloadModel returns after the final events
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rec.Get(i).reason, FinishReason::kCancelled);
  EXPECT_TRUE((*engine)->Models().empty());
  EXPECT_EQ((*engine)->Submit(Greedy("m", {1}, 1), rec.Sink(9)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*engine)->InFlight(), 0);
}

// ModelSpec::resident_bf16 reaches the model: the DF11 twin of "a" served decoded is "a" in bytes,
// format and greedy tokens; the same files served compressed report DF11 and give the same tokens.
TEST_F(EngineMultiTest, ResidentBf16ServesTheBf16Model) {
  RandomModelOptions df11;
  df11.seed = 1;  // "a"'s weights (WriteTinyModel: the tiny tokenizer's vocab)
  df11.vocab_size = kTinyTokenizerVocab;
  df11.df11 = true;
  const std::string twin = Dir("a-df11");
  if (!std::filesystem::exists(twin)) {
    ASSERT_TRUE(WriteRandomModel("qwen3-tiny", twin, df11).ok());
  }
  auto engine = Engine::Create(SmallEngineOptions());
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  ASSERT_TRUE(e.LoadModels({{.name = "bf16", .path = Dir("a")},
                            {.name = "decoded", .path = twin, .resident_bf16 = true},
                            {.name = "compressed", .path = twin}})
                  .ok());
  std::map<std::string, ModelInfo> info;
  for (const ModelInfo& m : e.Models()) info[m.name] = m;
  EXPECT_FALSE(info["decoded"].df11);
  EXPECT_TRUE(info["compressed"].df11);
  EXPECT_EQ(info["decoded"].weight_bytes, info["bf16"].weight_bytes);
  const Outcome want = RunAlone(e, Greedy("bf16", TestPrompt(9, 3), 12));
  ASSERT_EQ(want.tokens.size(), 12u);
  for (const char* m : {"decoded", "compressed"}) EXPECT_EQ(RunAlone(e, Greedy(m, TestPrompt(9, 3), 12)).tokens, want.tokens) << m;
}

TEST_F(EngineMultiTest, DestructorCancelsEverything) {
  Recorder rec;
  {
    auto engine = Engine::Create(SmallEngineOptions());
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->LoadModel({.name = "m", .path = Dir("a"), .kv_min_blocks = 64}).ok());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*engine)->Submit(Greedy("m", TestPrompt(10, i), 1500), rec.Sink(i)).ok());
  }
  ASSERT_EQ(rec.finished(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(rec.Get(i).reason, FinishReason::kCancelled);
    EXPECT_EQ(rec.Get(i).status.code(), StatusCode::kCancelled);
  }
}

}  // namespace
}  // namespace df11
