// Value construction, Python equality/ordering and str()/repr() (see value.h).
#include "runtime/template/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "runtime/template/jinja/pystr.h"

namespace df11::jinja {
namespace {

uint16_t DepthOf(const std::vector<Value>& items) {
  int d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  return static_cast<uint16_t>(std::min(d + 1, 65535));
}

uint16_t DepthOf(const Dict& dict) {
  int d = 0;
  for (const auto& [k, v] : dict.entries()) d = std::max({d, k.depth(), v.depth()});
  return static_cast<uint16_t>(std::min(d + 1, 65535));
}

const std::string& EmptyString() {
  static const std::string empty;
  return empty;
}

int CompareNumbers(const Value& a, const Value& b) {
  if (a.is_float() || b.is_float()) {
    // long double holds every int64 exactly, so mixed int/float compares like Python.
    long double x = a.is_float() ? a.as_double() : static_cast<long double>(a.as_int());
    long double y = b.is_float() ? b.as_double() : static_cast<long double>(b.as_int());
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  int64_t x = a.as_int(), y = b.as_int();
  return x < y ? -1 : (x > y ? 1 : 0);
}

Status ReprImpl(const Value& v, std::string* out, int depth, std::vector<const Namespace*>* active);

Status AppendSequence(const Value& v, std::string* out, int depth, std::vector<const Namespace*>* active) {
  bool tuple = v.is_tuple();
  out->push_back(tuple ? '(' : '[');
  const auto& items = v.items();
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out->append(", ");
    DF11_RETURN_IF_ERROR(ReprImpl(items[i], out, depth + 1, active));
  }
  if (tuple && items.size() == 1) out->push_back(',');
  out->push_back(tuple ? ')' : ']');
  return Status::Ok();
}

Status AppendDict(const Dict& d, std::string* out, int depth, std::vector<const Namespace*>* active) {
  out->push_back('{');
  bool first = true;
  for (const auto& [k, v] : d.entries()) {
    if (!first) out->append(", ");
    first = false;
    DF11_RETURN_IF_ERROR(ReprImpl(k, out, depth + 1, active));
    out->append(": ");
    DF11_RETURN_IF_ERROR(ReprImpl(v, out, depth + 1, active));
  }
  out->push_back('}');
  return Status::Ok();
}

}  // namespace

Value::Value(std::string s) : kind_(Kind::kString), ptr_(std::make_shared<std::string>(std::move(s))) {}

Value Value::Undefined(std::string hint) {
  Value v;
  v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::List(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kList;
  v.depth_ = DepthOf(items);
  v.ptr_ = std::make_shared<std::vector<Value>>(std::move(items));
  return v;
}

Value Value::Tuple(std::vector<Value> items) {
  Value v = List(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::MakeDict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.depth_ = DepthOf(d);
  v.ptr_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::MakeFunction(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.ptr_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
  return v;
}

Value Value::MakeNamespace(std::shared_ptr<Namespace> ns) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.depth_ = DepthOf(ns->attrs);
  v.ptr_ = std::move(ns);
  return v;
}

Value Value::MakeIterator(std::vector<Value> items, Status error) {
  Value v;
  v.kind_ = Kind::kIterator;
  v.depth_ = DepthOf(items);
  v.ptr_ = std::make_shared<Iterator>(Iterator{std::move(items), 0, std::move(error)});
  return v;
}

Value Value::MakeView(View view, std::vector<Value> items) {
  Value v = List(std::move(items));
  v.kind_ = Kind::kView;
  v.view_ = view;
  return v;
}

namespace {
struct RangeData {
  std::vector<Value> items;
  std::array<int64_t, 3> bounds;
};
}  // namespace

Value Value::MakeRange(int64_t start, int64_t stop, int64_t step, std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kView;
  v.view_ = View::kRange;
  v.depth_ = 1;
  v.ptr_ = std::make_shared<RangeData>(RangeData{std::move(items), {start, stop, step}});
  return v;
}

const std::vector<Value>& Value::items() const {
  if (view_ == View::kRange) return static_cast<const RangeData*>(ptr_.get())->items;
  return *static_cast<const std::vector<Value>*>(ptr_.get());
}

std::array<int64_t, 3> Value::range_bounds() const { return static_cast<const RangeData*>(ptr_.get())->bounds; }

Value Value::MakeLoop(std::shared_ptr<LoopInfo> loop) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.ptr_ = std::move(loop);
  return v;
}

const std::string& Value::undefined_hint() const {
  return ptr_ ? *static_cast<const std::string*>(ptr_.get()) : EmptyString();
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0.0;
    case Kind::kString: return !str().empty();
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kView: return !items().empty();
    case Kind::kDict: return dict().size() != 0;
    default: return true;
  }
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return markup_ ? "Markup" : "str";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kFunction: return "function";
    case Kind::kNamespace: return "Namespace";
    case Kind::kIterator: return "generator";
    case Kind::kLoop: return "LoopContext";
    case Kind::kView:
      return view_ == View::kItems ? "dict_items" : view_ == View::kKeys ? "dict_keys" : view_ == View::kRange ? "range" : "dict_values";
  }
  return "object";
}

bool Value::SameAs(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat: return Equals(*this, other);
    default: return ptr_ == other.ptr_;
  }
}

size_t Dict::size() const { return entries_.size(); }

const Value* Dict::Find(const Value& key) const {
  if (key.is_string()) {
    auto it = string_index_.find(key.str());
    return it == string_index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_) {
    if (!k.is_string() && Equals(k, key)) return &v;
  }
  return nullptr;
}

void Dict::Set(Value key, Value value) {
  if (key.is_string()) {
    auto [it, inserted] = string_index_.emplace(key.str(), entries_.size());
    if (!inserted) {
      entries_[it->second].second = std::move(value);
      return;
    }
    entries_.emplace_back(std::move(key), std::move(value));
    return;
  }
  for (auto& [k, v] : entries_) {
    if (!k.is_string() && Equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return CompareNumbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.str() == b.str();
    case Value::Kind::kView:
      if (a.view() != b.view() || a.view() == Value::View::kValues) return a.SameAs(b);
      [[fallthrough]];  // items/keys views compare like sets; equal order is the common case
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict().entries()) {
        const Value* other = b.dict().Find(k);
        if (!other || !Equals(v, *other)) return false;
      }
      return true;
    }
    default: return a.SameAs(b);
  }
}

StatusOr<int> Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if ((a.is_float() && std::isnan(a.as_double())) || (b.is_float() && std::isnan(b.as_double()))) {
      return 2;  // NaN: every ordering comparison is false; callers map 2 to "unordered".
    }
    return CompareNumbers(a, b);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());  // UTF-8 byte order == code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i])) return Compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return TypeError(std::string("'<' not supported between instances of '") + a.TypeName() +
                   "' and '" + b.TypeName() + "'");
}

bool IsHashable(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kDict:
    case Value::Kind::kView:
    case Value::Kind::kNamespace: return false;
    case Value::Kind::kTuple:
      for (const Value& item : v.items()) {
        if (!IsHashable(item)) return false;
      }
      return true;
    default: return true;
  }
}

Status AppendStr(const Value& v, std::string* out) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Status::Ok();
    case Value::Kind::kString: out->append(v.str()); return Status::Ok();
    default: return AppendRepr(v, out);
  }
}

namespace {

Status ReprImpl(const Value& v, std::string* out, int depth, std::vector<const Namespace*>* active) {
  if (depth > kMaxValueDepth) return ResourceExhausted("value nested too deeply to print");
  switch (v.kind()) {
    case Value::Kind::kUndefined: out->append("Undefined"); break;
    case Value::Kind::kNone: out->append("None"); break;
    case Value::Kind::kBool: out->append(v.as_bool() ? "True" : "False"); break;
    case Value::Kind::kInt: out->append(std::to_string(v.as_int())); break;
    case Value::Kind::kFloat: out->append(pystr::FloatRepr(v.as_double())); break;
    case Value::Kind::kString:
      if (v.markup()) out->append("Markup(");
      pystr::AppendRepr(v.str(), out);
      if (v.markup()) out->append(")");
      break;
    case Value::Kind::kList:
    case Value::Kind::kTuple: return AppendSequence(v, out, depth, active);
    case Value::Kind::kView: {
      if (v.is_range()) {
        auto [start, stop, step] = v.range_bounds();
        out->append("range(" + std::to_string(start) + ", " + std::to_string(stop));
        if (step != 1) out->append(", " + std::to_string(step));
        out->append(")");
        break;
      }
      out->append(v.TypeName());
      out->append("([");
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out->append(", ");
        DF11_RETURN_IF_ERROR(ReprImpl(v.items()[i], out, depth + 1, active));
      }
      out->append("])");
      break;
    }
    case Value::Kind::kDict: return AppendDict(v.dict(), out, depth, active);
    case Value::Kind::kLoop:
      out->append("<LoopContext " + std::to_string(v.loop().index0 + 1) + "/" + std::to_string(v.loop().length) + ">");
      break;
    case Value::Kind::kNamespace: {
      // Namespaces are mutable and may contain themselves: print "{...}" like reprlib.
      const Namespace* ns = &v.ns();
      out->append("<Namespace ");
      if (std::find(active->begin(), active->end(), ns) != active->end()) {
        out->append("{...}");
      } else {
        active->push_back(ns);
        Status st = AppendDict(ns->attrs, out, depth, active);
        active->pop_back();
        DF11_RETURN_IF_ERROR(st);
      }
      out->append(">");
      break;
    }
    default:
      return Unimplemented(std::string("printing a ") + v.TypeName() +
                           " object (Python would print its memory address)");
  }
  return Status::Ok();
}

}  // namespace

Status AppendRepr(const Value& v, std::string* out) {
  std::vector<const Namespace*> active;
  return ReprImpl(v, out, 0, &active);
}

StatusOr<std::string> ToStr(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  DF11_RETURN_IF_ERROR(AppendStr(v, &out));
  return out;
}

Status TypeError(std::string message) { return InvalidArgument("TypeError: " + std::move(message)); }

}  // namespace df11::jinja
