// Python str semantics over UTF-8 (see pystr.h).
#include "runtime/template/jinja/pystr.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

namespace df11::jinja::pystr {
namespace {

// C.UTF-8 is built into glibc >= 2.35; without it only ASCII case mapping is available.
locale_t Utf8Locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

bool IsTitleCaseChar(char32_t c) {
  return c == 0x1C5 || c == 0x1C8 || c == 0x1CB || c == 0x1F2 || (c >= 0x1F88 && c <= 0x1F8F) ||
         (c >= 0x1F98 && c <= 0x1F9F) || (c >= 0x1FA8 && c <= 0x1FAF) || c == 0x1FBC ||
         c == 0x1FCC || c == 0x1FFC;
}

// Greek extended code points whose full case mapping (SpecialCasing.txt) we do not carry.
bool IsUnsupportedSpecialCase(char32_t c) {
  return (c >= 0x1F80 && c <= 0x1FFF) || c == 0x587 || (c >= 0xFB13 && c <= 0xFB17);
}

// Unconditional multi-code-point upper-case mappings (SpecialCasing.txt subset).
const char32_t* SpecialUpper(char32_t c) {
  switch (c) {
    case 0xDF: return U"SS";
    case 0x149: return U"\u02BCN";
    case 0x1F0: return U"J\u030C";
    case 0x390: return U"\u0399\u0308\u0301";
    case 0x3B0: return U"\u03A5\u0308\u0301";
    case 0x1E96: return U"H\u0331";
    case 0x1E97: return U"T\u0308";
    case 0x1E98: return U"W\u030A";
    case 0x1E99: return U"Y\u030A";
    case 0x1E9A: return U"A\u02BE";
    case 0x1F50: return U"\u03A5\u0313";
    case 0x1F52: return U"\u03A5\u0313\u0300";
    case 0x1F54: return U"\u03A5\u0313\u0301";
    case 0x1F56: return U"\u03A5\u0313\u0342";
    case 0xFB00: return U"FF";
    case 0xFB01: return U"FI";
    case 0xFB02: return U"FL";
    case 0xFB03: return U"FFI";
    case 0xFB04: return U"FFL";
    case 0xFB05:
    case 0xFB06: return U"ST";
    default: return nullptr;
  }
}

char32_t SimpleUpper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  locale_t loc = Utf8Locale();
  return loc ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), loc)) : c;
}
char32_t SimpleLower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  locale_t loc = Utf8Locale();
  return loc ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc)) : c;
}

bool IsCased(char32_t c) { return IsUpperChar(c) || IsLowerChar(c) || IsTitleCaseChar(c); }

// Without the locale we cannot map non-ASCII letters: report them as unsupported.
bool CheckMappable(char32_t c, bool* ok) {
  if (c >= 0x80 && (!Utf8Locale() || IsUnsupportedSpecialCase(c))) {
    *ok = false;
    return false;
  }
  return true;
}

void AppendUpper(char32_t c, std::u32string* out, bool* ok) {
  if (!CheckMappable(c, ok)) { out->push_back(c); return; }
  if (const char32_t* s = SpecialUpper(c)) { out->append(s); return; }
  out->push_back(SimpleUpper(c));
}

void AppendTitle(char32_t c, std::u32string* out, bool* ok) {
  if (!CheckMappable(c, ok)) { out->push_back(c); return; }
  switch (c) {
    case 0x1C4: case 0x1C5: case 0x1C6: { out->push_back(0x1C5); return; }
    case 0x1C7: case 0x1C8: case 0x1C9: { out->push_back(0x1C8); return; }
    case 0x1CA: case 0x1CB: case 0x1CC: { out->push_back(0x1CB); return; }
    case 0x1F1: case 0x1F2: case 0x1F3: { out->push_back(0x1F2); return; }
    case 0xDF: { out->append(U"Ss"); return; }
    case 0xFB00: { out->append(U"Ff"); return; }
    case 0xFB01: { out->append(U"Fi"); return; }
    case 0xFB02: { out->append(U"Fl"); return; }
    case 0xFB03: { out->append(U"Ffi"); return; }
    case 0xFB04: { out->append(U"Ffl"); return; }
    case 0xFB05: case 0xFB06: { out->append(U"St"); return; }
    default: break;
  }
  if (c >= 0x10D0 && c <= 0x10FF) {  // Georgian Mkhedruli: title case is the letter itself
    out->push_back(c);
    return;
  }
  AppendUpper(c, out, ok);
}

// Lower-cases s[i]; Greek capital sigma becomes final sigma at the end of a word.
void AppendLower(const std::u32string& s, size_t i, std::u32string* out, bool* ok) {
  char32_t c = s[i];
  if (!CheckMappable(c, ok)) { out->push_back(c); return; }
  if (c == 0x130) { out->append(U"i\u0307"); return; }
  if (c == 0x3A3) {
    bool cased_before = i > 0 && IsCased(s[i - 1]);
    bool cased_after = i + 1 < s.size() && IsCased(s[i + 1]);
    { out->push_back(cased_before && !cased_after ? 0x3C2 : 0x3C3); return; }
  }
  out->push_back(SimpleLower(c));
}

bool IsPrintable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c <= 0xA0 || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) || c == 0x3000 ||
      c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0x600 && c <= 0x605) || c == 0x61C ||
      c == 0x6DD || c == 0x70F || c == 0x180E || (c >= 0xE000 && c <= 0xF8FF) || c >= 0xF0000 ||
      c == 0x890 || c == 0x891 || c == 0x8E2 || c == 0x110BD || c == 0x110CD || (c >= 0x13430 && c <= 0x1343F) ||
      (c >= 0x1BCA0 && c <= 0x1BCA3) || (c >= 0x1D173 && c <= 0x1D17A) ||
      (c >= 0xE0000 && c <= 0xE007F) || (c >= 0xD800 && c <= 0xDFFF)) {
    return false;
  }
  locale_t loc = Utf8Locale();
  return loc ? iswprint_l(static_cast<wint_t>(c), loc) != 0 : true;
}

size_t NextCodePointEnd(std::string_view s, size_t i) {
  unsigned char b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  return std::min(s.size(), i + n);
}

}  // namespace

std::u32string Decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    int n = b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
    char32_t cp = b & (n == 1 ? 0x1F : n == 2 ? 0x0F : 0x07);
    for (int k = 1; k <= n && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    out.push_back(cp);
    i += n + 1;
  }
  return out;
}

std::string Encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, &out);
  return out;
}

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

bool IsSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool IsLineBreak(char32_t c) {
  return (c >= 0x0A && c <= 0x0D) || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
         c == 0x2029;
}

bool IsUpperChar(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  if (IsTitleCaseChar(c)) return false;
  locale_t loc = Utf8Locale();
  return loc && iswupper_l(static_cast<wint_t>(c), loc);
}

bool IsLowerChar(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  if (IsTitleCaseChar(c)) return false;
  locale_t loc = Utf8Locale();
  return loc && iswlower_l(static_cast<wint_t>(c), loc);
}

bool IsAllCase(std::string_view s, bool upper) {
  bool cased = false;
  for (char32_t c : Decode(s)) {
    if (upper ? IsLowerChar(c) : IsUpperChar(c)) return false;
    cased |= upper ? IsUpperChar(c) : IsLowerChar(c);
  }
  return cased;
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::u32string set = chars ? Decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : IsSpace(c);
  };
  if (IsAscii(s) && (!chars || IsAscii(*chars))) {
    size_t b = 0, e = s.size();
    if (left) while (b < e && strip_it(static_cast<unsigned char>(s[b]))) ++b;
    if (right) while (e > b && strip_it(static_cast<unsigned char>(s[e - 1]))) --e;
    return std::string(s.substr(b, e - b));
  }
  std::u32string u = Decode(s);
  size_t b = 0, e = u.size();
  if (left) while (b < e && strip_it(u[b])) ++b;
  if (right) while (e > b && strip_it(u[e - 1])) --e;
  return Encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    // Byte search is exact for UTF-8 (a valid needle cannot match mid-code-point).
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit-- > 0) {
        size_t hit = s.find(*sep, pos);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      parts.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      while (maxsplit-- > 0 && end >= sep->size()) {
        size_t hit = s.rfind(*sep, end - sep->size());
        if (hit == std::string_view::npos) break;
        parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
        end = hit;
      }
      parts.emplace_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
    return parts;
  }
  std::u32string u = Decode(s);
  if (!from_right) {
    size_t i = 0, n = u.size();
    while (true) {
      while (i < n && IsSpace(u[i])) ++i;
      if (i == n) break;
      if (maxsplit-- <= 0) {
        size_t e = n;
        while (e > i && IsSpace(u[e - 1])) --e;
        parts.push_back(Encode(std::u32string_view(u).substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < n && !IsSpace(u[j])) ++j;
      parts.push_back(Encode(std::u32string_view(u).substr(i, j - i)));
      i = j;
    }
  } else {
    size_t e = u.size();
    while (true) {
      while (e > 0 && IsSpace(u[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit-- <= 0) {
        size_t b = 0;
        while (b < e && IsSpace(u[b])) ++b;
        parts.push_back(Encode(std::u32string_view(u).substr(b, e - b)));
        break;
      }
      size_t j = e;
      while (j > 0 && !IsSpace(u[j - 1])) --j;
      parts.push_back(Encode(std::u32string_view(u).substr(j, e - j)));
      e = j;
    }
    std::reverse(parts.begin(), parts.end());
  }
  return parts;
}

std::vector<std::string> SplitLines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  std::u32string u = Decode(s);
  size_t i = 0, start = 0;
  while (i < u.size()) {
    if (!IsLineBreak(u[i])) {
      ++i;
      continue;
    }
    size_t eol = i;
    i += (u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1;
    lines.push_back(Encode(std::u32string_view(u).substr(start, (keepends ? i : eol) - start)));
    start = i;
  }
  if (start < u.size()) lines.push_back(Encode(std::u32string_view(u).substr(start)));
  return lines;
}

bool Replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count, size_t max_bytes,
             std::string* out_ptr) {
  std::string& out = *out_ptr;
  out.clear();
  if (count < 0) count = INT64_MAX;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    size_t i = 0;
    while (i <= s.size()) {
      if (count-- > 0) out.append(repl);
      if (out.size() > max_bytes) return false;
      if (i == s.size()) break;
      size_t e = NextCodePointEnd(s, i);
      if (count < 0) {
        out.append(s.substr(i));
        break;
      }
      out.append(s.substr(i, e - i));
      i = e;
    }
    return out.size() <= max_bytes;
  }
  size_t pos = 0;
  while (count-- > 0) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    if (out.size() > max_bytes) return false;
    pos = hit + old.size();
  }
  out.append(s.substr(pos));
  return out.size() <= max_bytes;
}

int64_t Find(std::string_view s, std::string_view sub, bool reverse) {
  size_t hit = reverse ? s.rfind(sub) : s.find(sub);
  if (hit == std::string_view::npos) return -1;
  return static_cast<int64_t>(CountCodePoints(s.substr(0, hit)));
}

int64_t Count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(CountCodePoints(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

std::string Upper(std::string_view s, bool* ok) {
  std::u32string out;
  for (char32_t c : Decode(s)) AppendUpper(c, &out, ok);
  return Encode(out);
}

std::string Lower(std::string_view s, bool* ok) {
  std::u32string u = Decode(s), out;
  for (size_t i = 0; i < u.size(); ++i) AppendLower(u, i, &out, ok);
  return Encode(out);
}

std::string Title(std::string_view s, bool* ok) {
  std::u32string u = Decode(s), out;
  bool previous_cased = false;
  for (size_t i = 0; i < u.size(); ++i) {
    if (previous_cased) {
      AppendLower(u, i, &out, ok);
    } else {
      AppendTitle(u[i], &out, ok);
    }
    previous_cased = IsCased(u[i]);
  }
  return Encode(out);
}

std::string Capitalize(std::string_view s, bool* ok) {
  std::u32string u = Decode(s), out;
  for (size_t i = 0; i < u.size(); ++i) {
    if (i == 0) {
      AppendTitle(u[i], &out, ok);
    } else {
      AppendLower(u, i, &out, ok);
    }
  }
  return Encode(out);
}

std::string JinjaTitle(std::string_view s, bool* ok) {
  // re.split(r"([-\s({\[<]+)", s): separators and words alternate; each non-empty item gets
  // item[0].upper() + item[1:].lower().
  std::u32string u = Decode(s), out;
  auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsSpace(c); };
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    std::u32string item = u.substr(i, j - i);
    AppendUpper(item[0], &out, ok);
    for (size_t k = 1; k < item.size(); ++k) AppendLower(item, k, &out, ok);
    i = j;
  }
  return Encode(out);
}

void AppendRepr(std::string_view s, std::string* out) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  static const char* kHex = "0123456789abcdef";
  for (char32_t c : Decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out->append("\\t");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (IsPrintable(c)) {
      AppendUtf8(c, out);
    } else {
      int digits = c < 0x100 ? 2 : c < 0x10000 ? 4 : 8;
      out->append(digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U");
      for (int k = digits - 1; k >= 0; --k) out->push_back(kHex[(c >> (4 * k)) & 0xF]);
    }
  }
  out->push_back(quote);
}

std::string FloatRepr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-d.ddde+XX" shortest round-trip
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exponent = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits.substr(1));
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out.append(ebuf);
  } else if (decpt <= 0) {
    out.append("0.");
    out.append(static_cast<size_t>(-decpt), '0');
    out.append(digits);
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out.append(digits);
    out.append(decpt - digits.size(), '0');
    out.append(".0");
  } else {
    out.append(digits.substr(0, decpt));
    out.push_back('.');
    out.append(digits.substr(decpt));
  }
  return out;
}

bool SliceIndices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                  std::optional<int64_t> step, std::vector<int64_t>* indices) {
  int64_t b, e, st;
  if (!AdjustSlice(length, start, stop, step, &b, &e, &st)) return false;
  indices->clear();
  if (st > 0) {
    for (int64_t i = b; i < e; i += st) indices->push_back(i);
  } else {
    for (int64_t i = b; i > e; i += st) indices->push_back(i);
  }
  return true;
}

bool AdjustSlice(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                 std::optional<int64_t> step, int64_t* begin, int64_t* end, int64_t* stride) {
  int64_t st = step.value_or(1);
  if (st == 0) return false;
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += length;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= length) {
      x = st < 0 ? length - 1 : length;
    }
    return x;
  };
  *begin = adjust(start, st < 0 ? length - 1 : 0);
  *end = adjust(stop, st < 0 ? -1 : length);
  *stride = st;
  return true;
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out.append("&amp;"); break;
      case '<': out.append("&lt;"); break;
      case '>': out.append("&gt;"); break;
      case '"': out.append("&#34;"); break;
      case '\'': out.append("&#39;"); break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace df11::jinja::pystr
