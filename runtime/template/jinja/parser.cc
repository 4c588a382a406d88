// Jinja parser (see parser.h). Method names follow jinja2/parser.py so the two can be compared.
#include "runtime/template/jinja/parser.h"

#include <cstdlib>
#include <initializer_list>

#include "runtime/template/jinja/builtins.h"
#include "runtime/template/jinja/lexer.h"
#include "runtime/template/jinja/parser_base.h"

namespace df11::jinja {
namespace {

class Parser : public ParserBase {
 public:
  explicit Parser(std::vector<Token> tokens) : ParserBase(std::move(tokens)) {}

  StatusOr<Body> ParseAll() {
    Body body;
    DF11_RETURN_IF_ERROR(Subparse(&body, {}, nullptr));
    return body;
  }

 private:
  // ---- statements ----
  // Parses until EOF (end_tags empty) or a `{% <end tag>` (the tag name is left current), whose
  // name goes to *which unless `which` is null.
  Status Subparse(Body* body, std::initializer_list<const char*> end_tags, std::string* which) {
    DepthGuard guard(&depth_);
    DF11_RETURN_IF_ERROR(CheckDepth());
    while (true) {
      const Token& tok = Cur();
      if (tok.type == TT::kEof) {
        if (end_tags.size() == 0) return Status::Ok();
        return Fail(tok, std::string("unexpected end of template, expected '") + *end_tags.begin() + "'");
      }
      if (tok.type == TT::kText) {
        auto s = MakeStmt(Stmt::Kind::kText, tok);
        s->text = tok.value;
        body->push_back(std::move(s));
        Advance();
      } else if (tok.type == TT::kVarBegin) {
        Advance();
        auto s = MakeStmt(Stmt::Kind::kPrint, tok);
        DF11_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(false, true, {}, false));
        s->exprs.push_back(std::move(e));
        DF11_RETURN_IF_ERROR(Expect(TT::kVarEnd));
        body->push_back(std::move(s));
      } else if (tok.type == TT::kBlockBegin) {
        Advance();
        if (Cur().type == TT::kName) {
          for (const char* end : end_tags) {
            if (Cur().value == end) {
              if (which) *which = end;
              return Status::Ok();
            }
          }
        }
        DF11_ASSIGN_OR_RETURN(StmtPtr s, ParseStatement(end_tags));
        body->push_back(std::move(s));
      } else {
        return Fail(tok, "unexpected " + Describe(tok));
      }
    }
  }

  // Parses a body ended by one of `end_tags` (named in *which, see Subparse); consumes the end
  // tag name (and, for expect_block_end_after, its `%}`).
  Status ParseStatements(Body* body, std::initializer_list<const char*> end_tags, std::string* which,
                         bool expect_block_end_after) {
    DF11_RETURN_IF_ERROR(Expect(TT::kBlockEnd));
    DF11_RETURN_IF_ERROR(Subparse(body, end_tags, which));
    Advance();  // the end tag name
    if (expect_block_end_after) return Expect(TT::kBlockEnd);
    return Status::Ok();
  }

  StatusOr<StmtPtr> ParseStatement(std::initializer_list<const char*> open_end_tags) {
    const Token& tok = Cur();
    if (tok.type != TT::kName) return Fail(tok, "tag name expected");
    const std::string& n = tok.value;
    if (n == "if") return ParseIf();
    if (n == "for") return ParseFor();
    if (n == "set") return ParseSet();
    if (n == "macro") return ParseMacro();
    if (n == "call") return ParseCallBlock();
    if (n == "filter") return ParseFilterBlock();
    if (n == "with") return ParseWith();
    if (n == "print") return ParsePrint();
    if (n == "generation") return ParseGeneration();
    if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) return Fail(tok, "'" + n + "' outside of a for loop");
      auto s = MakeStmt(n == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, tok);
      Advance();
      DF11_RETURN_IF_ERROR(Expect(TT::kBlockEnd));
      return s;
    }
    for (const char* unsupported : {"block", "extends", "include", "import", "from", "autoescape"}) {
      if (n == unsupported) return Fail(tok, "the '" + n + "' tag is not supported", StatusCode::kUnimplemented);
    }
    std::string msg = "encountered unknown tag '" + n + "'";
    if (open_end_tags.size()) msg += std::string(" (looking for '") + *open_end_tags.begin() + "')";
    return Fail(tok, msg);
  }

  StatusOr<StmtPtr> ParseIf() {
    auto s = MakeStmt(Stmt::Kind::kIf, Cur());
    Advance();
    while (true) {
      DF11_ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(false, false, {}, false));
      s->exprs.push_back(std::move(test));
      s->bodies.emplace_back();
      std::string which;
      DF11_RETURN_IF_ERROR(ParseStatements(&s->bodies.back(), {"elif", "else", "endif"}, &which, false));
      if (which == "elif") continue;
      DF11_RETURN_IF_ERROR(ParseElse(s.get(), which, "endif"));
      return s;
    }
  }

  StatusOr<StmtPtr> ParseFor() {
    auto s = MakeStmt(Stmt::Kind::kFor, Cur());
    Advance();
    DF11_ASSIGN_OR_RETURN(ExprPtr target, ParseAssignTarget({"in"}));
    if (!SkipName("in")) return Fail(Cur(), "expected 'in', got " + Describe(Cur()));
    DF11_ASSIGN_OR_RETURN(ExprPtr iter, ParseTuple(false, false, {"recursive"}, false));
    ExprPtr filter;
    if (SkipName("if")) {
      DF11_ASSIGN_OR_RETURN(filter, ParseExpression(true));
    }
    if (IsName("recursive")) return Fail(Cur(), "recursive for loops are not supported", StatusCode::kUnimplemented);
    s->exprs.push_back(std::move(target));
    s->exprs.push_back(std::move(iter));
    s->exprs.push_back(std::move(filter));
    s->bodies.emplace_back();
    std::string which;
    ++loop_depth_;
    Status st = ParseStatements(&s->bodies.back(), {"endfor", "else"}, &which, false);
    --loop_depth_;
    DF11_RETURN_IF_ERROR(st);
    DF11_RETURN_IF_ERROR(ParseElse(s.get(), which, "endfor"));
    return s;
  }

  // After a body ended by tag `which`: the else body up to `end_tag` if `which` is "else",
  // else the `%}` of the end tag.
  Status ParseElse(Stmt* s, const std::string& which, const char* end_tag) {
    if (which != "else") return Expect(TT::kBlockEnd);
    return ParseStatements(&s->else_body, {end_tag}, nullptr, true);
  }

  StatusOr<StmtPtr> ParseSet() {
    const Token start = Cur();
    Advance();
    ExprPtr target;
    if (Cur().type == TT::kName && Look().type == TT::kOperator && Look().value == ".") {
      target = Node(Expr::Kind::kNsRef, Cur());
      target->name = Cur().value;
      Advance();
      Advance();
      DF11_ASSIGN_OR_RETURN(target->attr, ExpectName());
    } else {
      DF11_ASSIGN_OR_RETURN(target, ParseAssignTarget({}));
    }
    if (SkipOp("=")) {
      auto s = MakeStmt(Stmt::Kind::kSet, start);
      DF11_ASSIGN_OR_RETURN(ExprPtr value, ParseTuple(false, true, {}, false));
      DF11_RETURN_IF_ERROR(Expect(TT::kBlockEnd));
      s->exprs.push_back(std::move(target));
      s->exprs.push_back(std::move(value));
      return s;
    }
    auto s = MakeStmt(Stmt::Kind::kSetBlock, start);
    DF11_ASSIGN_OR_RETURN(ExprPtr filter, ParseFilter(nullptr, false));
    s->exprs.push_back(std::move(target));
    s->exprs.push_back(std::move(filter));
    s->bodies.emplace_back();
    DF11_RETURN_IF_ERROR(ParseStatements(&s->bodies.back(), {"endset"}, nullptr, true));
    return s;
  }

  Status ParseSignature(MacroDef* m) {
    DF11_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!m->params.empty()) DF11_RETURN_IF_ERROR(ExpectOp(","));
      const Token at = Cur();
      DF11_ASSIGN_OR_RETURN(std::string param, ExpectName());
      if (SkipOp("=")) {
        DF11_ASSIGN_OR_RETURN(ExprPtr d, ParseExpression(true));
        m->defaults.push_back(std::move(d));
      } else if (!m->defaults.empty()) {
        return Fail(at, "non-default argument follows default argument");
      }
      m->params.push_back(param);
    }
    Advance();
    return Status::Ok();
  }

  StatusOr<StmtPtr> ParseMacro() {
    auto s = MakeStmt(Stmt::Kind::kMacro, Cur());
    Advance();
    s->macro = std::make_shared<MacroDef>();
    DF11_ASSIGN_OR_RETURN(s->macro->name, ExpectName());
    DF11_RETURN_IF_ERROR(ParseSignature(s->macro.get()));
    DF11_RETURN_IF_ERROR(ParseMacroBody(s->macro.get(), "endmacro"));
    return s;
  }

  Status ParseMacroBody(MacroDef* m, const char* end_tag) {
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    Status st = ParseStatements(&m->body, {end_tag}, nullptr, true);
    loop_depth_ = saved_loops;
    DF11_RETURN_IF_ERROR(st);
    ScanNames(m->body, m);
    return Status::Ok();
  }

  // Records whether a macro body refers to varargs / kwargs / caller (jinja2 does the same).
  static void ScanExpr(const Expr* e, MacroDef* m) {
    if (!e) return;
    if (e->kind == Expr::Kind::kName) {
      m->uses_varargs |= e->name == "varargs";
      m->uses_kwargs |= e->name == "kwargs";
      m->uses_caller |= e->name == "caller";
    }
    ForEachChild(*e, [m](const Expr* k) { ScanExpr(k, m); });
  }
  static void ScanNames(const Body& body, MacroDef* m) {
    for (const auto& s : body) {
      for (const auto& e : s->exprs) ScanExpr(e.get(), m);
      for (const auto& b : s->bodies) ScanNames(b, m);
      ScanNames(s->else_body, m);
      if (s->kind == Stmt::Kind::kCallBlock && s->macro) ScanNames(s->macro->body, m);
    }
  }

  StatusOr<StmtPtr> ParseCallBlock() {
    auto s = MakeStmt(Stmt::Kind::kCallBlock, Cur());
    Advance();
    s->macro = std::make_shared<MacroDef>();
    s->macro->name = "caller";
    if (IsOp("(")) DF11_RETURN_IF_ERROR(ParseSignature(s->macro.get()));
    const Token at = Cur();
    DF11_ASSIGN_OR_RETURN(ExprPtr call, ParseExpression(true));
    if (call->kind != Expr::Kind::kCall) return Fail(at, "expected call");
    s->exprs.push_back(std::move(call));
    DF11_RETURN_IF_ERROR(ParseMacroBody(s->macro.get(), "endcall"));
    return s;
  }

  StatusOr<StmtPtr> ParseFilterBlock() {
    auto s = MakeStmt(Stmt::Kind::kFilterBlock, Cur());
    Advance();
    DF11_ASSIGN_OR_RETURN(ExprPtr filter, ParseFilter(nullptr, true));
    s->exprs.push_back(std::move(filter));
    s->bodies.emplace_back();
    DF11_RETURN_IF_ERROR(ParseStatements(&s->bodies.back(), {"endfilter"}, nullptr, true));
    return s;
  }

  StatusOr<StmtPtr> ParseWith() {
    auto s = MakeStmt(Stmt::Kind::kWith, Cur());
    Advance();
    bool first = true;
    while (Cur().type != TT::kBlockEnd) {
      if (!first) DF11_RETURN_IF_ERROR(ExpectOp(","));
      first = false;
      DF11_ASSIGN_OR_RETURN(ExprPtr target, ParseAssignTarget({}));
      DF11_RETURN_IF_ERROR(ExpectOp("="));
      DF11_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      s->exprs.push_back(std::move(target));
      s->exprs.push_back(std::move(value));
    }
    s->bodies.emplace_back();
    DF11_RETURN_IF_ERROR(ParseStatements(&s->bodies.back(), {"endwith"}, nullptr, true));
    return s;
  }

  StatusOr<StmtPtr> ParsePrint() {
    auto s = MakeStmt(Stmt::Kind::kPrint, Cur());
    Advance();
    auto tuple = Node(Expr::Kind::kTuple, Cur());
    while (Cur().type != TT::kBlockEnd) {
      if (!tuple->kids.empty()) DF11_RETURN_IF_ERROR(ExpectOp(","));
      DF11_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
      tuple->kids.push_back(std::move(e));
    }
    Advance();
    // {% print a, b %} outputs each expression in turn.
    s->kind = Stmt::Kind::kGroup;
    s->bodies.emplace_back();
    for (auto& e : tuple->kids) {
      auto p = std::make_unique<Stmt>();
      p->kind = Stmt::Kind::kPrint;
      p->line = e->line;
      p->col = e->col;
      p->exprs.push_back(std::move(e));
      s->bodies.back().push_back(std::move(p));
    }
    return s;
  }

  StatusOr<StmtPtr> ParseGeneration() {
    auto s = MakeStmt(Stmt::Kind::kGeneration, Cur());
    Advance();
    s->bodies.emplace_back();
    DF11_RETURN_IF_ERROR(ParseStatements(&s->bodies.back(), {"endgeneration"}, nullptr, true));
    return s;
  }

  int loop_depth_ = 0;
};

}  // namespace

StatusOr<StmtPtr> ParseTemplate(std::string_view source) {
  DF11_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  Parser parser(std::move(tokens));
  DF11_ASSIGN_OR_RETURN(Body body, parser.ParseAll());
  auto root = std::make_unique<Stmt>();
  root->kind = Stmt::Kind::kRoot;
  root->line = root->col = 1;
  root->bodies.push_back(std::move(body));
  AnalyzeScopes(root.get());
  return root;
}

}  // namespace df11::jinja
