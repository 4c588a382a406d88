// Test drivers of Model::Step: a single sequence (TestSession) or several in one ragged batch
// (TestBatch), each owning a paged KV cache (on the model's device) with 4-position blocks handed
// out in a scattered order. Model tests run on every device (kDevices): CUDA instances skip
// without a GPU (SKIP_WITHOUT_DEVICE) and run on the GPU machine.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gpu.h"
#include "runtime/model/model.h"
#include "tests/kernels/df11_test_util.h"

namespace df11 {

inline bool HaveDevice(Device device) { return device == Device::kCpu || CudaDeviceCount() > 0; }

#define SKIP_WITHOUT_DEVICE(device) \
  if (!HaveDevice(device)) GTEST_SKIP() << "no CUDA device: the CUDA instance runs on the GPU machine"

inline const auto kDevices = ::testing::Values(Device::kCpu, Device::kCuda);
inline std::string DeviceLabel(Device device) { return device == Device::kCpu ? "Cpu" : "Cuda"; }

inline ModelOptions OptionsFor(Device device) {
  ModelOptions o;
  o.device = device;
  return o;
}

using testing::MaxRelDiff;  // tests/kernels/df11_test_util.h

inline int32_t Argmax(const std::vector<float>& logits, size_t row, int64_t vocab) {
  const float* r = logits.data() + row * vocab;
  return static_cast<int32_t>(std::max_element(r, r + vocab) - r);
}

constexpr int64_t kTestBlockSize = 4;

// Several sequences sharing one cache; sequence s owns blocks s, s + n, s + 2n, ... in reverse.
class TestBatch {
 public:
  TestBatch(Model& model, int64_t blocks_per_sequence, int64_t sequences)
      : model_(model),
        cache_(KvCache::Create(model.config(), blocks_per_sequence * sequences, kTestBlockSize,
                               model.load_report().device)
                   .value()),
        cached_(sequences, 0),
        tables_(sequences) {
    for (int64_t s = 0; s < sequences; ++s) {
      for (int64_t b = blocks_per_sequence - 1; b >= 0; --b) tables_[s].push_back(b * sequences + s);
    }
  }
  // One step with tokens[s] appended to sequence s (empty: s sits this step out). Logits of every
  // new token when all_logits, else of each sequence's last one.
  Status Run(const std::vector<std::vector<int32_t>>& tokens, bool all_logits, StepOutput* out = nullptr) {
    StepInput in;
    in.kv_cache = &cache_;
    for (size_t s = 0; s < tokens.size(); ++s) {
      if (tokens[s].empty()) continue;
      SequenceInput seq{tokens[s], cached_[s], tables_[s], {}, {}};
      for (size_t i = all_logits ? 0 : tokens[s].size() - 1; i < tokens[s].size(); ++i) seq.logits_for.push_back(i);
      in.sequences.push_back(std::move(seq));
    }
    StepOutput local;
    Status st = model_.Step(in, out ? *out : local);
    if (st.ok()) {
      for (size_t s = 0; s < tokens.size(); ++s) cached_[s] += tokens[s].size();
    }
    return st;
  }

 private:
  Model& model_;
  KvCache cache_;
  std::vector<int64_t> cached_;
  std::vector<std::vector<int32_t>> tables_;
};

class TestSession {
 public:
  TestSession(Model& model, int64_t blocks) : batch_(model, blocks, 1) {}
  std::vector<float> Prefill(const std::vector<int32_t>& tokens, bool all_logits) {
    StepOutput out;
    const Status st = batch_.Run({tokens}, all_logits, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out.logits;
  }
  std::vector<float> Decode(int32_t token) { return Prefill({token}, false); }

 private:
  TestBatch batch_;
};

}  // namespace df11
