// KV memory policy for several models on one device: one byte budget B for all KV caches
// (EngineOptions::kv_memory_bytes; on the CPU 1 GiB when unset; on CUDA the free memory after
// weights and scratch times kv_memory_fraction). Each model i first gets its minimum m_i blocks
// (ModelSpec::kv_min_blocks, default: one max-length sequence); what is left,
// R = B - sum_j(m_j * bytes_per_block_j), is shared in proportion to kv_share:
//   blocks_i = m_i + floor(share_i / sum_j(share_j) * R / bytes_per_block_i).
// Loading a model whose minimum no longer fits is RESOURCE_EXHAUSTED.
// Thread-safety: pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace df11 {

struct KvDemand {
  std::string name;
  int64_t bytes_per_block = 0;  // > 0
  int64_t min_blocks = 0;       // >= 1
  double share = 1.0;           // > 0
};

// Blocks per model, in the order of `demands`.
StatusOr<std::vector<int64_t>> SplitKvBudget(int64_t budget_bytes, const std::vector<KvDemand>& demands);

// The CPU default for kv_memory_bytes.
inline constexpr int64_t kDefaultCpuKvBytes = int64_t{1} << 30;

}  // namespace df11
