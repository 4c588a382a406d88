// The types the CPU ops (cpu_ops.h) and the CUDA ops (cuda_ops.h) share, so a forward step is
// described once for both: the ragged batch (FlashInfer's indptr/indices idea, over host or device
// pointers), one layer of the paged KV cache, the attention parameters, the gated activation.
// Shapes are row-major; "[T, N]" means T rows of N contiguous elements.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace df11 {

// The ragged batch of a step: token t belongs to sequence token_seq[t] and sits at position
// positions[t]; sequence s's block table is tables[table_begin[s] .. ), covering positions
// [0, its last new position]. All int32, host pointers for the CPU ops, device pointers for the
// CUDA ops. The tokens of a sequence are consecutive. Callers validate block ids and positions.
struct BatchLayout {
  int64_t num_tokens = 0;
  const int32_t* positions = nullptr;    // [T]
  const int32_t* token_seq = nullptr;    // [T]
  const int32_t* table_begin = nullptr;  // [S]
  const int32_t* tables = nullptr;       // [sum of block table lengths]
  // CUDA attention work: num_tiles pairs {first token, token count} (AttentionTiles), each a run
  // of consecutive tokens of one sequence; tile_tokens: the largest count (it sets how a block's
  // warps split rows and keys: decode-only batches get key-split blocks). Only the CUDA
  // PagedAttention reads these.
  const int32_t* tiles = nullptr;  // [2 * num_tiles]
  int64_t num_tiles = 0;
  int64_t tile_tokens = 0;
  // CUDA split-KV (flash-decoding) for decode grids too small to fill the GPU: max_keys (at least
  // the longest sequence's keys after the step, 0 = no split) and an fp32 workspace of at least
  // cuda::AttentionWorkspaceFloats(head_dim) floats (null = no split). Splits change only fp32
  // summation orders.
  int64_t max_keys = 0;
  float* split_workspace = nullptr;
};

// The arrays a BatchLayout points at, built on the host one sequence at a time.
struct BatchArrays {
  std::vector<int32_t> positions, token_seq, table_begin, tables;

  // Appends a sequence of `num_new` tokens at positions num_cached, num_cached + 1, ...; takes the
  // blocks of `block_table` that cover positions [0, num_cached + num_new).
  void AddSequence(int64_t num_cached, int64_t num_new, std::span<const int32_t> block_table, int64_t block_size);
  int64_t num_tokens() const { return static_cast<int64_t>(positions.size()); }
  // A layout over these host vectors (no tiles).
  BatchLayout HostLayout() const;
};

// The attention tiles of a batch from its token -> sequence and token -> position maps: runs of
// consecutive tokens of one sequence, at most tile_tokens each, as pairs {first token, count};
// *max_count (if given) gets the largest count. Ordered by the position of the run's last token,
// largest first (ties in token order): a tile's attention work grows with its keys, and the CUDA
// kernel starts tiles in this order, so the longest start first and the last wave holds the
// shortest (a causal prefill's tiles otherwise end on its longest, one KV head after another).
std::vector<int32_t> AttentionTiles(std::span<const int32_t> token_seq, std::span<const int32_t> positions,
                                    int64_t tile_tokens, int64_t* max_count = nullptr);

// A layer of the paged KV cache: K and V pools [num_blocks, block_size, num_kv_heads, head_dim] of
// `Element` (fp32 on the CPU, bf16 words on CUDA). Position p of a sequence lives in block
// block_table[p / block_size], slot p % block_size.
template <typename Element>
struct PagedKvLayerOf {
  Element* k = nullptr;
  Element* v = nullptr;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

struct AttentionParams {
  int64_t num_heads = 0;       // query heads; a multiple of the cache's num_kv_heads (GQA groups)
  float scale = 1.0f;          // applied to q·k
  int64_t sliding_window = 0;  // > 0: position p sees keys j with p - j < sliding_window
  float softcap = 0.0f;        // > 0: scores = softcap * tanh(scores / softcap)
};

// The gate's activation of a gated MLP: silu(x) = x / (1 + exp(-x));
// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
enum class Activation { kSilu, kGeluTanh };

}  // namespace df11
