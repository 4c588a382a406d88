// df11 compress / inspect / verify / random-model: the DF11 checkpoint tools.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "kernels/df11_codec.h"
#include "runtime/format/checkpoint.h"
#include "runtime/format/compress.h"
#include "runtime/format/random_model.h"

namespace df11::cli {
namespace {

using json = nlohmann::json;

void Compress(const std::string& src, const std::string& dst, int threads) {
  CompressOptions options;
  options.threads = threads;
  const bool tty = isatty(2);
  options.progress = [&](size_t done, size_t total, const std::string& path) {
    const int width = 30, filled = static_cast<int>(width * done / total);
    std::fprintf(stderr, "%s[%.*s%*s] %zu/%zu %s%s", tty ? "\r" : "", filled, "##############################",
                 width - filled, "", done, total, path.c_str(), tty ? "\033[K" : "\n");
    if (tty && done == total) std::fprintf(stderr, "\n");
  };
  CompressReport r = Check(CompressCheckpoint(src, dst, options));
  for (const auto& w : r.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  uint64_t elements = 0, bytes = 0;
  for (const auto& u : r.units) {
    if (u.stored_plain) continue;
    elements += u.elements;
    bytes += u.compressed_bytes;
  }
  std::printf("compressed %zu units (%llu weights) in %.1f s, every unit verified by decoding\n", r.units.size(),
              static_cast<unsigned long long>(elements), r.seconds);
  std::printf("units: %.3f bits per weight (%.2f%% of BF16); whole model: %.2f GB -> %.2f GB (%.2f%%)\n",
              elements ? 8.0 * bytes / elements : 0.0, elements ? 100.0 * bytes / (2.0 * elements) : 0.0,
              r.bf16_bytes / 1e9, r.df11_bytes / 1e9, 100.0 * r.df11_bytes / std::max<uint64_t>(1, r.bf16_bytes));
}

struct UnitStats {
  std::array<uint64_t, 256> histogram{};
};

void Inspect(const std::string& dir, bool as_json, int threads) {
  CheckpointOptions opts;
  opts.require_known_architecture = false;
  auto ckpt = Check(Checkpoint::Open(dir, opts));
  if (!ckpt->is_df11()) throw CommandFailed(1, dir + ": not a DF11 checkpoint (config.json has no dfloat11_config)");
  json out = {{"dir", dir}, {"units", json::array()}};
  uint64_t unit_elements = 0, unit_bytes = 0, plain_bytes = 0;
  if (!as_json) {
    std::printf("%-40s %12s %12s %8s %8s  %s\n", "unit", "weights", "bytes", "bits/w", "H(exp)", "code lengths: weights");
  }
  for (const Df11Unit& u : ckpt->units()) {
    const uint64_t n = u.layout.num_elements;
    std::vector<uint16_t> words(n);
    Check(DecodeUnitCpu(u.view, u.layout, 0, n, words.data(), threads, dir + ": " + u.path));
    const auto hist = ExponentHistogram(words, threads);
    const uint8_t* lengths = u.view.luts.data() + static_cast<ptrdiff_t>(u.layout.num_luts - 1) * 256;
    std::map<int, uint64_t> by_length;
    for (int s = 0; s < 256; ++s) {
      if (hist[s]) by_length[lengths[s]] += hist[s];
    }
    const uint64_t bytes = u.view.luts.size() + u.view.encoded_exponent.size() + u.view.sign_mantissa.size() +
                           u.view.output_positions.size() + u.view.gaps.size() + 8 * (u.weights.size() - 1);
    unit_elements += n;
    unit_bytes += bytes;
    const double entropy = HistogramEntropyBits(hist);
    json lens = json::object();
    std::string lens_text;
    for (auto [len, count] : by_length) {
      lens[std::to_string(len)] = count;
      lens_text += std::to_string(len) + ":" + std::to_string(count) + " ";
    }
    json weights = json::array();
    for (const auto& w : u.weights) weights.push_back({{"name", w.name}, {"shape", w.shape}});
    out["units"].push_back({{"path", u.path}, {"elements", n}, {"bytes", bytes}, {"bits_per_weight", 8.0 * bytes / n},
                            {"exponent_entropy_bits", entropy}, {"code_length_weights", lens},
                            {"decode_tables", u.layout.num_luts - 1}, {"weights", weights}});
    if (!as_json) {
      std::printf("%-40s %12llu %12llu %8.3f %8.3f  %s\n", u.path.c_str(), static_cast<unsigned long long>(n),
                  static_cast<unsigned long long>(bytes), 8.0 * bytes / n, entropy, lens_text.c_str());
    }
  }
  std::set<std::string> unit_tensors;
  for (const auto& u : ckpt->units()) {
    for (const char* t : {"luts", "encoded_exponent", "sign_mantissa", "output_positions", "gaps", "split_positions"}) {
      unit_tensors.insert(u.path + "." + t);
    }
  }
  for (const auto& name : ckpt->store().Names()) {
    if (!unit_tensors.count(name)) plain_bytes += ckpt->store().Find(name).info->nbytes;
  }
  const double bf16 = 2.0 * unit_elements + plain_bytes, df11 = static_cast<double>(unit_bytes + plain_bytes);
  out["unit_bits_per_weight"] = unit_elements ? 8.0 * unit_bytes / unit_elements : 0;
  out["plain_bytes"] = plain_bytes;
  out["model_bytes"] = df11;
  out["model_bf16_bytes"] = bf16;
  out["model_ratio"] = df11 / bf16;
  out["warnings"] = ckpt->warnings();
  if (as_json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  for (const auto& w : ckpt->warnings()) std::printf("note: %s\n", w.c_str());
  std::printf("%zu units, %.3f bits per weight; plain BF16 tensors %.1f MB; model %.3f GB of %.3f GB BF16 = %.2f%%\n",
              ckpt->units().size(), unit_elements ? 8.0 * unit_bytes / unit_elements : 0.0, plain_bytes / 1e6, df11 / 1e9,
              bf16 / 1e9, 100.0 * df11 / bf16);
}

// Decodes every unit and compares each weight and plain tensor with the BF16 checkpoint.
void Verify(const std::string& df11_dir, const std::string& bf16_dir, int threads) {
  auto df11 = Check(Checkpoint::Open(df11_dir));
  auto bf16 = Check(Checkpoint::Open(bf16_dir));
  if (!df11->is_df11()) throw CommandFailed(1, df11_dir + ": not a DF11 checkpoint");
  size_t checked = 0;
  uint64_t elements = 0;
  std::set<std::string> seen;
  for (const std::string& name : df11->WeightNames()) {
    auto want_entry = bf16->store().Find(name);
    const auto& cfg = bf16->config();
    if (want_entry.file == nullptr && cfg.tie_word_embeddings && name == cfg.lm_head_name) {
      want_entry = bf16->store().Find(cfg.weight_prefix + "embed_tokens.weight");  // tied head: the embedding
    }
    if (want_entry.file == nullptr) throw CommandFailed(1, "'" + name + "' is in " + df11_dir + " but not in " + bf16_dir);
    const auto loc = Check(df11->Locate(name));
    const auto want = bf16->store().Data(want_entry);
    if (loc.unit == nullptr) {
      const auto got = df11->store().Data(loc.plain);
      if (loc.plain.info->dtype != want_entry.info->dtype || loc.plain.info->shape != want_entry.info->shape ||
          !std::equal(got.begin(), got.end(), want.begin(), want.end())) {
        throw CommandFailed(1, "plain tensor '" + name + "' differs between the two checkpoints");
      }
    } else {
      if (want_entry.info->dtype != DType::kBF16 || want_entry.info->shape != loc.weight->shape) {
        throw CommandFailed(1, "'" + name + "': BF16 checkpoint has a different dtype or shape");
      }
      const auto got = Check(df11->ReadBf16(name, threads));
      for (size_t i = 0; i < got.size(); ++i) {
        const uint16_t w = static_cast<uint16_t>(want[2 * i] | want[2 * i + 1] << 8);
        if (got[i] != w) {
          const int64_t cols = loc.weight->shape.size() == 2 ? loc.weight->shape[1] : 0;
          char msg[256];
          std::snprintf(msg, sizeof(msg), "'%s' element %zu%s differs: DF11 decodes 0x%04x, BF16 has 0x%04x",
                        name.c_str(), i,
                        cols ? (" (row " + std::to_string(i / cols) + ", col " + std::to_string(i % cols) + ")").c_str()
                             : "",
                        got[i], w);
          throw CommandFailed(1, msg);
        }
      }
      elements += got.size();
    }
    seen.insert(name);
    ++checked;
  }
  for (const auto& name : bf16->store().Names()) {
    if (!seen.count(name)) throw CommandFailed(1, "'" + name + "' is in " + bf16_dir + " but missing from " + df11_dir);
  }
  std::printf("identical: %zu tensors, %llu compressed weights decoded bit for bit\n", checked,
              static_cast<unsigned long long>(elements));
}

void Register(CLI::App& app) {
  static std::string src, dst, dir, preset;
  static int threads = 0, shards = 1;
  static unsigned seed = 1;
  static bool as_json = false, random_df11 = false;
  auto* c = app.add_subcommand("compress", "Compress a BF16 Hugging Face checkpoint to DF11 (published layout)");
  c->add_option("SRC", src, "BF16 checkpoint directory")->required();
  c->add_option("DST", dst, "output directory (created)")->required();
  c->add_option("--threads", threads, "worker threads (0 = all cores)");
  c->callback([] { Compress(src, dst, threads); });

  auto* i = app.add_subcommand("inspect", "Per-unit sizes, bits per weight, code lengths and entropy of a DF11 model");
  i->add_option("DIR", dir, "DF11 model directory")->required();
  i->add_flag("--json", as_json, "print JSON");
  i->add_option("--threads", threads, "worker threads (0 = all cores)");
  i->callback([] { Inspect(dir, as_json, threads); });

  auto* v = app.add_subcommand("verify", "Decode every DF11 unit and compare bit for bit with the BF16 original");
  v->add_option("DF11_DIR", dst, "DF11 model directory")->required();
  v->add_option("BF16_DIR", src, "the BF16 checkpoint it was made from")->required();
  v->add_option("--threads", threads, "worker threads (0 = all cores)");
  v->callback([] { Verify(dst, src, threads); });

  auto* r = app.add_subcommand("random-model", "Write a random-weight BF16 or DF11 checkpoint (tests, demos, benchmarks)");
  std::string presets;
  for (const auto& p : RandomModelPresets()) presets += (presets.empty() ? "" : ", ") + p;
  r->add_option("PRESET", preset, "one of: " + presets)->required();
  r->add_option("DIR", dir, "output directory")->required();
  r->add_option("--seed", seed, "random seed");
  r->add_option("--shards", shards, "number of safetensors files (> 1 writes an index)");
  r->add_flag("--df11", random_df11,
              "write DF11 directly, one unit at a time (the same files as compressing the one-shard BF16 model)");
  r->add_option("--threads", threads, "DF11: encoder threads (0 = all cores)");
  r->callback([] {
    if (random_df11 && shards != 1) throw CommandFailed(2, "--shards applies to BF16 output only");
    RandomModelOptions o;
    o.seed = seed;
    o.shards = shards;
    o.df11 = random_df11;
    o.threads = threads;
    Check(WriteRandomModel(preset, dir, o));
  });
}

DF11_REGISTER_COMMAND(Register);

}  // namespace
}  // namespace df11::cli
