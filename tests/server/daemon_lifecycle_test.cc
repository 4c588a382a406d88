// df11d end to end, lifecycle and security: health loading -> serving -> draining, SIGTERM with
// requests in flight, queue overflow, API keys (user and admin), runtime load/unload, TLS and mTLS.
#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <thread>

#include "tests/server/daemon_test_util.h"

namespace df11::test {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class DaemonLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(WriteTinyModel(tmp_.path() + "/m").ok()); }
  std::string Model() const { return "tiny=" + tmp_.path() + "/m"; }
  ScopedTempDir tmp_{"srvlife"};
};

// Reads one message of a stream (so it is running), then reads it to the end on a thread.
struct RunningStream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<pb::GenerateResponse>> reader;
  bool first = false;
  std::future<StreamResult> rest;
  void Start(pb::Generation::Stub& stub, const pb::GenerateRequest& request) {
    reader = stub.Generate(&ctx, request);
    pb::GenerateResponse msg;
    first = reader->Read(&msg);
    rest = std::async(std::launch::async, [this] {
      StreamResult r;
      pb::GenerateResponse m;
      while (reader->Read(&m)) r.last = m, r.messages++;
      r.status = reader->Finish();
      return r;
    });
  }
};

TEST_F(DaemonLifecycleTest, HealthLoadingServingDrainingAndSigtermFinishesInFlight) {
  // A long warm-up keeps the model loading long enough to observe NOT_SERVING.
  Daemon d({"--model", Model(), "--warmup-tokens", "1500"}, tmp_.path());
  auto channel = d.Channel();
  int first = -14;
  for (int i = 0; i < 500 && first < 0; ++i) {
    first = Health(channel, "");
    if (first < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(first, 2) << "NOT_SERVING while loading";
  ASSERT_TRUE(WaitServing(channel, "")) << d.LogText();
  EXPECT_EQ(Health(channel, "tiny"), 1);

  auto stub = pb::Generation::NewStub(channel);
  RunningStream streams[3];
  for (auto& s : streams) {
    s.Start(*stub, TextRequest("tiny", "drain me", 1500));
    ASSERT_TRUE(s.first);
  }
  d.Signal(SIGTERM);
  int health = 1;
  for (int i = 0; i < 200 && health == 1; ++i) {
    health = Health(channel, "");
    if (health == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(health, 2) << "NOT_SERVING from the start of the drain";
  EXPECT_EQ(Health(channel, "tiny"), 2);
  StreamResult refused = Collect(*stub, TextRequest("tiny", "too late", 4));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.status.error_message();
  for (auto& s : streams) {
    StreamResult r = s.rest.get();
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.last.finish_reason(), pb::FINISH_REASON_LENGTH);
  }
  EXPECT_EQ(d.Wait(), 0) << d.LogText();
}

TEST_F(DaemonLifecycleTest, QueueOverflowIsResourceExhaustedWithRetryHint) {
  Daemon d({"--model", Model(), "--max-seqs", "1", "--max-waiting", "1"}, tmp_.path());
  ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
  auto stub = pb::Generation::NewStub(d.Channel());
  std::vector<std::future<StreamResult>> results;
  for (int i = 0; i < 6; ++i) {
    results.push_back(std::async(std::launch::async, [&] {
      return Collect(*stub, TextRequest("tiny", "fill", 1500), [](grpc::ClientContext& ctx) {
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      });
    }));
  }
  int exhausted = 0;
  for (auto& f : results) {
    StreamResult r = f.get();
    if (r.status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) continue;
    exhausted++;
    EXPECT_EQ(r.trailers.count("retry-after-ms"), 1u);
    EXPECT_EQ(r.messages, 0);
  }
  EXPECT_GE(exhausted, 3);
}

TEST_F(DaemonLifecycleTest, ApiKeysAndRuntimeModelControl) {
  ASSERT_TRUE(WriteTinyModel(tmp_.path() + "/m2", {.seed = 2}).ok());
  Daemon d({"--model", Model(), "--api-key", "user-key-1", "--admin-api-key", "admin-key-1"}, tmp_.path());
  auto channel = d.Channel();
  ASSERT_TRUE(WaitServing(channel)) << d.LogText();  // health needs no key
  auto stub = pb::Generation::NewStub(channel);
  auto admin = pb::Admin::NewStub(channel);
  auto bearer = [](const std::string& key) {
    return [key](grpc::ClientContext& ctx) { ctx.AddMetadata("authorization", "Bearer " + key); };
  };
  EXPECT_EQ(Collect(*stub, TextRequest("tiny", "hi", 2)).status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Collect(*stub, TextRequest("tiny", "hi", 2), bearer("user-key-2")).status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Collect(*stub, TextRequest("tiny", "hi", 2), bearer("user-key-1")).status.ok());

  pb::LoadModelRequest load;
  load.set_name("second");
  load.set_path(tmp_.path() + "/m2");
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer user-key-1");
    pb::LoadModelResponse response;
    EXPECT_EQ(admin->LoadModel(&ctx, load, &response).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer admin-key-1");
    pb::LoadModelResponse response;
    auto status = admin->LoadModel(&ctx, load, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.model().name(), "second");
    EXPECT_EQ(Health(channel, "second"), 1);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer admin-key-1");
    pb::LoadModelResponse response;
    load.set_path(tmp_.path() + "/does-not-exist");
    load.set_name("third");
    EXPECT_NE(admin->LoadModel(&ctx, load, &response).error_code(), grpc::StatusCode::OK);
  }
  EXPECT_TRUE(Collect(*stub, TextRequest("second", "hi", 2), bearer("user-key-1")).status.ok());
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer admin-key-1");
    pb::UnloadModelRequest unload;
    unload.set_name("second");
    pb::UnloadModelResponse response;
    ASSERT_TRUE(admin->UnloadModel(&ctx, unload, &response).ok());
    EXPECT_EQ(Health(channel, "second"), 2);
  }
  EXPECT_EQ(Collect(*stub, TextRequest("second", "hi", 2), bearer("user-key-1")).status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Collect(*stub, TextRequest("tiny", "hi", 2), bearer("admin-key-1")).status.ok());
}

// Self-signed certificate for localhost / 127.0.0.1 made with the openssl CLI.
bool MakeCert(const std::string& dir, const std::string& name) {
  std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
                    "subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " + dir + "/" + name + ".key -out " + dir +
                    "/" + name + ".pem >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST_F(DaemonLifecycleTest, TlsAndMutualTls) {
  const std::string dir = tmp_.path();
  ASSERT_TRUE(MakeCert(dir, "server")) << "needs the openssl CLI";
  ASSERT_TRUE(MakeCert(dir, "client"));
  Daemon d({"--model", Model(), "--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key", "--tls-client-ca",
            dir + "/client.pem", "--tls-require-client-cert", "true"},
           dir);
  grpc::SslCredentialsOptions with_cert;
  with_cert.pem_root_certs = ReadFile(dir + "/server.pem");
  with_cert.pem_cert_chain = ReadFile(dir + "/client.pem");
  with_cert.pem_private_key = ReadFile(dir + "/client.key");
  auto channel = d.Channel(grpc::SslCredentials(with_cert));
  ASSERT_TRUE(WaitServing(channel)) << d.LogText();
  auto stub = pb::Generation::NewStub(channel);
  EXPECT_TRUE(Collect(*stub, TextRequest("tiny", "secure", 3)).status.ok());

  grpc::SslCredentialsOptions no_client_cert;
  no_client_cert.pem_root_certs = with_cert.pem_root_certs;
  auto anonymous = pb::Generation::NewStub(d.Channel(grpc::SslCredentials(no_client_cert)));
  EXPECT_EQ(Collect(*anonymous, TextRequest("tiny", "x", 1)).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  auto plaintext = pb::Generation::NewStub(d.Channel());
  EXPECT_EQ(Collect(*plaintext, TextRequest("tiny", "x", 1)).status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(DaemonLifecycleTest, BadFlagsExitWithUsageError) {
  Daemon d({"--max-seqs", "0"}, tmp_.path());
  EXPECT_EQ(d.Wait(), 2);
  EXPECT_NE(d.LogText().find("--max-seqs"), std::string::npos) << d.LogText();
}

TEST_F(DaemonLifecycleTest, ConfiguredModelThatFailsToLoadExitsOne) {
  std::ofstream(tmp_.path() + "/models.json") << R"({"models": [{"name": "gone", "path": ")" << tmp_.path()
                                               << R"(/missing"}]})";
  Daemon d({"--config", tmp_.path() + "/models.json"}, tmp_.path());
  EXPECT_EQ(d.Wait(), 1);
  EXPECT_NE(d.LogText().find("NOT_FOUND: model 'gone': "), std::string::npos) << d.LogText();
  Daemon bad_file({"--config", tmp_.path() + "/nope.json"}, tmp_.path());
  EXPECT_EQ(bad_file.Wait(), 2);
  EXPECT_NE(bad_file.LogText().find("nope.json: cannot open config file"), std::string::npos) << bad_file.LogText();
}

}  // namespace
}  // namespace df11::test
