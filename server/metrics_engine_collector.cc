// Scrape-time metrics from an engine snapshot, the GPU and the build (see metrics_engine_collector.h).
#include "server/metrics_engine_collector.h"

#include <algorithm>
#include <utility>

#include <prometheus/metric_family.h>

#include "kernels/base/version.h"

namespace df11 {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading: return "loading";
    case ModelState::kReady: return "ready";
    case ModelState::kUnloading: return "unloading";
  }
  return "unknown";
}

// Appends families in a fixed order; samples go to the family named last.
class FamilyWriter {
 public:
  explicit FamilyWriter(std::vector<MetricFamily>& out) : out_(out) {}
  FamilyWriter& Gauge(const char* name, const char* help) { return Family(name, help, MetricType::Gauge); }
  FamilyWriter& Counter(const char* name, const char* help) { return Family(name, help, MetricType::Counter); }
  void Sample(std::vector<ClientMetric::Label> labels, double value) {
    ClientMetric metric;
    metric.label = std::move(labels);
    if (out_.back().type == MetricType::Counter) {
      metric.counter.value = value;
    } else {
      metric.gauge.value = value;
    }
    out_.back().metric.push_back(std::move(metric));
  }

 private:
  FamilyWriter& Family(const char* name, const char* help, MetricType type) {
    out_.push_back(MetricFamily{name, help, type, {}});
    return *this;
  }
  std::vector<MetricFamily>& out_;
};

// One family per field of ModelStats, each with one sample per model.
struct StatsField {
  const char* name;
  const char* help;
  MetricType type;
  double (*value)(const ModelStats&);
};
const StatsField kStatsFields[] = {
    {"df11_requests_running", "Requests being generated (in the running batch).", MetricType::Gauge,
     [](const ModelStats& s) { return double(s.running); }},
    {"df11_requests_waiting", "Requests queued, not yet scheduled.", MetricType::Gauge,
     [](const ModelStats& s) { return double(s.waiting); }},
    {"df11_kv_cache_blocks_used", "KV-cache blocks in use.", MetricType::Gauge,
     [](const ModelStats& s) { return double(s.kv_blocks_used); }},
    {"df11_kv_cache_blocks_capacity", "KV-cache blocks reserved for the model.", MetricType::Gauge,
     [](const ModelStats& s) { return double(s.kv_blocks_total); }},
    {"df11_kv_cache_usage_ratio", "KV-cache blocks used / total (0-1).", MetricType::Gauge,
     [](const ModelStats& s) { return s.kv_blocks_total > 0 ? double(s.kv_blocks_used) / s.kv_blocks_total : 0.0; }},
    {"df11_batch_sequences", "Sequences in the model's last engine step.", MetricType::Gauge,
     [](const ModelStats& s) { return double(s.last_batch_sequences); }},
    {"df11_batch_tokens", "Tokens (prefill + decode) in the model's last engine step.", MetricType::Gauge,
     [](const ModelStats& s) { return double(s.last_batch_tokens); }},
    {"df11_prompt_tokens_total", "Prompt tokens of scheduled requests (cached ones included).", MetricType::Counter,
     [](const ModelStats& s) { return double(s.prompt_tokens_total); }},
    {"df11_prompt_tokens_cached_total", "Prompt tokens served from the prefix cache, not recomputed.",
     MetricType::Counter, [](const ModelStats& s) { return double(s.prefix_hit_tokens_total); }},
    {"df11_generated_tokens_total", "Tokens generated.", MetricType::Counter,
     [](const ModelStats& s) { return double(s.generated_tokens_total); }},
    {"df11_preemptions_total", "Running requests preempted to free KV blocks.", MetricType::Counter,
     [](const ModelStats& s) { return double(s.preemptions_total); }},
    {"df11_steps_total", "Engine steps that ran this model.", MetricType::Counter,
     [](const ModelStats& s) { return double(s.steps_total); }},
    {"df11_model_host_tier_bytes", "Weight bytes of the model's image in the host tier (kept after a promotion: the next demotion is free).",
     MetricType::Gauge, [](const ModelStats& s) { return double(s.host_tier_bytes); }},
};

uint64_t KvUsedBytes(const ModelInfo& info, const EngineStats& stats) {
  for (const ModelStats& s : stats.models) {
    if (s.name == info.name && s.kv_blocks_total > 0) {
      return static_cast<uint64_t>(double(info.kv_bytes) * double(s.kv_blocks_used) / double(s.kv_blocks_total));
    }
  }
  return 0;
}

void WriteStats(const EngineStats& stats, FamilyWriter& w) {
  for (const StatsField& field : kStatsFields) {
    if (field.type == MetricType::Counter) {
      w.Counter(field.name, field.help);
    } else {
      w.Gauge(field.name, field.help);
    }
    for (const ModelStats& s : stats.models) w.Sample({{"model", s.name}}, field.value(s));
  }
}

void WriteModelInfo(const std::vector<ModelInfo>& models, FamilyWriter& w) {
  w.Gauge("df11_model_info", "Served model (value 1): architecture, weight format, state.");
  for (const ModelInfo& m : models) {
    w.Sample({{"model", m.name}, {"architecture", m.architecture}, {"format", m.df11 ? "df11" : "bf16"},
              {"state", ModelStateName(m.state)}},
             1);
  }
  w.Gauge("df11_model_compression_ratio", "Resident weight bytes / BF16 weight bytes (1 for BF16 models).");
  for (const ModelInfo& m : models) {
    w.Sample({{"model", m.name}}, m.bf16_weight_bytes > 0 ? double(m.weight_bytes) / m.bf16_weight_bytes : 1.0);
  }
  w.Gauge("df11_model_load_seconds", "Time the model took to load.");
  for (const ModelInfo& m : models) w.Sample({{"model", m.name}}, m.load_seconds);
  w.Gauge("df11_model_load_warnings", "Warnings of the model's load (its model_load_warning log lines).");
  for (const ModelInfo& m : models) w.Sample({{"model", m.name}}, static_cast<double>(m.load_warnings.size()));
  w.Gauge("df11_model_tier", "Where the model's weights are (value 1): tier resident, host or disk; pinned.");
  for (const ModelInfo& m : models) {
    w.Sample({{"model", m.name}, {"tier", TierName(m.tier)}, {"pinned", m.pinned ? "true" : "false"}}, 1);
  }
}

// Memory per model: current, then the peak of each.
void WriteMemory(const EngineSnapshot& engine, const std::map<std::string, ModelMemoryPeaks>& peaks,
                 FamilyWriter& w) {
  struct MemoryField {
    const char* name;
    const char* peak_name;
    const char* help;
    double (*current)(const ModelInfo&, const EngineStats&);
    double ModelMemoryPeaks::*peak;
  };
  static const MemoryField kMemory[] = {
      {"df11_model_weight_bytes", "df11_model_weight_peak_bytes", "Resident weights (DF11-compressed when DF11).",
       [](const ModelInfo& m, const EngineStats&) { return double(m.weight_bytes); }, &ModelMemoryPeaks::weight},
      {"df11_model_weight_bf16_bytes", "df11_model_weight_bf16_peak_bytes", "The same weights as BF16.",
       [](const ModelInfo& m, const EngineStats&) { return double(m.bf16_weight_bytes); },
       &ModelMemoryPeaks::weight_bf16},
      {"df11_model_scratch_bytes", "df11_model_scratch_peak_bytes",
       "The model's own step workspace (CPU: and its decode scratch); the shared GPU decode scratch is "
       "df11_shared_scratch_bytes.",
       [](const ModelInfo& m, const EngineStats&) { return double(m.scratch_bytes); }, &ModelMemoryPeaks::scratch},
      {"df11_model_kv_cache_bytes", "df11_model_kv_cache_peak_bytes", "KV-cache memory reserved for the model.",
       [](const ModelInfo& m, const EngineStats&) { return double(m.kv_bytes); }, &ModelMemoryPeaks::kv_cache},
      {"df11_model_kv_cache_used_bytes", "df11_model_kv_cache_used_peak_bytes", "KV-cache memory in used blocks.",
       [](const ModelInfo& m, const EngineStats& s) { return double(KvUsedBytes(m, s)); },
       &ModelMemoryPeaks::kv_cache_used},
  };
  w.Gauge("df11_shared_scratch_bytes", "DF11 decode scratch shared by every model on the GPU (counted once).")
      .Sample({}, double(engine.stats.shared_scratch_bytes));
  for (const MemoryField& field : kMemory) {
    w.Gauge(field.name, field.help);
    for (const ModelInfo& m : engine.models) w.Sample({{"model", m.name}}, field.current(m, engine.stats));
    w.Gauge(field.peak_name, "Peak of the gauge without _peak (sampled every 100 ms and at scrapes).");
    for (const auto& [name, model_peaks] : peaks) w.Sample({{"model", name}}, model_peaks.*field.peak);
  }
}

void WriteGpu(const GpuMemory& gpu, uint64_t used_peak, FamilyWriter& w) {
  const std::string index = std::to_string(gpu.index);
  w.Gauge("df11_gpu_memory_total_bytes", "GPU memory (cudaMemGetInfo).").Sample({{"gpu", index}}, gpu.total_bytes);
  w.Gauge("df11_gpu_memory_used_bytes", "GPU memory in use by any process.")
      .Sample({{"gpu", index}}, double(gpu.total_bytes - gpu.free_bytes));
  w.Gauge("df11_gpu_memory_free_bytes", "GPU memory free.").Sample({{"gpu", index}}, gpu.free_bytes);
  w.Gauge("df11_gpu_memory_used_peak_bytes", "Peak of df11_gpu_memory_used_bytes (sampled every 100 ms).")
      .Sample({{"gpu", index}}, used_peak);
}

}  // namespace

BuildInfo QueryBuildInfo() { return BuildInfo{Version(), CudaRuntimeVersion(), GpuName()}; }

EngineCollector::EngineCollector(BuildInfo build, GpuSource gpu)
    : build_(std::move(build)), gpu_source_(std::move(gpu)) {}

void EngineCollector::SetSource(Source source) {
  std::lock_guard<std::mutex> lock(mutex_);
  source_ = std::move(source);
}

void EngineCollector::Sample() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReadLocked();
}

bool EngineCollector::Serves(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!source_) return false;
  const EngineSnapshot snapshot = source_();
  return std::any_of(snapshot.models.begin(), snapshot.models.end(),
                     [&](const ModelInfo& info) { return info.name == model; });
}

EngineCollector::Reading EngineCollector::ReadLocked() const {
  Reading reading;
  if (source_) reading.engine = source_();
  if (gpu_source_) reading.gpu = gpu_source_();
  for (const ModelInfo& info : reading.engine.models) {
    ModelMemoryPeaks& p = model_peaks_[info.name];
    p.weight = std::max(p.weight, double(info.weight_bytes));
    p.weight_bf16 = std::max(p.weight_bf16, double(info.bf16_weight_bytes));
    p.scratch = std::max(p.scratch, double(info.scratch_bytes));
    p.kv_cache = std::max(p.kv_cache, double(info.kv_bytes));
    p.kv_cache_used = std::max(p.kv_cache_used, double(KvUsedBytes(info, reading.engine.stats)));
  }
  if (reading.gpu) {
    gpu_used_peak_ = std::max(gpu_used_peak_, reading.gpu->total_bytes - reading.gpu->free_bytes);
  }
  return reading;
}

std::vector<prometheus::MetricFamily> EngineCollector::Collect() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Reading reading = ReadLocked();
  std::vector<MetricFamily> out;
  FamilyWriter w(out);
  w.Gauge("df11_build_info", "Build identity (value 1).")
      .Sample({{"version", build_.version}, {"cuda", build_.cuda}, {"gpu", build_.gpu}}, 1);
  WriteStats(reading.engine.stats, w);
  WriteModelInfo(reading.engine.models, w);
  WriteMemory(reading.engine, model_peaks_, w);
  if (reading.gpu) WriteGpu(*reading.gpu, gpu_used_peak_, w);
  // Families without samples (no models yet) are left out of the exposition.
  out.erase(std::remove_if(out.begin(), out.end(), [](const MetricFamily& f) { return f.metric.empty(); }),
            out.end());
  return out;
}

}  // namespace df11
