// df11d end to end, generation: the real daemon on loopback with a tiny random model (CPU).
// Streams equal the in-process engine's output; 200 concurrent streams complete; cancel frees KV;
// deadlines; every bad input with its status code.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "scheduler/engine.h"
#include "tests/server/daemon_test_util.h"

namespace df11::test {
namespace {

class DaemonGenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new ScopedTempDir("srvgen");
    ASSERT_TRUE(WriteTinyModel(tmp_->path() + "/m").ok());
    daemon_ = new Daemon({"--model", "tiny=" + tmp_->path() + "/m", "--max-seqs", "256"}, tmp_->path());
    auto channel = daemon_->Channel();
    ASSERT_TRUE(WaitServing(channel)) << daemon_->LogText();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete tmp_;
  }
  std::unique_ptr<pb::Generation::Stub> Stub() { return pb::Generation::NewStub(daemon_->Channel()); }

  // The same request straight through an in-process engine: (token ids, text).
  static std::pair<std::vector<int32_t>, std::string> EngineOutput(std::vector<int32_t> prompt, float temperature,
                                                                   uint64_t seed, int64_t max_tokens) {
    EngineOptions options;
    options.threads = 1;
    options.kv_memory_bytes = 64 << 20;
    auto engine = Engine::Create(options);
    EXPECT_TRUE(engine.ok());
    ModelSpec spec;
    spec.name = "tiny";
    spec.path = tmp_->path() + "/m";
    EXPECT_TRUE((*engine)->LoadModel(spec).ok());
    GenerateRequest r;
    r.model = "tiny";
    r.prompt_tokens = std::move(prompt);
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    std::promise<void> done;
    std::vector<int32_t> ids;
    std::string text;
    auto id = (*engine)->Submit(r, [&](RequestEvent&& e) {
      ids.insert(ids.end(), e.token_ids.begin(), e.token_ids.end());
      text += e.text;
      if (e.finished) done.set_value();
    });
    EXPECT_TRUE(id.ok());
    done.get_future().wait();
    return {ids, text};
  }

  static int64_t KvBlocksUsed(pb::Generation::Stub& stub) {
    grpc::ClientContext ctx;
    pb::LoadReport report;
    EXPECT_TRUE(stub.GetLoadReport(&ctx, pb::GetLoadReportRequest(), &report).ok());
    int64_t used = 0;
    for (const auto& m : report.models()) used += m.kv_blocks_used();
    return used;
  }

  static ScopedTempDir* tmp_;
  static Daemon* daemon_;
};
ScopedTempDir* DaemonGenerateTest::tmp_ = nullptr;
Daemon* DaemonGenerateTest::daemon_ = nullptr;

TEST_F(DaemonGenerateTest, StreamEqualsEngineOutput) {
  auto stub = Stub();
  for (float temperature : {0.0f, 0.8f}) {
    pb::GenerateRequest request;
    request.set_model("tiny");
    for (int32_t id : {5, 17, 300, 42}) request.mutable_tokens()->add_ids(id);
    request.mutable_sampling()->set_temperature(temperature);
    request.mutable_sampling()->set_seed(7);
    request.set_max_tokens(12);
    request.set_ignore_eos(true);
    StreamResult got = Collect(*stub, request);
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    auto [ids, text] = EngineOutput({5, 17, 300, 42}, temperature, 7, 12);
    EXPECT_EQ(got.token_ids, ids) << "temperature " << temperature;
    EXPECT_EQ(got.text, text);
    EXPECT_EQ(got.last.finish_reason(), pb::FINISH_REASON_LENGTH);
    EXPECT_EQ(got.last.usage().prompt_tokens(), 4);
    EXPECT_EQ(got.last.usage().completion_tokens(), 12);
    EXPECT_GT(got.last.timings().total_seconds(), 0.0);
  }
}

TEST_F(DaemonGenerateTest, TextAndChatInputsAreTokenizedByTheModel) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  pb::TokenizeRequest tok;
  tok.set_model("tiny");
  tok.set_text(" hello world");
  pb::TokenizeResponse ids;
  ASSERT_TRUE(stub->Tokenize(&ctx, tok, &ids).ok());
  ASSERT_GT(ids.ids_size(), 0);
  // Streams from text and from the same ids agree.
  StreamResult from_text = Collect(*stub, TextRequest("tiny", " hello world", 6));
  pb::GenerateRequest by_ids = TextRequest("tiny", "", 6);
  for (int32_t id : ids.ids()) by_ids.mutable_tokens()->add_ids(id);
  StreamResult from_ids = Collect(*stub, by_ids);
  ASSERT_TRUE(from_text.status.ok()) << from_text.status.error_message();
  EXPECT_EQ(from_text.token_ids, from_ids.token_ids);
  EXPECT_EQ(from_text.last.usage().prompt_tokens(), ids.ids_size());
  // Chat: ChatML "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" starts with id 329.
  pb::TokenizeRequest chat;
  chat.set_model("tiny");
  auto* m = chat.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  grpc::ClientContext ctx2;
  pb::TokenizeResponse chat_ids;
  ASSERT_TRUE(stub->Tokenize(&ctx2, chat, &chat_ids).ok());
  ASSERT_GT(chat_ids.ids_size(), 3);
  EXPECT_EQ(chat_ids.ids(0), kTinyImStart);
  // Detokenize inverts Tokenize for plain text.
  grpc::ClientContext ctx3;
  pb::DetokenizeRequest detok;
  detok.set_model("tiny");
  *detok.mutable_ids() = ids.ids();
  pb::DetokenizeResponse text;
  ASSERT_TRUE(stub->Detokenize(&ctx3, detok, &text).ok());
  EXPECT_EQ(text.text(), " hello world");
}

TEST_F(DaemonGenerateTest, LogprobsAndStopStrings) {
  auto stub = Stub();
  pb::GenerateRequest request = TextRequest("tiny", "logprobs", 6);
  request.set_top_logprobs(3);
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, request);
  pb::GenerateResponse msg;
  int tokens = 0;
  while (reader->Read(&msg)) {
    ASSERT_EQ(msg.logprobs_size(), msg.token_ids_size());
    for (int i = 0; i < msg.logprobs_size(); ++i) {
      const auto& lp = msg.logprobs(i);
      EXPECT_EQ(lp.token(), msg.token_ids(i));
      EXPECT_LE(lp.logprob(), 0.0f);
      ASSERT_EQ(lp.top_size(), 3);
      EXPECT_EQ(lp.top(0).token(), lp.token()) << "greedy: the chosen token is the most likely";
      EXPECT_GE(lp.top(0).logprob(), lp.top(1).logprob());
      tokens++;
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(tokens, 6);
  // A stop string taken from the middle of a greedy output ends the stream before it.
  StreamResult full = Collect(*stub, TextRequest("tiny", "stop here", 40));
  ASSERT_TRUE(full.status.ok());
  size_t mid = full.text.size() / 2;
  while (mid < full.text.size() && (static_cast<unsigned char>(full.text[mid]) & 0xC0) == 0x80) ++mid;
  if (mid + 1 < full.text.size()) {
    size_t len = 1;  // one whole UTF-8 character
    while (mid + len < full.text.size() && (static_cast<unsigned char>(full.text[mid + len]) & 0xC0) == 0x80) ++len;
    std::string stop = full.text.substr(mid, len);
    size_t first = full.text.find(stop);
    pb::GenerateRequest with_stop = TextRequest("tiny", "stop here", 40);
    with_stop.add_stop(stop);
    StreamResult stopped = Collect(*stub, with_stop);
    ASSERT_TRUE(stopped.status.ok()) << stopped.status.error_message();
    EXPECT_EQ(stopped.last.finish_reason(), pb::FINISH_REASON_STOP);
    EXPECT_EQ(stopped.text, full.text.substr(0, first));
  }
}

TEST_F(DaemonGenerateTest, TwoHundredConcurrentStreamsComplete) {
  auto channel = daemon_->Channel();
  auto stub = pb::Generation::NewStub(channel);
  constexpr int kStreams = 200;
  std::vector<std::thread> threads;
  threads.reserve(8);
  std::atomic<int> ok{0}, tokens{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kStreams; i += 8) {
        StreamResult r = Collect(*stub, TextRequest("tiny", "stream " + std::to_string(i), 4));
        if (r.status.ok() && r.token_ids.size() == 4) ok++;
        tokens += static_cast<int>(r.token_ids.size());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kStreams);
  EXPECT_EQ(tokens.load(), 4 * kStreams);
}

TEST_F(DaemonGenerateTest, ClientCancelFreesKvBlocks) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, TextRequest("tiny", "a long one", 100000));
  pb::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));  // running: it holds KV blocks now
  // The load report is published after the step that sent the first token: wait for it.
  int64_t held = 0;
  for (int i = 0; i < 200 && held == 0; ++i) {
    held = KvBlocksUsed(*stub);
    if (held == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(held, 0);
  ctx.TryCancel();
  while (reader->Read(&msg)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  int64_t used = -1;
  for (int i = 0; i < 200 && used != 0; ++i) {
    used = KvBlocksUsed(*stub);
    if (used != 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(used, 0);
}

TEST_F(DaemonGenerateTest, SlowClientGetsEveryTokenInFewerMessages) {
  // A client whose HTTP/2 receive window is tiny (1 KiB, no BDP growth): once it stops reading,
  // the server's writes stall and the engine's deltas queue up behind them.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto stub = pb::Generation::NewStub(
      grpc::CreateCustomChannel(daemon_->address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, TextRequest("tiny", "slow reader", 300));
  pb::GenerateResponse msg;
  std::vector<int32_t> ids;
  int messages = 0;
  while (reader->Read(&msg)) {
    if (messages++ == 0) {
      // Stop reading until the engine has finished the request (its KV blocks are freed then):
      // every later delta is queued behind this reader, whatever the machine's speed. The load
      // report comes after the step that sent the first token, so it may still say 0 blocks here
      // (a loaded CI machine read on at once, one message a token): wait to see the request hold
      // blocks (up to 2 s; it may also have finished unseen), then for them to be freed (10 s).
      auto probe = Stub();
      bool held = false;
      for (int i = 0; i < 1200; ++i) {
        const bool used = KvBlocksUsed(*probe) != 0;
        held = held || used;
        if (!used && (held || i >= 200)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    ids.insert(ids.end(), msg.token_ids().begin(), msg.token_ids().end());
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(ids.size(), 300u);
  EXPECT_LT(messages, 150) << "deltas queued behind a slow client are merged (a 1 KiB window holds ~60 small messages)";
  EXPECT_EQ(msg.finish_reason(), pb::FINISH_REASON_LENGTH);
  StreamResult fast = Collect(*stub, TextRequest("tiny", "slow reader", 300));
  EXPECT_EQ(fast.token_ids, ids);
}

TEST_F(DaemonGenerateTest, ClientDeadlineEndsTheStream) {
  auto stub = Stub();
  auto start = std::chrono::steady_clock::now();
  StreamResult r = Collect(*stub, TextRequest("tiny", "x", 100000), [](grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  });
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

struct BadCase {
  const char* name;
  std::function<void(pb::GenerateRequest&)> edit;
  grpc::StatusCode code;
  const char* message_part;
};

TEST_F(DaemonGenerateTest, BadInputsGetTheirStatusCodes) {
  auto stub = Stub();
  const std::vector<BadCase> cases = {
      {"unknown model", [](auto& r) { r.set_model("nope"); }, grpc::StatusCode::NOT_FOUND, "nope"},
      {"no model", [](auto& r) { r.clear_model(); }, grpc::StatusCode::INVALID_ARGUMENT, "model"},
      {"no input", [](auto& r) { r.clear_text(); }, grpc::StatusCode::INVALID_ARGUMENT, "input"},
      {"invalid utf-8", [](auto& r) { r.set_text(std::string("ab\xff", 3)); }, grpc::StatusCode::INVALID_ARGUMENT, "byte 2"},
      {"bad chat utf-8",
       [](auto& r) {
         auto* m = r.mutable_chat()->add_messages();
         m->set_role("user");
         m->set_content("\xc3");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "chat.messages[0].content"},
      {"empty chat", [](auto& r) { r.mutable_chat(); }, grpc::StatusCode::INVALID_ARGUMENT, "chat.messages"},
      {"token out of vocab", [](auto& r) { r.mutable_tokens()->add_ids(100000); }, grpc::StatusCode::INVALID_ARGUMENT, ""},
      {"negative token", [](auto& r) { r.mutable_tokens()->add_ids(-1); }, grpc::StatusCode::INVALID_ARGUMENT, ""},
      {"prompt too long",
       [](auto& r) {
         for (int i = 0; i < 5000; ++i) r.mutable_tokens()->add_ids(65);
       },
       grpc::StatusCode::INVALID_ARGUMENT, ""},
      {"top_p", [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); }, grpc::StatusCode::INVALID_ARGUMENT, "sampling.top_p"},
      {"temperature", [](auto& r) { r.mutable_sampling()->set_temperature(-1); }, grpc::StatusCode::INVALID_ARGUMENT, "sampling.temperature"},
      {"top_k", [](auto& r) { r.mutable_sampling()->set_top_k(-3); }, grpc::StatusCode::INVALID_ARGUMENT, "sampling.top_k"},
      {"max_tokens", [](auto& r) { r.set_max_tokens(0); }, grpc::StatusCode::INVALID_ARGUMENT, "max_tokens"},
      {"top_logprobs", [](auto& r) { r.set_top_logprobs(99); }, grpc::StatusCode::INVALID_ARGUMENT, "top_logprobs"},
      {"empty stop", [](auto& r) { r.add_stop(""); }, grpc::StatusCode::INVALID_ARGUMENT, "stop[0]"},
      {"bad template vars",
       [](auto& r) {
         auto* m = r.mutable_chat()->add_messages();
         m->set_role("user");
         m->set_content("hi");
         r.mutable_chat()->set_template_vars_json("[1]");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "template_vars_json"},
  };
  for (const auto& c : cases) {
    pb::GenerateRequest r = TextRequest("tiny", "hello", 4);
    c.edit(r);
    StreamResult got = Collect(*stub, r);
    EXPECT_EQ(got.status.error_code(), c.code) << c.name << ": " << got.status.error_message();
    EXPECT_NE(got.status.error_message().find(c.message_part), std::string::npos) << c.name << ": " << got.status.error_message();
    EXPECT_EQ(got.messages, 0) << c.name;
  }
}

TEST_F(DaemonGenerateTest, ModelInfoAndUnknownModel) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  pb::ListModelsResponse list;
  ASSERT_TRUE(stub->ListModels(&ctx, pb::ListModelsRequest(), &list).ok());
  ASSERT_EQ(list.models_size(), 1);
  EXPECT_EQ(list.models(0).name(), "tiny");
  EXPECT_EQ(list.models(0).state(), pb::MODEL_STATE_READY);
  EXPECT_EQ(list.models(0).vocab_size(), kTinyTokenizerVocab);
  EXPECT_GT(list.models(0).weight_bytes(), 0u);
  grpc::ClientContext ctx2;
  pb::GetModelInfoRequest info_request;
  info_request.set_model("missing");
  pb::ModelInfo info;
  EXPECT_EQ(stub->GetModelInfo(&ctx2, info_request, &info).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext ctx3;
  pb::DetokenizeRequest detok;
  detok.set_model("tiny");
  detok.add_ids(100000);
  pb::DetokenizeResponse text;
  auto status = stub->Detokenize(&ctx3, detok, &text);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("ids[0]"), std::string::npos) << status.error_message();
}

}  // namespace
}  // namespace df11::test
