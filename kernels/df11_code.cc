// Code construction for the DF11 encoder: exponent histogram, length-limited Huffman code
// lengths, canonical codes, and the hierarchical byte-indexed LUTs of the published format.
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <queue>
#include <vector>

#include "kernels/df11_code.h"
#include "kernels/base/parallel.h"

namespace df11 {

std::array<uint64_t, 256> ExponentHistogram(std::span<const uint16_t> words, int threads) {
  std::array<uint64_t, 256> total{};
  std::mutex mu;
  ParallelFor(static_cast<int64_t>(words.size()), threads, [&](int64_t begin, int64_t end, int) {
    // Four counters a symbol, taken in turn: a weight matrix's exponents repeat a few values, and
    // one counter would make each increment wait for the last one's store.
    std::array<std::array<uint32_t, 256>, 4> local{};
    std::array<uint64_t, 256> sum{};
    for (int64_t i0 = begin; i0 < end; i0 += int64_t{1} << 30) {  // uint32 counters: 2^30 at a time
      const int64_t i1 = std::min<int64_t>(end, i0 + (int64_t{1} << 30));
      int64_t i = i0;
      for (; i + 4 <= i1; i += 4) {
        ++local[0][ExponentOf(words[i])];
        ++local[1][ExponentOf(words[i + 1])];
        ++local[2][ExponentOf(words[i + 2])];
        ++local[3][ExponentOf(words[i + 3])];
      }
      for (; i < i1; ++i) ++local[0][ExponentOf(words[i])];
      for (int s = 0; s < 256; ++s) {
        sum[s] += uint64_t{local[0][s]} + local[1][s] + local[2][s] + local[3][s];
        local[0][s] = local[1][s] = local[2][s] = local[3][s] = 0;
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (int s = 0; s < 256; ++s) total[s] += sum[s];
  });
  return total;
}

double HistogramEntropyBits(const std::array<uint64_t, 256>& histogram) {
  double total = 0;
  for (uint64_t c : histogram) total += static_cast<double>(c);
  if (total == 0) return 0;
  double h = 0;
  for (uint64_t c : histogram) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / total;
    h -= p * std::log2(p);
  }
  return h;
}

namespace {

// Plain Huffman code lengths for the present symbols; ties broken by node creation order so the
// result is deterministic.
std::array<uint8_t, 256> HuffmanLengths(const std::array<uint64_t, 256>& freq) {
  std::array<uint8_t, 256> lengths{};
  struct Node {
    uint64_t weight;
    int id;
  };
  auto cmp = [](const Node& a, const Node& b) { return a.weight != b.weight ? a.weight > b.weight : a.id > b.id; };
  std::priority_queue<Node, std::vector<Node>, decltype(cmp)> heap(cmp);
  std::vector<int> parent;
  std::vector<int> leaf_symbol;
  for (int s = 0; s < 256; ++s) {
    if (freq[s] == 0) continue;
    heap.push({freq[s], static_cast<int>(parent.size())});
    parent.push_back(-1);
    leaf_symbol.push_back(s);
  }
  const size_t leaves = parent.size();
  if (leaves == 0) return lengths;
  if (leaves == 1) {
    lengths[leaf_symbol[0]] = 1;
    return lengths;
  }
  while (heap.size() > 1) {
    Node a = heap.top();
    heap.pop();
    Node b = heap.top();
    heap.pop();
    const int id = static_cast<int>(parent.size());
    parent.push_back(-1);
    parent[a.id] = id;
    parent[b.id] = id;
    heap.push({a.weight + b.weight, id});
  }
  for (size_t leaf = 0; leaf < leaves; ++leaf) {
    int depth = 0;
    for (int n = static_cast<int>(leaf); parent[n] != -1; n = parent[n]) ++depth;
    lengths[leaf_symbol[leaf]] = static_cast<uint8_t>(std::min(depth, 255));
  }
  return lengths;
}

}  // namespace

std::array<uint32_t, 256> CanonicalCodes(const std::array<uint8_t, 256>& lengths) {
  std::array<uint32_t, 256> codes{};
  std::vector<int> order;
  for (int s = 0; s < 256; ++s) {
    if (lengths[s] > 0) order.push_back(s);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return lengths[a] < lengths[b]; });
  uint64_t code = 0;
  int prev_len = order.empty() ? 0 : lengths[order[0]];
  for (int s : order) {
    code <<= (lengths[s] - prev_len);
    prev_len = lengths[s];
    codes[s] = static_cast<uint32_t>(code);
    ++code;
  }
  return codes;
}

StatusOr<std::vector<uint8_t>> BuildLuts(const std::array<uint8_t, 256>& lengths) {
  const std::array<uint32_t, 256> codes = CanonicalCodes(lengths);
  // Tables: the root, then one per (level, prefix) that a longer code passes through.
  std::map<std::pair<int, uint32_t>, int> table_index;
  table_index[{0, 0}] = 0;
  for (int level = 1; level <= 3; ++level) {
    for (int s = 0; s < 256; ++s) {
      if (lengths[s] > 8 * level) table_index.emplace(std::make_pair(level, codes[s] >> (lengths[s] - 8 * level)), 0);
    }
  }
  if (static_cast<int>(table_index.size()) > kMaxDecodeTables) {
    return InvalidArgument("code needs " + std::to_string(table_index.size()) + " decode tables (max " +
                           std::to_string(kMaxDecodeTables) + ")");
  }
  int next = 0;
  for (auto& [key, index] : table_index) index = next++;  // map order: by level, then prefix
  const int tables = next;
  std::vector<uint8_t> luts(static_cast<size_t>(tables + 1) * kLutRowBytes, 0);
  std::vector<bool> set(static_cast<size_t>(tables) * kLutRowBytes, false);
  for (const auto& [key, t] : table_index) {
    const auto [level, prefix] = key;
    for (int s = 0; s < 256; ++s) {
      const int len = lengths[s];
      if (len <= 8 * level || (codes[s] >> (len - 8 * level)) != prefix) continue;
      uint8_t* row = &luts[static_cast<size_t>(t) * kLutRowBytes];
      if (len <= 8 * level + 8) {  // the code ends in this table's byte
        const int spare = 8 * level + 8 - len;
        const uint32_t first = (codes[s] << spare) & 0xFF;
        for (uint32_t b = first; b < first + (1u << spare); ++b) {
          row[b] = static_cast<uint8_t>(s);
          set[static_cast<size_t>(t) * kLutRowBytes + b] = true;
        }
      } else {  // continue in the table of the next byte
        const uint32_t b = (codes[s] >> (len - 8 * level - 8)) & 0xFF;
        const int target = table_index.at({level + 1, codes[s] >> (len - 8 * level - 8)});
        row[b] = static_cast<uint8_t>(256 - target);
        set[static_cast<size_t>(t) * kLutRowBytes + b] = true;
      }
    }
  }
  // Bytes no code reaches (an incomplete code, e.g. a single symbol) repeat the previous entry,
  // as the reference encoder does, so every byte decodes to something.
  for (int t = 0; t < tables; ++t) {
    uint8_t* row = &luts[static_cast<size_t>(t) * kLutRowBytes];
    int first_set = -1;
    for (int b = 0; b < kLutRowBytes && first_set < 0; ++b) {
      if (set[static_cast<size_t>(t) * kLutRowBytes + b]) first_set = b;
    }
    uint8_t fill = row[first_set < 0 ? 0 : first_set];
    for (int b = 0; b < kLutRowBytes; ++b) {
      if (set[static_cast<size_t>(t) * kLutRowBytes + b]) fill = row[b]; else row[b] = fill;
    }
  }
  for (int s = 0; s < 256; ++s) luts[static_cast<size_t>(tables) * kLutRowBytes + s] = lengths[s];
  return luts;
}

StatusOr<std::array<uint8_t, 256>> BuildCodeLengths(const std::array<uint64_t, 256>& histogram) {
  uint64_t total = 0;
  for (int s = 0; s < 256; ++s) {
    if (histogram[s] == 0) continue;
    if (s >= kFirstPointer) {
      return InvalidArgument("exponent " + std::to_string(s) + " occurs " + std::to_string(histogram[s]) +
                             " times; exponents >= 240 (inf, NaN, |x| >= 2^113) cannot be DF11 symbols");
    }
    total += histogram[s];
  }
  // Flatten the distribution (raise every count to a floor) until the code fits in 32 bits and
  // 17 tables. Real weights never need it; with floor >= max count the code is near-uniform
  // (lengths 7..8 for <= 240 symbols), so the loop ends.
  for (int shift = 64; shift >= 0; --shift) {
    const uint64_t floor = shift >= 64 ? 0 : std::max<uint64_t>(1, total >> shift);
    std::array<uint64_t, 256> freq = histogram;
    for (auto& f : freq) {
      if (f > 0) f = std::max(f, floor);
    }
    std::array<uint8_t, 256> lengths = HuffmanLengths(freq);
    const int max_len = *std::max_element(lengths.begin(), lengths.end());
    if (max_len > kMaxCodeBits) continue;
    if (!BuildLuts(lengths).ok()) continue;
    return lengths;
  }
  return Internal("could not build a DF11 code for this histogram");
}

}  // namespace df11
