// BPE model of the tokenizer (see bpe.h): loading vocab/merges and merging.
#include "runtime/tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "runtime/tokenizer/unicode.h"

namespace df11::tokenizer_internal {
namespace {

constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

// `s` as a JSON string literal for error messages (invalid UTF-8 shown as U+FFFD).
std::string Quoted(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Optional string member where null and "" both mean "none" (HF treats "" as a no-op affix).
StatusOr<std::optional<std::string>> OptionalString(const JsonNode& node, std::string_view key) {
  std::optional<JsonNode> child = node.Find(key);
  if (!child) return std::optional<std::string>();
  DF11_ASSIGN_OR_RETURN(std::string value, child->AsString());
  if (value.empty()) return std::optional<std::string>();
  return std::optional<std::string>(std::move(value));
}

// Splits a legacy "left right" rule; false if it does not have exactly one space.
bool SplitLegacyMerge(BpeTables::Merge& rule) {
  size_t space = rule.left.find(' ');
  if (space == std::string::npos || rule.left.find(' ', space + 1) != std::string::npos) return false;
  rule.right = rule.left.substr(space + 1);
  rule.left.resize(space);
  return true;
}

}  // namespace

void MergeMap::Reserve(size_t n) {
  size_t capacity = 16;
  while (capacity < n * 2) capacity *= 2;
  if (capacity <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - __builtin_ctzll(capacity);
  size_ = 0;
  for (const Slot& s : old) {
    if (s.key != kEmpty)
      InsertOrAssign(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key), s.rank, s.merged);
  }
}

void MergeMap::InsertOrAssign(int32_t left, int32_t right, uint32_t rank, int32_t merged) {
  if ((size_ + 1) * 2 > slots_.size()) Reserve(size_ + 1);
  uint64_t key = Key(left, right);
  for (size_t i = Hash(key);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == kEmpty) {
      s = Slot{key, rank, merged};
      ++size_;
      return;
    }
    if (s.key == key) {  // a repeated merge: the later rank wins, as in HF's HashMap collect
      s.rank = rank;
      s.merged = merged;
      return;
    }
  }
}

void Vocabulary::Reserve(size_t entries, size_t bytes) {
  entries_.reserve(entries);
  arena_.reserve(bytes);
  size_t capacity = 16;
  while (capacity < entries * 2) capacity *= 2;
  if (capacity > slots_.size()) Rehash(capacity);
}

void Vocabulary::Rehash(size_t capacity) {
  slots_.assign(capacity, -1);
  for (size_t i = 0; i < entries_.size(); ++i) {
    size_t slot = entries_[i].hash & (capacity - 1);
    while (slots_[slot] >= 0) slot = (slot + 1) & (capacity - 1);
    slots_[slot] = static_cast<int32_t>(i);
  }
}

size_t Vocabulary::FindSlot(std::string_view token, uint32_t hash) const {
  size_t mask = slots_.size() - 1;
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
    int32_t e = slots_[slot];
    if (e < 0) return slot;
    const Entry& entry = entries_[e];
    if (entry.hash == hash && entry.length == token.size() &&
        std::memcmp(arena_.data() + entry.offset, token.data(), token.size()) == 0) {
      return slot;
    }
  }
}

void Vocabulary::InsertOrAssign(std::string_view token, int32_t id) {
  if ((entries_.size() + 1) * 2 > slots_.size()) Rehash(std::max<size_t>(16, slots_.size() * 2));
  auto hash = static_cast<uint32_t>(StringHash{}(token));
  size_t slot = FindSlot(token, hash);
  if (slots_[slot] >= 0) {
    entries_[slots_[slot]].id = id;
    return;
  }
  slots_[slot] = static_cast<int32_t>(entries_.size());
  entries_.push_back({static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(token.size()), id, hash});
  arena_.append(token);
}

std::optional<int32_t> Vocabulary::Find(std::string_view token) const {
  if (slots_.empty()) return std::nullopt;
  int32_t e = slots_[FindSlot(token, static_cast<uint32_t>(StringHash{}(token)))];
  if (e < 0) return std::nullopt;
  return entries_[e].id;
}

StatusOr<std::unique_ptr<BpeModel>> BpeModel::Parse(const JsonNode& node, BpeTables& tables) {
  std::unique_ptr<BpeModel> m(new BpeModel);
  if (std::optional<JsonNode> dropout = node.Find("dropout")) {
    if (!dropout->value().is_number()) return dropout->Error("expected a number");
    if (dropout->value().get<double>() != 0.0)
      return Unimplemented(node.file() + ": model.dropout: BPE dropout is not supported");
  }
  if (std::optional<JsonNode> unk = node.Find("unk_token")) {
    DF11_ASSIGN_OR_RETURN(std::string value, unk->AsString());
    m->unk_token_ = std::move(value);
  }
  DF11_ASSIGN_OR_RETURN(m->prefix_, OptionalString(node, "continuing_subword_prefix"));
  DF11_ASSIGN_OR_RETURN(m->suffix_, OptionalString(node, "end_of_word_suffix"));
  DF11_ASSIGN_OR_RETURN(m->fuse_unk_, node.GetBool("fuse_unk", false));
  DF11_ASSIGN_OR_RETURN(m->byte_fallback_, node.GetBool("byte_fallback", false));
  DF11_ASSIGN_OR_RETURN(m->ignore_merges_, node.GetBool("ignore_merges", false));

  if (!tables.error.empty()) return InvalidArgument(node.file() + ": " + tables.error);
  if (!tables.has_vocab) {
    DF11_ASSIGN_OR_RETURN(JsonNode vocab, node.Get("vocab"));
    return vocab.Error("expected an object of token -> id");
  }
  if (!tables.has_merges) {
    DF11_ASSIGN_OR_RETURN(JsonNode merges, node.Get("merges"));
    return merges.Error("expected an array");
  }
  DF11_RETURN_IF_ERROR(m->LoadVocab(tables, node.file()));
  DF11_RETURN_IF_ERROR(m->LoadMerges(tables, node.file()));
  m->BuildLookups();
  return m;
}

Status BpeModel::LoadVocab(BpeTables& tables, const std::string& file) {
  size_t bytes = 0;
  for (const auto& [token, id] : tables.vocab) bytes += token.size();
  vocab_.Reserve(tables.vocab.size(), bytes);
  int64_t max_id = -1;
  for (const auto& [token, id] : tables.vocab) {
    if (id < 0 || id > kMaxTokenId) {
      return InvalidArgument(file + ": model.vocab[" + Quoted(token) + "]: expected an integer id in [0, 2^24)");
    }
    vocab_.InsertOrAssign(token, static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
  }
  tables.vocab = {};
  tokens_.assign(static_cast<size_t>(max_id + 1), -1);
  for (size_t i = 0; i < vocab_.size(); ++i) tokens_[vocab_.id(i)] = static_cast<int32_t>(i);
  return Status::Ok();
}

Status BpeModel::LoadMerges(BpeTables& tables, const std::string& file) {
  merges_.Reserve(tables.merges.size());
  size_t prefix_len = prefix_ ? prefix_->size() : 0;
  uint32_t rank = 0;
  std::string merged;
  for (BpeTables::Merge& rule : tables.merges) {
    auto error = [&](const std::string& what) {
      return InvalidArgument(file + ": model.merges[" + std::to_string(rule.index) + "]: " + what);
    };
    if (rule.legacy) {
      if (rule.left.rfind("#version", 0) == 0) continue;  // a merges.txt header line
      if (!SplitLegacyMerge(rule)) return error("expected \"left right\" with exactly one space");
    }
    std::optional<int32_t> l = TokenId(rule.left), r = TokenId(rule.right);
    if (!l) return error("token " + Quoted(rule.left) + " is not in the vocabulary");
    if (!r) return error("token " + Quoted(rule.right) + " is not in the vocabulary");
    if (rule.right.size() < prefix_len)
      return error("token " + Quoted(rule.right) + " is shorter than the subword prefix");
    merged = rule.left;
    merged.append(rule.right, prefix_len);
    std::optional<int32_t> id = TokenId(merged);
    if (!id) return error("merged token " + Quoted(merged) + " is not in the vocabulary");
    merges_.InsertOrAssign(*l, *r, rank++, *id);
  }
  tables.merges = {};
  return Status::Ok();
}

void BpeModel::BuildLookups() {
  if (unk_token_) unk_id_ = TokenId(*unk_token_).value_or(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[b] = TokenId(name).value_or(-1);
  }
  if (!prefix_ && !suffix_) {
    bmp_ids_.assign(0x10000, -1);
    std::string ch;
    for (char32_t cp = 0; cp < 0x10000; ++cp) {
      if (cp >= 0xD800 && cp < 0xE000) continue;
      ch.clear();
      AppendUtf8(cp, &ch);
      bmp_ids_[cp] = TokenId(ch).value_or(-1);
    }
  }
  FindWordBoundaries();
}

void BpeModel::FindWordBoundaries() {
  std::string start;
  AppendUtf8(kWordStart, &start);
  // ignore_merges looks the whole word up, and affixes depend on word edges: no cutting then.
  if (ignore_merges_ || prefix_ || suffix_ || !TokenId(start)) return;
  for (size_t i = 0; i < vocab_.size(); ++i) {
    std::string_view token = vocab_.token(i);
    char32_t prev = kWordStart;  // nothing bridges into a token's first character
    for (size_t pos = 0; pos < token.size();) {
      char32_t cp = NextCodePoint(token, pos);
      if (cp == kWordStart && prev != kWordStart) bridges_.push_back(prev);
      prev = cp;
    }
  }
  std::sort(bridges_.begin(), bridges_.end());
  bridges_.erase(std::unique(bridges_.begin(), bridges_.end()), bridges_.end());
  cut_long_words_ = true;
}

std::optional<std::string_view> BpeModel::TokenString(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || tokens_[id] < 0) return std::nullopt;
  return vocab_.token(tokens_[id]);
}

int32_t BpeModel::CharId(std::string_view ch, char32_t cp) const {
  if (cp < 0x10000 && !bmp_ids_.empty()) return bmp_ids_[cp];
  return TokenId(ch).value_or(-1);
}

Status BpeModel::InitialSymbols(std::string_view word, std::vector<Symbol>& symbols) const {
  auto add = [&symbols](int32_t id, uint32_t len) {
    auto n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, len});
  };
  bool have_unk = false;
  uint32_t unk_len = 0;
  std::string affixed;
  for (size_t i = 0; i < word.size();) {
    size_t start = i;
    char32_t cp = NextCodePoint(word, i);
    auto byte_len = static_cast<uint32_t>(i - start);
    std::string_view s = word.substr(start, byte_len);
    int32_t id;
    if ((prefix_ && start != 0) || (suffix_ && i == word.size())) {
      affixed.clear();
      if (prefix_ && start != 0) affixed += *prefix_;
      affixed += s;
      if (suffix_ && i == word.size()) affixed += *suffix_;
      s = affixed;
      id = TokenId(s).value_or(-1);
    } else {
      id = CharId(s, cp);
    }
    if (id >= 0) {
      if (have_unk) add(unk_id_, unk_len);
      have_unk = false;
      add(id, byte_len);
      continue;
    }
    if (byte_fallback_ &&
        std::all_of(s.begin(), s.end(), [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })) {
      for (char c : s) add(byte_ids_[static_cast<uint8_t>(c)], 1);
      continue;  // NOTE: a pending unk stays pending across byte tokens, as in HF
    }
    if (!unk_token_) continue;  // HF drops the character
    if (unk_id_ < 0)
      return InvalidArgument("tokenizer.json: model.unk_token " + Quoted(*unk_token_) + " is not in the vocabulary");
    if (have_unk && fuse_unk_) {
      unk_len += byte_len;
    } else {
      if (have_unk) add(unk_id_, unk_len);
      have_unk = true;
      unk_len = byte_len;
    }
  }
  if (have_unk) add(unk_id_, unk_len);
  return Status::Ok();
}

void BpeModel::MergeAll(std::vector<Symbol>& sym) const {
  if (sym.size() < 2) return;
  struct Entry {
    uint32_t rank;
    uint32_t pos;
    int32_t merged;
  };
  // Max-heap order of std::*_heap: the lowest rank, then the leftmost position, on top.
  auto lower_priority = [](const Entry& a, const Entry& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  thread_local std::vector<Entry> heap;
  heap.clear();
  uint32_t rank;
  int32_t merged;
  for (size_t i = 0; i + 1 < sym.size(); ++i) {
    if (merges_.Find(sym[i].id, sym[i + 1].id, &rank, &merged))
      heap.push_back({rank, static_cast<uint32_t>(i), merged});
  }
  std::make_heap(heap.begin(), heap.end(), lower_priority);
  auto push = [&](uint32_t r, int32_t pos, int32_t m) {
    heap.push_back({r, static_cast<uint32_t>(pos), m});
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    Entry top = heap.back();
    heap.pop_back();
    Symbol& cur = sym[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    int32_t next_pos = cur.next;
    Symbol right = sym[next_pos];
    // Skip stale entries: the pair at this position changed since the entry was pushed.
    if (!merges_.Find(cur.id, right.id, &rank, &merged) || merged != top.merged) continue;
    cur.id = top.merged;
    cur.len += right.len;
    cur.next = right.next;
    sym[next_pos].len = 0;
    if (right.next >= 0) sym[right.next].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0 && merges_.Find(sym[cur.prev].id, cur.id, &rank, &merged)) push(rank, cur.prev, merged);
    if (cur.next >= 0 && merges_.Find(cur.id, sym[cur.next].id, &rank, &merged))
      push(rank, static_cast<int32_t>(top.pos), merged);
  }
}

Status BpeModel::Tokenize(std::string_view word, std::vector<int32_t>& out) const {
  constexpr size_t kLongWordBytes = 64;
  if (!cut_long_words_ || word.size() <= kLongWordBytes) return TokenizeWord(word, out);
  size_t piece_start = 0, prev_start = 0;
  char32_t prev = kWordStart;
  for (size_t pos = 0; pos < word.size();) {
    size_t char_start = pos;
    char32_t cp = NextCodePoint(word, pos);
    if (cp == kWordStart && prev != kWordStart && !std::binary_search(bridges_.begin(), bridges_.end(), prev) &&
        CharId(word.substr(prev_start, char_start - prev_start), prev) >= 0) {
      DF11_RETURN_IF_ERROR(TokenizeWord(word.substr(piece_start, char_start - piece_start), out));
      piece_start = char_start;
    }
    prev = cp;
    prev_start = char_start;
  }
  return TokenizeWord(word.substr(piece_start), out);
}

Status BpeModel::TokenizeWord(std::string_view word, std::vector<int32_t>& out) const {
  CacheShard* shard = nullptr;
  if (word.size() < kMaxCachedWordBytes) {
    shard = &cache_[StringHash{}(word) % kCacheShards];
    std::lock_guard<std::mutex> lock(shard->mu);
    auto it = shard->entries.find(word);
    if (it != shard->entries.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return Status::Ok();
    }
  }
  size_t first = out.size();
  // NOTE: HF checks ignore_merges before its cache; caching the whole-word hit too gives the same
  // ids because the vocabulary never changes.
  std::optional<int32_t> whole = ignore_merges_ ? TokenId(word) : std::nullopt;
  if (whole) {
    out.push_back(*whole);
  } else {
    thread_local std::vector<Symbol> symbols;
    symbols.clear();
    DF11_RETURN_IF_ERROR(InitialSymbols(word, symbols));
    MergeAll(symbols);
    for (const Symbol& s : symbols) {
      if (s.len != 0) out.push_back(s.id);
    }
  }
  if (shard != nullptr) {
    std::lock_guard<std::mutex> lock(shard->mu);
    if (shard->entries.size() >= kCacheEntriesPerShard) shard->entries.clear();
    shard->entries.emplace(word, std::vector<int32_t>(out.begin() + first, out.end()));
  }
  return Status::Ok();
}

}  // namespace df11::tokenizer_internal
