// Engine outputs per request on a tiny random model with the tiny tokenizer: text deltas equal the
// tokenizer's Decode of the ids, max_tokens, stop token ids, eos / ignore_eos, stop strings that
// span tokens (never emitted), logprobs, and invalid requests rejected at Submit. Expected values
// come from a plain greedy run of the same request and from Tokenizer::Decode.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "tests/scheduler/engine_harness.h"

namespace df11 {
namespace {

class EngineOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir("df11_engine_out");
    ASSERT_TRUE(WriteTinyModel(dir_->path() + "/m", {.seed = 3}).ok());
    auto engine = Engine::Create(SmallEngineOptions());
    ASSERT_TRUE(engine.ok());
    engine_ = engine->release();
    ASSERT_TRUE(engine_->LoadModel({.name = "tiny", .path = dir_->path() + "/m"}).ok());
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete dir_;
  }
  static Outcome Run(GenerateRequest r) { return RunAlone(*engine_, std::move(r)); }
  static std::string Decode(const std::vector<int32_t>& ids) {
    return engine_->GetTokenizer("tiny")->Decode(ids, /*skip_special_tokens=*/true);
  }

  static ScopedTempDir* dir_;
  static Engine* engine_;
};
ScopedTempDir* EngineOutputTest::dir_ = nullptr;
Engine* EngineOutputTest::engine_ = nullptr;

const std::vector<int32_t> kPrompt = {kTinyImStart, 'u', 's', 'e', 'r', '\n', 'h', 'i', kTinyImEnd, '\n'};

TEST_F(EngineOutputTest, MaxTokensAndTextEqualDecode) {
  const Outcome o = Run(Greedy("tiny", kPrompt, 24));
  EXPECT_EQ(o.reason, FinishReason::kLength);
  ASSERT_EQ(o.tokens.size(), 24u);
  EXPECT_EQ(o.usage.generated_tokens, 24);
  EXPECT_EQ(o.usage.prompt_tokens, static_cast<int64_t>(kPrompt.size()));
  EXPECT_EQ(o.text, Decode(o.tokens));
  EXPECT_FALSE(o.text.empty());
  EXPECT_GT(o.timings.total_seconds, 0);
  EXPECT_GE(o.timings.total_seconds, o.timings.first_token_seconds);
}

TEST_F(EngineOutputTest, StopTokenIdEndsWithStopAndIsNotText) {
  const Outcome base = Run(Greedy("tiny", kPrompt, 16));
  // First position k >= 1 whose id did not occur before, so the stop id first appears there.
  size_t k = 1;
  while (std::find(base.tokens.begin(), base.tokens.begin() + k, base.tokens[k]) != base.tokens.begin() + k) ++k;
  ASSERT_LT(k, base.tokens.size());
  GenerateRequest r = Greedy("tiny", kPrompt, 16);
  r.stop_token_ids = {base.tokens[k]};
  const Outcome o = Run(r);
  EXPECT_EQ(o.reason, FinishReason::kStop);
  EXPECT_EQ(o.tokens, std::vector<int32_t>(base.tokens.begin(), base.tokens.begin() + k + 1));
  EXPECT_EQ(o.text, Decode(std::vector<int32_t>(base.tokens.begin(), base.tokens.begin() + k)));
}

TEST_F(EngineOutputTest, EosStopsUnlessIgnored) {
  const Outcome base = Run(Greedy("tiny", kPrompt, 12));
  size_t k = 1;
  while (std::find(base.tokens.begin(), base.tokens.begin() + k, base.tokens[k]) != base.tokens.begin() + k) ++k;
  ASSERT_LT(k, base.tokens.size());
  // Same weights, but generation_config.json makes base.tokens[k] an end-of-sequence id.
  const std::string dir = dir_->path() + "/eos";
  ASSERT_TRUE(WriteTinyModel(dir, {.seed = 3}).ok());
  std::ofstream(dir + "/generation_config.json")
      << "{\"eos_token_id\": [" << kTinyImEnd << ", " << base.tokens[k] << "]}\n";
  ASSERT_TRUE(engine_->LoadModel({.name = "eos", .path = dir, .kv_min_blocks = 64}).ok());
  GenerateRequest r = Greedy("eos", kPrompt, 12);
  r.ignore_eos = false;
  const Outcome stopped = Run(r);
  EXPECT_EQ(stopped.reason, FinishReason::kEos);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(base.tokens.begin(), base.tokens.begin() + k + 1));
  r.ignore_eos = true;
  const Outcome ignored = Run(r);
  EXPECT_EQ(ignored.reason, FinishReason::kLength);
  EXPECT_EQ(ignored.tokens, base.tokens);
  ASSERT_TRUE(engine_->UnloadModel("eos").ok());
}

TEST_F(EngineOutputTest, StopStringSpanningTokensIsCutAndNeverEmitted) {
  const Outcome base = Run(Greedy("tiny", kPrompt, 30));
  const std::string full = Decode(base.tokens);
  // A boundary between two tokens whose decoded prefix is final text; the stop string is the
  // last byte before it and the first byte after it (ASCII on both sides).
  std::string stop;
  size_t stop_at = 0;
  for (size_t k = 2; k + 1 < base.tokens.size() && stop.empty(); ++k) {
    const std::string prefix = Decode(std::vector<int32_t>(base.tokens.begin(), base.tokens.begin() + k));
    if (prefix.empty() || prefix.size() >= full.size() || full.compare(0, prefix.size(), prefix) != 0) continue;
    const unsigned char before = prefix.back(), after = full[prefix.size()];
    if (before < 0x80 && after < 0x80) {
      stop = full.substr(prefix.size() - 1, 2);
      stop_at = full.find(stop);
    }
  }
  ASSERT_FALSE(stop.empty()) << "no ASCII token boundary in: " << full;
  GenerateRequest r = Greedy("tiny", kPrompt, 30);
  r.stop_strings = {"never-matches", stop};
  const Outcome o = Run(r);
  EXPECT_EQ(o.reason, FinishReason::kStop);
  EXPECT_EQ(o.text, full.substr(0, stop_at));
  EXPECT_LT(o.tokens.size(), base.tokens.size());
  EXPECT_EQ(o.tokens, std::vector<int32_t>(base.tokens.begin(), base.tokens.begin() + o.tokens.size()));
}

TEST_F(EngineOutputTest, LogprobsOnePerTokenWithTopAlternatives) {
  GenerateRequest r = Greedy("tiny", kPrompt, 5);
  r.logprobs = true;
  r.sampling.top_logprobs = 3;
  const Outcome o = Run(r);
  ASSERT_EQ(o.logprobs.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(o.logprobs[i].token, o.tokens[i]);
    EXPECT_LE(o.logprobs[i].logprob, 0.0f);
    ASSERT_EQ(o.logprobs[i].top.size(), 3u);
    EXPECT_EQ(o.logprobs[i].top[0].first, o.tokens[i]);  // greedy picks the most likely
  }
  EXPECT_TRUE(Run(Greedy("tiny", kPrompt, 2)).logprobs.empty());
}

TEST_F(EngineOutputTest, SeededSamplingIsReproducible) {
  GenerateRequest r = Greedy("tiny", kPrompt, 12);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 1234;
  EXPECT_EQ(Run(r).tokens, Run(r).tokens);
}

TEST_F(EngineOutputTest, InvalidRequestsAreRejectedAtSubmit) {
  bool called = false;
  EventSink sink = [&](RequestEvent&&) { called = true; };
  auto code = [&](GenerateRequest r) { return engine_->Submit(std::move(r), sink).status().code(); };
  EXPECT_EQ(code(Greedy("nope", kPrompt, 4)), StatusCode::kNotFound);
  EXPECT_EQ(code(Greedy("tiny", {}, 4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Greedy("tiny", {1, static_cast<int32_t>(kTinyTokenizerVocab)}, 4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Greedy("tiny", {-1}, 4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Greedy("tiny", std::vector<int32_t>(2048, 5), 4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Greedy("tiny", kPrompt, 0)), StatusCode::kInvalidArgument);
  GenerateRequest bad = Greedy("tiny", kPrompt, 4);
  bad.sampling.temperature = -1;
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  bad = Greedy("tiny", kPrompt, 4);
  bad.stop_strings = {""};
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  bad = Greedy("tiny", kPrompt, 4);
  bad.stop_token_ids = {100000};
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  const Status missing = engine_->Submit(Greedy("tiny", {1, 400}, 4), sink).status();
  EXPECT_NE(missing.message().find("prompt_tokens[1]"), std::string::npos) << missing.ToString();
  EXPECT_FALSE(called);
}

// Sampling parameters have one check, at Submit (the sampler trusts them for every token after):
// each bad field is refused there with INVALID_ARGUMENT naming it, and the sink is never called.
TEST_F(EngineOutputTest, BadSamplingParametersAreRefusedAtSubmitNamingTheField) {
  bool called = false;
  EventSink sink = [&](RequestEvent&&) { called = true; };
  auto refused = [&](void (*edit)(SamplingParams&), const std::string& field) {
    GenerateRequest r = Greedy("tiny", kPrompt, 4);
    edit(r.sampling);
    RejectReason why = RejectReason::kNone;
    const Status st = engine_->Submit(std::move(r), sink, &why).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_EQ(st.message().rfind(field, 0), 0u) << st.ToString();
    EXPECT_EQ(why, RejectReason::kInvalid) << field;
  };
  refused([](SamplingParams& p) { p.temperature = -0.5f; }, "temperature");
  refused([](SamplingParams& p) { p.temperature = std::numeric_limits<float>::infinity(); }, "temperature");
  refused([](SamplingParams& p) { p.temperature = std::nanf(""); }, "temperature");
  refused([](SamplingParams& p) { p.top_k = -1; }, "top_k");
  refused([](SamplingParams& p) { p.top_p = 0; }, "top_p");
  refused([](SamplingParams& p) { p.top_p = 1.5f; }, "top_p");
  refused([](SamplingParams& p) { p.min_p = -0.1f; }, "min_p");
  refused([](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty");
  refused([](SamplingParams& p) { p.presence_penalty = std::nanf(""); }, "presence_penalty");
  refused([](SamplingParams& p) { p.frequency_penalty = -std::numeric_limits<float>::infinity(); },
          "frequency_penalty");
  refused([](SamplingParams& p) { p.top_logprobs = -1; }, "top_logprobs");
  refused([](SamplingParams& p) { p.top_logprobs = kMaxTopLogprobs + 1; }, "top_logprobs");
  EXPECT_FALSE(called);
  // The edges are accepted and run to the end.
  GenerateRequest edge = Greedy("tiny", kPrompt, 3);
  edge.sampling = {.temperature = 2.0f, .top_k = 1, .top_p = 1.0f, .min_p = 1.0f, .top_logprobs = kMaxTopLogprobs};
  EXPECT_EQ(Run(edge).tokens.size(), 3u);
}

// Submit says why it refused a request, as a type (metrics label it), not only as a message.
TEST_F(EngineOutputTest, RejectionReasonsAreTyped) {
  EventSink sink = [](RequestEvent&&) {};
  auto reason = [&](GenerateRequest r) {
    RejectReason why = RejectReason::kNone;
    (void)engine_->Submit(std::move(r), sink, &why);
    return why;
  };
  EXPECT_EQ(reason(Greedy("nope", kPrompt, 4)), RejectReason::kUnknownModel);
  EXPECT_EQ(reason(Greedy("tiny", std::vector<int32_t>(2048, 5), 4)), RejectReason::kPromptTooLong);
  EXPECT_EQ(reason(Greedy("tiny", kPrompt, 0)), RejectReason::kInvalid);
  EXPECT_EQ(reason(Greedy("tiny", {-1}, 4)), RejectReason::kInvalid);
  GenerateRequest long_stop = Greedy("tiny", kPrompt, 4);
  long_stop.stop_strings = {std::string(300, 'a')};  // long, but valid for the engine
  EXPECT_EQ(reason(long_stop), RejectReason::kNone);
  EXPECT_STREQ(RejectReasonName(RejectReason::kPromptTooLong), "too_long");
  EXPECT_STREQ(RejectReasonName(RejectReason::kQueueFull), "queue_full");
}

TEST(ModelSpecCheck, OneValidatorNamesTheField) {
  ModelSpec spec{.name = "m", .path = "/p"};
  EXPECT_TRUE(ValidateModelSpec(spec).ok());
  auto message = [&](auto edit) {
    ModelSpec s = spec;
    edit(s);
    return ValidateModelSpec(s).message();
  };
  EXPECT_EQ(message([](ModelSpec& s) { s.kv_share = std::numeric_limits<double>::infinity(); }),
            "kv_share: must be in (0, 1e6], got inf");
  EXPECT_EQ(message([](ModelSpec& s) { s.kv_share = std::nan(""); }), "kv_share: must be in (0, 1e6], got nan");
  EXPECT_EQ(message([](ModelSpec& s) { s.weight = -1; }), "weight: must be in (0, 1e6], got -1");
  EXPECT_EQ(message([](ModelSpec& s) { s.max_seqs = 2000000; }), "max_seqs: must be in [0, 1000000], got 2000000");
  EXPECT_EQ(message([](ModelSpec& s) { s.kv_min_blocks = -1; }), "kv_min_blocks: must be in [0, 2^40], got -1");
  EXPECT_EQ(message([](ModelSpec& s) { s.name = ""; }), "name: must be 1 to 128 bytes, got 0");
  EXPECT_EQ(message([](ModelSpec& s) { s.name = "a\nb"; }),
            "name: byte 1 is not printable ASCII (10); names are printable ASCII without spaces");
  EXPECT_EQ(message([](ModelSpec& s) { s.path = "/a\rb"; }), "path: byte 2 is a control character");
}

TEST(EngineErrors, LoadAndOptionsErrors) {
  EngineOptions o = SmallEngineOptions();
  o.max_seqs = 0;
  EXPECT_EQ(Engine::Create(o).status().code(), StatusCode::kInvalidArgument);
  ScopedTempDir tmp("df11_engine_err");
  ASSERT_TRUE(WriteTinyModel(tmp.path() + "/m", {.tokenizer = false}).ok());
  auto engine = Engine::Create(SmallEngineOptions());
  ASSERT_TRUE(engine.ok());
  EXPECT_FALSE((*engine)->LoadModel({.name = "x", .path = tmp.path() + "/missing"}).ok());
  ASSERT_TRUE((*engine)->LoadModel({.name = "x", .path = tmp.path() + "/m"}).ok());
  EXPECT_EQ((*engine)->LoadModel({.name = "x", .path = tmp.path() + "/m"}).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ((*engine)->GetTokenizer("x"), nullptr);
  GenerateRequest r = Greedy("x", {1, 2}, 2);
  r.stop_strings = {"a"};  // needs a tokenizer
  EXPECT_EQ((*engine)->Submit(r, [](RequestEvent&&) {}).status().code(), StatusCode::kInvalidArgument);
  // Minimum KV over the budget: refused with numbers.
  EXPECT_EQ((*engine)->LoadModel({.name = "y", .path = tmp.path() + "/m", .kv_min_blocks = 1 << 30}).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ((*engine)->UnloadModel("nope").code(), StatusCode::kNotFound);
  (*engine)->Drain();
  EXPECT_EQ((*engine)->Submit(Greedy("x", {1, 2}, 2), [](RequestEvent&&) {}).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace df11
