// Scalar and string filters, and the filter registry (see builtins.h). Sequence filters
// (map/select/sort/...) live in filters_seq.cc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/template/jinja/builtins.h"
#include "runtime/template/jinja/filters_internal.h"
#include "runtime/template/jinja/json.h"
#include "runtime/template/jinja/pystr.h"

namespace df11::jinja {
namespace {

StatusOr<Value> CaseFilter(const Value& in, CallArgs& a, const char* n, std::string (*fn)(std::string_view, bool*)) {
  DF11_RETURN_IF_ERROR(BindArgs(n, a, {}).status());
  DF11_ASSIGN_OR_RETURN(std::string s, SoftStr(in));
  bool ok = true;
  std::string out = fn(s, &ok);
  if (!ok) return Unimplemented(std::string("the '") + n + "' filter on text needing unsupported Unicode case mappings");
  return Value(std::move(out));
}
StatusOr<Value> Upper(Interpreter&, const Value& v, CallArgs& a) { return CaseFilter(v, a, "upper", pystr::Upper); }
StatusOr<Value> Lower(Interpreter&, const Value& v, CallArgs& a) { return CaseFilter(v, a, "lower", pystr::Lower); }
StatusOr<Value> Capitalize(Interpreter&, const Value& v, CallArgs& a) { return CaseFilter(v, a, "capitalize", pystr::Capitalize); }
StatusOr<Value> TitleF(Interpreter&, const Value& v, CallArgs& a) { return CaseFilter(v, a, "title", pystr::JinjaTitle); }

StatusOr<Value> Trim(Interpreter&, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("trim", a, {{"chars", false, Value::None()}}));
  DF11_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  std::optional<std::string> chars;
  if (p[0].is_string()) chars = p[0].str();
  else if (!p[0].is_none()) return TypeError("strip arg must be None or str");
  return Value(pystr::Strip(s, chars, true, true));
}

StatusOr<Value> Default(Interpreter&, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("default", a, {{"default_value", false, Value("")}, {"boolean", false, Value(false)}}));
  if (v.is_undefined() || (p[1].Truthy() && !v.Truthy())) return p[0];
  return v;
}

StatusOr<Value> Length(Interpreter&, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("length", a, {}).status());
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Value(int64_t{0});
    case Value::Kind::kString: return Value(static_cast<int64_t>(CountCodePoints(v.str())));
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kView: return Value(static_cast<int64_t>(v.items().size()));
    case Value::Kind::kDict: return Value(static_cast<int64_t>(v.dict().size()));
    default: return TypeError(std::string("object of type '") + v.TypeName() + "' has no len()");
  }
}

StatusOr<Value> ToJson(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("tojson", a, {{"ensure_ascii", false, Value(false)}, {"indent", false, Value::None()},
                                                       {"separators", false, Value::None()}, {"sort_keys", false, Value(false)}}));
  JsonDumpOptions o;
  o.ensure_ascii = p[0].Truthy();
  if (p[1].is_integral()) {
    o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(p[1].as_int(), 0, 1 << 10)), ' ');
  } else if (p[1].is_string()) {
    o.indent = p[1].str();
  } else if (!p[1].is_none()) {
    return TypeError("tojson indent must be None, an int or a str");
  }
  if (p[2].is_sequence() && p[2].items().size() == 2 && p[2].items()[0].is_string() && p[2].items()[1].is_string()) {
    o.item_separator = p[2].items()[0].str();
    o.key_separator = p[2].items()[1].str();
  } else if (!p[2].is_none()) {
    return TypeError("tojson separators must be a (item_separator, key_separator) pair of strings");
  }
  o.sort_keys = p[3].Truthy();
  o.max_bytes = in.MaxStringBytes();
  std::string out;
  DF11_RETURN_IF_ERROR(DumpJson(v, o, &out));
  DF11_RETURN_IF_ERROR(in.CheckSize(out.size()));
  return Value(std::move(out));
}

StatusOr<Value> String(Interpreter&, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("string", a, {}).status());
  if (v.is_string()) return v;
  DF11_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  return Value(std::move(s));
}

// Python int(str, base): whitespace, sign, underscores between digits, optional base prefix.
std::optional<int64_t> ParseInt(std::string_view s, int base, bool* overflow) {
  std::string t = pystr::Strip(s, std::nullopt, true, true);
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  if (i + 1 < t.size() && t[i] == '0') {
    char p = static_cast<char>(t[i + 1] | 0x20);
    int prefix_base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefix_base && (base == 0 || base == prefix_base)) {
      base = prefix_base;
      i += 2;
      if (i < t.size() && t[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  std::string digits;
  for (; i < t.size(); ++i) {
    char c = t[i];
    if (c == '_' && !digits.empty() && i + 1 < t.size() && t[i + 1] != '_') continue;
    int d = (c >= '0' && c <= '9') ? c - '0' : ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ? (c | 0x20) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    digits.push_back(c);
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
  if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX) + (neg ? 1 : 0)) {
    *overflow = true;
    return std::nullopt;
  }
  return neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

// Python float(str): whitespace, sign, digits with underscores, inf/nan.
std::optional<double> ParseFloat(std::string_view s) {
  std::string t = pystr::Strip(s, std::nullopt, true, true), clean;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_') {
      bool ok = i > 0 && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i - 1])) &&
                std::isdigit(static_cast<unsigned char>(t[i + 1]));
      if (!ok) return std::nullopt;
      continue;
    }
    clean.push_back(t[i]);
  }
  std::string lower;
  for (char c : clean) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  std::string body = (!lower.empty() && (lower[0] == '+' || lower[0] == '-')) ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity") return lower[0] == '-' ? -HUGE_VAL : HUGE_VAL;
  if (body == "nan") return std::nan("");
  if (body.empty() || body.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

StatusOr<Value> IntFilter(Interpreter&, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("int", a, {{"default", false, Value(0)}, {"base", false, Value(10)}}));
  if (v.is_undefined()) return UndefinedErrorFor(v);
  auto from_double = [&](double d) -> StatusOr<Value> {
    if (std::isnan(d)) return p[0];
    if (std::isinf(d) || std::fabs(d) >= 9.2e18) return InvalidArgument("OverflowError: cannot convert float to int64");
    return Value(static_cast<int64_t>(d));
  };
  if (v.is_integral()) return Value(v.as_int());
  if (v.is_float()) return from_double(v.as_double());
  if (v.is_string()) {
    if (!p[1].is_integral()) return TypeError("int() base must be an integer");
    bool overflow = false;
    if (auto i = ParseInt(v.str(), static_cast<int>(p[1].as_int()), &overflow)) return Value(*i);
    if (overflow) return Unimplemented("int() of a number outside int64");
    if (auto d = ParseFloat(v.str())) return from_double(*d);
  }
  return p[0];
}

StatusOr<Value> FloatFilter(Interpreter&, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("float", a, {{"default", false, Value(0.0)}}));
  if (v.is_undefined()) return UndefinedErrorFor(v);
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    if (auto d = ParseFloat(v.str())) return Value(*d);
  }
  return p[0];
}

StatusOr<Value> Abs(Interpreter&, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("abs", a, {}).status());
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) return Unimplemented("integer overflow in abs");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (v.is_undefined()) return UndefinedErrorFor(v);
  return TypeError(std::string("bad operand type for abs(): '") + v.TypeName() + "'");
}

StatusOr<Value> Round(Interpreter&, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("round", a, {{"precision", false, Value(0)}, {"method", false, Value("common")}}));
  if (!p[1].is_string() || (p[1].str() != "common" && p[1].str() != "ceil" && p[1].str() != "floor")) {
    return InvalidArgument("FilterArgumentError: method must be common, ceil or floor");
  }
  if (v.is_undefined()) return UndefinedErrorFor(v);
  if (!v.is_number() || !p[0].is_integral()) return TypeError("round() needs a number and an integer precision");
  int64_t prec = p[0].as_int();
  if (prec < 0 || prec > 300) return Unimplemented("round() with a negative or huge precision");
  if (p[1].str() == "common") {
    if (v.is_integral()) return Value(v.as_int());
    double d = v.as_double();
    if (!std::isfinite(d)) return Value(d);
    // printf rounds the exact binary value half-to-even, exactly like CPython's round().
    char buf[1024];  // |d| < 1.8e308 and prec <= 300: at most 611 characters
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(prec), d);
    return Value(std::strtod(buf, nullptr));
  }
  double scale = std::pow(10.0, static_cast<double>(prec));
  double x = v.as_double() * scale;
  return Value((p[1].str() == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

StatusOr<Value> Replace(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("replace", a, {{"old"}, {"new"}, {"count", false, Value::None()}}));
  DF11_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  DF11_ASSIGN_OR_RETURN(std::string old_s, SoftStr(p[0]));
  DF11_ASSIGN_OR_RETURN(std::string new_s, SoftStr(p[1]));
  int64_t count = -1;
  if (p[2].is_integral()) count = p[2].as_int();
  else if (!p[2].is_none()) return TypeError("replace() count must be an integer");
  std::string out;
  if (!pystr::Replace(s, old_s, new_s, count, in.MaxStringBytes(), &out)) return in.TooBig();
  return Value(std::move(out));
}

StatusOr<Value> Indent(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("indent", a, {{"width", false, Value(4)}, {"first", false, Value(false)}, {"blank", false, Value(false)}}));
  std::string indention;
  if (p[0].is_string()) {
    indention = p[0].str();
  } else if (p[0].is_integral()) {
    indention.assign(static_cast<size_t>(std::clamp<int64_t>(p[0].as_int(), 0, 1 << 16)), ' ');
  } else {
    return TypeError("indent width must be an int or a str");
  }
  // jinja2 appends "\n" to the raw value (no str() first), so only strings are accepted.
  if (v.is_undefined()) return UndefinedErrorFor(v);
  if (!v.is_string()) return TypeError(std::string("indent expects a string, not '") + v.TypeName() + "'");
  std::string s = v.str() + "\n";  // jinja2 quirk: makes splitlines keep a trailing empty line
  std::vector<std::string> lines = pystr::SplitLines(s, false);
  std::string rv;
  if (p[2].Truthy()) {
    for (size_t i = 0; i < lines.size(); ++i) {
      rv += (i ? "\n" + indention : "") + lines[i];
      DF11_RETURN_IF_ERROR(in.CheckSize(rv.size()));
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n" + (lines[i].empty() ? "" : indention + lines[i]);
      DF11_RETURN_IF_ERROR(in.CheckSize(rv.size()));
    }
  }
  if (p[1].Truthy()) rv = indention + rv;
  DF11_RETURN_IF_ERROR(in.CheckSize(rv.size()));
  return v.markup() ? Value::Markup(std::move(rv)) : Value(std::move(rv));
}

StatusOr<Value> Center(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("center", a, {{"width", false, Value(80)}}));
  DF11_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  CallArgs inner;
  inner.args.push_back(p[0]);
  return GetAttr(in, Value(std::move(s)), "center").value().function().fn(in, inner);
}

StatusOr<Value> Escape(Interpreter&, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("escape", a, {}).status());
  if (v.is_string() && v.markup()) return v;
  DF11_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  return Value::Markup(pystr::HtmlEscape(s));
}

StatusOr<Value> ForceEscape(Interpreter&, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("forceescape", a, {}).status());
  DF11_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  return Value::Markup(pystr::HtmlEscape(s));
}

StatusOr<Value> Safe(Interpreter&, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("safe", a, {}).status());
  DF11_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  return Value::Markup(std::move(s));
}

StatusOr<Value> AttrFilter(Interpreter&, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("attr", a, {{"name"}}));
  DF11_ASSIGN_OR_RETURN(std::string name, SoftStr(p[0]));
  return GetAttrOnly(v, name);
}

struct FilterEntry {
  const char* name;
  FilterFn fn;
};

const FilterEntry kFilters[] = {
    {"abs", Abs}, {"attr", AttrFilter}, {"capitalize", Capitalize}, {"center", Center},
    {"count", Length}, {"d", Default}, {"default", Default}, {"dictsort", DictSortFilter},
    {"e", Escape}, {"escape", Escape}, {"first", FirstFilter}, {"float", FloatFilter},
    {"forceescape", ForceEscape}, {"format", FormatFilter}, {"indent", Indent}, {"int", IntFilter},
    {"items", ItemsFilter}, {"join", JoinFilter}, {"last", LastFilter}, {"length", Length},
    {"list", ListFilter}, {"lower", Lower}, {"map", MapFilter}, {"max", MaxFilter},
    {"min", MinFilter}, {"reject", RejectFilter}, {"rejectattr", RejectAttrFilter},
    {"replace", Replace}, {"reverse", ReverseFilter}, {"round", Round}, {"safe", Safe},
    {"select", SelectFilter}, {"selectattr", SelectAttrFilter}, {"sort", SortFilter},
    {"string", String}, {"sum", SumFilter}, {"title", TitleF}, {"tojson", ToJson},
    {"trim", Trim}, {"unique", UniqueFilter}, {"upper", Upper},
};

const char* kJinjaFilters[] = {
    "batch", "filesizeformat", "groupby", "pprint", "random", "slice", "striptags", "truncate",
    "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr",
};

}  // namespace

StatusOr<std::string> SoftStr(const Value& v) { return ToStr(v); }

bool HasFilter(std::string_view name) {
  return std::any_of(std::begin(kFilters), std::end(kFilters), [&](const FilterEntry& f) { return name == f.name; });
}

bool IsJinjaFilter(std::string_view name) {
  return HasFilter(name) ||
         std::any_of(std::begin(kJinjaFilters), std::end(kJinjaFilters), [&](const char* f) { return name == f; });
}

StatusOr<Value> CallFilter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args) {
  for (const auto& f : kFilters) {
    if (name == f.name) return f.fn(in, input, args);
  }
  return InvalidArgument("no filter named '" + name + "'");
}

}  // namespace df11::jinja
