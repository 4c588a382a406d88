// upload_bench: host -> device copies of weights at load (kernels/cuda_upload.h, HostUploader).
//   Sources: a file of --gib GiB in the page cache, mapped afresh for every copy as a checkpoint
//   is at load (the copy faults its pages in), and the same bytes in pageable anonymous memory
//   already touched. Each is copied into one device buffer by cudaMemcpy (the load before
//   HostUploader) and by HostUploader at every --threads x --slots-mib; wall-clock medians of
//   --reps copies after one warm-up copy, in GB/s, beside the PCIe roofline measured in the same
//   run (page-locked cudaMemcpy). After every copy 256 pages spread over the buffer are copied
//   back and compared with the source: a wrong copy fails the program.
// Usage: upload_bench [--file PATH] [--gib 4] [--threads 1,2,4,8,16] [--slots-mib 4,16,64]
//                     [--reps 3] [--json FILE]
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_main.h"
#include "bench/pcie_roofline.h"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_upload.h"
#include "kernels/gpu.h"

namespace df11 {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "upload_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const Status& s, const std::string& what) {
  if (!s.ok()) Fail(what + ": " + s.ToString());
}

// Word i of the file: a mix of i, so that every page differs.
uint64_t WordAt(uint64_t i) { return (i + 1) * 0x9E3779B97F4A7C15ull ^ (i >> 7); }

void WriteFile(const std::string& path, uint64_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  constexpr uint64_t kBlock = uint64_t{64} << 20;
  std::vector<uint64_t> block(kBlock / 8);
  for (uint64_t at = 0; at < bytes; at += kBlock) {
    for (uint64_t w = 0; w < block.size(); ++w) block[w] = WordAt(at / 8 + w);
    out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(std::min(kBlock, bytes - at)));
  }
  if (!out) Fail("cannot write " + path);
}

// A fresh read-only mapping of the file (as SafetensorsFile::Open maps a checkpoint).
const char* MapFile(const std::string& path, uint64_t bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail("cannot open " + path);
  void* p = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) Fail("cannot map " + path);
  return static_cast<const char*>(p);
}

// 256 pages of the device copy, spread over it, equal to the source's.
void Verify(const char* device, const char* src, uint64_t bytes, const std::string& what) {
  constexpr uint64_t kPage = 4096;
  std::vector<char> back(kPage);
  for (uint64_t k = 0; k < 256; ++k) {
    const uint64_t at = std::min(bytes - kPage, (bytes / 256) * k + (k * 977 % 64) * 64);
    Check(cuda::CopyToHost(back.data(), device + at, kPage, nullptr), "copy back");
    if (std::memcmp(back.data(), src + at, kPage) != 0)
      Fail(what + ": the device bytes at " + std::to_string(at) + " differ");
  }
}

double MedianSeconds(int reps, const std::function<void()>& copy) {
  copy();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    copy();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return Median(std::move(t));
}

int Main(int argc, char** argv) {
  std::string file = "/tmp/upload_bench.bin";
  uint64_t gib = 4;
  std::vector<int64_t> threads = {1, 2, 4, 8, 16}, slots_mib = {4, 16, 64};
  int reps = 3;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--file")
      file = argv[++i];
    else if (a == "--gib")
      gib = std::stoull(argv[++i]);
    else if (a == "--threads")
      threads = ParseList(argv[++i]);
    else if (a == "--slots-mib")
      slots_mib = ParseList(argv[++i]);
    else if (a == "--reps")
      reps = std::stoi(argv[++i]);
  }
  if (gib == 0 || reps < 1) Fail("--gib and --reps must be at least 1");
  const uint64_t bytes = gib << 30;
  const std::pair<double, double> roof = PcieRoofline();
  const double roof_h2d = roof.first, roof_d2h = roof.second;
  std::printf("PCIe roofline (1 GiB page-locked): to device %.1f GB/s, to host %.1f GB/s\n", roof_h2d, roof_d2h);
  WriteFile(file, bytes);
  {  // read once: the page cache holds the file (the state of a checkpoint loaded again)
    const char* m = MapFile(file, bytes);
    uint64_t sum = 0;
    for (uint64_t at = 0; at < bytes; at += 4096) sum += static_cast<uint8_t>(m[at]);
    asm volatile("" : : "r"(sum) : "memory");  // the reads stay
    munmap(const_cast<char*>(m), bytes);
  }
  std::vector<char> anon(bytes);
  {
    const char* m = MapFile(file, bytes);
    std::memcpy(anon.data(), m, bytes);
    munmap(const_cast<char*>(m), bytes);
  }
  auto device = cuda::DeviceBuffer::Allocate(bytes, "upload_bench");
  Check(device.status(), "device buffer");
  char* dst = device->as<char>();

  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  auto report = [&](const char* source, const std::string& method, int64_t t, int64_t slot, double s) {
    const double gbps = static_cast<double>(bytes) / s / 1e9;
    std::printf("%-6s %-14s threads %2lld slot %3lld MiB: %.3f s, %5.1f GB/s (%3.0f%% of roofline)\n", source,
                method.c_str(), static_cast<long long>(t), static_cast<long long>(slot), s, gbps,
                100 * gbps / roof_h2d);
    std::fflush(stdout);
    rows.push_back({{"source", source},
                    {"method", method},
                    {"threads", t},
                    {"slot_mib", slot},
                    {"median_seconds", s},
                    {"gbps", gbps},
                    {"fraction_of_roofline", gbps / roof_h2d}});
  };
  for (const char* source : {"file", "anon"}) {
    const bool mapped = std::string(source) == "file";
    // The copy of one source by `copy_fn`, mapping the file afresh each time.
    auto timed = [&](const std::string& what, const std::function<Status(const char*)>& copy_fn) {
      return MedianSeconds(reps, [&] {
        const char* src = mapped ? MapFile(file, bytes) : anon.data();
        Check(copy_fn(src), what);
        Verify(dst, src, bytes, what);
        if (mapped) munmap(const_cast<char*>(src), bytes);
      });
    };
    const double plain = timed("cudaMemcpy", [&](const char* src) {
      return DF11_CUDA_STATUS(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    });
    report(source, "cudaMemcpy", 1, 0, plain);
    for (int64_t slot : slots_mib) {
      for (int64_t t : threads) {
        auto uploader = cuda::HostUploader::Create(static_cast<int>(t), static_cast<uint64_t>(slot) << 20);
        Check(uploader.status(), "HostUploader::Create");
        const double s = timed("HostUploader", [&](const char* src) { return uploader->Copy(dst, src, bytes); });
        report(source, "HostUploader", t, slot, s);
      }
    }
  }
  unlink(file.c_str());
  const std::string json = JsonPathArg(argc, argv);
  if (!json.empty()) {
    nlohmann::ordered_json out = {{"gpu", GpuName()},
                                  {"bytes", bytes},
                                  {"reps", reps},
                                  {"pcie_roofline_gbps", {{"to_device", roof_h2d}, {"to_host", roof_d2h}}},
                                  {"rows", rows}};
    std::ofstream(json) << out.dump(1) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace df11

int main(int argc, char** argv) { return df11::RunBenchMain("upload_bench", df11::Main, argc, argv); }
