// Expression evaluation with Python operator semantics (see interp.h).
#include <algorithm>
#include <cmath>

#include "runtime/template/jinja/builtins.h"
#include "runtime/template/jinja/interp.h"
#include "runtime/template/jinja/pystr.h"

namespace df11::jinja {
namespace {

Status UndefinedError(const Value& v) { return InvalidArgument("UndefinedError: " + v.undefined_hint()); }

Status Unsupported(const char* op, const Value& a, const Value& b) {
  return TypeError(std::string("unsupported operand type(s) for ") + op + ": '" + a.TypeName() + "' and '" +
                   b.TypeName() + "'");
}

Status Overflow() { return Unimplemented("integer overflow (Python integers are unbounded; int64 is not)"); }

// Python float floor division and modulo (CPython float_divmod).
void FloatDivmod(double vx, double wx, double* floordiv, double* mod) {
  double m = std::fmod(vx, wx);
  double div = (vx - m) / wx;
  if (m != 0.0) {
    if ((wx < 0) != (m < 0)) {
      m += wx;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, wx);
  }
  double fd;
  if (div != 0.0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, vx / wx);
  }
  *floordiv = fd;
  *mod = m;
}

StatusOr<Value> Repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value("") : (seq.is_tuple() ? Value::Tuple({}) : Value::List({}));
  size_t unit = seq.is_string() ? seq.str().size() : seq.items().size() * sizeof(Value);
  if (unit != 0 && static_cast<uint64_t>(n) > (1ull << 40) / unit) return in.TooBig();
  DF11_RETURN_IF_ERROR(in.CheckSize(unit * static_cast<size_t>(n)));
  if (seq.is_string()) {
    std::string out;
    out.reserve(seq.str().size() * n);
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return seq.markup() ? Value::Markup(std::move(out)) : Value(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

StatusOr<Value> Add(Interpreter& in, const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    int64_t r;
    if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return Overflow();
    return Value(r);
  }
  if (a.is_number() && b.is_number()) return Value(a.as_double() + b.as_double());
  if (a.is_string() && b.is_string()) {
    DF11_RETURN_IF_ERROR(in.CheckSize(a.str().size() + b.str().size()));
    if (a.markup() || b.markup()) {
      // markupsafe: Markup + str escapes the plain operand.
      std::string l = a.markup() ? a.str() : pystr::HtmlEscape(a.str());
      return Value::Markup(l + (b.markup() ? b.str() : pystr::HtmlEscape(b.str())));
    }
    return Value(a.str() + b.str());
  }
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    DF11_RETURN_IF_ERROR(in.CheckSize((a.items().size() + b.items().size()) * sizeof(Value)));
    std::vector<Value> out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return a.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
  }
  if (a.is_string()) return TypeError(std::string("can only concatenate str (not \"") + b.TypeName() + "\") to str");
  if (a.is_list()) return TypeError(std::string("can only concatenate list (not \"") + b.TypeName() + "\") to list");
  return Unsupported("+", a, b);
}

StatusOr<Value> IntPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return Overflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
  }
  return Value(result);
}

}  // namespace

StatusOr<Value> BinaryOp(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "%" && a.is_string()) {
    // str.__mod__ accepts any right operand, undefined included (it is printed as "").
    DF11_ASSIGN_OR_RETURN(std::string s, PercentFormat(in, a.str(), b));
    return Value(std::move(s));
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (op == "+") return Add(in, a, b);
  if (op == "*") {
    if (a.is_integral() && (b.is_string() || b.is_sequence())) return Repeat(in, b, a.as_int());
    if (b.is_integral() && (a.is_string() || a.is_sequence())) return Repeat(in, a, b.as_int());
  }
  if (!a.is_number() || !b.is_number()) return Unsupported(op.c_str(), a, b);
  bool ints = a.is_integral() && b.is_integral();
  int64_t x = a.as_int(), y = b.as_int();
  double fx = a.as_double(), fy = b.as_double();
  int64_t r;
  if (op == "-") {
    if (!ints) return Value(fx - fy);
    if (__builtin_sub_overflow(x, y, &r)) return Overflow();
    return Value(r);
  }
  if (op == "*") {
    if (!ints) return Value(fx * fy);
    if (__builtin_mul_overflow(x, y, &r)) return Overflow();
    return Value(r);
  }
  if (op == "/") {
    if (fy == 0.0) return InvalidArgument("ZeroDivisionError: division by zero");
    if (ints) return Value(static_cast<double>(static_cast<long double>(x) / static_cast<long double>(y)));
    return Value(fx / fy);
  }
  if (op == "//" || op == "%") {
    if (ints ? y == 0 : fy == 0.0) {
      return InvalidArgument(op == "%" ? "ZeroDivisionError: modulo by zero" : "ZeroDivisionError: division by zero");
    }
    if (ints) {
      if (x == INT64_MIN && y == -1) return op == "%" ? Value(int64_t{0}) : StatusOr<Value>(Overflow());
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) q -= 1, m += y;
      return Value(op == "//" ? q : m);
    }
    double fd, fm;
    FloatDivmod(fx, fy, &fd, &fm);
    return Value(op == "//" ? fd : fm);
  }
  if (op == "**") {
    if (ints && y >= 0) return IntPow(x, y);
    if (fx == 0.0 && fy < 0) return InvalidArgument("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    if (fx < 0 && std::floor(fy) != fy) return Unimplemented("complex result of ** (negative base, fractional exponent)");
    return Value(std::pow(fx, fy));
  }
  return Internal("unknown operator " + op);
}

namespace {

// Python `needle in container`.
StatusOr<bool> Contains(Interpreter& in, const Value& container, const Value& needle) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!needle.is_string()) {
        return TypeError(std::string("'in <string>' requires string as left operand, not ") + needle.TypeName());
      }
      return container.str().find(needle.str()) != std::string::npos;
    case Value::Kind::kDict:
      if (!IsHashable(needle)) return TypeError(std::string("unhashable type: '") + needle.TypeName() + "'");
      return container.dict().Find(needle) != nullptr;
    case Value::Kind::kIterator: {
      Iterator& it = container.iterator();
      while (it.pos < it.items.size()) {
        if (Equals(it.items[it.pos++], needle)) return true;
      }
      if (!it.error.ok()) return it.error;
      return false;
    }
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kView:
      for (const Value& item : container.items()) {
        if (Equals(item, needle)) return true;
      }
      return false;
    default: return TypeError(std::string("argument of type '") + container.TypeName() + "' is not iterable");
  }
}

}  // namespace

StatusOr<bool> CompareValues(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in") return Contains(in, b, a);
  if (op == "notin") {
    DF11_ASSIGN_OR_RETURN(bool c, Contains(in, b, a));
    return !c;
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  StatusOr<int> c = Compare(a, b);
  if (!c.ok()) return TypeError("'" + op + "' not supported between instances of '" + a.TypeName() + "' and '" + b.TypeName() + "'");
  if (*c == 2) return false;  // NaN
  if (op == "<") return *c < 0;
  if (op == "<=") return *c <= 0;
  if (op == ">") return *c > 0;
  return *c >= 0;
}

namespace {

StatusOr<Value> EvalSlice(Interpreter& in, const Value& obj, const Expr& slice) {
  std::optional<int64_t> bounds[3];
  bool valid = true;
  for (int i = 0; i < 3; ++i) {
    if (!slice.kids[i]) continue;
    DF11_ASSIGN_OR_RETURN(Value b, in.Eval(*slice.kids[i]));
    if (b.is_none()) continue;
    if (!b.is_integral()) valid = false;
    else bounds[i] = b.as_int();
  }
  // jinja2 compiles slicing to a plain Python subscript (no sandbox getitem), so misuse fails.
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_dict()) return TypeError("unhashable type: 'slice'");
  if (obj.is_range() && valid) {
    auto [start, stop, step] = obj.range_bounds();
    int64_t b, e, st;
    if (!pystr::AdjustSlice(static_cast<int64_t>(obj.items().size()), bounds[0], bounds[1], bounds[2], &b, &e, &st)) {
      return InvalidArgument("ValueError: slice step cannot be zero");
    }
    std::vector<int64_t> idx;
    pystr::SliceIndices(static_cast<int64_t>(obj.items().size()), bounds[0], bounds[1], bounds[2], &idx);
    std::vector<Value> items;
    items.reserve(idx.size());
    for (int64_t i : idx) items.push_back(obj.items()[i]);
    return Value::MakeRange(start + b * step, start + e * step, step * st, std::move(items));
  }
  if (!obj.is_string() && !obj.is_sequence()) return TypeError(std::string("'") + obj.TypeName() + "' object is not subscriptable");
  if (!valid) return TypeError("slice indices must be integers or None or have an __index__ method");
  // A string slices by code point (by byte when it is ASCII), a list or tuple by item.
  const bool ascii = obj.is_string() && pystr::IsAscii(obj.str());
  const std::u32string u = obj.is_string() && !ascii ? pystr::Decode(obj.str()) : std::u32string();
  const size_t length = !obj.is_string() ? obj.items().size() : ascii ? obj.str().size() : u.size();
  std::vector<int64_t> idx;
  if (!pystr::SliceIndices(static_cast<int64_t>(length), bounds[0], bounds[1], bounds[2], &idx)) {
    return InvalidArgument("ValueError: slice step cannot be zero");
  }
  if (ascii) {
    std::string out;
    for (int64_t i : idx) out.push_back(obj.str()[i]);
    return Value(std::move(out));
  }
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i : idx) out.push_back(u[i]);
    return Value(pystr::Encode(out));
  }
  std::vector<Value> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(obj.items()[i]);
  return obj.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

StatusOr<Value> EvalContainer(Interpreter& in, const Expr& e) {
  if (e.kind == Expr::Kind::kDict) {
    Dict d;
    for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
      DF11_ASSIGN_OR_RETURN(Value k, in.Eval(*e.kids[i]));
      DF11_ASSIGN_OR_RETURN(Value v, in.Eval(*e.kids[i + 1]));
      if (!IsHashable(k)) return TypeError(std::string("unhashable type: '") + k.TypeName() + "'");
      d.Set(std::move(k), std::move(v));
    }
    return Value::MakeDict(std::move(d));
  }
  std::vector<Value> items;
  for (const auto& k : e.kids) {
    if (k->kind == Expr::Kind::kSlice) return Value::Undefined("slice used outside of a subscript");
    DF11_ASSIGN_OR_RETURN(Value v, in.Eval(*k));
    items.push_back(std::move(v));
  }
  return e.kind == Expr::Kind::kList ? Value::List(std::move(items)) : Value::Tuple(std::move(items));
}

StatusOr<Value> EvalGetItem(Interpreter& in, const Expr& e, bool const_mode) {
  DF11_ASSIGN_OR_RETURN(Value obj, in.Eval(*e.kids[0]));
  const Expr& key = *e.kids[1];
  if (key.kind == Expr::Kind::kSlice) {
    StatusOr<Value> v = EvalSlice(in, obj, key);
    if (!v.ok() && const_mode && v.status().message().rfind("TypeError", 0) == 0) {
      return Value::Undefined(v.status().message());  // compile-time folding uses getitem
    }
    return v;
  }
  DF11_ASSIGN_OR_RETURN(Value k, in.Eval(key));
  return GetItem(in, obj, k);
}

StatusOr<Value> EvalSign(Interpreter& in, const Expr& e) {
  DF11_ASSIGN_OR_RETURN(Value v, in.Eval(*e.kids[0]));
  if (v.is_undefined()) return UndefinedError(v);
  const char* op = e.kind == Expr::Kind::kNeg ? "-" : "+";
  if (!v.is_number()) return TypeError(std::string("bad operand type for unary ") + op + ": '" + v.TypeName() + "'");
  if (e.kind == Expr::Kind::kPos) return v.is_float() ? v : Value(v.as_int());
  if (v.is_float()) return Value(-v.as_double());
  if (v.as_int() == INT64_MIN) return Overflow();
  return Value(-v.as_int());
}

StatusOr<Value> EvalConcat(Interpreter& in, const Expr& e) {
  std::string out;
  for (const auto& k : e.kids) {
    DF11_ASSIGN_OR_RETURN(Value v, in.Eval(*k));
    DF11_RETURN_IF_ERROR(AppendStr(v, &out));
    DF11_RETURN_IF_ERROR(in.CheckSize(out.size()));
  }
  return Value(std::move(out));
}

// Chained comparison `a < b <= c`: operands are evaluated only as far as needed.
StatusOr<Value> EvalCompare(Interpreter& in, const Expr& e) {
  DF11_ASSIGN_OR_RETURN(Value left, in.Eval(*e.kids[0]));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    DF11_ASSIGN_OR_RETURN(Value right, in.Eval(*e.kids[i + 1]));
    DF11_ASSIGN_OR_RETURN(bool ok, CompareValues(in, e.ops[i], left, right));
    if (!ok) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

}  // namespace

StatusOr<CallArgs> EvalArgs(Interpreter& in, const ArgList* list) {
  CallArgs args;
  if (!list) return args;
  for (const auto& e : list->positional) {
    DF11_ASSIGN_OR_RETURN(Value v, in.Eval(*e));
    args.args.push_back(std::move(v));
  }
  for (const auto& [k, e] : list->keyword) {
    DF11_ASSIGN_OR_RETURN(Value v, in.Eval(*e));
    args.kwargs.emplace_back(k, std::move(v));
  }
  if (list->star) {
    DF11_ASSIGN_OR_RETURN(Value v, in.Eval(*list->star));
    DF11_ASSIGN_OR_RETURN(std::vector<Value> extra, in.Iterate(v));
    for (auto& x : extra) args.args.push_back(std::move(x));
  }
  if (list->star_star) {
    DF11_ASSIGN_OR_RETURN(Value v, in.Eval(*list->star_star));
    if (!v.is_dict()) return TypeError(std::string("argument after ** must be a mapping, not ") + v.TypeName());
    for (const auto& [k, x] : v.dict().entries()) {
      if (!k.is_string()) return TypeError("keywords must be strings");
      args.kwargs.emplace_back(k.str(), x);
    }
  }
  return args;
}

// Values jinja2's optimizer keeps as compile-time constants (nodes.Const.from_untrusted).
bool IsSafeConstant(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString: return true;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return std::all_of(v.items().begin(), v.items().end(), IsSafeConstant);
    case Value::Kind::kDict:
      for (const auto& [k, x] : v.dict().entries()) {
        if (!IsSafeConstant(k) || !IsSafeConstant(x)) return false;
      }
      return true;
    default: return false;
  }
}

StatusOr<Value> Interpreter::Eval(const Expr& e) {
  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  } guard(&eval_depth_);
  if (eval_depth_ > options_.limits.max_eval_depth) {
    return ResourceExhausted("template evaluation nested deeper than " + std::to_string(options_.limits.max_eval_depth));
  }
  if (e.const_fold && !const_mode_) {
    // jinja2 folds this constant subtree at compile time if it yields a plain value (or if it
    // is a whole {{ }}); otherwise the same code runs at render time with raw slicing.
    const bool saved_final = error_final_;
    const_mode_ = true;
    StatusOr<Value> folded = EvalImpl(e);
    const_mode_ = false;
    if (folded.ok() && (&e == print_root_ || IsSafeConstant(*folded))) return folded;
    error_final_ = saved_final;  // not foldable: evaluate at "render time" below
  }
  StatusOr<Value> v = EvalImpl(e);
  if (!v.ok()) return Locate(v.status(), e.line, e.col);
  if (v->depth() > kMaxValueDepth) {
    return Locate(ResourceExhausted("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels"), e.line, e.col);
  }
  return v;
}

StatusOr<Value> Interpreter::EvalImpl(const Expr& e) {
  DF11_RETURN_IF_ERROR(Step());
  Interpreter& in = *this;
  if (const_mode_) {
    // Compile-time evaluation cannot see variables, calls or context-dependent filters.
    const bool context_filter = e.kind == Expr::Kind::kFilter &&
                                (!e.kids[0] || e.name == "select" || e.name == "reject" || e.name == "selectattr" ||
                                 e.name == "rejectattr" || e.name == "map");
    if (e.kind == Expr::Kind::kName || e.kind == Expr::Kind::kCall || e.kind == Expr::Kind::kNsRef || context_filter) {
      return Status(StatusCode::kAborted, "not a compile-time constant");
    }
  }
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.literal;
    case Expr::Kind::kName: {
      const Value* v = Lookup(e.name);
      return v ? *v : Value::Undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple:
    case Expr::Kind::kDict: return EvalContainer(in, e);
    case Expr::Kind::kGetAttr: {
      DF11_ASSIGN_OR_RETURN(Value obj, Eval(*e.kids[0]));
      return GetAttr(in, obj, e.name);
    }
    case Expr::Kind::kGetItem: return EvalGetItem(in, e, const_mode_);
    case Expr::Kind::kSlice: return Value::Undefined("slice used outside of a subscript");
    case Expr::Kind::kCall: {
      DF11_ASSIGN_OR_RETURN(Value callee, Eval(*e.kids[0]));
      DF11_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(in, e.args.get()));
      return Call(callee, args);
    }
    case Expr::Kind::kFilter: {
      DF11_ASSIGN_OR_RETURN(Value input, Eval(*e.kids[0]));
      DF11_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(in, e.args.get()));
      return ApplyFilter(e.name, input, args);
    }
    case Expr::Kind::kTest: {
      DF11_ASSIGN_OR_RETURN(Value v, Eval(*e.kids[0]));
      DF11_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(in, e.args.get()));
      DF11_ASSIGN_OR_RETURN(bool r, ApplyTest(e.name, v, args));
      return Value(r != e.negated);
    }
    case Expr::Kind::kNot: {
      DF11_ASSIGN_OR_RETURN(Value v, Eval(*e.kids[0]));
      return Value(!v.Truthy());
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: return EvalSign(in, e);
    case Expr::Kind::kBinary: {
      DF11_ASSIGN_OR_RETURN(Value a, Eval(*e.kids[0]));
      DF11_ASSIGN_OR_RETURN(Value b, Eval(*e.kids[1]));
      return BinaryOp(in, e.attr, a, b);
    }
    case Expr::Kind::kAnd:
    case Expr::Kind::kOr: {
      DF11_ASSIGN_OR_RETURN(Value a, Eval(*e.kids[0]));
      if (a.Truthy() == (e.kind == Expr::Kind::kOr)) return a;
      return Eval(*e.kids[1]);
    }
    case Expr::Kind::kConcat: return EvalConcat(in, e);
    case Expr::Kind::kCompare: return EvalCompare(in, e);
    case Expr::Kind::kCondExpr: {
      DF11_ASSIGN_OR_RETURN(Value test, Eval(*e.kids[1]));
      if (test.Truthy()) return Eval(*e.kids[0]);
      if (e.kids[2]) return Eval(*e.kids[2]);
      if (const_mode_) return Status(StatusCode::kAborted, "not a compile-time constant");
      return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined");
    }
    case Expr::Kind::kNsRef: return Internal("namespace reference evaluated as an expression");
  }
  return Internal("unknown expression kind");
}

}  // namespace df11::jinja
