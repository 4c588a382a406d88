// Structural validation of a DF11 unit (see df11_format.h for the rules).
#include <algorithm>
#include <array>
#include <deque>
#include <string>

#include "kernels/df11_format.h"

namespace df11 {
namespace {

std::string Num(uint64_t v) { return std::to_string(v); }

// Checks the LUT rows: pointers land on existing tables at the next depth (so no cycles and at
// most 4 lookups per code), and every symbol reachable from the root has a length in [1, 32].
Status ValidateLuts(std::span<const uint8_t> luts, const std::string& what, int* max_code_bits) {
  if (luts.size() % kLutRowBytes != 0 || luts.size() < 2 * kLutRowBytes) {
    return DataLoss(what + ".luts: " + Num(luts.size()) +
                    " bytes is not [k, 256] with k >= 2 (decode tables + the code-length row)");
  }
  const int rows = static_cast<int>(luts.size() / kLutRowBytes);
  const int tables = rows - 1;
  if (tables > kMaxDecodeTables) {
    return DataLoss(what + ".luts: " + Num(tables) + " decode tables; pointers (240..255) reach at most " +
                    Num(kMaxDecodeTables));
  }
  const uint8_t* lengths = luts.data() + static_cast<size_t>(tables) * kLutRowBytes;
  std::array<int, kMaxDecodeTables> depth;
  depth.fill(-1);
  depth[0] = 0;
  std::deque<int> queue{0};
  *max_code_bits = 0;
  while (!queue.empty()) {
    const int t = queue.front();
    queue.pop_front();
    for (int b = 0; b < kLutRowBytes; ++b) {
      const int v = luts[static_cast<size_t>(t) * kLutRowBytes + b];
      const std::string where = what + ".luts[" + Num(t) + "][" + Num(b) + "]";
      if (v >= kFirstPointer) {
        const int target = 256 - v;
        if (target < 1 || target >= tables) {
          return DataLoss(where + " = " + Num(v) + " points to table " + Num(target) + ", but only " +
                          Num(tables) + " decode tables exist (missing rows?)");
        }
        if (depth[t] + 1 > 3) {
          return DataLoss(where + " continues past 4 bytes: codes longer than 32 bits are not allowed");
        }
        if (depth[target] == -1) {
          depth[target] = depth[t] + 1;
          queue.push_back(target);
        } else if (depth[target] != depth[t] + 1) {
          return DataLoss(where + " points to table " + Num(target) +
                          " which is also reached at another depth (a cycle in the tables)");
        }
      } else {
        const int bits = lengths[v];
        if (bits < 1 || bits > kMaxCodeBits) {
          return DataLoss(where + " decodes symbol " + Num(v) + " whose code length (last row) is " + Num(bits) +
                          "; it must be 1..32");
        }
        *max_code_bits = std::max(*max_code_bits, bits);
      }
    }
  }
  return Status::Ok();
}

Status ValidatePositions(const UnitView& unit, const std::string& what, UnitLayout& layout) {
  const auto& pos = unit.output_positions;
  if (pos.size() % 4 != 0) {
    return DataLoss(what + ".output_positions: " + Num(pos.size()) + " bytes is not a whole number of u32");
  }
  const uint64_t entries = pos.size() / 4;
  if (entries != layout.num_chunks + 1 && !(entries == layout.num_chunks && entries > 0)) {
    return DataLoss(what + ".output_positions: " + Num(entries) + " entries, expected " +
                    Num(layout.num_chunks + 1) + " (one per " + Num(layout.threads_per_block * kBytesPerWindow) +
                    "-byte chunk of a " + Num(layout.num_bytes) + "-byte stream, then n)");
  }
  layout.chunk_starts.resize(layout.num_chunks + 1);
  uint32_t prev = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    const uint32_t v = static_cast<uint32_t>(pos[4 * i]) | static_cast<uint32_t>(pos[4 * i + 1]) << 8 |
                       static_cast<uint32_t>(pos[4 * i + 2]) << 16 | static_cast<uint32_t>(pos[4 * i + 3]) << 24;
    const std::string where = what + ".output_positions[" + Num(i) + "] = " + Num(v);
    if (i == 0 && v != 0) return DataLoss(where + ": the first chunk must start at element 0");
    if (v < prev) return DataLoss(where + " is less than the previous entry " + Num(prev) + " (not monotonic)");
    if (v > layout.num_elements) {
      return DataLoss(where + " is past n = " + Num(layout.num_elements) + " (sign_mantissa length)");
    }
    layout.chunk_starts[i] = v;
    prev = v;
  }
  if (entries == layout.num_chunks) layout.chunk_starts[entries] = static_cast<uint32_t>(layout.num_elements);
  if (layout.chunk_starts.back() != layout.num_elements) {
    return DataLoss(what + ".output_positions: last entry " + Num(layout.chunk_starts.back()) +
                    " must equal n = " + Num(layout.num_elements));
  }
  for (uint64_t c = 0; c < layout.num_chunks; ++c) {
    layout.max_chunk_elements =
        std::max(layout.max_chunk_elements, layout.chunk_starts[c + 1] - layout.chunk_starts[c]);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<UnitLayout> ValidateUnit(const UnitView& unit, const std::string& what) {
  UnitLayout layout;
  const int tpb = unit.threads_per_block;
  if (tpb < 32 || tpb > 1024 || tpb % 32 != 0) {
    return InvalidArgument(what + ": threads_per_block " + Num(tpb) + " must be a multiple of 32 in [32, 1024]");
  }
  layout.threads_per_block = tpb;
  layout.num_elements = unit.sign_mantissa.size();
  layout.num_bytes = unit.encoded_exponent.size();
  if (layout.num_elements >= (uint64_t{1} << 32)) {
    return DataLoss(what + ": " + Num(layout.num_elements) + " elements; the format indexes them with u32");
  }
  if (layout.num_elements > 0 && layout.num_bytes == 0) {
    return DataLoss(what + ".encoded_exponent is empty but sign_mantissa holds " + Num(layout.num_elements) +
                    " elements");
  }
  // Each element needs at least one bit of stream, and the stream is at most 32 bits per element
  // plus padding: anything else is a corrupt pair of tensors.
  if (layout.num_bytes > layout.num_elements * 4 + 8) {
    return DataLoss(what + ".encoded_exponent: " + Num(layout.num_bytes) + " bytes for " +
                    Num(layout.num_elements) + " elements (more than 32 bits per element)");
  }
  const uint64_t chunk_bytes = static_cast<uint64_t>(tpb) * kBytesPerWindow;
  layout.num_chunks = (layout.num_bytes + chunk_bytes - 1) / chunk_bytes;
  layout.num_windows = (layout.num_bytes + kBytesPerWindow - 1) / kBytesPerWindow;
  const uint64_t gap_bytes = (layout.num_windows * 5 + 7) / 8;
  if (unit.gaps.size() < gap_bytes) {
    return DataLoss(what + ".gaps: " + Num(unit.gaps.size()) + " bytes, but " + Num(layout.num_windows) +
                    " windows of 5 bits need " + Num(gap_bytes));
  }
  DF11_RETURN_IF_ERROR(ValidatePositions(unit, what, layout));
  DF11_RETURN_IF_ERROR(ValidateLuts(unit.luts, what, &layout.max_code_bits));
  layout.num_luts = static_cast<int>(unit.luts.size() / kLutRowBytes);
  return layout;
}

}  // namespace df11
