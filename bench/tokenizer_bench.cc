// tokenizer_bench: single-thread Encode throughput (MB/s) of the real tokenizers on the mixed
// corpus (tests/fixtures/tokenizer/corpus.jsonl joined with "\n", repeated to about 20 MB, one
// Encode call per repetition), the same measurement scripts/gpu/make_tokenizer_goldens.py makes
// with HF `tokenizers`. Also Decode and streaming-detokenize speed and load time. Prints JSON.
// Usage: tokenizer_bench [--tokenizers DIR] [--corpus FILE] [--mb N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/tokenizer/detokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string DefaultTokenizerDir() {
  if (const char* dir = std::getenv("DF11_TOKENIZER_DIR"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.cache/df11-serve/tokenizers";
}

nlohmann::json BenchOne(const std::string& dir, const std::string& document, size_t reps) {
  nlohmann::json r;
  auto start = std::chrono::steady_clock::now();
  auto tok = df11::Tokenizer::Load(dir);
  if (!tok.ok()) {
    r["error"] = tok.status().ToString();
    return r;
  }
  r["load_seconds"] = Seconds(start);
  const df11::Tokenizer& t = **tok;
  std::vector<int32_t> ids = t.Encode(document, false).value();  // warm-up, fills the BPE cache
  size_t tokens = 0;
  start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < reps; ++i) tokens += t.Encode(document, false).value().size();
  double encode_s = Seconds(start);
  double bytes = static_cast<double>(document.size()) * static_cast<double>(reps);
  r["encode"] = {{"bytes", bytes}, {"seconds", encode_s}, {"mb_per_s", bytes / encode_s / 1e6}, {"tokens", tokens}};

  size_t decode_reps = std::max<size_t>(1, reps / 4);
  start = std::chrono::steady_clock::now();
  size_t decoded = 0;
  for (size_t i = 0; i < decode_reps; ++i) decoded += t.Decode(ids, false).size();
  double decode_s = Seconds(start);
  r["decode"] = {{"tokens_per_s", static_cast<double>(ids.size() * decode_reps) / decode_s},
                 {"mb_per_s", static_cast<double>(decoded) / decode_s / 1e6}};

  start = std::chrono::steady_clock::now();
  size_t streamed = 0;
  for (size_t i = 0; i < decode_reps; ++i) {
    df11::IncrementalDetokenizer stream(t, false);
    for (int32_t id : ids) streamed += stream.Push(id).size();
    streamed += stream.Flush().size();
  }
  double stream_s = Seconds(start);
  r["stream"] = {{"tokens_per_s", static_cast<double>(ids.size() * decode_reps) / stream_s},
                 {"us_per_token", stream_s * 1e6 / static_cast<double>(ids.size() * decode_reps)}};
  if (streamed != decoded) r["stream"]["error"] = "streamed text differs in size from Decode";
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizers = DefaultTokenizerDir();
  std::string corpus_path = DF11_TOKENIZER_CORPUS;
  double megabytes = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--tokenizers") == 0) {
      tokenizers = argv[i + 1];
    } else if (std::strcmp(argv[i], "--corpus") == 0) {
      corpus_path = argv[i + 1];
    } else if (std::strcmp(argv[i], "--mb") == 0) {
      megabytes = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--tokenizers DIR] [--corpus FILE] [--mb N]\n", argv[0]);
      return 2;
    }
  }
  std::ifstream in(corpus_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", corpus_path.c_str());
    return 1;
  }
  std::string document, line;
  bool first = true;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (!first) document += '\n';  // "\n".join(corpus), as the golden script measures
    first = false;
    document += nlohmann::json::parse(line).get<std::string>();
  }
  size_t reps = std::max<size_t>(1, static_cast<size_t>(megabytes * 1e6) / document.size());
  nlohmann::json out = {
      {"benchmark", "tokenizer"}, {"threads", 1}, {"document_bytes", document.size()}, {"repetitions", reps}};
  for (const char* name : {"qwen3", "gemma3", "llama3_1"}) {
    out["tokenizers"][name] = BenchOne(tokenizers + "/" + name, document, reps);
    std::fprintf(stderr, "%s done\n", name);
  }
  std::cout << out.dump(2) << std::endl;
  return 0;
}
