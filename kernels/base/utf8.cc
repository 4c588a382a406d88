// The one UTF-8 library of the project: validation, decoding, encoding, lossy decoding.
#include "kernels/base/utf8.h"

namespace df11 {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Length of the valid UTF-8 sequence at s[i], 0 if ill-formed, or -k if s ends after a valid
// but incomplete prefix of k bytes. *invalid_len gets the length of the maximal ill-formed
// subpart (Unicode "substitution of maximal subparts", as Rust's from_utf8_lossy).
int ValidSequenceLength(std::string_view s, size_t i, size_t* invalid_len) {
  auto b = static_cast<unsigned char>(s[i]);
  *invalid_len = 1;
  if (b < 0x80) return 1;
  int width;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    width = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    width = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    width = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int k = 1; k < width; ++k) {
    if (i + k >= s.size()) return -k;
    auto c = static_cast<unsigned char>(s[i + k]);
    bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) {
      *invalid_len = k;
      return 0;
    }
  }
  return width;
}

}  // namespace

size_t FindInvalidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t invalid_len;
    int len = ValidSequenceLength(s, i, &invalid_len);
    if (len <= 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string Utf8Lossy(std::string_view bytes, bool hold_incomplete, size_t* held) {
  std::string out;
  out.reserve(bytes.size());
  if (held != nullptr) *held = 0;
  size_t i = 0;
  while (i < bytes.size()) {
    size_t run = i;  // copy runs of ASCII and valid sequences in one go
    while (i < bytes.size()) {
      if (static_cast<unsigned char>(bytes[i]) < 0x80) {
        ++i;
        continue;
      }
      size_t invalid_len;
      int len = ValidSequenceLength(bytes, i, &invalid_len);
      if (len <= 0) break;
      i += len;
    }
    out.append(bytes.data() + run, i - run);
    if (i >= bytes.size()) break;
    size_t invalid_len;
    int len = ValidSequenceLength(bytes, i, &invalid_len);
    if (len < 0) {  // incomplete at the end
      if (hold_incomplete) {
        if (held != nullptr) *held = bytes.size() - i;
        return out;
      }
      AppendUtf8(kReplacement, &out);
      break;
    }
    AppendUtf8(kReplacement, &out);
    i += invalid_len;
  }
  return out;
}

}  // namespace df11
