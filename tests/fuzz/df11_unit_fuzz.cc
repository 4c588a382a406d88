// libFuzzer target for the DF11 unit decoder: arbitrary bytes become the five unit tensors
// (sizes from a small header), then validation and, when it passes, a whole and a ranged CPU
// decode, each by the reference decoder and by DecodeUnitCpuFast: both must return the same status
// code and, on success, the same words. Any crash, hang, sanitizer report, out-of-bounds access or
// disagreement is a bug.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "kernels/df11_codec.h"

namespace {

void DecodeBoth(const df11::UnitView& view, const df11::UnitLayout& layout, size_t a, size_t b) {
  std::vector<uint16_t> ref(b - a), fast(b - a);
  const df11::Status s1 = df11::DecodeUnitCpu(view, layout, a, b, ref.data(), 1, "fuzz");
  const df11::Status s2 = df11::DecodeUnitCpuFast(view, layout, a, b, fast.data(), 1, "fuzz");
  if (s1.code() != s2.code() || (s1.ok() && ref != fast)) std::abort();
}

void Exercise(const df11::UnitView& view, size_t range_start, size_t range_len) {
  auto layout = df11::ValidateUnit(view, "fuzz");
  if (!layout.ok()) return;
  const size_t n = layout->num_elements;
  DecodeBoth(view, *layout, 0, n);
  if (n != 0) {
    const size_t a = range_start % n;
    DecodeBoth(view, *layout, a, std::min(n, a + range_len % 5000));
  }
}

// Encode mode: a valid unit made from the input, then a few bytes of its tensors flipped, so the
// decoder is fuzzed on nearly-valid units (raw bytes rarely pass validation).
void EncodeAndMutate(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const size_t mutations = data[0] % 8;
  const size_t range_start = data[0] * 131u;
  if (size < 1 + 3 * mutations) return;
  const uint8_t* edits = data + 1;
  data += 1 + 3 * mutations;
  size -= 1 + 3 * mutations;
  std::vector<uint16_t> words(size / 2);
  for (size_t i = 0; i < words.size(); ++i) {
    // Keep exponents in 100..139 (realistic) so most inputs encode.
    words[i] = static_cast<uint16_t>((data[2 * i] & 0x80) << 8 | (100 + data[2 * i + 1] % 40) << 7 | (data[2 * i] & 0x7F));
  }
  auto enc = df11::EncodeUnit(words, 1);
  if (!enc.ok()) return;
  std::vector<uint8_t>* parts[] = {&enc->luts, &enc->encoded_exponent, &enc->output_positions, &enc->gaps};
  for (size_t m = 0; m < mutations; ++m) {
    std::vector<uint8_t>& v = *parts[edits[3 * m] % 4];
    if (!v.empty()) v[(edits[3 * m + 1] * 257u + edits[3 * m]) % v.size()] ^= edits[3 * m + 2];
  }
  Exercise(enc->view(), range_start, words.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 12) return 0;
  if (data[11] & 1) {
    EncodeAndMutate(data + 12, size - 12);
    return 0;
  }
  // Header: luts rows (1 byte), element count (2 bytes), positions entries (1 byte), gap bytes (2),
  // range start/length (2 + 2), threads_per_block selector (1), flags (1). The rest is split into
  // luts, stream, sign_mantissa, positions and gaps in that order.
  const int rows = data[0] % 20;
  const size_t n = static_cast<size_t>(data[1] | data[2] << 8) % 40000;
  const size_t pos_entries = data[3] % 16;
  const size_t gap_bytes = static_cast<size_t>(data[4] | data[5] << 8) % 4096;
  const size_t range_start = static_cast<size_t>(data[6] | data[7] << 8);
  const size_t range_len = static_cast<size_t>(data[8] | data[9] << 8);
  const int tpb = (data[10] % 4 + 1) * 128;
  data += 12;
  size -= 12;
  const size_t luts_bytes = static_cast<size_t>(rows) * 256;
  if (size < luts_bytes + 4 * pos_entries + gap_bytes) return 0;
  std::vector<uint8_t> luts(data, data + luts_bytes);
  std::vector<uint8_t> positions(data + luts_bytes, data + luts_bytes + 4 * pos_entries);
  std::vector<uint8_t> gaps(data + luts_bytes + 4 * pos_entries, data + luts_bytes + 4 * pos_entries + gap_bytes);
  const uint8_t* rest = data + luts_bytes + 4 * pos_entries + gap_bytes;
  const size_t rest_size = size - luts_bytes - 4 * pos_entries - gap_bytes;
  std::vector<uint8_t> stream(rest, rest + rest_size);
  std::vector<uint8_t> sign_mantissa(n, 0x5A);
  Exercise(df11::UnitView{luts, stream, sign_mantissa, positions, gaps, tpb}, range_start, range_len);
  return 0;
}
