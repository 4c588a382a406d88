// Jinja tests (`x is defined`, `x is divisibleby 3`, ...) and global functions (range,
// namespace, dict, joiner, and transformers' raise_exception / strftime_now).
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "runtime/template/jinja/builtins.h"
#include "runtime/template/jinja/pystr.h"

namespace df11::jinja {
namespace {

using TestFn = StatusOr<bool> (*)(Interpreter&, const Value&, CallArgs&);

Status NoArgs(const char* n, CallArgs& a) { return BindArgs(n, a, {}).status(); }

StatusOr<bool> ModuloIs(Interpreter& in, const Value& v, const Value& n, int64_t want) {
  DF11_ASSIGN_OR_RETURN(Value m, BinaryOp(in, "%", v, n));
  return Equals(m, Value(want));
}

// Python str.islower()/isupper() of str(v).
StatusOr<bool> CaseTest(const Value& v, bool upper) {
  DF11_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  return pystr::IsAllCase(s, upper);
}

// A test without arguments: `expr` of the input `v` (and the interpreter `in`).
#define DF11_SIMPLE_TEST(fn, name, expr)                            \
  StatusOr<bool> fn(Interpreter& in, const Value& v, CallArgs& a) { \
    DF11_RETURN_IF_ERROR(NoArgs(name, a));                          \
    return (expr);                                                  \
  }

DF11_SIMPLE_TEST(Defined, "defined", !v.is_undefined())
DF11_SIMPLE_TEST(UndefinedT, "undefined", v.is_undefined())
DF11_SIMPLE_TEST(None, "none", v.is_none())
DF11_SIMPLE_TEST(Boolean, "boolean", v.is_bool())
DF11_SIMPLE_TEST(True_, "true", v.is_bool() && v.as_bool())
DF11_SIMPLE_TEST(False_, "false", v.is_bool() && !v.as_bool())
DF11_SIMPLE_TEST(Integer, "integer", v.is_int())
DF11_SIMPLE_TEST(Float, "float", v.is_float())
DF11_SIMPLE_TEST(Number, "number", v.is_number())
DF11_SIMPLE_TEST(String, "string", v.is_string())
DF11_SIMPLE_TEST(Mapping, "mapping", v.is_dict())
DF11_SIMPLE_TEST(Escaped, "escaped", v.is_string() && v.markup())
DF11_SIMPLE_TEST(Iterable, "iterable",
                 v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined() || v.is_iterator() || v.is_loop() ||
                     v.is_view())
DF11_SIMPLE_TEST(Sequence, "sequence", v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined() || v.is_range())
DF11_SIMPLE_TEST(Callable, "callable", v.is_function() || v.is_undefined() || v.is_loop())
DF11_SIMPLE_TEST(Odd, "odd", ModuloIs(in, v, Value(2), 1))
DF11_SIMPLE_TEST(Even, "even", ModuloIs(in, v, Value(2), 0))
DF11_SIMPLE_TEST(Lower, "lower", CaseTest(v, false))
DF11_SIMPLE_TEST(Upper, "upper", CaseTest(v, true))
DF11_SIMPLE_TEST(FilterT, "filter", v.is_string() && HasFilter(v.str()))
DF11_SIMPLE_TEST(TestT, "test", v.is_string() && HasTest(v.str()))
#undef DF11_SIMPLE_TEST

StatusOr<bool> DivisibleBy(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("divisibleby", a, {{"num"}}));
  return ModuloIs(in, v, p[0], 0);
}

template <const char* kOp>
StatusOr<bool> CompareTest(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs(kOp, a, {{"other"}}));
  return CompareValues(in, kOp, v, p[0]);
}
constexpr char kEq[] = "==", kNe[] = "!=", kLt[] = "<", kLe[] = "<=", kGt[] = ">", kGe[] = ">=";

StatusOr<bool> In(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("in", a, {{"seq"}}));
  return CompareValues(in, "in", v, p[0]);
}
StatusOr<bool> SameAs(Interpreter&, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("sameas", a, {{"other"}}));
  return v.SameAs(p[0]);
}

struct TestEntry {
  const char* name;
  TestFn fn;
};
const TestEntry kTests[] = {
    {"boolean", Boolean}, {"callable", Callable}, {"defined", Defined}, {"divisibleby", DivisibleBy},
    {"eq", CompareTest<kEq>}, {"equalto", CompareTest<kEq>}, {"==", CompareTest<kEq>},
    {"escaped", Escaped}, {"even", Even}, {"false", False_}, {"filter", FilterT}, {"float", Float},
    {"ge", CompareTest<kGe>}, {">=", CompareTest<kGe>}, {"gt", CompareTest<kGt>},
    {"greaterthan", CompareTest<kGt>}, {">", CompareTest<kGt>}, {"in", In}, {"integer", Integer},
    {"iterable", Iterable}, {"le", CompareTest<kLe>}, {"<=", CompareTest<kLe>},
    {"lessthan", CompareTest<kLt>}, {"lt", CompareTest<kLt>}, {"<", CompareTest<kLt>},
    {"lower", Lower}, {"mapping", Mapping}, {"ne", CompareTest<kNe>}, {"!=", CompareTest<kNe>},
    {"none", None}, {"number", Number}, {"odd", Odd}, {"sameas", SameAs}, {"sequence", Sequence},
    {"string", String}, {"test", TestT}, {"true", True_}, {"undefined", UndefinedT}, {"upper", Upper},
};

// ---- globals ----
StatusOr<Value> Range(Interpreter&, CallArgs& a) {
  if (!a.kwargs.empty()) return TypeError("range() takes no keyword arguments");
  if (a.args.empty() || a.args.size() > 3) return TypeError("range expected 1 to 3 arguments");
  for (const Value& v : a.args) {
    if (!v.is_integral()) return TypeError(std::string("'") + v.TypeName() + "' object cannot be interpreted as an integer");
  }
  int64_t start = 0, stop, step = 1;
  if (a.args.size() == 1) {
    stop = a.args[0].as_int();
  } else {
    start = a.args[0].as_int(), stop = a.args[1].as_int();
    if (a.args.size() == 3) step = a.args[2].as_int();
  }
  if (step == 0) return InvalidArgument("ValueError: range() arg 3 must not be zero");
  __int128 n = 0;
  if (step > 0 && stop > start) n = ((__int128)stop - start + step - 1) / step;
  if (step < 0 && stop < start) n = ((__int128)start - stop - step - 1) / -step;
  if (n > 100000) {
    return InvalidArgument("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  std::vector<Value> items;
  for (__int128 i = 0; i < n; ++i) items.emplace_back(static_cast<int64_t>(start + i * step));
  return Value::MakeRange(start, stop, step, std::move(items));
}

// dict(mapping_or_pairs?, **kwargs) -> Dict
StatusOr<Dict> DictArgs(Interpreter& in, CallArgs& a, const char* n) {
  if (a.args.size() > 1) return TypeError(std::string(n) + " expected at most 1 positional argument");
  Dict d;
  if (!a.args.empty()) {
    const Value& src = a.args[0];
    if (src.is_dict()) {
      d = src.dict();
    } else {
      DF11_ASSIGN_OR_RETURN(std::vector<Value> pairs, in.Iterate(src));
      for (const Value& p : pairs) {
        DF11_ASSIGN_OR_RETURN(std::vector<Value> kv, in.Iterate(p));
        if (kv.size() != 2) return InvalidArgument("ValueError: dictionary update sequence element has wrong length");
        if (!IsHashable(kv[0])) return TypeError(std::string("unhashable type: '") + kv[0].TypeName() + "'");
        d.Set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kwargs) d.Set(Value(k), v);
  return d;
}

StatusOr<Value> DictGlobal(Interpreter& in, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(Dict d, DictArgs(in, a, "dict"));
  return Value::MakeDict(std::move(d));
}

StatusOr<Value> NamespaceGlobal(Interpreter& in, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(Dict d, DictArgs(in, a, "namespace"));
  return in.NewNamespace(std::move(d));
}

StatusOr<Value> Joiner(Interpreter&, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("joiner", a, {{"sep", false, Value(", ")}}));
  auto used = std::make_shared<bool>(false);
  Value sep = p[0];
  return Value::MakeFunction("joiner", [used, sep](Interpreter&, CallArgs&) -> StatusOr<Value> {
    if (!*used) {
      *used = true;
      return Value("");
    }
    return sep;
  });
}

StatusOr<Value> RaiseException(Interpreter& in, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("raise_exception", a, {{"message"}}));
  DF11_ASSIGN_OR_RETURN(std::string msg, SoftStr(p[0]));
  return in.Raise(InvalidArgument(msg));
}

StatusOr<Value> StrftimeNow(Interpreter& in, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("strftime_now", a, {{"format"}}));
  if (!p[0].is_string()) return TypeError("strftime() argument 1 must be str");
  // datetime.now() is naive: %z/%Z are empty and %f has microseconds (the clock has none).
  std::string fmt;
  const std::string& f = p[0].str();
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '%' && i + 1 < f.size()) {
      char c = f[i + 1];
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      if (c == 'f') {
        fmt += "000000";
        ++i;
        continue;
      }
      fmt += f.substr(i, 2);
      ++i;
      continue;
    }
    fmt.push_back(f[i]);
  }
  if (fmt.size() > 4096) return ResourceExhausted("strftime format too long");
  std::tm tm = in.Now();
  std::string buf(fmt.size() * 16 + 64, '\0');
  size_t n = fmt.empty() ? 0 : std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
  buf.resize(n);
  return Value(std::move(buf));
}

StatusOr<Value> NotSupportedGlobal(Interpreter&, CallArgs&) {
  return Unimplemented("cycler() and lipsum() are not supported");
}

}  // namespace

bool HasTest(std::string_view name) {
  return std::any_of(std::begin(kTests), std::end(kTests), [&](const TestEntry& t) { return name == t.name; });
}

bool IsJinjaTest(std::string_view name) { return HasTest(name); }

StatusOr<bool> CallTest(Interpreter& in, const std::string& name, const Value& input, CallArgs& args) {
  for (const auto& t : kTests) {
    if (name == t.name) return t.fn(in, input, args);
  }
  return InvalidArgument("no test named '" + name + "'");
}

const Value* FindGlobal(const std::string& name) {
  static const auto* globals = new std::unordered_map<std::string, Value>{
      {"range", Value::MakeFunction("range", Range)},
      {"dict", Value::MakeFunction("dict", DictGlobal)},
      {"namespace", Value::MakeFunction("namespace", NamespaceGlobal)},
      {"joiner", Value::MakeFunction("joiner", Joiner)},
      {"cycler", Value::MakeFunction("cycler", NotSupportedGlobal)},
      {"lipsum", Value::MakeFunction("lipsum", NotSupportedGlobal)},
      {"raise_exception", Value::MakeFunction("raise_exception", RaiseException)},
      {"strftime_now", Value::MakeFunction("strftime_now", StrftimeNow)},
  };
  auto it = globals->find(name);
  return it == globals->end() ? nullptr : &it->second;
}

}  // namespace df11::jinja
