// Host overlap (EngineOptions::host_overlap) on the CPU backend, where kAlways gives the order of
// work of a CUDA engine: a step's tokens are streamed while the next step runs, so a stop string
// is known a step late. Expected outcomes come from the same requests on an engine without
// overlap (kNever): every id, text, logprob, finish reason and usage equal; the late step is
// counted and its row dropped; every block is freed and nothing is left in flight.
#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "tests/scheduler/engine_harness.h"

namespace df11 {
namespace {

class EngineOverlapTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir("df11_engine_overlap");
    ASSERT_TRUE(WriteTinyModel(dir_->path() + "/m", {.seed = 5}).ok());
  }
  static void TearDownTestSuite() { delete dir_; }

  // kv_blocks > 0: a KV cache of exactly that many blocks (preemption when requests outgrow it).
  static std::unique_ptr<Engine> Make(HostOverlap overlap, int64_t kv_blocks = 0) {
    EngineOptions o = SmallEngineOptions();
    o.host_overlap = overlap;
    o.max_batched_tokens = 24;  // prompts are chunked while others decode
    ModelSpec spec{.name = "tiny", .path = dir_->path() + "/m"};
    if (kv_blocks > 0) {
      o.kv_memory_bytes = KvBytesOfBlocks(spec.path, kv_blocks, o.block_size);
      spec.kv_min_blocks = kv_blocks;
    }
    auto engine = Engine::Create(o);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    const Status st = (*engine)->LoadModel(spec);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return std::move(engine).value();
  }
  // Polls until the model's KV blocks are all free (a late step's are freed when it is collected);
  // returns the model's steps then.
  static int64_t StepsOnceIdle(Engine& engine) {
    for (int i = 0; i < 400; ++i) {
      const EngineStats stats = engine.Stats();
      if (engine.InFlight() == 0 && stats.models[0].kv_blocks_used == 0 && stats.models[0].running == 0) {
        return stats.models[0].steps_total;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "blocks still in use after 2 s";
    return -1;
  }
  static std::string Decode(Engine& engine, const std::vector<int32_t>& ids) {
    return engine.GetTokenizer("tiny")->Decode(ids, /*skip_special_tokens=*/true);
  }

  static ScopedTempDir* dir_;
};
ScopedTempDir* EngineOverlapTest::dir_ = nullptr;

void ExpectSame(const Outcome& got, const Outcome& want, const std::string& what) {
  EXPECT_EQ(got.finals, 1) << what;
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.text, want.text) << what;
  EXPECT_EQ(got.reason, want.reason) << what;
  EXPECT_EQ(got.usage.generated_tokens, want.usage.generated_tokens) << what;
  EXPECT_EQ(got.usage.prompt_tokens, want.usage.prompt_tokens) << what;
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
  for (size_t i = 0; i < got.logprobs.size(); ++i) {
    EXPECT_EQ(got.logprobs[i].token, want.logprobs[i].token) << what << " logprob " << i;
    EXPECT_EQ(got.logprobs[i].logprob, want.logprobs[i].logprob) << what << " logprob " << i;
    EXPECT_EQ(got.logprobs[i].top, want.logprobs[i].top) << what << " logprob " << i;
  }
}

TEST_F(EngineOverlapTest, StopStringEndsAStepLateWithTheSameOutput) {
  auto plain = Make(HostOverlap::kNever);
  auto overlapped = Make(HostOverlap::kAlways);
  const Outcome base = RunAlone(*plain, Greedy("tiny", TestPrompt(12, 3), 20));
  ASSERT_EQ(base.tokens.size(), 20u);
  const int64_t base_steps = StepsOnceIdle(*plain);
  // The whole text up to token 6 as the stop string: it cannot match earlier.
  const std::string stop = Decode(*plain, std::vector<int32_t>(base.tokens.begin(), base.tokens.begin() + 7));
  ASSERT_FALSE(stop.empty());
  GenerateRequest r = Greedy("tiny", TestPrompt(12, 3), 20);
  r.stop_strings = {stop};
  const Outcome want = RunAlone(*plain, r);
  ASSERT_EQ(want.reason, FinishReason::kStop);
  ASSERT_LT(want.tokens.size(), base.tokens.size());
  const int64_t plain_steps = StepsOnceIdle(*plain) - base_steps;
  EXPECT_EQ(plain_steps, static_cast<int64_t>(want.tokens.size()));  // one prefill, then a token a step

  // With overlap the step after the stop was launched before the stop string was seen: counted,
  // its row dropped, its blocks freed once collected.
  EXPECT_EQ(RunAlone(*overlapped, Greedy("tiny", TestPrompt(12, 3), 20)).tokens, base.tokens);
  const int64_t overlapped_base_steps = StepsOnceIdle(*overlapped);
  EXPECT_EQ(overlapped_base_steps, base_steps);  // max_tokens is known from the token: no late step
  ExpectSame(RunAlone(*overlapped, r), want, "stop string");
  EXPECT_EQ(StepsOnceIdle(*overlapped) - overlapped_base_steps, plain_steps + 1);
}

TEST_F(EngineOverlapTest, ConcurrentMixedRequestsGetTheSameOutputs) {
  auto plain = Make(HostOverlap::kNever);
  auto overlapped = Make(HostOverlap::kAlways);
  // Every way a request ends, several at once, some mid-prefill of others; stops from each
  // request's own greedy tokens.
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 12; ++i) {
    GenerateRequest r = Greedy("tiny", TestPrompt(5 + 7 * i % 40, i), 6 + 3 * i);
    const Outcome own = RunAlone(*plain, r);
    ASSERT_GE(own.tokens.size(), 6u);
    switch (i % 4) {
      case 0:
        break;
      case 1:  // the text up to its token 4 (cannot match earlier), and one that never matches
        r.stop_strings = {"never-matches",
                          Decode(*plain, std::vector<int32_t>(own.tokens.begin(), own.tokens.begin() + 5))};
        break;
      case 2:
        r.stop_token_ids = {own.tokens[3]};
        r.logprobs = true;
        r.sampling.top_logprobs = 3;
        break;
      case 3:
        r.sampling.temperature = 0.9f;
        r.sampling.top_p = 0.9f;
        r.sampling.frequency_penalty = 0.5f;
        r.sampling.seed = 100 + i;
        break;
    }
    requests.push_back(r);
  }
  auto run = [&](Engine& engine) {
    Recorder rec;
    for (size_t i = 0; i < requests.size(); ++i) EXPECT_TRUE(engine.Submit(requests[i], rec.Sink(i)).ok());
    EXPECT_TRUE(rec.WaitFinished(static_cast<int>(requests.size())));
    std::vector<Outcome> out;
    for (size_t i = 0; i < requests.size(); ++i) out.push_back(rec.Get(i));
    return out;
  };
  const std::vector<Outcome> want = run(*plain);
  const std::vector<Outcome> got = run(*overlapped);
  int stopped = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    ExpectSame(got[i], want[i], "request " + std::to_string(i));
    stopped += want[i].reason == FinishReason::kStop;
  }
  EXPECT_EQ(stopped, 6);  // every stop string and stop id ended its request
  StepsOnceIdle(*overlapped);
}

// Preemption and stop strings together: with 12 blocks of 4 positions the newest running request is
// preempted again and again, also right after the token its stop string ends on was appended (the
// request is then waiting when its text is streamed).
TEST_F(EngineOverlapTest, StopStringsOfPreemptedRequestsGiveTheSameOutputs) {
  auto plain = Make(HostOverlap::kNever);
  std::vector<GenerateRequest> requests;
  std::vector<Outcome> want;
  for (int i = 0; i < 8; ++i) {
    GenerateRequest r = Greedy("tiny", TestPrompt(9 + i % 3, 40 + i), 22);
    const Outcome own = RunAlone(*plain, r);
    ASSERT_EQ(own.tokens.size(), 22u);
    const size_t k = 3 + (i * 5) % 17;  // the text up to token k (cannot match earlier)
    r.stop_strings = {Decode(*plain, std::vector<int32_t>(own.tokens.begin(), own.tokens.begin() + k + 1))};
    want.push_back(RunAlone(*plain, r));
    requests.push_back(r);
  }
  auto overlapped = Make(HostOverlap::kAlways, 12);
  for (int round = 0; round < 3; ++round) {
    Recorder rec;
    for (size_t i = 0; i < requests.size(); ++i) ASSERT_TRUE(overlapped->Submit(requests[i], rec.Sink(i)).ok());
    ASSERT_TRUE(rec.WaitFinished(static_cast<int>(requests.size())));
    for (size_t i = 0; i < requests.size(); ++i) ExpectSame(rec.Get(i), want[i], "request " + std::to_string(i));
    StepsOnceIdle(*overlapped);
  }
  EXPECT_GT(overlapped->Stats().models[0].preemptions_total, 0);
}

TEST_F(EngineOverlapTest, CancelWhileAStepIsInFlightEndsOnceAndFreesEveryBlock) {
  auto engine = Make(HostOverlap::kAlways);
  for (int round = 0; round < 5; ++round) {
    Recorder rec;
    std::vector<RequestId> ids;
    for (int i = 0; i < 6; ++i) {
      auto id = engine->Submit(Greedy("tiny", TestPrompt(10 + i, round * 10 + i), 5000), rec.Sink(i));
      ASSERT_TRUE(id.ok());
      ids.push_back(*id);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + 3 * round));
    for (RequestId id : ids) engine->Cancel(id);
    ASSERT_TRUE(rec.WaitFinished(6));
    for (int i = 0; i < 6; ++i) {
      const Outcome o = rec.Get(i);
      EXPECT_EQ(o.finals, 1);
      EXPECT_EQ(o.reason, FinishReason::kCancelled);
      EXPECT_EQ(o.usage.generated_tokens, static_cast<int64_t>(o.tokens.size()));
    }
    StepsOnceIdle(*engine);
  }
}

// A sink that throws (a broken contract: sinks must not) ends that model's requests with an error,
// each with exactly one final event, with or without overlap; the engine keeps serving.
TEST_F(EngineOverlapTest, ASinkThatThrowsEndsTheModelsRequestsOnce) {
  for (const HostOverlap overlap : {HostOverlap::kNever, HostOverlap::kAlways}) {
    auto engine = Make(overlap);
    Recorder rec;
    EventSink record = rec.Sink(1);
    bool thrown = false;
    auto throwing = [&](RequestEvent&& e) {
      if (!e.finished && !e.token_ids.empty() && !thrown) {
        thrown = true;
        throw std::runtime_error("sink refused");
      }
      record(std::move(e));
    };
    ASSERT_TRUE(engine->Submit(Greedy("tiny", TestPrompt(8, 1), 5000), rec.Sink(0)).ok());
    ASSERT_TRUE(engine->Submit(Greedy("tiny", TestPrompt(9, 2), 5000), throwing).ok());
    ASSERT_TRUE(rec.WaitFinished(2));
    for (int i = 0; i < 2; ++i) {
      const Outcome o = rec.Get(i);
      EXPECT_EQ(o.finals, 1) << i;
      EXPECT_EQ(o.reason, FinishReason::kError) << i;
      EXPECT_NE(o.status.message().find("sink refused"), std::string::npos) << o.status.ToString();
    }
    EXPECT_EQ(engine->InFlight(), 0);
    StepsOnceIdle(*engine);
    // Every token went out once: request 0's are its greedy tokens (none sent twice); still serving.
    const Outcome a = rec.Get(0);
    ASSERT_FALSE(a.tokens.empty());
    const int64_t n = static_cast<int64_t>(a.tokens.size());
    EXPECT_EQ(RunAlone(*engine, Greedy("tiny", TestPrompt(8, 1), n)).tokens, a.tokens);
  }
}

TEST_F(EngineOverlapTest, UnloadAndShutdownWithAStepInFlightEndEveryRequestOnce) {
  Recorder rec;
  {
    auto engine = Make(HostOverlap::kAlways);
    ASSERT_TRUE(engine->LoadModel({.name = "other", .path = dir_->path() + "/m", .kv_min_blocks = 64}).ok());
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(engine->Submit(Greedy(i % 2 ? "other" : "tiny", TestPrompt(8, i), 5000), rec.Sink(i)).ok());
    }
    // Until every request has tokens: both models are stepping, one of them with a step in flight.
    for (int t = 0; t < 400; ++t) {
      int started = 0;
      for (int i = 0; i < 4; ++i) started += !rec.Get(i).tokens.empty();
      if (started == 4) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(engine->UnloadModel("other").ok());
    ASSERT_TRUE(rec.WaitFinished(2));
  }  // the destructor ends the rest
  for (int i = 0; i < 4; ++i) {
    const Outcome o = rec.Get(i);
    EXPECT_EQ(o.finals, 1) << i;
    EXPECT_EQ(o.reason, FinishReason::kCancelled) << i;
    EXPECT_GT(o.tokens.size(), 0u) << i;
  }
}

}  // namespace
}  // namespace df11
