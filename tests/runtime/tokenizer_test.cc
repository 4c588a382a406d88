// End-to-end tests of df11::Tokenizer on small hand-made tokenizer directories
// (tests/fixtures/tokenizer/tiny_*): BPE merging, byte fallback and unk, added tokens and their
// flags, post-processing driven by tokenizer_config.json, decoding, and load errors. Expected ids
// were worked out by hand and checked against HF `tokenizers` (0.23, npm binding).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/detokenizer.h"
#include "tests/runtime/tokenizer_test_util.h"

namespace df11 {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;
using tokenizer_test::FixturePath;

std::unique_ptr<Tokenizer> LoadFixture(const std::string& name) {
  StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Load(FixturePath(name));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

Ids Encode(const Tokenizer& tok, const std::string& text, bool add_special = false) {
  StatusOr<Ids> ids = tok.Encode(text, add_special);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : Ids{};
}

std::string Stream(const Tokenizer& tok, const Ids& ids, bool skip, std::vector<std::string>* pieces = nullptr) {
  IncrementalDetokenizer stream(tok, skip);
  std::string text;
  for (int32_t id : ids) {
    std::string piece = stream.Push(id);
    if (pieces != nullptr) pieces->push_back(piece);
    text += piece;
  }
  std::string rest = stream.Flush();
  if (pieces != nullptr) pieces->push_back(rest);
  return text + rest;
}

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// ---- BPE merging (tiny_bytelevel: merges "a b" < "b c" < "Ġ a" < "ab c" < "a a") ------------

TEST(TokenizerBpe, MergesByRankThenLeftmost) {
  auto tok = LoadFixture("tiny_bytelevel");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(Encode(*tok, "abc"), (Ids{6}));      // a b c -> ab c -> abc
  EXPECT_EQ(Encode(*tok, "bcd"), (Ids{5, 8}));   // b c d -> bc d
  EXPECT_EQ(Encode(*tok, "abcd"), (Ids{6, 8}));  // "a b" beats "b c"
  EXPECT_EQ(Encode(*tok, " ab"), (Ids{3, 4}));   // Ġab is in the vocab but "a b" merges first
  EXPECT_EQ(Encode(*tok, "aaa"), (Ids{11, 0}));  // equal ranks: leftmost pair first
  EXPECT_EQ(Encode(*tok, "ab ab"), (Ids{4, 3, 4}));
  EXPECT_EQ(Encode(*tok, "a1b"), (Ids{0, 9, 1}));
  EXPECT_EQ(Encode(*tok, " a"), (Ids{7}));
  EXPECT_EQ(Encode(*tok, "z"), (Ids{}));  // no unk_token: unknown characters are dropped
  EXPECT_EQ(Encode(*tok, ""), (Ids{}));
}

TEST(TokenizerBpe, MergePairsAndIgnoreMerges) {
  json config = ReadJson(FixturePath("tiny_bytelevel/tokenizer.json"));
  json pairs = json::array();
  for (const auto& m : config["model"]["merges"]) {
    std::string s = m.get<std::string>();
    pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  config["model"]["merges"] = pairs;
  auto as_pairs = Tokenizer::FromJson(config.dump(), "{}");
  ASSERT_TRUE(as_pairs.ok()) << as_pairs.status().ToString();
  EXPECT_EQ(Encode(**as_pairs, "abcd aaa"), (Ids{6, 8, 7, 11}));  // "Ġ a" outranks "a a"

  config["model"]["ignore_merges"] = true;  // Llama 3: a pre-token found in the vocab is one token
  auto ignore = Tokenizer::FromJson(config.dump(), "{}");
  ASSERT_TRUE(ignore.ok()) << ignore.status().ToString();
  EXPECT_EQ(Encode(**ignore, " ab"), (Ids{10}));
  EXPECT_EQ(Encode(**ignore, "abcd"), (Ids{6, 8}));
}

TEST(TokenizerBpe, ByteFallbackAndUnk) {
  auto tok = LoadFixture("tiny_bytefallback");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(Encode(*tok, "hi hi"), (Ids{5, 6}));   // "hi▁hi": h i ▁ h i -> hi ▁ hi -> hi ▁hi
  EXPECT_EQ(Encode(*tok, "\u00e9"), (Ids{7, 8}));  // <0xC3> <0xA9>
  EXPECT_EQ(Encode(*tok, "\u20ac"), (Ids{9, 10, 11}));
  EXPECT_EQ(Encode(*tok, "x"), (Ids{0}));   // no <0x78>: unk
  EXPECT_EQ(Encode(*tok, "xx"), (Ids{0}));  // fuse_unk
  EXPECT_EQ(Encode(*tok, "xhx"), (Ids{0, 3, 0}));
  EXPECT_EQ(Encode(*tok, "x\u00e9"), (Ids{7, 8, 0}));    // HF keeps the unk pending across byte tokens
  EXPECT_EQ(Encode(*tok, "hi\n\nhi"), (Ids{5, 12, 5}));  // "\n\n" is an added (non-special) token
  EXPECT_EQ(Encode(*tok, "hi", true), (Ids{1, 5}));      // GemmaTokenizer + add_bos_token
}

TEST(TokenizerBpe, LongSentencePieceWordsMergeAsOneWord) {
  // A whole line is one BPE word here; long words are merged in pieces cut before "▁", which
  // must give the same ids as merging the whole word.
  std::string text;
  for (int i = 0; i < 30; ++i) text += i == 0 ? "hi" : " hi";
  json config = ReadJson(FixturePath("tiny_bytefallback/tokenizer.json"));
  auto tok = Tokenizer::FromJson(config.dump(), "{}");
  ASSERT_TRUE(tok.ok());
  Ids want = {5};
  want.resize(30, 6);
  EXPECT_EQ(Encode(**tok, text), want);
  // With a token "i▁" whose merge outranks "h i", merges cross every "▁": no cutting may happen.
  config["model"]["vocab"]["i▁"] = 13;
  config["model"]["merges"].insert(config["model"]["merges"].begin(), json{"i", "▁"});
  tok = Tokenizer::FromJson(config.dump(), "{}");
  ASSERT_TRUE(tok.ok());
  want.clear();
  for (int i = 0; i < 29; ++i) want.insert(want.end(), {3, 13});
  want.push_back(5);
  EXPECT_EQ(Encode(**tok, text), want);
}

// ---- Added tokens (tiny_added) ---------------------------------------------------------------

TEST(TokenizerAddedTokens, FlagsAsHf) {
  auto tok = LoadFixture("tiny_added");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(Encode(*tok, "a<|x|>b"), (Ids{0, 7, 1}));
  EXPECT_EQ(Encode(*tok, "<|x|><|x|>"), (Ids{7, 7}));
  EXPECT_EQ(Encode(*tok, "a <L>b"), (Ids{0, 8, 1}));   // lstrip eats the space before
  EXPECT_EQ(Encode(*tok, "a<R>  b"), (Ids{0, 9, 1}));  // rstrip eats the spaces after
  EXPECT_EQ(Encode(*tok, "sw a"), (Ids{10, 2, 0}));    // single_word at word boundaries only
  EXPECT_EQ(Encode(*tok, "asw"), (Ids{0, 3, 4}));
  EXPECT_EQ(Encode(*tok, "swa"), (Ids{3, 4, 0}));
  EXPECT_EQ(Encode(*tok, "abbb"), (Ids{12, 1}));  // leftmost-longest
  EXPECT_EQ(Encode(*tok, "aab"), (Ids{0, 11}));
  // A normalized added token matches the normalized text ("X" -> "N"): both X and N hit it,
  // and decoding shows its normalized content.
  EXPECT_EQ(Encode(*tok, "X"), (Ids{6}));
  EXPECT_EQ(Encode(*tok, "N"), (Ids{6}));
  EXPECT_EQ(Encode(*tok, "aXb"), (Ids{0, 6, 1}));
  EXPECT_EQ(tok->Decode(Ids{6}, false), "N");
  // Ids come from the model vocabulary or follow it; the ids written in tokenizer.json are ignored.
  EXPECT_EQ(tok->TokenId("<|x|>"), 7);
  EXPECT_EQ(tok->TokenId("abb"), 12);
  EXPECT_EQ(tok->vocab_size(), 13);
  EXPECT_TRUE(tok->IsSpecial(7));
  EXPECT_FALSE(tok->IsSpecial(8));
}

TEST(TokenizerAddedTokens, SpecialTokensInRealisticText) {
  auto tok = LoadFixture("tiny_bytelevel");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(Encode(*tok, "<s>abc</s>"), (Ids{12, 6, 13}));
  EXPECT_EQ(Encode(*tok, "<s>abc</s>", true), (Ids{12, 12, 6, 13}));
}

// ---- Post-processing and tokenizer_config.json -------------------------------------------------

TEST(TokenizerConfig, FileTemplateAndSpecialIds) {
  auto tok = LoadFixture("tiny_bytelevel");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(Encode(*tok, "abc", true), (Ids{12, 6}));  // the file's TemplateProcessing
  EXPECT_EQ(tok->bos_id(), 12);
  EXPECT_EQ(tok->eos_id(), 13);  // from an AddedToken object
  EXPECT_EQ(tok->pad_id(), std::nullopt);
  EXPECT_EQ(tok->stop_ids(), (Ids{13}));
}

TEST(TokenizerConfig, AddBosEosAsTransformers) {
  std::string tokenizer_json = ReadJson(FixturePath("tiny_bytelevel/tokenizer.json")).dump();
  json config = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"tokenizer_class", "LlamaTokenizerFast"}};
  auto expect = [&](const json& cfg, const Ids& want) {
    auto tok = Tokenizer::FromJson(tokenizer_json, cfg.dump());
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    EXPECT_EQ(Encode(**tok, "abc", true), want) << cfg.dump();
    EXPECT_EQ(Encode(**tok, "abc", false), (Ids{6})) << cfg.dump();
  };
  expect(config, Ids{12, 6});  // Llama class: add_bos defaults to true
  config["add_eos_token"] = true;
  expect(config, Ids{12, 6, 13});
  config["add_bos_token"] = false;
  expect(config, Ids{6, 13});
  // A generic class honours the keys only when set, and then missing ones count as false.
  config = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"tokenizer_class", "PreTrainedTokenizerFast"}};
  expect(config, Ids{12, 6});
  config["add_eos_token"] = true;
  expect(config, Ids{6, 13});
  // add_bos_token without a bos_token is an error, as in transformers.
  json bad = {{"add_bos_token", true}, {"tokenizer_class", "LlamaTokenizer"}};
  auto tok = Tokenizer::FromJson(tokenizer_json, bad.dump());
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("bos_token"), std::string::npos);
}

TEST(TokenizerConfig, GenerationConfigStopIds) {
  std::string tokenizer_json = ReadJson(FixturePath("tiny_bytefallback/tokenizer.json")).dump();
  std::string config = ReadJson(FixturePath("tiny_bytefallback/tokenizer_config.json")).dump();
  auto tok = Tokenizer::FromJson(tokenizer_json, config, R"({"eos_token_id": [12, 0, 1]})");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->stop_ids(), (Ids{0, 12, 1}));
  auto single = Tokenizer::FromJson(tokenizer_json, config, R"({"eos_token_id": 5})");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ((*single)->stop_ids(), (Ids{0, 5}));
}

// ---- Decoding and streaming --------------------------------------------------------------------

TEST(TokenizerDecode, ByteLevelAndSkipSpecial) {
  auto tok = LoadFixture("tiny_bytelevel");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Decode(Ids{12, 6, 13}, false), "<s>abc</s>");
  EXPECT_EQ(tok->Decode(Ids{12, 6, 13}, true), "abc");
  EXPECT_EQ(tok->Decode(Ids{4, 3, 4}, false), "ab ab");
  EXPECT_EQ(tok->Decode(Ids{4, 999, -1, 4}, false), "abab");  // unknown ids are dropped
  EXPECT_EQ(tok->Decode(Ids{}, false), "");
}

TEST(TokenizerDecode, ByteFallbackRuns) {
  auto tok = LoadFixture("tiny_bytefallback");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Decode(Ids{5, 6}, false), "hi hi");
  EXPECT_EQ(tok->Decode(Ids{7, 8}, false), "\u00e9");
  EXPECT_EQ(tok->Decode(Ids{7}, false), "\uFFFD");
  EXPECT_EQ(tok->Decode(Ids{9, 10}, false), "\uFFFD\uFFFD");  // one U+FFFD per byte of a bad run
  EXPECT_EQ(tok->Decode(Ids{7, 5}, false), "\uFFFDhi");
  EXPECT_EQ(tok->Decode(Ids{1, 5}, false), "<s>hi");
  EXPECT_EQ(tok->Decode(Ids{1, 5}, true), "hi");
  EXPECT_EQ(tok->Decode(Ids{12}, false), "\n\n");
  EXPECT_EQ(tok->Decode(Ids{0}, true), "");
}

TEST(TokenizerDecode, NoDecoderJoinsWithSpaces) {
  auto tok = LoadFixture("tiny_added");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Decode(Ids{0, 1}, false), "a b");
  EXPECT_EQ(tok->Decode(Ids{7, 0}, false), "<|x|> a");
  EXPECT_EQ(tok->Decode(Ids{7, 0}, true), "a");
  EXPECT_EQ(Stream(*tok, Ids{0, 1, 7}, false), "a b <|x|>");
  EXPECT_EQ(Stream(*tok, Ids{7, 0, 1}, true), "a b");
}

TEST(TokenizerStreaming, HoldsByteRunsUntilTheyEnd) {
  auto tok = LoadFixture("tiny_bytefallback");
  ASSERT_NE(tok, nullptr);
  std::vector<std::string> pieces;
  EXPECT_EQ(Stream(*tok, Ids{5, 9, 10, 11, 6}, false, &pieces), "hi\u20ac hi");
  EXPECT_EQ(pieces, (std::vector<std::string>{"hi", "", "", "", "\u20ac hi", ""}));
  pieces.clear();
  EXPECT_EQ(Stream(*tok, Ids{9, 10}, false, &pieces), "\uFFFD\uFFFD");  // an unfinished run ends at Flush
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "", "\uFFFD\uFFFD"}));
}

TEST(TokenizerStreaming, HoldsIncompleteUtf8) {
  auto tok = LoadFixture("tiny_bytelevel");
  ASSERT_NE(tok, nullptr);
  // "é" is C3 A9: the byte-level tokens "Ã" and "©" are not in the tiny vocab, so build a
  // tokenizer whose vocab has them.
  json config = ReadJson(FixturePath("tiny_bytelevel/tokenizer.json"));
  config["model"]["vocab"]["Ã"] = 20;
  config["model"]["vocab"]["©"] = 21;
  auto with_bytes = Tokenizer::FromJson(config.dump(), "{}");
  ASSERT_TRUE(with_bytes.ok());
  std::vector<std::string> pieces;
  EXPECT_EQ(Stream(**with_bytes, Ids{0, 20, 21, 1}, false, &pieces), "a\u00e9b");
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "", "\u00e9", "b", ""}));
  EXPECT_EQ(Stream(**with_bytes, Ids{20}, false), "\uFFFD");
}

TEST(TokenizerStreaming, StripAndMetaspaceAtTheStart) {
  // A Llama 2-style decoder chain: the first space is stripped from the whole text, once.
  json config = ReadJson(FixturePath("tiny_bytefallback/tokenizer.json"));
  config["decoder"]["decoders"].push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}});
  auto tok = Tokenizer::FromJson(config.dump(), "{}");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  for (const Ids& ids : {Ids{6, 6}, Ids{2, 2, 6}, Ids{6, 2}, Ids{2}, Ids{2, 9, 2, 6, 2, 2}}) {
    EXPECT_EQ(Stream(**tok, ids, false), (*tok)->Decode(ids, false));
  }
  EXPECT_EQ((*tok)->Decode(Ids{6, 6, 2}, false), "hi hi");
}

// ---- Errors ----------------------------------------------------------------------------------

Status LoadError(const json& tokenizer, const std::string& config = "{}") {
  auto tok = Tokenizer::FromJson(tokenizer.dump(), config);
  return tok.ok() ? Status::Ok() : tok.status();
}

TEST(TokenizerErrors, NameTheFileAndField) {
  json base = ReadJson(FixturePath("tiny_bytelevel/tokenizer.json"));
  json bad = base;
  bad["model"]["merges"][1] = 42;
  Status s = LoadError(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "tokenizer.json: model.merges[1]: expected string or pair");

  bad = base;
  bad["model"]["merges"][0] = "a q";
  EXPECT_EQ(LoadError(bad).message(), "tokenizer.json: model.merges[0]: token \"q\" is not in the vocabulary");
  bad["model"]["merges"][0] = "a b c";
  EXPECT_NE(LoadError(bad).message().find("model.merges[0]"), std::string::npos);

  bad = base;
  bad["model"]["vocab"]["a"] = "zero";
  EXPECT_EQ(LoadError(bad).message(), "tokenizer.json: model.vocab[\"a\"]: expected an integer id in [0, 2^24)");

  bad = base;
  bad["model"].erase("vocab");
  EXPECT_EQ(LoadError(bad).message(), "tokenizer.json: model.vocab: missing");

  bad = base;
  bad["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  s = LoadError(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex: invalid regex"),
            std::string::npos)
      << s.message();

  bad = base;
  bad["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  EXPECT_NE(LoadError(bad).message().find("pre_tokenizer.pretokenizers[0].behavior"), std::string::npos);

  EXPECT_NE(Tokenizer::FromJson("{\"model\": ", "{}").status().message().find("tokenizer.json: invalid JSON"),
            std::string::npos);
  EXPECT_NE(Tokenizer::FromJson(base.dump(), "[1,").status().message().find("tokenizer_config.json: invalid JSON"),
            std::string::npos);
  s = Tokenizer::FromJson(base.dump(), R"({"eos_token": "<nope>"})").status();
  EXPECT_EQ(s.message(), "tokenizer_config.json: eos_token: \"<nope>\" is not in the vocabulary");
  s = Tokenizer::FromJson(base.dump(), "{}", R"({"eos_token_id": ["x"]})").status();
  EXPECT_EQ(s.message(), "generation_config.json: eos_token_id[0]: expected an integer");
}

TEST(TokenizerErrors, UnsupportedComponentsAreUnimplemented) {
  json base = ReadJson(FixturePath("tiny_bytelevel/tokenizer.json"));
  json bad = base;
  bad["model"]["type"] = "WordPiece";
  Status s = LoadError(bad);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("WordPiece"), std::string::npos);
  bad = base;
  bad["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  s = LoadError(bad);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "tokenizer.json: normalizer: normalizer type \"Precompiled\" is not supported");
  bad = base;
  bad["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
  EXPECT_EQ(LoadError(bad).code(), StatusCode::kUnimplemented);
  bad = base;
  bad["model"]["dropout"] = 0.1;
  EXPECT_EQ(LoadError(bad).code(), StatusCode::kUnimplemented);
}

TEST(TokenizerErrors, MissingFilesAndInvalidText) {
  StatusOr<std::unique_ptr<Tokenizer>> missing = Tokenizer::Load(FixturePath("no_such_dir"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no_such_dir/tokenizer.json"), std::string::npos);

  auto tok = LoadFixture("tiny_bytelevel");
  ASSERT_NE(tok, nullptr);
  StatusOr<Ids> ids = tok->Encode("ab\xC3", false);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ids.status().message().find("byte offset 2"), std::string::npos);
}

}  // namespace
}  // namespace df11
