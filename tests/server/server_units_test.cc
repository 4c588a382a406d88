// Unit tests of the daemon's pieces that need no engine: request translation, API keys, config.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <future>
#include <thread>

#include "server/auth.h"
#include "server/config.h"
#include "server/request_log.h"
#include "server/translate.h"
#include "server/work_queue.h"
#include "tests/scheduler/engine_test_util.h"

namespace df11::server {
namespace {

pb::GenerateRequest Valid() {
  pb::GenerateRequest r;
  r.set_model("m");
  r.mutable_tokens()->add_ids(1);
  return r;
}

TEST(Translate, DefaultsFollowTheProtoComments) {
  auto r = TranslateGenerateRequest(Valid());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->max_tokens, 256);
  EXPECT_FLOAT_EQ(r->sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r->sampling.top_p, 1.0f);
  EXPECT_TRUE(r->skip_special_tokens);
  EXPECT_FALSE(r->logprobs);
}

TEST(Translate, CopiesEveryField) {
  pb::GenerateRequest in = Valid();
  auto* s = in.mutable_sampling();
  s->set_temperature(0.5f);
  s->set_top_p(0.9f);
  s->set_top_k(40);
  s->set_min_p(0.05f);
  s->set_repetition_penalty(1.1f);
  s->set_presence_penalty(0.5f);
  s->set_frequency_penalty(-0.5f);
  s->set_seed(99);
  in.set_max_tokens(7);
  in.add_stop("\n\n");
  in.add_stop_token_ids(3);
  in.set_ignore_eos(true);
  in.set_top_logprobs(2);
  in.set_priority(5);
  in.set_request_id("abc");
  in.set_skip_special_tokens(false);
  auto r = TranslateGenerateRequest(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FLOAT_EQ(r->sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r->sampling.top_p, 0.9f);
  EXPECT_EQ(r->sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r->sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r->sampling.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(r->sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r->sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(r->sampling.seed, 99u);
  EXPECT_EQ(r->sampling.top_logprobs, 2);
  EXPECT_TRUE(r->logprobs);
  EXPECT_EQ(r->max_tokens, 7);
  EXPECT_EQ(r->stop_strings, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(r->stop_token_ids, std::vector<int32_t>{3});
  EXPECT_TRUE(r->ignore_eos);
  EXPECT_EQ(r->priority, 5);
  EXPECT_EQ(r->client_request_id, "abc");
  EXPECT_FALSE(r->skip_special_tokens);
}

TEST(Translate, ModelInfoCarriesTheLoadsWarningsAndTier) {
  ModelInfo info;
  info.name = "m";
  info.df11 = true;
  info.weight_bytes = 68;
  info.bf16_weight_bytes = 100;
  info.tier = ModelTier::kHost;
  info.tier_error = "no room";
  info.load_warnings = {"model.layers.3.mlp.down_proj: no lane streams (why); decoded before its GEMM",
                        "weights copied to the device without page-locked staging (slower load): refused"};
  pb::ModelInfo out;
  FillModelInfo(info, &out);
  EXPECT_EQ(out.name(), "m");
  EXPECT_TRUE(out.df11());
  EXPECT_DOUBLE_EQ(out.compression_ratio(), 0.68);
  EXPECT_EQ(out.tier(), pb::MODEL_TIER_HOST);
  EXPECT_EQ(out.tier_error(), "no room");
  ASSERT_EQ(out.load_warnings_size(), 2);
  EXPECT_EQ(out.load_warnings(0), info.load_warnings[0]);
  EXPECT_EQ(out.load_warnings(1), info.load_warnings[1]);
  pb::ModelInfo clean;
  FillModelInfo(ModelInfo{}, &clean);
  EXPECT_EQ(clean.load_warnings_size(), 0);
}

TEST(Translate, RejectsOutOfRangeNamingTheField) {
  struct Case {
    std::function<void(pb::GenerateRequest&)> edit;
    const char* field;
  };
  const std::vector<Case> cases = {
      {[](auto& r) { r.mutable_sampling()->set_temperature(NAN); }, "sampling.temperature"},
      {[](auto& r) { r.mutable_sampling()->set_top_p(0.0f); }, "sampling.top_p"},
      {[](auto& r) { r.mutable_sampling()->set_min_p(1.5f); }, "sampling.min_p"},
      {[](auto& r) { r.mutable_sampling()->set_repetition_penalty(0.0f); }, "sampling.repetition_penalty"},
      {[](auto& r) { r.mutable_sampling()->set_presence_penalty(2.5f); }, "sampling.presence_penalty"},
      {[](auto& r) { r.mutable_sampling()->set_frequency_penalty(-3.0f); }, "sampling.frequency_penalty"},
      {[](auto& r) { r.set_max_tokens(-1); }, "max_tokens"},
      {[](auto& r) { r.set_top_logprobs(-1); }, "top_logprobs"},
      {[](auto& r) { r.add_stop(std::string(300, 'a')); }, "stop[0]"},
      {[](auto& r) { r.add_stop("\xe2\x82"); }, "stop[0]"},
      {[](auto& r) {
         for (int i = 0; i < 17; ++i) r.add_stop("x");
       },
       "stop"},
      {[](auto& r) { r.add_stop_token_ids(-2); }, "stop_token_ids[0]"},
      {[](auto& r) { r.set_request_id(std::string(200, 'r')); }, "request_id"},
      {[](auto& r) { r.clear_model(); }, "model"},
  };
  for (const auto& c : cases) {
    pb::GenerateRequest in = Valid();
    c.edit(in);
    auto r = TranslateGenerateRequest(in);
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(r.status().message().rfind(std::string(c.field) + ":", 0), 0u) << r.status().message();
  }
}

TEST(Translate, Utf8CheckNamesTheByteOffset) {
  EXPECT_TRUE(CheckUtf8("h\xc3\xa9llo", "text").ok());
  Status s = CheckUtf8("ab\xed\xa0\x80", "text");  // a UTF-16 surrogate encoded as UTF-8
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "text: invalid UTF-8 at byte 2");
}

TEST(Translate, FinalStatusAndRetryHint) {
  RequestEvent e;
  e.finished = true;
  e.finish_reason = FinishReason::kEos;
  EXPECT_TRUE(FinalStatus(e).ok());
  e.finish_reason = FinishReason::kDeadline;
  EXPECT_EQ(FinalStatus(e).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  e.finish_reason = FinishReason::kCancelled;
  EXPECT_EQ(FinalStatus(e).error_code(), grpc::StatusCode::CANCELLED);
  e.finish_reason = FinishReason::kError;
  e.status = Internal("boom");
  EXPECT_EQ(FinalStatus(e).error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(FinalStatus(e).error_message(), "boom");
  EXPECT_GT(RetryAfterMs(ResourceExhausted("full")), 0);
  EXPECT_EQ(RetryAfterMs(InvalidArgument("x")), 0);
}

TEST(Translate, TokenIdsAreCheckedAgainstTheModelsVocabularyNamingTheField) {
  pb::GenerateRequest request;
  request.set_model("m");
  request.mutable_tokens()->add_ids(3);
  request.mutable_tokens()->add_ids(10);
  PromptSources sources;
  sources.vocab_size = 10;
  auto prompt = BuildPrompt(request, sources);
  ASSERT_FALSE(prompt.ok());
  EXPECT_EQ(prompt.status().message(), "tokens.ids[1]: 10 is outside the vocabulary [0, 10)");
  sources.vocab_size = 11;
  EXPECT_TRUE(BuildPrompt(request, sources).ok());
}

TEST(RequestLog, ClientTextCannotStartALineOrPoseAsAField) {
  EXPECT_EQ(LogValue("qwen3-8b"), "qwen3-8b");
  EXPECT_EQ(LogValue("ipv4:127.0.0.1:5000"), "ipv4:127.0.0.1:5000");
  EXPECT_EQ(LogValue(""), "\"\"");
  EXPECT_EQ(LogValue("a\nrequest id=1"), "\"a\\nrequest id=1\"");
  EXPECT_EQ(LogValue("x status=OK"), "\"x status=OK\"");
  EXPECT_EQ(LogValue("q\"\\\r\t\x01\x7f\xc3\xa9"), "\"q\\\"\\\\\\r\\t\\x01\\x7f\\xc3\\xa9\"");
}

TEST(WorkQueue, BoundedQueueRefusesAndCancelsWhatIsLeft) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0}, cancelled{0};
  std::thread releaser;
  {
    WorkQueue queue(2);
    std::promise<void> running;
    ASSERT_TRUE(queue.TryPost([&, released](bool run) {
      running.set_value();
      if (run) released.wait();
      ran++;
    }).ok());
    running.get_future().wait();  // the worker holds the first job; two may wait
    auto count = [&](bool run) { (run ? ran : cancelled)++; };
    EXPECT_TRUE(queue.TryPost(count).ok());
    EXPECT_TRUE(queue.TryPost(count).ok());
    const Status full = queue.TryPost(count);
    EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(full.message(), "2 admin operations are already waiting; retry later");
    releaser = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release.set_value();
    });
  }  // destruction: the running job finishes; the queued ones it had not started are cancelled
  releaser.join();
  EXPECT_EQ(ran.load() + cancelled.load(), 3);
  EXPECT_GE(ran.load(), 1);
}

TEST(Auth, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret2"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(Auth, UserAndAdminKeys) {
  using Md = std::multimap<grpc::string_ref, grpc::string_ref>;
  auto keys = ApiKeys::Load({"u1"}, "", {"a1"}, "");
  ASSERT_TRUE(keys.ok());
  Md none;
  Md user = {{"authorization", "Bearer u1"}};
  Md admin = {{"authorization", "Bearer a1"}};
  Md bad = {{"authorization", "Bearer u2"}};
  Md basic = {{"authorization", "Basic u1"}};
  EXPECT_EQ(keys->Check(none, false).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(keys->Check(bad, false).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(keys->Check(basic, false).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(keys->Check(user, false).ok());
  EXPECT_TRUE(keys->Check(admin, false).ok());
  EXPECT_EQ(keys->Check(user, true).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(keys->Check(admin, true).ok());
  auto open = ApiKeys::Load({}, "", {}, "");
  EXPECT_TRUE(open->Check(none, true).ok());
  auto user_only = ApiKeys::Load({"u1"}, "", {}, "");
  EXPECT_TRUE(user_only->Check(user, true).ok()) << "no admin keys: a user key is enough";
}

TEST(Auth, KeyFiles) {
  ScopedTempDir tmp("auth");
  std::ofstream(tmp.path() + "/keys") << "# comment\n\n  k1  \nk2\r\n";
  auto keys = ApiKeys::Load({}, tmp.path() + "/keys", {}, "");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  using Md = std::multimap<grpc::string_ref, grpc::string_ref>;
  EXPECT_TRUE(keys->Check(Md{{"authorization", "Bearer k1"}}, false).ok());
  EXPECT_TRUE(keys->Check(Md{{"authorization", "Bearer k2"}}, false).ok());
  EXPECT_EQ(ApiKeys::Load({}, tmp.path() + "/missing", {}, "").status().code(), StatusCode::kNotFound);
  std::ofstream(tmp.path() + "/bad") << "ok\nhas space\n";
  auto bad = ApiKeys::Load({}, tmp.path() + "/bad", {}, "");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("/bad:2"), std::string::npos) << bad.status().message();
}

TEST(Config, ModelsFile) {
  auto specs = ParseModelsConfig(
      R"({"models": [{"name": "a", "path": "/x", "kv_share": 2.5, "weight": 3, "max_seqs": 8},
                     {"name": "b", "path": "/y", "priority": 2, "pinned": true, "resident_bf16": true,
                      "tile_max_tokens": 32}]})",
      "cfg.json");
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].name, "a");
  EXPECT_EQ((*specs)[0].path, "/x");
  EXPECT_DOUBLE_EQ((*specs)[0].kv_share, 2.5);
  EXPECT_DOUBLE_EQ((*specs)[0].weight, 3.0);
  EXPECT_EQ((*specs)[0].max_seqs, 8);
  EXPECT_DOUBLE_EQ((*specs)[1].weight, 2.0);
  EXPECT_DOUBLE_EQ((*specs)[1].kv_share, 1.0);
  EXPECT_FALSE((*specs)[0].pinned || (*specs)[0].resident_bf16);
  EXPECT_TRUE((*specs)[1].pinned && (*specs)[1].resident_bf16);
  EXPECT_EQ((*specs)[0].tile_max_tokens, 64);
  EXPECT_EQ((*specs)[1].tile_max_tokens, 32);
}

TEST(Config, ModelsFileErrorsNameThePlace) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "cfg.json: not valid JSON"},
      {"[]", "cfg.json: expected a JSON object"},
      {R"({"modles": []})", "cfg.json: modles: unknown key"},
      {R"({"models": {}})", "cfg.json: models: expected an array"},
      {R"({"models": [{"path": "/x"}]})", "cfg.json: models[0].name: required"},
      {R"({"models": [{"name": "a", "path": "/x", "kv_share": 0}]})", "cfg.json: models[0].kv_share: must be in (0, 1e6], got 0"},
      {R"({"models": [{"name": "a", "path": "/x", "kv_share": 1e300}]})", "cfg.json: models[0].kv_share: must be in (0, 1e6], got 1e+300"},
      {R"({"models": [{"name": "a\nb", "path": "/x"}]})",
       "cfg.json: models[0].name: byte 1 is not printable ASCII (10); names are printable ASCII without spaces"},
      {R"({"models": [{"name": "a", "path": "/x", "max_seqs": 1.5}]})", "cfg.json: models[0].max_seqs: expected an integer"},
      {R"({"models": [{"name": "a", "path": "/x", "colour": 1}]})", "cfg.json: models[0].colour: unknown key"},
      {R"({"models": [{"name": "a", "path": "/x", "resident_bf16": 1}]})",
       "cfg.json: models[0].resident_bf16: expected true or false"},
      {R"({"models": [{"name": "a", "path": "/x", "tile_max_tokens": 48}]})",
       "cfg.json: models[0].tile_max_tokens: must be 32 or 64, got 48"},
      {R"({"models": [{"name": "a", "path": "/x", "tile_max_tokens": "64"}]})",
       "cfg.json: models[0].tile_max_tokens: expected 32 or 64"},
      {R"({"models": [{"name": "a", "path": "/x"}, {"name": "a", "path": "/y"}]})",
       "cfg.json: models[1].name: duplicate model name 'a'"},
  };
  for (const auto& [text, message] : cases) {
    auto r = ParseModelsConfig(text, "cfg.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message(), message);
  }
}

TEST(Config, FlagsAndEnvironment) {
  ServerConfig config;
  CLI::App app;
  AddServerFlags(app, config);
  setenv("DF11D_MAX_WAITING", "17", 1);
  const char* argv[] = {"df11d", "--model", "a=/p", "--kv-memory-bytes", "1000", "--grpc-address", "127.0.0.1:1"};
  app.parse(7, const_cast<char**>(argv));
  unsetenv("DF11D_MAX_WAITING");
  ASSERT_TRUE(FinishConfig(config).ok());
  EXPECT_EQ(config.engine.max_waiting, 17);
  EXPECT_EQ(config.engine.host_overlap, HostOverlap::kAuto);  // the default
  const char* off[] = {"df11d", "--model", "a=/p", "--kv-memory-bytes", "1000", "--host-overlap=false"};
  app.parse(6, const_cast<char**>(off));
  ASSERT_TRUE(FinishConfig(config).ok());
  EXPECT_EQ(config.engine.host_overlap, HostOverlap::kNever);
  config.host_overlap = true;
  EXPECT_EQ(config.grpc_address, "127.0.0.1:1");
  ASSERT_EQ(config.models.size(), 1u);
  EXPECT_EQ(config.models[0].name, "a");
  EXPECT_EQ(config.models[0].path, "/p");
  config.model_flags = {"noequals"};
  EXPECT_EQ(FinishConfig(config).message(), "--model: expected NAME=PATH, got 'noequals'");
  config.model_flags = {"a b=/p"};
  EXPECT_EQ(FinishConfig(config).message(),
            "--model a b=/p: name: byte 1 is not printable ASCII (32); names are printable ASCII without spaces");
  config.model_flags = {};
  config.tls_cert = "c.pem";
  EXPECT_EQ(FinishConfig(config).code(), StatusCode::kInvalidArgument);
}

TEST(Config, DefaultsMatchTheDocs) {
  ServerConfig config;
  EXPECT_EQ(config.grpc_address, "0.0.0.0:50051");
  EXPECT_EQ(config.metrics_address, "0.0.0.0:8000");
}

}  // namespace
}  // namespace df11::server
