// Jinja syntax tree produced by the parser and walked by the interpreter. Nodes are immutable
// after parsing, so one parsed template can be rendered from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/template/jinja/value.h"

namespace df11::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Call-site arguments: f(a, b, k=v, *args, **kwargs).
struct ArgList {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star;       // *args (may be null)
  ExprPtr star_star;  // **kwargs (may be null)
};

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kList,      // kids
    kTuple,     // kids
    kDict,      // kids = k0, v0, k1, v1, ...
    kGetAttr,   // kids[0].name
    kGetItem,   // kids[0][kids[1]]
    kSlice,     // kids = start, stop, step (null = omitted); only inside kGetItem
    kCall,      // kids[0](args)
    kFilter,    // kids[0] | name(args); kids[0] null in filter blocks
    kTest,      // kids[0] is [not] name(args); negated
    kNot,       // not kids[0]
    kNeg,       // -kids[0]
    kPos,       // +kids[0]
    kBinary,    // kids[0] op kids[1]; op in + - * / // % **
    kAnd,       // kids[0] and kids[1]
    kOr,        // kids[0] or kids[1]
    kConcat,    // kids joined with ~
    kCompare,   // kids[0] ops[0] kids[1] ops[1] kids[2] ... (chained)
    kCondExpr,  // kids = then, test, else (else may be null)
    kNsRef,     // name.attr as an assignment target of `set`
  };
  Kind kind;
  int line = 0, col = 0;
  std::string name;              // kName, kGetAttr, kFilter, kTest, kNsRef (namespace name)
  std::string attr;              // kNsRef attribute; kBinary operator
  std::vector<std::string> ops;  // kCompare operators: == != < <= > >= in notin
  Value literal;                 // kLiteral
  std::vector<ExprPtr> kids;
  std::unique_ptr<ArgList> args;  // kCall, kFilter, kTest (may be null when no arguments)
  bool negated = false;           // kTest
  // The subtree contains a slice. jinja2's optimizer tries to evaluate every expression at
  // compile time (Node.as_const: lazily, so `a or x` folds when `a` is truthy, and failing on
  // variables and calls); there slicing goes through the sandbox getitem, so a slice TypeError
  // yields undefined instead of failing. A folded value is kept when it is a plain value (or,
  // for a whole {{ }}, always). The interpreter replays this only where it can matter.
  bool const_fold = false;
};

// Calls fn(Expr*) on each sub-expression of `e`: kids, then call arguments (null ones too).
template <typename Fn>
void ForEachChild(const Expr& e, Fn fn) {
  for (const auto& k : e.kids) fn(k.get());
  if (!e.args) return;
  for (const auto& a : e.args->positional) fn(a.get());
  for (const auto& [name, a] : e.args->keyword) fn(a.get());
  fn(e.args->star.get());
  fn(e.args->star_star.get());
}

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned to the last defaults.size() params
  Body body;
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
  std::vector<std::string> frame_undefined;  // see Stmt::frame_undefined
};

struct Stmt {
  enum class Kind {
    kText,        // text
    kPrint,       // {{ expr }} or {% print expr %}: exprs[0]
    kIf,          // exprs = tests of if/elif..., bodies aligned, else_body
    kFor,         // target=exprs[0], iter=exprs[1], filter=exprs[2] (may be null); bodies[0]; else_body
    kSet,         // target=exprs[0] value=exprs[1]
    kSetBlock,    // target=exprs[0] filter chain=exprs[1] (may be null); bodies[0]
    kMacro,       // macro
    kCallBlock,   // call=exprs[0]; macro = caller signature + body
    kFilterBlock, // filter chain=exprs[0] (kFilter nodes with null innermost operand); bodies[0]
    kWith,        // targets exprs[0,2,4..], values exprs[1,3,..]; bodies[0]
    kBreak,
    kContinue,
    kGroup,       // statements run in the current frame ({% print a, b %}); bodies[0]
    kGeneration,  // {% generation %} body, rendered in place in its own frame; bodies[0]
    kRoot,        // the whole template; bodies[0]
  };
  Kind kind;
  int line = 0, col = 0;
  std::string text;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  Body else_body;
  std::shared_ptr<MacroDef> macro;
  // Names jinja2 binds as undefined when the statement's own frame (root, for body, with,
  // set/filter block, generation) is entered: assigned at that frame's top level before any
  // other use, and not referenced by any enclosing frame (jinja2/idtracking.py). Nested
  // frames that read them before the assignment see undefined, not the caller's variable.
  std::vector<std::string> frame_undefined;
  std::vector<std::string> else_frame_undefined;  // kFor: the else block's frame
};

}  // namespace df11::jinja
