// The CPU runtime against Hugging Face transformers: tiny random models of every architecture
// (tests/fixtures/models/<arch>/, made by scripts/gpu/make_hf_fixtures.py) with transformers'
// fp32 CPU logits and greedy tokens in expected.json. Each fixture runs with each of its config
// files (transformers 5 style config.json and 4.5x style config_v4.json), from BF16 and from a
// DF11 compression of it. A missing fixture FAILS: the fixtures are part of the test suite.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/format/compress.h"
#include "runtime/model/model.h"
#include "tests/runtime/model_test_util.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kFixtures = fs::path(DF11_TEST_FIXTURES) / "models";
constexpr double kLogitsTolerance = 1e-2;  // max |ours - hf| / max |hf| per row

// max_i |got_i - want_i| / max_i |want_i|
double RowRelError(const float* got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num = std::max(num, std::fabs(double(got[i]) - want[i]));
    den = std::max(den, std::fabs(double(want[i])));
  }
  return num / std::max(den, 1e-30);
}

class HfFixtureTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = kFixtures / GetParam();
    ASSERT_TRUE(fs::is_regular_file(dir_ / "expected.json"))
        << dir_ << "/expected.json is missing: run scripts/gpu/make_hf_fixtures.py on a machine with "
        << "transformers and copy its --out directory to tests/fixtures/models/";
    std::ifstream(dir_ / "expected.json") >> expected_;
    tmp_ = fs::temp_directory_path() / ("df11_hf_" + std::to_string(::getpid()) + "_" + GetParam());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }

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
  void CheckAgainstTransformers(const std::string& dir, const std::string& label) {
    SCOPED_TRACE(label);
    auto model = Model::Load(dir);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const int64_t vocab = (*model)->config().vocab_size;
    const auto prompt = expected_["prompt"].get<std::vector<int32_t>>();
    const auto positions = expected_["logits_positions"].get<std::vector<int64_t>>();
    const auto want_logits = expected_["logits_fp32_cpu"].get<std::vector<std::vector<float>>>();
    ASSERT_EQ(positions.size(), want_logits.size());
    TestSession session(**model, 64);
    const auto all = session.Prefill(prompt, true);  // [prompt, vocab]
    for (size_t i = 0; i < positions.size(); ++i) {
      ASSERT_EQ(static_cast<int64_t>(want_logits[i].size()), vocab);
      EXPECT_LE(RowRelError(&all[positions[i] * vocab], want_logits[i]), kLogitsTolerance)
          << "position " << positions[i];
    }
    const auto want_tokens = expected_["greedy_fp32_cpu"].get<std::vector<int32_t>>();
    const int64_t steps = std::min<int64_t>(want_tokens.size(), expected_["agreeing_steps"].get<int64_t>());
    std::vector<int32_t> got;
    int32_t token = Argmax(all, prompt.size() - 1, vocab);
    for (int64_t s = 0; s < steps; ++s) {
      got.push_back(token);
      if (s + 1 < steps) token = Argmax(session.Decode(token), 0, vocab);
    }
    EXPECT_EQ(got, std::vector<int32_t>(want_tokens.begin(), want_tokens.begin() + steps));
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
  ASSERT_TRUE(fs::is_directory(kFixtures)) << kFixtures << " is missing: run scripts/gpu/make_hf_fixtures.py";
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfFixtureTest,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma3"));

}  // namespace
}  // namespace df11
