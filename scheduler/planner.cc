// Step planning (see planner.h).
#include "scheduler/planner.h"

#include <algorithm>

namespace df11 {
namespace {

int64_t BlocksFor(int64_t positions, int64_t block_size) { return (positions + block_size - 1) / block_size; }

}  // namespace

StepPlan PlanStep(const PlanInput& in) {
  StepPlan plan;
  const size_t n = in.running.size();
  std::vector<bool> done(n, false);  // scheduled or preempted
  int64_t budget = in.max_batched_tokens;
  int64_t free_blocks = in.free_blocks;
  int64_t live = static_cast<int64_t>(n);  // running after preemptions

  // Newest running sequence that is neither scheduled nor preempted, other than `self`.
  auto victim = [&](size_t self) -> int64_t {
    for (size_t v = n; v-- > 0;) {
      if (!done[v] && v != self) return static_cast<int64_t>(v);
    }
    return -1;
  };

  for (bool prefill_pass : {false, true}) {
    for (size_t i = 0; i < n && budget > 0; ++i) {
      const PlanRunning& r = in.running[i];
      if (done[i] || r.prefilling != prefill_pass) continue;
      const int64_t tokens = std::min(r.total - r.num_cached, budget);
      if (tokens <= 0) continue;
      const int64_t need = std::max<int64_t>(0, BlocksFor(r.num_cached + tokens, in.block_size) - r.blocks_held);
      while (need > free_blocks) {
        const int64_t v = victim(i);
        if (v < 0) break;
        done[v] = true;
        --live;
        free_blocks += in.running[v].blocks_held;
        plan.preempted.push_back(static_cast<size_t>(v));
      }
      done[i] = true;
      if (need > free_blocks) {
        --live;
        free_blocks += r.blocks_held;
        plan.preempted.push_back(i);
        continue;
      }
      free_blocks -= need;
      budget -= tokens;
      plan.running.push_back({i, tokens, need});
    }
  }

  if (plan.preempted.empty()) {
    for (size_t w = 0; w < in.waiting.size() && budget > 0 && live < in.max_seqs; ++w) {
      const PlanWaiting& s = in.waiting[w];
      const int64_t tokens = std::min(s.total - s.prefix_hit_tokens, budget);
      if (tokens <= 0) break;
      const int64_t hit_blocks = s.prefix_hit_tokens / in.block_size;
      const int64_t need = BlocksFor(s.prefix_hit_tokens + tokens, in.block_size) - hit_blocks;
      if (need + s.evictable_hit_blocks > free_blocks) break;
      free_blocks -= need + s.evictable_hit_blocks;
      budget -= tokens;
      ++live;
      plan.admitted.push_back({w, tokens, need});
    }
  }
  plan.tokens = in.max_batched_tokens - budget;
  return plan;
}

}  // namespace df11
