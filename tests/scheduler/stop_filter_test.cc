// StopFilter: stop strings across deltas, held-back text, earliest match.
#include "scheduler/stop_filter.h"

#include <gtest/gtest.h>

namespace df11 {
namespace {

TEST(StopFilter, StopSpanningDeltasIsCutAndNeverEmitted) {
  StopFilter f({"END"});
  EXPECT_EQ(f.Push("abc E"), "abc ");  // "E" could start "END": held back
  EXPECT_EQ(f.Push("N"), "");
  EXPECT_EQ(f.Push("Dxyz"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.Push("more"), "");
  EXPECT_EQ(f.Flush(), "");
}

TEST(StopFilter, HeldBackTextIsReleasedWhenItCannotBeAStop) {
  StopFilter f({"END"});
  EXPECT_EQ(f.Push("xE"), "x");
  EXPECT_EQ(f.Push("Nd"), "ENd");
  EXPECT_EQ(f.Push("EN"), "");
  EXPECT_EQ(f.Flush(), "EN");
  EXPECT_FALSE(f.stopped());
}

TEST(StopFilter, EarliestOfSeveralStopsWins) {
  StopFilter f({"world", "lo w"});
  EXPECT_EQ(f.Push("hello world"), "hel");
  EXPECT_TRUE(f.stopped());
}

TEST(StopFilter, NoStopsPassesEverythingThrough) {
  StopFilter f({});
  EXPECT_EQ(f.Push("a"), "a");
  EXPECT_EQ(f.Push("\xc3\xa9"), "\xc3\xa9");
  EXPECT_EQ(f.Flush(), "");
}

TEST(StopFilter, MultiByteStopHeldBackOnCharacterBoundaries) {
  StopFilter f({"\xc3\xa9t\xc3\xa9"});  // "été"
  EXPECT_EQ(f.Push("caf\xc3\xa9"), "caf");
  EXPECT_EQ(f.Push("t"), "");
  EXPECT_EQ(f.Push("!"), "\xc3\xa9t!");
}

TEST(StopFilter, StopAtTheVeryStart) {
  StopFilter f({"ab"});
  EXPECT_EQ(f.Push("a"), "");
  EXPECT_EQ(f.Push("b"), "");
  EXPECT_TRUE(f.stopped());
}

}  // namespace
}  // namespace df11
