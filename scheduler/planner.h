// PlanStep: which sequences of one model run in the next step, and how many tokens each computes.
// A pure function of counts, so the policy is unit-tested without a model:
//   1. running sequences that are decoding (one token each), oldest first;
//   2. running sequences still prefilling (a prompt chunk each, chunked prefill), oldest first;
//   3. waiting sequences in queue order (the caller sorts them: priority, then arrival), each
//      admitted with its first chunk only when its blocks are available now (strict order: the
//      first one that does not fit stops admission, so big prompts are not starved).
// Every step stays within max_batched_tokens tokens and max_seqs running sequences. When a running
// sequence needs a block and none is free, the NEWEST running sequence not yet scheduled this step
// is preempted (all its blocks freed; the engine recomputes it later from prompt + generated
// tokens); if there is none, the sequence itself is preempted. No admissions in a step that
// preempted.
// Thread-safety: pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace df11 {

struct PlanRunning {
  int64_t num_cached = 0;   // positions whose K/V are in the cache (SequenceInput::num_cached)
  int64_t total = 0;        // known tokens (prompt + generated); total - num_cached are to compute
  int64_t blocks_held = 0;  // blocks in its table
  bool prefilling = false;  // still computing prompt (or recompute) tokens
};

struct PlanWaiting {
  int64_t total = 0;                 // tokens to compute from position 0 (prompt + generated)
  int64_t prefix_hit_tokens = 0;     // leading positions found in the prefix cache (whole blocks); they
                                     // become the sequence's num_cached when it is admitted
  int64_t evictable_hit_blocks = 0;  // of those blocks, how many are unreferenced (they stop being free)
};

struct PlanInput {
  int64_t max_batched_tokens = 0;
  int64_t max_seqs = 0;
  int64_t block_size = 0;
  int64_t free_blocks = 0;
  std::vector<PlanRunning> running;  // admission order, oldest first
  std::vector<PlanWaiting> waiting;  // queue order
};

struct PlanChunk {
  size_t index = 0;     // into PlanInput::running or ::waiting
  int64_t tokens = 0;   // > 0 tokens to compute this step
  int64_t new_blocks = 0;  // blocks to allocate before the step
};

struct StepPlan {
  std::vector<PlanChunk> running;    // scheduled running sequences
  std::vector<size_t> preempted;     // running indices to preempt, in preemption order
  std::vector<PlanChunk> admitted;   // waiting sequences admitted, in order
  int64_t tokens = 0;                // total tokens of the step
};

StepPlan PlanStep(const PlanInput& input);

}  // namespace df11
