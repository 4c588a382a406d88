// DF11 checkpoints end to end on the CPU: compress random models of every architecture, read
// them back through the DF11 reader, and every malformed-directory case with its message.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/format/checkpoint.h"
#include "runtime/format/compress.h"
#include "runtime/format/random_model.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("df11_ckpt_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string Path(const std::string& name) const { return (root_ / name).string(); }

  // Random BF16 model + its DF11 compression.
  void MakePair(const std::string& preset, int shards = 1) {
    RandomModelOptions o;
    o.shards = shards;
    ASSERT_TRUE(WriteRandomModel(preset, Path("bf16"), o).ok());
    auto r = CompressCheckpoint(Path("bf16"), Path("df11"), {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    report_ = std::move(r).value();
  }
  json ReadConfig(const std::string& dir) {
    std::ifstream in(Path(dir) + "/config.json");
    return json::parse(in);
  }
  void WriteConfig(const std::string& dir, const json& c) { std::ofstream(Path(dir) + "/config.json") << c.dump(); }

  fs::path root_;
  CompressReport report_;
};

TEST_F(CheckpointTest, EveryArchitectureRoundTrips) {
  for (const std::string preset : {"qwen3-tiny", "llama-tiny", "qwen2-tiny", "mistral-tiny", "phi3-tiny", "gemma3-tiny",
                                   "gemma3-mm-tiny"}) {
    SCOPED_TRACE(preset);
    fs::remove_all(Path("bf16"));
    fs::remove_all(Path("df11"));
    MakePair(preset);
    auto bf16 = Checkpoint::Open(Path("bf16"));
    auto df11 = Checkpoint::Open(Path("df11"));
    ASSERT_TRUE(bf16.ok() && df11.ok()) << df11.status().ToString();
    EXPECT_FALSE((*bf16)->is_df11());
    EXPECT_TRUE((*df11)->is_df11());
    const auto& cfg = (*df11)->config();
    // embed + layers + lm_head are units (a tied head as a copy of the embedding, as the
    // reference package needs); norms stay plain.
    EXPECT_EQ((*df11)->units().size(), static_cast<size_t>(cfg.num_layers + 2));
    auto names = (*bf16)->WeightNames();
    if (cfg.tie_word_embeddings) {
      names.push_back(cfg.lm_head_name);
      std::sort(names.begin(), names.end());
    }
    EXPECT_EQ((*df11)->WeightNames(), names);
    for (const auto& name : names) {
      const std::string source = cfg.tie_word_embeddings && name == cfg.lm_head_name
                                     ? cfg.weight_prefix + "embed_tokens.weight" : name;
      auto a = (*bf16)->ReadBf16(source);
      auto b = (*df11)->ReadBf16(name);
      ASSERT_TRUE(a.ok() && b.ok()) << name << ": " << b.status().ToString();
      ASSERT_EQ(*a, *b) << name;
    }
    // A tied model's file also holds the lm_head copy of the embedding.
    const uint64_t copy = cfg.tie_word_embeddings ? 2 * cfg.vocab_size * cfg.hidden_size : 0;
    EXPECT_LT(report_.df11_bytes, (report_.bf16_bytes + copy) * 0.75);
  }
}

TEST_F(CheckpointTest, LayerUnitMapsWeightsInPatternOrderWithShapes) {
  MakePair("qwen3-tiny");
  auto df11 = Checkpoint::Open(Path("df11"));
  ASSERT_TRUE(df11.ok());
  const Df11Unit* layer = nullptr;
  for (const auto& u : (*df11)->units()) {
    if (u.path == "model.layers.1") layer = &u;
  }
  ASSERT_NE(layer, nullptr);
  ASSERT_EQ(layer->weights.size(), 7u);
  EXPECT_EQ(layer->weights[0].name, "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(layer->weights[0].shape, (std::vector<int64_t>{int64_t{4} * 32, 64}));
  EXPECT_EQ(layer->weights[1].name, "model.layers.1.self_attn.k_proj.weight");
  EXPECT_EQ(layer->weights[1].offset, 128u * 64);
  EXPECT_EQ(layer->weights[6].name, "model.layers.1.mlp.down_proj.weight");
  EXPECT_EQ(layer->weights[6].offset + layer->weights[6].numel, layer->layout.num_elements);
  // Published file layout: a file per unit, named after the module path.
  EXPECT_TRUE(fs::exists(Path("df11") + "/model_layers_1.safetensors"));
  EXPECT_TRUE(fs::exists(Path("df11") + "/model.safetensors"));
  const json dfc = ReadConfig("df11")["dfloat11_config"];
  EXPECT_EQ(dfc["bytes_per_thread"], 8);
  EXPECT_EQ(dfc["threads_per_block"], json::array({512}));
  EXPECT_TRUE(dfc["pattern_dict"].contains("model\\.layers\\.\\d+"));
}

TEST_F(CheckpointTest, Gemma3MultimodalPrefix) {
  MakePair("gemma3-mm-tiny");
  auto df11 = Checkpoint::Open(Path("df11"));
  ASSERT_TRUE(df11.ok()) << df11.status().ToString();
  EXPECT_EQ((*df11)->config().weight_prefix, "language_model.model.");
  std::vector<std::string> paths;
  for (const auto& u : (*df11)->units()) paths.push_back(u.path);
  EXPECT_NE(std::find(paths.begin(), paths.end(), "language_model.model.layers.3"), paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "language_model.model.embed_tokens"), paths.end());
  auto loc = (*df11)->Locate("vision_tower.vision_model.embeddings.patch_embedding.weight");
  ASSERT_TRUE(loc.ok());
  EXPECT_EQ(loc->unit, nullptr);  // the vision tower stays plain BF16
  const json dict = ReadConfig("df11")["dfloat11_config"]["pattern_dict"];
  EXPECT_TRUE(dict.contains("language_model\\.model\\.layers\\.\\d+")) << dict.dump();
}

TEST_F(CheckpointTest, ShardedSourceWithIndex) {
  MakePair("llama-tiny", 3);
  EXPECT_TRUE(fs::exists(Path("bf16") + "/model.safetensors.index.json"));
  EXPECT_TRUE(Checkpoint::Open(Path("df11")).ok());
}

TEST_F(CheckpointTest, LoaderIgnoresFileNames) {
  MakePair("qwen3-tiny");
  fs::rename(Path("df11") + "/model_layers_0.safetensors", Path("df11") + "/zz-renamed.safetensors");
  fs::rename(Path("df11") + "/model.safetensors", Path("df11") + "/aa.safetensors");
  auto df11 = Checkpoint::Open(Path("df11"));
  ASSERT_TRUE(df11.ok()) << df11.status().ToString();
  EXPECT_TRUE((*df11)->ReadBf16("model.layers.0.mlp.up_proj.weight").ok());
}

TEST_F(CheckpointTest, InfinityKeepsTheUnitPlainWithAWarning) {
  ASSERT_TRUE(WriteRandomModel("qwen3-tiny", Path("bf16"), {}).ok());
  // Patch one weight of layer 0 to +inf in place (exponent 255).
  auto store = TensorStore::Open(Path("bf16"));
  ASSERT_TRUE(store.ok());
  const auto e = store->Find("model.layers.0.mlp.up_proj.weight");
  const uint64_t offset = e.info->offset + uint64_t{2} * 17;
  const std::string file = e.file->path();
  store = TensorStore();  // unmap before writing
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    const char inf[2] = {static_cast<char>(0x80), static_cast<char>(0x7F)};
    f.write(inf, 2);
  }
  auto r = CompressCheckpoint(Path("bf16"), Path("df11"), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("model.layers.0.mlp.up_proj.weight' element 17 has exponent 255"), std::string::npos)
      << r->warnings[0];
  auto df11 = Checkpoint::Open(Path("df11"));
  ASSERT_TRUE(df11.ok()) << df11.status().ToString();
  auto w = (*df11)->ReadBf16("model.layers.0.mlp.up_proj.weight");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)[17], 0x7F80);
  auto loc = (*df11)->Locate("model.layers.1.mlp.up_proj.weight");
  ASSERT_TRUE(loc.ok());
  EXPECT_NE(loc->unit, nullptr) << "other layers stay compressed";
}

void ExpectOpenError(const std::string& dir, const std::string& needle) {
  auto c = Checkpoint::Open(dir);
  ASSERT_FALSE(c.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().ToString();
}

TEST_F(CheckpointTest, BadDirectories) {
  MakePair("qwen3-tiny");
  ExpectOpenError(Path("missing"), "config.json");
  json c = ReadConfig("df11");
  c["architectures"] = {"FooForCausalLM"};
  WriteConfig("df11", c);
  ExpectOpenError(Path("df11"), "FooForCausalLM");

  c = ReadConfig("bf16");
  c["dfloat11_config"] = ReadConfig("df11")["dfloat11_config"];
  c["dfloat11_config"]["pattern_dict"] = {{"nothing\\.here", json::array()}};
  WriteConfig("df11", c);
  ExpectOpenError(Path("df11"), "matches no pattern");  // units exist but no pattern covers them

  // A BF16 checkpoint claiming to be DF11: the pattern_dict matches no compressed unit.
  json b = ReadConfig("bf16");
  b["dfloat11_config"] = ReadConfig("df11")["dfloat11_config"];
  WriteConfig("bf16", b);
  ExpectOpenError(Path("bf16"), "matches no compressed unit");

  c["dfloat11_config"]["bytes_per_thread"] = 4;
  WriteConfig("df11", c);
  ExpectOpenError(Path("df11"), "bytes_per_thread");

  c["dfloat11_config"]["bytes_per_thread"] = 8;
  c["dfloat11_config"]["pattern_dict"] = {{"model\\.layers\\.(\\d+", json::array()}};
  WriteConfig("df11", c);
  ExpectOpenError(Path("df11"), "regex");
}

TEST_F(CheckpointTest, PatternDictMatchingNoUnit) {
  MakePair("qwen3-tiny");
  // Copy only the plain tensors: no unit remains.
  fs::create_directories(Path("bare"));
  fs::copy_file(Path("df11") + "/config.json", Path("bare") + "/config.json");
  fs::copy_file(Path("df11") + "/model.safetensors", Path("bare") + "/model.safetensors");
  // model.safetensors holds only norms; the embedding is gone, so name resolution fails first
  // unless the embedding unit stays: keep it.
  fs::copy_file(Path("df11") + "/model_embed_tokens.safetensors", Path("bare") + "/e.safetensors");
  json c = ReadConfig("bare");
  c["dfloat11_config"]["pattern_dict"] = {{"model\\.embed_tokens", json::array()}, {"lm_head", json::array()}};
  WriteConfig("bare", c);
  auto ok = Checkpoint::Open(Path("bare"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_FALSE((*ok)->warnings().empty());  // "lm_head" matched no unit: a warning, not an error
  fs::remove(Path("bare") + "/e.safetensors");
  ExpectOpenError(Path("bare"), "embed_tokens");
}

TEST_F(CheckpointTest, InconsistentUnitTensors) {
  MakePair("qwen3-tiny");
  // Rewrite layer 0's file with a truncated split_positions and a mistyped gaps tensor.
  auto rewrite = [&](const std::function<void(const std::string&, const TensorInfo&, std::span<const uint8_t>,
                                              SafetensorsWriter&)>& edit) {
    const std::string file = Path("df11") + "/model_layers_0.safetensors";
    std::vector<std::pair<TensorInfo, std::vector<uint8_t>>> tensors;
    {
      auto f = SafetensorsFile::Open(file);
      ASSERT_TRUE(f.ok());
      for (const auto& t : (*f)->tensors()) {
        auto d = (*f)->Data(t);
        tensors.emplace_back(t, std::vector<uint8_t>(d.begin(), d.end()));
      }
    }
    SafetensorsWriter w;
    for (auto& [t, d] : tensors) edit(t.name, t, d, w);
    ASSERT_TRUE(w.Write(file).ok());
  };
  rewrite([](const std::string& name, const TensorInfo& t, std::span<const uint8_t> d, SafetensorsWriter& w) {
    if (name.ends_with("split_positions")) {
      w.Add(name, t.dtype, {static_cast<int64_t>(t.shape[0] - 1)}, std::vector<uint8_t>(d.begin(), d.end() - 8));
    } else {
      w.Add(name, t.dtype, t.shape, std::vector<uint8_t>(d.begin(), d.end()));
    }
  });
  ExpectOpenError(Path("df11"), "split_positions");
  fs::remove_all(Path("df11"));
  MakePair("qwen3-tiny");
  rewrite([](const std::string& name, const TensorInfo& t, std::span<const uint8_t> d, SafetensorsWriter& w) {
    if (name.ends_with(".gaps")) {
      w.Add(name, DType::kI8, t.shape, std::vector<uint8_t>(d.begin(), d.end()));
    } else {
      w.Add(name, t.dtype, t.shape, std::vector<uint8_t>(d.begin(), d.end()));
    }
  });
  ExpectOpenError(Path("df11"), "model.layers.0.gaps' has dtype I8");
  fs::remove_all(Path("df11"));
  MakePair("qwen3-tiny");
  rewrite([](const std::string& name, const TensorInfo& t, std::span<const uint8_t> d, SafetensorsWriter& w) {
    if (!name.ends_with(".luts")) w.Add(name, t.dtype, t.shape, std::vector<uint8_t>(d.begin(), d.end()));
  });
  ExpectOpenError(Path("df11"), "lacks tensor 'model.layers.0.luts'");
}

TEST_F(CheckpointTest, CorruptStreamIsCaughtByDecoding) {
  MakePair("qwen3-tiny");
  const std::string file = Path("df11") + "/model_layers_1.safetensors";
  uint64_t offset = 0;
  {
    auto f = SafetensorsFile::Open(file);
    ASSERT_TRUE(f.ok());
    offset = (*f)->Find("model.layers.1.encoded_exponent")->offset;
  }
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset + 100));
    const char junk[16] = {'\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff',
                           '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff'};
    f.write(junk, 16);
  }
  auto df11 = Checkpoint::Open(Path("df11"));
  ASSERT_TRUE(df11.ok()) << "structure is intact: " << df11.status().ToString();
  auto w = (*df11)->ReadBf16("model.layers.1.self_attn.q_proj.weight");
  // 128 one-bits decode as long codes: the chunk yields fewer codes than output_positions claims,
  // or the values differ; either way the weights do not come back as written.
  auto orig = Checkpoint::Open(Path("bf16"));
  auto want = (*orig)->ReadBf16("model.layers.1.self_attn.q_proj.weight");
  EXPECT_TRUE(!w.ok() || *w != *want);
  if (!w.ok()) {
    EXPECT_EQ(w.status().code(), StatusCode::kDataLoss);
  }
}

// The direct DF11 writer (random-model --df11) against the two-step path it replaces: every
// file, config.json included, byte for byte equal to compressing the one-shard BF16 checkpoint.
TEST_F(CheckpointTest, RandomModelWrittenAsDf11EqualsCompressedBf16) {
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (const std::string preset : {"qwen3-tiny", "llama-tiny", "qwen2-tiny", "mistral-tiny", "phi3-tiny", "gemma3-tiny",
                                   "gemma3-mm-tiny"}) {
    SCOPED_TRACE(preset);
    for (const char* d : {"bf16", "df11", "direct"}) fs::remove_all(Path(d));
    RandomModelOptions o;
    o.seed = 7;
    ASSERT_TRUE(WriteRandomModel(preset, Path("bf16"), o).ok());
    ASSERT_TRUE(CompressCheckpoint(Path("bf16"), Path("df11"), {}).ok());
    o.df11 = true;
    const Status direct = WriteRandomModel(preset, Path("direct"), o);
    ASSERT_TRUE(direct.ok()) << direct.ToString();
    std::vector<std::string> want, got;
    for (const auto& e : fs::directory_iterator(Path("df11"))) want.push_back(e.path().filename().string());
    for (const auto& e : fs::directory_iterator(Path("direct"))) got.push_back(e.path().filename().string());
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got, want);
    EXPECT_GE(want.size(), 4u);  // config, model.safetensors, embedding, layers
    for (const std::string& name : want) EXPECT_EQ(read(Path("direct") + "/" + name), read(Path("df11") + "/" + name)) << name;
  }
  // Another seed gives other weights; a non-empty directory is refused before anything is written.
  RandomModelOptions other;
  other.df11 = true;
  other.seed = 7;
  ASSERT_TRUE(WriteRandomModel("qwen3-tiny", Path("seven"), other).ok());
  other.seed = 8;
  ASSERT_TRUE(WriteRandomModel("qwen3-tiny", Path("other"), other).ok());
  const std::string seven = read(Path("seven") + "/model_layers_0.safetensors");
  ASSERT_GT(seven.size(), 1000u);
  EXPECT_NE(read(Path("other") + "/model_layers_0.safetensors"), seven);
  const Status again = WriteRandomModel("qwen3-tiny", Path("other"), other);
  EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.message().find("not empty"), std::string::npos) << again.ToString();
}

TEST_F(CheckpointTest, CompressRefusals) {
  MakePair("qwen3-tiny");
  auto again = CompressCheckpoint(Path("df11"), Path("x"), {});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already a DF11"), std::string::npos);
  auto nonempty = CompressCheckpoint(Path("bf16"), Path("df11"), {});
  ASSERT_FALSE(nonempty.ok());
  EXPECT_NE(nonempty.status().message().find("not empty"), std::string::npos);
}

// The real CLI: compress -> inspect -> verify, and verify's verdict on a changed weight.
TEST_F(CheckpointTest, CliRoundTripAndVerifyVerdict) {
  const std::string cli = DF11_CLI_PATH;
  auto run = [&](const std::string& args) { return std::system((cli + " " + args + " > " + Path("out.txt") + " 2>&1").c_str()); };
  ASSERT_EQ(run("random-model mistral-tiny " + Path("bf16")), 0);
  ASSERT_EQ(run("compress " + Path("bf16") + " " + Path("df11")), 0);
  ASSERT_EQ(run("inspect --json " + Path("df11")), 0);
  std::ifstream in(Path("out.txt"));
  const json inspect = json::parse(in);
  EXPECT_EQ(inspect["units"].size(), 4u);
  EXPECT_GT(inspect["model_ratio"].get<double>(), 0.6);
  EXPECT_LT(inspect["model_ratio"].get<double>(), 0.75);
  ASSERT_EQ(run("verify " + Path("df11") + " " + Path("bf16")), 0);
  // Flip one sign bit in the DF11 copy: verify must fail and name the weight.
  const std::string file = Path("df11") + "/model_layers_1.safetensors";
  uint64_t offset = 0;
  {
    auto f = SafetensorsFile::Open(file);
    offset = (*f)->Find("model.layers.1.sign_mantissa")->offset;
  }
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset + 5));
    char b;
    f.read(&b, 1);
    b ^= static_cast<char>(0x80);
    f.seekp(static_cast<std::streamoff>(offset + 5));
    f.write(&b, 1);
  }
  EXPECT_NE(run("verify " + Path("df11") + " " + Path("bf16")), 0);
  std::ifstream msg(Path("out.txt"));
  std::string text((std::istreambuf_iterator<char>(msg)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("model.layers.1.self_attn.q_proj.weight' element 5 (row 0, col 5) differs"), std::string::npos)
      << text;
  EXPECT_NE(run("inspect " + Path("nowhere")), 0);
}

}  // namespace
}  // namespace df11
