// Checkpoint: DF11 unit discovery and weight lookup (see checkpoint.h).
#include "runtime/format/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/df11_codec.h"
#include "runtime/format/python_regex.h"

namespace df11 {
namespace {

using json = nlohmann::json;

constexpr const char* kUnitTensors[] = {"luts", "encoded_exponent", "sign_mantissa", "output_positions", "gaps",
                                        "split_positions"};

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

StatusOr<Df11Config> ParseDf11Config(const json& block, const std::string& source) {
  const std::string where = source + ": dfloat11_config";
  if (!block.is_object()) return InvalidArgument(where + ": expected an object");
  Df11Config cfg;
  if (block.contains("version")) {
    if (!block["version"].is_string()) return InvalidArgument(where + ".version: expected a string");
    cfg.version = block["version"].get<std::string>();
  }
  if (block.contains("bytes_per_thread")) {
    const json& b = block["bytes_per_thread"];
    if (!b.is_number_integer() || b.get<int64_t>() != kBytesPerWindow) {
      return InvalidArgument(where + ".bytes_per_thread: only 8 is defined by the format, got " + b.dump());
    }
  }
  if (block.contains("threads_per_block")) {
    const json& t = block["threads_per_block"];
    const json& v = t.is_array() && t.size() == 1 ? t[0] : t;
    if (!v.is_number_integer() || v.get<int64_t>() < 32 || v.get<int64_t>() > 1024 || v.get<int64_t>() % 32 != 0) {
      return InvalidArgument(where + ".threads_per_block: expected [N] with N a multiple of 32 in [32, 1024], got " +
                             t.dump());
    }
    cfg.threads_per_block = static_cast<int>(v.get<int64_t>());
  }
  if (!block.contains("pattern_dict") || !block["pattern_dict"].is_object()) {
    return InvalidArgument(where + ".pattern_dict: missing or not an object");
  }
  for (const auto& [pattern, attrs] : block["pattern_dict"].items()) {
    if (!attrs.is_array()) return InvalidArgument(where + ".pattern_dict[\"" + pattern + "\"]: expected a list");
    std::vector<std::string> list;
    for (const json& a : attrs) {
      if (!a.is_string() || a.get<std::string>().empty()) {
        return InvalidArgument(where + ".pattern_dict[\"" + pattern + "\"]: entries must be non-empty strings");
      }
      list.push_back(a.get<std::string>());
    }
    cfg.pattern_dict.emplace_back(pattern, std::move(list));
  }
  if (cfg.pattern_dict.empty()) return InvalidArgument(where + ".pattern_dict: empty");
  return cfg;
}

Status Checkpoint::CheckLayerCount() const {
  if (!architecture_known_) return Status::Ok();
  const ModelConfig& c = config_;
  const std::vector<std::string> names = store_.Names();
  const std::string config_path = dir_ + "/config.json";
  const std::string prefix = c.weight_prefix + "layers.";
  int64_t highest = -1;
  for (const std::string& name : names) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    int64_t index = 0;
    size_t i = prefix.size();
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && index <= kMaxLayers; ++i) index = index * 10 + (name[i] - '0');
    if (i > prefix.size()) highest = std::max(highest, index);
  }
  if (highest + 1 == c.num_layers) return Status::Ok();
  return InvalidArgument(config_path + ": num_hidden_layers is " + std::to_string(c.num_layers) +
                         " but the checkpoint's tensors " +
                         (highest < 0 ? "hold no " + prefix + "N layer"
                                      : "go up to " + prefix + std::to_string(highest) + " (" +
                                            std::to_string(highest + 1) + " layers)"));
}

StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir, const CheckpointOptions& options) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  const std::string config_path = dir + "/config.json";
  std::ifstream in(config_path);
  if (!in) return NotFound(config_path + ": cannot open (is " + dir + " a model directory?)");
  json config = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return InvalidArgument(config_path + ": not a JSON object");

  auto parsed = ParseModelConfig(config, config_path);
  if (parsed.ok()) {
    ckpt->config_ = std::move(parsed).value();
    ckpt->architecture_known_ = true;
  } else if (options.require_known_architecture) {
    return parsed.status();
  } else {
    ckpt->warnings_.push_back(parsed.status().message() + " (weights shown with flat shapes)");
  }
  if (config.contains("dfloat11_config")) {
    DF11_ASSIGN_OR_RETURN(ckpt->df11_, ParseDf11Config(config["dfloat11_config"], config_path));
  }
  DF11_ASSIGN_OR_RETURN(ckpt->store_, TensorStore::Open(dir));
  if (ckpt->architecture_known_) {
    DF11_RETURN_IF_ERROR(ResolveWeightNames(ckpt->config_, ckpt->store_.Names()).WithContext(dir));
    for (auto& spec : ExpectedWeights(ckpt->config_)) ckpt->expected_shapes_[spec.name] = spec.shape;
    // A tied model may carry an lm_head unit holding a copy of the embedding (the reference
    // encoder writes one); it has the embedding's shape.
    const ModelConfig& c = ckpt->config_;
    if (c.tie_word_embeddings) ckpt->expected_shapes_[c.lm_head_name] = ckpt->expected_shapes_[c.weight_prefix + "embed_tokens.weight"];
  }
  if (ckpt->df11_) DF11_RETURN_IF_ERROR(ckpt->FindUnits());
  return ckpt;
}

Status Checkpoint::FindUnits() {
  std::vector<std::pair<std::shared_ptr<const PythonRegex>, size_t>> patterns;
  for (size_t i = 0; i < df11_->pattern_dict.size(); ++i) {
    auto re = PythonRegex::Compile(df11_->pattern_dict[i].first);
    if (!re.ok()) return re.status().WithContext(dir_ + "/config.json: dfloat11_config.pattern_dict");
    patterns.emplace_back(std::move(re).value(), i);
  }
  const std::string suffix = ".encoded_exponent";
  std::vector<size_t> matches(patterns.size(), 0);
  for (const std::string& name : store_.Names()) {
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string path = name.substr(0, name.size() - suffix.size());
    int found = -1;
    for (size_t p = 0; p < patterns.size() && found < 0; ++p) {
      DF11_ASSIGN_OR_RETURN(bool m, patterns[p].first->FullMatch(path));
      if (m) found = static_cast<int>(p);
    }
    if (found < 0) {
      return InvalidArgument(dir_ + ": compressed unit '" + path + "' matches no pattern of dfloat11_config.pattern_dict");
    }
    ++matches[found];
    const auto& [pattern, attrs] = df11_->pattern_dict[found];
    DF11_RETURN_IF_ERROR(BuildUnit(path, pattern, attrs));
  }
  if (units_.empty()) {
    std::string list;
    for (const auto& [p, a] : df11_->pattern_dict) list += (list.empty() ? "" : ", ") + ("\"" + p + "\"");
    return InvalidArgument(dir_ + ": dfloat11_config.pattern_dict (" + list +
                           ") matches no compressed unit: no tensor named <module>.encoded_exponent");
  }
  for (size_t p = 0; p < patterns.size(); ++p) {
    if (matches[p] == 0) warnings_.push_back("pattern \"" + df11_->pattern_dict[p].first + "\" matches no unit");
  }
  return Status::Ok();
}

Status Checkpoint::BuildUnit(const std::string& path, const std::string& pattern, const std::vector<std::string>& attrs) {
  Df11Unit unit;
  unit.path = path;
  unit.pattern = pattern;
  std::map<std::string, std::span<const uint8_t>> parts;
  for (const char* t : kUnitTensors) {
    const std::string name = path + "." + t;
    const TensorStore::Entry e = store_.Find(name);
    if (e.file == nullptr) return DataLoss(dir_ + ": compressed unit '" + path + "' lacks tensor '" + name + "'");
    const DType want = std::string(t) == "split_positions" ? DType::kI64 : DType::kU8;
    if (e.info->dtype != want) {
      return DataLoss(e.file->path() + ": tensor '" + name + "' has dtype " + DTypeName(e.info->dtype) + ", expected " +
                      DTypeName(want));
    }
    parts[t] = store_.Data(e);
  }
  unit.view = UnitView{parts["luts"], parts["encoded_exponent"], parts["sign_mantissa"], parts["output_positions"],
                       parts["gaps"], df11_->threads_per_block};
  DF11_ASSIGN_OR_RETURN(unit.layout, ValidateUnit(unit.view, dir_ + ": " + path));

  // Weights: one per attribute path (or the module's own weight), split by split_positions.
  std::vector<std::string> names;
  if (attrs.empty()) names.push_back(path + ".weight");
  for (const auto& a : attrs) names.push_back(path + "." + a + ".weight");
  const auto split = parts["split_positions"];
  const size_t splits = split.size() / 8;
  if (splits != names.size() - 1) {
    return DataLoss(dir_ + ": '" + path + ".split_positions' has " + std::to_string(splits) + " entries; pattern \"" +
                    pattern + "\" lists " + std::to_string(names.size()) + " weights, so " +
                    std::to_string(names.size() - 1) + " are expected");
  }
  std::vector<uint64_t> bounds{0};
  for (size_t i = 0; i < splits; ++i) {
    int64_t v;
    std::memcpy(&v, split.data() + 8 * i, 8);
    if (v <= static_cast<int64_t>(bounds.back()) || static_cast<uint64_t>(v) >= unit.layout.num_elements) {
      return DataLoss(dir_ + ": '" + path + ".split_positions[" + std::to_string(i) + "]' = " + std::to_string(v) +
                      " is not strictly increasing inside (0, " + std::to_string(unit.layout.num_elements) + ")");
    }
    bounds.push_back(static_cast<uint64_t>(v));
  }
  bounds.push_back(unit.layout.num_elements);
  const std::map<std::string, std::vector<int64_t>>& shapes = expected_shapes_;
  for (size_t i = 0; i < names.size(); ++i) {
    UnitWeight w{names[i], {}, bounds[i], bounds[i + 1] - bounds[i]};
    if (architecture_known_) {
      auto it = shapes.find(names[i]);
      if (it == shapes.end()) {
        return InvalidArgument(dir_ + ": unit '" + path + "' holds '" + names[i] + "', which " + config_.architecture +
                               " does not have");
      }
      if (Numel(it->second) != static_cast<int64_t>(w.numel)) {
        return DataLoss(dir_ + ": unit '" + path + "': weight '" + names[i] + "' has " + std::to_string(w.numel) +
                        " elements but the config gives shape " + ShapeString(it->second));
      }
      w.shape = it->second;
    } else {
      w.shape = {static_cast<int64_t>(w.numel)};
    }
    unit.weights.push_back(std::move(w));
  }
  units_.push_back(std::move(unit));
  return Status::Ok();
}

StatusOr<Checkpoint::Location> Checkpoint::Locate(const std::string& name) const {
  for (const Df11Unit& u : units_) {
    for (const UnitWeight& w : u.weights) {
      if (w.name == name) return Location{&u, &w, {}};
    }
  }
  const TensorStore::Entry e = store_.Find(name);
  if (e.file != nullptr) return Location{nullptr, nullptr, e};
  return NotFound(dir_ + ": no weight named '" + name + "' (neither a plain tensor nor inside a DF11 unit)");
}

std::vector<std::string> Checkpoint::WeightNames() const {
  std::set<std::string> unit_tensors;
  std::vector<std::string> names;
  for (const Df11Unit& u : units_) {
    for (const char* t : kUnitTensors) unit_tensors.insert(u.path + "." + t);
    for (const UnitWeight& w : u.weights) names.push_back(w.name);
  }
  for (const std::string& n : store_.Names()) {
    if (!unit_tensors.count(n)) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<std::vector<uint16_t>> Checkpoint::ReadBf16(const std::string& name, int threads) const {
  DF11_ASSIGN_OR_RETURN(Location loc, Locate(name));
  if (loc.unit != nullptr) {
    std::vector<uint16_t> out(loc.weight->numel);
    DF11_RETURN_IF_ERROR(DecodeUnitCpu(loc.unit->view, loc.unit->layout, loc.weight->offset,
                                       loc.weight->offset + loc.weight->numel, out.data(), threads,
                                       dir_ + ": " + loc.unit->path));
    return out;
  }
  if (loc.plain.info->dtype != DType::kBF16) {
    return InvalidArgument(loc.plain.file->path() + ": tensor '" + name + "' is " + DTypeName(loc.plain.info->dtype) +
                           ", not BF16");
  }
  const auto bytes = store_.Data(loc.plain);
  std::vector<uint16_t> out(bytes.size() / 2);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace df11
