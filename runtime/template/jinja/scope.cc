// Scope analysis: which names a frame binds as undefined on entry, following jinja2's
// compile-time symbol tracking (jinja2/idtracking.py). The interpreter otherwise resolves
// names dynamically (frame chain, then render variables, then globals), which agrees with
// jinja2 everywhere except here: a name assigned unconditionally at a frame's top level
// before any other use there, and unknown to every enclosing frame, is a fresh local that
// starts undefined, so nested loops and macros reading it earlier do not see the caller's
// value. Assignments inside `if` branches keep the dynamic lookup (jinja2 resolves them).
#include <set>
#include <string>
#include <vector>

#include "runtime/template/jinja/parser.h"

namespace df11::jinja {
namespace {

using NameSet = std::set<std::string>;

// Scans one frame level: statements of the frame, but not the bodies of nested frames.
class LevelScan {
 public:
  // Names referenced at this level, and those whose first reference is a top-level store.
  NameSet referenced;
  std::vector<std::string> store_first;
  // Nested frames found at this level, analyzed once this level is complete.
  struct Child {
    const Body* body;
    std::vector<std::string>* out;
    NameSet params;
  };
  std::vector<Child> children;

  void Params(const NameSet& params) {
    for (const auto& p : params) referenced.insert(p);
  }

  void Stmts(const Body& body, bool conditional) {
    for (const auto& s : body) Statement(*s, conditional);
  }

 private:
  void Load(const std::string& name) { referenced.insert(name); }
  void Store(const std::string& name, bool conditional) {
    if (referenced.insert(name).second && !conditional) store_first.push_back(name);
  }

  void Expression(const Expr* e) {
    if (!e) return;
    if (e->kind == Expr::Kind::kName || e->kind == Expr::Kind::kNsRef) Load(e->name);
    ForEachChild(*e, [this](const Expr* k) { Expression(k); });
  }

  void Target(const Expr& t, bool conditional) {
    if (t.kind == Expr::Kind::kName) {
      Store(t.name, conditional);
    } else if (t.kind == Expr::Kind::kNsRef) {
      Load(t.name);
    } else {
      for (const auto& k : t.kids) Target(*k, conditional);
    }
  }

  static void TargetNames(const Expr& t, NameSet* out) {
    if (t.kind == Expr::Kind::kName) out->insert(t.name);
    for (const auto& k : t.kids) TargetNames(*k, out);
  }

  void Macro(MacroDef* m, const NameSet& extra) {
    NameSet params(m->params.begin(), m->params.end());
    params.insert(extra.begin(), extra.end());
    params.insert({"varargs", "kwargs", "caller"});
    children.push_back({&m->body, &m->frame_undefined, params});
  }

  void Statement(Stmt& s, bool conditional) {
    switch (s.kind) {
      case Stmt::Kind::kPrint: Expression(s.exprs[0].get()); break;
      case Stmt::Kind::kGroup: Stmts(s.bodies[0], conditional); break;
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < s.exprs.size(); ++i) {
          Expression(s.exprs[i].get());
          Stmts(s.bodies[i], true);
        }
        Stmts(s.else_body, true);
        break;
      case Stmt::Kind::kFor: {
        Expression(s.exprs[1].get());
        NameSet params{"loop"};
        TargetNames(*s.exprs[0], &params);
        children.push_back({&s.bodies[0], &s.frame_undefined, params});
        children.push_back({&s.else_body, &s.else_frame_undefined, {}});
        break;
      }
      case Stmt::Kind::kSet:
        Expression(s.exprs[1].get());
        Target(*s.exprs[0], conditional);
        break;
      case Stmt::Kind::kSetBlock:
        Target(*s.exprs[0], conditional);
        Expression(s.exprs[1].get());
        children.push_back({&s.bodies[0], &s.frame_undefined, {}});
        break;
      case Stmt::Kind::kMacro:
        Store(s.macro->name, conditional);
        for (const auto& d : s.macro->defaults) Expression(d.get());
        Macro(s.macro.get(), {});
        break;
      case Stmt::Kind::kCallBlock:
        Expression(s.exprs[0].get());
        for (const auto& d : s.macro->defaults) Expression(d.get());
        Macro(s.macro.get(), {});
        break;
      case Stmt::Kind::kFilterBlock:
        Expression(s.exprs[0].get());
        children.push_back({&s.bodies[0], &s.frame_undefined, {}});
        break;
      case Stmt::Kind::kWith: {
        NameSet params;
        for (size_t i = 0; i + 1 < s.exprs.size(); i += 2) {
          Expression(s.exprs[i + 1].get());
          TargetNames(*s.exprs[i], &params);
        }
        children.push_back({&s.bodies[0], &s.frame_undefined, params});
        break;
      }
      case Stmt::Kind::kGeneration: children.push_back({&s.bodies[0], &s.frame_undefined, {}}); break;
      default: break;
    }
  }
};

void AnalyzeFrame(const Body& body, const NameSet& params, const NameSet& outer, std::vector<std::string>* out) {
  LevelScan scan;
  scan.Params(params);
  scan.Stmts(body, false);
  out->clear();
  for (const auto& name : scan.store_first) {
    if (!outer.count(name)) out->push_back(name);
  }
  NameSet inner = outer;
  inner.insert(scan.referenced.begin(), scan.referenced.end());
  for (const auto& child : scan.children) AnalyzeFrame(*child.body, child.params, inner, child.out);
}


// Marks Expr::const_fold on every node whose subtree contains a slice; returns whether it does.
bool MarkConstFold(Expr* e) {
  if (!e) return false;
  bool slice = e->kind == Expr::Kind::kSlice;
  ForEachChild(*e, [&slice](Expr* k) { slice |= MarkConstFold(k); });
  e->const_fold = slice;
  return slice;
}

void MarkBody(const Body& body) {
  for (const auto& s : body) {
    for (auto& e : s->exprs) MarkConstFold(e.get());
    for (const auto& b : s->bodies) MarkBody(b);
    MarkBody(s->else_body);
    if (s->macro) {
      for (auto& d : s->macro->defaults) MarkConstFold(d.get());
      MarkBody(s->macro->body);
    }
  }
}

}  // namespace

void AnalyzeScopes(Stmt* root) {
  AnalyzeFrame(root->bodies[0], {}, {}, &root->frame_undefined);
  MarkBody(root->bodies[0]);
}

}  // namespace df11::jinja
