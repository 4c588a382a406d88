// Model::CudaState::Sample: the step's rows sampled on the device (kernels/cuda_sampling.h); only
// the SampledRow records are copied back.
#include <cstring>

#include "runtime/model/model_cuda.h"

namespace df11 {

#if DF11_HAVE_CUDA

Status Model::CudaState::Sample(const StepInput& input, float* logits, int64_t vocab, StepOutput& output) {
  const int64_t rows = static_cast<int64_t>(output.rows.size());
  std::vector<cuda::DeviceSampleRow> params(rows);
  std::vector<PenaltyEntry> entries;
  std::vector<Status> errors(rows);  // a context token outside the vocabulary fails its row only
  int64_t sort_slots = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const RowSampling& s = *input.sequences[output.rows[r].first].sample;
    StatusOr<std::vector<PenaltyEntry>> row_entries = PenaltyEntries(s.params, s.context, vocab);
    cuda::DeviceSampleRow& p = params[r];
    p.params = s.params;
    p.step = s.context.step;
    p.want_logprobs = s.context.want_logprobs ? 1 : 0;
    p.penalty_begin = static_cast<int32_t>(entries.size());
    if (row_entries.ok()) {
      entries.insert(entries.end(), row_entries->begin(), row_entries->end());
    } else {
      errors[r] = row_entries.status();
    }
    p.penalty_count = static_cast<int32_t>(entries.size()) - p.penalty_begin;
    p.sort_slot = s.params.temperature > 0.0f ? static_cast<int32_t>(sort_slots++) : -1;
  }
  const uint64_t params_bytes = AlignUp(rows * sizeof(cuda::DeviceSampleRow));
  const uint64_t entries_bytes = entries.size() * sizeof(PenaltyEntry);
  std::vector<char> packed(params_bytes + entries_bytes);
  std::memcpy(packed.data(), params.data(), rows * sizeof(cuda::DeviceSampleRow));
  if (!entries.empty()) std::memcpy(packed.data() + params_bytes, entries.data(), entries_bytes);
  DF11_RETURN_IF_ERROR(sampler_inputs.Reserve(packed.size(), "sampler inputs"));
  DF11_RETURN_IF_ERROR(sampler_outputs.Reserve(rows * sizeof(cuda::SampledRow), "sampler outputs"));
  DF11_RETURN_IF_ERROR(cuda::CopyToDevice(sampler_inputs.data(), packed.data(), packed.size(), stream));
  char* inputs = sampler_inputs.as<char>();
  DF11_RETURN_IF_ERROR(cuda::SampleRows(logits, rows, vocab, reinterpret_cast<const cuda::DeviceSampleRow*>(inputs),
                                        reinterpret_cast<PenaltyEntry*>(inputs + params_bytes), sort_slots,
                                        sampler_workspace.data(), sampler_workspace.bytes(),
                                        sampler_outputs.as<cuda::SampledRow>(), stream));
  std::vector<cuda::SampledRow> sampled(rows);
  DF11_RETURN_IF_ERROR(
      cuda::CopyToHost(sampled.data(), sampler_outputs.data(), rows * sizeof(cuda::SampledRow), stream));
  output.samples.assign(rows, StatusOr<SampleResult>(Internal("not sampled")));
  for (int64_t r = 0; r < rows; ++r) {
    const cuda::SampledRow& s = sampled[r];
    if (!errors[r].ok()) {
      output.samples[r] = errors[r];
    } else if (s.error != 0) {
      output.samples[r] = InvalidArgument("sampling: logits contain NaN");
    } else {
      SampleResult result;
      result.token = s.token;
      if (params[r].want_logprobs) {
        result.logprob = s.logprob;
        for (int i = 0; i < s.num_top; ++i) result.top.emplace_back(s.top_ids[i], s.top_logprobs[i]);
      }
      output.samples[r] = std::move(result);
    }
  }
  return Status::Ok();
}

#endif

}  // namespace df11
