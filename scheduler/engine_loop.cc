// The engine thread (see engine.h and engine_impl.h): drains the inbox, ends cancelled and
// expired requests, resizes KV caches toward their targets, picks a model fairly and runs one
// step of it. Sleeps only when no model has work (waking at least every 10 ms while requests are
// in flight, for deadlines and deferred KV allocations).
#include <chrono>
#include <exception>
#include <new>

#include "scheduler/engine_impl.h"

namespace df11 {

Engine::Impl::Impl(const EngineOptions& options_, EngineObserver observer_, int64_t kv_budget)
    : options(options_), observer(std::move(observer_)), kv_budget_bytes(kv_budget) {}

bool Engine::Impl::AnyWork() const {
  for (const auto& s : slots) {
    if (s->HasWork()) return true;
  }
  return false;
}

void Engine::Impl::Run() {
  for (;;) {
    std::deque<EngineCommand> commands;
    bool stopping;
    {
      std::unique_lock lock(mu);
      if (inbox.empty() && !stop && !AnyWork()) {
        if (counters.in_flight.load() == 0) {
          wake.wait(lock, [&] { return !inbox.empty() || stop; });
        } else {
          wake.wait_for(lock, std::chrono::milliseconds(10), [&] { return !inbox.empty() || stop; });
        }
      }
      commands.swap(inbox);
      stopping = stop;
    }
    for (EngineCommand& c : commands) Apply(c);
    if (stopping) {
      for (auto& s : slots) s->FinishAll(FinishReason::kCancelled, Status(StatusCode::kCancelled, "engine shutting down"));
      if (mover.joinable()) mover.join();  // its result, posted to the inbox, is dropped with it
      if (tier_in_flight) tier_in_flight->done->set_value(Unavailable("the engine is shutting down"));
      for (TierRequest& r : tier_requests) r.done->set_value(Unavailable("the engine is shutting down"));
      tier_requests.clear();
      tier_in_flight.reset();
      Publish();
      return;
    }
    const Clock::time_point now = Clock::now();
    for (auto& s : slots) s->Sweep(now);
    Residency();
    Rebalance();
    std::vector<bool> has_work;
    for (const auto& s : slots) has_work.push_back(s->HasWork());
    const int pick = picker.Pick(has_work);
    if (pick >= 0) {
      for (auto& s : slots) {  // one model's step in flight at a time (models may share the decode scratch)
        if (s.get() != slots[pick].get() && s->in_flight()) StepGuarded(*s, /*drain=*/true);
      }
      slots[pick]->set_last_used(++use_clock);
      StepGuarded(*slots[pick]);
      picker.Charge(pick);
    }
    Publish();
  }
}

// A step that throws (out of memory, no thread for the sampler) ends that model's requests with
// an error status instead of terminating the daemon; the other models keep serving.
void Engine::Impl::StepGuarded(ModelSlot& slot, bool drain) {
  Status failed;
  try {
    if (drain) {
      slot.Drain();
    } else {
      slot.Step();
    }
    return;
  } catch (const std::bad_alloc&) {
    failed = ResourceExhausted("model '" + slot.name() + "': out of memory during a step");
  } catch (const std::exception& e) {
    failed = Internal("model '" + slot.name() + "': step failed: " + e.what());
  }
  slot.FinishAll(FinishReason::kError, failed);
}

void Engine::Impl::Apply(EngineCommand& c) {
  using Kind = EngineCommand::Kind;
  switch (c.kind) {
    case Kind::kSubmit: {
      for (auto& s : slots) {
        if (s->name() == c.model) {
          s->Add(std::move(c.sequence));
          return;
        }
      }
      // Unloaded between Submit and here: end it as an unload ends a waiting request.
      EndRequest(*c.sequence, FinishReason::kCancelled,
                 Status(StatusCode::kCancelled, "model '" + c.model + "' was unloaded"), c.model, counters, observer);
      return;
    }
    case Kind::kCancel:
      for (auto& s : slots) {
        if (s->Cancel(c.id)) return;
      }
      return;
    case Kind::kAddModel:
      picker.Add(c.slot->name(), c.slot->spec().weight);
      c.slot->set_last_used(++use_clock);
      slots.push_back(std::move(c.slot));
      RetargetKv();
      return;
    case Kind::kRemoveModel:
      for (size_t i = 0; i < slots.size(); ++i) {
        if (slots[i]->name() != c.model) continue;
        slots[i]->FinishAll(FinishReason::kCancelled, Status(StatusCode::kCancelled, "model '" + c.model + "' unloaded"));
        slots.erase(slots.begin() + i);
        picker.Remove(c.model);
        break;
      }
      RetargetKv();
      if (c.done) c.done->set_value();
      return;
    case Kind::kMoved:
      ApplyMoved(c.moves);
      return;
    case Kind::kTier:
      tier_requests.push_back(std::move(c.tier));
      return;
  }
}

void Engine::Impl::Rebalance() {
  auto bytes_of = [&](const ModelSlot& s, int64_t blocks) {
    return blocks * KvCache::BytesPerBlock(s.config(), options.block_size, options.device);
  };
  int64_t allocated = 0;
  for (const auto& s : slots) allocated += bytes_of(*s, s->kv_blocks());
  // Shrink first, so growing never takes the total above the budget.
  for (bool grow : {false, true}) {
    for (auto& s : slots) {
      if (!s->CanResize() || (s->target_blocks() > s->kv_blocks()) != grow) continue;
      const int64_t after = allocated - bytes_of(*s, s->kv_blocks()) + bytes_of(*s, s->target_blocks());
      if (grow && after > kv_budget_bytes.load()) continue;
      const Status st = s->Resize();
      allocated = 0;
      for (const auto& t : slots) allocated += bytes_of(*t, t->kv_blocks());
      if (!st.ok()) {
        // The model keeps no cache: its requests cannot run; end them with the reason.
        s->FinishAll(FinishReason::kError, Status(st.code(), "model '" + s->name() + "': " + st.message()));
      }
    }
  }
}

void Engine::Impl::Publish() {
  std::lock_guard lock(mu);
  stats.clear();
  for (const auto& s : slots) {
    stats.push_back(s->stats());
    ModelStats& st = stats.back();
    auto it = models.find(s->name());
    if (it == models.end()) continue;
    st.host_tier_bytes = s->has_host_image() ? it->second.info.weight_bytes : 0;
    st.last_used = s->last_used();
    ModelInfo& info = it->second.info;
    info.tier = s->tier();
    info.moving = s->moving();
    info.pinned = s->pinned();
    info.kv_blocks_total = s->kv_blocks();
    info.kv_bytes =
        static_cast<uint64_t>(s->kv_blocks() * KvCache::BytesPerBlock(s->config(), options.block_size, options.device));
  }
}

}  // namespace df11
