// Statement execution, scoping, macros and limits of the Jinja interpreter (see interp.h).
// Expression evaluation lives in eval.cc.
#include "runtime/template/jinja/interp.h"

#include <algorithm>
#include <chrono>

#include "runtime/template/jinja/builtins.h"

namespace df11::jinja {

const Value* Frame::Find(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent.get()) {
    for (const auto& [k, v] : f->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Frame::Set(const std::string& name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

Interpreter::Interpreter(const Dict& vars, const RenderOptions& options) : vars_(vars), options_(options) {}

Interpreter::~Interpreter() {
  // Namespaces are the only mutable objects, so only they can close reference cycles.
  for (auto& ns : namespaces_) ns->attrs = Dict();
}

StatusOr<std::string> Interpreter::Render(const Stmt& root) {
  std::string out;
  out_ = &out;
  frame_ = NewFrame(nullptr, root.frame_undefined);
  DF11_RETURN_IF_ERROR(Exec(root.bodies[0]));
  return out;
}

std::shared_ptr<Frame> Interpreter::NewFrame(std::shared_ptr<Frame> parent, const std::vector<std::string>& undefined) {
  auto frame = std::make_shared<Frame>(Frame{std::move(parent), {}});
  for (const auto& name : undefined) frame->vars.emplace_back(name, Value::Undefined("'" + name + "' is undefined"));
  return frame;
}

Status Interpreter::Step() {
  if (++steps_ > options_.limits.max_steps) {
    return ResourceExhausted("template evaluation exceeded " + std::to_string(options_.limits.max_steps) + " steps");
  }
  return Status::Ok();
}

Status Interpreter::CheckSize(size_t bytes) const {
  if (bytes > static_cast<uint64_t>(options_.limits.max_string_bytes)) {
    return ResourceExhausted("template built a value over the limit of " +
                             std::to_string(options_.limits.max_string_bytes) + " bytes");
  }
  return Status::Ok();
}

Value Interpreter::NewNamespace(Dict attrs) {
  auto ns = std::make_shared<Namespace>();
  ns->attrs = std::move(attrs);
  namespaces_.push_back(ns);
  return Value::MakeNamespace(std::move(ns));
}

std::tm Interpreter::Now() const {
  if (options_.now) return options_.now();
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

Status Interpreter::Raise(Status s) {
  error_final_ = true;
  return s;
}

Status Interpreter::Locate(Status s, int line, int col) {
  if (s.ok() || error_final_) return s;
  error_final_ = true;
  return Status(s.code(), "template render error at line " + std::to_string(line) + ", col " +
                              std::to_string(col) + ": " + s.message());
}

const Value* Interpreter::Lookup(const std::string& name) const {
  if (const Value* v = frame_->Find(name)) return v;
  if (const Value* v = vars_.Find(Value(name))) return v;
  return FindGlobal(name);
}

Status Interpreter::Exec(const Body& body) {
  for (const auto& s : body) {
    DF11_RETURN_IF_ERROR(ExecStmt(*s));
    if (flow_ != Flow::kNormal) return Status::Ok();
  }
  return Status::Ok();
}

Status Interpreter::ExecStmt(const Stmt& s) {
  DF11_RETURN_IF_ERROR(Step());
  // Statements nest (if/for/macro bodies) and recurse through macros: bound the C++ stack.
  if (++eval_depth_ > options_.limits.max_eval_depth) {
    --eval_depth_;
    return ResourceExhausted("template evaluation nested deeper than " + std::to_string(options_.limits.max_eval_depth));
  }
  Status st = ExecStmtImpl(s);
  --eval_depth_;
  return st;
}

Status Interpreter::ExecStmtImpl(const Stmt& s) {
  Status st;
  switch (s.kind) {
    case Stmt::Kind::kText:
      out_->append(s.text);
      if (static_cast<int64_t>(out_->size()) > options_.limits.max_output_bytes) {
        st = ResourceExhausted("rendered output exceeds " + std::to_string(options_.limits.max_output_bytes) + " bytes");
      }
      break;
    case Stmt::Kind::kPrint: {
      print_root_ = s.exprs[0].get();
      StatusOr<Value> v = Eval(*s.exprs[0]);
      print_root_ = nullptr;
      st = v.ok() ? Output(*v) : v.status();
      break;
    }
    case Stmt::Kind::kIf: st = ExecIf(s); break;
    case Stmt::Kind::kFor: st = ExecFor(s); break;
    case Stmt::Kind::kSet: st = ExecSet(s); break;
    case Stmt::Kind::kSetBlock: st = ExecSetBlock(s); break;
    case Stmt::Kind::kMacro: st = ExecMacro(s); break;
    case Stmt::Kind::kCallBlock: st = ExecCallBlock(s); break;
    case Stmt::Kind::kFilterBlock: st = ExecFilterBlock(s); break;
    case Stmt::Kind::kWith: st = ExecWith(s); break;
    case Stmt::Kind::kBreak: flow_ = Flow::kBreak; break;
    case Stmt::Kind::kContinue: flow_ = Flow::kContinue; break;
    case Stmt::Kind::kGroup: st = Exec(s.bodies[0]); break;
    case Stmt::Kind::kGeneration: {
      StatusOr<std::string> text = Capture(s.bodies[0], s.frame_undefined);
      st = text.ok() ? Output(Value(std::move(*text))) : text.status();
      break;
    }
    case Stmt::Kind::kRoot: st = Exec(s.bodies[0]); break;
  }
  return Locate(st, s.line, s.col);
}

Status Interpreter::Output(const Value& v) {
  DF11_RETURN_IF_ERROR(AppendStr(v, out_));
  if (static_cast<int64_t>(out_->size()) > options_.limits.max_output_bytes) {
    return ResourceExhausted("rendered output exceeds " + std::to_string(options_.limits.max_output_bytes) + " bytes");
  }
  return Status::Ok();
}

Status Interpreter::ExecIf(const Stmt& s) {
  for (size_t i = 0; i < s.exprs.size(); ++i) {
    DF11_ASSIGN_OR_RETURN(Value test, Eval(*s.exprs[i]));
    if (test.Truthy()) return Exec(s.bodies[i]);
  }
  return Exec(s.else_body);
}

Status Interpreter::ExecFor(const Stmt& s) {
  const Expr& target = *s.exprs[0];
  DF11_ASSIGN_OR_RETURN(Value iterable, Eval(*s.exprs[1]));
  DF11_ASSIGN_OR_RETURN(std::vector<Value> all, Iterate(iterable));
  std::shared_ptr<Frame> outer = frame_;
  auto items = std::make_shared<std::vector<Value>>();
  if (s.exprs[2]) {
    // `for x in xs if cond`: the condition sees the loop target (but no `loop`).
    for (Value& item : all) {
      frame_ = std::make_shared<Frame>(Frame{outer, {}});
      Status st = Assign(target, item);
      StatusOr<Value> keep = st.ok() ? Eval(*s.exprs[2]) : StatusOr<Value>(st);
      frame_ = outer;
      if (!keep.ok()) return keep.status();
      if (keep->Truthy()) items->push_back(std::move(item));
    }
  } else {
    *items = std::move(all);
  }
  if (items->empty()) {
    frame_ = NewFrame(outer, s.else_frame_undefined);
    Status st = Exec(s.else_body);
    frame_ = outer;
    return st;
  }
  auto changed = std::make_shared<Value>();
  const int64_t depth0 = 0;  // loop.depth only grows in recursive loops, which are unsupported
  Status st;
  for (size_t i = 0; i < items->size(); ++i) {
    if (++iterations_ > options_.limits.max_loop_iterations) {
      st = ResourceExhausted("template loops exceeded " + std::to_string(options_.limits.max_loop_iterations) + " iterations");
      break;
    }
    frame_ = NewFrame(outer, s.frame_undefined);
    auto info = std::make_shared<LoopInfo>(LoopInfo{static_cast<int64_t>(i), static_cast<int64_t>(items->size()), depth0, items, changed});
    frame_->Set("loop", Value::MakeLoop(std::move(info)));
    st = Assign(target, (*items)[i]);
    if (st.ok()) st = Exec(s.bodies[0]);
    if (!st.ok()) break;
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  frame_ = outer;
  return st;
}

Status Interpreter::Assign(const Expr& target, const Value& v) {
  if (target.kind == Expr::Kind::kName) {
    frame_->Set(target.name, v);
    return Status::Ok();
  }
  if (target.kind == Expr::Kind::kNsRef) {
    const Value* ns = Lookup(target.name);
    if (!ns || !ns->is_namespace()) {
      return TypeError("cannot assign attribute '" + target.attr + "' on non-namespace object '" + target.name + "'");
    }
    ns->ns().attrs.Set(Value(target.attr), v);
    return Status::Ok();
  }
  // Tuple unpacking.
  DF11_ASSIGN_OR_RETURN(std::vector<Value> parts, Iterate(v));
  if (parts.size() != target.kids.size()) {
    return InvalidArgument(std::string(parts.size() > target.kids.size() ? "ValueError: too many" : "ValueError: not enough") +
                           " values to unpack (expected " + std::to_string(target.kids.size()) + ", got " +
                           std::to_string(parts.size()) + ")");
  }
  for (size_t i = 0; i < parts.size(); ++i) DF11_RETURN_IF_ERROR(Assign(*target.kids[i], parts[i]));
  return Status::Ok();
}

Status Interpreter::ExecSet(const Stmt& s) {
  DF11_ASSIGN_OR_RETURN(Value v, Eval(*s.exprs[1]));
  return Assign(*s.exprs[0], v);
}

StatusOr<std::string> Interpreter::Capture(const Body& body, const std::vector<std::string>& undefined) {
  std::string buf;
  std::string* saved = out_;
  std::shared_ptr<Frame> saved_frame = frame_;
  out_ = &buf;
  frame_ = NewFrame(saved_frame, undefined);
  Status st = Exec(body);
  out_ = saved;
  frame_ = saved_frame;
  flow_ = Flow::kNormal;
  DF11_RETURN_IF_ERROR(st);
  return buf;
}

// Applies a filter chain whose innermost operand is the block's text.
static StatusOr<Value> ApplyFilterChain(Interpreter& in, const Expr* f, Value input) {
  if (!f) return input;
  DF11_ASSIGN_OR_RETURN(Value inner, ApplyFilterChain(in, f->kids[0].get(), std::move(input)));
  DF11_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(in, f->args.get()));
  return in.ApplyFilter(f->name, inner, args);
}

Status Interpreter::ExecSetBlock(const Stmt& s) {
  DF11_ASSIGN_OR_RETURN(std::string text, Capture(s.bodies[0], s.frame_undefined));
  DF11_ASSIGN_OR_RETURN(Value v, ApplyFilterChain(*this, s.exprs[1].get(), Value(std::move(text))));
  return Assign(*s.exprs[0], v);
}

Status Interpreter::ExecFilterBlock(const Stmt& s) {
  DF11_ASSIGN_OR_RETURN(std::string text, Capture(s.bodies[0], s.frame_undefined));
  DF11_ASSIGN_OR_RETURN(Value v, ApplyFilterChain(*this, s.exprs[0].get(), Value(std::move(text))));
  return Output(v);
}

Status Interpreter::ExecWith(const Stmt& s) {
  // Values are evaluated in the enclosing scope, then bound in a new one.
  std::vector<Value> values;
  for (size_t i = 1; i < s.exprs.size(); i += 2) {
    DF11_ASSIGN_OR_RETURN(Value v, Eval(*s.exprs[i]));
    values.push_back(std::move(v));
  }
  std::shared_ptr<Frame> outer = frame_;
  frame_ = NewFrame(outer, s.frame_undefined);
  Status st;
  for (size_t i = 0; i < values.size() && st.ok(); ++i) st = Assign(*s.exprs[2 * i], values[i]);
  if (st.ok()) st = Exec(s.bodies[0]);
  frame_ = outer;
  return st;
}

Value Interpreter::MakeMacro(std::shared_ptr<MacroDef> def, bool is_caller) {
  std::weak_ptr<Frame> scope = frame_;
  std::string name = (is_caller ? "caller" : "macro '" + def->name + "'");
  return Value::MakeFunction(name, [def, scope](Interpreter& in, CallArgs& args) {
    return in.CallMacro(def, scope, args);
  });
}

Status Interpreter::ExecMacro(const Stmt& s) {
  frame_->Set(s.macro->name, MakeMacro(s.macro, false));
  return Status::Ok();
}

Status Interpreter::ExecCallBlock(const Stmt& s) {
  const Expr& call = *s.exprs[0];
  DF11_ASSIGN_OR_RETURN(Value callee, Eval(*call.kids[0]));
  DF11_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(*this, call.args.get()));
  args.kwargs.emplace_back("caller", MakeMacro(s.macro, true));
  DF11_ASSIGN_OR_RETURN(Value result, Call(callee, args));
  return Output(result);
}

// Binds call arguments to a macro's parameters in `frame` (Python rules, plus jinja2's
// varargs/kwargs/caller); `bound[i]` tells which parameters were given.
static Status BindMacroArgs(const MacroDef& def, CallArgs& args, Frame* frame, std::vector<bool>* bound) {
  const size_t n = def.params.size();
  bound->assign(n, false);
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.args.size(); ++i) {
    if (i < n) {
      frame->Set(def.params[i], args.args[i]);
      (*bound)[i] = true;
    } else if (def.uses_varargs) {
      varargs.push_back(args.args[i]);
    } else {
      return TypeError("macro '" + def.name + "' takes not more than " + std::to_string(n) + " argument(s)");
    }
  }
  Dict kwargs;
  for (auto& [key, v] : args.kwargs) {
    auto it = std::find(def.params.begin(), def.params.end(), key);
    if (it != def.params.end()) {
      size_t idx = static_cast<size_t>(it - def.params.begin());
      if ((*bound)[idx]) return TypeError("macro '" + def.name + "' got multiple values for argument '" + key + "'");
      frame->Set(key, v);
      (*bound)[idx] = true;
    } else if (key == "caller" && (def.uses_caller || def.name == "caller")) {
      frame->Set("caller", v);
    } else if (def.uses_kwargs) {
      kwargs.Set(Value(key), v);
    } else {
      return TypeError("macro '" + def.name + "' takes no keyword argument '" + key + "'");
    }
  }
  if (def.uses_varargs) frame->Set("varargs", Value::Tuple(std::move(varargs)));
  if (def.uses_kwargs) frame->Set("kwargs", Value::MakeDict(std::move(kwargs)));
  return Status::Ok();
}

StatusOr<Value> Interpreter::CallMacro(const std::shared_ptr<MacroDef>& def, const std::weak_ptr<Frame>& scope,
                                       CallArgs& args) {
  std::shared_ptr<Frame> parent = scope.lock();
  if (!parent) return Unimplemented("macro '" + def->name + "' called after its defining scope ended");
  if (call_depth_ >= options_.limits.max_call_depth) {
    return ResourceExhausted("macro calls nested deeper than " + std::to_string(options_.limits.max_call_depth));
  }
  auto frame = NewFrame(parent, def->frame_undefined);
  std::vector<bool> bound;
  DF11_RETURN_IF_ERROR(BindMacroArgs(*def, args, frame.get(), &bound));
  std::shared_ptr<Frame> saved_frame = frame_;
  std::string* saved_out = out_;
  std::string buf;
  frame_ = frame;
  out_ = &buf;
  ++call_depth_;
  // Missing parameters: defaults are evaluated in the macro's frame (they may use earlier ones).
  Status st;
  const size_t n = def->params.size(), first_default = n - def->defaults.size();
  for (size_t i = 0; i < n && st.ok(); ++i) {
    if (bound[i]) continue;
    if (i < first_default) {
      frame->Set(def->params[i], Value::Undefined("parameter '" + def->params[i] + "' was not provided"));
      continue;
    }
    StatusOr<Value> d = Eval(*def->defaults[i - first_default]);
    if (d.ok()) frame->Set(def->params[i], *d); else st = d.status();
  }
  if (st.ok()) st = Exec(def->body);
  flow_ = Flow::kNormal;
  --call_depth_;
  out_ = saved_out;
  frame_ = saved_frame;
  DF11_RETURN_IF_ERROR(st);
  return Value(std::move(buf));
}

StatusOr<Value> Interpreter::ApplyFilter(const std::string& name, const Value& input, CallArgs& args) {
  DF11_RETURN_IF_ERROR(Step());
  return CallFilter(*this, name, input, args);
}

StatusOr<bool> Interpreter::ApplyTest(const std::string& name, const Value& input, CallArgs& args) {
  DF11_RETURN_IF_ERROR(Step());
  return CallTest(*this, name, input, args);
}

StatusOr<Value> Interpreter::Call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) return InvalidArgument("UndefinedError: " + callee.undefined_hint() + " (called)");
  if (!callee.is_function()) return TypeError(std::string("'") + callee.TypeName() + "' object is not callable");
  DF11_RETURN_IF_ERROR(Step());
  return callee.function().fn(*this, args);
}

StatusOr<std::vector<Value>> Interpreter::Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return std::vector<Value>{};
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kView: return v.items();
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, val] : v.dict().entries()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        size_t j = i + 1;
        while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
        chars.emplace_back(s.substr(i, j - i));
        i = j;
      }
      return chars;
    }
    case Value::Kind::kIterator: {
      Iterator& it = v.iterator();
      std::vector<Value> rest(it.items.begin() + static_cast<std::ptrdiff_t>(it.pos), it.items.end());
      it.pos = it.items.size();
      if (!it.error.ok()) return it.error;
      return rest;
    }
    default: return TypeError(std::string("'") + v.TypeName() + "' object is not iterable");
  }
}

StatusOr<std::vector<Value>> BindArgs(const std::string& fname, CallArgs& args, const std::vector<Param>& params) {
  std::vector<Value> out(params.size());
  std::vector<bool> bound(params.size(), false);
  if (args.args.size() > params.size()) {
    return TypeError(fname + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
                     std::to_string(args.args.size()) + " given)");
  }
  for (size_t i = 0; i < args.args.size(); ++i) out[i] = args.args[i], bound[i] = true;
  for (auto& [key, v] : args.kwargs) {
    size_t idx = params.size();
    for (size_t i = 0; i < params.size(); ++i) {
      if (key == params[i].name) idx = i;
    }
    if (idx == params.size()) return TypeError(fname + "() got an unexpected keyword argument '" + key + "'");
    if (bound[idx]) return TypeError(fname + "() got multiple values for argument '" + key + "'");
    out[idx] = v, bound[idx] = true;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (bound[i]) continue;
    if (params[i].required) return TypeError(fname + "() missing required argument '" + params[i].name + "'");
    out[i] = params[i].dflt;
  }
  return out;
}

}  // namespace df11::jinja
