// BlockPool: bookkeeping of one model's paged KV cache (runtime/model/kv_cache.h) in fixed-size blocks:
// a free list, reference counts, and a prefix cache of FULL blocks keyed by a hash chain
// (hash of the parent block's hash and this block's token ids), so sequences that share a prompt
// prefix share its blocks instead of recomputing them. A cached block whose reference count drops
// to 0 stays cached (evictable) until a fresh block is needed and none is free; evictions take the
// least recently released cached block first (LRU).
// Ids are block ids of the KvCache: [0, num_blocks).
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace df11 {

class BlockPool {
 public:
  BlockPool(int64_t num_blocks, int64_t block_size);

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t block_size() const { return block_size_; }
  // Blocks that Allocate can hand out now: never used + cached but unreferenced (evictable).
  int64_t NumFree() const { return static_cast<int64_t>(free_.size() + evictable_.size()); }
  // Blocks with a reference count > 0.
  int64_t NumUsed() const { return num_blocks() - NumFree(); }
  // Unreferenced cached blocks (counted in NumFree).
  int64_t NumEvictable() const { return static_cast<int64_t>(evictable_.size()); }

  // A block with reference count 1 and no cache entry; evicts the LRU unreferenced cached block
  // when no never-used block is left. nullopt when every block is referenced.
  std::optional<int32_t> Allocate();
  // Drops one reference; at 0 the block becomes free (or evictable if it is cached).
  void Release(int32_t block);
  void ReleaseAll(std::span<const int32_t> blocks);

  // Hash of a full block: its parent's hash (0 for the first block) chained with its token ids.
  static uint64_t ChainHash(uint64_t parent, std::span<const int32_t> tokens);

  // The cached block for (parent hash, tokens), or nullopt. Does not take a reference.
  std::optional<int32_t> Find(uint64_t hash, std::span<const int32_t> tokens) const;
  // Takes a reference on a block returned by Find (reviving it if it was evictable).
  void Acquire(int32_t block);
  // Caches a full, computed block under `hash` (no-op when that hash is already cached by another
  // block, or the block is already cached).
  void Register(int32_t block, uint64_t hash, std::span<const int32_t> tokens);
  // Whether Find would return a block that is currently unreferenced (evictable).
  bool IsEvictable(int32_t block) const { return blocks_[block].refs == 0 && blocks_[block].cached; }

 private:
  struct Block {
    int32_t refs = 0;
    bool cached = false;
    uint64_t hash = 0;
    std::vector<int32_t> tokens;                 // the cached block's ids (guards hash collisions)
    std::list<int32_t>::iterator lru;            // position in evictable_ when refs == 0 && cached
  };
  int64_t block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;                        // never used or uncached, refs == 0
  std::list<int32_t> evictable_;                     // cached, refs == 0; front = least recent
  std::unordered_map<uint64_t, int32_t> by_hash_;    // cached full blocks
};

}  // namespace df11
