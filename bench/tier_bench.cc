// tier_bench: what the model tiers cost on a GPU (scheduler/residency.h, Model::Offload/Restore).
//   0. Making a host image's page-locked memory, per model at its weight bytes: cudaMallocHost
//      against map + parallel first touch + cudaHostRegister (cuda::PinnedAlloc), seconds to
//      allocate and to free, and a 1 GiB copy each way through it (the pages must copy as fast).
//   1. Per model: Offload (device -> page-locked host image, allocation included) and Restore
//      (host image -> device) seconds over --cycles round trips: the first Offload makes the
//      image, later ones only free (the image is kept); Restore as a median, in GB/s of weight bytes,
//      beside the PCIe roofline measured in the same run (a 1 GiB page-locked copy each way).
//      After every round trip one decode step must give the logits of the step before the first
//      trip, bit for bit (else the program fails).
//   2. Time to first token through the Engine when only one model fits the device budget
//      (--max-model-bytes = 1.1 x the largest model): requests (--prompt tokens, 1 output token)
//      go to the models in rotation, so each one waits for its model's promotion (and the
//      demotion of the other); then the same request again to the model now resident.
// Usage: tier_bench --model NAME=DIR [--model NAME=DIR ...] [--cycles 5] [--prompt 512]
//                   [--rounds 3] [--json FILE]
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/pcie_roofline.h"
#include "kernels/cuda_ops.h"
#include "runtime/model/model.h"
#include "scheduler/engine.h"

namespace df11 {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

[[noreturn]] void Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "tier_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

// Section 0 for one size: {allocate s, free s, to device GB/s, to host GB/s} per method.
nlohmann::ordered_json PinnedAllocation(uint64_t bytes, GpuStream stream, const cuda::DeviceBuffer& device) {
  nlohmann::ordered_json out;
  constexpr uint64_t kCopy = uint64_t{1} << 30;
  for (const auto& [how, label] : {std::pair{cuda::PinnedAlloc::kCudaMallocHost, "cudaMallocHost"},
                                   std::pair{cuda::PinnedAlloc::kTouchThenRegister, "touch_then_register"}}) {
    auto t = std::chrono::steady_clock::now();
    auto host = cuda::PinnedHostBuffer::Allocate(bytes, "tier_bench", how);
    if (!host.ok()) Fail(label, host.status());
    const double allocate = Seconds(t);
    const uint64_t n = std::min(kCopy, bytes);
    t = std::chrono::steady_clock::now();
    if (!cuda::CopyToDevice(device.data(), host->data(), n, stream).ok() || !cuda::Synchronize(stream).ok()) {
      Fail(label, Internal("copy to device"));
    }
    const double h2d = static_cast<double>(n) / Seconds(t) / 1e9;
    t = std::chrono::steady_clock::now();
    if (!cuda::CopyToHost(host->data(), device.data(), n, stream).ok()) Fail(label, Internal("copy to host"));
    const double d2h = static_cast<double>(n) / Seconds(t) / 1e9;
    t = std::chrono::steady_clock::now();
    *host = cuda::PinnedHostBuffer();
    const double free_seconds = Seconds(t);
    std::printf(
        "  %.2f GB %-20s allocate %.3f s (%.1f GB/s), free %.3f s, 1 GiB copy to device %.1f GB/s, to host %.1f GB/s\n",
        static_cast<double>(bytes) / 1e9, label, allocate, static_cast<double>(bytes) / allocate / 1e9, free_seconds,
        h2d, d2h);
    out[label] = {
        {"allocate_seconds", allocate}, {"free_seconds", free_seconds}, {"to_device_gbps", h2d}, {"to_host_gbps", d2h}};
  }
  return out;
}

// Greedy logits of one prefill of `prompt` on a fresh cache.
std::vector<float> PrefillLogits(Model& model, const std::vector<int32_t>& prompt) {
  const int64_t block = 16, blocks = (static_cast<int64_t>(prompt.size()) + block) / block;
  auto cache = KvCache::Create(model.config(), blocks, block, Device::kCuda);
  if (!cache.ok()) Fail("KV cache", cache.status());
  StepInput in;
  in.kv_cache = &*cache;
  SequenceInput seq;
  seq.tokens = prompt;
  for (int64_t b = 0; b < blocks; ++b) seq.block_table.push_back(static_cast<int32_t>(b));
  seq.logits_for = {static_cast<int64_t>(prompt.size()) - 1};
  in.sequences.push_back(seq);
  StepOutput out;
  if (Status s = model.Step(in, out); !s.ok()) Fail("step", s);
  return out.logits;
}

int Main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> models;
  int cycles = 5, prompt = 512, rounds = 3;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Fail(a, InvalidArgument("needs a value"));
      return argv[++i];
    };
    if (a == "--model") {
      const std::string v = next();
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) Fail(a, InvalidArgument("expected NAME=DIR, got " + v));
      models.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--cycles") {
      cycles = std::stoi(next());
    } else if (a == "--prompt") {
      prompt = std::stoi(next());
    } else if (a == "--rounds") {
      rounds = std::stoi(next());
    } else if (a == "--json") {
      json_path = next();
    } else {
      Fail(a, InvalidArgument("unknown flag"));
    }
  }
  if (models.empty() || cycles < 1 || prompt < 1 || rounds < 1) Fail("usage", InvalidArgument("see the header"));
  const std::optional<GpuMemory> gpu = QueryGpuMemory();
  if (!gpu) Fail("device", FailedPrecondition("no CUDA device"));
  nlohmann::ordered_json report;
  report["device"] = GpuName();
  const auto [h2d, d2h] = PcieRoofline();
  report["pcie_roofline_gbps"] = {{"to_device", h2d}, {"to_host", d2h}};
  std::printf("PCIe roofline (1 GiB page-locked): to device %.1f GB/s, to host %.1f GB/s\n", h2d, d2h);
  std::vector<int32_t> tokens;
  tokens.reserve(prompt);
  for (int i = 0; i < prompt; ++i) tokens.push_back((i * 7919 + 13) % 1000 + 10);

  uint64_t largest = 0;
  for (const auto& [name, dir] : models) {
    ModelOptions o;
    o.device = Device::kCuda;
    auto t0 = std::chrono::steady_clock::now();
    auto model = Model::Load(dir, o);
    if (!model.ok()) Fail(dir, model.status());
    const double load_seconds = Seconds(t0);
    const LoadReport& r = (*model)->load_report();
    {  // section 0, at this model's weight bytes, before its first Offload
      auto stream = cuda::CreateStream();
      auto device = cuda::DeviceBuffer::Allocate(uint64_t{1} << 30, "tier_bench");
      if (!stream.ok() || !device.ok()) Fail("allocation buffers", device.status());
      std::printf("%-12s page-locked allocation:\n", name.c_str());
      report["pinned_allocation"][name] = PinnedAllocation(r.weight_bytes, *stream, *device);
      cuda::DestroyStream(*stream);
    }
    largest = std::max(largest, r.weight_bytes + r.scratch_bytes + r.shared_scratch_bytes);
    const std::vector<float> want = PrefillLogits(**model, tokens);
    std::vector<double> offload, restore;
    for (int c = 0; c < cycles; ++c) {
      t0 = std::chrono::steady_clock::now();
      if (Status s = (*model)->Offload(); !s.ok()) Fail("offload", s);
      offload.push_back(Seconds(t0));
      t0 = std::chrono::steady_clock::now();
      if (Status s = (*model)->Restore(); !s.ok()) Fail("restore", s);
      restore.push_back(Seconds(t0));
      const std::vector<float> got = PrefillLogits(**model, tokens);
      if (got.size() != want.size() || std::memcmp(got.data(), want.data(), 4 * got.size()) != 0) {
        Fail(name, Internal("logits changed after an Offload/Restore round trip"));
      }
    }
    const double gb = static_cast<double>(r.weight_bytes) / 1e9;
    const double first = offload.front(), on = Median(restore);
    const double off = Median(std::vector<double>(offload.begin() + 1, offload.end()));
    std::printf(
        "%-12s %s %.2f GB: load %.1f s, first offload %.3f s (%.1f GB/s), later offloads %.3f s, restore %.3f s "
        "(%.1f GB/s, %.0f%% of roofline); logits identical after %d round trips\n",
        name.c_str(), r.df11 ? "DF11" : "BF16", gb, load_seconds, first, gb / first, off, on, gb / on,
        100 * gb / on / h2d, cycles);
    report["models"][name] = {{"dir", dir},
                              {"df11", r.df11},
                              {"weight_bytes", r.weight_bytes},
                              {"load_seconds", load_seconds},
                              {"offload_seconds", offload},
                              {"restore_seconds", restore},
                              {"first_offload_seconds", first},
                              {"later_offload_median_seconds", off},
                              {"restore_median_seconds", on},
                              {"restore_gbps", gb / on},
                              {"restore_fraction_of_roofline", gb / on / h2d}};
  }

  // Time to first token through the engine, one model on the device at a time.
  EngineOptions eo;
  eo.device = Device::kCuda;
  eo.max_model_bytes = static_cast<int64_t>(1.1 * static_cast<double>(largest));
  eo.max_host_model_bytes = static_cast<int64_t>(std::min<double>(0.5 * 128e9, 1.1 * largest * models.size()));
  eo.max_seqs = 8;
  std::mutex mu;
  std::condition_variable cv;
  std::map<RequestId, RequestRecord> done;
  EngineObserver observer;
  observer.on_request = [&](const RequestRecord& r) {
    std::lock_guard lock(mu);
    done[r.id] = r;
    cv.notify_all();
  };
  auto engine = Engine::Create(eo, observer);
  if (!engine.ok()) Fail("engine", engine.status());
  std::vector<ModelSpec> specs;
  specs.reserve(models.size());
  for (const auto& [name, dir] : models) specs.push_back({.name = name, .path = dir});
  if (Status s = (*engine)->LoadModels(specs); !s.ok()) Fail("engine load", s);
  auto run = [&](const std::string& model) {
    GenerateRequest g;
    g.model = model;
    g.prompt_tokens = tokens;
    g.max_tokens = 1;
    g.sampling.temperature = 0;
    auto id = (*engine)->Submit(std::move(g), [](RequestEvent&&) {});
    if (!id.ok()) Fail("submit", id.status());
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done.contains(*id); });
    RequestRecord r = done[*id];
    if (!r.status.ok()) Fail("request", r.status);
    return r;
  };
  std::map<std::string, std::vector<double>> promoted, resident;
  for (int round = 0; round < rounds; ++round) {
    for (const auto& [name, dir] : models) {
      const RequestRecord first = run(name);
      (first.timings.waited_for_promotion ? promoted : resident)[name].push_back(first.timings.first_token_seconds);
      resident[name].push_back(run(name).timings.first_token_seconds);
    }
  }
  for (const auto& [name, dir] : models) {
    std::printf(
        "%-12s time to first token (%d-token prompt): resident %.3f s, waiting for promotion %.3f s (%zu runs)\n",
        name.c_str(), prompt, Median(resident[name]), Median(promoted[name]), promoted[name].size());
    report["models"][name]["ttft_resident_seconds"] = resident[name];
    report["models"][name]["ttft_promoted_seconds"] = promoted[name];
  }
  report["engine"] = {
      {"max_model_bytes", eo.max_model_bytes}, {"max_host_model_bytes", eo.max_host_model_bytes}, {"prompt", prompt}};
  if (!json_path.empty()) std::ofstream(json_path) << report.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("tier_bench", df11::Main, argc, argv); }
