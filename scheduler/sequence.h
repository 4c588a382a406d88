// Sequence: the engine thread's state of one request: its tokens (prompt + generated), its KV
// blocks, and its output side (incremental detokenization, stop handling, usage, timings).
// Thread-safety: none; owned by the engine thread (created by Submit, then moved to it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/model/sampler.h"
#include "runtime/tokenizer/detokenizer.h"
#include "scheduler/request.h"
#include "scheduler/stop_filter.h"

namespace df11 {

// What ends generation, per model: stop ids of the tokenizer (eos) and the context length.
struct FinishRules {
  std::vector<int32_t> eos_ids;
  int64_t max_positions = 0;
};

struct Sequence {
  Sequence(RequestId id, GenerateRequest request, EventSink sink, std::shared_ptr<const Tokenizer> tokenizer);

  RequestId id;
  GenerateRequest request;
  EventSink sink;
  uint64_t arrival = 0;  // submission order, for FIFO among equal priorities

  std::vector<int32_t> tokens;  // prompt + generated
  int64_t prompt_len = 0;
  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }

  // KV: positions [0, num_cached) are in the cache, in `blocks`; block_hashes[i] is the chain
  // hash of full block i once it is registered in (or found in) the prefix cache.
  int64_t num_cached = 0;
  std::vector<int32_t> blocks;
  std::vector<uint64_t> block_hashes;
  bool admitted_once = false;  // usage.prefix_hit_tokens counts the first admission only
  bool waited_for_promotion = false;  // queued while its model was not resident (RequestRecord)
  bool prefilling() const { return static_cast<int64_t>(tokens.size()) - num_cached > 1; }

  std::optional<FinishReason> pending_finish;  // set off the step path (cancel, deadline)
  bool ended = false;  // its final event went out (EndRequest); a step in flight may still hold its row

  // Output side.
  RequestUsage usage;
  Clock::time_point submitted, first_scheduled, first_token, last_token;
  bool scheduled_once = false;
  std::vector<double> inter_token_seconds;

  // Adds a sampled token at `now` and returns why the token alone ends generation (a stop id, eos,
  // max_tokens, the context length), or kNone. Its ids, logprobs and text go out with the next
  // TakeOutput; the engine appends a step's tokens before launching the next step and takes their
  // output while that step runs (stop strings are known then).
  FinishReason AppendToken(const SampleResult& sample, const FinishRules& rules, Clock::time_point now);
  // Moves what the tokens appended since the last call give into `event`: ids, logprobs, and text
  // (through the detokenizer and the stop strings; none for a stop id or eos). kStop when a stop
  // string matched (it wins over max_tokens; tokens after it are dropped), else kNone.
  FinishReason TakeOutput(RequestEvent& event);
  // Moves the text still held back (detokenizer and stop filter) into `event`; call once at the end.
  void FlushText(RequestEvent& event);
  // Usage and timings for the final event at `now`.
  void Finalize(Clock::time_point now, RequestEvent& event) const;

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<IncrementalDetokenizer> detokenizer_;  // null without a tokenizer
  StopFilter stop_;
  struct Unsent {
    SampleResult sample;
    bool text;  // goes through the detokenizer (not a stop id or eos)
  };
  std::vector<Unsent> unsent_;  // appended, not yet in an event
};

}  // namespace df11
