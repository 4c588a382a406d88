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
#include <string>
#include <thread>
#include <vector>

#include "scheduler/engine.h"
#include "scheduler/kv_budget.h"
#include "scheduler/model_picker.h"
#include "scheduler/model_slot.h"

namespace df11 {

// A message to the engine thread.
struct EngineCommand {
  enum class Kind { kSubmit, kCancel, kAddModel, kRemoveModel };
  Kind kind = Kind::kSubmit;
  std::string model;                   // kSubmit, kRemoveModel
  std::unique_ptr<Sequence> sequence;  // kSubmit
  RequestId id = 0;                    // kCancel
  std::unique_ptr<ModelSlot> slot;     // kAddModel
  std::map<std::string, int64_t> kv_targets;  // kAddModel, kRemoveModel: blocks per model
  std::shared_ptr<std::promise<void>> done;   // kRemoveModel: set once its requests ended
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
  // A model whose weights are loaded but that is not registered yet (LoadModels).
  struct PreparedModel {
    RegisteredModel reg;  // everything but the KV targets
    std::unique_ptr<Model> model;
  };
  // Loads one model's weights and tokenizer (caller holds load_mu); every error names the model.
  StatusOr<PreparedModel> Prepare(const ModelSpec& spec);
  // Sizes an undecided KV budget from the memory left now, checks max_model_bytes, splits the KV
  // budget over every model and registers the batch, all or nothing (caller holds load_mu).
  Status Register(std::vector<PreparedModel> batch);
  // Bytes a new model's weights + decode scratch may take: what max_model_bytes leaves after the
  // loaded models' weights, else (CUDA) the device's free memory; 0 = no limit known.
  uint64_t ResidentBudget() const;

  // engine_loop.cc
  void Run();
  void Apply(EngineCommand& command);
  void StepGuarded(ModelSlot& slot);
  void Rebalance();
  void Publish();
  bool AnyWork() const;

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
  std::thread thread;
};

}  // namespace df11
