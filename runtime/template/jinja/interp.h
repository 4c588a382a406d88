// Tree-walking Jinja interpreter: executes a parsed template (ast.h) against variables and
// returns the rendered text. Scoping follows jinja2: `for` iterations and macro calls get a
// fresh frame (assignments inside do not leak out, hence `namespace()`), `if` does not.
// Resource limits turn runaway templates into RESOURCE_EXHAUSTED instead of hangs or OOM.
// One Interpreter renders once; it is not thread-safe, but many may share one template.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/template/jinja/ast.h"

namespace df11::jinja {

struct RenderLimits {
  int64_t max_output_bytes = 64ll << 20;   // rendered text
  int64_t max_string_bytes = 16ll << 20;   // any single string/list built while rendering
  int64_t max_loop_iterations = 1000000;   // summed over all loops of one render
  int64_t max_steps = 20000000;            // expression/statement evaluations
  int max_call_depth = 64;                 // nested macro calls
  int max_eval_depth = 1000;               // nested expression/statement evaluation (C++ stack)
};

struct RenderOptions {
  RenderLimits limits;
  // Wall-clock time for strftime_now(); defaults to the current local time.
  std::function<std::tm()> now;
};

// One scope of variables (template root, loop iteration, macro call, with/set/filter block).
// Lookups walk to the parent; macros keep a weak reference to the frame they were defined in.
struct Frame {
  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* Find(const std::string& name) const;
  void Set(const std::string& name, Value v);
};

class Interpreter {
 public:
  // `vars` (the template's render variables: messages, add_generation_prompt, ...) must
  // outlive the interpreter.
  Interpreter(const Dict& vars, const RenderOptions& options);
  ~Interpreter();

  // Renders a kRoot statement from ParseTemplate.
  StatusOr<std::string> Render(const Stmt& root);

  // Evaluates an expression (eval.cc); errors carry the expression's line and column.
  StatusOr<Value> Eval(const Expr& e);
  // A variable: innermost frame first, then render variables, then globals; null if unknown.
  const Value* Lookup(const std::string& name) const;
  // Counts one evaluation step; RESOURCE_EXHAUSTED past RenderLimits::max_steps.
  Status Step();

  // ---- services for builtins (filters, tests, methods, globals) ----
  // Calls a function value (builtin, bound method or macro).
  StatusOr<Value> Call(const Value& callee, CallArgs& args);
  // Items of an iterable: list/tuple items, dict keys, string characters, iterator remainder
  // (consumes it), undefined -> empty. TypeError for non-iterables.
  StatusOr<std::vector<Value>> Iterate(const Value& v);
  // Fails with RESOURCE_EXHAUSTED when a string/list of `bytes` would exceed the limits.
  Status CheckSize(size_t bytes) const;
  size_t MaxStringBytes() const { return static_cast<size_t>(options_.limits.max_string_bytes); }
  Status TooBig() const { return CheckSize(SIZE_MAX); }  // RESOURCE_EXHAUSTED
  // Registers a namespace so reference cycles through it are broken after rendering.
  Value NewNamespace(Dict attrs);
  std::tm Now() const;
  // Marks an error as already carrying its message (raise_exception), so no location prefix
  // is added while it propagates.
  Status Raise(Status s);
  // Applies a filter or test by name (used by map/select/selectattr).
  StatusOr<Value> ApplyFilter(const std::string& name, const Value& input, CallArgs& args);
  StatusOr<bool> ApplyTest(const std::string& name, const Value& input, CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Status Exec(const Body& body);
  Status ExecStmt(const Stmt& s);
  Status ExecStmtImpl(const Stmt& s);
  Status ExecIf(const Stmt& s);
  Status ExecFor(const Stmt& s);
  Status ExecSet(const Stmt& s);
  Status ExecSetBlock(const Stmt& s);
  Status ExecMacro(const Stmt& s);
  Status ExecCallBlock(const Stmt& s);
  Status ExecFilterBlock(const Stmt& s);
  Status ExecWith(const Stmt& s);
  Status Output(const Value& v);
  // Renders `body` into a string in a new child frame (set/filter blocks, generation).
  StatusOr<std::string> Capture(const Body& body, const std::vector<std::string>& undefined);
  // A frame whose `undefined` names start as undefined (see Stmt::frame_undefined).
  static std::shared_ptr<Frame> NewFrame(std::shared_ptr<Frame> parent, const std::vector<std::string>& undefined);
  Status Assign(const Expr& target, const Value& v);
  Value MakeMacro(std::shared_ptr<MacroDef> def, bool is_caller);
  StatusOr<Value> CallMacro(const std::shared_ptr<MacroDef>& def, const std::weak_ptr<Frame>& scope,
                            CallArgs& args);
  Status Locate(Status s, int line, int col);
  StatusOr<Value> EvalImpl(const Expr& e);

  const Dict& vars_;
  RenderOptions options_;
  std::shared_ptr<Frame> frame_;
  std::string* out_ = nullptr;
  Flow flow_ = Flow::kNormal;
  bool error_final_ = false;          // the propagating error already has its final message
  bool const_mode_ = false;           // replaying jinja2's compile-time folding (Expr::const_fold)
  const Expr* print_root_ = nullptr;  // expression of the {{ }} being evaluated
  int call_depth_ = 0;
  int eval_depth_ = 0;
  int64_t steps_ = 0;
  int64_t iterations_ = 0;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

// Python-style argument binding for builtins: fills `params` in order from positional, then
// keyword arguments; unbound optional ones take their default; TypeError otherwise.
struct Param {
  Param(const char* n) : name(n) {}  // NOLINT: required parameter
  Param(const char* n, bool req, Value d) : name(n), required(req), dflt(std::move(d)) {}
  const char* name;
  bool required = true;
  Value dflt;
};
StatusOr<std::vector<Value>> BindArgs(const std::string& fname, CallArgs& args,
                                      const std::vector<Param>& params);

// Python binary operator `op` (+ - * / // % **) on two values.
StatusOr<Value> BinaryOp(Interpreter& in, const std::string& op, const Value& a, const Value& b);

// Python `fmt % rhs` string formatting (%s %r %d %i %f %e %g %x %o, flags, width, precision).
StatusOr<std::string> PercentFormat(Interpreter& in, const std::string& fmt, const Value& rhs);

// Python comparison `a op b` for op in == != < <= > >= in notin.
StatusOr<bool> CompareValues(Interpreter& in, const std::string& op, const Value& a, const Value& b);

// Evaluates call-site arguments (expanding *args and **kwargs). `list` may be null.
StatusOr<CallArgs> EvalArgs(Interpreter& in, const ArgList* list);

}  // namespace df11::jinja
