// Block pool (see block_pool.h).
#include "scheduler/block_pool.h"

#include <algorithm>
#include <cassert>
#include <ranges>

namespace df11 {

BlockPool::BlockPool(int64_t num_blocks, int64_t block_size) : block_size_(block_size), blocks_(num_blocks) {
  free_.reserve(num_blocks);
  // Hand out low ids first (pop from the back).
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

std::optional<int32_t> BlockPool::Allocate() {
  int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    id = evictable_.front();
    evictable_.pop_front();
    blocks_[id].cached = false;  // its list entry is gone already
    by_hash_.erase(blocks_[id].hash);
    blocks_[id].tokens.clear();
  } else {
    return std::nullopt;
  }
  blocks_[id].refs = 1;
  return id;
}

void BlockPool::Release(int32_t block) {
  Block& b = blocks_[block];
  assert(b.refs > 0);
  if (--b.refs > 0) return;
  if (b.cached) {
    b.lru = evictable_.insert(evictable_.end(), block);
  } else {
    free_.push_back(block);
  }
}

void BlockPool::ReleaseAll(std::span<const int32_t> blocks) {
  // Release the tail first so that, among one sequence's blocks, the prefix stays cached longest.
  // NOTE: not std::views::reverse: clang 14 with libstdc++ 12 rejects reverse_view<span> (stage 2's
  // fuzz build compiles the scheduler since df11_server_parsers links it).
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) Release(*it);
}

uint64_t BlockPool::ChainHash(uint64_t parent, std::span<const int32_t> tokens) {
  // FNV-1a over the parent hash and the ids, then a splitmix64 finalizer.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(parent);
  for (int32_t t : tokens) mix(static_cast<uint32_t>(t));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

std::optional<int32_t> BlockPool::Find(uint64_t hash, std::span<const int32_t> tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  const Block& b = blocks_[it->second];
  if (!std::ranges::equal(b.tokens, tokens)) return std::nullopt;  // a hash collision
  return it->second;
}

void BlockPool::Acquire(int32_t block) {
  Block& b = blocks_[block];
  if (b.refs == 0 && b.cached) evictable_.erase(b.lru);
  ++b.refs;
}

void BlockPool::Register(int32_t block, uint64_t hash, std::span<const int32_t> tokens) {
  Block& b = blocks_[block];
  if (b.cached || by_hash_.contains(hash)) return;
  b.cached = true;
  b.hash = hash;
  b.tokens.assign(tokens.begin(), tokens.end());
  by_hash_[hash] = block;
  if (b.refs == 0) b.lru = evictable_.insert(evictable_.end(), block);
}

}  // namespace df11
