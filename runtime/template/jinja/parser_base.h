// Internal to runtime/template/jinja: the expression half of the Jinja parser (token cursor, error
// reporting, expressions, filters, tests, assignment targets). Statements are parsed by
// the Parser in parser.cc, which derives from this class.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/template/jinja/ast.h"
#include "runtime/template/jinja/lexer.h"
#include "runtime/template/jinja/parser.h"

namespace df11::jinja {

class ParserBase {
 public:
  explicit ParserBase(std::vector<Token> tokens) : t_(std::move(tokens)) {}

 protected:
  using TT = Token::Type;

  // ---- token helpers ----
  const Token& Cur() const { return t_[p_]; }
  const Token& Look() const { return t_[p_ + 1 < t_.size() ? p_ + 1 : p_]; }
  void Advance() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  bool IsOp(const char* v) const { return Cur().type == TT::kOperator && Cur().value == v; }
  bool IsName(const char* v) const { return Cur().type == TT::kName && Cur().value == v; }
  bool SkipOp(const char* v) {
    if (!IsOp(v)) return false;
    Advance();
    return true;
  }
  bool SkipName(const char* v) {
    if (!IsName(v)) return false;
    Advance();
    return true;
  }

  Status Fail(const Token& at, const std::string& msg, StatusCode code = StatusCode::kInvalidArgument) {
    return Status(code, "template syntax error at line " + std::to_string(at.line) + ", col " +
                            std::to_string(at.col) + ": " + msg);
  }
  std::string Describe(const Token& tok) const {
    if (tok.type == TT::kName || tok.type == TT::kOperator) return "'" + tok.value + "'";
    return TokenTypeName(tok.type);
  }
  Status ExpectOp(const char* v) {
    if (SkipOp(v)) return Status::Ok();
    return Fail(Cur(), std::string("expected '") + v + "', got " + Describe(Cur()));
  }
  Status Expect(TT type) {
    if (Cur().type != type) return Fail(Cur(), std::string("expected ") + TokenTypeName(type) + ", got " + Describe(Cur()));
    Advance();
    return Status::Ok();
  }
  StatusOr<std::string> ExpectName() {
    if (Cur().type != TT::kName) return Fail(Cur(), "expected name, got " + Describe(Cur()));
    std::string v = Cur().value;
    Advance();
    return v;
  }

  // A new Expr or Stmt of `kind` at `at`'s position.
  template <typename T>
  static std::unique_ptr<T> Make(typename T::Kind kind, const Token& at) {
    auto n = std::make_unique<T>();
    n->kind = kind;
    n->line = at.line;
    n->col = at.col;
    return n;
  }
  static StmtPtr MakeStmt(Stmt::Kind kind, const Token& at) { return Make<Stmt>(kind, at); }
  // A new Expr with `kids` (in order).
  template <typename... Kids>
  static ExprPtr Node(Expr::Kind kind, const Token& at, Kids... kids) {
    ExprPtr n = Make<Expr>(kind, at);
    (n->kids.push_back(std::move(kids)), ...);
    return n;
  }
  static ExprPtr Literal(const Token& at, Value v) {
    ExprPtr n = Node(Expr::Kind::kLiteral, at);
    n->literal = std::move(v);
    return n;
  }
  // An integer token (the lexer checked that it fits int64) as a literal.
  static ExprPtr IntegerLiteral(const Token& at) {
    return Literal(at, Value(static_cast<int64_t>(std::strtoll(at.value.c_str(), nullptr, 10))));
  }

  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };
  Status CheckDepth() {
    if (depth_ > kMaxParseDepth) return Fail(Cur(), "template nesting too deep (limit " + std::to_string(kMaxParseDepth) + ")");
    return Status::Ok();
  }

  // ---- assignment targets ----
  StatusOr<ExprPtr> ParseAssignTarget(std::initializer_list<const char*> extra_end);
  Status CheckAssignable(const Expr& e, const Token& at);

  // ---- expressions (jinja2 precedence) ----
  StatusOr<ExprPtr> ParseTuple(bool simplified, bool with_condexpr, std::initializer_list<const char*> extra_end,
                               bool explicit_parens);
  bool IsTupleEnd(std::initializer_list<const char*> extra_end) const;
  StatusOr<ExprPtr> ParseExpression(bool with_condexpr);
  StatusOr<ExprPtr> ParseChain(const char* word, Expr::Kind kind, StatusOr<ExprPtr> (ParserBase::*next)());
  StatusOr<ExprPtr> ParseOr();
  StatusOr<ExprPtr> ParseAnd();
  StatusOr<ExprPtr> ParseNot();
  StatusOr<ExprPtr> ParseCompare();
  StatusOr<ExprPtr> Binary(ExprPtr left, const Token& at, std::string op, ExprPtr right);
  StatusOr<ExprPtr> ParseBinaryLevel(std::initializer_list<const char*> ops, StatusOr<ExprPtr> (ParserBase::*next)());
  StatusOr<ExprPtr> ParseMath1();
  StatusOr<ExprPtr> ParseConcat();
  StatusOr<ExprPtr> ParseMath2();
  StatusOr<ExprPtr> ParsePow();
  StatusOr<ExprPtr> ParseUnary(bool with_filter);
  StatusOr<ExprPtr> ParsePrimary();
  StatusOr<ExprPtr> ParseList();
  StatusOr<ExprPtr> ParseDict();
  StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  StatusOr<ExprPtr> ParseSubscribed();
  StatusOr<std::unique_ptr<ArgList>> ParseCallArgs();
  StatusOr<ExprPtr> ParseCall(ExprPtr callee);
  StatusOr<std::string> DottedName();
  // `node | f | g(...)`; with start_inline the first filter has no leading pipe.
  StatusOr<ExprPtr> ParseFilter(ExprPtr node, bool start_inline);
  StatusOr<ExprPtr> ParseTest(ExprPtr node);
  Status CheckFilterName(const std::string& name, const Token& at);
  Status CheckTestName(const std::string& name, const Token& at);

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace df11::jinja
