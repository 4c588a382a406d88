// df11 run: greedy decoding of token ids on the CPU or a CUDA GPU (a smoke test of a model
// directory, DF11 or BF16). Prints the generated ids; with --logits, one JSON line per step with
// the logits that chose its token.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/command.h"
#include "runtime/model/model.h"

namespace df11::cli {
namespace {

std::vector<int32_t> ParseTokens(const std::string& text) {
  std::vector<int32_t> tokens;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(item);
      tokens.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw CommandFailed(2, "--tokens: '" + item + "' is not a token id");
    }
  }
  if (tokens.empty()) throw CommandFailed(2, "--tokens: no token ids");
  return tokens;
}

void Run(const std::string& dir, const std::string& token_list, int steps, const std::string& device, bool print_logits,
         int threads) {
  if (device != "cpu" && device != "cuda") throw CommandFailed(2, "--device: '" + device + "' is not cpu or cuda");
  if (steps < 0) throw CommandFailed(2, "--steps must be >= 0");
  std::vector<int32_t> tokens = ParseTokens(token_list);
  ModelOptions options;
  options.threads = threads;
  options.device = device == "cuda" ? Device::kCuda : Device::kCpu;
  auto model = Check(Model::Load(dir, options));
  const LoadReport& report = model->load_report();
  std::fprintf(stderr, "loaded %s on %s in %.2f s: %s weights %.1f MB (BF16 %.1f MB), scratch %.1f MB\n", dir.c_str(),
               DeviceName(report.device), report.load_seconds, report.df11 ? "DF11" : "BF16",
               report.weight_bytes / 1e6, report.bf16_weight_bytes / 1e6, report.scratch_bytes / 1e6);
  constexpr int64_t kBlockSize = 16;
  const int64_t positions = static_cast<int64_t>(tokens.size()) + std::max(steps, 1);
  KvCache cache = Check(KvCache::Create(model->config(), (positions + kBlockSize - 1) / kBlockSize, kBlockSize,
                                                 options.device));
  SequenceInput seq;
  for (int64_t b = 0; b < cache.shape().num_blocks; ++b) seq.block_table.push_back(static_cast<int32_t>(b));
  seq.tokens = tokens;
  std::vector<int32_t> generated;
  for (int step = 0; step < steps; ++step) {
    seq.logits_for = {static_cast<int64_t>(seq.tokens.size()) - 1};
    StepInput input{{seq}, &cache};
    StepOutput output;
    Check(model->Step(input, output));
    const auto best = std::max_element(output.logits.begin(), output.logits.end());
    const int32_t next = static_cast<int32_t>(best - output.logits.begin());
    generated.push_back(next);
    if (print_logits) {
      nlohmann::json line = {{"step", step}, {"token", next}, {"logits", output.logits}};
      std::printf("%s\n", line.dump().c_str());
    }
    seq.num_cached += static_cast<int64_t>(seq.tokens.size());
    seq.tokens = {next};
  }
  std::string ids;
  for (int32_t t : generated) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  std::printf("%s\n", ids.c_str());
}

void Register(CLI::App& app) {
  static std::string dir, tokens, device = "cpu";
  static int steps = 16, threads = 0;
  static bool logits = false;
  auto* r = app.add_subcommand("run", "Greedy decoding from token ids (prints the generated ids)");
  r->add_option("MODEL_DIR", dir, "DF11 or BF16 model directory")->required();
  r->add_option("--tokens", tokens, "prompt token ids, comma-separated (e.g. 1,2,3)")->required();
  r->add_option("--steps", steps, "tokens to generate");
  r->add_option("--device", device, "cpu or cuda");
  r->add_flag("--logits", logits, "also print each step's logits as a JSON line");
  r->add_option("--threads", threads, "worker threads (0 = all cores)");
  r->callback([] { Run(dir, tokens, steps, device, logits, threads); });
}

DF11_REGISTER_COMMAND(Register);

}  // namespace
}  // namespace df11::cli
