// KV budget split between models and the fair model picker.
#include <gtest/gtest.h>

#include <algorithm>

#include "scheduler/kv_budget.h"
#include "scheduler/model_picker.h"

namespace df11 {
namespace {

TEST(KvBudget, MinimumsFirstThenRemainderByShare) {
  // 1000 bytes: minimums 2*100 + 1*50 = 250; remainder 750 split 2:1 -> 500 B (5 blocks), 250 B (5 blocks).
  auto blocks = SplitKvBudget(1000, {{"a", 100, 2, 2.0}, {"b", 50, 1, 1.0}});
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(*blocks, (std::vector<int64_t>{7, 6}));
}

TEST(KvBudget, OverflowingMinimumsAreRefusedNotWrapped) {
  // 2^58 blocks x 2^20 bytes overflows int64: before the fix the product wrapped below the budget.
  auto blocks = SplitKvBudget(int64_t{1} << 30, {{"a", int64_t{1} << 20, int64_t{1} << 58, 1.0}});
  ASSERT_FALSE(blocks.ok());
  EXPECT_EQ(blocks.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(blocks.status().message().find("more than 2^63"), std::string::npos) << blocks.status().message();
}

TEST(KvBudget, MinimumsOverBudgetAreRefusedWithNumbers) {
  auto blocks = SplitKvBudget(100, {{"a", 60, 1, 1.0}, {"b", 50, 1, 1.0}});
  ASSERT_FALSE(blocks.ok());
  EXPECT_EQ(blocks.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(blocks.status().message().find("110"), std::string::npos);
  EXPECT_NE(blocks.status().message().find("b 1 blocks"), std::string::npos);
}

std::vector<int> PickOrder(ModelPicker& picker, const std::vector<bool>& work, int steps) {
  std::vector<int> order;
  for (int i = 0; i < steps; ++i) {
    const int p = picker.Pick(work);
    order.push_back(p);
    if (p >= 0) picker.Charge(p);
  }
  return order;
}

TEST(ModelPicker, EqualWeightsRoundRobin) {
  ModelPicker picker;
  picker.Add("a", 1);
  picker.Add("b", 1);
  picker.Add("c", 1);
  EXPECT_EQ(PickOrder(picker, {true, true, true}, 6), (std::vector<int>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(PickOrder(picker, {false, false, false}, 1), (std::vector<int>{-1}));
}

TEST(ModelPicker, WeightsSplitSteps) {
  ModelPicker picker;
  picker.Add("a", 2);
  picker.Add("b", 1);
  const std::vector<int> order = PickOrder(picker, {true, true}, 9);
  EXPECT_EQ(std::count(order.begin(), order.end(), 0), 6);
  EXPECT_EQ(std::count(order.begin(), order.end(), 1), 3);
}

TEST(ModelPicker, IdleTimeEarnsNoBurst) {
  ModelPicker picker;
  picker.Add("a", 1);
  picker.Add("b", 1);
  PickOrder(picker, {true, false}, 10);  // only a busy
  // b wakes up: it alternates with a instead of taking 10 steps in a row.
  EXPECT_EQ(PickOrder(picker, {true, true}, 4), (std::vector<int>{1, 0, 1, 0}));
}

}  // namespace
}  // namespace df11
