// The OpenAI-compatible HTTP API of the real df11d (tiny model, loopback): answers equal gRPC
// Generate's for the same greedy request, server-sent events, the error objects and statuses,
// a cut stream frees its KV blocks, 200 concurrent streams equal their solo runs, and slow
// clients cannot stall /metrics.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/server/daemon_test_util.h"
#include "tests/server/http_test_util.h"

namespace df11::test {
namespace {

using Json = nlohmann::json;

std::vector<std::string> HttpFlags(const std::string& model_dir, int http_port, int metrics_port, int max_seqs = 256) {
  return {"--model", "tiny=" + model_dir, "--max-seqs", std::to_string(max_seqs), "--http-address", "127.0.0.1:" + std::to_string(http_port),
          "--metrics-address", "127.0.0.1:" + std::to_string(metrics_port), "--http-max-connections-per-client", "512"};
}

int64_t KvBlocksUsed(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = pb::Generation::NewStub(channel);
  grpc::ClientContext ctx;
  pb::LoadReport report;
  EXPECT_TRUE(stub->GetLoadReport(&ctx, pb::GetLoadReportRequest(), &report).ok());
  int64_t used = 0;
  for (const auto& m : report.models()) used += m.kv_blocks_used();
  return used;
}

std::string CompletionBody(const std::string& prompt, int max_tokens, bool stream) {
  return Json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0},
              {"ignore_eos", true}, {"stream", stream}}
      .dump();
}

// The text of a streamed completion or chat completion; checks the stream's framing.
std::string StreamText(const HttpResult& r, bool chat) {
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.count("content-type") ? r.headers.at("content-type") : "", "text/event-stream");
  std::vector<std::string> events = SseEvents(r.body);
  EXPECT_GE(events.size(), 2u);
  if (events.empty()) return "";
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  int finished = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json chunk = Json::parse(events[i]);
    if (chunk["choices"].empty()) continue;  // the usage chunk
    const Json& choice = chunk["choices"][0];
    if (chat) {
      text += choice["delta"].value("content", "");
    } else {
      text += choice["text"].get<std::string>();
    }
    finished += choice["finish_reason"].is_null() ? 0 : 1;
  }
  EXPECT_EQ(finished, 1);
  return text;
}

class DaemonHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new ScopedTempDir("srvhttp");
    ASSERT_TRUE(WriteTinyModel(tmp_->path() + "/m").ok());
    http_port_ = FreePort();
    metrics_port_ = FreePort();
    std::vector<std::string> flags = HttpFlags(tmp_->path() + "/m", http_port_, metrics_port_);
    flags.insert(flags.end(), {"--http-idle-timeout-seconds", "1"});
    daemon_ = new Daemon(flags, tmp_->path());
    ASSERT_TRUE(WaitServing(daemon_->Channel())) << daemon_->LogText();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete tmp_;
  }
  static HttpResult Post(const std::string& path, const std::string& body,
                         const std::map<std::string, std::string>& headers = {}) {
    return Http(http_port_, "POST", path, body, headers);
  }
  static std::string GrpcText(const std::string& prompt, int max_tokens) {
    auto stub = pb::Generation::NewStub(daemon_->Channel());
    StreamResult r = Collect(*stub, TextRequest("tiny", prompt, max_tokens));
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    return r.text;
  }

  static ScopedTempDir* tmp_;
  static Daemon* daemon_;
  static int http_port_, metrics_port_;
};
ScopedTempDir* DaemonHttpTest::tmp_ = nullptr;
Daemon* DaemonHttpTest::daemon_ = nullptr;
int DaemonHttpTest::http_port_ = 0;
int DaemonHttpTest::metrics_port_ = 0;

TEST_F(DaemonHttpTest, CompletionEqualsGrpcGenerate) {
  const std::string expected = GrpcText("hello world", 12);
  ASSERT_FALSE(expected.empty());
  HttpResult plain = Post("/v1/completions", CompletionBody("hello world", 12, false));
  ASSERT_EQ(plain.status, 200) << plain.body;
  Json body = Json::parse(plain.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], expected);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_EQ(StreamText(Post("/v1/completions", CompletionBody("hello world", 12, true)), false), expected);
}

TEST_F(DaemonHttpTest, ChatStreamsRoleContentUsageAndDone) {
  Json request = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 6},
                  {"temperature", 0}, {"ignore_eos", true}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  HttpResult r = Post("/v1/chat/completions", request.dump());
  std::vector<std::string> events = SseEvents(r.body);
  ASSERT_GE(events.size(), 3u) << r.body;
  EXPECT_EQ(Json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  Json usage = Json::parse(events[events.size() - 2]);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
  const std::string streamed = StreamText(r, true);
  request["stream"] = false;
  request.erase("stream_options");
  HttpResult plain = Post("/v1/chat/completions", request.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  Json body = Json::parse(plain.body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], streamed);
}

TEST_F(DaemonHttpTest, ModelsAndHealth) {
  HttpResult models = Http(http_port_, "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  Json body = Json::parse(models.body);
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "tiny");
  EXPECT_EQ(Http(http_port_, "GET", "/health").status, 200);
}

TEST_F(DaemonHttpTest, ErrorsHaveOpenAiShapeAndStatus) {
  struct Case {
    std::string method, path, body;
    int status;
    const char* param;  // nullptr: null
  };
  const Case cases[] = {
      {"POST", "/v1/completions", R"({"model": "tiny", "prompt": "x", "top_p": 1.5})", 400, "top_p"},
      {"POST", "/v1/completions", R"({"model": "tiny", "prompt": "x", "n": 3})", 400, "n"},
      {"POST", "/v1/completions", R"({"model": "tiny", "prompt": [1, 99999]})", 400, "prompt"},
      {"POST", "/v1/chat/completions", R"({"model": "tiny", "messages": []})", 400, "messages"},
      {"POST", "/v1/chat/completions", "{not json", 400, nullptr},
      {"POST", "/v1/completions", R"({"model": "nope", "prompt": "x"})", 404, "model"},
      {"GET", "/v1/completions", "", 405, nullptr},
      {"GET", "/v2/anything", "", 404, nullptr},
  };
  for (const Case& c : cases) {
    HttpResult r = Http(http_port_, c.method, c.path, c.body);
    ASSERT_EQ(r.status, c.status) << c.path << " " << c.body << " -> " << r.body;
    Json error = Json::parse(r.body)["error"];
    EXPECT_FALSE(error["message"].get<std::string>().empty());
    EXPECT_TRUE(error.contains("type") && error.contains("code"));
    if (c.param) {  // a prefix: an out-of-vocabulary id may be named "prompt" or "prompt[1]"
      EXPECT_EQ(error["param"].get<std::string>().rfind(c.param, 0), 0u) << r.body;
    } else {
      EXPECT_TRUE(error["param"].is_null()) << r.body;
    }
  }
  // A body over --max-message-bytes: 413 as soon as Content-Length says so, before the body.
  int fd = ConnectLoopback(http_port_);
  ASSERT_TRUE(SendAll(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5242880\r\n\r\n"));
  std::string raw;
  while (RecvSome(fd, &raw)) {
  }
  ::close(fd);
  EXPECT_EQ(ParseResponse(raw).status, 413) << raw;
  // The daemon survived all of it.
  EXPECT_EQ(Http(http_port_, "GET", "/health").status, 200);
}

// Reading a stream and then closing the connection cancels the request and frees its blocks.
TEST_F(DaemonHttpTest, ClientThatLeavesFreesKvBlocks) {
  auto channel = daemon_->Channel();
  int fd = ConnectLoopback(http_port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, RequestText("POST", "/v1/completions", CompletionBody("a long one", 100000, true))));
  std::string received;
  while (SseEvents(received).size() < 3 && RecvSome(fd, &received)) {
  }
  ASSERT_GE(SseEvents(received).size(), 3u) << received;
  EXPECT_GT(KvBlocksUsed(channel), 0);  // it is running and holds blocks
  ::close(fd);
  int64_t used = -1;
  for (int i = 0; i < 250 && used != 0; ++i) {
    used = KvBlocksUsed(channel);
    if (used != 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(used, 0);
  // The request log says why it ended and counts the tokens it streamed.
  const std::string log = daemon_->LogText();
  const size_t line = log.find("the HTTP client went away");
  ASSERT_NE(line, std::string::npos) << log;
  const size_t begin = log.rfind('\n', line) + 1;
  const std::string entry = log.substr(begin, log.find('\n', line) - begin);
  EXPECT_EQ(entry.find("completion_tokens=0 "), std::string::npos) << entry;
}

// 200 concurrent streams: none lost or duplicated, each equal to its prompt's solo greedy run.
TEST_F(DaemonHttpTest, TwoHundredConcurrentStreamsEqualTheirSoloRuns) {
  constexpr int kStreams = 200, kPrompts = 10, kTokens = 32;
  std::vector<std::string> solo(kPrompts);
  for (int p = 0; p < kPrompts; ++p) {
    HttpResult r = Post("/v1/completions", CompletionBody("prompt " + std::to_string(p), kTokens, false));
    ASSERT_EQ(r.status, 200) << r.body;
    solo[p] = Json::parse(r.body)["choices"][0]["text"];
  }
  std::vector<std::string> texts(kStreams);
  std::vector<std::string> ids(kStreams);
  std::vector<std::thread> threads;
  threads.reserve(kStreams);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      HttpResult r = Post("/v1/completions", CompletionBody("prompt " + std::to_string(i % kPrompts), kTokens, true));
      texts[i] = StreamText(r, false);
      std::vector<std::string> events = SseEvents(r.body);
      if (!events.empty() && events[0] != "[DONE]") ids[i] = Json::parse(events[0])["id"];
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("200 concurrent HTTP streams of %d tokens: %.2f s\n", kTokens, seconds);
  for (int i = 0; i < kStreams; ++i) EXPECT_EQ(texts[i], solo[i % kPrompts]) << "stream " << i;
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()) - ids.begin(), kStreams);  // one response per request
  EXPECT_TRUE(ids.front().rfind("cmpl-", 0) == 0);
}

// Issue 17 finding 6: connections that send an incomplete request must not stall a scrape, and
// are closed after the read timeout.
TEST_F(DaemonHttpTest, SlowClientsDoNotStallMetrics) {
  ASSERT_EQ(Http(http_port_, "GET", "/health").status, 200);  // counted in df11_http_requests_total
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    int fd = ConnectLoopback(metrics_port_, 10);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n"));  // no blank line: never complete
    slow.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  HttpResult scrape = Http(metrics_port_, "GET", "/metrics");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(scrape.status, 200);
  EXPECT_NE(scrape.body.find("df11_http_requests_total{"), std::string::npos);
  EXPECT_LT(seconds, 1.0);
  // --http-idle-timeout-seconds 1: the server closes the slow ones (EOF, not our 10 s timeout).
  for (int fd : slow) {
    std::string ignored;
    const auto t0 = std::chrono::steady_clock::now();
    while (RecvSome(fd, &ignored)) {
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
    ::close(fd);
  }
}

TEST(DaemonHttp, ApiKeysQueueFullAndDraining) {
  ScopedTempDir tmp("srvhttp2");
  ASSERT_TRUE(WriteTinyModel(tmp.path() + "/m").ok());
  // A context of 32,768 positions instead of the preset's 2,048, which the tiny model ran in about a
  // second: long enough that a held request outlasts the test (with 2,048, a fast run finished the
  // first held request before the second was seen waiting).
  EditModelConfig(tmp.path() + "/m", [](Json& c) { c["max_position_embeddings"] = 32768; });
  const int http_port = FreePort();
  std::vector<std::string> flags = HttpFlags(tmp.path() + "/m", http_port, FreePort(), /*max_seqs=*/1);
  flags.insert(flags.end(), {"--api-key", "k1", "--max-waiting", "1"});
  Daemon daemon(flags, tmp.path());
  std::map<std::string, std::string> auth = {{"Authorization", "Bearer k1"}};
  ASSERT_TRUE(WaitServing(daemon.Channel())) << daemon.LogText();
  EXPECT_EQ(Http(http_port, "GET", "/v1/models").status, 401);
  EXPECT_EQ(Http(http_port, "GET", "/v1/models", "", {{"Authorization", "Bearer wrong"}}).status, 401);
  HttpResult unauth = Http(http_port, "POST", "/v1/completions", CompletionBody("x", 2, false));
  EXPECT_EQ(unauth.status, 401);
  EXPECT_EQ(Json::parse(unauth.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(Http(http_port, "POST", "/v1/completions", CompletionBody("x", 2, false), auth).status, 200);

  // One running, one waiting: the third is refused with 429 and Retry-After (each state awaited
  // before the next request; the held requests run until the test closes them).
  auto stub = pb::Generation::NewStub(daemon.Channel());
  auto wait_for = [&](int64_t running, int64_t waiting) {
    for (int i = 0; i < 1000; ++i) {
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", "Bearer k1");
      pb::LoadReport report;
      EXPECT_TRUE(stub->GetLoadReport(&ctx, pb::GetLoadReportRequest(), &report).ok());
      if (report.models(0).running() == running && report.models(0).waiting() == waiting) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ADD_FAILURE() << "never saw running " << running << ", waiting " << waiting;
  };
  std::vector<int> held;
  for (int i = 0; i < 2; ++i) {
    int fd = ConnectLoopback(http_port);
    ASSERT_TRUE(SendAll(fd, RequestText("POST", "/v1/completions", CompletionBody("long", 100000, true), auth)));
    held.push_back(fd);
    wait_for(1, i);
  }
  HttpResult full = Http(http_port, "POST", "/v1/completions", CompletionBody("x", 2, false), auth);
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(full.headers["retry-after"], "1");
  EXPECT_EQ(Json::parse(full.body)["error"]["type"], "rate_limit_error");

  // SIGTERM: health 503, new requests 503 with Retry-After, while the held streams drain.
  daemon.Signal(SIGTERM);
  HttpResult health;
  for (int i = 0; i < 100 && health.status != 503; ++i) {
    health = Http(http_port, "GET", "/health");
    if (health.status != 503) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(health.status, 503);
  HttpResult draining = Http(http_port, "POST", "/v1/completions", CompletionBody("x", 2, false), auth);
  EXPECT_EQ(draining.status, 503) << draining.body;
  EXPECT_EQ(draining.headers["retry-after"], "1");
  for (int fd : held) ::close(fd);  // they are cancelled; the drain ends
  EXPECT_EQ(daemon.Wait(), 0) << daemon.LogText();
}

}  // namespace
}  // namespace df11::test
