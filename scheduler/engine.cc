// Engine API on the callers' threads (see engine.h): options, model loading and KV sizing,
// request validation and queueing. The engine thread itself is in engine_loop.cc.
#include "scheduler/engine.h"

#include <algorithm>
#include <filesystem>
#include <future>

#include <unistd.h>

#include "kernels/gpu.h"
#include "scheduler/engine_impl.h"

namespace df11 {
namespace {

std::string Field(const std::string& name, size_t index) { return name + "[" + std::to_string(index) + "]"; }

// KV bytes for all models together (the policy of kv_budget.h):
//   kv_memory_bytes > 0: that; CPU otherwise: kDefaultCpuKvBytes;
//   CUDA with max_model_bytes > 0: kv_memory_fraction x (free memory now - max_model_bytes);
//   CUDA otherwise: 0 = decided by the first LoadModel/LoadModels call as kv_memory_fraction x the
//   free memory left after the weights and scratch of every model in it (df11d loads all its
//   configured models in one call; a model loaded later must fit in what the KV pool leaves).
StatusOr<int64_t> InitialKvBudget(const EngineOptions& o) {
  if (o.kv_memory_bytes > 0) return o.kv_memory_bytes;
  if (o.device == Device::kCpu) return kDefaultCpuKvBytes;
  if (o.max_model_bytes == 0) return int64_t{0};
  const std::optional<GpuMemory> gpu = QueryGpuMemory();
  if (!gpu) return FailedPrecondition("no CUDA device memory to size the KV cache from; set kv_memory_bytes");
  const int64_t free = static_cast<int64_t>(gpu->free_bytes);
  const double budget = o.kv_memory_fraction * static_cast<double>(free - o.max_model_bytes);
  if (budget <= 0) {
    return ResourceExhausted("max_model_bytes " + std::to_string(o.max_model_bytes) + " leaves no KV memory: " +
                             std::to_string(free) + " bytes free on the device");
  }
  return static_cast<int64_t>(budget);
}

Status ValidateOptions(const EngineOptions& o) {
  if (o.max_batched_tokens < 1) return InvalidArgument("EngineOptions.max_batched_tokens must be >= 1");
  if (o.max_seqs < 1) return InvalidArgument("EngineOptions.max_seqs must be >= 1");
  if (o.block_size < 1 || o.block_size > 1024) return InvalidArgument("EngineOptions.block_size must be in [1, 1024]");
  if (o.kv_memory_bytes < 0) return InvalidArgument("EngineOptions.kv_memory_bytes must be >= 0");
  if (!(o.kv_memory_fraction > 0 && o.kv_memory_fraction <= 1)) {
    return InvalidArgument("EngineOptions.kv_memory_fraction must be in (0, 1]");
  }
  if (o.max_waiting < 1) return InvalidArgument("EngineOptions.max_waiting must be >= 1");
  if (o.threads < 0) return InvalidArgument("EngineOptions.threads must be >= 0");
  if (o.max_model_bytes < 0) return InvalidArgument("EngineOptions.max_model_bytes must be >= 0");
  if (o.max_host_model_bytes < 0) return InvalidArgument("EngineOptions.max_host_model_bytes must be >= 0");
  const int64_t pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && o.max_host_model_bytes > pages * page) {
    return InvalidArgument("EngineOptions.max_host_model_bytes " + std::to_string(o.max_host_model_bytes) +
                           " is more than the machine's memory (" + std::to_string(pages * page) + " bytes)");
  }
  if (o.device == Device::kCuda && o.max_model_bytes > 0) {
    const std::optional<GpuMemory> gpu = QueryGpuMemory();
    if (gpu && static_cast<uint64_t>(o.max_model_bytes) > gpu->total_bytes) {
      return InvalidArgument("EngineOptions.max_model_bytes " + std::to_string(o.max_model_bytes) +
                             " is more than the device's memory (" + std::to_string(gpu->total_bytes) + " bytes)");
    }
  }
  return Status::Ok();
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options, EngineObserver observer) {
  DF11_RETURN_IF_ERROR(ValidateOptions(options));
  DF11_ASSIGN_OR_RETURN(int64_t budget, InitialKvBudget(options));
  std::unique_ptr<Engine> engine(new Engine(std::make_unique<Impl>(options, std::move(observer), budget)));
  Impl* impl = engine->impl_.get();
  if (options.device == Device::kCuda) impl->scratch = std::make_shared<DeviceScratch>();
  impl->thread = std::thread([impl] { impl->Run(); });
  return engine;
}

Engine::~Engine() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  impl_->thread.join();
}

void Engine::Impl::Post(EngineCommand command) {
  {
    std::lock_guard lock(mu);
    inbox.push_back(std::move(command));
  }
  wake.notify_all();
}

StatusOr<std::map<std::string, int64_t>> Engine::Impl::KvTargets(const std::vector<const RegisteredModel*>& list) const {
  std::vector<KvDemand> demands;
  demands.reserve(list.size());
  for (const RegisteredModel* m : list) demands.push_back(m->kv);
  DF11_ASSIGN_OR_RETURN(std::vector<int64_t> blocks, SplitKvBudget(kv_budget_bytes, demands));
  std::map<std::string, int64_t> targets;
  for (size_t i = 0; i < list.size(); ++i) targets[list[i]->spec.name] = blocks[i];
  return targets;
}

uint64_t Engine::Impl::ResidentBudget(uint64_t batch_bytes) const {
  if (options.max_model_bytes > 0) {
    uint64_t used = batch_bytes;
    std::lock_guard lock(mu);
    for (const auto& [name, m] : models) {
      if (m.info.tier == ModelTier::kResident) used += m.info.weight_bytes + m.info.scratch_bytes;
    }
    const uint64_t budget = static_cast<uint64_t>(options.max_model_bytes);
    return used >= budget ? 1 : budget - used;  // 1: nothing fits (0 would mean unlimited)
  }
  if (options.device == Device::kCuda) {
    const std::optional<GpuMemory> gpu = QueryGpuMemory();
    if (gpu && gpu->free_bytes > 0) return gpu->free_bytes;
  }
  return 0;
}

ModelOptions Engine::Impl::LoadOptions(const ModelSpec& spec, uint64_t max_resident_bytes) const {
  ModelOptions model_options;
  model_options.resident_bf16 = spec.resident_bf16;
  model_options.tile_max_tokens = spec.tile_max_tokens;
  model_options.device = options.device;
  model_options.threads = options.threads;
  model_options.scratch = scratch;  // CUDA: shared; steps never overlap (one engine thread)
  model_options.max_resident_bytes = max_resident_bytes;
  return model_options;
}

StatusOr<Engine::Impl::PreparedModel> Engine::Impl::Prepare(const ModelSpec& spec, uint64_t batch_bytes) {
  if (Status valid = ValidateModelSpec(spec); !valid.ok()) return valid.WithContext("model '" + spec.name + "'");
  {
    std::lock_guard lock(mu);
    if (models.contains(spec.name)) return Status(StatusCode::kAlreadyExists, "model '" + spec.name + "' is already loaded");
  }
  const EngineOptions& o = options;
  const std::string context = "model '" + spec.name + "'";
  PreparedModel p;
  StatusOr<std::unique_ptr<Model>> model = Model::Load(spec.path, LoadOptions(spec, ResidentBudget(batch_bytes)));
  if (!model.ok()) return model.status().WithContext(context);
  p.model = std::move(model).value();
  if (std::filesystem::exists(spec.path + "/tokenizer.json")) {
    StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Load(spec.path);
    if (!tok.ok()) return tok.status().WithContext(context);
    p.reg.tokenizer = std::move(tok).value();
  }
  const ModelConfig& config = p.model->config();
  p.config = config;
  const LoadReport& report = p.model->load_report();
  p.reg.spec = spec;
  ModelInfo& info = p.reg.info;
  info.name = spec.name;
  info.path = spec.path;
  info.architecture = config.architecture;
  info.state = ModelState::kReady;
  info.max_positions = config.max_position_embeddings;
  info.vocab_size = config.vocab_size;
  info.df11 = report.df11;
  info.weight_bytes = report.weight_bytes;
  info.bf16_weight_bytes = report.bf16_weight_bytes;
  info.scratch_bytes = report.scratch_bytes;
  info.load_seconds = report.load_seconds;
  info.load_warnings = report.warnings;
  info.shared_scratch_bytes = report.shared_scratch_bytes;
  info.pinned = spec.pinned;
  p.reg.kv = {spec.name, KvCache::BytesPerBlock(config, o.block_size, o.device),
              spec.kv_min_blocks > 0 ? spec.kv_min_blocks : (config.max_position_embeddings + o.block_size - 1) / o.block_size,
              spec.kv_share};
  return p;
}

bool Engine::Impl::DemoteForLoad(std::vector<PreparedModel>& batch, uint64_t& host_used) {
  for (PreparedModel& p : batch) {  // loading order: the least recently loaded first
    if (p.reg.info.tier != ModelTier::kResident || p.reg.spec.pinned) continue;
    const uint64_t weights = p.reg.info.weight_bytes;
    if (DemotionTier(weights, host_used, options.max_host_model_bytes) == ModelTier::kHost && p.model->Offload().ok()) {
      host_used += weights;
      p.reg.info.tier = ModelTier::kHost;
    } else {
      p.model.reset();
      p.reg.info.tier = ModelTier::kDisk;
    }
    return true;
  }
  return false;
}

Status Engine::Impl::Register(std::vector<PreparedModel> batch) {
  const EngineOptions& o = options;
  std::string names;
  for (const PreparedModel& p : batch) names += (names.empty() ? "'" : ", '") + p.reg.spec.name + "'";
  // An undecided budget (CUDA without kv_memory_bytes or max_model_bytes) is sized now, from the
  // memory every model of the batch leaves: all weights first, then the KV pool.
  if (kv_budget_bytes.load() == 0) {
    const std::optional<GpuMemory> gpu = QueryGpuMemory();
    if (!gpu) return FailedPrecondition("no CUDA device memory to size the KV cache from; set kv_memory_bytes");
    kv_budget_bytes = static_cast<int64_t>(o.kv_memory_fraction * static_cast<double>(gpu->free_bytes));
  }
  std::lock_guard lock(mu);
  // Within max_model_bytes: every resident model's weights and own workspace, plus the shared
  // decode scratch once (the largest need).
  if (o.max_model_bytes > 0) {
    uint64_t weights = 0, scratch_total = 0, shared = 0;
    auto count = [&](const ModelInfo& info) {
      if (info.tier == ModelTier::kResident) {
        weights += info.weight_bytes;
        scratch_total += info.scratch_bytes;
      }
      shared = std::max(shared, info.shared_scratch_bytes);
    };
    for (const PreparedModel& p : batch) count(p.reg.info);
    for (const auto& [name, m] : models) count(m.info);
    if (weights + scratch_total + shared > static_cast<uint64_t>(o.max_model_bytes)) {
      return ResourceExhausted("model " + names + " does not fit: weights " + std::to_string(weights) + " + scratch " +
                               std::to_string(scratch_total + shared) + " bytes > max_model_bytes " +
                               std::to_string(o.max_model_bytes));
    }
  }
  std::vector<const RegisteredModel*> all;
  for (const PreparedModel& p : batch) {
    if (models.contains(p.reg.spec.name)) {
      return Status(StatusCode::kAlreadyExists, "model '" + p.reg.spec.name + "' is already loaded");
    }
    for (const RegisteredModel* other : all) {
      if (other->spec.name == p.reg.spec.name) return InvalidArgument("model '" + p.reg.spec.name + "' is listed twice");
    }
    all.push_back(&p.reg);
  }
  for (const auto& [name, m] : models) all.push_back(&m);
  // The KV pool serves the resident models: their minimums must fit it together (the engine
  // thread sets the targets as tiers change: RetargetKv).
  std::erase_if(all, [](const RegisteredModel* m) { return m->info.tier != ModelTier::kResident; });
  StatusOr<std::map<std::string, int64_t>> targets = KvTargets(all);
  if (!targets.ok()) return Status(targets.status().code(), "model " + names + ": " + targets.status().message());
  for (auto& [name, m] : models) {
    if (targets->contains(name)) m.kv_target_blocks = targets->at(name);
  }
  SlotOptions slot_options{o.device, o.max_batched_tokens, o.max_seqs, o.block_size, o.prefix_caching, o.host_overlap};
  for (PreparedModel& p : batch) {
    RegisteredModel& reg = p.reg;
    const std::string name = reg.spec.name;
    reg.kv_target_blocks = targets->contains(name) ? targets->at(name) : 0;
    reg.info.kv_blocks_total = reg.kv_target_blocks;
    reg.info.kv_bytes = static_cast<uint64_t>(reg.kv_target_blocks * reg.kv.bytes_per_block);
    EngineCommand add;
    add.kind = EngineCommand::Kind::kAddModel;
    add.slot = std::make_unique<ModelSlot>(reg.spec, std::move(p.model), p.config, reg.tokenizer, slot_options, counters,
                                           observer);
    models.emplace(name, std::move(reg));
    inbox.push_back(std::move(add));
  }
  wake.notify_all();
  return Status::Ok();
}

Status Engine::LoadModel(const ModelSpec& spec) { return LoadModels({spec}); }

Status Engine::LoadModels(const std::vector<ModelSpec>& specs) {
  std::lock_guard load_lock(impl_->load_mu);
  // Loading order: unpinned models from the last configured to the first, then the pinned ones.
  // When the device budget runs out, the least recently loaded unpinned model of the batch
  // leaves the device (DemoteForLoad), so the first configured and the pinned models stay.
  std::vector<const ModelSpec*> order;
  for (auto it = specs.rbegin(); it != specs.rend(); ++it) {
    if (!it->pinned) order.push_back(&*it);
  }
  for (const ModelSpec& spec : specs) {
    if (spec.pinned) order.push_back(&spec);
  }
  // Host bytes already held: every image the engine published (a promoted model keeps its own),
  // and a model registered since the last Publish by what it was registered as.
  uint64_t host_used = 0;
  {
    std::lock_guard lock(impl_->mu);
    for (const auto& entry : impl_->models) {
      const std::string& name = entry.first;
      auto st = std::find_if(impl_->stats.begin(), impl_->stats.end(), [&](const ModelStats& s) { return s.name == name; });
      if (st != impl_->stats.end()) {
        host_used += st->host_tier_bytes;
      } else if (entry.second.info.tier == ModelTier::kHost) {
        host_used += entry.second.info.weight_bytes;
      }
    }
  }
  std::vector<Impl::PreparedModel> batch;
  bool demoted = false;
  for (const ModelSpec* spec : order) {
    for (;;) {
      uint64_t batch_bytes = 0;
      for (const Impl::PreparedModel& p : batch) {
        if (p.reg.info.tier == ModelTier::kResident) batch_bytes += p.reg.info.weight_bytes + p.reg.info.scratch_bytes;
      }
      // A failure (it names the model) drops the models prepared so far, freeing their memory.
      StatusOr<Impl::PreparedModel> p = impl_->Prepare(*spec, batch_bytes);
      if (p.ok()) {
        batch.push_back(std::move(p).value());
        break;
      }
      if (p.status().code() != StatusCode::kResourceExhausted) return p.status();
      if (impl_->DemoteForLoad(batch, host_used)) {
        demoted = true;
      } else if (!impl_->DemoteRegisteredForLoad(*this)) {
        return p.status();
      }
    }
  }
  if (demoted && impl_->options.device == Device::kCuda && impl_->options.max_model_bytes == 0) {
    return FailedPrecondition("the configured models' weights do not fit the device together: set max_model_bytes "
                              "(--max-model-bytes, the device budget for weights) to serve them in tiers");
  }
  return impl_->Register(std::move(batch));
}

bool Engine::Impl::DemoteRegisteredForLoad(Engine& engine) {
  if (options.max_model_bytes == 0) return false;
  std::string victim;
  {
    std::lock_guard lock(mu);
    uint64_t oldest = UINT64_MAX;
    for (const ModelStats& st : stats) {
      auto it = models.find(st.name);
      if (it == models.end()) continue;
      const ModelInfo& info = it->second.info;
      const bool demotable = info.tier == ModelTier::kResident && !info.moving && !info.pinned && st.running == 0 &&
                             st.waiting == 0;
      if (demotable && st.last_used < oldest) {
        oldest = st.last_used;
        victim = st.name;
      }
    }
  }
  if (victim.empty()) return false;
  const Status host = engine.Demote(victim, ModelTier::kHost);
  if (host.ok()) return true;
  return host.code() == StatusCode::kResourceExhausted && engine.Demote(victim, ModelTier::kDisk).ok();
}

Status Engine::UnloadModel(const std::string& name) {
  std::lock_guard load_lock(impl_->load_mu);
  EngineCommand remove;
  remove.kind = EngineCommand::Kind::kRemoveModel;
  remove.model = name;
  remove.done = std::make_shared<std::promise<void>>();
  std::future<void> done = remove.done->get_future();
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->models.find(name);
    if (it == impl_->models.end()) return NotFound("model '" + name + "' is not loaded");
    it->second.info.state = ModelState::kUnloading;
  }
  impl_->Post(std::move(remove));
  done.wait();  // the engine thread re-split the KV pool over the models left (RetargetKv)
  std::lock_guard lock(impl_->mu);
  impl_->models.erase(name);
  return Status::Ok();
}

Status Engine::Impl::CheckPromptFits(const GenerateRequest& r, const RegisteredModel& m) const {
  const int64_t n = static_cast<int64_t>(r.prompt_tokens.size());
  if (n + 1 > m.info.max_positions) {
    return InvalidArgument("prompt of " + std::to_string(n) + " tokens leaves no room to generate: model '" +
                           m.spec.name + "' has " + std::to_string(m.info.max_positions) + " positions");
  }
  // A model off the device gets at least its minimum when promoted.
  const int64_t blocks = std::max(m.kv_target_blocks, m.kv.min_blocks);
  if (n + 1 > blocks * options.block_size) {
    return InvalidArgument("prompt of " + std::to_string(n) + " tokens does not fit model '" + m.spec.name +
                           "''s KV cache of " + std::to_string(blocks * options.block_size) + " positions");
  }
  return Status::Ok();
}

Status Engine::Impl::Validate(const GenerateRequest& r, const RegisteredModel& m) const {
  const int64_t vocab = m.info.vocab_size;
  const int64_t n = static_cast<int64_t>(r.prompt_tokens.size());
  if (n == 0) return InvalidArgument("prompt_tokens is empty");
  for (size_t i = 0; i < r.prompt_tokens.size(); ++i) {
    if (r.prompt_tokens[i] < 0 || r.prompt_tokens[i] >= vocab) {
      return InvalidArgument(Field("prompt_tokens", i) + " = " + std::to_string(r.prompt_tokens[i]) +
                             " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  if (r.max_tokens < 1) return InvalidArgument("max_tokens must be >= 1, got " + std::to_string(r.max_tokens));
  // The one check of the sampling parameters: every token of the request is sampled with them.
  DF11_RETURN_IF_ERROR(ValidateSamplingParams(r.sampling));
  if (r.sampling.top_logprobs > vocab) {  // ValidateSamplingParams bounds it by kMaxTopLogprobs
    return InvalidArgument("top_logprobs must be in [0, vocab size " + std::to_string(vocab) + "]");
  }
  for (size_t i = 0; i < r.stop_strings.size(); ++i) {
    if (r.stop_strings[i].empty()) return InvalidArgument(Field("stop_strings", i) + " is empty");
  }
  if (!r.stop_strings.empty() && !m.tokenizer) {
    return InvalidArgument("stop_strings need a tokenizer; model '" + m.spec.name + "' has none");
  }
  for (size_t i = 0; i < r.stop_token_ids.size(); ++i) {
    if (r.stop_token_ids[i] < 0 || r.stop_token_ids[i] >= vocab) {
      return InvalidArgument(Field("stop_token_ids", i) + " = " + std::to_string(r.stop_token_ids[i]) +
                             " is outside the vocabulary");
    }
  }
  return Status::Ok();
}

StatusOr<RequestId> Engine::Submit(GenerateRequest request, EventSink sink, RejectReason* reason) {
  Impl& impl = *impl_;
  RejectReason ignored;
  RejectReason& why = reason ? *reason : ignored;
  why = RejectReason::kInvalid;
  if (!sink) return InvalidArgument("Submit needs an event sink");
  std::shared_ptr<const Tokenizer> tokenizer;
  {
    std::lock_guard lock(impl.mu);
    if (impl.stop || impl.draining.load()) {
      why = RejectReason::kUnavailable;
      return Unavailable("the engine is shutting down");
    }
    auto it = impl.models.find(request.model);
    if (it == impl.models.end() || it->second.info.state != ModelState::kReady) {
      why = RejectReason::kUnknownModel;
      return NotFound("model '" + request.model + "' is not loaded");
    }
    if (Status fits = impl.CheckPromptFits(request, it->second); !fits.ok()) {
      why = RejectReason::kPromptTooLong;
      return fits;
    }
    DF11_RETURN_IF_ERROR(impl.Validate(request, it->second));
    tokenizer = it->second.tokenizer;
    if (impl.counters.waiting.load() >= impl.options.max_waiting) {
      impl.rejected_queue_full.fetch_add(1);
      why = RejectReason::kQueueFull;
      return ResourceExhausted("too many waiting requests (" + std::to_string(impl.options.max_waiting) +
                               "); retry later");
    }
    impl.counters.waiting.fetch_add(1);
    impl.counters.in_flight.fetch_add(1);
  }
  why = RejectReason::kNone;
  const RequestId id = impl.next_id.fetch_add(1);
  EngineCommand submit;
  submit.kind = EngineCommand::Kind::kSubmit;
  submit.model = request.model;
  submit.sequence = std::make_unique<Sequence>(id, std::move(request), std::move(sink), std::move(tokenizer));
  submit.sequence->arrival = impl.next_arrival.fetch_add(1);
  impl.Post(std::move(submit));
  return id;
}

void Engine::Cancel(RequestId id) {
  EngineCommand cancel;
  cancel.kind = EngineCommand::Kind::kCancel;
  cancel.id = id;
  impl_->Post(std::move(cancel));
}

std::vector<ModelInfo> Engine::Models() const {
  std::lock_guard lock(impl_->mu);
  std::vector<ModelInfo> out;
  for (const auto& [name, m] : impl_->models) out.push_back(m.info);
  return out;
}

EngineStats Engine::Stats() const {
  std::lock_guard lock(impl_->mu);
  EngineStats out;
  out.models = impl_->stats;
  out.rejected_queue_full_total = impl_->rejected_queue_full.load();
  out.shared_scratch_bytes = impl_->scratch ? impl_->scratch->bytes() : 0;
  return out;
}

std::shared_ptr<const Tokenizer> Engine::GetTokenizer(const std::string& model) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->models.find(model);
  return it == impl_->models.end() ? nullptr : it->second.tokenizer;
}

Status Engine::Impl::PostTier(TierRequest request) {
  request.done = std::make_shared<std::promise<Status>>();
  std::future<Status> done = request.done->get_future();
  EngineCommand c;
  c.kind = EngineCommand::Kind::kTier;
  c.tier = std::move(request);
  Post(std::move(c));
  return done.get();
}

Status Engine::Promote(const std::string& name) {
  TierRequest r;
  r.op = TierRequest::Op::kPromote;
  r.model = name;
  return impl_->PostTier(std::move(r));
}

Status Engine::Demote(const std::string& name, ModelTier to) {
  if (to == ModelTier::kResident) return InvalidArgument("Demote: the tier must be host or disk");
  TierRequest r;
  r.op = TierRequest::Op::kDemote;
  r.model = name;
  r.to = to;
  return impl_->PostTier(std::move(r));
}

Status Engine::SetPinned(const std::string& name, bool pinned) {
  TierRequest r;
  r.op = TierRequest::Op::kPin;
  r.model = name;
  r.pinned = pinned;
  return impl_->PostTier(std::move(r));
}

void Engine::Drain() { impl_->draining.store(true); }

int64_t Engine::InFlight() const { return impl_->counters.in_flight.load(); }

}  // namespace df11
