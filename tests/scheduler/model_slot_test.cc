// ModelSlot driven step by step (no engine thread) on the CPU backend with host overlap
// (HostOverlap::kAlways, the order of work of a CUDA engine): a step's tokens are appended, the
// next step is scheduled (which may preempt) and launched, then the tokens are streamed. A stop
// string that matches on the token appended just before its request is preempted ends that
// request from the waiting queue. Expected outputs come from a first run without the stop string.
#include "scheduler/model_slot.h"

#include <gtest/gtest.h>

#include "runtime/tokenizer/tokenizer.h"
#include "tests/scheduler/engine_harness.h"

namespace df11 {
namespace {

struct SlotRun {
  int first_preemption_step = -1;
  size_t b_tokens_then = 0;  // tokens request B had received by the end of that step
  int b_final_step = -1;     // the step whose Stream sent B's final event
  bool preempted_at_b_final = false;
  int64_t blocks_used_at_end = -1;
};

// Requests A then B, 8 KV blocks of 4 positions: both start, and once they need more than 8
// blocks the newest (B) is preempted until A is done.
SlotRun RunSlot(const std::string& dir, const std::vector<GenerateRequest>& requests, Recorder& rec) {
  auto model = Model::Load(dir);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  auto tokenizer = Tokenizer::Load(dir);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  std::shared_ptr<const Tokenizer> tok = std::move(tokenizer).value();
  const ModelConfig config = (*model)->config();
  EngineCounters counters;
  EngineObserver observer;
  const SlotOptions options{Device::kCpu, 64, 8, 4, false, HostOverlap::kAlways};
  ModelSlot slot({.name = "tiny", .path = dir}, std::move(model).value(), config, tok, options, counters, observer);
  slot.SetTargetBlocks(8);
  EXPECT_TRUE(slot.Resize().ok());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto seq = std::make_unique<Sequence>(i + 1, requests[i], rec.Sink(static_cast<int>(i)), tok);
    seq->arrival = i;
    counters.in_flight.fetch_add(1);
    counters.waiting.fetch_add(1);
    slot.Add(std::move(seq));
  }
  SlotRun run;
  for (int step = 0; step < 500 && slot.HasWork(); ++step) {
    const int64_t preemptions = slot.stats().preemptions_total;
    const bool b_done = rec.Get(1).finals > 0;
    slot.Step();
    const bool preempted = slot.stats().preemptions_total > preemptions;
    if (preempted && run.first_preemption_step < 0) {
      run.first_preemption_step = step;
      run.b_tokens_then = rec.Get(1).tokens.size();
    }
    if (!b_done && rec.Get(1).finals > 0) {
      run.b_final_step = step;
      run.preempted_at_b_final = preempted;
    }
  }
  EXPECT_FALSE(slot.HasWork());
  run.blocks_used_at_end = slot.kv_blocks_used();
  EXPECT_EQ(counters.in_flight.load(), 0);
  return run;
}

TEST(ModelSlotOverlap, StopStringOnTheTokenBeforeItsPreemptionEndsTheWaitingRequest) {
  ScopedTempDir dir("df11_slot_overlap");
  ASSERT_TRUE(WriteTinyModel(dir.path() + "/m", {.seed = 7}).ok());
  const std::string m = dir.path() + "/m";
  const std::vector<GenerateRequest> plain = {Greedy("tiny", TestPrompt(8, 1), 20),
                                              Greedy("tiny", TestPrompt(8, 2), 20)};
  Recorder first;
  const SlotRun dry = RunSlot(m, plain, first);
  ASSERT_GE(dry.first_preemption_step, 0) << "no preemption: the test needs one";
  const Outcome a = first.Get(0), b = first.Get(1);
  ASSERT_EQ(b.tokens.size(), 20u);
  ASSERT_GE(dry.b_tokens_then, 1u);
  ASSERT_LT(dry.b_tokens_then, 20u);
  EXPECT_EQ(dry.blocks_used_at_end, 0);

  // B's stop string: its whole text up to the token it got in the step that preempted it.
  std::vector<GenerateRequest> stopped = plain;
  const std::shared_ptr<const Tokenizer> tok = std::move(Tokenizer::Load(m)).value();
  const std::vector<int32_t> head(b.tokens.begin(), b.tokens.begin() + dry.b_tokens_then);
  stopped[1].stop_strings = {tok->Decode(head, /*skip_special_tokens=*/true)};
  ASSERT_FALSE(stopped[1].stop_strings[0].empty());
  Recorder second;
  const SlotRun run = RunSlot(m, stopped, second);
  EXPECT_EQ(run.b_final_step, dry.first_preemption_step);
  EXPECT_TRUE(run.preempted_at_b_final) << "B's stop string did not match in the step that preempted it";
  const Outcome b_stopped = second.Get(1);
  EXPECT_EQ(b_stopped.finals, 1);
  EXPECT_EQ(b_stopped.reason, FinishReason::kStop);
  EXPECT_EQ(b_stopped.tokens, head);
  EXPECT_EQ(b_stopped.text, "");  // all of it is the stop string, never emitted
  EXPECT_EQ(second.Get(0).tokens, a.tokens);
  EXPECT_EQ(second.Get(0).finals, 1);
  EXPECT_EQ(run.blocks_used_at_end, 0);
}

}  // namespace
}  // namespace df11
