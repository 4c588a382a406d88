// BPE model of the tokenizer (see tokenizer_bpe.h): loading vocab/merges and merging.
#include "runtime/tokenizer_bpe.h"

#include <algorithm>
#include <cstdio>

#include "runtime/tokenizer_unicode.h"

namespace df11::tokenizer_internal {
namespace {

constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

std::string Quoted(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }

// Optional string member where null and "" both mean "none" (HF treats "" as a no-op affix).
StatusOr<std::optional<std::string>> OptionalString(const JsonNode& node, std::string_view key) {
  std::optional<JsonNode> child = node.Find(key);
  if (!child) return std::optional<std::string>();
  DF11_ASSIGN_OR_RETURN(std::string value, child->AsString());
  if (value.empty()) return std::optional<std::string>();
  return std::optional<std::string>(std::move(value));
}

// One merge rule: "a b" (legacy) or ["a", "b"]. Returns false (with *skip) for "#version" lines.
Status ParseMergeRule(const JsonNode& rule, std::string* left, std::string* right, bool* skip) {
  const nlohmann::json& v = rule.value();
  *skip = false;
  if (v.is_string()) {
    const std::string& line = v.get_ref<const std::string&>();
    if (line.rfind("#version", 0) == 0) {
      *skip = true;
      return Status::Ok();
    }
    size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      return rule.Error("expected \"left right\" with exactly one space");
    }
    *left = line.substr(0, space);
    *right = line.substr(space + 1);
    return Status::Ok();
  }
  if (v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_string()) {
    *left = v[0].get<std::string>();
    *right = v[1].get<std::string>();
    return Status::Ok();
  }
  return rule.Error("expected string or pair");
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
    if (s.key != kEmpty) InsertOrAssign(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key), s.rank, s.merged);
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

StatusOr<std::unique_ptr<BpeModel>> BpeModel::Parse(const JsonNode& node) {
  std::unique_ptr<BpeModel> m(new BpeModel);
  if (std::optional<JsonNode> dropout = node.Find("dropout")) {
    if (!dropout->value().is_number()) return dropout->Error("expected a number");
    if (dropout->value().get<double>() != 0.0) return Unimplemented(node.file() + ": model.dropout: BPE dropout is not supported");
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

  DF11_ASSIGN_OR_RETURN(JsonNode vocab, node.Get("vocab"));
  if (!vocab.value().is_object()) return vocab.Error("expected an object of token -> id");
  m->vocab_.reserve(vocab.value().size());
  int64_t max_id = -1;
  for (auto it = vocab.value().begin(); it != vocab.value().end(); ++it) {
    const nlohmann::json& id = it.value();
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxTokenId) {
      return JsonNode(id, vocab.file(), vocab.path() + "[" + Quoted(it.key()) + "]")
          .Error("expected an integer id in [0, 2^24)");
    }
    m->vocab_.insert_or_assign(it.key(), static_cast<int32_t>(id.get<int64_t>()));
    max_id = std::max(max_id, id.get<int64_t>());
  }
  m->tokens_.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : m->vocab_) m->tokens_[id] = &token;

  DF11_ASSIGN_OR_RETURN(JsonNode merges, node.Get("merges"));
  if (!merges.value().is_array()) return merges.Error("expected an array");
  m->merges_.Reserve(merges.value().size());
  size_t prefix_len = m->prefix_ ? m->prefix_->size() : 0;
  uint32_t rank = 0;
  std::string left, right, merged;
  for (size_t i = 0; i < merges.value().size(); ++i) {
    JsonNode rule = merges.At(i);
    bool skip;
    DF11_RETURN_IF_ERROR(ParseMergeRule(rule, &left, &right, &skip));
    if (skip) continue;
    std::optional<int32_t> l = m->TokenId(left), r = m->TokenId(right);
    if (!l) return rule.Error("token " + Quoted(left) + " is not in the vocabulary");
    if (!r) return rule.Error("token " + Quoted(right) + " is not in the vocabulary");
    if (right.size() < prefix_len) return rule.Error("token " + Quoted(right) + " is shorter than the subword prefix");
    merged = left;
    merged.append(right, prefix_len);
    std::optional<int32_t> id = m->TokenId(merged);
    if (!id) return rule.Error("merged token " + Quoted(merged) + " is not in the vocabulary");
    m->merges_.InsertOrAssign(*l, *r, rank++, *id);
  }

  if (m->unk_token_) m->unk_id_ = m->TokenId(*m->unk_token_).value_or(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    m->byte_ids_[b] = m->TokenId(name).value_or(-1);
  }
  if (!m->prefix_ && !m->suffix_) {
    m->bmp_ids_.assign(0x10000, -1);
    std::string ch;
    for (char32_t cp = 0; cp < 0x10000; ++cp) {
      if (cp >= 0xD800 && cp < 0xE000) continue;
      ch.clear();
      AppendUtf8(ch, cp);
      m->bmp_ids_[cp] = m->TokenId(ch).value_or(-1);
    }
  }
  return m;
}

std::optional<int32_t> BpeModel::TokenId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::TokenString(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return nullptr;
  return tokens_[id];
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
    if (byte_fallback_ && std::all_of(s.begin(), s.end(), [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })) {
      for (char c : s) add(byte_ids_[static_cast<uint8_t>(c)], 1);
      continue;  // NOTE: a pending unk stays pending across byte tokens, as in HF
    }
    if (!unk_token_) continue;  // HF drops the character
    if (unk_id_ < 0) return InvalidArgument("tokenizer.json: model.unk_token " + Quoted(*unk_token_) + " is not in the vocabulary");
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
  auto lower_priority = [](const Entry& a, const Entry& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
  thread_local std::vector<Entry> heap;
  heap.clear();
  uint32_t rank;
  int32_t merged;
  for (size_t i = 0; i + 1 < sym.size(); ++i) {
    if (merges_.Find(sym[i].id, sym[i + 1].id, &rank, &merged)) heap.push_back({rank, static_cast<uint32_t>(i), merged});
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
    if (cur.next >= 0 && merges_.Find(cur.id, sym[cur.next].id, &rank, &merged)) push(rank, static_cast<int32_t>(top.pos), merged);
  }
}

Status BpeModel::Tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (std::optional<int32_t> id = TokenId(word)) {
      out.push_back(*id);
      return Status::Ok();
    }
  }
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
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  DF11_RETURN_IF_ERROR(InitialSymbols(word, symbols));
  MergeAll(symbols);
  size_t first = out.size();
  for (const Symbol& s : symbols) {
    if (s.len != 0) out.push_back(s.id);
  }
  if (shard != nullptr) {
    std::lock_guard<std::mutex> lock(shard->mu);
    if (shard->entries.size() >= kCacheEntriesPerShard) shard->entries.clear();
    shard->entries.emplace(word, std::vector<int32_t>(out.begin() + first, out.end()));
  }
  return Status::Ok();
}

}  // namespace df11::tokenizer_internal
