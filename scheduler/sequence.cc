// Per-request state and output handling (see sequence.h).
#include "scheduler/sequence.h"

#include <algorithm>

namespace df11 {
namespace {

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

bool Contains(const std::vector<int32_t>& ids, int32_t id) { return std::ranges::find(ids, id) != ids.end(); }

}  // namespace

Sequence::Sequence(RequestId id_, GenerateRequest request_, EventSink sink_, std::shared_ptr<const Tokenizer> tokenizer)
    : id(id_), request(std::move(request_)), sink(std::move(sink_)), tokenizer_(std::move(tokenizer)),
      stop_(request.stop_strings) {
  tokens = request.prompt_tokens;
  prompt_len = static_cast<int64_t>(tokens.size());
  usage.prompt_tokens = prompt_len;
  if (tokenizer_) detokenizer_ = std::make_unique<IncrementalDetokenizer>(*tokenizer_, request.skip_special_tokens);
  submitted = Clock::now();
}

FinishReason Sequence::AppendToken(const SampleResult& sample, const FinishRules& rules, Clock::time_point now) {
  if (generated() == 0) {
    first_token = now;
  } else {
    inter_token_seconds.push_back(Seconds(last_token, now));
  }
  last_token = now;
  tokens.push_back(sample.token);
  usage.generated_tokens = generated();
  FinishReason reason = FinishReason::kNone;
  if (Contains(request.stop_token_ids, sample.token)) {
    reason = FinishReason::kStop;
  } else if (!request.ignore_eos && Contains(rules.eos_ids, sample.token)) {
    reason = FinishReason::kEos;
  } else if (generated() >= request.max_tokens || static_cast<int64_t>(tokens.size()) >= rules.max_positions) {
    reason = FinishReason::kLength;
  }
  unsent_.push_back({sample, reason != FinishReason::kStop && reason != FinishReason::kEos});
  return reason;
}

FinishReason Sequence::TakeOutput(RequestEvent& event) {
  FinishReason reason = FinishReason::kNone;
  for (Unsent& u : unsent_) {
    event.token_ids.push_back(u.sample.token);
    if (request.logprobs || request.sampling.top_logprobs > 0) {
      event.logprobs.push_back({u.sample.token, u.sample.logprob, std::move(u.sample.top)});
    }
    if (u.text && detokenizer_) {
      event.text += stop_.Push(detokenizer_->Push(u.sample.token));
      if (stop_.stopped()) {
        reason = FinishReason::kStop;
        break;
      }
    }
  }
  unsent_.clear();
  return reason;
}

void Sequence::FlushText(RequestEvent& event) {
  if (!detokenizer_) return;
  event.text += stop_.Push(detokenizer_->Flush());
  event.text += stop_.Flush();
}

void Sequence::Finalize(Clock::time_point now, RequestEvent& event) const {
  event.usage = usage;
  RequestTimings& t = event.timings;
  t.waited_for_promotion = waited_for_promotion;
  t.total_seconds = Seconds(submitted, now);
  if (scheduled_once) t.queue_seconds = Seconds(submitted, first_scheduled);
  if (generated() > 0) {
    t.first_token_seconds = Seconds(submitted, first_token);
    t.prefill_seconds = Seconds(first_scheduled, first_token);
    t.decode_seconds = Seconds(first_token, now);
  }
}

}  // namespace df11
