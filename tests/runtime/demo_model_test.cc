// The committed demo model (deploy/demo-model: a Llama trained by scripts/gpu/train_demo_model.py,
// compressed to DF11) against the reference recorded by transformers when it was trained
// (reference.json): our tokenizer encodes each prompt to the same ids, our CPU runtime's greedy
// tokens from the DF11 weights equal transformers' fp32 CPU greedy tokens for at least as many
// steps as transformers' own fp32-CPU and bf16-GPU runs agree, and our decode of those ids equals
// the text transformers decoded.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/model/model.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/runtime/model_test_util.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
const fs::path kDemo = fs::path(DF11_TEST_FIXTURES) / ".." / ".." / "deploy" / "demo-model";

TEST(DemoModel, MatchesTransformersReference) {
  nlohmann::json reference;
  std::ifstream(kDemo / "reference.json") >> reference;
  ASSERT_TRUE(reference.contains("prompts")) << kDemo << "/reference.json missing or malformed";
  auto tokenizer = Tokenizer::Load(kDemo.string());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  auto model = Model::Load(kDemo.string());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE((*model)->checkpoint().is_df11());
  const int64_t vocab = (*model)->config().vocab_size;
  const int64_t steps = reference["steps"].get<int64_t>();

  for (const auto& p : reference["prompts"]) {
    const std::string prompt = p["prompt"].get<std::string>();
    SCOPED_TRACE(prompt);
    const auto prompt_ids = p["prompt_ids"].get<std::vector<int32_t>>();
    auto encoded = (*tokenizer)->Encode(prompt, true);
    ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
    EXPECT_EQ(*encoded, prompt_ids);

    const auto want = p["greedy_fp32_cpu"]["ids"].get<std::vector<int32_t>>();
    const int64_t agreeing = p["agreeing_steps"].get<int64_t>();
    ASSERT_EQ(static_cast<int64_t>(want.size()), steps);
    ASSERT_GT(agreeing, 0);
    TestSession session(**model, (static_cast<int64_t>(prompt_ids.size()) + steps) / kTestBlockSize + 1);
    std::vector<float> logits = session.Prefill(prompt_ids, false);
    std::vector<int32_t> got;
    for (int64_t s = 0; s < steps; ++s) {
      got.push_back(Argmax(logits, 0, vocab));
      if (s + 1 < steps) logits = session.Decode(got.back());
    }
    for (int64_t s = 0; s < agreeing; ++s) ASSERT_EQ(got[s], want[s]) << "greedy step " << s;
    EXPECT_EQ((*tokenizer)->Decode(want, true), p["greedy_fp32_cpu"]["text"].get<std::string>());
  }
}

}  // namespace
}  // namespace df11
