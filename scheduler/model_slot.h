// ModelSlot: one model inside the engine, in any tier (residency.h): the Model, its tokenizer, its KV cache and
// block pool, and the requests for it (waiting queue + running set). Step() runs one continuous-
// batching iteration: schedule (plan with planner.h; preempt, admit with prefix-cache hits,
// allocate blocks), launch (Model::Launch), collect (Model::Collect; register full blocks in the
// prefix cache, append the sampled tokens), stream (detokenize, stop strings, events, end finished
// requests). With host overlap a step is collected at the start of the next Step, before the
// next one is scheduled and launched, and streamed while that one runs.
// Thread-safety: none; owned and called by the engine thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/model/kv_cache.h"
#include "runtime/model/model.h"
#include "scheduler/block_pool.h"
#include "scheduler/model_spec.h"
#include "scheduler/observer.h"
#include "scheduler/request.h"
#include "scheduler/residency.h"
#include "scheduler/sequence.h"

namespace df11 {

// Engine-wide counters the slots update (read by other threads).
struct EngineCounters {
  std::atomic<int64_t> in_flight{0};  // submitted, no final event yet
  std::atomic<int64_t> waiting{0};    // submitted, never admitted yet, not finished
};

struct SlotOptions {
  Device device = Device::kCpu;
  int64_t max_batched_tokens = 0;
  int64_t max_seqs = 0;
  int64_t block_size = 0;
  bool prefix_caching = true;
  HostOverlap host_overlap = HostOverlap::kAuto;  // EngineOptions::host_overlap
};

class ModelSlot {
 public:
  // `model`: resident or offloaded (host tier), or null (disk tier); `config` is its config.
  ModelSlot(ModelSpec spec, std::unique_ptr<Model> model, const ModelConfig& config,
            std::shared_ptr<const Tokenizer> tokenizer, const SlotOptions& options, EngineCounters& counters,
            const EngineObserver& observer);

  const std::string& name() const { return spec_.name; }
  const ModelSpec& spec() const { return spec_; }
  const ModelConfig& config() const { return config_; }

  // Tiers. A moving model belongs to the engine's mover thread (TakeModel .. PutModel): the slot
  // neither steps nor admits, requests wait in its queue.
  ModelTier tier() const { return tier_; }
  bool moving() const { return moving_; }
  bool pinned() const { return pinned_; }
  void set_pinned(bool pinned) { pinned_ = pinned; }
  // Its weights' image is in the host tier: made by its first demotion to host and kept after a
  // promotion (Model::Offload), so its next demotion needs neither a copy nor more host budget.
  bool has_host_image() const { return has_host_image_; }
  uint64_t last_used() const { return last_used_; }
  void set_last_used(uint64_t t) { last_used_ = t; }
  std::unique_ptr<Model> TakeModel();
  // The model back from the mover (null for disk) in `tier`. Requests added while the model is
  // not resident or moving are marked (RequestTimings::waited_for_promotion); a model leaves the
  // device only with none waiting.
  void PutModel(std::unique_ptr<Model> model, ModelTier tier);
  // Not resident and requests waiting: the first waiting request (priority, then arrival).
  const Sequence* WaitingForPromotion() const;
  int64_t kv_blocks() const { return pool_ ? pool_->num_blocks() : 0; }
  int64_t kv_blocks_used() const { return pool_ ? pool_->NumUsed() : 0; }
  const ModelStats& stats() const { return stats_; }

  void Add(std::unique_ptr<Sequence> seq);
  bool HasWork() const {
    return in_flight() || (tier_ == ModelTier::kResident && !moving_ &&
                           (!running_.empty() || (!waiting_.empty() && pool_ && !shrink_pending_)));
  }
  bool Empty() const { return running_.empty() && waiting_.empty() && !in_flight(); }
  // A step launched and not yet collected (host overlap). Only one model has one at a time: the
  // engine drains it before another model steps (models may share the decode scratch).
  bool in_flight() const { return !in_flight_.empty(); }
  // Collects the step in flight, if any, and streams its tokens: what the next Step would do
  // first. TakeModel, Resize and FinishAll drain first.
  void Drain();
  // Marks a request for cancellation (handled by the next Sweep). False if it is not here.
  bool Cancel(RequestId id);
  // Ends cancelled requests, requests past their deadline and requests that outgrew the pool.
  void Sweep(Clock::time_point now);
  // Ends every request with `reason` and `status` (engine shutdown, unload).
  void FinishAll(FinishReason reason, const Status& status);

  // KV cache size. While the target is below the current size no request is admitted; the cache
  // is reallocated to the target (dropping its prefix cache) only when no block is referenced.
  void SetTargetBlocks(int64_t blocks);
  int64_t target_blocks() const { return target_blocks_; }
  bool CanResize() const { return target_blocks_ != kv_blocks() && kv_blocks_used() == 0; }
  // Reallocates to the target; on error (memory) the slot keeps no cache and the error is returned.
  Status Resize();

  // One step: [Collect the step in flight], Schedule, Launch, [Collect], Stream, the Collect
  // where host overlap puts it. Errors of Model::Launch / Collect end the step's requests with
  // kError.
  void Step();

 private:
  struct Scheduled {
    Sequence* seq;
    int64_t tokens;  // to compute this step, from position seq->num_cached
  };
  // Plans the step (planner.h) and applies the plan: preempts, admits with prefix-cache hits,
  // allocates blocks. Returns the batch (empty: nothing to run).
  std::vector<Scheduled> Schedule();
  bool Overlaps() const;  // SlotOptions::host_overlap for this model
  // Model::Launch over the batch into step_output_; records the batch's stats.
  Status Launch(const std::vector<Scheduled>& batch);
  // Model::Collect of the step in flight, Postprocess, then frees the blocks of requests that
  // ended while it was in flight.
  void Collect();
  // After the step: on success advances num_cached, registers full blocks and appends the tokens
  // (AppendTokens); on failure ends the batch's requests with the error. Then the step record.
  // Requests that ended meanwhile (Sequence::ended) are skipped.
  void Postprocess(const std::vector<Scheduled>& batch, const Status& run);
  // Appends each row's token (unsent_); a request its token ends leaves running_ for ending_ and
  // frees its blocks; a row's sampling error ends its request.
  void AppendTokens(const std::vector<Scheduled>& batch, const StepOutput& out);
  // unsent_'s tokens into events (Sequence::TakeOutput), then ends the requests that finished:
  // ending_'s, and running ones a stop string ended.
  void Stream();
  // Ends the request (EndRequest) and frees its blocks; while a step is in flight the request and
  // its blocks are kept (retired_) until that step is collected, which drops its row.
  void Finish(std::unique_ptr<Sequence> seq, FinishReason reason, const Status& status);
  // Finish for a request of running_ or waiting_ (removed from it).
  void FinishListed(Sequence* seq, FinishReason reason, const Status& status);
  // Prefix-cache hits of a waiting sequence: (cached full blocks, of which evictable).
  std::pair<int64_t, int64_t> PrefixHits(const Sequence& seq, std::vector<int32_t>* blocks,
                                         std::vector<uint64_t>* hashes) const;
  void Admit(Sequence& seq, int64_t new_blocks);
  void Preempt(Sequence& seq);
  void Allocate(Sequence& seq, int64_t new_blocks);
  void RegisterFullBlocks(Sequence& seq);
  void InsertWaiting(std::unique_ptr<Sequence> seq);
  void RefreshGauges();  // running/waiting/kv gauges of stats_

  ModelSpec spec_;
  std::unique_ptr<Model> model_;
  ModelConfig config_;
  ModelTier tier_ = ModelTier::kResident;
  bool moving_ = false;
  bool pinned_ = false;
  bool has_host_image_ = false;
  uint64_t last_used_ = 0;
  std::shared_ptr<const Tokenizer> tokenizer_;
  SlotOptions options_;
  EngineCounters& counters_;
  const EngineObserver& observer_;
  FinishRules rules_;
  std::optional<KvCache> cache_;
  std::unique_ptr<BlockPool> pool_;
  int64_t target_blocks_ = 0;
  bool shrink_pending_ = false;
  std::vector<std::unique_ptr<Sequence>> waiting_;  // priority desc, then arrival
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  StepOutput step_output_;                          // reused by every step
  std::vector<Scheduled> in_flight_;                // the batch of the step in flight
  std::vector<std::unique_ptr<Sequence>> retired_;  // ended while a step was in flight; blocks held
  struct Unsent {
    Sequence* seq;
    FinishReason token_end;  // what its last token ends (Sequence::AppendToken), or kNone
  };
  std::vector<Unsent> unsent_;  // appended by the last Collect, streamed by Stream
  // Ended by their last token (no blocks), until Stream sends their final events.
  std::vector<std::unique_ptr<Sequence>> ending_;
  ModelStats stats_;
};

// Queue order: higher priority first, then earlier arrival.
bool WaitsBefore(const Sequence& a, const Sequence& b);

// The one way a request ends, once it holds no KV blocks: the text still held back (unless it
// ended in error or was cancelled), usage and timings in its final event, the observer's record,
// the engine's counters, then the final event to its sink; marks it ended. ModelSlot::Finish calls
// it, and so does the engine for a request whose model was unloaded before the request reached it.
void EndRequest(Sequence& seq, FinishReason reason, const Status& status, const std::string& model,
                EngineCounters& counters, const EngineObserver& observer);

}  // namespace df11
