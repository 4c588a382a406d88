// EngineCollector: the metrics computed at scrape time from an engine snapshot (EngineStats and
// ModelInfo), the GPU's memory and the build identity; it also keeps memory peaks. Part of
// Metrics (server/metrics.h); every metric is listed in docs/metrics.md.
// Peaks are the highest values seen by Sample() (Metrics calls it every 100 ms) or a scrape.
// Thread-safety: every method is thread-safe; one mutex serialises sampling, scrapes and
// SetSource.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/collectable.h>

#include "kernels/gpu.h"
#include "scheduler/engine.h"

namespace df11 {

// What df11_build_info labels: this build and the GPU it runs on.
struct BuildInfo {
  std::string version;  // kernels/base/version.h
  std::string cuda;     // CUDA runtime version "12.4", or "none"
  std::string gpu;      // name of the current CUDA device, or "none"
};
BuildInfo QueryBuildInfo();  // from kernels/gpu.h

struct EngineSnapshot {
  EngineStats stats;
  std::vector<ModelInfo> models;
};

// The highest memory values seen for one model, bytes.
struct ModelMemoryPeaks {
  double weight = 0, weight_bf16 = 0, scratch = 0, kv_cache = 0, kv_cache_used = 0;
};

class EngineCollector : public prometheus::Collectable {
 public:
  using Source = std::function<EngineSnapshot()>;
  using GpuSource = std::function<std::optional<GpuMemory>()>;

  // `gpu` defaults to QueryGpuMemory (tests pass their own).
  explicit EngineCollector(BuildInfo build, GpuSource gpu = QueryGpuMemory);

  // Where snapshots come from; an empty Source detaches. Waits for a scrape in progress.
  void SetSource(Source source);
  // Reads the source and the GPU once and raises the peaks.
  void Sample();
  // Whether the attached engine serves `model` (false when detached).
  bool Serves(const std::string& model) const;

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Reading {  // one snapshot plus the GPU, peaks already raised
    EngineSnapshot engine;
    std::optional<GpuMemory> gpu;
  };
  Reading ReadLocked() const;  // mutex_ held

  const BuildInfo build_;
  const GpuSource gpu_source_;
  mutable std::mutex mutex_;
  Source source_;
  mutable std::map<std::string, ModelMemoryPeaks> model_peaks_;  // by model name, kept after unload
  mutable uint64_t gpu_used_peak_ = 0;
};

}  // namespace df11
