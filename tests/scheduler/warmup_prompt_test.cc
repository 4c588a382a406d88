// WarmupPrompt (scheduler/request.h): the prompts df11d and engine_bench warm a model up with.
#include <gtest/gtest.h>

#include <vector>

#include "scheduler/request.h"

namespace df11 {
namespace {

TEST(WarmupPrompt, LengthFitsThePositionsLeftForTheGeneratedTokens) {
  EXPECT_EQ(WarmupPrompt(512, 0, 1, 1000, 0).size(), 512u);     // positions unknown
  EXPECT_EQ(WarmupPrompt(512, 0, 1, 1000, 4096).size(), 512u);  // room enough
  EXPECT_EQ(WarmupPrompt(512, 0, 2, 1000, 512).size(), 510u);   // 510 + 2 generated = 512 positions
  EXPECT_EQ(WarmupPrompt(512, 0, 1500, 1000, 512).size(), 1u);  // never empty
}

TEST(WarmupPrompt, IdsCountUpFromTheFirstWithinTheVocabulary) {
  EXPECT_EQ(WarmupPrompt(5, 2, 1, 4, 0), (std::vector<int32_t>{2, 3, 0, 1, 2}));
  // Different first ids: no shared first block in the prefix cache.
  EXPECT_NE(WarmupPrompt(64, 0, 1, 1000, 0)[0], WarmupPrompt(64, 1, 1, 1000, 0)[0]);
}

}  // namespace
}  // namespace df11
