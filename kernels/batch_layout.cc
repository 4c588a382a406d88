// Host side of the ragged batch (see batch_layout.h).
#include "kernels/batch_layout.h"

#include <algorithm>

namespace df11 {

void BatchArrays::AddSequence(int64_t num_cached, int64_t num_new, std::span<const int32_t> block_table,
                              int64_t block_size) {
  const int32_t seq = static_cast<int32_t>(table_begin.size());
  for (int64_t i = 0; i < num_new; ++i) {
    positions.push_back(static_cast<int32_t>(num_cached + i));
    token_seq.push_back(seq);
  }
  table_begin.push_back(static_cast<int32_t>(tables.size()));
  const int64_t blocks = (num_cached + num_new + block_size - 1) / block_size;
  tables.insert(tables.end(), block_table.begin(), block_table.begin() + blocks);
}

BatchLayout BatchArrays::HostLayout() const {
  return {num_tokens(), positions.data(), token_seq.data(), table_begin.data(), tables.data()};
}

std::vector<int32_t> AttentionTiles(std::span<const int32_t> token_seq, std::span<const int32_t> positions,
                                    int64_t tile_tokens, int64_t* max_count) {
  struct Tile {
    int32_t first, count, last_position;
  };
  std::vector<Tile> runs;
  if (max_count != nullptr) *max_count = 0;
  const int64_t n = static_cast<int64_t>(token_seq.size());
  for (int64_t t = 0; t < n;) {
    int64_t end = t + 1;
    while (end < n && end - t < tile_tokens && token_seq[end] == token_seq[t]) ++end;
    runs.push_back({static_cast<int32_t>(t), static_cast<int32_t>(end - t), positions[end - 1]});
    if (max_count != nullptr && end - t > *max_count) *max_count = end - t;
    t = end;
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [](const Tile& a, const Tile& b) { return a.last_position > b.last_position; });
  std::vector<int32_t> tiles;
  tiles.reserve(2 * runs.size());
  for (const Tile& r : runs) {
    tiles.push_back(r.first);
    tiles.push_back(r.count);
  }
  return tiles;
}

}  // namespace df11
