// BlockPool: free list, reference counts, prefix cache by hash chain, LRU eviction.
#include "scheduler/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace df11 {
namespace {

TEST(BlockPool, AllocatesEveryBlockOnceThenRunsOut) {
  BlockPool pool(3, 4);
  std::vector<int32_t> got;
  for (int i = 0; i < 3; ++i) got.push_back(*pool.Allocate());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_FALSE(pool.Allocate().has_value());
  EXPECT_EQ(pool.NumFree(), 0);
  EXPECT_EQ(pool.NumUsed(), 3);
  pool.Release(1);
  EXPECT_EQ(pool.NumFree(), 1);
  EXPECT_EQ(*pool.Allocate(), 1);
}

TEST(BlockPool, SharedBlockIsFreedByTheLastReference) {
  BlockPool pool(2, 4);
  const int32_t b = *pool.Allocate();
  const std::vector<int32_t> ids{1, 2, 3, 4};
  const uint64_t h = BlockPool::ChainHash(0, ids);
  pool.Register(b, h, ids);
  ASSERT_EQ(pool.Find(h, ids), b);
  pool.Acquire(b);  // a second sequence shares it
  pool.Release(b);
  EXPECT_EQ(pool.NumUsed(), 1);
  pool.Release(b);
  EXPECT_EQ(pool.NumUsed(), 0);
  EXPECT_EQ(pool.NumEvictable(), 1);  // still cached
  EXPECT_TRUE(pool.IsEvictable(b));
  pool.Acquire(b);  // revived from the cache
  EXPECT_EQ(pool.NumUsed(), 1);
  EXPECT_EQ(pool.NumEvictable(), 0);
}

TEST(BlockPool, HashChainDependsOnParentAndTokens) {
  const std::vector<int32_t> a{1, 2, 3, 4}, b{1, 2, 3, 5};
  EXPECT_NE(BlockPool::ChainHash(0, a), BlockPool::ChainHash(0, b));
  EXPECT_NE(BlockPool::ChainHash(0, a), BlockPool::ChainHash(7, a));
  EXPECT_EQ(BlockPool::ChainHash(7, a), BlockPool::ChainHash(7, a));
}

TEST(BlockPool, FindChecksTheTokensNotOnlyTheHash) {
  BlockPool pool(1, 2);
  const int32_t b = *pool.Allocate();
  const std::vector<int32_t> ids{5, 6}, other{5, 7};
  pool.Register(b, 42, ids);  // a made-up hash shared by both id lists
  EXPECT_EQ(pool.Find(42, ids), b);
  EXPECT_FALSE(pool.Find(42, other).has_value());
  EXPECT_FALSE(pool.Find(43, ids).has_value());
}

TEST(BlockPool, EvictsLeastRecentlyReleasedCachedBlockOnlyWhenNothingElseIsFree) {
  BlockPool pool(3, 1);
  std::vector<int32_t> blocks;
  for (int i = 0; i < 3; ++i) {
    blocks.push_back(*pool.Allocate());
    const std::vector<int32_t> ids{i};
    pool.Register(blocks[i], BlockPool::ChainHash(0, ids), ids);
  }
  pool.Release(blocks[2]);  // least recent
  pool.Release(blocks[0]);
  pool.Release(blocks[1]);  // most recent
  EXPECT_EQ(pool.NumFree(), 3);
  EXPECT_EQ(pool.Allocate(), blocks[2]);
  EXPECT_EQ(pool.Allocate(), blocks[0]);
  // Evicted entries are gone from the cache; the last one is still there.
  const std::vector<int32_t> id2{2}, id1{1};
  EXPECT_FALSE(pool.Find(BlockPool::ChainHash(0, id2), id2).has_value());
  EXPECT_EQ(pool.Find(BlockPool::ChainHash(0, id1), id1), blocks[1]);
}

TEST(BlockPool, NeverUsedBlocksGoBeforeEvictingCachedOnes) {
  BlockPool pool(2, 1);
  const int32_t a = *pool.Allocate();
  const std::vector<int32_t> ids{9};
  pool.Register(a, BlockPool::ChainHash(0, ids), ids);
  pool.Release(a);
  EXPECT_NE(*pool.Allocate(), a);
  EXPECT_TRUE(pool.Find(BlockPool::ChainHash(0, ids), ids).has_value());
}

}  // namespace
}  // namespace df11
