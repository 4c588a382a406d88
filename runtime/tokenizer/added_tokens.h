// AddedVocabulary: the "added_tokens" of tokenizer.json, matched in the text before the model
// runs and never split (HF AddedVocabulary). Tokens with normalized=false are matched in the raw
// text, the others in the normalized text; matching is leftmost-longest, then each match is
// adjusted by the token's single_word/lstrip/rstrip flags exactly as HF does.
// Thread-safe: immutable after Add.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/tokenizer/bpe.h"
#include "runtime/tokenizer/components.h"

namespace df11::tokenizer_internal {

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  bool operator==(const AddedToken&) const = default;
};

class AddedVocabulary {
 public:
  // Adds `tokens` in order as HF add_tokens: a token's id is the id its content already has
  // (added tokens, then the model), else the next id after the model vocabulary. The ids in
  // tokenizer.json are ignored, as HF ignores them.
  Status Add(const std::vector<AddedToken>& tokens, const BpeModel& model, const Normalizer* normalizer);

  // Cut matches out of every split without a token id: non-normalized tokens in raw text,
  // normalized tokens in normalized text.
  void SplitRaw(std::vector<Split>& splits) const { SplitWith(raw_, splits); }
  void SplitNormalized(std::vector<Split>& splits) const { SplitWith(normalized_, splits); }

  std::optional<int32_t> TokenId(std::string_view content) const;
  // What decoding shows for an id: the (normalized, for normalized tokens) content.
  const std::string* TokenString(int32_t id) const;
  bool IsSpecialContent(std::string_view token) const { return special_.find(token) != special_.end(); }
  // Added contents (HF added_tokens_map), for vocab_size.
  const StringMap<int32_t>& contents() const { return ids_; }

 private:
  // Byte trie of token patterns for leftmost-longest matching.
  class Matcher {
   public:
    void Build(const std::vector<std::pair<std::string, int32_t>>& patterns);
    bool empty() const { return node_ids_.size() <= 1; }
    // Leftmost-longest, non-overlapping matches: (start, end, id).
    struct Match {
      size_t start, end;
      int32_t id;
    };
    void FindAll(std::string_view text, std::vector<Match>& out) const;

   private:
    std::vector<int32_t> node_ids_ = {-1};         // per node (0 = root): id of the token ending here, or -1
    std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
    bool first_byte_[256] = {};
  };
  void SplitWith(const Matcher& matcher, std::vector<Split>& splits) const;
  void FindSplits(const Matcher& matcher, const Split& in, std::vector<Split>& out) const;

  StringMap<int32_t> ids_;                                                // content -> id
  std::unordered_map<int32_t, AddedToken> tokens_;                        // id -> token
  std::unordered_map<int32_t, std::string> normalized_contents_;          // id -> normalized content if different
  std::unordered_set<std::string, StringHash, std::equal_to<>> special_;  // contents of special tokens
  Matcher raw_, normalized_;
};

}  // namespace df11::tokenizer_internal
