// The CUDA sampler: one token (and its logprobs) per logits row on the device, the same bits as
// the CPU twin SampleRow (sampling.h) for the same row. Only SampledRow records come back to the
// host, never the logits.
// Kernels: SliceKernel (each row's NaN check and raw argmax, 64 blocks a row), then RowKernel
// (from those partials the NaN verdict and raw maximum, log-softmax statistics and top logprobs,
// penalties in place, argmax) for every row; rows with temperature > 0 then go in groups of kSortGroupRows through
// a segmented radix sort (CUB, stable: ties keep id order) and DrawKernel (the chunked sums of
// sampling.h, one chunk per thread); FinishKernel adds the chosen token's logprob.
// Deterministic: no atomics, fixed reduction orders. Compiles without nvcc; defined only when
// DF11_HAVE_CUDA.
#pragma once

#include <cstdint>

#include "kernels/base/status.h"
#include "kernels/df11_decode_cuda.h"  // GpuStream
#include "kernels/sampling.h"

namespace df11::cuda {

// One row to sample, as the device reads it.
struct DeviceSampleRow {
  SamplingParams params;
  uint64_t step = 0;          // the draw's counter (SampleContext::step)
  int32_t want_logprobs = 0;  // 1: logprob and top logprobs
  int32_t penalty_begin = 0;  // this row's PenaltyEntry rows: [begin, begin + count)
  int32_t penalty_count = 0;
  int32_t sort_slot = -1;  // temperature > 0: 0, 1, 2, ... in row order; -1 greedy
};

// What comes back per row.
struct SampledRow {
  int32_t token = 0;
  int32_t error = 0;  // 1: the row has NaN (nothing else is set)
  int32_t num_top = 0;
  float logprob = 0.0f;
  double log_sum = 0;  // log(sum exp(row)) of the raw row (want_logprobs)
  int32_t top_ids[kMaxTopLogprobs] = {};
  float top_logprobs[kMaxTopLogprobs] = {};
};

// Rows that go through one sort.
inline constexpr int kSortGroupRows = 16;

// Bytes of the workspace SampleRows needs for this vocabulary (whatever the number of rows).
uint64_t SamplingWorkspaceBytes(int64_t vocab);

// Samples rows [0, rows) of logits [rows, vocab] fp32 (penalised in place: the raw values of the
// penalised tokens are kept in PenaltyEntry::raw). params [rows], entries as the rows index them,
// out [rows]: device memory. num_sort_slots: rows with temperature > 0 (their sort_slot values
// are 0 .. num_sort_slots - 1). workspace: SamplingWorkspaceBytes(vocab) bytes of device memory.
Status SampleRows(float* logits, int64_t rows, int64_t vocab, const DeviceSampleRow* params, PenaltyEntry* entries,
                  int64_t num_sort_slots, void* workspace, uint64_t workspace_bytes, SampledRow* out, GpuStream stream);

}  // namespace df11::cuda
