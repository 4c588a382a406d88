// `df11 bench`: a load generator for df11d. Drives N concurrent streams (closed loop) or a
// Poisson request rate (open loop) with fixed prompt/output lengths for a duration, and reports
// what ghz cannot: output-token throughput, time to first token and inter-token latency
// (p50/p90/p99), measured on the client from stream messages. Table or --json.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "cli/cmd_client.h"
#include "proto/df11.grpc.pb.h"

namespace df11::cli {
namespace {

namespace pb = ::df11::v1;
using SteadyClock = std::chrono::steady_clock;

struct BenchFlags {
  ClientOptions client;
  std::string model;
  int concurrency = 8;
  double rate = 0;  // requests/s; > 0 switches to open loop
  int64_t prompt_tokens = 128, output_tokens = 128;
  double duration = 10;
  int64_t max_requests = 0;  // 0 = unlimited
  uint64_t seed = 1;
  bool json = false;
};

struct Samples {
  std::mutex mu;
  std::vector<double> ttft, itl, latency;
  int64_t ok = 0, failed = 0, output_tokens = 0;
  std::map<std::string, int64_t> errors;
};

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

pb::GenerateRequest MakeRequest(const BenchFlags& f, int64_t vocab, uint64_t n) {
  pb::GenerateRequest r;
  r.set_model(f.model);
  std::mt19937_64 rng(f.seed * 1000003 + n);
  for (int64_t i = 0; i < f.prompt_tokens; ++i) r.mutable_tokens()->add_ids(static_cast<int32_t>(rng() % vocab));
  r.set_max_tokens(f.output_tokens);
  r.set_ignore_eos(true);
  r.mutable_sampling()->set_temperature(0.0f);
  r.set_request_id("bench-" + std::to_string(n));
  return r;
}

void RunOne(pb::Generation::Stub& stub, const BenchFlags& f, const pb::GenerateRequest& request, Samples& out) {
  grpc::ClientContext ctx;
  PrepareContext(ctx, f.client);
  auto start = SteadyClock::now();
  auto reader = stub.Generate(&ctx, request);
  pb::GenerateResponse msg;
  std::vector<double> itl;
  double ttft = -1;
  int64_t tokens = 0;
  auto last = start;
  while (reader->Read(&msg)) {
    if (msg.token_ids_size() == 0) continue;
    auto now = SteadyClock::now();
    if (ttft < 0) {
      ttft = Seconds(now - start);
    } else {
      double gap = Seconds(now - last) / msg.token_ids_size();  // tokens batched in one message share the gap
      for (int i = 0; i < msg.token_ids_size(); ++i) itl.push_back(gap);
    }
    tokens += msg.token_ids_size();
    last = now;
  }
  grpc::Status status = reader->Finish();
  double latency = Seconds(SteadyClock::now() - start);
  std::lock_guard<std::mutex> lock(out.mu);
  if (!status.ok()) {
    out.failed++;
    out.errors[std::to_string(static_cast<int>(status.error_code())) + " " + status.error_message()]++;
    return;
  }
  out.ok++;
  out.output_tokens += tokens;
  if (ttft >= 0) out.ttft.push_back(ttft);
  out.itl.insert(out.itl.end(), itl.begin(), itl.end());
  out.latency.push_back(latency);
}

int64_t ModelVocab(pb::Generation::Stub& stub, const BenchFlags& f) {
  grpc::ClientContext ctx;
  PrepareContext(ctx, f.client);
  pb::GetModelInfoRequest request;
  request.set_model(f.model);
  pb::ModelInfo info;
  CheckRpc(stub.GetModelInfo(&ctx, request, &info), "GetModelInfo");
  if (info.vocab_size() <= 0) throw CommandFailed(1, "model reports no vocabulary size");
  return info.vocab_size();
}

void Report(const BenchFlags& f, Samples& s, double wall) {
  const double throughput = wall > 0 ? s.output_tokens / wall : 0;
  const double rps = wall > 0 ? s.ok / wall : 0;
  struct Row {
    const char* name;
    const std::vector<double>* v;
  };
  const Row rows[] = {{"ttft_s", &s.ttft}, {"itl_s", &s.itl}, {"latency_s", &s.latency}};
  if (f.json) {
    std::printf("{\"model\":\"%s\",\"mode\":\"%s\",\"concurrency\":%d,\"rate\":%g,\"prompt_tokens\":%lld,"
                "\"output_tokens\":%lld,\"duration_s\":%.3f,\"requests_ok\":%lld,\"requests_failed\":%lld,"
                "\"output_tokens_total\":%lld,\"output_tokens_per_s\":%.3f,\"requests_per_s\":%.3f",
                f.model.c_str(), f.rate > 0 ? "rate" : "concurrency", f.concurrency, f.rate,
                static_cast<long long>(f.prompt_tokens), static_cast<long long>(f.output_tokens), wall,
                static_cast<long long>(s.ok), static_cast<long long>(s.failed), static_cast<long long>(s.output_tokens),
                throughput, rps);
    for (const auto& r : rows) {
      std::printf(",\"%s\":{\"p50\":%.6f,\"p90\":%.6f,\"p99\":%.6f,\"n\":%zu}", r.name, Percentile(*r.v, 50),
                  Percentile(*r.v, 90), Percentile(*r.v, 99), r.v->size());
    }
    std::printf("}\n");
    return;
  }
  std::printf("model %s, %s, prompt %lld tokens, output %lld tokens, %.1f s\n", f.model.c_str(),
              f.rate > 0 ? ("rate " + std::to_string(f.rate) + " req/s").c_str()
                         : ("concurrency " + std::to_string(f.concurrency)).c_str(),
              static_cast<long long>(f.prompt_tokens), static_cast<long long>(f.output_tokens), wall);
  std::printf("requests ok %lld, failed %lld; %.1f req/s; output %.1f tokens/s\n", static_cast<long long>(s.ok),
              static_cast<long long>(s.failed), rps, throughput);
  std::printf("%-10s %10s %10s %10s %8s\n", "metric", "p50_ms", "p90_ms", "p99_ms", "n");
  for (const auto& r : rows) {
    std::printf("%-10s %10.2f %10.2f %10.2f %8zu\n", r.name, 1e3 * Percentile(*r.v, 50), 1e3 * Percentile(*r.v, 90),
                1e3 * Percentile(*r.v, 99), r.v->size());
  }
  for (const auto& [e, n] : s.errors) std::printf("error x%lld: %s\n", static_cast<long long>(n), e.c_str());
}

void Run(const BenchFlags& f) {
  if (f.concurrency < 1 || f.concurrency > 4096) throw CommandFailed(2, "--concurrency: must be in [1, 4096]");
  if (f.prompt_tokens < 1 || f.output_tokens < 1) throw CommandFailed(2, "--prompt-tokens and --output-tokens must be >= 1");
  if (!(f.duration > 0)) throw CommandFailed(2, "--duration: must be > 0");
  if (f.rate < 0) throw CommandFailed(2, "--rate: must be >= 0");
  auto stub = pb::Generation::NewStub(MakeChannel(f.client));
  const int64_t vocab = ModelVocab(*stub, f);
  Samples samples;
  std::atomic<uint64_t> issued{0};
  const auto start = SteadyClock::now();
  const auto end = start + std::chrono::microseconds(static_cast<int64_t>(f.duration * 1e6));
  auto take = [&]() -> std::optional<uint64_t> {
    if (SteadyClock::now() >= end) return std::nullopt;
    uint64_t n = issued++;
    if (f.max_requests > 0 && n >= static_cast<uint64_t>(f.max_requests)) return std::nullopt;
    return n;
  };
  if (f.rate > 0) {  // open loop: Poisson arrivals, each request on its own task
    std::vector<std::future<void>> tasks;
    std::mt19937_64 rng(f.seed);
    std::exponential_distribution<double> gap(f.rate);
    auto next = start;
    while (auto n = take()) {
      std::this_thread::sleep_until(next);
      tasks.push_back(std::async(std::launch::async, [&, n] { RunOne(*stub, f, MakeRequest(f, vocab, *n), samples); }));
      next += std::chrono::microseconds(static_cast<int64_t>(gap(rng) * 1e6));
      if (next >= end) break;
    }
    for (auto& t : tasks) t.wait();
  } else {  // closed loop: `concurrency` streams back to back
    std::vector<std::thread> workers;
    for (int w = 0; w < f.concurrency; ++w) {
      workers.emplace_back([&] {
        while (auto n = take()) RunOne(*stub, f, MakeRequest(f, vocab, *n), samples);
      });
    }
    for (auto& t : workers) t.join();
  }
  Report(f, samples, Seconds(SteadyClock::now() - start));
  if (samples.ok == 0) throw CommandFailed(1, "no request succeeded");
}

void Register(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  auto* b = app.add_subcommand("bench", "Load-test a df11d: throughput, TTFT and inter-token latency percentiles");
  AddClientOptions(b, f->client);
  b->add_option("--model,-m", f->model, "served model name")->required();
  b->add_option("--concurrency,-c", f->concurrency, "concurrent streams (closed loop)")->capture_default_str();
  b->add_option("--rate", f->rate, "requests per second, Poisson arrivals (open loop; overrides --concurrency)");
  b->add_option("--prompt-tokens", f->prompt_tokens, "prompt length (random token ids)")->capture_default_str();
  b->add_option("--output-tokens", f->output_tokens, "tokens generated per request (EOS ignored)")->capture_default_str();
  b->add_option("--duration", f->duration, "seconds to issue requests for")->capture_default_str();
  b->add_option("--requests", f->max_requests, "stop after this many requests (0 = no limit)");
  b->add_option("--seed", f->seed, "seed of the random prompts");
  b->add_flag("--json", f->json, "print one JSON object instead of the table");
  b->callback([f] { Run(*f); });
}
DF11_REGISTER_COMMAND(Register);

}  // namespace
}  // namespace df11::cli
