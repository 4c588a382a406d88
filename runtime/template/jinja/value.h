// The Jinja evaluator's dynamic value: Python's data model reduced to what chat templates use.
// Kinds: undefined (jinja2 Undefined: prints "", falsy, fails on attribute access), none, bool,
// int (int64; overflow is an error, never a wrap), float, string (UTF-8, optionally "markup"
// = markupsafe.Markup), list, tuple, dict (insertion-ordered, Python key equality), function
// (builtins, bound methods, macros), namespace (the only mutable object), iterator (a one-shot
// generator such as `xs|select(...)`: always truthy, has no len), view (dict.items()/keys()/
// values(): iterable and sized, not subscriptable, printed as dict_items([...]); and range(),
// printed as range(0, 3)) and loop (the `loop` object).
// Values are cheap to copy: containers are shared and immutable (ImmutableSandboxedEnvironment).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/base/status.h"

namespace df11::jinja {

class Value;
class Interpreter;

// Arguments of a call: positional then keyword, as written at the call site.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

using NativeFn = std::function<StatusOr<Value>(Interpreter&, CallArgs&)>;

struct Function {
  std::string name;  // for error messages: "macro 'm'", "str.split", "range"
  NativeFn fn;
};

// Insertion-ordered mapping with Python key semantics (1 == 1.0 == True are one key).
class Dict {
 public:
  // Returns nullptr if absent.
  const Value* Find(const Value& key) const;
  // Inserts or overwrites (keeps the first insertion's position, like Python).
  void Set(Value key, Value value);
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  size_t size() const;

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> string_index_;  // string keys -> entries_ index
};

struct Namespace {
  Dict attrs;
};

// A Python generator/iterator: items are produced eagerly but consumed once. Like a
// generator, a failure while producing them surfaces only when consumption reaches it:
// `error` is raised after the last item (so `xs|map(...)` that is never iterated never fails).
struct Iterator {
  std::vector<Value> items;
  size_t pos = 0;
  Status error;
};

// State behind the `loop` variable of one for-loop iteration.
struct LoopInfo {
  int64_t index0 = 0;
  int64_t length = 0;
  int64_t depth0 = 0;
  std::shared_ptr<const std::vector<Value>> items;
  std::shared_ptr<Value> changed_last;  // loop.changed() memory, shared by all iterations
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kFunction,
    kNamespace, kIterator, kLoop, kView,
  };
  enum class View : uint8_t { kNone, kItems, kKeys, kValues, kRange };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::kBool), b_(b) {}  // NOLINT: implicit by design
  Value(int64_t i) : kind_(Kind::kInt), i_(i) {}  // NOLINT
  Value(int i) : kind_(Kind::kInt), i_(i) {}  // NOLINT
  Value(double f) : kind_(Kind::kFloat), f_(f) {}  // NOLINT
  Value(std::string s);  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT

  // `hint` says what was undefined, e.g. "'x' is undefined" (used when the value is misused).
  static Value Undefined(std::string hint);
  static Value None();
  static Value Markup(std::string s);
  static Value List(std::vector<Value> items);
  static Value Tuple(std::vector<Value> items);
  static Value MakeDict(Dict d);
  static Value MakeFunction(std::string name, NativeFn fn);
  static Value MakeNamespace(std::shared_ptr<Namespace> ns);
  static Value MakeIterator(std::vector<Value> items, Status error = Status::Ok());
  static Value MakeLoop(std::shared_ptr<LoopInfo> loop);
  static Value MakeView(View view, std::vector<Value> items);
  static Value MakeRange(int64_t start, int64_t stop, int64_t step, std::vector<Value> items);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_iterator() const { return kind_ == Kind::kIterator; }
  bool is_loop() const { return kind_ == Kind::kLoop; }
  bool is_view() const { return kind_ == Kind::kView; }
  bool is_range() const { return kind_ == Kind::kView && view_ == View::kRange; }
  View view() const { return view_; }
  // bool, int or float (Python numbers.Number; bool is an int).
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  // bool or int.
  bool is_integral() const { return kind_ == Kind::kBool || kind_ == Kind::kInt; }
  bool markup() const { return markup_; }
  // Nesting depth of containers (0 for scalars), saturating at 65535. The interpreter rejects
  // values nested deeper than kMaxValueDepth, which bounds recursion in printing, comparison
  // and destruction.
  int depth() const { return depth_; }

  bool as_bool() const { return b_; }
  // For bool/int: the integer value.
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  // For any number: the value as a double.
  double as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  // Items of a list, tuple or view.
  const std::vector<Value>& items() const;
  // start, stop, step of a range.
  std::array<int64_t, 3> range_bounds() const;
  const Dict& dict() const { return *static_cast<const Dict*>(ptr_.get()); }
  const Function& function() const { return *static_cast<const Function*>(ptr_.get()); }
  Namespace& ns() const { return *static_cast<Namespace*>(ptr_.get()); }
  Iterator& iterator() const { return *static_cast<Iterator*>(ptr_.get()); }
  const LoopInfo& loop() const { return *static_cast<const LoopInfo*>(ptr_.get()); }
  const std::string& undefined_hint() const;

  // Python truthiness (undefined is falsy, iterators are always truthy).
  bool Truthy() const;
  // Python type name for messages: 'str', 'int', 'list', 'dict', 'NoneType', 'Undefined', ...
  const char* TypeName() const;
  // Identity (Python `is`) for reference kinds; value equality for scalars.
  bool SameAs(const Value& other) const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool markup_ = false;
  View view_ = View::kNone;
  uint16_t depth_ = 0;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> ptr_;
};

inline constexpr int kMaxValueDepth = 600;  // above the 512 levels FromJson accepts

// Python `a == b` (deep for containers; 1 == 1.0 == True; list != tuple).
bool Equals(const Value& a, const Value& b);
// Python ordering: returns <0, 0, >0, or INVALID_ARGUMENT (TypeError) for unorderable kinds.
StatusOr<int> Compare(const Value& a, const Value& b);
// True if `v` can be a dict key (Python hashable): scalars, strings and tuples of those.
bool IsHashable(const Value& v);

// Python str(v) appended to *out. Fails (UNIMPLEMENTED) for kinds whose Python str() shows a
// memory address (functions, iterators, loop objects): we refuse instead of printing garbage.
Status AppendStr(const Value& v, std::string* out);
// Python repr(v) appended to *out (strings quoted).
Status AppendRepr(const Value& v, std::string* out);
StatusOr<std::string> ToStr(const Value& v);

// TypeError-style failure (render error, INVALID_ARGUMENT).
Status TypeError(std::string message);

}  // namespace df11::jinja
