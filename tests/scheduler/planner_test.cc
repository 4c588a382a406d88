// PlanStep: decode first, token budget, sequence cap, chunked prefill, admission by free blocks,
// preemption of the newest running sequence. Expected plans are worked out by hand.
#include "scheduler/planner.h"

#include <gtest/gtest.h>

namespace df11 {
namespace {

PlanInput Input(int64_t budget, int64_t max_seqs, int64_t free_blocks) {
  PlanInput in;
  in.max_batched_tokens = budget;
  in.max_seqs = max_seqs;
  in.block_size = 4;
  in.free_blocks = free_blocks;
  return in;
}

TEST(Planner, DecodesComeBeforePrefillChunksAndWaitingPrompts) {
  PlanInput in = Input(10, 8, 100);
  in.running = {{4, 10, 1, true}, {7, 8, 2, false}};  // a prefilling one (6 left), a decoding one
  in.waiting = {{9, 0, 0}};
  const StepPlan plan = PlanStep(in);
  ASSERT_EQ(plan.running.size(), 2u);
  EXPECT_EQ(plan.running[0].index, 1u);  // the decode
  EXPECT_EQ(plan.running[0].tokens, 1);
  EXPECT_EQ(plan.running[0].new_blocks, 0);  // position 7 is in block 1
  EXPECT_EQ(plan.running[1].index, 0u);
  EXPECT_EQ(plan.running[1].tokens, 6);      // all of its remaining prompt
  EXPECT_EQ(plan.running[1].new_blocks, 2);  // 10 positions -> 3 blocks, holds 1
  ASSERT_EQ(plan.admitted.size(), 1u);
  EXPECT_EQ(plan.admitted[0].tokens, 3);     // the rest of the budget: a chunk
  EXPECT_EQ(plan.admitted[0].new_blocks, 1);
  EXPECT_EQ(plan.tokens, 10);
  EXPECT_TRUE(plan.preempted.empty());
}

TEST(Planner, LongPromptIsChunkedAndNeverStallsDecodes) {
  PlanInput in = Input(8, 8, 100);
  in.running = {{5, 6, 2, false}, {6, 7, 2, false}};
  in.waiting = {{100, 0, 0}};
  const StepPlan plan = PlanStep(in);
  ASSERT_EQ(plan.running.size(), 2u);
  ASSERT_EQ(plan.admitted.size(), 1u);
  EXPECT_EQ(plan.admitted[0].tokens, 6);
  EXPECT_EQ(plan.admitted[0].new_blocks, 2);
}

TEST(Planner, SequenceCapLimitsAdmissions) {
  PlanInput in = Input(100, 2, 100);
  in.running = {{3, 4, 1, false}};
  in.waiting = {{5, 0, 0}, {5, 0, 0}};
  const StepPlan plan = PlanStep(in);
  ASSERT_EQ(plan.admitted.size(), 1u);
  EXPECT_EQ(plan.admitted[0].index, 0u);
}

TEST(Planner, AdmissionStopsAtTheFirstPromptWithoutBlocks) {
  PlanInput in = Input(100, 8, 3);
  in.waiting = {{8, 0, 0}, {20, 0, 0}, {1, 0, 0}};  // needs 2, then 5 (> 1 left): stop there
  const StepPlan plan = PlanStep(in);
  ASSERT_EQ(plan.admitted.size(), 1u);
  EXPECT_EQ(plan.admitted[0].new_blocks, 2);
}

TEST(Planner, PrefixCacheHitsNeedFewerBlocksButEvictableHitsStopBeingFree) {
  PlanInput in = Input(100, 8, 3);
  // 12 tokens, 8 cached (2 blocks, 1 of them evictable): computes 4 tokens in 1 new block, and the
  // evictable hit takes one more free block out of the pool.
  in.waiting = {{12, 8, 1}, {4, 0, 0}, {4, 0, 0}};
  const StepPlan plan = PlanStep(in);
  ASSERT_EQ(plan.admitted.size(), 2u);
  EXPECT_EQ(plan.admitted[0].tokens, 4);
  EXPECT_EQ(plan.admitted[0].new_blocks, 1);
  EXPECT_EQ(plan.admitted[1].new_blocks, 1);
}

TEST(Planner, OutOfBlocksPreemptsTheNewestAndAdmitsNothing) {
  PlanInput in = Input(100, 8, 0);
  // Oldest needs a new block (position 8 starts block 2); the newest holds 3 blocks.
  in.running = {{8, 9, 2, false}, {5, 6, 2, false}, {10, 11, 3, false}};
  in.waiting = {{1, 0, 0}};
  const StepPlan plan = PlanStep(in);
  ASSERT_EQ(plan.preempted, (std::vector<size_t>{2}));
  ASSERT_EQ(plan.running.size(), 2u);
  EXPECT_EQ(plan.running[0].index, 0u);
  EXPECT_EQ(plan.running[0].new_blocks, 1);
  EXPECT_EQ(plan.running[1].index, 1u);
  EXPECT_TRUE(plan.admitted.empty());
}

TEST(Planner, PreemptsItselfWhenNothingNewerIsLeft) {
  PlanInput in = Input(100, 8, 0);
  in.running = {{3, 4, 1, false}, {4, 5, 1, false}};  // the newest needs a block, nothing newer
  const StepPlan plan = PlanStep(in);
  // The oldest fits (position 3 is in its block); the newest preempts itself.
  ASSERT_EQ(plan.running.size(), 1u);
  EXPECT_EQ(plan.running[0].index, 0u);
  EXPECT_EQ(plan.preempted, (std::vector<size_t>{1}));
}

TEST(Planner, TokenBudgetCapsDecodes) {
  PlanInput in = Input(2, 8, 100);
  in.running = {{1, 2, 1, false}, {1, 2, 1, false}, {1, 2, 1, false}};
  const StepPlan plan = PlanStep(in);
  EXPECT_EQ(plan.running.size(), 2u);
  EXPECT_EQ(plan.tokens, 2);
}

}  // namespace
}  // namespace df11
