// What the engine reports about its work: per-model counters and gauges (ModelStats, read through
// Engine::Stats) and the records of every step and every finished request handed to an
// EngineObserver (metrics fill their histograms from them).
// Thread-safety: plain values; observer callbacks run on the engine thread and must not block.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "scheduler/request.h"
#include "scheduler/residency.h"

namespace df11 {

// Counters are totals since start; gauges are the values after the last step.
struct ModelStats {
  std::string name;
  int64_t running = 0, waiting = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  int64_t preemptions_total = 0;
  int64_t prefix_hit_tokens_total = 0;  // sum of RequestUsage::prefix_hit_tokens
  int64_t prompt_tokens_total = 0, generated_tokens_total = 0;
  int64_t steps_total = 0;
  int64_t last_batch_sequences = 0, last_batch_tokens = 0;
  double last_step_seconds = 0, last_decompress_seconds = 0;
  uint64_t host_tier_bytes = 0;  // its weights' image in the host tier (kept after a promotion; ModelSlot)
  uint64_t last_used = 0;        // the engine's use clock at its last step or arrival (larger = more recent)
};

// Called on the engine thread after every step and at every request's end; must not block.
// Metrics use these to fill histograms.
struct StepRecord {
  std::string model;
  int64_t sequences = 0, tokens = 0;
  double step_seconds = 0, decompress_seconds = 0;
  double gpu_seconds = 0;  // StepOutput::gpu_seconds (CUDA; 0 on the CPU)
};
struct RequestRecord {
  std::string model;
  RequestId id = 0;
  std::string client_request_id;
  FinishReason finish_reason = FinishReason::kNone;
  Status status;
  RequestUsage usage;
  RequestTimings timings;
  std::vector<double> inter_token_seconds;  // gaps between consecutive generated tokens
  bool warmup = false;                      // GenerateRequest::warmup
};
// One model changing tier (residency.h): a promotion to the device or a demotion from it.
struct MoveRecord {
  std::string model;
  ModelTier from = ModelTier::kResident, to = ModelTier::kResident;  // `to`: where it ended
  bool promotion = false;                                            // to the device (else a demotion from it)
  std::string reason;  // promotions: "request", "admin"; demotions: "capacity", "admin"
  Status status;       // a failed promotion: why (the model stays in `from`)
  double seconds = 0;  // wall time of the move
  uint64_t bytes = 0;  // weight bytes copied or loaded (0 for a demotion to disk)
};
struct EngineObserver {
  std::function<void(const StepRecord&)> on_step;
  std::function<void(const RequestRecord&)> on_request;
  std::function<void(const MoveRecord&)> on_move;
};

}  // namespace df11
