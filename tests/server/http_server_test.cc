// HttpServer (server/http_server.h) on loopback: responses completed later from another thread,
// streams, the per-client connection limit, the read timeout, and Stop with waiting exchanges.
#include "server/http_server.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/server/http_test_util.h"

namespace df11::server {
namespace {

using test::ConnectLoopback;
using test::Http;
using test::RecvSome;
using test::SendAll;

std::unique_ptr<HttpServer> StartOrDie(const HttpLimits& limits, HttpHandler handler) {
  auto server = HttpServer::Start("127.0.0.1:0", limits, {}, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

TEST(HttpServer, ResponsesAndStreamsCompleteFromOtherThreads) {
  std::vector<std::thread> workers;
  std::mutex mu;
  auto server = StartOrDie({}, [&](const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex) {
    std::lock_guard<std::mutex> lock(mu);
    workers.emplace_back([req, ex] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (req.path == "/stream") {
        ex->StartStream("text/plain", {});
        for (int i = 0; i < 5; ++i) {
          ex->Write(std::to_string(i));
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        ex->End();
      } else {
        ex->Respond({200, "text/plain", {{"X-Echo", req.method}}, "body:" + req.body});
      }
    });
  });
  ASSERT_NE(server, nullptr);
  test::HttpResult full = Http(server->port(), "POST", "/full", "abc");
  EXPECT_EQ(full.status, 200);
  EXPECT_EQ(full.body, "body:abc");
  EXPECT_EQ(full.headers["x-echo"], "POST");
  test::HttpResult stream = Http(server->port(), "GET", "/stream");
  EXPECT_EQ(stream.status, 200);
  EXPECT_EQ(stream.body, "01234");
  server->Stop();
  for (auto& t : workers) t.join();
}

TEST(HttpServer, ConnectionsPerClientAreLimitedAndIdleOnesClosed) {
  HttpLimits limits;
  limits.max_connections_per_client = 2;
  limits.idle_timeout_seconds = 1;
  auto server = StartOrDie(limits, [](const HttpRequest&, const std::shared_ptr<HttpExchange>& ex) {
    ex->Respond({200, "text/plain", {}, "ok"});
  });
  ASSERT_NE(server, nullptr);
  int a = ConnectLoopback(server->port(), 10), b = ConnectLoopback(server->port(), 10);
  ASSERT_TRUE(SendAll(a, "GET / HTTP/1.1\r\n"));  // never finished
  ASSERT_TRUE(SendAll(b, "GET / HTTP/1.1\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // A third connection from the same IP is closed without an answer.
  test::HttpResult third = Http(server->port(), "GET", "/");
  EXPECT_EQ(third.status, 0);
  // The idle ones are closed after the read timeout; then the client may connect again.
  const auto start = std::chrono::steady_clock::now();
  std::string ignored;
  while (RecvSome(a, &ignored)) {
  }
  while (RecvSome(b, &ignored)) {
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  ::close(a);
  ::close(b);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(Http(server->port(), "GET", "/").status, 200);
}

TEST(HttpServer, StopAnswersWaitingExchangesAndEndsStreams) {
  std::vector<std::shared_ptr<HttpExchange>> kept;
  std::mutex mu;
  auto server = StartOrDie({}, [&](const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex) {
    if (req.path == "/stream") ex->StartStream("text/plain", {});
    std::lock_guard<std::mutex> lock(mu);
    kept.push_back(ex);  // never completed
  });
  ASSERT_NE(server, nullptr);
  int waiting = ConnectLoopback(server->port(), 10);
  int streaming = ConnectLoopback(server->port(), 10);
  ASSERT_TRUE(SendAll(waiting, test::RequestText("GET", "/wait", "")));
  ASSERT_TRUE(SendAll(streaming, test::RequestText("GET", "/stream", "")));
  for (int i = 0; i < 100; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (kept.size() == 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  server->Stop();  // must not hang on the suspended connections
  std::string raw;
  while (RecvSome(waiting, &raw)) {
  }
  EXPECT_EQ(test::ParseResponse(raw).status, 503) << raw;
  ::close(waiting);
  ::close(streaming);
  for (auto& ex : kept) ex->Write("late");  // after Stop: ignored, no crash
}

TEST(HttpServer, BadAddressesAndBusyPorts) {
  EXPECT_EQ(HttpServer::Start("nohostport", {}, {}, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::Start("127.0.0.1:99999", {}, {}, {}).status().code(), StatusCode::kInvalidArgument);
  auto first = StartOrDie({}, [](const HttpRequest&, const std::shared_ptr<HttpExchange>&) {});
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(HttpServer::Start("127.0.0.1:" + std::to_string(first->port()), {}, {}, {}).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(HttpServer::Start("127.0.0.1:0", {}, {"cert-without-key", ""}, {}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace df11::server
