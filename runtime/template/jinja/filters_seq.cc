// Sequence filters (jinja2 filters.py): map/select/reject(attr), sort/dictsort/unique/min/max,
// first/last/list/join/items/reverse/sum, and printf-style `format`. Filters that return
// generators in jinja2 return Value iterators here (truthy, no len, consumed once).
#include <algorithm>
#include <cmath>

#include "runtime/template/jinja/builtins.h"
#include "runtime/template/jinja/filters_internal.h"
#include "runtime/template/jinja/pystr.h"

namespace df11::jinja {
namespace {

// jinja2 make_attrgetter: "a.b.0" looks up item["a"]["b"][0] with environment.getitem.
StatusOr<Value> GetPath(Interpreter& in, Value item, const Value& attribute) {
  if (attribute.is_none() || attribute.is_undefined()) return item;
  if (!attribute.is_string()) return GetItem(in, item, attribute);
  for (const std::string& part : pystr::Split(attribute.str(), std::string("."), -1, false)) {
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    // A huge index just misses, like Python's IndexError under the sandbox's getitem.
    Value key = digits ? Value(part.size() > 18 ? INT64_MAX : static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10)))
                       : Value(part);
    DF11_ASSIGN_OR_RETURN(item, GetItem(in, item, key));
  }
  return item;
}

Value IgnoreCase(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  bool ok = true;
  return Value(pystr::Lower(v.str(), &ok));
}

// Key of `item` for sort/unique/min/max: attribute path(s), lower-cased unless case_sensitive.
StatusOr<Value> SortKey(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive, bool multi) {
  if (multi) {  // jinja2 make_multi_attrgetter: the key is always a list
    std::vector<Value> keys;
    if (attribute.is_string()) {
      for (const std::string& a : pystr::Split(attribute.str(), std::string(","), -1, false)) {
        DF11_ASSIGN_OR_RETURN(Value k, GetPath(in, item, Value(a)));
        keys.push_back(IgnoreCase(k, case_sensitive));
      }
    } else {
      DF11_ASSIGN_OR_RETURN(Value k, GetPath(in, item, attribute));
      keys.push_back(IgnoreCase(k, case_sensitive));
    }
    return Value::List(std::move(keys));
  }
  DF11_ASSIGN_OR_RETURN(Value k, GetPath(in, item, attribute));
  return IgnoreCase(k, case_sensitive);
}

// Stable sort of items by keys (Python sorted(..., reverse=...) keeps equal items in order).
Status SortByKeys(std::vector<Value>* items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Value& x = reverse ? keys[b] : keys[a];
    const Value& y = reverse ? keys[a] : keys[b];
    if (x.is_undefined() || y.is_undefined()) {  // Undefined.__lt__ fails
      if (error.ok()) error = UndefinedErrorFor(x.is_undefined() ? x : y);
      return false;
    }
    StatusOr<int> c = Compare(x, y);  // lists compare element-wise (equal undefined items are skipped)
    if (!c.ok()) {
      if (error.ok()) error = c.status();
      return false;
    }
    return *c < 0 && *c != 2;
  });
  DF11_RETURN_IF_ERROR(error);
  std::vector<Value> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back((*items)[i]);
  *items = std::move(sorted);
  return Status::Ok();
}

// Fills *out like the jinja2 generator would; the status is where it would raise.
Status SelectOrRejectInto(Interpreter& in, const Value& seq, CallArgs& a, bool select, bool attr, std::vector<Value>* out) {
  if (!seq.Truthy()) return Status::Ok();
  size_t off = 0;
  Value attribute;
  if (attr) {
    if (a.args.empty()) return InvalidArgument("FilterArgumentError: missing parameter for attribute name");
    attribute = a.args[0];
    off = 1;
  }
  std::string test;
  if (a.args.size() > off) {
    if (!a.args[off].is_string()) return TypeError("test name must be a string");
    test = a.args[off].str();
    if (!HasTest(test)) return InvalidArgument("no test named '" + test + "'");
  }
  CallArgs test_args;
  test_args.args.assign(a.args.begin() + std::min(a.args.size(), off + 1), a.args.end());
  test_args.kwargs = a.kwargs;
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(seq));
  for (Value& item : items) {
    DF11_ASSIGN_OR_RETURN(Value v, GetPath(in, item, attribute));
    bool pass;
    if (test.empty()) {
      pass = v.Truthy();
    } else {
      CallArgs copy = test_args;
      DF11_ASSIGN_OR_RETURN(pass, in.ApplyTest(test, v, copy));
    }
    if (pass == select) out->push_back(std::move(item));
  }
  return Status::Ok();
}

StatusOr<Value> SelectOrReject(Interpreter& in, const Value& seq, CallArgs& a, bool select, bool attr) {
  std::vector<Value> out;
  Status st = SelectOrRejectInto(in, seq, a, select, attr, &out);
  return Value::MakeIterator(std::move(out), std::move(st));
}

StatusOr<Value> MinMax(Interpreter& in, const Value& v, CallArgs& a, bool max, const char* n) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs(n, a, {{"case_sensitive", false, Value(false)}, {"attribute", false, Value::None()}}));
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  DF11_ASSIGN_OR_RETURN(Value best_key, SortKey(in, items[0], p[1], p[0].Truthy(), false));
  for (size_t i = 1; i < items.size(); ++i) {
    DF11_ASSIGN_OR_RETURN(Value k, SortKey(in, items[i], p[1], p[0].Truthy(), false));
    DF11_ASSIGN_OR_RETURN(int c, Compare(k, best_key));
    if (c != 2 && (max ? c > 0 : c < 0)) best = i, best_key = k;
  }
  return items[best];
}

// Width and precision up to 999, so one conversion fits FormatOne's buffers.
bool SpecIsSmall(const std::string& spec) {
  int run = 0;
  for (char c : spec) {
    run = (c >= '0' && c <= '9') ? run + 1 : 0;
    if (run > 3) return false;
  }
  return spec.size() <= 12;
}

// One printf conversion of Python's `%` operator.
StatusOr<std::string> FormatOne(const std::string& spec, char conv, const Value& arg) {
  if (conv == 's' || conv == 'r') {
    std::string s;
    DF11_RETURN_IF_ERROR(conv == 's' ? AppendStr(arg, &s) : AppendRepr(arg, &s));
    if (spec.empty()) return s;
    // Flags other than '-' do not apply to strings; width/precision count code points.
    const bool left = spec.find('-') != std::string::npos;
    size_t dot = spec.find('.');
    std::string width_text = spec.substr(0, dot), digits;
    for (char c : width_text) {
      if (c >= '0' && c <= '9') digits.push_back(c);
      else digits.clear();
    }
    size_t width = digits.empty() ? 0 : std::strtoul(digits.c_str(), nullptr, 10);
    std::u32string u = pystr::Decode(s);
    if (dot != std::string::npos) u.resize(std::min(u.size(), static_cast<size_t>(std::strtoul(spec.c_str() + dot + 1, nullptr, 10))));
    std::string body = pystr::Encode(u), pad(width > u.size() ? width - u.size() : 0, ' ');
    return left ? body + pad : pad + body;
  }
  if (!arg.is_number()) return TypeError(std::string("%") + conv + " format: a real number is required, not " + arg.TypeName());
  char buf[4096];
  if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o' || conv == 'c') {
    double d = arg.as_double();
    if (arg.is_float() && (!std::isfinite(d) || std::fabs(d) >= 9.2e18)) return Unimplemented("%d of a huge float");
    long long i = arg.is_float() ? static_cast<long long>(d) : arg.as_int();
    if (conv == 'c') return Unimplemented("%c formatting");
    if ((conv == 'x' || conv == 'X' || conv == 'o') && i < 0) return Unimplemented("%x/%o of negative numbers");
    std::snprintf(buf, sizeof(buf), ("%" + spec + "ll" + std::string(1, conv == 'u' ? 'd' : conv)).c_str(), i);
    return std::string(buf);
  }
  std::snprintf(buf, sizeof(buf), ("%" + spec + conv).c_str(), arg.as_double());
  return std::string(buf);
}

}  // namespace

StatusOr<Value> FirstFilter(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("first", a, {}).status());
  if (v.is_iterator()) {
    Iterator& it = v.iterator();
    if (it.pos < it.items.size()) return it.items[it.pos++];
    if (!it.error.ok()) return it.error;
  } else {
    DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
    if (!items.empty()) return items[0];
  }
  return Value::Undefined("No first item, sequence was empty.");
}

StatusOr<Value> LastFilter(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("last", a, {}).status());
  if (v.is_iterator()) return TypeError("'generator' object is not reversible");
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

StatusOr<Value> ListFilter(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("list", a, {}).status());
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  return Value::List(std::move(items));
}

StatusOr<Value> JoinFilter(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("join", a, {{"d", false, Value("")}, {"attribute", false, Value::None()}}));
  DF11_ASSIGN_OR_RETURN(std::string sep, SoftStr(p[0]));
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    DF11_ASSIGN_OR_RETURN(Value item, GetPath(in, items[i], p[1]));
    if (i) out += sep;
    DF11_RETURN_IF_ERROR(AppendStr(item, &out));
    DF11_RETURN_IF_ERROR(in.CheckSize(out.size()));
  }
  return Value(std::move(out));
}

StatusOr<Value> ItemsFilter(Interpreter&, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("items", a, {}).status());
  if (v.is_undefined()) return Value::MakeIterator({});
  if (!v.is_dict()) return Value::MakeIterator({}, TypeError("Can only get item pairs from a mapping."));
  std::vector<Value> pairs;
  for (const auto& [k, x] : v.dict().entries()) pairs.push_back(Value::Tuple({k, x}));
  return Value::MakeIterator(std::move(pairs));
}

StatusOr<Value> ReverseFilter(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_RETURN_IF_ERROR(BindArgs("reverse", a, {}).status());
  if (v.is_string()) {
    std::u32string u = pystr::Decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value(pystr::Encode(u));
  }
  bool iterable = v.is_undefined() || v.is_sequence() || v.is_dict() || v.is_iterator() || v.is_view();
  if (!iterable) return InvalidArgument("FilterArgumentError: argument must be iterable");
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::reverse(items.begin(), items.end());
  // reversed() of a generator fails, so jinja2 falls back to a list.
  return v.is_iterator() ? Value::List(std::move(items)) : Value::MakeIterator(std::move(items));
}

static Status MapInto(Interpreter& in, const Value& v, CallArgs& a, std::vector<Value>* out_items) {
  if (!v.Truthy()) return Status::Ok();
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::vector<Value>& out = *out_items;
  if (a.args.empty()) {
    Value attribute, dflt = Value::None();
    bool has_attribute = false;
    for (auto& [k, x] : a.kwargs) {
      if (k == "attribute") attribute = x, has_attribute = true;
      else if (k == "default") dflt = x;
      else return InvalidArgument("FilterArgumentError: unexpected keyword argument '" + k + "'");
    }
    if (!has_attribute) return InvalidArgument("FilterArgumentError: map requires a filter argument");
    for (Value& item : items) {
      DF11_ASSIGN_OR_RETURN(Value x, GetPath(in, item, attribute));
      out.push_back(x.is_undefined() && !dflt.is_none() ? dflt : x);
    }
    return Status::Ok();
  }
  if (!a.args[0].is_string()) return TypeError("map filter name must be a string");
  std::string name = a.args[0].str();
  if (!HasFilter(name)) return InvalidArgument("no filter named '" + name + "'");
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  rest.kwargs = a.kwargs;
  for (Value& item : items) {
    CallArgs copy = rest;
    DF11_ASSIGN_OR_RETURN(Value x, in.ApplyFilter(name, item, copy));
    out.push_back(std::move(x));
  }
  return Status::Ok();
}

// jinja2's map is a generator: failures surface when it is consumed.
StatusOr<Value> MapFilter(Interpreter& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  Status st = MapInto(in, v, a, &out);
  return Value::MakeIterator(std::move(out), std::move(st));
}

StatusOr<Value> SelectFilter(Interpreter& in, const Value& v, CallArgs& a) { return SelectOrReject(in, v, a, true, false); }
StatusOr<Value> RejectFilter(Interpreter& in, const Value& v, CallArgs& a) { return SelectOrReject(in, v, a, false, false); }
StatusOr<Value> SelectAttrFilter(Interpreter& in, const Value& v, CallArgs& a) { return SelectOrReject(in, v, a, true, true); }
StatusOr<Value> RejectAttrFilter(Interpreter& in, const Value& v, CallArgs& a) { return SelectOrReject(in, v, a, false, true); }

StatusOr<Value> SortFilter(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("sort", a, {{"reverse", false, Value(false)}, {"case_sensitive", false, Value(false)},
                                                     {"attribute", false, Value::None()}}));
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::vector<Value> keys;
  for (const Value& item : items) {
    DF11_ASSIGN_OR_RETURN(Value k, SortKey(in, item, p[2], p[1].Truthy(), true));
    keys.push_back(std::move(k));
  }
  DF11_RETURN_IF_ERROR(SortByKeys(&items, keys, p[0].Truthy()));
  return Value::List(std::move(items));
}

StatusOr<Value> DictSortFilter(Interpreter&, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("dictsort", a, {{"case_sensitive", false, Value(false)}, {"by", false, Value("key")},
                                                         {"reverse", false, Value(false)}}));
  if (!p[1].is_string() || (p[1].str() != "key" && p[1].str() != "value")) {
    return InvalidArgument("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
  }
  if (!v.is_dict()) return InvalidArgument(std::string("AttributeError: '") + v.TypeName() + "' object has no attribute 'items'");
  size_t pos = p[1].str() == "key" ? 0 : 1;
  std::vector<Value> items, keys;
  for (const auto& [k, x] : v.dict().entries()) {
    items.push_back(Value::Tuple({k, x}));
    keys.push_back(IgnoreCase(pos == 0 ? k : x, p[0].Truthy()));
  }
  DF11_RETURN_IF_ERROR(SortByKeys(&items, keys, p[2].Truthy()));
  return Value::List(std::move(items));
}

static Status UniqueInto(Interpreter& in, const Value& v, CallArgs& a, std::vector<Value>* out_items) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("unique", a, {{"case_sensitive", false, Value(false)}, {"attribute", false, Value::None()}}));
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::vector<Value>& out = *out_items;
  Dict seen;
  for (Value& item : items) {
    DF11_ASSIGN_OR_RETURN(Value k, SortKey(in, item, p[1], p[0].Truthy(), false));
    if (!IsHashable(k)) return TypeError(std::string("unhashable type: '") + k.TypeName() + "'");
    if (seen.Find(k)) continue;
    seen.Set(k, Value(true));
    out.push_back(std::move(item));
  }
  return Status::Ok();
}

StatusOr<Value> UniqueFilter(Interpreter& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  Status st = UniqueInto(in, v, a, &out);
  return Value::MakeIterator(std::move(out), std::move(st));
}

StatusOr<Value> MaxFilter(Interpreter& in, const Value& v, CallArgs& a) { return MinMax(in, v, a, true, "max"); }
StatusOr<Value> MinFilter(Interpreter& in, const Value& v, CallArgs& a) { return MinMax(in, v, a, false, "min"); }

StatusOr<Value> SumFilter(Interpreter& in, const Value& v, CallArgs& a) {
  DF11_ASSIGN_OR_RETURN(auto p, BindArgs("sum", a, {{"attribute", false, Value::None()}, {"start", false, Value(0)}}));
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  if (p[1].is_string()) return TypeError("sum() can't sum strings [use ''.join(seq) instead]");
  Value total = p[1];
  for (const Value& item : items) {
    DF11_ASSIGN_OR_RETURN(Value x, GetPath(in, item, p[0]));
    DF11_ASSIGN_OR_RETURN(total, BinaryOp(in, "+", total, x));
  }
  return total;
}

StatusOr<std::string> PercentFormat(Interpreter& in, const std::string& f, const Value& rhs) {
  // CPython: a tuple supplies positional values; anything else is one value, and a mapping
  // (dict, also list per PyMapping_Check) may go unused or serve %(key)s lookups.
  std::vector<Value> args = rhs.is_tuple() ? rhs.items() : std::vector<Value>{rhs};
  const bool mapping = rhs.is_dict() || rhs.is_list() || rhs.is_undefined();
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out.push_back(f[i]);
      continue;
    }
    if (++i >= f.size()) return InvalidArgument("ValueError: incomplete format");
    const Value* arg = nullptr;
    Value keyed;
    if (f[i] == '(') {
      size_t close = f.find(')', i);
      if (close == std::string::npos) return InvalidArgument("ValueError: incomplete format key");
      if (rhs.is_undefined()) return UndefinedErrorFor(rhs);
      if (!rhs.is_dict()) return TypeError("format requires a mapping");
      std::string key = f.substr(i + 1, close - i - 1);
      const Value* found = rhs.dict().Find(Value(key));
      if (!found) return InvalidArgument("KeyError: '" + key + "'");
      keyed = *found;
      arg = &keyed;
      i = close + 1;
    }
    size_t spec_begin = i;
    while (i < f.size() && std::string_view("-+ #0123456789.").find(f[i]) != std::string_view::npos) ++i;
    if (i >= f.size()) return InvalidArgument("ValueError: incomplete format");
    std::string spec = f.substr(spec_begin, i - spec_begin);
    char conv = f[i];
    if (conv == '%' && spec.empty() && !arg) {
      out.push_back('%');
      continue;
    }
    if (spec.find('*') != std::string::npos || !SpecIsSmall(spec)) return Unimplemented("format spec '%" + spec + "'");
    if (std::string_view("srdiufFeEgGxXoca").find(conv) == std::string_view::npos || conv == 'a') {
      return InvalidArgument(std::string("ValueError: unsupported format character '") + conv + "'");
    }
    if (!arg) {
      if (next >= args.size()) return TypeError("not enough arguments for format string");
      arg = &args[next++];
    }
    DF11_ASSIGN_OR_RETURN(std::string piece, FormatOne(spec, conv, *arg));
    out += piece;
    DF11_RETURN_IF_ERROR(in.CheckSize(out.size()));
  }
  if (next < args.size() && !(mapping && !rhs.is_tuple())) {
    return TypeError("not all arguments converted during string formatting");
  }
  return out;
}

StatusOr<Value> FormatFilter(Interpreter& in, const Value& v, CallArgs& a) {
  if (!a.args.empty() && !a.kwargs.empty()) {
    return InvalidArgument("FilterArgumentError: can't handle positional and keyword arguments at the same time");
  }
  DF11_ASSIGN_OR_RETURN(std::string f, SoftStr(v));
  Value rhs;
  if (!a.kwargs.empty()) {
    Dict d;
    for (auto& [k, x] : a.kwargs) d.Set(Value(k), x);
    rhs = Value::MakeDict(std::move(d));
  } else {
    rhs = Value::Tuple(a.args);
  }
  DF11_ASSIGN_OR_RETURN(std::string out, PercentFormat(in, f, rhs));
  return Value(std::move(out));
}

}  // namespace df11::jinja
