// The host side of a step's ragged batch, built once for both backends: the new tokens of all
// sequences concatenated in sequence order, their positions, token -> sequence map and block
// tables (kernels/batch_layout.h), and which tokens' logits are wanted. The CPU step runs on these
// vectors; the CUDA step packs them into one upload (model_cuda_step.cc).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/batch_layout.h"
#include "runtime/model/model.h"

namespace df11 {

struct StepBatch {
  BatchArrays arrays;                             // positions, token_seq, table_begin, tables
  std::vector<int32_t> tokens;                    // [T] token ids
  std::vector<int32_t> row_tokens;                // [R] per logits row: its token's index in [0, T)
  std::vector<std::pair<int64_t, int64_t>> rows;  // [R] per logits row: (sequence, index into its tokens)

  int64_t num_tokens() const { return arrays.num_tokens(); }
};

// The batch of a validated StepInput (Model::Validate) over a cache of `block_size` positions per block.
StepBatch BuildStepBatch(const StepInput& input, int64_t block_size);

}  // namespace df11
