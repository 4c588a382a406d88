// The tiny-tokenizer fixture (tests/fixtures/tiny-tokenizer): ids worked out by hand from its
// merge list (BPE applies the lowest-ranked adjacent pair first), special tokens, round trips.
#include <gtest/gtest.h>

#include "runtime/tokenizer/tokenizer.h"
#include "tests/scheduler/engine_test_util.h"

namespace df11 {
namespace {

TEST(TinyTokenizer, EncodesByHandWorkedIds) {
  auto tok = Tokenizer::Load(TinyTokenizerDir());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->vocab_size(), kTinyTokenizerVocab);
  // "he" "llo" " world" "," " the" " c" "at" " is" " " "on" " the" " m" "at": " on" stays two
  // tokens because "o n" (rank 5) merges before "Ġ o" (rank 14) and there is no "Ġ on" merge.
  auto ids = (*tok)->Encode("hello world, the cat is on the mat", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{257, 304, 309, 44, 262, 274, 264, 298, 32, 261, 262, 280, 264}));
  auto chat = (*tok)->Encode("<|im_start|>user\nhi<|im_end|>\n", true);
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(*chat, (std::vector<int32_t>{kTinyImStart, 'u', 's', 260, '\n', 'h', 'i', kTinyImEnd, '\n'}));
  EXPECT_EQ((*tok)->eos_id(), kTinyImEnd);
  EXPECT_EQ((*tok)->stop_ids(), (std::vector<int32_t>{kTinyImEnd, kTinyEndOfText}));
  EXPECT_EQ((*tok)->TokenId("<|endoftext|>"), kTinyEndOfText);
}

TEST(TinyTokenizer, RoundTripsAnyText) {
  auto tok = Tokenizer::Load(TinyTokenizerDir());
  ASSERT_TRUE(tok.ok());
  for (const char* text : {"Hello, World!  1234\n\ttabs", "caf\xc3\xa9 \xf0\x9f\x98\x80 ok", ""}) {
    auto ids = (*tok)->Encode(text, false);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ((*tok)->Decode(*ids, false), text);
  }
  EXPECT_EQ((*tok)->Decode(std::vector<int32_t>{kTinyImStart, 'a', kTinyImEnd}, true), "a");
}

}  // namespace
}  // namespace df11
