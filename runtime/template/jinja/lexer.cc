// Jinja lexer (see lexer.h). State machine equivalent to jinja2's regex rules.
#include "runtime/template/jinja/lexer.h"

#include <cstdlib>

#include "runtime/template/jinja/pystr.h"

namespace df11::jinja {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// Python `\s` at byte offset i of valid UTF-8: returns the code point's byte length, 0 if not space.
size_t SpaceLen(std::string_view s, size_t i) {
  unsigned char b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return pystr::IsSpace(b) ? 1 : 0;
  size_t n = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (i + n > s.size()) return 0;
  std::u32string cp = pystr::Decode(s.substr(i, n));
  return !cp.empty() && pystr::IsSpace(cp[0]) ? n : 0;
}

// Newlines -> "\n" and one trailing newline dropped (keep_trailing_newline=False).
std::string NormalizeNewlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out.push_back(src[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  StatusOr<std::vector<Token>> Run() {
    while (pos_ < s_.size()) DF11_RETURN_IF_ERROR(LexRoot());
    Emit(Token::Type::kEof, "", s_.size());
    return std::move(tokens_);
  }

 private:
  Status Fail(size_t at, const std::string& msg) {
    auto [line, col] = LineCol(at);
    return InvalidArgument("template syntax error at line " + std::to_string(line) + ", col " +
                           std::to_string(col) + ": " + msg);
  }

  std::pair<int, int> LineCol(size_t at) {
    // Incremental: positions only move forward, except for error reports.
    if (at < lc_pos_) lc_pos_ = 0, lc_line_ = 1, lc_col_ = 1;
    for (; lc_pos_ < at && lc_pos_ < s_.size(); ++lc_pos_) {
      if (s_[lc_pos_] == '\n') {
        ++lc_line_, lc_col_ = 1;
      } else if ((static_cast<unsigned char>(s_[lc_pos_]) & 0xC0) != 0x80) {
        ++lc_col_;
      }
    }
    return {lc_line_, lc_col_};
  }

  void Emit(Token::Type type, std::string value, size_t at) {
    auto [line, col] = LineCol(at);
    tokens_.push_back(Token{type, std::move(value), line, col});
  }

  size_t SkipSpace(size_t i) {
    while (i < s_.size()) {
      size_t n = SpaceLen(s_, i);
      if (!n) break;
      i += n;
    }
    return i;
  }

  // Applies `-` (rstrip) or lstrip_blocks to the data before a tag, then emits it.
  void EmitData(size_t begin, size_t end, char sign, bool lstrip_allowed) {
    std::string_view text(s_.data() + begin, end - begin);
    if (sign == '-') {
      size_t e = text.size();
      while (e > 0) {
        size_t k = e - 1;
        while (k > 0 && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
        if (!SpaceLen(text, k)) break;
        e = k;
      }
      text = text.substr(0, e);
    } else if (sign != '+' && lstrip_allowed) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size()) {
        size_t i = l_pos;
        while (i < text.size() && SpaceLen(text, i)) i += SpaceLen(text, i);
        if (i == text.size()) text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) Emit(Token::Type::kText, std::string(text), begin);
  }

  // Matches `{%(-|+|)\s*raw\s*(-%}\s*|%})` at i; returns the end offset or 0.
  size_t MatchRawBegin(size_t i) {
    size_t j = i + 2;
    if (j < s_.size() && (s_[j] == '-' || s_[j] == '+')) ++j;
    j = SkipSpace(j);
    if (s_.compare(j, 3, "raw") != 0) return 0;
    j = SkipSpace(j + 3);
    if (s_.compare(j, 3, "-%}") == 0) return SkipSpace(j + 3);
    if (s_.compare(j, 2, "%}") == 0) return j + 2;
    return 0;
  }

  Status LexRoot() {
    size_t t = pos_;
    while (true) {
      t = s_.find('{', t);
      if (t == std::string::npos || t + 1 >= s_.size()) {
        EmitData(pos_, s_.size(), 0, false);
        pos_ = s_.size();
        return Status::Ok();
      }
      char k = s_[t + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++t;
    }
    char kind = s_[t + 1];
    char sign = (t + 2 < s_.size() && (s_[t + 2] == '-' || s_[t + 2] == '+')) ? s_[t + 2] : 0;
    size_t raw_end = kind == '%' ? MatchRawBegin(t) : 0;
    EmitData(pos_, t, sign, kind != '{');
    size_t after = t + 2 + (sign ? 1 : 0);
    if (raw_end) return LexRaw(t, raw_end);
    if (kind == '#') return LexComment(t, after);
    Emit(kind == '{' ? Token::Type::kVarBegin : Token::Type::kBlockBegin, kind == '{' ? "{{" : "{%", t);
    pos_ = after;
    return LexTag(kind == '{');
  }

  Status LexComment(size_t begin, size_t i) {
    if (i >= s_.size()) {  // jinja2 quirk: a "{#" that ends the template is dropped silently
      pos_ = s_.size();
      return Status::Ok();
    }
    size_t e = s_.find("#}", i);
    if (e == std::string::npos) return Fail(begin, "missing end of comment tag");
    char sign = (e > i && (s_[e - 1] == '-' || s_[e - 1] == '+')) ? s_[e - 1] : 0;
    pos_ = EndTagSuffix(e + 2, sign);
    return Status::Ok();
  }

  // After an end tag (`%}` or `#}`): `-` eats following whitespace, `+` nothing, else one "\n".
  size_t EndTagSuffix(size_t after, char sign) {
    size_t end = after;
    if (sign == '-') {
      end = SkipSpace(after);
    } else if (sign != '+' && end < s_.size() && s_[end] == '\n') {
      ++end;
    }
    line_starting_ = end > 0 && s_[end - 1] == '\n';
    return end;
  }

  Status LexRaw(size_t begin, size_t body) {
    line_starting_ = s_[body - 1] == '\n';
    for (size_t t = s_.find("{%", body); t != std::string::npos; t = s_.find("{%", t + 1)) {
      size_t j = t + 2;
      char sign = (j < s_.size() && (s_[j] == '-' || s_[j] == '+')) ? s_[j] : 0;
      if (sign) ++j;
      j = SkipSpace(j);
      if (s_.compare(j, 6, "endraw") != 0) continue;
      j = SkipSpace(j + 6);
      char end_sign = 0;
      if (j < s_.size() && (s_[j] == '-' || s_[j] == '+')) end_sign = s_[j++];
      if (s_.compare(j, 2, "%}") != 0) continue;
      EmitData(body, t, sign, true);
      pos_ = EndTagSuffix(j + 2, end_sign);
      return Status::Ok();
    }
    return Fail(begin, "missing end of raw directive");
  }

  // True (and consumes it) if the tag's end delimiter starts at pos_.
  bool MatchTagEnd(bool variable) {
    size_t i = pos_;
    char sign = 0;
    if (i < s_.size() && (s_[i] == '-' || (!variable && s_[i] == '+'))) sign = s_[i++];
    if (s_.compare(i, 2, variable ? "}}" : "%}") != 0) return false;
    Emit(variable ? Token::Type::kVarEnd : Token::Type::kBlockEnd, variable ? "}}" : "%}", pos_);
    if (variable) {
      pos_ = sign == '-' ? SkipSpace(i + 2) : i + 2;
      line_starting_ = s_[pos_ - 1] == '\n';
    } else {
      pos_ = EndTagSuffix(i + 2, sign);
    }
    return true;
  }

  Status LexTag(bool variable) {
    std::vector<char> balance;
    while (true) {
      if (pos_ >= s_.size()) return Fail(pos_, std::string("unexpected end of template, expected '") + (variable ? "}}" : "%}") + "'");
      if (balance.empty() && MatchTagEnd(variable)) return Status::Ok();
      size_t ws = SkipSpace(pos_);
      if (ws != pos_) {
        pos_ = ws;
        continue;
      }
      char c = s_[pos_];
      if (IsDigit(c)) {
        DF11_RETURN_IF_ERROR(LexNumber());
      } else if (IsNameStart(c)) {
        size_t b = pos_;
        while (pos_ < s_.size() && IsNameChar(s_[pos_])) ++pos_;
        if (pos_ < s_.size() && static_cast<unsigned char>(s_[pos_]) >= 0x80) {
          return Fail(pos_, "non-ASCII identifiers are not supported");
        }
        Emit(Token::Type::kName, s_.substr(b, pos_ - b), b);
      } else if (c == '\'' || c == '"') {
        DF11_RETURN_IF_ERROR(LexString());
      } else {
        DF11_RETURN_IF_ERROR(LexOperator(&balance));
      }
    }
  }

  Status LexOperator(std::vector<char>* balance) {
    static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (s_.compare(pos_, 2, op) == 0) {
        Emit(Token::Type::kOperator, op, pos_);
        pos_ += 2;
        return Status::Ok();
      }
    }
    char c = s_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      if (static_cast<unsigned char>(c) >= 0x80) return Fail(pos_, "unexpected non-ASCII character in tag");
      return Fail(pos_, std::string("unexpected char '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance->empty()) return Fail(pos_, std::string("unexpected '") + c + "'");
      if (balance->back() != c) {
        return Fail(pos_, std::string("unexpected '") + c + "', expected '" + balance->back() + "'");
      }
      balance->pop_back();
    }
    Emit(Token::Type::kOperator, std::string(1, c), pos_);
    ++pos_;
    return Status::Ok();
  }

  // Digits with single underscores between them: (\d+_)*\d+ ; returns end or start if none.
  size_t Digits(size_t i) {
    size_t j = i;
    while (j < s_.size() && IsDigit(s_[j])) {
      ++j;
      if (j + 1 < s_.size() && s_[j] == '_' && IsDigit(s_[j + 1])) ++j;
    }
    return j;
  }

  Status LexNumber() {
    size_t b = pos_;
    bool after_dot = b > 0 && s_[b - 1] == '.';
    size_t int_end = Digits(b);
    size_t e = int_end;
    bool is_float = false;
    if (!after_dot) {
      size_t frac = e;
      if (frac < s_.size() && s_[frac] == '.' && frac + 1 < s_.size() && IsDigit(s_[frac + 1])) {
        frac = Digits(frac + 1);
      }
      size_t x = frac;
      if (x < s_.size() && (s_[x] == 'e' || s_[x] == 'E')) {
        size_t y = x + 1;
        if (y < s_.size() && (s_[y] == '+' || s_[y] == '-')) ++y;
        if (y < s_.size() && IsDigit(s_[y])) e = Digits(y), is_float = true;
      }
      if (!is_float && frac != int_end) e = frac, is_float = true;
    }
    if (is_float) {
      std::string text;
      for (size_t i = b; i < e; ++i) {
        if (s_[i] != '_') text.push_back(s_[i]);
      }
      Emit(Token::Type::kFloat, text, b);
      pos_ = e;
      return Status::Ok();
    }
    return LexInteger();
  }

  Status LexInteger() {
    size_t b = pos_;
    int base = 10;
    size_t i = b;
    if (s_[b] == '0' && b + 1 < s_.size() && std::string_view("bBoOxX").find(s_[b + 1]) != std::string_view::npos) {
      char p = static_cast<char>(s_[b + 1] | 0x20);
      base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
      i = b + 2;
    }
    auto digit_ok = [&](char c) {
      if (base == 2) return c == '0' || c == '1';
      if (base == 8) return c >= '0' && c <= '7';
      if (base == 16) return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      return IsDigit(c);
    };
    std::string digits;
    if (base == 10 && s_[b] == '0') {
      // 0(_?0)*
      ++i;
      digits = "0";
      while (i < s_.size() && (s_[i] == '0' || (s_[i] == '_' && i + 1 < s_.size() && s_[i + 1] == '0'))) ++i;
    } else {
      bool any = false;
      while (i < s_.size()) {
        if (s_[i] == '_' && i + 1 < s_.size() && digit_ok(s_[i + 1]) && (any || base != 10)) {
          ++i;
          continue;
        }
        if (!digit_ok(s_[i])) break;
        digits.push_back(s_[i++]);
        any = true;
      }
      if (!any) return Fail(b, "invalid integer literal");
    }
    errno = 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(digits.c_str(), &end, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
      return Fail(b, "integer literal out of int64 range");
    }
    Emit(Token::Type::kInteger, std::to_string(v), b);
    pos_ = i;
    return Status::Ok();
  }

  Status LexString() {
    size_t b = pos_;
    char q = s_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) return Fail(b, "unterminated string literal");
      char c = s_[pos_];
      if (c == q) {
        ++pos_;
        break;
      }
      if (c != '\\') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= s_.size()) return Fail(b, "unterminated string literal");
      DF11_RETURN_IF_ERROR(Unescape(b, &out));
    }
    if (!IsValidUtf8(out)) return Fail(b, "string literal encodes a lone surrogate");
    Emit(Token::Type::kString, std::move(out), b);
    return Status::Ok();
  }

  // Python "unicode-escape" of the escape at pos_ (a backslash); appends to *out.
  Status Unescape(size_t lit, std::string* out) {
    char e = s_[pos_ + 1];
    pos_ += 2;
    auto hex = [&](int n) -> StatusOr<char32_t> {
      char32_t v = 0;
      for (int k = 0; k < n; ++k) {
        char h = pos_ < s_.size() ? s_[pos_] : 0;
        int d = IsDigit(h) ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
        if (d < 0) return Fail(lit, "truncated \\" + std::string(1, e) + " escape in string literal");
        v = v * 16 + d;
        ++pos_;
      }
      return v;
    };
    switch (e) {
      case '\n': return Status::Ok();
      case '\\': out->push_back('\\'); return Status::Ok();
      case '\'': out->push_back('\''); return Status::Ok();
      case '"': out->push_back('"'); return Status::Ok();
      case 'a': out->push_back('\a'); return Status::Ok();
      case 'b': out->push_back('\b'); return Status::Ok();
      case 'f': out->push_back('\f'); return Status::Ok();
      case 'n': out->push_back('\n'); return Status::Ok();
      case 'r': out->push_back('\r'); return Status::Ok();
      case 't': out->push_back('\t'); return Status::Ok();
      case 'v': out->push_back('\v'); return Status::Ok();
      case 'x':
      case 'u':
      case 'U': {
        DF11_ASSIGN_OR_RETURN(char32_t cp, hex(e == 'x' ? 2 : e == 'u' ? 4 : 8));
        if (cp > 0x10FFFF) return Fail(lit, "illegal Unicode character in string literal");
        AppendUtf8(cp, out);
        return Status::Ok();
      }
      case 'N': return Fail(lit, "\\N{...} escapes are not supported");
      default: break;
    }
    if (e >= '0' && e <= '7') {
      char32_t v = e - '0';
      for (int k = 0; k < 2 && pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '7'; ++k) v = v * 8 + (s_[pos_++] - '0');
      AppendUtf8(v, out);
      return Status::Ok();
    }
    if (static_cast<unsigned char>(e) >= 0x80) {
      // backslashreplace turned the code point into "\xhh"/"\uXXXX"; "\\" then decodes to "\".
      size_t b = pos_ - 1, n = 1;
      while (b + n < s_.size() && (static_cast<unsigned char>(s_[b + n]) & 0xC0) == 0x80) ++n;
      char32_t cp = pystr::Decode(std::string_view(s_).substr(b, n))[0];
      char buf[16];
      std::snprintf(buf, sizeof(buf), cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x",
                    static_cast<unsigned>(cp));
      out->append(buf);
      pos_ = b + n;
      return Status::Ok();
    }
    out->push_back('\\');
    out->push_back(e);
    return Status::Ok();
  }

  std::string s_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
  size_t lc_pos_ = 0;
  int lc_line_ = 1, lc_col_ = 1;
};

}  // namespace

const char* TokenTypeName(Token::Type type) {
  switch (type) {
    case Token::Type::kText: return "template data";
    case Token::Type::kVarBegin: return "'{{'";
    case Token::Type::kVarEnd: return "'}}'";
    case Token::Type::kBlockBegin: return "'{%'";
    case Token::Type::kBlockEnd: return "'%}'";
    case Token::Type::kName: return "name";
    case Token::Type::kString: return "string";
    case Token::Type::kInteger: return "integer";
    case Token::Type::kFloat: return "float";
    case Token::Type::kOperator: return "operator";
    case Token::Type::kEof: return "end of template";
  }
  return "token";
}

StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  Lexer lexer(NormalizeNewlines(source));
  return lexer.Run();
}

}  // namespace df11::jinja
