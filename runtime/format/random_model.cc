// Random-weight checkpoints (see random_model.h).
#include "runtime/format/random_model.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "kernels/base/parallel.h"
#include "kernels/cpu_ops.h"
#include "runtime/format/compress_units.h"
#include "runtime/format/model_config.h"
#include "runtime/format/safetensors.h"

namespace df11 {
namespace {

using json = nlohmann::json;

json Preset(const std::string& name) {
  const json tiny = {{"vocab_size", 512}, {"hidden_size", 64}, {"intermediate_size", 160},
                     {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                     {"max_position_embeddings", 2048}, {"rms_norm_eps", 1e-6}, {"torch_dtype", "bfloat16"},
                     {"hidden_act", "silu"}, {"bos_token_id", 1}, {"eos_token_id", 2}};
  json c = tiny;
  if (name == "qwen3-tiny") {
    c.update({{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"head_dim", 32},
              {"rope_theta", 1000000.0}, {"tie_word_embeddings", false}, {"attention_bias", false}});
  } else if (name == "llama-tiny") {
    c.update({{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"rope_theta", 500000.0},
              {"tie_word_embeddings", true},
              {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 256}}}});
  } else if (name == "qwen2-tiny") {
    c.update({{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"}, {"rope_theta", 10000.0},
              {"tie_word_embeddings", false}, {"use_sliding_window", false}, {"sliding_window", 4096}});
  } else if (name == "mistral-tiny") {
    c.update({{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"head_dim", 24},
              {"rope_theta", 1000000.0}, {"tie_word_embeddings", false}, {"sliding_window", nullptr}});
  } else if (name == "phi3-tiny") {
    c.update({{"architectures", {"Phi3ForCausalLM"}}, {"model_type", "phi3"}, {"rope_theta", 250000.0},
              {"tie_word_embeddings", false}, {"sliding_window", nullptr}});
  } else if (name == "gemma3-tiny") {
    c.update({{"architectures", {"Gemma3ForCausalLM"}}, {"model_type", "gemma3_text"}, {"head_dim", 32},
              {"hidden_activation", "gelu_pytorch_tanh"}, {"query_pre_attn_scalar", 32},
              {"sliding_window", 16}, {"sliding_window_pattern", 2}, {"rope_theta", 1000000.0},
              {"rope_local_base_freq", 10000.0}, {"tie_word_embeddings", true}, {"num_hidden_layers", 4}});
    c.erase("hidden_act");
  } else if (name == "gemma3-mm-tiny") {
    // Gemma 3 as published (-it models): the multimodal class with the text model nested, tensors
    // under "language_model.model." (transformers 4.5x naming) and a vision tower kept plain.
    json text = Preset("gemma3-tiny");
    text.erase("architectures");
    c = {{"architectures", {"Gemma3ForConditionalGeneration"}}, {"model_type", "gemma3"},
         {"text_config", text}, {"vision_config", {{"model_type", "siglip_vision_model"}, {"hidden_size", 32}}},
         {"torch_dtype", "bfloat16"}};
  } else if (name == "qwen3-32b") {
    c.update({{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"vocab_size", 151936},
              {"hidden_size", 5120}, {"intermediate_size", 25600}, {"num_hidden_layers", 64},
              {"num_attention_heads", 64}, {"num_key_value_heads", 8}, {"head_dim", 128},
              {"max_position_embeddings", 40960}, {"rope_theta", 1000000.0}, {"tie_word_embeddings", false}});
  } else if (name == "qwen3-8b-2layers" || name == "qwen3-8b") {
    c.update({{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"vocab_size", 151936},
              {"hidden_size", 4096}, {"intermediate_size", 12288}, {"num_hidden_layers", name == "qwen3-8b" ? 36 : 2},
              {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"head_dim", 128},
              {"max_position_embeddings", 40960}, {"rope_theta", 1000000.0}, {"tie_word_embeddings", false}});
  } else {
    return nullptr;
  }
  return c;
}

std::vector<uint8_t> RandomTensor(int64_t n, bool is_norm, float stddev, uint32_t seed) {
  std::vector<uint8_t> bytes(n * 2);
  ParallelFor((n + 65535) / 65536, 0, [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b) {
      std::mt19937 rng(seed * 7919u + static_cast<uint32_t>(b));
      std::normal_distribution<float> dist(is_norm ? 1.0f : 0.0f, is_norm ? 0.05f : stddev);
      for (int64_t i = b * 65536; i < std::min(n, (b + 1) * 65536); ++i) {
        const uint16_t v = cpu::FloatToBf16(dist(rng));
        bytes[2 * i] = static_cast<uint8_t>(v);
        bytes[2 * i + 1] = static_cast<uint8_t>(v >> 8);
      }
    }
  });
  return bytes;
}

// The BF16 bytes of one weight of `spec`'s shape (norms near 1, the rest Gaussian).
std::vector<uint8_t> RandomWeight(const WeightSpec& spec, float stddev, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : spec.shape) n *= d;
  return RandomTensor(n, spec.kind == TensorKind::kNorm, stddev, seed);
}

// DF11 directly: each unit's weights (and its module's other tensors) generated, compressed and
// written before the next unit's are made. Tensor i of `specs` gets seed options.seed + 1 + i, as
// in a one-shard BF16 checkpoint.
Status WriteDf11(const json& config, const ModelConfig& mc, const std::vector<WeightSpec>& specs, const std::string& dir,
                 const RandomModelOptions& options) {
  std::map<std::string, size_t> index;  // name -> spec
  std::vector<std::string> names;
  for (size_t i = 0; i < specs.size(); ++i) {
    index[specs[i].name] = i;
    names.push_back(specs[i].name);
  }
  std::sort(names.begin(), names.end());  // TensorStore::Names order
  std::map<std::string, std::vector<uint8_t>> made;  // the tensors of the unit being written
  const TensorSource source = [&](const std::string& name) {
    const size_t i = index.at(name);
    auto it = made.find(name);
    if (it == made.end()) {
      it = made.emplace(name, RandomWeight(specs[i], options.stddev, options.seed + 1 + static_cast<uint32_t>(i))).first;
    }
    return SourceTensor{DType::kBF16, specs[i].shape, it->second};
  };
  const PatternDict patterns = Df11PatternDict(mc);
  DF11_ASSIGN_OR_RETURN(auto plan, PlanUnits(names, mc, patterns, dir));
  OtherTensors other = PlaceOtherTensors(names, plan);
  std::vector<std::string> warnings;
  for (const PlannedUnit& unit : plan) {
    DF11_RETURN_IF_ERROR(CompressUnit(source, unit, dir, other.extras[unit.path], options.threads, warnings).status());
    made.clear();
  }
  DF11_RETURN_IF_ERROR(WriteRestTensors(source, other.rest, dir));
  return WriteDf11Config(config, dir, patterns);
}

}  // namespace

std::vector<std::string> RandomModelPresets() {
  return {"qwen3-tiny", "llama-tiny", "qwen2-tiny", "mistral-tiny", "phi3-tiny", "gemma3-tiny", "gemma3-mm-tiny", "qwen3-8b-2layers", "qwen3-8b", "qwen3-32b"};
}

Status WriteRandomModel(const std::string& preset, const std::string& dir, const RandomModelOptions& options) {
  json config = Preset(preset);
  if (config.is_null()) return NotFound("unknown random-model preset '" + preset + "'");
  if (options.vocab_size > 0) {
    json& target = config.contains("text_config") ? config["text_config"] : config;
    target["vocab_size"] = options.vocab_size;
  }
  DF11_ASSIGN_OR_RETURN(ModelConfig mc, ParseModelConfig(config, preset));
  std::error_code ec;
  if (options.df11 && std::filesystem::exists(dir) && !std::filesystem::is_empty(dir, ec)) {
    return InvalidArgument(dir + ": exists and is not empty");
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgument(dir + ": cannot create: " + ec.message());
  auto specs = ExpectedWeights(mc);
  if (mc.architecture == "Gemma3ForConditionalGeneration") {
    specs.push_back({"vision_tower.vision_model.embeddings.patch_embedding.weight", {32, 3, 4, 4}});
  }
  if (options.df11) return WriteDf11(config, mc, specs, dir, options);
  {
    std::ofstream out(dir + "/config.json");
    out << config.dump(2) << "\n";
    if (!out) return Internal(dir + "/config.json: write failed");
  }
  const int shards = std::max(1, options.shards);
  json weight_map = json::object();
  uint32_t seed = options.seed;
  for (int s = 0; s < shards; ++s) {
    SafetensorsWriter w;
    char file[64];
    std::snprintf(file, sizeof(file), "model-%05d-of-%05d.safetensors", s + 1, shards);
    const std::string name = shards == 1 ? "model.safetensors" : file;
    for (size_t i = s; i < specs.size(); i += shards) {
      w.Add(specs[i].name, DType::kBF16, specs[i].shape, RandomWeight(specs[i], options.stddev, ++seed));
      weight_map[specs[i].name] = name;
    }
    DF11_RETURN_IF_ERROR(w.Write(dir + "/" + name));
  }
  if (shards > 1) {
    std::ofstream out(dir + "/model.safetensors.index.json");
    out << json{{"metadata", json::object()}, {"weight_map", weight_map}}.dump(2) << "\n";
  }
  return Status::Ok();
}

}  // namespace df11
