// BpeModel: the BPE model of a tokenizer.json ("model": {"type": "BPE", ...}), merging exactly as
// HF `tokenizers` does (lowest merge rank first, leftmost first among equal ranks), with
// byte_fallback (<0xNN> tokens), unk/fuse_unk, ignore_merges, continuing_subword_prefix and
// end_of_word_suffix. Results of short pre-tokens are cached.
// Thread-safe: immutable after Parse except the cache, which is sharded and locked.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/tokenizer/components.h"

namespace df11::tokenizer_internal {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// Open-addressing map from a merge pair (left id, right id) to (rank, merged id).
class MergeMap {
 public:
  void Reserve(size_t n);
  void InsertOrAssign(int32_t left, int32_t right, uint32_t rank, int32_t merged);
  // Returns false if the pair has no merge.
  bool Find(int32_t left, int32_t right, uint32_t* rank, int32_t* merged) const {
    if (slots_.empty()) return false;
    uint64_t key = Key(left, right);
    for (size_t i = Hash(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) {
        *rank = s.rank;
        *merged = s.merged;
        return true;
      }
      if (s.key == kEmpty) return false;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    uint32_t rank = 0;
    int32_t merged = 0;
  };
  static uint64_t Key(int32_t l, int32_t r) {
    return (uint64_t{static_cast<uint32_t>(l)} << 32) | static_cast<uint32_t>(r);
  }
  size_t Hash(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_; }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

// Token string <-> id: the strings in one arena, found through an open-addressing index.
class Vocabulary {
 public:
  void Reserve(size_t entries, size_t bytes);
  // A repeated token keeps its last id (as JSON objects do).
  void InsertOrAssign(std::string_view token, int32_t id);
  std::optional<int32_t> Find(std::string_view token) const;
  size_t size() const { return entries_.size(); }
  std::string_view token(size_t i) const { return {arena_.data() + entries_[i].offset, entries_[i].length}; }
  int32_t id(size_t i) const { return entries_[i].id; }

 private:
  struct Entry {
    uint32_t offset;
    uint32_t length;
    int32_t id;
    uint32_t hash;
  };
  size_t FindSlot(std::string_view token, uint32_t hash) const;  // slot holding token, or an empty one
  void Rehash(size_t capacity);
  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<int32_t> slots_;  // index into entries_, -1 = empty
};

class BpeModel {
 public:
  // `node` is the "model" object of tokenizer.json; `tables` its vocab and merges (see
  // ParseTokenizerJson), consumed.
  static StatusOr<std::unique_ptr<BpeModel>> Parse(const JsonNode& node, BpeTables& tables);

  // Appends the ids of one pre-token (non-empty, valid UTF-8). Fails only when an unknown
  // character needs an unk_token that is missing from the vocabulary (as HF does).
  Status Tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> TokenId(std::string_view token) const { return vocab_.Find(token); }
  std::optional<std::string_view> TokenString(int32_t id) const;
  // Number of vocabulary entries (HF Model::get_vocab_size).
  size_t vocab_entries() const { return vocab_.size(); }

 private:
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;  // bytes; 0 marks a symbol merged into its left neighbour
  };
  Status LoadVocab(BpeTables& tables, const std::string& file);
  Status LoadMerges(BpeTables& tables, const std::string& file);
  void BuildLookups();  // unk/byte/character ids and long-word cut points
  void FindWordBoundaries();
  Status TokenizeWord(std::string_view word, std::vector<int32_t>& out) const;
  Status InitialSymbols(std::string_view word, std::vector<Symbol>& symbols) const;
  void MergeAll(std::vector<Symbol>& symbols) const;
  int32_t CharId(std::string_view ch, char32_t cp) const;

  Vocabulary vocab_;
  std::vector<int32_t> tokens_;  // id -> index in vocab_, -1 for gaps
  MergeMap merges_;
  std::vector<int32_t> bmp_ids_;       // code point < 0x10000 -> id of that character alone, -1 if none
  std::array<int32_t, 256> byte_ids_;  // byte -> id of "<0xNN>", -1 if none
  std::optional<std::string> unk_token_;
  int32_t unk_id_ = -1;                // -1: no unk_token, or it is missing from the vocabulary
  std::optional<std::string> prefix_;  // continuing_subword_prefix
  std::optional<std::string> suffix_;  // end_of_word_suffix
  // Long words (a whole Gemma line is one) are cut before a kWordStart character wherever no
  // vocabulary token can span the cut: the previous character is itself a token and no token
  // contains it followed by kWordStart. Each piece then merges alone, exactly as in the whole
  // word, and short pieces hit the cache.
  static constexpr char32_t kWordStart = 0x2581;  // "▁"
  bool cut_long_words_ = false;
  std::vector<char32_t> bridges_;  // sorted: characters some token has right before "▁"
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;

  static constexpr size_t kCacheShards = 16;
  static constexpr size_t kCacheEntriesPerShard = 4096;
  static constexpr size_t kMaxCachedWordBytes = 256;  // as HF MAX_LENGTH
  struct CacheShard {
    std::mutex mu;
    StringMap<std::vector<int32_t>> entries;
  };
  mutable std::array<CacheShard, kCacheShards> cache_;
};

}  // namespace df11::tokenizer_internal
