// libFuzzer target for the tokenizer. The first input byte picks what the rest is:
//   0..159   text for Encode: valid UTF-8 must encode to in-vocabulary ids whose Decode is valid
//            UTF-8 and equals the streamed text; invalid UTF-8 must be INVALID_ARGUMENT;
//   160..223 little-endian int32 ids for Decode and IncrementalDetokenizer (must agree);
//   224..255 a tokenizer.json to load: any bytes must load or fail with a message, never crash.
// The tokenizer is DF11_FUZZ_TOKENIZER_DIR (e.g. ~/.cache/df11-serve/tokenizers/gemma3) when set,
// else a tiny built-in byte-level one with every tokenizer feature the real files use.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/detokenizer.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/unicode.h"

namespace {

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

// A byte-level BPE over all 256 byte characters with a few merges, NFC, a Qwen-style split,
// special and non-special added tokens (with lstrip/rstrip/single_word) and a template.
std::string BuiltInTokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  auto add_char = [&](int b) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      bool printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
      if (!printable) ++n;
    }
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    std::string ch;
    df11::AppendUtf8(printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n), &ch);
    vocab[ch] = b;
  };
  for (int b = 0; b < 256; ++b) add_char(b);
  const char* merged[] = {"Ġt", "he", "Ġthe", "in", "Ġa", "er", "ĠĠ", "ĠĠĠĠ", "Ċ", "ĊĊ"};
  const char* merges[] = {"Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "Ġ Ġ", "ĠĠ ĠĠ", "Ċ Ċ"};
  int next = 256;
  for (const char* m : merged) {
    if (!vocab.contains(m)) vocab[m] = next++;
  }
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", next}, {"content", "<|s|>"}, {"special", true}, {"normalized", false}},
        {{"id", next + 1}, {"content", "<L>"}, {"lstrip", true}, {"normalized", false}},
        {{"id", next + 2}, {"content", "<R>"}, {"rstrip", true}, {"normalized", false}},
        {{"id", next + 3}, {"content", "word"}, {"single_word", true}, {"normalized", true}}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex",
              R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<|s|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<|s|>", {{"id", "<|s|>"}, {"ids", {next}}, {"tokens", {"<|s|>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", true}}}};
  return j.dump();
}

const df11::Tokenizer& FuzzTokenizer() {
  static const df11::Tokenizer* tok = [] {
    const char* dir = std::getenv("DF11_FUZZ_TOKENIZER_DIR");
    auto loaded = dir != nullptr && *dir != '\0' ? df11::Tokenizer::Load(dir)
                                                 : df11::Tokenizer::FromJson(BuiltInTokenizerJson(), "{}");
    Require(loaded.ok());
    return std::move(loaded).value().release();
  }();
  return *tok;
}

void CheckDecode(const df11::Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (bool skip : {false, true}) {
    std::string text = tok.Decode(ids, skip);
    Require(df11::FindInvalidUtf8(text) == std::string::npos);
    df11::IncrementalDetokenizer stream(tok, skip);
    std::string streamed;
    for (int32_t id : ids) {
      std::string piece = stream.Push(id);
      Require(df11::FindInvalidUtf8(piece) == std::string::npos);
      streamed += piece;
    }
    streamed += stream.Flush();
    Require(streamed == text);
  }
}

void FuzzEncode(std::string_view text) {
  const df11::Tokenizer& tok = FuzzTokenizer();
  bool valid = df11::FindInvalidUtf8(text) == std::string_view::npos;
  for (bool special : {false, true}) {
    auto ids = tok.Encode(text, special);
    if (!valid) {
      Require(!ids.ok() && ids.status().code() == df11::StatusCode::kInvalidArgument);
      return;
    }
    Require(ids.ok());
    for (int32_t id : *ids) Require(tok.TokenString(id).has_value());
    CheckDecode(tok, *ids);
  }
}

void FuzzDecode(const uint8_t* data, size_t size) {
  std::vector<int32_t> ids(size / 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    uint32_t v;
    std::memcpy(&v, data + 4 * i, 4);
    // Mostly small ids (bytes, byte tokens, specials), sometimes anything.
    ids[i] = (v & 0x80000000u) != 0 ? static_cast<int32_t>(v) : static_cast<int32_t>(v % 1024);
  }
  CheckDecode(FuzzTokenizer(), ids);
}

void FuzzLoad(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tok = df11::Tokenizer::FromJson(json, "{}");
  if (!tok.ok()) {
    Require(!tok.status().message().empty());
    return;
  }
  auto ids = (*tok)->Encode("Hello, world! 123 <|s|> é\n", true);
  if (ids.ok()) CheckDecode(**tok, *ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t mode = data[0];
  ++data;
  --size;
  if (mode < 160) {
    FuzzEncode(std::string_view(reinterpret_cast<const char*>(data), size));
  } else if (mode < 224) {
    FuzzDecode(data, size);
  } else {
    FuzzLoad(data, size);
  }
  return 0;
}
