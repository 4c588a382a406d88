// Model tiers on the engine thread (see residency.h, engine.h): one move at a time runs on the
// mover thread (its demotions first, then its promotion) while the other models keep stepping;
// the finished move comes back through the inbox (kMoved) and is applied here. Admin tier
// operations wait in tier_requests and go before promotions asked for by waiting requests.
#include <algorithm>
#include <chrono>
#include <utility>

#include "scheduler/engine_impl.h"

namespace df11 {
namespace {

// Runs on the mover thread: only `t` and its model are touched.
void RunMove(MoveTask& t) {
  const auto start = std::chrono::steady_clock::now();
  if (t.to == ModelTier::kResident) {
    if (t.model) {
      t.status = t.model->Restore();
    } else {
      StatusOr<std::unique_ptr<Model>> loaded = Model::Load(t.path, t.load_options);
      if (loaded.ok()) {
        t.model = std::move(loaded).value();
      } else {
        t.status = loaded.status();
      }
    }
    if (t.status.ok()) t.bytes = t.model->load_report().weight_bytes;
  } else if (t.to == ModelTier::kHost && t.from == ModelTier::kResident) {
    const bool kept = t.model->host_image_bytes() > 0;  // CUDA: nothing to copy
    t.status = t.model->Offload();
    if (t.status.ok()) {
      t.bytes = kept ? 0 : t.model->load_report().weight_bytes;
    } else {
      t.model.reset();  // the host refused the image: the model goes to disk
      t.to = ModelTier::kDisk;
    }
  } else {
    t.model.reset();
    t.to = ModelTier::kDisk;
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

ModelSlot* Engine::Impl::FindSlot(const std::string& name) {
  for (auto& s : slots) {
    if (s->name() == name) return s.get();
  }
  return nullptr;
}

uint64_t Engine::Impl::DeviceBytes(const std::string& name) const {
  std::lock_guard lock(mu);
  auto it = models.find(name);
  return it == models.end() ? 0 : it->second.info.weight_bytes + it->second.info.scratch_bytes;
}

uint64_t Engine::Impl::WeightBytes(const std::string& name) const {
  std::lock_guard lock(mu);
  auto it = models.find(name);
  return it == models.end() ? 0 : it->second.info.weight_bytes;
}

uint64_t Engine::Impl::HostTierBytes() const {
  uint64_t bytes = 0;
  std::lock_guard lock(mu);
  for (const auto& s : slots) {
    auto to = moving_to.find(s->name());
    const bool holds = s->has_host_image() || (to != moving_to.end() && to->second == ModelTier::kHost);
    auto it = models.find(s->name());
    if (holds && it != models.end()) bytes += it->second.info.weight_bytes;
  }
  return bytes;
}

void Engine::Impl::RetargetKv() {
  std::lock_guard lock(mu);
  std::vector<const RegisteredModel*> active;
  for (const auto& s : slots) {
    auto to = moving_to.find(s->name());
    const ModelTier tier = to != moving_to.end() ? to->second : s->tier();
    auto it = models.find(s->name());
    if (tier == ModelTier::kResident && it != models.end()) active.push_back(&it->second);
  }
  StatusOr<std::map<std::string, int64_t>> targets = KvTargets(active);
  if (!targets.ok()) return;  // Register and StartMove checked the minimums; keep the old targets
  for (auto& s : slots) {
    auto t = targets->find(s->name());
    const int64_t blocks = t == targets->end() ? 0 : t->second;
    s->SetTargetBlocks(blocks);
    auto it = models.find(s->name());
    if (it != models.end()) it->second.kv_target_blocks = blocks;
  }
}

Status Engine::Impl::StartMove(ModelSlot& target, const std::string& reason, TierRequest* admin) {
  uint64_t shared = 0;
  {
    std::lock_guard lock(mu);
    for (const auto& [name, m] : models) shared = std::max(shared, m.info.shared_scratch_bytes);
  }
  const uint64_t limit = options.max_model_bytes > 0 ? static_cast<uint64_t>(options.max_model_bytes) : 0;
  const uint64_t budget = limit == 0 ? 0 : (limit > shared ? limit - shared : 1);
  std::vector<ResidencyCandidate> candidates;
  std::string busy;
  uint64_t used = 0;
  for (const auto& s : slots) {
    const bool on_device = s->tier() == ModelTier::kResident;
    const bool demotable = on_device && !s->moving() && !s->pinned() && s->Empty() && s.get() != &target;
    candidates.push_back({DeviceBytes(s->name()), on_device, demotable, s->last_used()});
    if (on_device) used += candidates.back().device_bytes;
    if (on_device && !demotable && s.get() != &target) busy += (busy.empty() ? "'" : ", '") + s->name() + "'";
  }
  const uint64_t need = DeviceBytes(target.name());
  std::optional<std::vector<size_t>> victims = PickVictims(candidates, need, budget);
  if (!victims) {
    // Never, whatever finishes: the pinned models alone leave no room.
    std::vector<ResidencyCandidate> unpinned = candidates;
    for (size_t i = 0; i < slots.size(); ++i) {
      unpinned[i].demotable = unpinned[i].resident && !slots[i]->pinned() && slots[i].get() != &target;
    }
    if (!PickVictims(unpinned, need, budget)) {
      return ResourceExhausted("model '" + target.name() + "' needs " + std::to_string(need) +
                               " bytes on the device and the pinned models leave less of the " +
                               std::to_string(budget) +
                               " bytes of max_model_bytes (less the shared scratch): unpin one or raise the budget");
    }
    return FailedPrecondition("model '" + target.name() + "' needs " + std::to_string(need) + " bytes on the device; " +
                              std::to_string(used) + " of the " + std::to_string(budget) +
                              " bytes of max_model_bytes (less the shared scratch) are held by models that are busy or "
                              "pinned: " +
                              (busy.empty() ? std::string("none") : busy));
  }
  // The KV minimums of the models left on the device and the target must fit the pool.
  {
    std::lock_guard lock(mu);
    std::vector<const RegisteredModel*> active;
    for (size_t i = 0; i < slots.size(); ++i) {
      const bool leaves = std::find(victims->begin(), victims->end(), i) != victims->end();
      const bool stays = slots[i]->tier() == ModelTier::kResident && !leaves;
      auto it = models.find(slots[i]->name());
      if ((stays || slots[i].get() == &target) && it != models.end()) active.push_back(&it->second);
    }
    StatusOr<std::map<std::string, int64_t>> targets = KvTargets(active);
    if (!targets.ok())
      return Status(targets.status().code(), "model '" + target.name() + "': " + targets.status().message());
  }
  std::vector<MoveTask> tasks;
  uint64_t host_used = HostTierBytes();  // the target keeps its image, if any
  const uint64_t host_budget = static_cast<uint64_t>(options.max_host_model_bytes);
  for (size_t i : *victims) {
    ModelSlot& v = *slots[i];
    MoveTask t;
    t.name = v.name();
    t.from = ModelTier::kResident;
    const uint64_t weights = WeightBytes(v.name());
    t.to = v.has_host_image() ? ModelTier::kHost : DemotionTier(weights, host_used, host_budget);
    if (t.to == ModelTier::kHost && !v.has_host_image()) host_used += weights;
    t.reason = "capacity";
    used -= candidates[i].device_bytes;
    t.model = v.TakeModel();
    tasks.push_back(std::move(t));
  }
  MoveTask p;
  p.name = target.name();
  p.from = target.tier();
  p.to = ModelTier::kResident;
  p.reason = reason;
  ModelSpec spec;
  {
    std::lock_guard lock(mu);
    auto it = models.find(target.name());
    if (it != models.end()) spec = it->second.spec;
  }
  p.path = spec.path;
  p.load_options = LoadOptions(spec, limit == 0 ? 0 : (limit > used ? limit - used : 1));
  p.model = target.TakeModel();
  tasks.push_back(std::move(p));
  if (admin) tier_in_flight = std::move(*admin);
  LaunchMove(std::move(tasks));
  return Status::Ok();
}

void Engine::Impl::LaunchMove(std::vector<MoveTask> tasks) {
  for (const MoveTask& t : tasks) moving_to[t.name] = t.to;
  RetargetKv();
  mover = std::thread([this, moves = std::move(tasks)]() mutable {
    for (MoveTask& t : moves) RunMove(t);
    EngineCommand done;
    done.kind = EngineCommand::Kind::kMoved;
    done.moves = std::move(moves);
    Post(std::move(done));
  });
}

void Engine::Impl::ApplyMoved(std::vector<MoveTask>& moves) {
  if (mover.joinable()) mover.join();
  Status admin_status = Status::Ok();
  for (MoveTask& t : moves) {
    moving_to.erase(t.name);
    const bool promotion = t.to == ModelTier::kResident;
    const ModelTier ended = t.status.ok() || !promotion ? t.to : (t.model ? ModelTier::kHost : ModelTier::kDisk);
    Status failure;
    if (promotion && !t.status.ok()) {
      failure =
          Status(t.status.code(), "model '" + t.name + "' could not be brought to the device: " + t.status.message());
    } else if (!t.status.ok()) {
      failure = Status(t.status.code(), "model '" + t.name + "' went to disk, not host memory: " + t.status.message());
    }
    if (tier_in_flight && tier_in_flight->model == t.name) admin_status = failure;
    ModelSlot* slot = FindSlot(t.name);
    if (slot != nullptr) {
      slot->PutModel(std::move(t.model), ended);
      if (ended == ModelTier::kResident) slot->set_last_used(++use_clock);
      if (promotion && !t.status.ok()) slot->FinishAll(FinishReason::kError, failure);
    }
    {
      std::lock_guard lock(mu);  // now, not at the next Publish: an Admin caller reads it next
      auto it = models.find(t.name);
      if (it != models.end()) {
        it->second.info.tier = ended;
        it->second.info.moving = false;
        if (promotion) it->second.info.tier_error = t.status.ok() ? "" : failure.message();
      }
    }
    if (observer.on_move)
      observer.on_move({t.name, t.from, ended, promotion, t.reason, failure, t.seconds, t.status.ok() ? t.bytes : 0});
  }
  RetargetKv();
  if (tier_in_flight) {
    tier_in_flight->done->set_value(admin_status);
    tier_in_flight.reset();
  }
}

void Engine::Impl::ApplyTier(TierRequest& r) {
  ModelSlot* slot = FindSlot(r.model);
  if (slot == nullptr) return r.done->set_value(NotFound("model '" + r.model + "' is not loaded"));
  const std::string named = "model '" + r.model + "'";
  switch (r.op) {
    case TierRequest::Op::kPin: {
      slot->set_pinned(r.pinned);
      std::lock_guard lock(mu);  // now, not at the next Publish: the caller reads it next
      auto it = models.find(r.model);
      if (it != models.end()) it->second.info.pinned = r.pinned;
      return r.done->set_value(Status::Ok());
    }
    case TierRequest::Op::kPromote: {
      if (slot->tier() == ModelTier::kResident) return r.done->set_value(Status::Ok());
      const Status started = StartMove(*slot, "admin", &r);
      if (!started.ok()) r.done->set_value(started);
      return;
    }
    case TierRequest::Op::kDemote: {
      if (slot->pinned()) return r.done->set_value(FailedPrecondition(named + " is pinned to the device"));
      if (slot->tier() == r.to || (slot->tier() == ModelTier::kDisk)) return r.done->set_value(Status::Ok());
      if (!slot->Empty()) return r.done->set_value(FailedPrecondition(named + " has running or waiting requests"));
      const uint64_t weights = WeightBytes(r.model);
      const uint64_t host_used = HostTierBytes();
      if (r.to == ModelTier::kHost && !slot->has_host_image() &&
          DemotionTier(weights, host_used, options.max_host_model_bytes) != ModelTier::kHost) {
        return r.done->set_value(ResourceExhausted(
            named + " needs " + std::to_string(weights) + " bytes of the host tier; max_host_model_bytes " +
            std::to_string(options.max_host_model_bytes) + " has " + std::to_string(host_used) + " in use"));
      }
      MoveTask t;
      t.name = r.model;
      t.from = slot->tier();
      t.to = r.to;
      t.reason = "admin";
      t.model = slot->TakeModel();
      tier_in_flight = std::move(r);
      std::vector<MoveTask> tasks;
      tasks.push_back(std::move(t));
      LaunchMove(std::move(tasks));
      return;
    }
  }
}

void Engine::Impl::Residency() {
  if (mover.joinable()) return;  // one move at a time; ApplyMoved joins it
  while (!tier_requests.empty() && !mover.joinable()) {
    TierRequest r = std::move(tier_requests.front());
    tier_requests.pop_front();
    ApplyTier(r);
  }
  if (mover.joinable()) return;
  ModelSlot* next = nullptr;
  const Sequence* first = nullptr;
  for (auto& s : slots) {
    const Sequence* w = s->WaitingForPromotion();
    if (w != nullptr && (first == nullptr || WaitsBefore(*w, *first))) {
      first = w;
      next = s.get();
    }
  }
  if (next == nullptr) return;
  // No room now (the models in the way are busy): the requests wait, within their deadlines. No
  // room ever (pinned models, KV minimums): they end now with the reason.
  const Status started = StartMove(*next, "request", nullptr);
  if (started.code() == StatusCode::kResourceExhausted) next->FinishAll(FinishReason::kError, started);
}

}  // namespace df11
