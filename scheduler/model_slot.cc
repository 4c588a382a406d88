// One model's requests, KV blocks and steps (see model_slot.h).
#include "scheduler/model_slot.h"

#include <algorithm>

#include "scheduler/planner.h"

namespace df11 {

bool WaitsBefore(const Sequence& a, const Sequence& b) {
  if (a.request.priority != b.request.priority) return a.request.priority > b.request.priority;
  return a.arrival < b.arrival;
}

ModelSlot::ModelSlot(ModelSpec spec, std::unique_ptr<Model> model, const ModelConfig& config,
                     std::shared_ptr<const Tokenizer> tokenizer, const SlotOptions& options, EngineCounters& counters,
                     const EngineObserver& observer)
    : spec_(std::move(spec)), model_(std::move(model)), config_(config), tokenizer_(std::move(tokenizer)),
      options_(options), counters_(counters), observer_(observer) {
  if (tokenizer_) rules_.eos_ids = tokenizer_->stop_ids();
  rules_.max_positions = config_.max_position_embeddings;
  stats_.name = spec_.name;
  pinned_ = spec_.pinned;
  tier_ = !model_ ? ModelTier::kDisk : model_->offloaded() ? ModelTier::kHost : ModelTier::kResident;
  has_host_image_ = tier_ == ModelTier::kHost;
}

std::unique_ptr<Model> ModelSlot::TakeModel() {
  Drain();
  moving_ = true;
  return std::move(model_);
}

void ModelSlot::PutModel(std::unique_ptr<Model> model, ModelTier tier) {
  // A model loaded from disk has no image yet; one restored from host keeps its image.
  if (tier == ModelTier::kHost) has_host_image_ = true;
  if (tier == ModelTier::kDisk || (tier == ModelTier::kResident && tier_ == ModelTier::kDisk)) has_host_image_ = false;
  model_ = std::move(model);
  tier_ = tier;
  moving_ = false;
}

const Sequence* ModelSlot::WaitingForPromotion() const {
  if (tier_ == ModelTier::kResident || moving_ || waiting_.empty()) return nullptr;
  return waiting_.front().get();
}

void ModelSlot::Add(std::unique_ptr<Sequence> seq) {
  ++stats_.waiting;
  if (tier_ != ModelTier::kResident || moving_) seq->waited_for_promotion = true;
  InsertWaiting(std::move(seq));
}

void ModelSlot::InsertWaiting(std::unique_ptr<Sequence> seq) {
  auto at = std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                             [](const auto& a, const auto& b) { return WaitsBefore(*a, *b); });
  waiting_.insert(at, std::move(seq));
}

bool ModelSlot::Cancel(RequestId id) {
  for (auto* list : {&waiting_, &running_}) {
    for (auto& s : *list) {
      if (s->id == id) {
        s->pending_finish = FinishReason::kCancelled;
        return true;
      }
    }
  }
  return false;
}

void ModelSlot::Sweep(Clock::time_point now) {
  for (auto* list : {&waiting_, &running_}) {
    for (size_t i = 0; i < list->size();) {
      Sequence& s = *(*list)[i];
      std::optional<FinishReason> reason = s.pending_finish;
      Status status;
      // A cancel that comes at the deadline is the client's deadline firing (gRPC cancels the
      // call then): count it as a deadline, not as a cancellation (kDeadlineCancelTolerance).
      const Clock::duration slack =
          reason == FinishReason::kCancelled ? Clock::duration(kDeadlineCancelTolerance) : Clock::duration::zero();
      if ((!reason || reason == FinishReason::kCancelled) && s.request.deadline && now + slack >= *s.request.deadline) {
        reason = FinishReason::kDeadline;
        status = Status(StatusCode::kDeadlineExceeded, "request deadline passed");
      }
      // A sequence whose next token needs more blocks than the whole cache can never run.
      if (!reason && pool_ && static_cast<int64_t>(s.tokens.size()) > pool_->num_blocks() * options_.block_size) {
        reason = FinishReason::kLength;
      }
      if (!reason) {
        ++i;
        continue;
      }
      std::unique_ptr<Sequence> owned = std::move((*list)[i]);
      list->erase(list->begin() + i);
      Finish(std::move(owned), *reason, status);
    }
  }
  RefreshGauges();
}

void ModelSlot::RefreshGauges() {
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  stats_.kv_blocks_total = kv_blocks();
  stats_.kv_blocks_used = kv_blocks_used();
}

void ModelSlot::FinishAll(FinishReason reason, const Status& status) {
  Drain();
  // Requests their last token ended whose final event a Stream that threw did not send.
  for (auto& s : ending_) EndRequest(*s, reason, status, spec_.name, counters_, observer_);
  ending_.clear();
  for (auto* list : {&running_, &waiting_}) {
    std::vector<std::unique_ptr<Sequence>> seqs = std::move(*list);
    list->clear();
    for (auto& s : seqs) Finish(std::move(s), reason, status);
  }
  RefreshGauges();
}

void EndRequest(Sequence& seq, FinishReason reason, const Status& status, const std::string& model,
                EngineCounters& counters, const EngineObserver& observer) {
  if (!seq.admitted_once) counters.waiting.fetch_sub(1);
  RequestEvent event;
  event.id = seq.id;
  if (reason != FinishReason::kError && reason != FinishReason::kCancelled) seq.FlushText(event);
  event.finished = true;
  event.finish_reason = reason;
  event.status = status;
  seq.Finalize(Clock::now(), event);
  if (observer.on_request) {
    RequestRecord record{model,        seq.id,        seq.request.client_request_id, reason, status,
                         event.usage,  event.timings, seq.inter_token_seconds,       seq.request.warmup};
    observer.on_request(record);
  }
  seq.ended = true;
  counters.in_flight.fetch_sub(1);  // before the final event, so a client that saw it sees the count
  seq.sink(std::move(event));
}

void ModelSlot::Finish(std::unique_ptr<Sequence> seq, FinishReason reason, const Status& status) {
  if (in_flight()) {
    EndRequest(*seq, reason, status, spec_.name, counters_, observer_);
    retired_.push_back(std::move(seq));
    return;
  }
  if (pool_) pool_->ReleaseAll(seq->blocks);
  seq->blocks.clear();
  EndRequest(*seq, reason, status, spec_.name, counters_, observer_);
}

void ModelSlot::FinishListed(Sequence* seq, FinishReason reason, const Status& status) {
  for (auto* list : {&running_, &waiting_}) {
    auto it = std::ranges::find_if(*list, [&](const auto& s) { return s.get() == seq; });
    if (it == list->end()) continue;
    std::unique_ptr<Sequence> owned = std::move(*it);
    list->erase(it);
    Finish(std::move(owned), reason, status);
    return;
  }
}

void ModelSlot::SetTargetBlocks(int64_t blocks) {
  target_blocks_ = blocks;
  shrink_pending_ = blocks < kv_blocks();
}

Status ModelSlot::Resize() {
  Drain();
  shrink_pending_ = false;
  pool_.reset();
  cache_.reset();
  RefreshGauges();
  if (target_blocks_ == 0) return Status::Ok();
  StatusOr<KvCache> cache = KvCache::Create(config_, target_blocks_, options_.block_size, options_.device);
  if (!cache.ok()) {
    target_blocks_ = 0;
    return cache.status();
  }
  cache_.emplace(std::move(cache).value());
  pool_ = std::make_unique<BlockPool>(target_blocks_, options_.block_size);
  RefreshGauges();
  return Status::Ok();
}

std::pair<int64_t, int64_t> ModelSlot::PrefixHits(const Sequence& seq, std::vector<int32_t>* blocks,
                                                  std::vector<uint64_t>* hashes) const {
  if (!options_.prefix_caching) return {0, 0};
  const int64_t bs = options_.block_size;
  // At least the last token is always computed, so its logits exist.
  const int64_t max_blocks = (static_cast<int64_t>(seq.tokens.size()) - 1) / bs;
  int64_t evictable = 0;
  uint64_t parent = 0;
  for (int64_t b = 0; b < max_blocks; ++b) {
    std::span<const int32_t> ids(seq.tokens.data() + b * bs, bs);
    const uint64_t hash = BlockPool::ChainHash(parent, ids);
    std::optional<int32_t> found = pool_->Find(hash, ids);
    if (!found) break;
    if (pool_->IsEvictable(*found)) ++evictable;
    if (blocks) blocks->push_back(*found);
    if (hashes) hashes->push_back(hash);
    parent = hash;
  }
  const int64_t hits = blocks ? static_cast<int64_t>(blocks->size()) : 0;
  return {hits, evictable};
}

void ModelSlot::Allocate(Sequence& seq, int64_t new_blocks) {
  // The planner counted these blocks as free; if one is missing anyway, Model::Step rejects the
  // short block table and the request ends with an error instead of the engine crashing.
  for (int64_t b = 0; b < new_blocks; ++b) {
    std::optional<int32_t> block = pool_->Allocate();
    if (!block) break;
    seq.blocks.push_back(*block);
  }
}

void ModelSlot::Admit(Sequence& seq, int64_t new_blocks) {
  std::vector<int32_t> hit_blocks;
  std::vector<uint64_t> hashes;
  PrefixHits(seq, &hit_blocks, &hashes);
  for (int32_t b : hit_blocks) pool_->Acquire(b);
  seq.blocks = hit_blocks;
  seq.block_hashes = hashes;
  const int64_t prefix_hit_tokens = static_cast<int64_t>(hit_blocks.size()) * options_.block_size;
  seq.num_cached = prefix_hit_tokens;
  Allocate(seq, new_blocks);
  if (!seq.admitted_once) {
    seq.admitted_once = true;
    counters_.waiting.fetch_sub(1);
    seq.usage.prefix_hit_tokens = std::min(prefix_hit_tokens, seq.prompt_len);
    if (!seq.request.warmup) {
      stats_.prefix_hit_tokens_total += seq.usage.prefix_hit_tokens;
      stats_.prompt_tokens_total += seq.prompt_len;
    }
  }
  if (!seq.scheduled_once) {
    seq.scheduled_once = true;
    seq.first_scheduled = Clock::now();
  }
}

void ModelSlot::Preempt(Sequence& seq) {
  pool_->ReleaseAll(seq.blocks);
  seq.blocks.clear();
  seq.block_hashes.clear();
  seq.num_cached = 0;
  ++stats_.preemptions_total;
}

std::vector<ModelSlot::Scheduled> ModelSlot::Schedule() {
  PlanInput in;
  in.max_batched_tokens = options_.max_batched_tokens;
  in.max_seqs = spec_.max_seqs > 0 ? spec_.max_seqs : options_.max_seqs;
  in.block_size = options_.block_size;
  in.free_blocks = pool_->NumFree();
  for (const auto& s : running_) {
    in.running.push_back({s->num_cached, static_cast<int64_t>(s->tokens.size()),
                          static_cast<int64_t>(s->blocks.size()), s->prefilling()});
  }
  if (!shrink_pending_) {
    const size_t candidates = std::min<size_t>(waiting_.size(), std::max<int64_t>(0, in.max_seqs - running_.size()));
    for (size_t w = 0; w < candidates; ++w) {
      std::vector<int32_t> blocks;
      auto [hits, evictable] = PrefixHits(*waiting_[w], &blocks, nullptr);
      in.waiting.push_back({static_cast<int64_t>(waiting_[w]->tokens.size()), hits * options_.block_size, evictable});
    }
  }
  const StepPlan plan = PlanStep(in);

  // Preempt first: the plan counts the victims' blocks as free for the others.
  std::vector<bool> preempted(running_.size(), false);
  for (size_t i : plan.preempted) {
    Preempt(*running_[i]);
    preempted[i] = true;
  }
  std::vector<Scheduled> batch;
  for (const PlanChunk& c : plan.running) {
    Allocate(*running_[c.index], c.new_blocks);
    batch.push_back({running_[c.index].get(), c.tokens});
  }
  for (const PlanChunk& c : plan.admitted) {
    Admit(*waiting_[c.index], c.new_blocks);
    batch.push_back({waiting_[c.index].get(), c.tokens});
  }
  // Preempted sequences go back to the queue (keeping their arrival, so they come first again).
  std::vector<std::unique_ptr<Sequence>> still_running;
  for (size_t i = 0; i < running_.size(); ++i) {
    if (preempted[i]) {
      InsertWaiting(std::move(running_[i]));
    } else {
      still_running.push_back(std::move(running_[i]));
    }
  }
  // Admitted sequences join the running set (admitted indices are a prefix of the queue; no
  // preemption happened in a step that admits).
  for (const PlanChunk& c : plan.admitted) still_running.push_back(std::move(waiting_[c.index]));
  waiting_.erase(waiting_.begin(), waiting_.begin() + plan.admitted.size());
  running_ = std::move(still_running);
  RefreshGauges();
  return batch;
}

void ModelSlot::RegisterFullBlocks(Sequence& seq) {
  if (!options_.prefix_caching) return;
  const int64_t bs = options_.block_size;
  const int64_t full = seq.num_cached / bs;
  for (int64_t b = static_cast<int64_t>(seq.block_hashes.size()); b < full; ++b) {
    std::span<const int32_t> ids(seq.tokens.data() + b * bs, bs);
    const uint64_t hash = BlockPool::ChainHash(b == 0 ? 0 : seq.block_hashes[b - 1], ids);
    pool_->Register(seq.blocks[b], hash, ids);
    seq.block_hashes.push_back(hash);
  }
}

bool ModelSlot::Overlaps() const {
  return options_.host_overlap == HostOverlap::kAlways ||
         (options_.host_overlap == HostOverlap::kAuto && model_->launches_async());
}

void ModelSlot::Step() {
  if (!pool_) return;
  if (in_flight()) Collect();  // host overlap: the step launched by the last Step
  const std::vector<Scheduled> batch = Schedule();
  if (!batch.empty()) {
    const Status launched = Launch(batch);
    if (!launched.ok()) {
      Postprocess(batch, launched);
    } else {
      in_flight_ = batch;
      if (!Overlaps()) Collect();
    }
  }
  Stream();  // the collected tokens; with host overlap while the step just launched runs
}

void ModelSlot::Drain() {
  if (in_flight()) Collect();
  Stream();  // also what a Step that threw left to stream (nothing, normally)
}

Status ModelSlot::Launch(const std::vector<Scheduled>& batch) {
  StepInput input;
  input.kv_cache = &*cache_;
  int64_t tokens = 0;
  for (const Scheduled& s : batch) {
    const Sequence& seq = *s.seq;
    SequenceInput in;
    in.tokens.assign(seq.tokens.begin() + seq.num_cached, seq.tokens.begin() + seq.num_cached + s.tokens);
    in.num_cached = seq.num_cached;
    in.block_table = seq.blocks;
    if (seq.num_cached + s.tokens == static_cast<int64_t>(seq.tokens.size())) {
      // The step samples the next token on the model's device; only tokens come back.
      in.logits_for = {s.tokens - 1};
      in.sample = RowSampling{seq.request.sampling,
                              {std::span<const int32_t>(seq.tokens.data(), seq.prompt_len),
                               std::span<const int32_t>(seq.tokens.data() + seq.prompt_len, seq.generated()),
                               static_cast<uint64_t>(seq.generated()),
                               seq.request.logprobs || seq.request.sampling.top_logprobs > 0}};
    }
    input.sequences.push_back(std::move(in));
    tokens += s.tokens;
  }
  // Reused across steps: a fresh StepOutput would allocate (and page-fault) the logits buffer,
  // [rows, vocab] fp32 on the CPU backend (78 MB at 128 rows of a 152k vocabulary).
  StepOutput& out = step_output_;
  out.step_seconds = 0;
  out.decompress_seconds = 0;
  out.gpu_seconds = 0;
  ++stats_.steps_total;
  stats_.last_batch_sequences = static_cast<int64_t>(batch.size());
  stats_.last_batch_tokens = tokens;
  return model_->Launch(input, out);
}

void ModelSlot::Collect() {
  const std::vector<Scheduled> batch = std::move(in_flight_);
  in_flight_.clear();
  const Status collected = model_->Collect(step_output_);
  stats_.last_step_seconds = step_output_.step_seconds;
  stats_.last_decompress_seconds = step_output_.decompress_seconds;
  Postprocess(batch, collected);
  for (const auto& seq : retired_) pool_->ReleaseAll(seq->blocks);
  retired_.clear();
}

void ModelSlot::Postprocess(const std::vector<Scheduled>& batch, const Status& run) {
  if (!run.ok()) {
    // Nothing was written; the batch's requests end with the error, in running order.
    for (const Scheduled& s : batch) s.seq->pending_finish = FinishReason::kError;
    std::vector<Sequence*> failed;
    for (const auto& s : running_) {
      if (s->pending_finish == FinishReason::kError) failed.push_back(s.get());
    }
    const Status err(run.code(), spec_.name + ": step failed: " + run.message());
    for (Sequence* s : failed) FinishListed(s, FinishReason::kError, err);
  } else {
    for (const Scheduled& s : batch) {
      if (s.seq->ended) continue;
      s.seq->num_cached += s.tokens;
      RegisterFullBlocks(*s.seq);
    }
    AppendTokens(batch, step_output_);
  }
  RefreshGauges();
  if (observer_.on_step) {
    observer_.on_step({spec_.name, stats_.last_batch_sequences, stats_.last_batch_tokens, stats_.last_step_seconds,
                       stats_.last_decompress_seconds, step_output_.gpu_seconds});
  }
}

void ModelSlot::AppendTokens(const std::vector<Scheduled>& batch, const StepOutput& out) {
  const Clock::time_point now = Clock::now();
  std::vector<std::pair<Sequence*, Status>> failed;
  for (size_t row = 0; row < out.rows.size(); ++row) {
    Sequence& seq = *batch[out.rows[row].first].seq;
    if (seq.ended) continue;  // ended while the step ran: its row is dropped
    const StatusOr<SampleResult>& sample = out.samples[row];
    if (!sample.ok()) {
      failed.emplace_back(&seq, sample.status());
      continue;
    }
    const FinishReason end = seq.AppendToken(*sample, rules_, now);
    if (!seq.request.warmup) stats_.generated_tokens_total += 1;
    unsent_.push_back({&seq, end});
  }
  for (auto& [seq, status] : failed) FinishListed(seq, FinishReason::kError, status);
  // Requests their token ends leave the running set now, so the next step does not hold them.
  for (const Unsent& u : unsent_) {
    if (u.token_end == FinishReason::kNone) continue;
    auto it = std::ranges::find_if(running_, [&](const auto& s) { return s.get() == u.seq; });
    if (it == running_.end()) continue;  // not reached: a collected row's request is running or ended
    pool_->ReleaseAll((*it)->blocks);
    (*it)->blocks.clear();
    ending_.push_back(std::move(*it));
    running_.erase(it);
  }
}

void ModelSlot::Stream() {
  std::vector<Unsent> unsent;
  unsent.swap(unsent_);  // a Stream that throws does not send these again
  struct Ended {
    Sequence* seq;
    FinishReason end;
    bool in_ending;  // its token ended it: AppendTokens moved it to ending_
  };
  std::vector<Ended> ended;
  for (const Unsent& u : unsent) {
    RequestEvent event;
    event.id = u.seq->id;
    FinishReason end = u.seq->TakeOutput(event);  // kStop from a stop string wins over the token's
    if (end == FinishReason::kNone) end = u.token_end;
    u.seq->sink(std::move(event));  // the final event carries this token too: the delta first
    if (end != FinishReason::kNone) ended.push_back({u.seq, end, u.token_end != FinishReason::kNone});
  }
  for (const Ended& e : ended) {
    if (e.in_ending) {
      EndRequest(*e.seq, e.end, Status(), spec_.name, counters_, observer_);
    } else {
      // A stop string: the request is running (in the step in flight, with host overlap), or
      // waiting again (Schedule preempted it after its token was appended).
      FinishListed(e.seq, e.end, Status());
    }
  }
  std::erase_if(ending_, [](const auto& s) { return s->ended; });  // all of them, unless a sink threw
  RefreshGauges();
}

}  // namespace df11
