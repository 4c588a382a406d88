// Attribute and item access (jinja2 sandbox getattr/getitem) and the Python methods of
// str, dict, list and tuple that templates call (see builtins.h).
#include <algorithm>
#include <optional>

#include "runtime/template/jinja/builtins.h"
#include "runtime/template/jinja/pystr.h"

namespace df11::jinja {
namespace {

using Method = StatusOr<Value> (*)(Interpreter&, const Value& self, CallArgs&);

std::string ObjectRepr(const Value& obj) {
  if (obj.is_none()) return "None";
  return std::string(obj.TypeName()) + " object";
}

Value MissingAttr(const Value& obj, const std::string& name) {
  return Value::Undefined("'" + ObjectRepr(obj) + "' has no attribute '" + name + "'");
}

Value Bind(const Value& self, const std::string& qualname, Method m) {
  return Value::MakeFunction(qualname, [self, m](Interpreter& in, CallArgs& args) { return m(in, self, args); });
}

Value Unsafe(const Value& obj, const std::string& name) {
  return Value::Undefined("access to attribute '" + name + "' of '" + obj.TypeName() +
                          "' object is unsafe (the sandbox forbids mutation)");
}

Value NotSupported(const std::string& qualname) {
  return Value::MakeFunction(qualname, [qualname](Interpreter&, CallArgs&) -> StatusOr<Value> {
    return Unimplemented(qualname + "() is not supported");
  });
}

StatusOr<std::optional<std::string>> OptStr(const Value& v, const char* what) {
  if (v.is_none() || v.is_undefined()) return std::optional<std::string>();
  if (!v.is_string()) return TypeError(std::string(what) + " arg must be None or str");
  return std::optional<std::string>(v.str());
}

// ---- str methods ----
StatusOr<Value> StrStrip(Interpreter&, const Value& self, CallArgs& a, bool left, bool right, const char* n) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs(n, a, {{"chars", false, Value::None()}}));
  DF11_ASSIGN_OR_RETURN(auto chars, OptStr(p[0], n));
  return Value(pystr::Strip(self.str(), chars, left, right));
}
StatusOr<Value> Strip(Interpreter& in, const Value& s, CallArgs& a) { return StrStrip(in, s, a, true, true, "str.strip"); }
StatusOr<Value> LStrip(Interpreter& in, const Value& s, CallArgs& a) { return StrStrip(in, s, a, true, false, "str.lstrip"); }
StatusOr<Value> RStrip(Interpreter& in, const Value& s, CallArgs& a) { return StrStrip(in, s, a, false, true, "str.rstrip"); }

StatusOr<Value> StrSplit(const Value& self, CallArgs& a, bool from_right) {
  const char* n = from_right ? "str.rsplit" : "str.split";
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs(n, a, {{"sep", false, Value::None()}, {"maxsplit", false, Value(-1)}}));
  DF11_ASSIGN_OR_RETURN(auto sep, OptStr(p[0], n));
  if (sep && sep->empty()) return InvalidArgument("ValueError: empty separator");
  if (!p[1].is_integral()) return TypeError("maxsplit must be an integer");
  std::vector<Value> parts;
  for (auto& s : pystr::Split(self.str(), sep, p[1].as_int(), from_right)) parts.emplace_back(std::move(s));
  return Value::List(std::move(parts));
}
StatusOr<Value> Split(Interpreter&, const Value& s, CallArgs& a) { return StrSplit(s, a, false); }
StatusOr<Value> RSplit(Interpreter&, const Value& s, CallArgs& a) { return StrSplit(s, a, true); }

StatusOr<Value> SplitLines(Interpreter&, const Value& self, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("str.splitlines", a, {{"keepends", false, Value(false)}}));
  std::vector<Value> lines;
  for (auto& s : pystr::SplitLines(self.str(), p[0].Truthy())) lines.emplace_back(std::move(s));
  return Value::List(std::move(lines));
}

// Code-point window [start:end] of self for startswith/endswith/find/count.
StatusOr<std::string> Window(const Value& self, const Value& start, const Value& end) {
  if ((start.is_none() || start.is_undefined()) && (end.is_none() || end.is_undefined())) return self.str();
  std::optional<int64_t> b, e;
  if (start.is_integral()) b = start.as_int(); else if (!start.is_none() && !start.is_undefined()) return TypeError("slice indices must be integers or None");
  if (end.is_integral()) e = end.as_int(); else if (!end.is_none() && !end.is_undefined()) return TypeError("slice indices must be integers or None");
  std::u32string u = pystr::Decode(self.str());
  std::vector<int64_t> idx;
  pystr::SliceIndices(static_cast<int64_t>(u.size()), b, e, std::nullopt, &idx);
  if (idx.empty()) return std::string();
  return pystr::Encode(std::u32string_view(u).substr(idx.front(), idx.size()));
}

StatusOr<Value> StartsEnds(const Value& self, CallArgs& a, bool ends) {
  const char* n = ends ? "str.endswith" : "str.startswith";
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs(n, a, {{"prefix"}, {"start", false, Value::None()}, {"end", false, Value::None()}}));
  DF11_ASSIGN_OR_RETURN(std::string s, Window(self, p[1], p[2]));
  std::vector<Value> options = p[0].is_tuple() ? p[0].items() : std::vector<Value>{p[0]};
  for (const Value& o : options) {
    if (!o.is_string()) return TypeError(std::string(n) + " first arg must be str or a tuple of str, not " + o.TypeName());
    const std::string& x = o.str();
    if (s.size() >= x.size() && (ends ? s.compare(s.size() - x.size(), x.size(), x) : s.compare(0, x.size(), x)) == 0) {
      return Value(true);
    }
  }
  return Value(false);
}
StatusOr<Value> StartsWith(Interpreter&, const Value& s, CallArgs& a) { return StartsEnds(s, a, false); }
StatusOr<Value> EndsWith(Interpreter&, const Value& s, CallArgs& a) { return StartsEnds(s, a, true); }

StatusOr<Value> Replace(Interpreter& in, const Value& self, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("str.replace", a, {{"old"}, {"new"}, {"count", false, Value(-1)}}));
  if (!p[0].is_string() || !p[1].is_string() || !p[2].is_integral()) return TypeError("str.replace() argument types");
  std::string out;
  if (!pystr::Replace(self.str(), p[0].str(), p[1].str(), p[2].as_int(), in.MaxStringBytes(), &out)) {
    return in.TooBig();
  }
  return Value(std::move(out));
}

StatusOr<Value> FindImpl(const Value& self, CallArgs& a, bool reverse, bool raise, const char* n) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs(n, a, {{"sub"}, {"start", false, Value::None()}, {"end", false, Value::None()}}));
  if (!p[0].is_string()) return TypeError(std::string(n) + "() argument must be str");
  int64_t offset = 0;
  if (p[1].is_integral()) {
    std::vector<int64_t> idx;
    int64_t len = static_cast<int64_t>(CountCodePoints(self.str()));
    pystr::SliceIndices(len, p[1].as_int(), std::nullopt, std::nullopt, &idx);
    offset = idx.empty() ? len : idx.front();
  }
  DF11_ASSIGN_OR_RETURN(std::string s, Window(self, p[1], p[2]));
  int64_t r = pystr::Find(s, p[0].str(), reverse);
  if (r < 0 && p[1].is_integral() && p[0].str().empty()) r = -1;
  if (r < 0) {
    if (raise) return InvalidArgument("ValueError: substring not found");
    return Value(int64_t{-1});
  }
  return Value(r + offset);
}
StatusOr<Value> Find(Interpreter&, const Value& s, CallArgs& a) { return FindImpl(s, a, false, false, "str.find"); }
StatusOr<Value> RFind(Interpreter&, const Value& s, CallArgs& a) { return FindImpl(s, a, true, false, "str.rfind"); }
StatusOr<Value> Index(Interpreter&, const Value& s, CallArgs& a) { return FindImpl(s, a, false, true, "str.index"); }
StatusOr<Value> RIndex(Interpreter&, const Value& s, CallArgs& a) { return FindImpl(s, a, true, true, "str.rindex"); }

StatusOr<Value> Count(Interpreter&, const Value& self, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("str.count", a, {{"sub"}, {"start", false, Value::None()}, {"end", false, Value::None()}}));
  if (!p[0].is_string()) return TypeError("str.count() argument must be str");
  DF11_ASSIGN_OR_RETURN(std::string s, Window(self, p[1], p[2]));
  return Value(pystr::Count(s, p[0].str()));
}

StatusOr<Value> CaseMap(const Value& self, CallArgs& a, const char* n, std::string (*fn)(std::string_view, bool*)) {
  DF11_RETURN_IF_ERROR(BindArgs(n, a, {}).status());
  bool ok = true;
  std::string out = fn(self.str(), &ok);
  if (!ok) return Unimplemented(std::string(n) + "() of this text needs Unicode case mappings that are not supported");
  return Value(std::move(out));
}
StatusOr<Value> Upper(Interpreter&, const Value& s, CallArgs& a) { return CaseMap(s, a, "str.upper", pystr::Upper); }
StatusOr<Value> Lower(Interpreter&, const Value& s, CallArgs& a) { return CaseMap(s, a, "str.lower", pystr::Lower); }
StatusOr<Value> Title(Interpreter&, const Value& s, CallArgs& a) { return CaseMap(s, a, "str.title", pystr::Title); }
StatusOr<Value> Capitalize(Interpreter&, const Value& s, CallArgs& a) { return CaseMap(s, a, "str.capitalize", pystr::Capitalize); }

StatusOr<Value> Join(Interpreter& in, const Value& self, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("str.join", a, {{"iterable"}}));
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(p[0]));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) return TypeError("sequence item " + std::to_string(i) + ": expected str instance, " + items[i].TypeName() + " found");
    if (i) out += self.str();
    out += items[i].str();
    DF11_RETURN_IF_ERROR(in.CheckSize(out.size()));
  }
  return Value(std::move(out));
}

// str.isdigit/isalpha/isalnum: each code point is a definite yes, a definite no, or (for
// uncased non-ASCII letters, digits of other scripts, ...) unknown without Unicode tables,
// in which case we refuse rather than guess.
enum class Tri { kNo, kYes, kUnknown };
StatusOr<Value> CharClass(const Value& self, CallArgs& a, const char* n, Tri (*classify)(char32_t)) {
  DF11_RETURN_IF_ERROR(BindArgs(n, a, {}).status());
  std::u32string u = pystr::Decode(self.str());
  bool unknown = false;
  for (char32_t c : u) {
    Tri t = classify(c);
    if (t == Tri::kNo) return Value(false);
    unknown |= t == Tri::kUnknown;
  }
  if (unknown) return Unimplemented(std::string(n) + "() of this non-ASCII text needs Unicode tables we do not carry");
  return Value(!u.empty());
}
bool IsAsciiLetter(char32_t c) { return c < 0x80 && (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool IsAsciiDigit(char32_t c) { return c >= '0' && c <= '9'; }
bool IsCasedLetter(char32_t c) { return c >= 0x80 && (pystr::IsUpperChar(c) || pystr::IsLowerChar(c)); }
Tri DigitClass(char32_t c) {
  if (c < 0x80) return IsAsciiDigit(c) ? Tri::kYes : Tri::kNo;
  return (pystr::IsSpace(c) || IsCasedLetter(c)) ? Tri::kNo : Tri::kUnknown;
}
Tri AlphaClass(char32_t c) {
  if (c < 0x80) return IsAsciiLetter(c) ? Tri::kYes : Tri::kNo;
  if (IsCasedLetter(c)) return Tri::kYes;
  return pystr::IsSpace(c) ? Tri::kNo : Tri::kUnknown;
}
Tri AlnumClass(char32_t c) {
  if (c < 0x80) return (IsAsciiLetter(c) || IsAsciiDigit(c)) ? Tri::kYes : Tri::kNo;
  if (IsCasedLetter(c)) return Tri::kYes;
  return pystr::IsSpace(c) ? Tri::kNo : Tri::kUnknown;
}
Tri SpaceClass(char32_t c) { return pystr::IsSpace(c) ? Tri::kYes : Tri::kNo; }
StatusOr<Value> IsSpace(Interpreter&, const Value& s, CallArgs& a) { return CharClass(s, a, "str.isspace", SpaceClass); }
StatusOr<Value> IsDigit(Interpreter&, const Value& s, CallArgs& a) { return CharClass(s, a, "str.isdigit", DigitClass); }
StatusOr<Value> IsAlpha(Interpreter&, const Value& s, CallArgs& a) { return CharClass(s, a, "str.isalpha", AlphaClass); }
StatusOr<Value> IsAlnum(Interpreter&, const Value& s, CallArgs& a) { return CharClass(s, a, "str.isalnum", AlnumClass); }
StatusOr<Value> CasePredicate(const Value& self, CallArgs& a, bool upper) {
  DF11_RETURN_IF_ERROR(BindArgs(upper ? "str.isupper" : "str.islower", a, {}).status());
  return Value(pystr::IsAllCase(self.str(), upper));
}
StatusOr<Value> IsUpper(Interpreter&, const Value& s, CallArgs& a) { return CasePredicate(s, a, true); }
StatusOr<Value> IsLower(Interpreter&, const Value& s, CallArgs& a) { return CasePredicate(s, a, false); }

StatusOr<Value> Pad(const Value& self, CallArgs& a, const char* n, int mode) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs(n, a, {{"width"}, {"fillchar", false, Value(" ")}}));
  if (!p[0].is_integral() || !p[1].is_string() || CountCodePoints(p[1].str()) != 1) return TypeError(std::string(n) + "() argument types");
  int64_t len = static_cast<int64_t>(CountCodePoints(self.str())), width = p[0].as_int();
  if (width <= len) return self.is_string() ? Value(self.str()) : self;
  if (width > (16 << 20)) return ResourceExhausted(std::string(n) + "() width too large");
  int64_t marg = width - len, left = mode == 0 ? marg / 2 + (marg & width & 1) : (mode < 0 ? 0 : marg);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += p[1].str();
  out += self.str();
  for (int64_t i = 0; i < marg - left; ++i) out += p[1].str();
  return Value(std::move(out));
}
StatusOr<Value> Center(Interpreter&, const Value& s, CallArgs& a) { return Pad(s, a, "str.center", 0); }
StatusOr<Value> LJust(Interpreter&, const Value& s, CallArgs& a) { return Pad(s, a, "str.ljust", -1); }
StatusOr<Value> RJust(Interpreter&, const Value& s, CallArgs& a) { return Pad(s, a, "str.rjust", 1); }

StatusOr<Value> RemoveAffix(const Value& self, CallArgs& a, bool prefix) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs(prefix ? "str.removeprefix" : "str.removesuffix", a, {{"affix"}}));
  if (!p[0].is_string()) return TypeError("removeprefix/removesuffix argument must be str");
  const std::string &s = self.str(), &x = p[0].str();
  if (prefix && s.compare(0, x.size(), x) == 0) return Value(s.substr(x.size()));
  if (!prefix && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0) return Value(s.substr(0, s.size() - x.size()));
  return Value(s);
}
StatusOr<Value> RemovePrefix(Interpreter&, const Value& s, CallArgs& a) { return RemoveAffix(s, a, true); }
StatusOr<Value> RemoveSuffix(Interpreter&, const Value& s, CallArgs& a) { return RemoveAffix(s, a, false); }

StatusOr<Value> PartitionImpl(const Value& self, CallArgs& a, bool reverse) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs(reverse ? "str.rpartition" : "str.partition", a, {{"sep"}}));
  if (!p[0].is_string() || p[0].str().empty()) return InvalidArgument("ValueError: partition separator must be a non-empty str");
  const std::string &s = self.str(), &sep = p[0].str();
  size_t hit = reverse ? s.rfind(sep) : s.find(sep);
  if (hit == std::string::npos) {
    return reverse ? Value::Tuple({Value(""), Value(""), Value(s)}) : Value::Tuple({Value(s), Value(""), Value("")});
  }
  return Value::Tuple({Value(s.substr(0, hit)), Value(sep), Value(s.substr(hit + sep.size()))});
}
StatusOr<Value> Partition(Interpreter&, const Value& s, CallArgs& a) { return PartitionImpl(s, a, false); }
StatusOr<Value> RPartition(Interpreter&, const Value& s, CallArgs& a) { return PartitionImpl(s, a, true); }

StatusOr<Value> ZFill(Interpreter&, const Value& self, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("str.zfill", a, {{"width"}}));
  if (!p[0].is_integral()) return TypeError("str.zfill() width must be int");
  const std::string& s = self.str();
  int64_t len = static_cast<int64_t>(CountCodePoints(s)), width = p[0].as_int();
  if (width <= len) return Value(s);
  if (width > (16 << 20)) return ResourceExhausted("str.zfill() width too large");
  size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  return Value(s.substr(0, sign) + std::string(width - len, '0') + s.substr(sign));
}

// str.format with automatic/numbered/named fields and no format specs.
StatusOr<Value> Format(Interpreter&, const Value& self, CallArgs& a) {
  const std::string& f = self.str();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c == '}') return InvalidArgument("ValueError: Single '}' encountered in format string");
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string::npos) return InvalidArgument("ValueError: Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[{") != std::string::npos) return Unimplemented("str.format() field '{" + field + "}'");
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      if (field.size() > 9) return InvalidArgument("ValueError: Too many decimal digits in format string");
      size_t idx = field.empty() ? auto_index++ : static_cast<size_t>(std::strtoul(field.c_str(), nullptr, 10));
      if (idx >= a.args.size()) return InvalidArgument("IndexError: Replacement index " + std::to_string(idx) + " out of range");
      v = &a.args[idx];
    } else {
      for (auto& [k, x] : a.kwargs) {
        if (k == field) v = &x;
      }
      if (!v) return InvalidArgument("KeyError: '" + field + "'");
    }
    DF11_RETURN_IF_ERROR(AppendStr(*v, &out));
    i = close;
  }
  return Value(std::move(out));
}

// ---- dict / list methods ----
// dict.items() / keys() / values(): a view over the entries, each projected by `part`.
template <typename Part>
StatusOr<Value> DictView(const char* name, Value::View view, const Value& self, CallArgs& a, Part part) {
  DF11_RETURN_IF_ERROR(BindArgs(name, a, {}).status());
  std::vector<Value> items;
  for (const auto& [k, v] : self.dict().entries()) items.push_back(part(k, v));
  return Value::MakeView(view, std::move(items));
}
StatusOr<Value> DictItems(Interpreter&, const Value& self, CallArgs& a) {
  return DictView("dict.items", Value::View::kItems, self, a, [](auto& k, auto& v) { return Value::Tuple({k, v}); });
}
StatusOr<Value> DictKeys(Interpreter&, const Value& self, CallArgs& a) {
  return DictView("dict.keys", Value::View::kKeys, self, a, [](auto& k, auto&) { return k; });
}
StatusOr<Value> DictValues(Interpreter&, const Value& self, CallArgs& a) {
  return DictView("dict.values", Value::View::kValues, self, a, [](auto&, auto& v) { return v; });
}
StatusOr<Value> DictGet(Interpreter&, const Value& self, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("dict.get", a, {{"key"}, {"default", false, Value::None()}}));
  if (!IsHashable(p[0])) return TypeError(std::string("unhashable type: '") + p[0].TypeName() + "'");
  const Value* v = self.dict().Find(p[0]);
  return v ? *v : p[1];
}
StatusOr<Value> Copy(Interpreter&, const Value& self, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("copy", a, {}).status());
  return self;
}
StatusOr<Value> SeqCount(Interpreter&, const Value& self, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("count", a, {{"value"}}));
  int64_t n = 0;
  for (const Value& v : self.items()) n += Equals(v, p[0]);
  return Value(n);
}
StatusOr<Value> SeqIndex(Interpreter&, const Value& self, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("index", a, {{"value"}}));
  for (size_t i = 0; i < self.items().size(); ++i) {
    if (Equals(self.items()[i], p[0])) return Value(static_cast<int64_t>(i));
  }
  return InvalidArgument("ValueError: value is not in list");
}

struct MethodEntry {
  const char* name;
  Method fn;  // null: a real Python method we do not implement
};

const MethodEntry kStrMethods[] = {
    {"capitalize", Capitalize}, {"casefold", nullptr}, {"center", Center}, {"count", Count},
    {"encode", nullptr}, {"endswith", EndsWith}, {"expandtabs", nullptr}, {"find", Find},
    {"format", Format}, {"format_map", nullptr}, {"index", Index}, {"isalnum", IsAlnum},
    {"isalpha", IsAlpha}, {"isascii", nullptr}, {"isdecimal", nullptr}, {"isdigit", IsDigit},
    {"isidentifier", nullptr}, {"islower", IsLower}, {"isnumeric", nullptr}, {"isprintable", nullptr},
    {"isspace", IsSpace}, {"istitle", nullptr}, {"isupper", IsUpper}, {"join", Join}, {"ljust", LJust},
    {"lower", Lower}, {"lstrip", LStrip}, {"maketrans", nullptr}, {"partition", Partition},
    {"removeprefix", RemovePrefix}, {"removesuffix", RemoveSuffix}, {"replace", Replace},
    {"rfind", RFind}, {"rindex", RIndex}, {"rjust", RJust}, {"rpartition", RPartition},
    {"rsplit", RSplit}, {"rstrip", RStrip}, {"split", Split}, {"splitlines", SplitLines},
    {"startswith", StartsWith}, {"strip", Strip}, {"swapcase", nullptr}, {"title", Title},
    {"translate", nullptr}, {"upper", Upper}, {"zfill", ZFill},
};
const MethodEntry kDictMethods[] = {
    {"items", DictItems}, {"keys", DictKeys}, {"values", DictValues}, {"get", DictGet},
    {"copy", Copy}, {"fromkeys", nullptr},
};
const char* kDictMutators[] = {"clear", "pop", "popitem", "setdefault", "update"};
const MethodEntry kListMethods[] = {{"count", SeqCount}, {"index", SeqIndex}, {"copy", Copy}};
const char* kListMutators[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
const char* kNumberAttrs[] = {"real", "imag", "conjugate", "numerator", "denominator", "bit_length",
                              "bit_count", "is_integer", "as_integer_ratio", "hex", "to_bytes"};

template <size_t N>
std::optional<Value> FindMethod(const Value& self, const std::string& name, const MethodEntry (&table)[N], const char* type) {
  for (const auto& m : table) {
    if (name == m.name) {
      std::string qual = std::string(type) + "." + name;
      return m.fn ? Bind(self, qual, m.fn) : NotSupported(qual);
    }
  }
  return std::nullopt;
}

std::optional<Value> LoopAttribute(const Value& obj, const std::string& name) {
  const LoopInfo& l = obj.loop();
  if (name == "index") return Value(l.index0 + 1);
  if (name == "index0") return Value(l.index0);
  if (name == "revindex") return Value(l.length - l.index0);
  if (name == "revindex0") return Value(l.length - l.index0 - 1);
  if (name == "first") return Value(l.index0 == 0);
  if (name == "last") return Value(l.index0 == l.length - 1);
  if (name == "length") return Value(l.length);
  if (name == "depth") return Value(l.depth0 + 1);
  if (name == "depth0") return Value(l.depth0);
  if (name == "previtem") {
    return l.index0 > 0 ? (*l.items)[l.index0 - 1] : Value::Undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return l.index0 + 1 < l.length ? (*l.items)[l.index0 + 1] : Value::Undefined("there is no next item");
  }
  if (name == "cycle") {
    return Value::MakeFunction("loop.cycle", [obj](Interpreter&, CallArgs& a) -> StatusOr<Value> {
      if (!a.kwargs.empty()) return TypeError("loop.cycle() takes no keyword arguments");
      if (a.args.empty()) return TypeError("no items for cycling given");
      return a.args[obj.loop().index0 % static_cast<int64_t>(a.args.size())];
    });
  }
  if (name == "changed") {
    return Value::MakeFunction("loop.changed", [obj](Interpreter&, CallArgs& a) -> StatusOr<Value> {
      if (!a.kwargs.empty()) return TypeError("loop.changed() takes no keyword arguments");
      Value now = Value::Tuple(a.args);
      Value& last = *obj.loop().changed_last;
      if (!last.is_undefined() && Equals(now, last)) return Value(false);
      last = now;
      return Value(true);
    });
  }
  return std::nullopt;
}

// Python getattr(obj, name) under the immutable sandbox; nullopt if there is no attribute.
StatusOr<std::optional<Value>> Attribute(const Value& obj, const std::string& name) {
  if (!name.empty() && name[0] == '_') {
    if (name.size() > 1 && name[1] == '_') return std::optional<Value>(Unsafe(obj, name));
    return std::optional<Value>();
  }
  switch (obj.kind()) {
    case Value::Kind::kString: return FindMethod(obj, name, kStrMethods, "str");
    case Value::Kind::kDict:
      for (const char* m : kDictMutators) {
        if (name == m) return std::optional<Value>(Unsafe(obj, name));
      }
      return FindMethod(obj, name, kDictMethods, "dict");
    case Value::Kind::kList:
      for (const char* m : kListMutators) {
        if (name == m) return std::optional<Value>(Unsafe(obj, name));
      }
      return FindMethod(obj, name, kListMethods, "list");
    case Value::Kind::kTuple:
    case Value::Kind::kView:
      if ((obj.is_tuple() || obj.is_range()) && (name == "count" || name == "index")) {
        return FindMethod(obj, name, kListMethods, obj.TypeName());
      }
      return std::optional<Value>();
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
      for (const char* m : kNumberAttrs) {
        if (name == m) return Unimplemented(std::string("attribute '") + name + "' of numbers");
      }
      return std::optional<Value>();
    case Value::Kind::kNamespace: {
      const Value* v = obj.ns().attrs.Find(Value(name));
      return v ? std::optional<Value>(*v) : std::optional<Value>();
    }
    case Value::Kind::kLoop: return LoopAttribute(obj, name);
    default: return std::optional<Value>();
  }
}

}  // namespace

Status UndefinedErrorFor(const Value& v) { return InvalidArgument("UndefinedError: " + v.undefined_hint()); }

StatusOr<Value> GetAttrOnly(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return UndefinedErrorFor(obj);
  DF11_ASSIGN_OR_RETURN(std::optional<Value> attr, Attribute(obj, name));
  if (attr) return *attr;
  return MissingAttr(obj, name);
}

StatusOr<Value> GetAttr(Interpreter&, const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return UndefinedErrorFor(obj);
  DF11_ASSIGN_OR_RETURN(std::optional<Value> attr, Attribute(obj, name));
  if (attr) return *attr;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().Find(Value(name))) return *v;
  }
  return MissingAttr(obj, name);
}

StatusOr<Value> GetItem(Interpreter&, const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedErrorFor(obj);
  if (obj.is_dict() && IsHashable(key)) {
    if (const Value* v = obj.dict().Find(key)) return *v;
  } else if ((obj.is_sequence() || obj.is_string() || obj.is_range()) && key.is_integral()) {
    // Python indexing (a negative index counts from the end); out of range: "no element" below.
    const std::u32string chars = obj.is_string() ? pystr::Decode(obj.str()) : std::u32string();
    const int64_t n = static_cast<int64_t>(obj.is_string() ? chars.size() : obj.items().size());
    const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
    if (i >= 0 && i < n) return obj.is_string() ? Value(pystr::Encode(chars.substr(i, 1))) : obj.items()[i];
  }
  if (key.is_string()) {
    DF11_ASSIGN_OR_RETURN(std::optional<Value> attr, Attribute(obj, key.str()));
    if (attr) return *attr;
    return MissingAttr(obj, key.str());
  }
  std::string hint;
  if (!AppendRepr(key, &hint).ok()) hint = key.TypeName();
  return Value::Undefined("'" + ObjectRepr(obj) + "' has no element " + hint);
}

}  // namespace df11::jinja
