// Unicode normalization helpers of the tokenizer (see unicode.h).
#include "runtime/tokenizer/unicode.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace df11::tokenizer_internal {
namespace {

uint32_t CombiningClass(char32_t cp) {
  if (cp < 0x300) return 0;
  const CombiningClassRange* end = kCombiningClassRanges + kNumCombiningClassRanges;
  const CombiningClassRange* it = std::upper_bound(
      kCombiningClassRanges, end, cp, [](char32_t c, const CombiningClassRange& r) { return c < r.first; });
  if (it == kCombiningClassRanges) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

const CanonicalDecomposition* FindDecomposition(char32_t cp) {
  const CanonicalDecomposition* end = kCanonicalDecompositions + kNumCanonicalDecompositions;
  const CanonicalDecomposition* it = std::lower_bound(
      kCanonicalDecompositions, end, cp, [](const CanonicalDecomposition& d, char32_t c) { return d.code_point < c; });
  return it != end && it->code_point == cp ? it : nullptr;
}

constexpr char32_t kHangulSBase = 0xAC00, kHangulLBase = 0x1100, kHangulVBase = 0x1161, kHangulTBase = 0x11A7;
constexpr int kHangulLCount = 19, kHangulVCount = 21, kHangulTCount = 28, kHangulNCount = kHangulVCount * kHangulTCount,
              kHangulSCount = kHangulLCount * kHangulNCount;

void DecomposeInto(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kHangulSBase && cp < kHangulSBase + kHangulSCount) {
    char32_t s = cp - kHangulSBase;
    out.push_back(kHangulLBase + s / kHangulNCount);
    out.push_back(kHangulVBase + (s % kHangulNCount) / kHangulTCount);
    if (s % kHangulTCount != 0) out.push_back(kHangulTBase + s % kHangulTCount);
    return;
  }
  const CanonicalDecomposition* d = cp >= 0xC0 ? FindDecomposition(cp) : nullptr;
  if (d == nullptr) {
    out.push_back(cp);
    return;
  }
  DecomposeInto(d->first, out);
  if (d->second != 0) DecomposeInto(d->second, out);
}

struct CompositionData {
  std::unordered_map<uint64_t, char32_t> pairs;  // (first << 21 | second) -> composite
  std::vector<bool> needs_work;                  // per code point: may change under NFC
};

const CompositionData& Composition() {
  static const CompositionData* data = [] {
    auto* d = new CompositionData;
    d->needs_work.assign(0x110000, false);
    for (size_t i = 0; i < kNumCanonicalDecompositions; ++i) {
      const CanonicalDecomposition& c = kCanonicalDecompositions[i];
      d->needs_work[c.code_point] = true;
      if (c.composable) {
        d->pairs[(uint64_t{c.first} << 21) | c.second] = c.code_point;
        d->needs_work[c.second] = true;
      }
    }
    for (size_t i = 0; i < kNumCombiningClassRanges; ++i) {
      for (uint32_t cp = kCombiningClassRanges[i].first; cp <= kCombiningClassRanges[i].last; ++cp) {
        d->needs_work[cp] = true;
      }
    }
    for (char32_t cp = kHangulVBase; cp < kHangulVBase + kHangulVCount; ++cp) d->needs_work[cp] = true;
    for (char32_t cp = kHangulTBase + 1; cp < kHangulTBase + kHangulTCount; ++cp) d->needs_work[cp] = true;
    return d;
  }();
  return *data;
}

char32_t ComposePair(char32_t a, char32_t b) {
  if (a >= kHangulLBase && a < kHangulLBase + kHangulLCount && b >= kHangulVBase && b < kHangulVBase + kHangulVCount) {
    return kHangulSBase + ((a - kHangulLBase) * kHangulVCount + (b - kHangulVBase)) * kHangulTCount;
  }
  if (a >= kHangulSBase && a < kHangulSBase + kHangulSCount && (a - kHangulSBase) % kHangulTCount == 0 &&
      b > kHangulTBase && b < kHangulTBase + kHangulTCount) {
    return a + (b - kHangulTBase);
  }
  const auto& pairs = Composition().pairs;
  auto it = pairs.find((uint64_t{a} << 21) | b);
  return it == pairs.end() ? 0 : it->second;
}

// Full canonical decomposition followed by canonical ordering.
std::vector<char32_t> DecomposeOrdered(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) DecomposeInto(NextCodePoint(s, i), out);
  // Stable sort of every run of non-starters by combining class.
  for (size_t i = 0; i < out.size();) {
    if (CombiningClass(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < out.size() && CombiningClass(out[j]) != 0) ++j;
    std::stable_sort(out.begin() + i, out.begin() + j,
                     [](char32_t a, char32_t b) { return CombiningClass(a) < CombiningClass(b); });
    i = j;
  }
  return out;
}

// True if `cp` may change under NFC (or, with `nfd`, NFD) or combine with its neighbours.
bool NeedsWork(char32_t cp, bool nfd) {
  if (cp < (nfd ? 0xC0u : 0x300u)) return false;
  if (Composition().needs_work[cp]) return true;
  return nfd && cp >= kHangulSBase && cp < kHangulSBase + kHangulSCount;
}

// Normalizes only the stretches of `s` that may change: each starts at the last character that
// needs no work (nothing composes or reorders across it) and ends before the next such one.
template <typename Fn>
std::string NormalizeStretches(std::string_view s, bool nfd, Fn normalize) {
  std::string out;
  size_t copied = 0, boundary = 0;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0xC3) {  // below U+00C0: never changes
      i += Utf8SequenceLength(lead);
      boundary = start;
      continue;
    }
    if (!NeedsWork(NextCodePoint(s, i), nfd)) {
      boundary = start;
      continue;
    }
    size_t end = i;
    while (end < s.size()) {
      size_t next = end;
      if (!NeedsWork(NextCodePoint(s, next), nfd)) break;
      end = next;
    }
    out.append(s.substr(copied, boundary - copied));
    out += normalize(s.substr(boundary, end - boundary));
    copied = end;
    i = end;
  }
  if (copied == 0) return std::string(s);
  out.append(s.substr(copied));
  return out;
}

std::string NfdStretch(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char32_t cp : DecomposeOrdered(s)) AppendUtf8(cp, &out);
  return out;
}

std::string NfcStretch(std::string_view s) {
  std::vector<char32_t> chars = DecomposeOrdered(s);
  std::vector<char32_t> composed;
  composed.reserve(chars.size());
  size_t starter = SIZE_MAX;  // index in `composed` of the last starter
  uint32_t last_ccc = 0;
  for (char32_t cp : chars) {
    uint32_t ccc = CombiningClass(cp);
    if (starter != SIZE_MAX) {
      bool adjacent = starter + 1 == composed.size();
      if (adjacent || (last_ccc != 0 && last_ccc < ccc)) {
        if (char32_t c = ComposePair(composed[starter], cp); c != 0) {
          composed[starter] = c;
          continue;
        }
      }
    }
    if (ccc == 0) starter = composed.size();
    last_ccc = ccc;
    composed.push_back(cp);
  }
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : composed) AppendUtf8(cp, &out);
  return out;
}

}  // namespace

bool IsWhiteSpace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t LeadingSpaceLength(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!IsWhiteSpace(NextCodePoint(s, next))) break;
    i = next;
  }
  return i;
}

size_t TrailingSpaceStart(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!IsWhiteSpace(NextCodePoint(s, i))) break;
    end = start;
  }
  return end;
}

std::string NormalizeNfd(std::string_view s) { return NormalizeStretches(s, /*nfd=*/true, NfdStretch); }

std::string NormalizeNfc(std::string_view s) { return NormalizeStretches(s, /*nfd=*/false, NfcStretch); }

}  // namespace df11::tokenizer_internal
