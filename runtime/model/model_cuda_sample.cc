// Model::CudaState::Sample / CollectSamples: the step's rows sampled on the device
// (kernels/cuda_sampling.h); only the SampledRow records are copied back, into page-locked memory.
#include <algorithm>
#include <cstring>

#include "runtime/model/model_cuda.h"

namespace df11 {

#if DF11_HAVE_CUDA

Status Model::CudaState::Sample(const StepInput& input, const StepOutput& output, float* logits, int64_t vocab) {
  const int64_t rows = static_cast<int64_t>(output.rows.size());
  std::vector<cuda::DeviceSampleRow> params(rows);
  std::vector<PenaltyEntry> entries;
  sample_errors.assign(rows, Status::Ok());  // a context token outside the vocabulary fails its row only
  sample_logprobs.assign(rows, 0);
  int64_t sort_slots = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const RowSampling& s = *input.sequences[output.rows[r].first].sample;
    StatusOr<std::vector<PenaltyEntry>> row_entries = PenaltyEntries(s.params, s.context, vocab);
    cuda::DeviceSampleRow& p = params[r];
    p.params = s.params;
    p.step = s.context.step;
    p.want_logprobs = s.context.want_logprobs ? 1 : 0;
    sample_logprobs[r] = s.context.want_logprobs ? 1 : 0;
    p.penalty_begin = static_cast<int32_t>(entries.size());
    if (row_entries.ok()) {
      entries.insert(entries.end(), row_entries->begin(), row_entries->end());
    } else {
      sample_errors[r] = row_entries.status();
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
  const uint64_t out_bytes = rows * sizeof(cuda::SampledRow);
  if (sampled_host.bytes() < out_bytes) {  // doubling, from 256 rows: steps grow a few rows at a time
    const uint64_t bytes = std::max<uint64_t>(2 * out_bytes, 256 * sizeof(cuda::SampledRow));
    sampled_host = cuda::PinnedHostBuffer();
    DF11_ASSIGN_OR_RETURN(sampled_host,
                          cuda::PinnedHostBuffer::Allocate(bytes, "sampled rows", cuda::PinnedAlloc::kCudaMallocHost));
  }
  DF11_RETURN_IF_ERROR(cuda::CopyToDevice(sampler_inputs.data(), packed.data(), packed.size(), stream));
  char* inputs = sampler_inputs.as<char>();
  DF11_RETURN_IF_ERROR(cuda::SampleRows(logits, rows, vocab, reinterpret_cast<const cuda::DeviceSampleRow*>(inputs),
                                        reinterpret_cast<PenaltyEntry*>(inputs + params_bytes), sort_slots,
                                        sampler_workspace.data(), sampler_workspace.bytes(),
                                        sampler_outputs.as<cuda::SampledRow>(), stream));
  DF11_RETURN_IF_ERROR(cuda::CopyToHostAsync(sampled_host.data(), sampler_outputs.data(), out_bytes, stream));
  sampled_rows = rows;
  return Status::Ok();
}

void Model::CudaState::CollectSamples(StepOutput& output) const {
  const auto* sampled = reinterpret_cast<const cuda::SampledRow*>(sampled_host.data());
  output.samples.assign(sampled_rows, StatusOr<SampleResult>(Internal("not sampled")));
  for (int64_t r = 0; r < sampled_rows; ++r) {
    const cuda::SampledRow& s = sampled[r];
    if (!sample_errors[r].ok()) {
      output.samples[r] = sample_errors[r];
    } else if (s.error != 0) {
      output.samples[r] = InvalidArgument("sampling: logits contain NaN");
    } else {
      SampleResult result;
      result.token = s.token;
      if (sample_logprobs[r] != 0) {
        result.logprob = s.logprob;
        for (int i = 0; i < s.num_top; ++i) result.top.emplace_back(s.top_ids[i], s.top_logprobs[i]);
      }
      output.samples[r] = std::move(result);
    }
  }
}

#endif

}  // namespace df11
