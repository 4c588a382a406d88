// Engine internals shared by engine.cc (API: create, load, submit; caller threads) and
// engine_loop.cc (the engine thread). Not part of the contract.
// Ownership: fields marked [mu] are guarded by `mu`; fields marked [engine] are touched only by the
// engine thread; atomics may be read anywhere.
#pragma once

#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/engine.h"
#include "scheduler/kv_budget.h"
#include "scheduler/model_picker.h"
#include "scheduler/model_slot.h"

namespace df11 {

// One model of a move (engine_residency.cc), done on the mover thread.
struct MoveTask {
  std::string name;
  std::unique_ptr<Model> model;  // as taken from its slot (null: disk); after the move, as it ends
  ModelTier from = ModelTier::kResident, to = ModelTier::kResident;
  std::string path;              // disk -> resident: Model::Load(path, load_options)
  ModelOptions load_options;
  std::string reason;
  Status status;
  double seconds = 0;
  uint64_t bytes = 0;
};

// An Admin tier operation waiting for the engine thread.
struct TierRequest {
  enum class Op { kPromote, kDemote, kPin };
  Op op = Op::kPromote;
  std::string model;
  ModelTier to = ModelTier::kHost;  // kDemote
  bool pinned = false;              // kPin
  std::shared_ptr<std::promise<Status>> done;
};

// A message to the engine thread.
struct EngineCommand {
  enum class Kind { kSubmit, kCancel, kAddModel, kRemoveModel, kMoved, kTier };
  Kind kind = Kind::kSubmit;
  std::string model;                   // kSubmit, kRemoveModel
  std::unique_ptr<Sequence> sequence;  // kSubmit
  RequestId id = 0;                    // kCancel
  std::unique_ptr<ModelSlot> slot;     // kAddModel
  std::shared_ptr<std::promise<void>> done;   // kRemoveModel: set once its requests ended
  std::vector<MoveTask> moves;                // kMoved: the finished move, demotions first
  TierRequest tier;                           // kTier
};

// What Submit and Models() need about a model, readable without the engine thread.
struct RegisteredModel {
  ModelInfo info;
  ModelSpec spec;
  std::shared_ptr<const Tokenizer> tokenizer;
  KvDemand kv;
  int64_t kv_target_blocks = 0;
};

struct Engine::Impl {
  Impl(const EngineOptions& options, EngineObserver observer, int64_t kv_budget_bytes);

  // engine.cc
  Status Validate(const GenerateRequest& request, const RegisteredModel& model) const;
  // INVALID_ARGUMENT when prompt + 1 exceeds the model's positions or its KV cache.
  Status CheckPromptFits(const GenerateRequest& request, const RegisteredModel& model) const;
  StatusOr<std::map<std::string, int64_t>> KvTargets(const std::vector<const RegisteredModel*>& models) const;
  void Post(EngineCommand command);
  // Posts an Admin tier operation and waits for its result.
  Status PostTier(TierRequest request);
  // A model whose weights are loaded but that is not registered yet (LoadModels).
  struct PreparedModel {
    RegisteredModel reg;  // everything but the KV targets
    std::unique_ptr<Model> model;  // resident, offloaded (host tier) or null (disk tier)
    ModelConfig config;
  };
  // Loads one model's weights and tokenizer (caller holds load_mu); every error names the model.
  // `batch_bytes`: device bytes the batch being loaded holds already (ResidentBudget).
  StatusOr<PreparedModel> Prepare(const ModelSpec& spec, uint64_t batch_bytes);
  // Sizes an undecided KV budget from the memory left now, checks max_model_bytes, splits the KV
  // budget over every model and registers the batch, all or nothing (caller holds load_mu).
  Status Register(std::vector<PreparedModel> batch);
  // Bytes a new model's weights + decode scratch may take: what max_model_bytes leaves after the
  // resident models' weights and `batch_bytes` more, else (CUDA) the device's free memory; 0 = no
  // limit known.
  uint64_t ResidentBudget(uint64_t batch_bytes = 0) const;
  ModelOptions LoadOptions(const ModelSpec& spec, uint64_t max_resident_bytes) const;
  // Startup with tiers: makes room for the next model of a LoadModels batch by demoting the least
  // recently loaded unpinned model of the batch (host tier if it fits, else disk). False: none left.
  bool DemoteForLoad(std::vector<PreparedModel>& batch, uint64_t& host_used);
  // For a model loaded into a running engine with tiers (max_model_bytes): demotes the least
  // recently used idle unpinned resident model already registered, through the Admin path (to
  // host when its image fits, else disk). False when there is none, or it became busy meanwhile.
  bool DemoteRegisteredForLoad(Engine& engine);

  // engine_loop.cc
  void Run();
  void Apply(EngineCommand& command);
  // slot.Step(), or with drain slot.Drain(); what throws ends that model's requests with an error.
  void StepGuarded(ModelSlot& slot, bool drain = false);
  void Rebalance();
  void Publish();
  bool AnyWork() const;
  // engine_residency.cc: starts the next move when none is running (an Admin request first,
  // else the model whose first waiting request waits longest), applies a finished one.
  void Residency();
  Status StartMove(ModelSlot& target, const std::string& reason, TierRequest* admin);
  // Runs `tasks` on the mover thread (their models already taken from their slots).
  void LaunchMove(std::vector<MoveTask> tasks);
  void ApplyMoved(std::vector<MoveTask>& moves);
  void ApplyTier(TierRequest& request);
  // KV targets over the resident and promoting models; the others get 0 (caller: engine thread).
  void RetargetKv();
  ModelSlot* FindSlot(const std::string& name);
  uint64_t DeviceBytes(const std::string& name) const;  // weights + own workspace when resident
  uint64_t WeightBytes(const std::string& name) const;  // what its host tier image holds
  uint64_t HostTierBytes() const;  // bytes of the models in (or moving to) the host tier

  const EngineOptions options;
  const EngineObserver observer;
  // KV bytes for all models; 0 until the first LoadModel fixes it (CUDA without kv_memory_bytes).
  std::atomic<int64_t> kv_budget_bytes;
  std::shared_ptr<DeviceScratch> scratch;  // CUDA: one decode scratch shared by every model
  EngineCounters counters;
  std::atomic<RequestId> next_id{1};
  std::atomic<uint64_t> next_arrival{0};
  std::atomic<bool> draining{false};
  std::atomic<int64_t> rejected_queue_full{0};

  mutable std::mutex mu;
  std::condition_variable wake;
  std::deque<EngineCommand> inbox;                // [mu]
  bool stop = false;                              // [mu]
  std::map<std::string, RegisteredModel> models;  // [mu]
  std::vector<ModelStats> stats;                  // [mu] snapshot after the last loop iteration

  std::mutex load_mu;  // serializes LoadModel / UnloadModel

  std::vector<std::unique_ptr<ModelSlot>> slots;  // [engine]
  ModelPicker picker;                             // [engine]
  uint64_t use_clock = 0;                         // [engine] ModelSlot::last_used
  std::thread mover;                              // [engine] the move in flight, if joinable
  std::deque<TierRequest> tier_requests;          // [engine] Admin operations not started yet
  std::optional<TierRequest> tier_in_flight;      // [engine] the Admin operation the move serves
  std::map<std::string, ModelTier> moving_to;     // [engine] destination of each moving model
  std::thread thread;
};

}  // namespace df11
