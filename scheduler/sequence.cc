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

FinishReason Sequence::Append(const SampleResult& sample, const FinishRules& rules, Clock::time_point now,
                              RequestEvent& event) {
  if (generated() == 0) {
    first_token = now;
  } else {
    inter_token_seconds.push_back(Seconds(last_token, now));
  }
  last_token = now;
  tokens.push_back(sample.token);
  usage.generated_tokens = generated();
  event.token_ids.push_back(sample.token);
  if (request.logprobs || request.sampling.top_logprobs > 0) {
    event.logprobs.push_back({sample.token, sample.logprob, sample.top});
  }
  if (Contains(request.stop_token_ids, sample.token)) return FinishReason::kStop;
  if (!request.ignore_eos && Contains(rules.eos_ids, sample.token)) return FinishReason::kEos;
  if (detokenizer_) {
    event.text += stop_.Push(detokenizer_->Push(sample.token));
    if (stop_.stopped()) return FinishReason::kStop;
  }
  if (generated() >= request.max_tokens) return FinishReason::kLength;
  if (static_cast<int64_t>(tokens.size()) >= rules.max_positions) return FinishReason::kLength;
  return FinishReason::kNone;
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
