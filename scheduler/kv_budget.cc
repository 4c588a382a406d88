// KV budget split (see kv_budget.h).
#include "scheduler/kv_budget.h"

namespace df11 {

StatusOr<std::vector<int64_t>> SplitKvBudget(int64_t budget_bytes, const std::vector<KvDemand>& demands) {
  int64_t min_bytes = 0;
  double shares = 0;
  std::string listing;
  bool overflow = false;
  for (const KvDemand& d : demands) {
    int64_t bytes = 0;
    overflow |= d.min_blocks < 0 || d.bytes_per_block <= 0 || __builtin_mul_overflow(d.min_blocks, d.bytes_per_block, &bytes) ||
                __builtin_add_overflow(min_bytes, bytes, &min_bytes);
    shares += d.share;
    listing += (listing.empty() ? "" : ", ") + d.name + " " + std::to_string(d.min_blocks) + " blocks x " +
               std::to_string(d.bytes_per_block) + " B";
  }
  if (overflow || min_bytes > budget_bytes) {
    return ResourceExhausted("KV memory: the models' minimum KV caches need " + (overflow ? std::string("more than 2^63") : std::to_string(min_bytes)) +
                             " bytes (" + listing + ") but the budget is " + std::to_string(budget_bytes) + " bytes");
  }
  const double rest = static_cast<double>(budget_bytes - min_bytes);
  std::vector<int64_t> blocks;
  for (const KvDemand& d : demands) {
    blocks.push_back(d.min_blocks + static_cast<int64_t>(d.share * rest / (shares * static_cast<double>(d.bytes_per_block))));
  }
  return blocks;
}

}  // namespace df11
