// Test helpers that run the real df11d binary (DF11D_PATH, set by tests/server/tests.cmake) on
// 127.0.0.1 and talk to it over gRPC:
//   - FreePort(): a TCP port no other process will take before the daemon binds it (see there);
//   - Daemon: fork/exec df11d with flags, stderr to a log file (printed by LogText()), Signal/Wait;
//   - WaitHealthy / Health: grpc.health.v1 Check;
//   - Collect(): run one Generate stream to the end (text, token ids, last message, status);
//   - EditModelConfig(): rewrite a model directory's config.json through an edit.
// Usage:
//   df11::ScopedTempDir tmp("srv"); WriteTinyModel(tmp.path() + "/m");
//   Daemon d({"--model", "tiny=" + tmp.path() + "/m"}, tmp.path());
//   ASSERT_TRUE(d.WaitServing());
//   auto stub = df11::v1::Generation::NewStub(d.Channel());
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "proto/df11.grpc.pb.h"
#include "tests/scheduler/engine_test_util.h"

namespace df11::test {

// Applies `edit` to dir/config.json and writes it back (a test model with one field changed).
inline void EditModelConfig(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json config;
  std::ifstream(dir + "/config.json") >> config;
  edit(config);
  std::ofstream(dir + "/config.json") << config.dump();
}

namespace pb = ::df11::v1;

// Ports for test daemons come from below the kernel's ephemeral range (ip_local_port_range), so
// no bind(0) and no outgoing connection of another process can take one between FreePort() and the
// daemon's bind; a flock on /tmp/df11-test-port-<port>.lock, held until this process exits, keeps
// test processes running side by side (ctest -j) from choosing the same one. 0 if none is found:
// the caller's daemon then fails to start and says so.
inline int FreePort() {
  int ephemeral_low = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> ephemeral_low;
  const int low = 10000, high = std::max(low + 1000, ephemeral_low);  // [low, high)
  std::random_device seed;
  const int start = static_cast<int>(seed() % static_cast<unsigned>(high - low));
  for (int i = 0; i < high - low; ++i) {
    const int port = low + (start + i) % (high - low);
    const std::string lock_path = "/tmp/df11-test-port-" + std::to_string(port) + ".lock";
    const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lock < 0) continue;
    if (::flock(lock, LOCK_EX | LOCK_NB) != 0) {  // another test process holds it
      ::close(lock);
      continue;
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (fd >= 0) ::close(fd);
    if (bound) return port;  // `lock` stays open (and held) until the process exits
    ::close(lock);
  }
  return 0;
}

// Flags every test daemon gets (CPU, small KV, no metrics endpoint, quiet logs).
inline std::vector<std::string> BaseFlags() {
  return {"--kv-memory-bytes", std::to_string(64 << 20), "--metrics-address", "", "--threads", "1",
          "--drain-grace-seconds", "10"};
}

class Daemon {
 public:
  Daemon(std::vector<std::string> flags, const std::string& dir) : port_(FreePort()) {
    log_path_ = dir + "/df11d_" + std::to_string(port_) + ".log";
    std::vector<std::string> args = {DF11D_PATH, "--grpc-address", "127.0.0.1:" + std::to_string(port_)};
    const std::vector<std::string> base = BaseFlags();
    for (size_t i = 0; i + 1 < base.size(); i += 2) {  // flag/value pairs; `flags` may override one
      if (std::find(flags.begin(), flags.end(), base[i]) != flags.end()) continue;
      args.push_back(base[i]);
      args.push_back(base[i + 1]);
    }
    for (auto& f : flags) args.push_back(f);
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
      ::dup2(fd, 1);
      std::vector<char*> argv;
      argv.reserve(args.size() + 1);
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~Daemon() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::shared_ptr<grpc::Channel> Channel(const std::shared_ptr<grpc::ChannelCredentials>& creds = grpc::InsecureChannelCredentials()) const {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a fresh connection per channel
    // Reconnect within milliseconds (gRPC's default backoff is 1 s and grows): tests that poll a
    // daemon still starting up must not sleep through the state they want to observe.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 10);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
    return grpc::CreateCustomChannel(address(), creds, args);
  }

  void Signal(int sig) { ::kill(pid_, sig); }
  // Exit code, or -1 on timeout / abnormal exit.
  int Wait(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  std::string LogText() const {
    std::ifstream in(log_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  int port_;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string log_path_;
};

// grpc.health.v1 Check through the generic stub (no generated health code needed): the serving
// status (1 = SERVING, 2 = NOT_SERVING) or -code for an RPC error.
inline int Health(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  // HealthCheckRequest { string service = 1; } encoded by hand.
  std::string req;
  if (!service.empty()) {
    req.push_back(0x0a);
    req.push_back(static_cast<char>(service.size()));
    req += service;
  }
  grpc::Slice slice(req);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::Status status;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = std::move(s);
                   done = true;
                   cv.notify_all();
                 });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!status.ok()) return -static_cast<int>(status.error_code());
  std::vector<grpc::Slice> slices;
  response.Dump(&slices);
  std::string bytes;
  for (auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // HealthCheckResponse { ServingStatus status = 1; } -> 0x08 <varint>; empty = UNKNOWN (0).
  return bytes.size() >= 2 && bytes[0] == 0x08 ? bytes[1] : 0;
}

// Polls until Health(service) == SERVING (1) or the timeout passes.
inline bool WaitServing(const std::shared_ptr<grpc::Channel>& channel, const std::string& service = "",
                        std::chrono::seconds timeout = std::chrono::seconds(60)) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (Health(channel, service) == 1) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

struct StreamResult {
  grpc::Status status;
  std::string text;
  std::vector<int32_t> token_ids;
  int messages = 0;
  pb::GenerateResponse last;
  std::multimap<std::string, std::string> trailers;
};

// Runs a Generate stream to the end. `ctx_setup` may add metadata or a deadline.
inline StreamResult Collect(pb::Generation::Stub& stub, const pb::GenerateRequest& request,
                            const std::function<void(grpc::ClientContext&)>& ctx_setup = {}) {
  grpc::ClientContext ctx;
  if (ctx_setup) ctx_setup(ctx);
  StreamResult r;
  auto reader = stub.Generate(&ctx, request);
  pb::GenerateResponse msg;
  while (reader->Read(&msg)) {
    r.text += msg.text();
    r.token_ids.insert(r.token_ids.end(), msg.token_ids().begin(), msg.token_ids().end());
    r.messages++;
    r.last = msg;
  }
  r.status = reader->Finish();
  for (const auto& [k, v] : ctx.GetServerTrailingMetadata()) r.trailers.emplace(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
  return r;
}

inline pb::GenerateRequest TextRequest(const std::string& model, const std::string& text, int64_t max_tokens) {
  pb::GenerateRequest r;
  r.set_model(model);
  r.set_text(text);
  r.set_max_tokens(max_tokens);
  r.mutable_sampling()->set_temperature(0.0f);
  r.set_ignore_eos(true);
  return r;
}

}  // namespace df11::test
