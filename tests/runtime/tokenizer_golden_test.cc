// Golden tests of the tokenizer: ids and decoded text of every corpus line for the real Qwen3,
// Gemma 3 and Llama 3.1 tokenizers, against tests/fixtures/tokenizer/goldens.json as written by
// scripts/gpu/make_tokenizer_goldens.py (HF `tokenizers` and transformers). Encode with
// add_special_tokens=true follows transformers; everything else follows `tokenizers`.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/tokenizer/detokenizer.h"
#include "tests/runtime/tokenizer_test_util.h"

namespace df11 {
namespace {

using tokenizer_test::Corpus;
using tokenizer_test::FixturePath;
using tokenizer_test::RealTokenizer;

const nlohmann::json* Goldens() {
  static const nlohmann::json* goldens = []() -> const nlohmann::json* {
    std::ifstream in(FixturePath("goldens.json"), std::ios::binary);
    if (!in) return nullptr;
    std::stringstream ss;
    ss << in.rdbuf();
    return new nlohmann::json(nlohmann::json::parse(ss.str()));
  }();
  return goldens;
}

// The golden section for `name` ("tokenizers" or "transformers"), or nullptr with a failure.
const nlohmann::json* Section(const std::string& tokenizer, const std::string& section) {
  const nlohmann::json* goldens = Goldens();
  if (goldens == nullptr) {
    ADD_FAILURE() << FixturePath("goldens.json") << " is missing. Generate it on a machine with Python "
                  << "`tokenizers` and `transformers`:\n  python3 scripts/gpu/make_tokenizer_goldens.py "
                  << "--tokenizers ~/.cache/df11-serve/tokenizers --corpus tests/fixtures/tokenizer/corpus.jsonl "
                  << "--out tests/fixtures/tokenizer/goldens.json";
    return nullptr;
  }
  if (!goldens->contains("corpus") || (*goldens)["corpus"].get<std::vector<std::string>>() != Corpus()) {
    ADD_FAILURE() << "goldens.json was made from another corpus.jsonl: regenerate it";
    return nullptr;
  }
  const nlohmann::json& all = (*goldens)["tokenizers"];
  if (!all.contains(tokenizer) || !all[tokenizer].contains(section)) return nullptr;
  return &all[tokenizer][section];
}

std::string Show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

class TokenizerGoldenTest : public ::testing::TestWithParam<std::string> {};

// Compares Encode(line, add_special) with golden[field] for every line; reports the first few.
void ExpectIds(const Tokenizer& tok, const nlohmann::json& golden, const char* field, bool add_special) {
  int mismatches = 0;
  for (size_t i = 0; i < Corpus().size(); ++i) {
    StatusOr<std::vector<int32_t>> ids = tok.Encode(Corpus()[i], add_special);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    auto want = golden[field][i].get<std::vector<int32_t>>();
    if (*ids != want && ++mismatches <= 5) {
      ADD_FAILURE() << field << " of line " << i + 1 << " " << nlohmann::json(Corpus()[i]).dump()
                    << "\n got:  " << Show(*ids) << "\n want: " << Show(want);
    }
  }
  EXPECT_EQ(mismatches, 0) << field;
}

TEST_P(TokenizerGoldenTest, EncodeMatchesTokenizersLibrary) {
  const Tokenizer* tok = RealTokenizer(GetParam());
  const nlohmann::json* golden = Section(GetParam(), "tokenizers");
  ASSERT_NE(tok, nullptr);
  ASSERT_NE(golden, nullptr);
  ExpectIds(*tok, *golden, "ids", false);
}

TEST_P(TokenizerGoldenTest, EncodeWithSpecialTokensMatchesTransformers) {
  const Tokenizer* tok = RealTokenizer(GetParam());
  const nlohmann::json* golden = Section(GetParam(), "transformers");
  ASSERT_NE(tok, nullptr);
  if (golden == nullptr) {
    // Goldens made without transformers (e.g. by the `tokenizers` npm binding): compare with the
    // library; its post-processor agrees with transformers for these three tokenizers.
    golden = Section(GetParam(), "tokenizers");
    ASSERT_NE(golden, nullptr);
  }
  ExpectIds(*tok, *golden, "ids_special", true);
  ExpectIds(*tok, *golden, "ids", false);
}

TEST_P(TokenizerGoldenTest, DecodeMatchesTokenizersLibrary) {
  const Tokenizer* tok = RealTokenizer(GetParam());
  const nlohmann::json* golden = Section(GetParam(), "tokenizers");
  ASSERT_NE(tok, nullptr);
  ASSERT_NE(golden, nullptr);
  int mismatches = 0;
  for (size_t i = 0; i < Corpus().size(); ++i) {
    auto ids = (*golden)["ids_special"][i].get<std::vector<int32_t>>();
    auto plain = (*golden)["ids"][i].get<std::vector<int32_t>>();
    std::pair<std::string, std::string> checks[] = {
        {"decode", tok->Decode(ids, false)},
        {"decode_skip", tok->Decode(ids, true)},
        {"decode_plain", tok->Decode(plain, false)},
    };
    for (const auto& [field, got] : checks) {
      std::string want = (*golden)[field][i].get<std::string>();
      if (got != want && ++mismatches <= 5) {
        ADD_FAILURE() << field << " of line " << i + 1 << "\n got:  " << nlohmann::json(got).dump()
                      << "\n want: " << nlohmann::json(want).dump();
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_P(TokenizerGoldenTest, StreamingMatchesGoldenDecode) {
  const Tokenizer* tok = RealTokenizer(GetParam());
  const nlohmann::json* golden = Section(GetParam(), "tokenizers");
  ASSERT_NE(tok, nullptr);
  ASSERT_NE(golden, nullptr);
  for (size_t i = 0; i < Corpus().size(); ++i) {
    auto ids = (*golden)["ids_special"][i].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      IncrementalDetokenizer stream(*tok, skip);
      std::string text;
      for (int32_t id : ids) text += stream.Push(id);
      text += stream.Flush();
      EXPECT_EQ(text, (*golden)[skip ? "decode_skip" : "decode"][i].get<std::string>()) << "line " << i + 1;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Real, TokenizerGoldenTest, ::testing::ValuesIn(tokenizer_test::RealTokenizerNames()));

}  // namespace
}  // namespace df11
