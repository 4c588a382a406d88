// ModelConfig: every seed model's published config.json (tests/fixtures/configs) parses to the
// right flags, sizes, rope and layer kinds; transformers 4.5x and 5 spellings of one model give
// the same ModelConfig; weight names/shapes and DF11 pattern dicts match the checkpoints; every
// bad input is INVALID_ARGUMENT naming file and field.
#include "runtime/format/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace df11 {
namespace {

using Json = nlohmann::json;

std::string FixturePath(const std::string& name) { return std::string(DF11_TEST_FIXTURES) + "/configs/" + name; }

Json ReadFixtureJson(const std::string& name) {
  std::ifstream in(FixturePath(name));
  return Json::parse(in);
}

// Loads a fixture; on failure the test fails with the status and gets a default ModelConfig.
ModelConfig Load(const std::string& name) {
  StatusOr<ModelConfig> config = LoadModelConfigFile(FixturePath(name));
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : ModelConfig{};
}

// Parses fixture `name` after `edit`, as if read from a file named "config.json".
Status ParseEdited(const std::string& name, const std::function<void(Json&)>& edit) {
  Json config = ReadFixtureJson(name);
  edit(config);
  return ParseModelConfig(config, "config.json").status();
}

void ExpectInvalid(const Status& status, const std::string& expected_substring) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.message().find(expected_substring), std::string::npos)
      << "message: " << status.message() << "\nexpected to contain: " << expected_substring;
}

int64_t TotalParameters(const std::vector<WeightSpec>& weights) {
  int64_t total = 0;
  for (const WeightSpec& w : weights) {
    int64_t n = 1;
    for (int64_t d : w.shape) n *= d;
    total += n;
  }
  return total;
}

const WeightSpec* FindWeight(const std::vector<WeightSpec>& weights, const std::string& name) {
  for (const WeightSpec& w : weights) {
    if (w.name == name) return &w;
  }
  return nullptr;
}

std::vector<int64_t> ShapeOf(const std::vector<WeightSpec>& weights, const std::string& name) {
  const WeightSpec* w = FindWeight(weights, name);
  EXPECT_NE(w, nullptr) << name;
  return w ? w->shape : std::vector<int64_t>{};
}

std::vector<int64_t> GlobalLayers(const ModelConfig& c) {
  std::vector<int64_t> global;
  for (size_t i = 0; i < c.layer_is_sliding.size(); ++i) {
    if (!c.layer_is_sliding[i]) global.push_back(static_cast<int64_t>(i));
  }
  return global;
}

using PatternMap = std::map<std::string, std::vector<std::string>>;
PatternMap AsMap(const PatternDict& dict) { return PatternMap(dict.begin(), dict.end()); }

// ---- Each seed model ----------------------------------------------------------------------

TEST(ModelConfigTest, Qwen3_8B) {
  const ModelConfig c = Load("Qwen3-8B.json");
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 12288);
  EXPECT_EQ(c.num_layers, 36);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias || c.fused_qkv || c.fused_gate_up || c.sandwich_norms || c.norm_adds_one);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_DOUBLE_EQ(c.embedding_scale, 1.0);
  EXPECT_DOUBLE_EQ(c.attention_scale, 1.0 / std::sqrt(128.0));
  EXPECT_EQ(c.rope.type, "default");
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.rope_local, c.rope);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.layer_is_sliding, std::vector<bool>(36, false));
  EXPECT_EQ(c.weight_prefix, "model.");
  EXPECT_EQ(c.lm_head_name, "lm_head.weight");
}

TEST(ModelConfigTest, Qwen3_4BTiesEmbeddings) {
  const ModelConfig c = Load("Qwen3-4B.json");
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.intermediate_size, 9728);
  EXPECT_EQ(c.head_dim, 128);  // != 2560 / 32
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST(ModelConfigTest, Llama31_8BUsesLlama3Rope) {
  const ModelConfig c = Load("Llama-3.1-8B-Instruct.json");
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // absent: 4096 / 32
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FALSE(c.qk_norm || c.qkv_bias);
  EXPECT_EQ(c.rope.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rope.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.rope_local, c.rope);
  EXPECT_EQ(c.sliding_window, 0);
}

TEST(ModelConfigTest, MistralNemoHeadDimAndNullSlidingWindow) {
  const ModelConfig c = Load("Mistral-Nemo-Instruct-2407.json");
  EXPECT_EQ(c.arch, Arch::kMistral);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.head_dim, 128);  // != 5120 / 32 = 160
  EXPECT_EQ(c.num_layers, 40);
  EXPECT_EQ(c.vocab_size, 131072);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.sliding_window, 0);  // "sliding_window": null
  EXPECT_EQ(c.layer_is_sliding, std::vector<bool>(40, false));
  EXPECT_DOUBLE_EQ(c.attention_scale, 1.0 / std::sqrt(128.0));
}

TEST(ModelConfigTest, MistralWithWindowSlidesEveryLayer) {
  Json config = ReadFixtureJson("Mistral-Nemo-Instruct-2407.json");
  config["sliding_window"] = 4096;
  StatusOr<ModelConfig> c = ParseModelConfig(config, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_EQ(c->layer_is_sliding, std::vector<bool>(40, true));
  // MistralConfig's default (key absent) is a 4096 window.
  config.erase("sliding_window");
  c = ParseModelConfig(config, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sliding_window, 4096);
}

TEST(ModelConfigTest, DeepSeekR1DistillQwen7BHasQkvBiasAndNoActiveWindow) {
  const ModelConfig c = Load("DeepSeek-R1-Distill-Qwen-7B.json");
  EXPECT_EQ(c.arch, Arch::kQwen2);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.hidden_size, 3584);
  EXPECT_EQ(c.num_heads, 28);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 152064);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_EQ(c.sliding_window, 0);  // sliding_window 4096 but use_sliding_window false
  EXPECT_EQ(c.layer_is_sliding, std::vector<bool>(28, false));
}

TEST(ModelConfigTest, Qwen2UseSlidingWindowAppliesFromMaxWindowLayers) {
  Json config = ReadFixtureJson("DeepSeek-R1-Distill-Qwen-7B.json");
  config["use_sliding_window"] = true;
  config["max_window_layers"] = 20;
  StatusOr<ModelConfig> c = ParseModelConfig(config, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sliding_window, 4096);
  for (int64_t i = 0; i < 28; ++i) EXPECT_EQ(c->layer_is_sliding[i], i >= 20) << i;
}

TEST(ModelConfigTest, Phi4IsFused) {
  const ModelConfig c = Load("phi-4.json");
  EXPECT_EQ(c.arch, Arch::kPhi3);
  EXPECT_TRUE(c.fused_qkv);
  EXPECT_TRUE(c.fused_gate_up);
  EXPECT_FALSE(c.qkv_bias || c.qk_norm);
  EXPECT_EQ(c.num_heads, 40);
  EXPECT_EQ(c.num_kv_heads, 10);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 100352);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope.theta, 250000.0);
  EXPECT_DOUBLE_EQ(c.rope.partial_rotary_factor, 1.0);
  EXPECT_EQ(c.sliding_window, 0);
}

TEST(ModelConfigTest, PartialRotaryFactorIsRead) {
  const Status bad = ParseEdited("phi-4.json", [](Json& j) { j["partial_rotary_factor"] = 1.5; });
  ExpectInvalid(bad, "config.json: partial_rotary_factor:");
  Json config = ReadFixtureJson("phi-4.json");
  config["partial_rotary_factor"] = 0.75;
  StatusOr<ModelConfig> c = ParseModelConfig(config, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->rope.partial_rotary_factor, 0.75);
}

void ExpectGemma3_4B(const ModelConfig& c) {
  EXPECT_EQ(c.architecture, "Gemma3ForConditionalGeneration");
  EXPECT_EQ(c.arch, Arch::kGemma3);
  EXPECT_EQ(c.model_type, "gemma3_text");
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.intermediate_size, 10240);
  EXPECT_EQ(c.num_layers, 34);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm && c.sandwich_norms && c.norm_adds_one);
  EXPECT_FALSE(c.qkv_bias || c.fused_qkv || c.fused_gate_up);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_DOUBLE_EQ(c.embedding_scale, std::sqrt(2560.0));
  EXPECT_DOUBLE_EQ(c.attention_scale, 1.0 / 16.0);  // 1/sqrt(query_pre_attn_scalar = 256)
  EXPECT_EQ(c.rope.type, "linear");
  EXPECT_DOUBLE_EQ(c.rope.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.rope_local, (RopeConfig{.theta = 10000.0}));
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(GlobalLayers(c), (std::vector<int64_t>{5, 11, 17, 23, 29}));
  EXPECT_EQ(c.weight_prefix, "language_model.model.");
  EXPECT_EQ(c.lm_head_name, "language_model.lm_head.weight");
}

TEST(ModelConfigTest, Gemma3_4B) { ExpectGemma3_4B(Load("gemma-3-4b-it.json")); }

TEST(ModelConfigTest, Gemma3_4BSparseConfigGetsGemma3TextConfigDefaults) {
  // google/gemma-3-4b-it as published: heads, head_dim, vocab, rope_theta etc. are class defaults.
  const Json sparse = Json::parse(R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0"})");
  StatusOr<ModelConfig> c = ParseModelConfig(sparse, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, Load("gemma-3-4b-it.json"));
}

TEST(ModelConfigTest, Gemma3_27BSparse) {
  const ModelConfig c = Load("gemma-3-27b-it.json");
  EXPECT_EQ(c.arch, Arch::kGemma3);
  EXPECT_EQ(c.vocab_size, 262208);  // default
  EXPECT_EQ(c.hidden_size, 5376);
  EXPECT_EQ(c.num_layers, 62);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 16);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.max_position_embeddings, 131072);  // default
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);        // default
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");  // default
  EXPECT_TRUE(c.tie_word_embeddings);            // default
  EXPECT_DOUBLE_EQ(c.attention_scale, 1.0 / std::sqrt(168.0));
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);  // default
  EXPECT_EQ(c.rope.type, "linear");
  EXPECT_DOUBLE_EQ(c.rope_local.theta, 10000.0);  // default
  EXPECT_EQ(c.final_logit_softcapping, 0.0);
  EXPECT_EQ(c.attn_logit_softcapping, 0.0);
  EXPECT_EQ(GlobalLayers(c), (std::vector<int64_t>{5, 11, 17, 23, 29, 35, 41, 47, 53, 59}));
}

TEST(ModelConfigTest, Gemma3TextOnlyCausalLM) {
  Json config = ReadFixtureJson("gemma-3-4b-it.json")["text_config"];
  config["architectures"] = {"Gemma3ForCausalLM"};
  config["sliding_window_pattern"] = 2;
  StatusOr<ModelConfig> c = ParseModelConfig(config, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Arch::kGemma3);
  EXPECT_EQ(c->weight_prefix, "model.");
  EXPECT_EQ(GlobalLayers(*c).size(), 17u);  // layers 1, 3, ..., 33
  EXPECT_FALSE(c->layer_is_sliding[1]);
  EXPECT_TRUE(c->layer_is_sliding[0]);
}

// ---- transformers 4.5x and 5 spell the same model ------------------------------------------

TEST(ModelConfigTest, Transformers5GemmaEqualsTransformers4) {
  const ModelConfig v5 = Load("gemma-3-4b-it.tf5.json");
  ExpectGemma3_4B(v5);
  EXPECT_EQ(v5, Load("gemma-3-4b-it.json"));
}

TEST(ModelConfigTest, Transformers5LlamaEqualsTransformers4) {
  const ModelConfig v5 = Load("Llama-3.1-8B-Instruct.tf5.json");
  EXPECT_EQ(v5.rope.type, "llama3");
  EXPECT_DOUBLE_EQ(v5.rope.theta, 500000.0);
  EXPECT_EQ(v5, Load("Llama-3.1-8B-Instruct.json"));
}

TEST(ModelConfigTest, LegacyRopeTypeKeyAndDefaultType) {
  Json config = ReadFixtureJson("Llama-3.1-8B-Instruct.json");
  config["rope_scaling"].erase("rope_type");
  config["rope_scaling"]["type"] = "llama3";
  StatusOr<ModelConfig> c = ParseModelConfig(config, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, Load("Llama-3.1-8B-Instruct.json"));
  config["rope_scaling"] = {{"rope_type", "default"}};
  c = ParseModelConfig(config, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope.type, "default");
}

TEST(ModelConfigTest, HeadDimNullDefaultsToHiddenOverHeads) {
  Json config = ReadFixtureJson("Qwen3-8B.json");
  config["head_dim"] = nullptr;
  config.erase("num_key_value_heads");
  StatusOr<ModelConfig> c = ParseModelConfig(config, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->num_kv_heads, 32);
}

TEST(ModelConfigTest, LoadModelConfigReadsDirectory) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "df11_model_config_test";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(FixturePath("Qwen3-8B.json"), dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  StatusOr<ModelConfig> c = LoadModelConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, Load("Qwen3-8B.json"));
  std::filesystem::remove_all(dir);
  EXPECT_EQ(LoadModelConfig(dir.string()).status().code(), StatusCode::kNotFound);
}

// ---- Weights -----------------------------------------------------------------------------

TEST(ModelConfigTest, ExpectedWeightsQwen3_8B) {
  const std::vector<WeightSpec> w = ExpectedWeights(Load("Qwen3-8B.json"));
  EXPECT_EQ(w.size(), 1u + 36 * 11 + 1 + 1);  // embed, 36 x (2 norms, q/k/v/o, q/k norm, 3 mlp), norm, lm_head
  EXPECT_EQ(w.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(w.front().shape, (std::vector<int64_t>{151936, 4096}));
  EXPECT_EQ(ShapeOf(w, "model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(ShapeOf(w, "model.layers.0.self_attn.k_proj.weight"), (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(ShapeOf(w, "model.layers.35.self_attn.o_proj.weight"), (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(ShapeOf(w, "model.layers.7.self_attn.q_norm.weight"), (std::vector<int64_t>{128}));
  EXPECT_EQ(ShapeOf(w, "model.layers.7.mlp.down_proj.weight"), (std::vector<int64_t>{4096, 12288}));
  EXPECT_EQ(w.back().name, "lm_head.weight");
  EXPECT_EQ(TotalParameters(w), 8190735360);
}

TEST(ModelConfigTest, ExpectedWeightsLlama31_8B) {
  const std::vector<WeightSpec> w = ExpectedWeights(Load("Llama-3.1-8B-Instruct.json"));
  EXPECT_EQ(w.size(), 1u + 32 * 9 + 1 + 1);
  EXPECT_EQ(FindWeight(w, "model.layers.0.self_attn.q_norm.weight"), nullptr);
  EXPECT_EQ(ShapeOf(w, "model.layers.31.mlp.gate_proj.weight"), (std::vector<int64_t>{14336, 4096}));
  EXPECT_EQ(TotalParameters(w), 8030261248);
}

TEST(ModelConfigTest, ExpectedWeightsTiedHasNoLmHead) {
  const std::vector<WeightSpec> w = ExpectedWeights(Load("Qwen3-4B.json"));
  EXPECT_EQ(w.back().name, "model.norm.weight");
  EXPECT_EQ(FindWeight(w, "lm_head.weight"), nullptr);
}

TEST(ModelConfigTest, ExpectedWeightsQwen2Biases) {
  const std::vector<WeightSpec> w = ExpectedWeights(Load("DeepSeek-R1-Distill-Qwen-7B.json"));
  EXPECT_EQ(w.size(), 1u + 28 * 12 + 1 + 1);
  EXPECT_EQ(ShapeOf(w, "model.layers.3.self_attn.q_proj.bias"), (std::vector<int64_t>{3584}));
  EXPECT_EQ(ShapeOf(w, "model.layers.3.self_attn.k_proj.bias"), (std::vector<int64_t>{512}));
  EXPECT_EQ(ShapeOf(w, "model.layers.3.self_attn.v_proj.bias"), (std::vector<int64_t>{512}));
  EXPECT_EQ(FindWeight(w, "model.layers.3.self_attn.o_proj.bias"), nullptr);
  // 7.6B: embed + lm_head 2 x 152064 x 3584, 28 layers of 233,057,792.
  EXPECT_EQ(TotalParameters(w), 2 * 152064LL * 3584 + 28 * 233057792LL + 3584);
}

TEST(ModelConfigTest, ExpectedWeightsPhi4Fused) {
  const std::vector<WeightSpec> w = ExpectedWeights(Load("phi-4.json"));
  EXPECT_EQ(w.size(), 1u + 40 * 6 + 1 + 1);
  EXPECT_EQ(ShapeOf(w, "model.layers.0.self_attn.qkv_proj.weight"), (std::vector<int64_t>{(40 + 2 * 10) * 128, 5120}));
  EXPECT_EQ(ShapeOf(w, "model.layers.0.mlp.gate_up_proj.weight"), (std::vector<int64_t>{2 * 17920, 5120}));
  EXPECT_EQ(FindWeight(w, "model.layers.0.self_attn.q_proj.weight"), nullptr);
  EXPECT_EQ(TotalParameters(w), 14659507200);
}

TEST(ModelConfigTest, ExpectedWeightsGemma3SandwichNorms) {
  const std::vector<WeightSpec> w = ExpectedWeights(Load("gemma-3-27b-it.json"));
  EXPECT_EQ(w.size(), 1u + 62 * 13 + 1);  // tied: no lm_head
  EXPECT_EQ(w.front().name, "language_model.model.embed_tokens.weight");
  EXPECT_EQ(ShapeOf(w, "language_model.model.layers.61.self_attn.q_proj.weight"), (std::vector<int64_t>{4096, 5376}));
  EXPECT_EQ(ShapeOf(w, "language_model.model.layers.61.self_attn.k_proj.weight"), (std::vector<int64_t>{2048, 5376}));
  EXPECT_EQ(ShapeOf(w, "language_model.model.layers.0.self_attn.k_norm.weight"), (std::vector<int64_t>{128}));
  EXPECT_EQ(ShapeOf(w, "language_model.model.layers.0.pre_feedforward_layernorm.weight"), (std::vector<int64_t>{5376}));
  EXPECT_EQ(ShapeOf(w, "language_model.model.layers.0.post_feedforward_layernorm.weight"),
            (std::vector<int64_t>{5376}));
  EXPECT_EQ(w.back().name, "language_model.model.norm.weight");
}

TEST(ModelConfigTest, ResolveWeightNamesFindsEachLayout) {
  ModelConfig c = Load("gemma-3-4b-it.json");
  ASSERT_TRUE(ResolveWeightNames(c, {"vision_tower.x", "model.language_model.embed_tokens.weight"}).ok());
  EXPECT_EQ(c.weight_prefix, "model.language_model.");
  EXPECT_EQ(c.lm_head_name, "lm_head.weight");
  ASSERT_TRUE(ResolveWeightNames(c, {"language_model.model.embed_tokens.encoded_exponent"}).ok());  // DF11 unit
  EXPECT_EQ(c.weight_prefix, "language_model.model.");
  EXPECT_EQ(c.lm_head_name, "language_model.lm_head.weight");
  ASSERT_TRUE(ResolveWeightNames(c, {"lm_head.weight", "model.embed_tokens.weight"}).ok());
  EXPECT_EQ(c.weight_prefix, "model.");
  EXPECT_EQ(c.lm_head_name, "lm_head.weight");
  EXPECT_EQ(ExpectedWeights(c).front().name, "model.embed_tokens.weight");
  const Status missing = ResolveWeightNames(c, {"model.embed_tokens.sign_mantissa", "embed_tokens.weight"});
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find("model.embed_tokens.weight"), std::string::npos) << missing.message();
}

TEST(ModelConfigTest, Df11PatternDictMatchesPublishedConfigs) {
  for (const char* name : {"Qwen3-8B.json", "Llama-3.1-8B-Instruct.json", "phi-4.json"}) {
    const Json published = ReadFixtureJson(name)["dfloat11_config"]["pattern_dict"];
    EXPECT_EQ(AsMap(Df11PatternDict(Load(name))), published.get<PatternMap>()) << name;
  }
  const PatternDict qwen = Df11PatternDict(Load("Qwen3-8B.json"));
  ASSERT_EQ(qwen.size(), 3u);
  EXPECT_EQ(qwen[0].first, "model\\.embed_tokens");
  EXPECT_EQ(qwen[1].first, "model\\.layers\\.\\d+");
  EXPECT_EQ(qwen[1].second,
            (std::vector<std::string>{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                      "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}));
  EXPECT_EQ(qwen[2].first, "lm_head");
}

TEST(ModelConfigTest, Df11PatternDictTiedAndNestedPrefixes) {
  // Tied models list lm_head too: the reference package needs an lm_head unit (a copy of the
  // embedding) or it runs the head with an uninitialised weight.
  EXPECT_EQ(AsMap(Df11PatternDict(Load("Qwen3-4B.json"))).count("lm_head"), 1u);
  ModelConfig gemma = Load("gemma-3-4b-it.json");
  PatternDict dict = Df11PatternDict(gemma);
  ASSERT_EQ(dict.size(), 3u);
  EXPECT_EQ(dict[0].first, "language_model\\.model\\.embed_tokens");
  EXPECT_EQ(dict[1].first, "language_model\\.model\\.layers\\.\\d+");
  EXPECT_EQ(dict[2].first, "language_model\\.lm_head");
  gemma.tie_word_embeddings = false;
  ASSERT_TRUE(ResolveWeightNames(gemma, {"model.language_model.embed_tokens.weight"}).ok());
  dict = Df11PatternDict(gemma);
  ASSERT_EQ(dict.size(), 3u);
  EXPECT_EQ(dict[1].first, "model\\.language_model\\.layers\\.\\d+");
  EXPECT_EQ(dict[2].first, "lm_head");
}

// ---- Errors name the file and the field --------------------------------------------------------

TEST(ModelConfigTest, UnsupportedRopeType) {
  ExpectInvalid(ParseEdited("Llama-3.1-8B-Instruct.json", [](Json& j) { j["rope_scaling"]["rope_type"] = "yarn"; }),
                "config.json: rope_scaling.rope_type: unsupported value \"yarn\"");
  ExpectInvalid(
      ParseEdited("gemma-3-27b-it.json", [](Json& j) { j["text_config"]["rope_scaling"]["rope_type"] = "dynamic"; }),
      "config.json: text_config.rope_scaling.rope_type: unsupported value \"dynamic\"");
  ExpectInvalid(
      ParseEdited("gemma-3-4b-it.tf5.json",
                  [](Json& j) { j["text_config"]["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; }),
      "text_config.rope_parameters.full_attention.rope_type: unsupported value \"yarn\"");
  ExpectInvalid(ParseEdited("Llama-3.1-8B-Instruct.json", [](Json& j) { j["rope_scaling"].erase("low_freq_factor"); }),
                "config.json: rope_scaling.low_freq_factor: missing required key");
  ExpectInvalid(ParseEdited("Qwen3-8B.json",
                            [](Json& j) {
                              j["rope_scaling"] = {{"rope_type", "linear"}};
                            }),
                "config.json: rope_scaling.factor: missing required key");
}

TEST(ModelConfigTest, UnknownArchitecture) {
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["architectures"] = {"Qwen3MoeForCausalLM"}; }),
                "config.json: architectures[0]: unsupported architecture \"Qwen3MoeForCausalLM\"");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j.erase("architectures"); }),
                "config.json: architectures: missing required key");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["architectures"] = Json::array(); }),
                "config.json: architectures: must not be empty");
  ExpectInvalid(ParseModelConfig(Json::array(), "config.json").status(), "config.json: expected a JSON object");
}

TEST(ModelConfigTest, UnsupportedActivation) {
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["hidden_act"] = "gelu"; }),
                "config.json: hidden_act: unsupported value \"gelu\"");
  ExpectInvalid(ParseEdited("gemma-3-4b-it.json", [](Json& j) { j["text_config"]["hidden_activation"] = "relu"; }),
                "config.json: text_config.hidden_activation: unsupported value \"relu\"");
}

TEST(ModelConfigTest, MissingKeyWrongTypeAndBadSizes) {
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j.erase("hidden_size"); }),
                "config.json: hidden_size: missing required key");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["vocab_size"] = nullptr; }),
                "config.json: vocab_size: missing required key");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["hidden_size"] = "4096"; }),
                "config.json: hidden_size: expected an integer, got string");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["num_hidden_layers"] = 36.5; }),
                "config.json: num_hidden_layers: expected an integer, got 36.5");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["tie_word_embeddings"] = 1; }),
                "config.json: tie_word_embeddings: expected a boolean, got number");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["rope_scaling"] = "linear"; }),
                "config.json: rope_scaling: expected an object, got string");
  ExpectInvalid(ParseEdited("gemma-3-4b-it.json", [](Json& j) { j["text_config"] = 5; }),
                "config.json: text_config: expected an object, got number");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["num_hidden_layers"] = 0; }),
                "config.json: num_hidden_layers: must be positive, got 0");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["intermediate_size"] = -1; }),
                "config.json: intermediate_size: must be positive");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["head_dim"] = 0; }),
                "config.json: head_dim: must be positive");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["rope_theta"] = -1; }),
                "config.json: rope_theta: must be in (0, 1e12], got -1");
  ExpectInvalid(ParseEdited("gemma-3-4b-it.json", [](Json& j) { j["text_config"]["query_pre_attn_scalar"] = 0; }),
                "config.json: text_config.query_pre_attn_scalar: must be positive");
  ExpectInvalid(ParseEdited("Llama-3.1-8B-Instruct.json",
                            [](Json& j) {
                              j["hidden_size"] = 4100;
                              j.erase("head_dim");
                            }),
                "config.json: head_dim: absent and hidden_size 4100 is not a multiple of num_attention_heads 32");
  ExpectInvalid(ParseEdited("Llama-3.1-8B-Instruct.json", [](Json& j) { j["attention_bias"] = true; }),
                "config.json: attention_bias: unsupported value true");
}

// Every value that sizes an allocation or a loop is bounded before it is used (a hostile
// config.json must not make a load allocate without bound).
TEST(ModelConfigTest, SizesAboveTheSupportedMaximumAreRefused) {
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["num_hidden_layers"] = 1000000000; }),
                "config.json: num_hidden_layers: 1000000000 is above the supported maximum 1024");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["vocab_size"] = int64_t{1} << 40; }),
                "config.json: vocab_size: 1099511627776 is above the supported maximum 4194304");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["hidden_size"] = 1 << 20; }),
                "config.json: hidden_size: 1048576 is above the supported maximum 65536");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["intermediate_size"] = 1 << 30; }),
                "config.json: intermediate_size: 1073741824 is above the supported maximum 262144");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["num_attention_heads"] = 4096; }),
                "config.json: num_attention_heads: 4096 is above the supported maximum 1024");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["head_dim"] = 65536; }),
                "config.json: head_dim: 65536 is above the supported maximum 1024");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["max_position_embeddings"] = int64_t{1} << 62; }),
                "config.json: max_position_embeddings: 4611686018427387904 is above the supported maximum 16777216");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["rope_theta"] = 1e300; }),
                "config.json: rope_theta: must be in (0, 1e12]");
  ExpectInvalid(ParseEdited("Llama-3.1-8B-Instruct.json", [](Json& j) { j["rope_scaling"]["factor"] = 1e20; }),
                "config.json: rope_scaling.factor: must be in (0, 1e12]");
  ExpectInvalid(ParseEdited("Qwen3-8B.json", [](Json& j) { j["rms_norm_eps"] = 5; }),
                "config.json: rms_norm_eps: must be in (0, 1)");
  ExpectInvalid(ParseEdited("gemma-3-4b-it.json", [](Json& j) { j["text_config"]["sliding_window"] = int64_t{1} << 40; }),
                "config.json: text_config.sliding_window: 1099511627776 is above the supported maximum 16777216");
}

TEST(ModelConfigTest, HeadsNotDivisibleByKvHeads) {
  ExpectInvalid(ParseEdited("phi-4.json", [](Json& j) { j["num_key_value_heads"] = 6; }),
                "config.json: num_key_value_heads: num_attention_heads 40 is not a multiple of num_key_value_heads 6");
  ExpectInvalid(ParseEdited("phi-4.json", [](Json& j) { j["num_key_value_heads"] = 0; }),
                "config.json: num_key_value_heads: must be positive");
}

TEST(ModelConfigTest, BadLayerKinds) {
  ExpectInvalid(
      ParseEdited("gemma-3-4b-it.tf5.json", [](Json& j) { j["text_config"]["layer_types"][3] = "chunked_attention"; }),
      "config.json: text_config.layer_types[3]: unsupported value \"chunked_attention\"");
  ExpectInvalid(ParseEdited("gemma-3-4b-it.tf5.json", [](Json& j) { j["text_config"]["num_hidden_layers"] = 30; }),
                "config.json: text_config.layer_types: has 34 entries, num_hidden_layers is 30");
  ExpectInvalid(ParseEdited("gemma-3-4b-it.json", [](Json& j) { j["text_config"]["sliding_window_pattern"] = 0; }),
                "config.json: text_config.sliding_window_pattern: must be positive");
  ExpectInvalid(ParseEdited("gemma-3-4b-it.json", [](Json& j) { j["text_config"]["sliding_window"] = nullptr; }),
                "config.json: text_config.sliding_window: must be positive when layers use sliding-window attention");
}

TEST(ModelConfigTest, LoadErrorsNameThePath) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "df11_model_config_bad.json";
  std::ofstream(path) << "{\"architectures\": [\"LlamaForCausalLM\"], ";
  const Status truncated = LoadModelConfigFile(path.string()).status();
  ExpectInvalid(truncated, path.string() + ": invalid JSON");
  std::filesystem::remove(path);
  const Status missing = LoadModelConfigFile(path.string()).status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find(path.string()), std::string::npos) << missing.message();
}

}  // namespace
}  // namespace df11
