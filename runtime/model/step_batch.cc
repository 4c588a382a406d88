// Host side of a step's batch (see step_batch.h).
#include "runtime/model/step_batch.h"

namespace df11 {

StepBatch BuildStepBatch(const StepInput& input, int64_t block_size) {
  StepBatch b;
  for (size_t s = 0; s < input.sequences.size(); ++s) {
    const SequenceInput& seq = input.sequences[s];
    const int64_t first_token = b.num_tokens();
    for (int64_t index : seq.logits_for) {
      b.rows.emplace_back(static_cast<int64_t>(s), index);
      b.row_tokens.push_back(static_cast<int32_t>(first_token + index));
    }
    b.tokens.insert(b.tokens.end(), seq.tokens.begin(), seq.tokens.end());
    b.arrays.AddSequence(seq.num_cached, static_cast<int64_t>(seq.tokens.size()), seq.block_table, block_size);
  }
  return b;
}

}  // namespace df11
