// Unit tests of the tokenizer components (normalizers, pre-tokenizers, decoders,
// post-processors) on hand-made inputs. Expected values were worked out from the HF
// `tokenizers` semantics and checked against the library itself (tokenizers 0.23 npm binding).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/components.h"

namespace df11::tokenizer_internal {
namespace {

using nlohmann::json;

// Keeps parsed JSON alive for the JsonNodes that point into it.
JsonNode Node(const json& j) {
  static std::vector<std::unique_ptr<json>> keep;
  keep.push_back(std::make_unique<json>(j));
  return JsonNode(*keep.back(), "test.json", "");
}

std::vector<std::string> PreTokenize(const json& config, const std::string& text) {
  StatusOr<std::unique_ptr<PreTokenizer>> p = ParsePreTokenizer(Node(config));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return {};
  std::vector<Split> splits(1);
  splits[0].text = text;
  splits[0].at_origin = true;
  (*p)->PreTokenize(splits);
  std::vector<std::string> out;
  for (const Split& s : splits) out.push_back(s.text);
  return out;
}

std::string Normalize(const json& config, std::string text) {
  StatusOr<std::unique_ptr<Normalizer>> n = ParseNormalizer(Node(config));
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  if (n.ok()) (*n)->Normalize(text);
  return text;
}

std::string Decode(const json& config, std::vector<std::string> tokens) {
  StatusOr<std::unique_ptr<Decoder>> d = ParseDecoder(Node(config));
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (!d.ok()) return "";
  DecodeState state;
  (*d)->Decode(tokens, DecodeContext{}, state);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

json SplitOn(const std::string& literal, const std::string& behavior, bool invert) {
  return {{"type", "Split"}, {"pattern", {{"String", literal}}}, {"behavior", behavior}, {"invert", invert}};
}

using Pieces = std::vector<std::string>;

TEST(TokenizerPreTokenizers, SplitBehaviors) {
  EXPECT_EQ(PreTokenize(SplitOn("-", "Isolated", false), "a-b--c"), (Pieces{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(PreTokenize(SplitOn("-", "Removed", false), "a-b--c"), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(PreTokenize(SplitOn("-", "Removed", true), "a-b--c"), (Pieces{"-", "-", "-"}));
  EXPECT_EQ(PreTokenize(SplitOn("-", "MergedWithPrevious", false), "a-b--c"), (Pieces{"a-", "b-", "-", "c"}));
  EXPECT_EQ(PreTokenize(SplitOn("-", "MergedWithPrevious", true), "a-b--c"), (Pieces{"a", "-b", "-", "-c"}));
  EXPECT_EQ(PreTokenize(SplitOn("-", "MergedWithNext", false), "a-b--c"), (Pieces{"a", "-b", "-", "-c"}));
  EXPECT_EQ(PreTokenize(SplitOn("-", "MergedWithNext", true), "a-b--c"), (Pieces{"a-", "b-", "-", "c"}));
  EXPECT_EQ(PreTokenize(SplitOn("-", "Contiguous", false), "a-b--c"), (Pieces{"a", "-", "b", "--", "c"}));
}

TEST(TokenizerPreTokenizers, SplitRegexUsesOniguruma) {
  // Qwen2/3's pattern: letters with an optional leading non-letter, one digit at a time.
  json qwen = {
      {"type", "Split"},
      {"pattern",
       {{"Regex",
         R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
      {"behavior", "Isolated"},
      {"invert", false}};
  EXPECT_EQ(PreTokenize(qwen, "I'M 2024  ok\n\n"), (Pieces{"I", "'M", " ", "2", "0", "2", "4", " ", " ok", "\n\n"}));
  EXPECT_EQ(PreTokenize(qwen, ""), Pieces{});
}

TEST(TokenizerPreTokenizers, ByteLevel) {
  json gpt2 = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  EXPECT_EQ(PreTokenize(gpt2, "Hello world, it's 2024!  ok\n"),
            (Pieces{"ĠHello", "Ġworld", ",", "Ġit", "'s", "Ġ2024", "!", "Ġ", "Ġok", "Ċ"}));
  json plain = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  EXPECT_EQ(PreTokenize(plain, "héllo wörld"), (Pieces{"hÃ©lloĠwÃ¶rld"}));
}

TEST(TokenizerPreTokenizers, Metaspace) {
  auto metaspace = [](const std::string& scheme, bool split) {
    return json{{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", scheme}, {"split", split}};
  };
  EXPECT_EQ(PreTokenize(metaspace("always", true), "hello  world"), (Pieces{"▁hello", "▁", "▁world"}));
  EXPECT_EQ(PreTokenize(metaspace("first", true), "hello world"), (Pieces{"▁hello", "▁world"}));
  EXPECT_EQ(PreTokenize(metaspace("never", true), "hello world"), (Pieces{"hello", "▁world"}));
  EXPECT_EQ(PreTokenize(metaspace("always", false), "hello world"), (Pieces{"▁hello▁world"}));
  // Legacy add_prefix_space=false must come with prepend_scheme "never".
  json legacy = {{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", false}};
  EXPECT_FALSE(ParsePreTokenizer(Node(legacy)).ok());
}

TEST(TokenizerPreTokenizers, DigitsWhitespacePunctuation) {
  EXPECT_EQ(PreTokenize({{"type", "Digits"}, {"individual_digits", false}}, "abc123def4"),
            (Pieces{"abc", "123", "def", "4"}));
  EXPECT_EQ(PreTokenize({{"type", "Digits"}, {"individual_digits", true}}, "abc123def4"),
            (Pieces{"abc", "1", "2", "3", "def", "4"}));
  EXPECT_EQ(PreTokenize({{"type", "WhitespaceSplit"}}, " a  b\tc\u3000d "), (Pieces{"a", "b", "c", "d"}));
  EXPECT_EQ(PreTokenize({{"type", "Whitespace"}}, "Hey friend!     How are you?!?"),
            (Pieces{"Hey", "friend", "!", "How", "are", "you", "?!?"}));
  EXPECT_EQ(PreTokenize({{"type", "Punctuation"}}, "Hey, friend!! ¿Qué?"),
            (Pieces{"Hey", ",", " friend", "!", "!", " ", "¿", "Qué", "?"}));
}

TEST(TokenizerPreTokenizers, SequenceAndUnsupported) {
  json seq = {{"type", "Sequence"},
              {"pretokenizers", {SplitOn(" ", "Removed", false), {{"type", "Digits"}, {"individual_digits", true}}}}};
  EXPECT_EQ(PreTokenize(seq, "ab12 c3"), (Pieces{"ab", "1", "2", "c", "3"}));
  StatusOr<std::unique_ptr<PreTokenizer>> bert = ParsePreTokenizer(Node({{"type", "BertPreTokenizer"}}));
  ASSERT_FALSE(bert.ok());
  EXPECT_EQ(bert.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(bert.status().message().find("BertPreTokenizer"), std::string::npos);
}

TEST(TokenizerNormalizers, Unicode) {
  EXPECT_EQ(Normalize({{"type", "NFC"}}, "e\u0301 A\u030a \u212b \u1100\u1161\u11a8 \u0958 q\u0307\u0323"),
            "\u00e9 \u00c5 \u00c5 \uac01 \u0915\u093c q\u0323\u0307");
  EXPECT_EQ(Normalize({{"type", "NFD"}}, "\u00e9 \uac01 \u1e0b\u0323"), "e\u0301 \u1100\u1161\u11a8 d\u0323\u0307");
  EXPECT_EQ(Normalize({{"type", "NFC"}}, "plain ascii"), "plain ascii");
}

TEST(TokenizerNormalizers, ReplacePrependStripSequence) {
  EXPECT_EQ(Normalize({{"type", "Replace"}, {"pattern", {{"String", "ab"}}}, {"content", "X"}}, "aababab"), "aXXX");
  EXPECT_EQ(Normalize({{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", "_"}}, "a  b\tc"), "a_b_c");
  EXPECT_EQ(Normalize({{"type", "Prepend"}, {"prepend", "▁"}}, "hi"), "▁hi");
  EXPECT_EQ(Normalize({{"type", "Prepend"}, {"prepend", "▁"}}, ""), "");
  EXPECT_EQ(Normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, " \t hi there \u3000\n"),
            "hi there");
  EXPECT_EQ(Normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, "  hi  "), "hi  ");
  json llama2 = {{"type", "Sequence"},
                 {"normalizers",
                  {{{"type", "Prepend"}, {"prepend", "▁"}},
                   {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
  EXPECT_EQ(Normalize(llama2, "hello world"), "▁hello▁world");
  StatusOr<std::unique_ptr<Normalizer>> lower = ParseNormalizer(Node({{"type", "Lowercase"}}));
  ASSERT_FALSE(lower.ok());
  EXPECT_EQ(lower.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(lower.status().message().find("Lowercase"), std::string::npos);
}

TEST(TokenizerDecoders, Metaspace) {
  json always = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}};
  // HF drops every replacement character of the first token, not only the leading one.
  EXPECT_EQ(Decode(always, {"▁▁Hey", "▁friend", "▁▁!"}), "Hey friend  !");
  json never = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "never"}, {"split", true}};
  EXPECT_EQ(Decode(never, {"▁Hey", "▁friend"}), " Hey friend");
}

TEST(TokenizerDecoders, StripReplaceByteFallbackFuse) {
  EXPECT_EQ(Decode({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}, {"  a", " b "}), " ab ");
  EXPECT_EQ(Decode({{"type", "Strip"}, {"content", "_"}, {"start", 0}, {"stop", 2}}, {"a___", "_b"}), "a__b");
  EXPECT_EQ(Decode({{"type", "Replace"}, {"pattern", {{"String", "aa"}}}, {"content", "b"}}, {"aaa", "a", "aaaa"}),
            "baabb");
  json llama2 = {{"type", "Sequence"},
                 {"decoders",
                  {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}},
                   {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(Decode(llama2, {"▁Hey", "▁", "<0xE2>", "<0x82>", "<0xAC>", "<0x41>", "<0xFF>", "end"}),
            "Hey \uFFFD\uFFFD\uFFFD\uFFFD\uFFFDend");  // an invalid run: one U+FFFD per byte
  EXPECT_EQ(Decode({{"type", "ByteFallback"}},
                   {"<0x61>", "<0xC3>", "<0xA9>", "x", "<0xC3>", "<0x61>", "<0x+A>", "<0xzz>", "<0x0a>"}),
            "a\u00e9x\uFFFD\uFFFD\uFFFD<0xzz>\n");
  json fuse_strip = {
      {"type", "Sequence"},
      {"decoders", {{{"type", "Fuse"}}, {{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 1}}}}};
  EXPECT_EQ(Decode(fuse_strip, {" ", " ", " a", " ", " "}), " a ");
}

TEST(TokenizerDecoders, ByteLevel) {
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  // A token with a character outside the byte alphabet passes through as its UTF-8 bytes.
  EXPECT_EQ(Decode(byte_level, {"Hello", "Ġworld", "âĤ", "¬", "ð", "<unk>é", "Ġ"}),
            "Hello world\u20ac\uFFFD<unk>\uFFFD ");
  EXPECT_EQ(Decode(byte_level, {"ðŁ", "ĺ"}), "\uFFFD");  // truncated 4-byte sequence: one U+FFFD
}

std::vector<int32_t> PostProcess(const json& config, std::vector<int32_t> ids, bool add_special) {
  StatusOr<std::unique_ptr<PostProcessor>> p = ParsePostProcessor(Node(config));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (p.ok()) (*p)->Process(ids, add_special);
  return ids;
}

TEST(TokenizerPostProcessors, TemplateRobertaSequence) {
  json llama3 = {{"type", "Sequence"},
                 {"processors",
                  {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
                   {{"type", "TemplateProcessing"},
                    {"single",
                     {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                      {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                      {{"SpecialToken", {{"id", "<eot>"}, {"type_id", 0}}}}}},
                    {"pair", json::array()},
                    {"special_tokens",
                     {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {128000}}, {"tokens", {"x"}}}},
                      {"<eot>", {{"id", "<eot>"}, {"ids", {7, 8}}, {"tokens", {"a", "b"}}}}}}}}}};
  EXPECT_EQ(PostProcess(llama3, {1, 2}, true), (std::vector<int32_t>{128000, 1, 2, 7, 8}));
  EXPECT_EQ(PostProcess(llama3, {1, 2}, false), (std::vector<int32_t>{1, 2}));
  json roberta = {{"type", "RobertaProcessing"}, {"sep", {"</s>", 2}}, {"cls", {"<s>", 0}}};
  EXPECT_EQ(PostProcess(roberta, {5}, true), (std::vector<int32_t>{0, 5, 2}));
  json bad = {{"type", "TemplateProcessing"},
              {"single", {{{"SpecialToken", {{"id", "<missing>"}, {"type_id", 0}}}}}},
              {"special_tokens", json::object()}};
  StatusOr<std::unique_ptr<PostProcessor>> p = ParsePostProcessor(Node(bad));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("<missing>"), std::string::npos);
}

}  // namespace
}  // namespace df11::tokenizer_internal
