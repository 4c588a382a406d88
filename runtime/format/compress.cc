// DF11 compression pipeline (see compress.h).
#include "runtime/format/compress.h"
#include "runtime/format/compress_units.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/df11_codec.h"
#include "runtime/format/checkpoint.h"
#include "runtime/format/python_regex.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Module paths: every proper dotted prefix of a tensor name ("a.b.c.weight" -> a, a.b, a.b.c).
std::set<std::string> ModulePaths(const std::vector<std::string>& names) {
  std::set<std::string> paths;
  for (const auto& n : names) {
    for (size_t dot = n.find('.'); dot != std::string::npos; dot = n.find('.', dot + 1)) paths.insert(n.substr(0, dot));
  }
  return paths;
}

std::vector<uint8_t> I64Bytes(const std::vector<int64_t>& v) {
  std::vector<uint8_t> b(v.size() * 8);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Copies a tensor into the writer (by view: the source outlives the write).
void AddPlain(SafetensorsWriter& w, const TensorSource& source, const std::string& name) {
  SourceTensor t = source(name);
  w.AddView(name, t.dtype, std::move(t.shape), t.bytes);
}

}  // namespace

StatusOr<std::vector<PlannedUnit>> PlanUnits(const std::vector<std::string>& names, const ModelConfig& config,
                                             const PatternDict& patterns, const std::string& where) {
  const std::set<std::string> present(names.begin(), names.end());
  std::vector<PlannedUnit> plan;
  for (const auto& [pattern, attrs] : patterns) {
    DF11_ASSIGN_OR_RETURN(auto re, PythonRegex::Compile(pattern));
    for (const std::string& path : ModulePaths(names)) {
      DF11_ASSIGN_OR_RETURN(bool match, re->FullMatch(path));
      if (!match) continue;
      PlannedUnit unit{path, {}};
      if (attrs.empty()) unit.weights.push_back(path + ".weight");
      for (const auto& a : attrs) unit.weights.push_back(path + "." + a + ".weight");
      for (const auto& w : unit.weights) {
        if (!present.contains(w)) return NotFound(where + ": unit '" + path + "' needs tensor '" + w + "', absent");
      }
      plan.push_back(std::move(unit));
    }
  }
  // A tied lm_head has no tensor of its own; the reference package still needs its unit (see
  // Df11PatternDict), so it gets a copy of the embedding.
  const std::string head = config.lm_head_name.substr(0, config.lm_head_name.size() - 7);  // minus ".weight"
  const bool planned = std::any_of(plan.begin(), plan.end(), [&](const PlannedUnit& u) { return u.path == head; });
  if (config.tie_word_embeddings && !planned && !present.contains(config.lm_head_name)) {
    for (const auto& [pattern, attrs] : patterns) {
      DF11_ASSIGN_OR_RETURN(auto re, PythonRegex::Compile(pattern));
      DF11_ASSIGN_OR_RETURN(bool match, re->FullMatch(head));
      if (match && attrs.empty()) plan.push_back({head, {config.weight_prefix + "embed_tokens.weight"}});
    }
  }
  // Natural order: layers by number, so progress reads 0, 1, 2, ...
  auto key = [](const std::string& p) {
    const size_t d = p.find_last_of('.');
    const std::string tail = d == std::string::npos ? p : p.substr(d + 1);
    const bool numeric = !tail.empty() && tail.find_first_not_of("0123456789") == std::string::npos;
    return std::make_tuple(numeric ? p.substr(0, d) : p, numeric ? std::stoll(tail) : -1LL);
  };
  std::sort(plan.begin(), plan.end(), [&](const auto& a, const auto& b) { return key(a.path) < key(b.path); });
  return plan;
}

OtherTensors PlaceOtherTensors(const std::vector<std::string>& names, const std::vector<PlannedUnit>& plan) {
  std::set<std::string> placed;
  for (const auto& u : plan) placed.insert(u.weights.begin(), u.weights.end());
  OtherTensors other;
  for (const auto& name : names) {
    if (placed.contains(name)) continue;
    const PlannedUnit* owner = nullptr;
    for (const auto& u : plan) {
      if (name.starts_with(u.path + ".")) owner = &u;
    }
    if (owner != nullptr) other.extras[owner->path].push_back(name); else other.rest.push_back(name);
  }
  return other;
}

StatusOr<CompressedUnitReport> CompressUnit(const TensorSource& source, const PlannedUnit& unit, const std::string& dst,
                                            const std::vector<std::string>& extras, int threads,
                                            std::vector<std::string>& warnings) {
  std::vector<uint16_t> words;
  std::vector<int64_t> splits;
  for (const auto& w : unit.weights) {
    const auto bytes = source(w).bytes;
    const size_t old = words.size();
    words.resize(old + bytes.size() / 2);
    std::memcpy(words.data() + old, bytes.data(), bytes.size());
    splits.push_back(static_cast<int64_t>(words.size()));
  }
  splits.pop_back();
  CompressedUnitReport report{unit.path, words.size(), 0, false};
  SafetensorsWriter writer;
  for (const auto& name : extras) AddPlain(writer, source, name);
  auto enc = EncodeUnit(words, threads);
  if (!enc.ok()) {
    // Exponents >= 240: find the weight that holds them and keep the unit as plain BF16.
    for (const auto& w : unit.weights) {
      const auto bytes = source(w).bytes;
      for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
        const uint16_t v = static_cast<uint16_t>(bytes[i] | bytes[i + 1] << 8);
        if (ExponentOf(v) >= kFirstPointer) {
          warnings.push_back("'" + w + "' element " + std::to_string(i / 2) + " has exponent " +
                             std::to_string(ExponentOf(v)) + " (inf, NaN or |x| >= 2^113): unit '" + unit.path +
                             "' stored as plain BF16");
          break;
        }
      }
    }
    for (const auto& w : unit.weights) AddPlain(writer, source, w);
    report.stored_plain = true;
    report.compressed_bytes = words.size() * 2;
  } else {
    auto layout = ValidateUnit(enc->view(), unit.path);
    if (!layout.ok()) return Internal("encoder produced an invalid unit: " + layout.status().ToString());
    std::vector<uint16_t> check(words.size());
    Status s = DecodeUnitCpu(enc->view(), *layout, 0, words.size(), check.data(), threads, unit.path);
    if (!s.ok() || check != words) return Internal("verification failed for unit '" + unit.path + "': " + s.ToString());
    // Sizes first: the vectors are moved into the writer.
    const int64_t n = static_cast<int64_t>(words.size()), rows = enc->num_luts();
    const auto size = [](const std::vector<uint8_t>& v) { return static_cast<int64_t>(v.size()); };
    const int64_t stream = size(enc->encoded_exponent), positions = size(enc->output_positions),
                  gaps = size(enc->gaps), nsplit = static_cast<int64_t>(splits.size());
    writer.Add(unit.path + ".luts", DType::kU8, {rows, 256}, std::move(enc->luts));
    writer.Add(unit.path + ".encoded_exponent", DType::kU8, {stream}, std::move(enc->encoded_exponent));
    writer.Add(unit.path + ".sign_mantissa", DType::kU8, {n}, std::move(enc->sign_mantissa));
    writer.Add(unit.path + ".output_positions", DType::kU8, {positions}, std::move(enc->output_positions));
    writer.Add(unit.path + ".gaps", DType::kU8, {gaps}, std::move(enc->gaps));
    writer.Add(unit.path + ".split_positions", DType::kI64, {nsplit}, I64Bytes(splits));
  }
  std::string file = unit.path;
  std::replace(file.begin(), file.end(), '.', '_');
  DF11_RETURN_IF_ERROR(writer.Write(dst + "/" + file + ".safetensors"));
  return report;
}

Status WriteRestTensors(const TensorSource& source, const std::vector<std::string>& rest, const std::string& dst) {
  SafetensorsWriter writer;
  for (const auto& name : rest) AddPlain(writer, source, name);
  return writer.Write(dst + "/model.safetensors");
}

Status WriteDf11Config(json config, const std::string& dst, const PatternDict& patterns) {
  json dict = json::object();
  for (const auto& [p, attrs] : patterns) dict[p] = attrs;
  config["dfloat11_config"] = {{"version", "0.5.0"},
                               {"threads_per_block", json::array({kDefaultThreadsPerBlock})},
                               {"bytes_per_thread", kBytesPerWindow},
                               {"pattern_dict", dict}};
  std::ofstream out(dst + "/config.json");
  out << config.dump(2) << "\n";
  if (!out) return Internal(dst + "/config.json: write failed");
  return Status::Ok();
}

StatusOr<CompressReport> CompressCheckpoint(const std::string& src_dir, const std::string& dst,
                                            const CompressOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  DF11_ASSIGN_OR_RETURN(auto src, Checkpoint::Open(src_dir));
  if (src->is_df11()) return InvalidArgument(src_dir + ": already a DF11 checkpoint (config.json has dfloat11_config)");
  std::error_code ec;
  if (fs::exists(dst) && !fs::is_empty(dst, ec)) return InvalidArgument(dst + ": exists and is not empty");
  fs::create_directories(dst, ec);
  if (ec) return InvalidArgument(dst + ": cannot create: " + ec.message());

  const PatternDict patterns = Df11PatternDict(src->config());
  const TensorStore& store = src->store();
  const std::vector<std::string> names = store.Names();
  DF11_ASSIGN_OR_RETURN(auto plan, PlanUnits(names, src->config(), patterns, src_dir));
  if (plan.empty()) return InvalidArgument(src_dir + ": no module matches the " + src->config().architecture + " pattern_dict");
  for (const auto& unit : plan) {
    for (const auto& w : unit.weights) {
      const auto e = store.Find(w);
      if (e.info->dtype != DType::kBF16) {
        return InvalidArgument(e.file->path() + ": '" + w + "' is " + DTypeName(e.info->dtype) +
                               "; DF11 compresses BF16 checkpoints only");
      }
    }
  }
  const TensorSource source = [&](const std::string& name) {
    const auto e = store.Find(name);
    return SourceTensor{e.info->dtype, e.info->shape, store.Data(e)};
  };

  CompressReport report;
  for (const auto& name : names) report.bf16_bytes += store.Find(name).info->nbytes;
  // Other parameters of each unit's module go to the unit's file, as the reference writes them.
  OtherTensors other = PlaceOtherTensors(names, plan);
  for (size_t i = 0; i < plan.size(); ++i) {
    DF11_ASSIGN_OR_RETURN(auto unit_report,
                          CompressUnit(source, plan[i], dst, other.extras[plan[i].path], options.threads, report.warnings));
    report.units.push_back(unit_report);
    if (options.progress) options.progress(i + 1, plan.size(), plan[i].path);
  }
  DF11_RETURN_IF_ERROR(WriteRestTensors(source, other.rest, dst));
  {
    std::ifstream in(src_dir + "/config.json");
    json config = json::parse(in, nullptr, false);
    if (config.is_discarded()) return InvalidArgument(src_dir + "/config.json: not JSON");
    DF11_RETURN_IF_ERROR(WriteDf11Config(std::move(config), dst, patterns));
  }
  for (const auto& entry : fs::directory_iterator(src_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name == "config.json" || name == "model.safetensors.index.json" ||
        entry.path().extension() == ".safetensors") {
      continue;
    }
    fs::copy_file(entry.path(), fs::path(dst) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return Internal(dst + "/" + name + ": copy failed: " + ec.message());
  }
  // Sizes as written, read back through the DF11 reader (which also re-validates every unit).
  DF11_ASSIGN_OR_RETURN(auto out, Checkpoint::Open(dst));
  for (auto& u : report.units) {
    for (const auto& unit : out->units()) {
      if (unit.path != u.path) continue;
      u.compressed_bytes = unit.view.luts.size() + unit.view.encoded_exponent.size() + unit.view.sign_mantissa.size() +
                           unit.view.output_positions.size() + unit.view.gaps.size() + 8 * (unit.weights.size() - 1);
    }
  }
  for (const auto& f : out->store().files()) {
    for (const auto& t : f->tensors()) report.df11_bytes += t.nbytes;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace df11
