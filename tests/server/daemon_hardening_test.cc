// df11d against a hostile or careless client (issue 17's findings), end to end on loopback:
// Admin floods keep threads, maps and memory flat; config.json values that would size unbounded
// allocations are refused up front; a load that fails leaves nothing behind; client text cannot
// forge log lines in either log format; deadlines and cancellations are told apart in statuses,
// counters and logs; unparsable messages get INVALID_ARGUMENT; rejection reasons are typed.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "scheduler/request.h"
#include "tests/server/daemon_test_util.h"
#include "tests/server/metrics_test_util.h"

namespace df11::test {
namespace {

// /proc/<pid>/status field (e.g. "Threads", "VmRSS" in kB); -1 if absent.
int64_t ProcStatus(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

int64_t MapCount(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// Copies the tiny model's directory and edits its config.json.
std::string EditedModel(const std::string& from, const std::string& to, const std::function<void(nlohmann::json&)>& edit) {
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
  EditModelConfig(to, edit);
  return to;
}

grpc::Status Unload(pb::Admin::Stub& admin, const std::string& name) {
  grpc::ClientContext ctx;
  pb::UnloadModelRequest request;
  request.set_name(name);
  pb::UnloadModelResponse response;
  return admin.UnloadModel(&ctx, request, &response);
}

grpc::Status Load(pb::Admin::Stub& admin, const std::string& name, const std::string& path, double kv_share = 0) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  pb::LoadModelRequest request;
  request.set_name(name);
  request.set_path(path);
  request.set_kv_share(kv_share);
  pb::LoadModelResponse response;
  return admin.LoadModel(&ctx, request, &response);
}

std::vector<std::string> ModelNames(pb::Generation::Stub& stub) {
  grpc::ClientContext ctx;
  pb::ListModelsResponse response;
  EXPECT_TRUE(stub.ListModels(&ctx, pb::ListModelsRequest(), &response).ok());
  std::vector<std::string> names;
  for (const auto& m : response.models()) names.push_back(m.name());
  return names;
}

int64_t KvBlocksTotal(pb::Generation::Stub& stub, const std::string& model) {
  grpc::ClientContext ctx;
  pb::LoadReport report;
  EXPECT_TRUE(stub.GetLoadReport(&ctx, pb::GetLoadReportRequest(), &report).ok());
  for (const auto& m : report.models()) {
    if (m.name() == model) return m.kv_blocks_total();
  }
  return -1;
}

// One raw unary call (bytes in, status out) through the generic stub; server-streaming methods
// answer a unary call with their status when they send no message.
grpc::Status RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method, const std::string& bytes) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response, [&](const grpc::Status& s) { done.set_value(s); });
  return done.get_future().get();
}

class DaemonHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(WriteTinyModel(Dir()).ok()); }
  std::string Dir() const { return tmp_.path() + "/m"; }
  std::string Model() const { return "tiny=" + Dir(); }
  ScopedTempDir tmp_{"srvhard"};
};

TEST_F(DaemonHardeningTest, AdminFloodKeepsThreadsMapsAndMemoryFlat) {
  Daemon d({"--model", Model()}, tmp_.path());
  ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
  auto channel = d.Channel();
  auto admin = pb::Admin::NewStub(channel);
  auto stub = pb::Generation::NewStub(channel);
  ASSERT_EQ(Unload(*admin, "nope").error_code(), grpc::StatusCode::NOT_FOUND);
  const pid_t pid = d.pid();
  const int64_t threads = ProcStatus(pid, "Threads"), maps = MapCount(pid), rss_kb = ProcStatus(pid, "VmRSS");
  // 4,000 calls, 64 at a time (before the fix each left a thread behind until shutdown).
  std::atomic<int> not_found{0};
  for (int batch = 0; batch < 4000 / 64; ++batch) {
    std::vector<std::thread> clients;
    clients.reserve(64);
    for (int i = 0; i < 64; ++i) {
      clients.emplace_back([&] {
        if (Unload(*admin, "nope").error_code() == grpc::StatusCode::NOT_FOUND) not_found++;
      });
    }
    for (auto& t : clients) t.join();
  }
  EXPECT_EQ(not_found.load(), 4000 / 64 * 64);
  EXPECT_LE(ProcStatus(pid, "Threads"), threads + 8) << "threads before: " << threads;
  EXPECT_LE(MapCount(pid), maps + 64) << "maps before: " << maps;
  EXPECT_LE(ProcStatus(pid, "VmRSS"), rss_kb + int64_t{64} * 1024) << "RSS kB before: " << rss_kb;
  // Still serving.
  EXPECT_TRUE(Collect(*stub, TextRequest("tiny", "hello", 4)).status.ok()) << d.LogText();
}

TEST_F(DaemonHardeningTest, ConfigValuesThatSizeAllocationsAreRefusedUpFront) {
  Daemon d({"--model", Model()}, tmp_.path());
  ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
  auto admin = pb::Admin::NewStub(d.Channel());
  auto stub = pb::Generation::NewStub(d.Channel());
  const int64_t rss_kb = ProcStatus(d.pid(), "VmRSS");
  const auto huge_layers =
      EditedModel(Dir(), tmp_.path() + "/layers", [](nlohmann::json& c) { c["num_hidden_layers"] = 1000000000; });
  const auto start = std::chrono::steady_clock::now();
  grpc::Status s = Load(*admin, "layers", huge_layers);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("num_hidden_layers: 1000000000 is above the supported maximum"), std::string::npos)
      << s.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Within the bounds but more layers than the checkpoint holds.
  const auto three = EditedModel(Dir(), tmp_.path() + "/three", [](nlohmann::json& c) { c["num_hidden_layers"] = 300; });
  s = Load(*admin, "three", three);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("num_hidden_layers is 300 but the checkpoint's tensors go up to"), std::string::npos)
      << s.error_message();
  const auto positions = EditedModel(Dir(), tmp_.path() + "/positions",
                                     [](nlohmann::json& c) { c["max_position_embeddings"] = int64_t{1} << 62; });
  s = Load(*admin, "positions", positions);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("max_position_embeddings"), std::string::npos) << s.error_message();
  EXPECT_EQ(ModelNames(*stub), std::vector<std::string>{"tiny"});
  EXPECT_LE(ProcStatus(d.pid(), "VmRSS"), rss_kb + int64_t{64} * 1024);
}

TEST_F(DaemonHardeningTest, FailedLoadLeavesNothingBehind) {
  Daemon d({"--model", Model()}, tmp_.path());
  ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
  auto admin = pb::Admin::NewStub(d.Channel());
  auto stub = pb::Generation::NewStub(d.Channel());
  const int64_t blocks = KvBlocksTotal(*stub, "tiny");
  ASSERT_GT(blocks, 0);
  // Validated as the config file validates it.
  grpc::Status s = Load(*admin, "inf", Dir(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "kv_share: must be in (0, 1e6], got inf");
  // Loads, then fails its warm-up (one position leaves no room to generate): unloaded again.
  const auto one = EditedModel(Dir(), tmp_.path() + "/one", [](nlohmann::json& c) { c["max_position_embeddings"] = 1; });
  s = Load(*admin, "late", one);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error_message().find("failed its warm-up request and was unloaded"), std::string::npos) << s.error_message();
  EXPECT_EQ(ModelNames(*stub), std::vector<std::string>{"tiny"});
  // The other model's KV comes back to it (resizes happen between steps: poll briefly).
  for (int i = 0; i < 200 && KvBlocksTotal(*stub, "tiny") != blocks; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(KvBlocksTotal(*stub, "tiny"), blocks);
  // The name is free again.
  EXPECT_TRUE(Load(*admin, "late", Dir()).ok());
  EXPECT_TRUE(Collect(*stub, TextRequest("late", "hi", 2)).status.ok());
}

// Client-controlled text (model names, request ids, messages that echo them) must not start a
// new log line, in either log format.
TEST_F(DaemonHardeningTest, ClientTextCannotForgeLogLines) {
  for (const std::string format : {"text", "json"}) {
    Daemon d({"--model", Model(), "--log-format", format}, tmp_.path());
    ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
    auto stub = pb::Generation::NewStub(d.Channel());
    auto admin = pb::Admin::NewStub(d.Channel());
    const std::string forged = "\nFORGED status=OK\r\n";
    auto request = TextRequest("x" + forged, "hi", 2);
    EXPECT_EQ(Collect(*stub, request).status.error_code(), grpc::StatusCode::NOT_FOUND);
    request = TextRequest("tiny", "hi", 2);
    request.set_request_id("r" + forged);
    EXPECT_TRUE(Collect(*stub, request).status.ok()) << d.LogText();
    grpc::Status s = Load(*admin, "y" + forged, Dir());
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("name: byte 1 is not printable ASCII"), std::string::npos) << s.error_message();
    s = Unload(*admin, "z" + forged);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    d.Signal(SIGTERM);
    EXPECT_EQ(d.Wait(), 0);
    std::istringstream log(d.LogText());
    int lines = 0;
    for (std::string line; std::getline(log, line);) {
      ++lines;
      EXPECT_NE(line.rfind("FORGED", 0), 0u) << "a forged line: " << line;
      if (format == "json") {
        EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded()) << line;
      }
    }
    EXPECT_GT(lines, 3);
    // Both formats write the newline escaped, as the two characters \n.
    EXPECT_NE(d.LogText().find("\\nFORGED"), std::string::npos) << d.LogText();
  }
}

TEST_F(DaemonHardeningTest, DeadlinesAndCancellationsAreToldApart) {
  const int metrics_port = FreePort();
  Daemon d({"--model", Model(), "--metrics-address", "127.0.0.1:" + std::to_string(metrics_port)}, tmp_.path());
  ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
  auto stub = pb::Generation::NewStub(d.Channel());
  auto long_request = TextRequest("tiny", "hello", 2000);
  // A 2,000-token request cannot finish in 50 ms on the CPU backend with one thread.
  for (int i = 0; i < 3; ++i) {
    auto r = Collect(*stub, long_request, [](grpc::ClientContext& ctx) {
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(50));
    });
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, long_request);
    pb::GenerateResponse first;
    ASSERT_TRUE(reader->Read(&first));
    ctx.TryCancel();
    while (reader->Read(&first)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  using testing::SampleValue;
  // The RPC ends at once; the engine ends the request at its next step: poll until both counted.
  const std::string metrics = testing::ScrapeUntil(metrics_port, [](const std::string& m) {
    return SampleValue(m, "df11_rpcs_total", {{"method", "Generate"}, {"code", "CANCELLED"}}) == 2.0 &&
           SampleValue(m, "df11_rpcs_total", {{"method", "Generate"}, {"code", "DEADLINE_EXCEEDED"}}) == 3.0 &&
           SampleValue(m, "df11_requests_total", {{"model", "tiny"}, {"finish_reason", "deadline"}}) == 3.0 &&
           SampleValue(m, "df11_requests_total", {{"model", "tiny"}, {"finish_reason", "cancelled"}}) == 2.0;
  });
  EXPECT_EQ(SampleValue(metrics, "df11_rpcs_total", {{"method", "Generate"}, {"code", "DEADLINE_EXCEEDED"}}), 3.0) << metrics;
  EXPECT_EQ(SampleValue(metrics, "df11_rpcs_total", {{"method", "Generate"}, {"code", "CANCELLED"}}), 2.0) << metrics;
  EXPECT_EQ(SampleValue(metrics, "df11_requests_total", {{"model", "tiny"}, {"finish_reason", "deadline"}}), 3.0);
  EXPECT_EQ(SampleValue(metrics, "df11_requests_total", {{"model", "tiny"}, {"finish_reason", "cancelled"}}), 2.0);
  // The warm-up request is no client request.
  EXPECT_EQ(SampleValue(metrics, "df11_requests_total", {{"model", "tiny"}, {"finish_reason", "length"}}), std::nullopt);
  // Log lines: each ended call says why, and a cancelled stream reports the tokens it streamed.
  const std::string log = d.LogText();
  size_t cancelled_with_tokens = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find("status=CANCELLED finish=cancelled") != std::string::npos &&
        line.find("completion_tokens=0 ") == std::string::npos) {
      ++cancelled_with_tokens;
    }
    EXPECT_EQ(line.find("cancelled by the client or its deadline"), std::string::npos) << line;
  }
  EXPECT_EQ(cancelled_with_tokens, 2u) << log;
  EXPECT_NE(log.find("status=DEADLINE_EXCEEDED finish=deadline"), std::string::npos) << log;
}

// Before a model is SERVING, df11d runs one warm-up request per kWarmupPromptTokens entry, one after
// another (each prompt fits one step, so one step each), and none of them counts as client work.
TEST_F(DaemonHardeningTest, WarmUpRunsOneStepPerWarmupPromptBeforeServing) {
  const int metrics_port = FreePort();
  Daemon d({"--model", Model(), "--metrics-address", "127.0.0.1:" + std::to_string(metrics_port)}, tmp_.path());
  ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
  using testing::SampleValue;
  const std::string metrics = testing::ScrapeUntil(
      metrics_port, [](const std::string& m) { return SampleValue(m, "df11_steps_total", {{"model", "tiny"}}).has_value(); });
  EXPECT_EQ(SampleValue(metrics, "df11_steps_total", {{"model", "tiny"}}), double(kWarmupPromptTokens.size())) << metrics;
  EXPECT_EQ(SampleValue(metrics, "df11_prompt_tokens_total", {{"model", "tiny"}}).value_or(0.0), 0.0) << metrics;
}

TEST_F(DaemonHardeningTest, UnparsableMessagesAreInvalidArgumentCountedAndLogged) {
  const int metrics_port = FreePort();
  Daemon d({"--model", Model(), "--log-format", "json", "--metrics-address", "127.0.0.1:" + std::to_string(metrics_port)},
           tmp_.path());
  ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
  auto channel = d.Channel();
  const std::string garbage("\xff\xff\xff\xff\x0f", 5);
  const std::string bad_utf8("\x0a\x02\xc3\x28", 4);  // field 1 (model) = invalid UTF-8
  for (const std::string method : {"Generate", "Tokenize", "Detokenize", "GetModelInfo"}) {
    for (const std::string& bytes : {garbage, bad_utf8}) {
      grpc::Status s = RawCall(channel, "/df11.v1.Generation/" + method, bytes);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << s.error_message();
      EXPECT_EQ(s.error_message().rfind("could not parse request", 0), 0u) << s.error_message();
    }
  }
  grpc::Status s = RawCall(channel, "/df11.v1.Admin/LoadModel", garbage);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  // A streaming call is counted in OnDone, which may run after its client saw the status.
  using testing::SampleValue;
  const std::string metrics = testing::ScrapeUntil(metrics_port, [](const std::string& m) {
    return SampleValue(m, "df11_rpcs_total", {{"method", "Tokenize"}, {"code", "INVALID_ARGUMENT"}}) == 2.0 &&
           SampleValue(m, "df11_rpcs_total", {{"method", "Generate"}, {"code", "INVALID_ARGUMENT"}}) == 2.0;
  });
  EXPECT_EQ(SampleValue(metrics, "df11_rpcs_total", {{"method", "Tokenize"}, {"code", "INVALID_ARGUMENT"}}), 2.0)
      << metrics;
  EXPECT_EQ(SampleValue(metrics, "df11_rpcs_total", {{"method", "Generate"}, {"code", "INVALID_ARGUMENT"}}), 2.0)
      << metrics;
  d.Signal(SIGTERM);
  EXPECT_EQ(d.Wait(), 0);
  // Every line is one JSON object (no raw libprotobuf line), and the bad requests are logged.
  std::istringstream log(d.LogText());
  int unparsable = 0;
  for (std::string line; std::getline(log, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not a JSON line: " << line;
    if (j.value("event", "") == "unparsable_request") ++unparsable;
  }
  EXPECT_EQ(unparsable, 9);
}

TEST_F(DaemonHardeningTest, RejectionReasonsAreTyped) {
  const int metrics_port = FreePort();
  Daemon d({"--model", Model(), "--metrics-address", "127.0.0.1:" + std::to_string(metrics_port)}, tmp_.path());
  ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
  auto stub = pb::Generation::NewStub(d.Channel());
  auto long_id = TextRequest("tiny", "hi", 2);
  long_id.set_request_id(std::string(200, 'a'));
  EXPECT_EQ(Collect(*stub, long_id).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto long_stop = TextRequest("tiny", "hi", 2);
  long_stop.add_stop(std::string(300, 'a'));
  EXPECT_EQ(Collect(*stub, long_stop).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  pb::GenerateRequest long_prompt = TextRequest("tiny", "", 2);
  for (int i = 0; i < 5000; ++i) long_prompt.mutable_tokens()->add_ids(5);
  grpc::Status s = Collect(*stub, long_prompt).status;
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("prompt of 5000 tokens"), std::string::npos) << s.error_message();
  pb::GenerateRequest bad_id = TextRequest("tiny", "", 2);
  bad_id.mutable_tokens()->add_ids(1);
  bad_id.mutable_tokens()->add_ids(1 << 20);
  s = Collect(*stub, bad_id).status;
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("tokens.ids[1]: 1048576 is outside the vocabulary", 0), 0u) << s.error_message();
  const std::string metrics = testing::HttpGet(metrics_port, "/metrics").value_or("");
  EXPECT_EQ(testing::SampleValue(metrics, "df11_requests_rejected_total", {{"model", "tiny"}, {"reason", "invalid"}}), 3.0)
      << metrics;
  EXPECT_EQ(testing::SampleValue(metrics, "df11_requests_rejected_total", {{"model", "tiny"}, {"reason", "too_long"}}), 1.0)
      << metrics;
}

}  // namespace
}  // namespace df11::test
