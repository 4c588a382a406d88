// Engine on the CPU backend with a tiny random qwen3 model: continuous batching and preemption
// change no greedy output, cancellation and deadlines free every block, prefix-cache hits skip
// recomputation without changing outputs, 500 concurrent requests lose or duplicate nothing, and
// a DF11 copy of the model (lossless) serves the same tokens as its BF16 source.
// Reference outputs are the same requests run one at a time.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtime/format/compress.h"
#include "tests/scheduler/engine_harness.h"

namespace df11 {
namespace {

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir("df11_engine");
    ASSERT_TRUE(WriteTinyModel(ModelDir()).ok());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string ModelDir() { return dir_->path() + "/qwen3"; }

  static std::unique_ptr<Engine> Make(const EngineOptions& options, ModelSpec spec = {}) {
    auto engine = Engine::Create(options);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    if (spec.name.empty()) spec.name = "tiny";
    spec.path = ModelDir();
    const Status st = (*engine)->LoadModel(spec);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return std::move(engine).value();
  }
  // Polls Stats until the model's used KV blocks reach `used` (stats lag the final event by one
  // loop iteration of the engine thread).
  static int64_t WaitBlocksUsed(Engine& engine, int64_t used) {
    int64_t now = -1;
    for (int i = 0; i < 200; ++i) {
      EngineStats stats = engine.Stats();
      now = stats.models.empty() ? -1 : stats.models[0].kv_blocks_used;
      if (now == used) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return now;
  }

  static ScopedTempDir* dir_;
};
ScopedTempDir* EngineTest::dir_ = nullptr;

struct Case {
  int prompt_len, max_tokens, seed;
};
const std::vector<Case> kCases = {{1, 8, 1}, {5, 20, 2}, {17, 3, 3}, {33, 12, 4}, {64, 16, 5}, {9, 25, 6}};

std::vector<Outcome> RunEachAlone(Engine& engine, const std::vector<Case>& cases) {
  std::vector<Outcome> out;
  out.reserve(cases.size());
  for (const Case& c : cases) out.push_back(RunAlone(engine, Greedy("tiny", TestPrompt(c.prompt_len, c.seed), c.max_tokens)));
  return out;
}

std::vector<Outcome> RunTogether(Engine& engine, const std::vector<Case>& cases) {
  Recorder rec;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    EXPECT_TRUE(engine.Submit(Greedy("tiny", TestPrompt(c.prompt_len, c.seed), c.max_tokens), rec.Sink(i)).ok());
  }
  EXPECT_TRUE(rec.WaitFinished(static_cast<int>(cases.size())));
  std::vector<Outcome> out;
  for (size_t i = 0; i < cases.size(); ++i) out.push_back(rec.Get(i));
  return out;
}

TEST_F(EngineTest, ContinuousBatchingEqualsEachRequestAlone) {
  EngineOptions o = SmallEngineOptions();
  o.max_batched_tokens = 16;  // long prompts are chunked while others decode
  o.prefix_caching = false;
  auto engine = Make(o);
  const std::vector<Outcome> alone = RunEachAlone(*engine, kCases);
  const std::vector<Outcome> together = RunTogether(*engine, kCases);
  for (size_t i = 0; i < kCases.size(); ++i) {
    EXPECT_EQ(alone[i].tokens.size(), static_cast<size_t>(kCases[i].max_tokens));
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].text, alone[i].text) << "request " << i;
    EXPECT_EQ(together[i].finals, 1);
    EXPECT_EQ(together[i].reason, FinishReason::kLength);
  }
  EXPECT_GT(engine->Stats().models[0].steps_total, 0);
}

TEST_F(EngineTest, ForcedPreemptionEqualsNoPreemption) {
  const EngineOptions big = SmallEngineOptions();
  auto reference = Make(big);
  const std::vector<Case> cases = {{10, 20, 11}, {12, 18, 12}, {9, 22, 13}, {11, 19, 14}};
  const std::vector<Outcome> expected = RunEachAlone(*reference, cases);

  // 12 blocks of 4 positions: each request alone fits (<= 8 blocks), four at once do not.
  EngineOptions tiny = SmallEngineOptions();
  ModelSpec spec;
  spec.kv_min_blocks = 12;
  tiny.kv_memory_bytes = KvBytesOfBlocks(ModelDir(), 12, 4);
  auto engine = Make(tiny, spec);
  ASSERT_EQ(engine->Models()[0].kv_blocks_total, 12);
  const std::vector<Outcome> got = RunTogether(*engine, cases);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << "request " << i << " " << FinishReasonName(got[i].reason) << " "
                                                 << got[i].status.ToString();
  }
  EXPECT_GT(engine->Stats().models[0].preemptions_total, 0);
  EXPECT_EQ(WaitBlocksUsed(*engine, 0), 0);
}

TEST_F(EngineTest, CancelAndDeadlineFreeEveryBlock) {
  auto engine = Make(SmallEngineOptions());
  Recorder rec;
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = engine->Submit(Greedy("tiny", TestPrompt(20 + i, i), 2000), rec.Sink(i));
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  GenerateRequest expired = Greedy("tiny", TestPrompt(30, 9), 2000);
  expired.deadline = Clock::now() + std::chrono::milliseconds(30);
  ASSERT_TRUE(engine->Submit(expired, rec.Sink(10)).ok());
  GenerateRequest already = Greedy("tiny", TestPrompt(8, 9), 5);
  already.deadline = Clock::now() - std::chrono::seconds(1);
  ASSERT_TRUE(engine->Submit(already, rec.Sink(11)).ok());

  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (RequestId id : ids) engine->Cancel(id);
  engine->Cancel(987654);  // unknown: ignored
  ASSERT_TRUE(rec.WaitFinished(6));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(rec.Get(i).reason, FinishReason::kCancelled);
    EXPECT_EQ(rec.Get(i).finals, 1);
    EXPECT_LT(rec.Get(i).tokens.size(), 2000u);
  }
  EXPECT_EQ(rec.Get(10).reason, FinishReason::kDeadline);
  EXPECT_EQ(rec.Get(10).status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(rec.Get(11).reason, FinishReason::kDeadline);
  EXPECT_TRUE(rec.Get(11).tokens.empty());
  EXPECT_EQ(WaitBlocksUsed(*engine, 0), 0);
  EXPECT_EQ(engine->InFlight(), 0);
}

TEST_F(EngineTest, PrefixCacheHitsSkipRecomputationAndChangeNoOutput) {
  EngineOptions off = SmallEngineOptions();
  off.prefix_caching = false;
  auto plain = Make(off);
  auto cached = Make(SmallEngineOptions());
  std::vector<int32_t> system = TestPrompt(40, 77);
  for (int user = 0; user < 3; ++user) {
    std::vector<int32_t> prompt = system;
    for (int32_t t : TestPrompt(5 + user, user)) prompt.push_back(t);
    const Outcome want = RunAlone(*plain, Greedy("tiny", prompt, 10));
    const Outcome got = RunAlone(*cached, Greedy("tiny", prompt, 10));
    EXPECT_EQ(got.tokens, want.tokens) << "user " << user;
    EXPECT_EQ(want.usage.prefix_hit_tokens, 0);
    // The first request fills the cache; later ones share the 40-token system prompt (10 blocks).
    EXPECT_EQ(got.usage.prefix_hit_tokens, user == 0 ? 0 : 40) << "user " << user;
  }
  // The same prompt again: every full block but the one holding the last token is cached.
  std::vector<int32_t> again = system;
  for (int32_t t : TestPrompt(5, 0)) again.push_back(t);
  EXPECT_EQ(RunAlone(*cached, Greedy("tiny", again, 10)).usage.prefix_hit_tokens, 44);
  EXPECT_EQ(cached->Stats().models[0].prefix_hit_tokens_total, 40 + 40 + 44);
}

TEST_F(EngineTest, FiveHundredConcurrentRequestsLoseAndDuplicateNothing) {
  EngineOptions o = SmallEngineOptions();
  o.max_seqs = 64;
  o.max_batched_tokens = 512;
  auto engine = Make(o);
  std::vector<Case> distinct;
  distinct.reserve(20);
  for (int i = 0; i < 20; ++i) distinct.push_back({1 + (i * 7) % 40, 1 + i % 6, 100 + i});
  const std::vector<Outcome> expected = RunEachAlone(*engine, distinct);
  Recorder rec;
  for (int i = 0; i < 500; ++i) {
    const Case& c = distinct[i % distinct.size()];
    ASSERT_TRUE(engine->Submit(Greedy("tiny", TestPrompt(c.prompt_len, c.seed), c.max_tokens), rec.Sink(i)).ok());
  }
  ASSERT_TRUE(rec.WaitFinished(500));
  for (int i = 0; i < 500; ++i) {
    const Outcome got = rec.Get(i);
    const Outcome& want = expected[i % distinct.size()];
    ASSERT_EQ(got.finals, 1) << i;
    ASSERT_EQ(got.tokens, want.tokens) << i;
    ASSERT_EQ(got.usage.generated_tokens, static_cast<int64_t>(want.tokens.size())) << i;
    ASSERT_EQ(got.usage.prompt_tokens, distinct[i % distinct.size()].prompt_len) << i;
  }
  EXPECT_EQ(engine->InFlight(), 0);
  EXPECT_EQ(WaitBlocksUsed(*engine, 0), 0);
}

TEST_F(EngineTest, Df11ModelGivesTheSameTokensAsItsBf16Source) {
  const std::string df11_dir = dir_->path() + "/qwen3-df11";
  auto report = CompressCheckpoint(ModelDir(), df11_dir, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto engine = Make(SmallEngineOptions());
  ASSERT_TRUE(engine->LoadModel({.name = "df11", .path = df11_dir, .kv_min_blocks = 64}).ok());
  Recorder rec;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(engine->Submit(Greedy("tiny", TestPrompt(9 + i, i), 12), rec.Sink(i)).ok());
    GenerateRequest r = Greedy("df11", TestPrompt(9 + i, i), 12);
    ASSERT_TRUE(engine->Submit(r, rec.Sink(10 + i)).ok());
  }
  ASSERT_TRUE(rec.WaitFinished(6));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rec.Get(10 + i).tokens, rec.Get(i).tokens) << i;
  bool df11 = false;
  for (const ModelInfo& m : engine->Models()) df11 |= m.name == "df11" && m.df11;
  EXPECT_TRUE(df11);
}

// The checkpoint's warnings reach the model's info (and so ListModels and the model_ready log):
// a DF11 pattern_dict entry that matches no unit loads, with a warning naming the pattern.
TEST_F(EngineTest, LoadWarningsReachTheModelInfo) {
  const std::string df11_dir = dir_->path() + "/qwen3-df11-warned";
  auto report = CompressCheckpoint(ModelDir(), df11_dir, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  nlohmann::json config;
  std::ifstream(df11_dir + "/config.json") >> config;
  config["dfloat11_config"]["pattern_dict"]["no\\.such\\.module"] = nlohmann::json::array();
  std::ofstream(df11_dir + "/config.json") << config.dump(1);
  auto engine = Make(SmallEngineOptions());
  ASSERT_TRUE(engine->LoadModel({.name = "warned", .path = df11_dir, .kv_min_blocks = 64}).ok());
  std::vector<std::string> warnings;
  for (const ModelInfo& m : engine->Models()) {
    if (m.name == "warned") warnings = m.load_warnings;
    if (m.name == "tiny") {
      EXPECT_TRUE(m.load_warnings.empty()) << m.load_warnings.front();
    }
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("pattern \"no\\.such\\.module\" matches no unit"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace df11
