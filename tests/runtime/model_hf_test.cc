// The runtime against Hugging Face transformers on every device: tiny random models of every
// architecture (tests/fixtures/models/<arch>/, made by scripts/gpu/make_hf_fixtures.py), and Qwen3
// again with head dim 128 and a 160-token prompt (qwen3_hd128: on Hopper its prefill runs the wgmma
// attention kernel), with transformers' logits and greedy tokens in expected.json: the CPU (fp32)
// against transformers' fp32 CPU run, CUDA (bf16) against its bf16 GPU run. Each fixture runs with each of its config
// files (transformers 5 style config.json and 4.5x style config_v4.json), from BF16 and from a
// DF11 compression of it. A missing fixture FAILS: the fixtures are part of the test suite. CUDA
// instances skip without a GPU; on the GPU machine they print a [parity] line per run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "runtime/format/compress.h"
#include "runtime/model/model.h"
#include "tests/runtime/model_test_util.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The GPU machine runs a bundle built elsewhere: DF11_TEST_FIXTURES_DIR points at its checkout.
fs::path Fixtures() {
  const char* env = std::getenv("DF11_TEST_FIXTURES_DIR");
  return fs::path(env != nullptr ? env : DF11_TEST_FIXTURES) / "models";
}

// What a device is compared with: transformers' run of the same precision.
struct Reference {
  const char* logits;  // expected.json key of the logits rows
  const char* greedy;  // ... and of the greedy tokens
  double tolerance;    // max |ours - hf| / max |hf| per row
};
// CUDA logits follow FlashAttention's numerics (transformers' sdpa). A fixture recorded with eager
// attention (Gemma 3: sdpa does not apply its attention soft-cap) has bf16 logits rounded like the
// eager path, which CUDA no longer reproduces: its CUDA logits are checked against the fp32 run.
Reference ReferenceFor(Device device, const json& expected) {
  if (device == Device::kCpu) return {"logits_fp32_cpu", "greedy_fp32_cpu", 1e-2};
  const bool sdpa = expected.value("attention", "eager") == "sdpa";
  return {sdpa ? "logits_bf16_gpu" : "logits_fp32_cpu", "greedy_bf16_gpu", 2e-2};
}

class HfFixtureTest : public ::testing::TestWithParam<std::tuple<Device, std::string>> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_DEVICE(device());
    dir_ = Fixtures() / arch();
    ASSERT_TRUE(fs::is_regular_file(dir_ / "expected.json"))
        << dir_ << "/expected.json is missing: run scripts/gpu/make_hf_fixtures.py on a machine with "
        << "transformers and copy its --out directory to tests/fixtures/models/";
    std::ifstream(dir_ / "expected.json") >> expected_;
    tmp_ = fs::temp_directory_path() /
           ("df11_hf_" + std::to_string(::getpid()) + "_" + DeviceLabel(device()) + "_" + arch());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  Device device() const { return std::get<0>(GetParam()); }
  const std::string& arch() const { return std::get<1>(GetParam()); }

  // A directory holding the fixture's weights with `config_file` as its config.json.
  std::string WithConfig(const std::string& config_file) {
    const fs::path out = tmp_ / ("bf16-" + config_file);
    if (fs::exists(out)) return out.string();
    fs::create_directories(out);
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.path().extension() == ".safetensors" || entry.path().filename() == "model.safetensors.index.json") {
        fs::create_symlink(fs::absolute(entry.path()), out / entry.path().filename());
      }
    }
    fs::copy_file(dir_ / config_file, out / "config.json");
    return out.string();
  }

  // Prefill logits at the recorded positions and greedy tokens, checked against transformers.
  // Greedy tokens must equal its run for as long as its own bf16 GPU and fp32 CPU runs agree
  // (agreeing_steps); all recorded steps run so the log shows how far each one matches.
  void CheckAgainstTransformers(const std::string& dir, const std::string& label) {
    SCOPED_TRACE(label);
    const Reference ref = ReferenceFor(device(), expected_);
    auto model = Model::Load(dir, OptionsFor(device()));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const int64_t vocab = (*model)->config().vocab_size;
    const auto prompt = expected_["prompt"].get<std::vector<int32_t>>();
    const auto positions = expected_["logits_positions"].get<std::vector<int64_t>>();
    ASSERT_TRUE(expected_.contains(ref.logits)) << dir_ << ": no " << ref.logits;
    const auto want_logits = expected_[ref.logits].get<std::vector<std::vector<float>>>();
    ASSERT_EQ(positions.size(), want_logits.size());
    TestSession session(**model, 64);
    const auto all = session.Prefill(prompt, true);  // [prompt, vocab]
    ASSERT_EQ(all.size(), prompt.size() * vocab);
    for (size_t i = 0; i < positions.size(); ++i) {
      ASSERT_EQ(static_cast<int64_t>(want_logits[i].size()), vocab);
      EXPECT_LE(MaxRelDiff(&all[positions[i] * vocab], want_logits[i].data(), vocab), ref.tolerance)
          << "position " << positions[i];
    }
    const auto want_tokens = expected_[ref.greedy].get<std::vector<int32_t>>();
    const auto fp32_tokens = expected_["greedy_fp32_cpu"].get<std::vector<int32_t>>();
    const int64_t total = static_cast<int64_t>(want_tokens.size());
    const int64_t steps = std::min<int64_t>(total, expected_["agreeing_steps"].get<int64_t>());
    std::vector<int32_t> got;
    int32_t token = Argmax(all, prompt.size() - 1, vocab);
    for (int64_t s = 0; s < total; ++s) {
      got.push_back(token);
      if (s + 1 < total) token = Argmax(session.Decode(token), 0, vocab);
    }
    auto prefix = [&](const std::vector<int32_t>& want) {
      int64_t n = 0;
      while (n < total && n < static_cast<int64_t>(want.size()) && got[n] == want[n]) ++n;
      return n;
    };
    std::printf(
        "[parity] %s %s %s: greedy == transformers %s for %lld/%lld steps, == fp32 CPU for %lld "
        "(required %lld)\n",
        DeviceLabel(device()).c_str(), arch().c_str(), label.c_str(), ref.greedy,
        static_cast<long long>(prefix(want_tokens)), static_cast<long long>(total),
        static_cast<long long>(prefix(fp32_tokens)), static_cast<long long>(steps));
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + steps),
              std::vector<int32_t>(want_tokens.begin(), want_tokens.begin() + steps));
  }

  fs::path dir_, tmp_;
  json expected_;
};

TEST_P(HfFixtureTest, MatchesTransformers) {
  std::vector<std::string> configs = {"config.json"};
  if (expected_.contains("config_files")) configs = expected_["config_files"].get<std::vector<std::string>>();
  for (const std::string& config : configs) CheckAgainstTransformers(WithConfig(config), config + ", BF16");
  const std::string df11 = (tmp_ / "df11").string();
  auto report = CompressCheckpoint(WithConfig("config.json"), df11, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  CheckAgainstTransformers(df11, "config.json, DF11");
}

TEST(HfFixtures, DirectoryExists) {
  ASSERT_TRUE(fs::is_directory(Fixtures())) << Fixtures() << " is missing: run scripts/gpu/make_hf_fixtures.py";
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfFixtureTest,
                         ::testing::Combine(kDevices, ::testing::Values("llama", "mistral", "qwen2", "qwen3",
                                                                        "qwen3_hd128", "phi3", "gemma3")),
                         [](const auto& info) {
                           return DeviceLabel(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace df11
