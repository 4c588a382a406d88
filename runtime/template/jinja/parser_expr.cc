// Jinja expression parsing (jinja2/parser.py precedence and quirks); see parser_base.h.
#include <algorithm>
#include <cstdlib>

#include "runtime/template/jinja/builtins.h"
#include "runtime/template/jinja/parser_base.h"

namespace df11::jinja {

StatusOr<ExprPtr> ParserBase::ParseAssignTarget(std::initializer_list<const char*> extra_end) {
  const Token at = Cur();
  DF11_ASSIGN_OR_RETURN(ExprPtr target, ParseTuple(true, true, extra_end, false));
  DF11_RETURN_IF_ERROR(CheckAssignable(*target, at));
  return target;
}

Status ParserBase::CheckAssignable(const Expr& e, const Token& at) {
  if (e.kind == Expr::Kind::kName) return Status::Ok();
  if (e.kind == Expr::Kind::kTuple) {
    for (const auto& k : e.kids) DF11_RETURN_IF_ERROR(CheckAssignable(*k, at));
    return Status::Ok();
  }
  return Fail(at, "can't assign to this expression");
}

StatusOr<ExprPtr> ParserBase::ParseTuple(bool simplified, bool with_condexpr,
                                         std::initializer_list<const char*> extra_end, bool explicit_parens) {
  const Token start = Cur();
  auto tuple = Node(Expr::Kind::kTuple, start);
  bool is_tuple = false;
  while (true) {
    if (!tuple->kids.empty()) DF11_RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(extra_end)) break;
    ExprPtr item;
    if (simplified) {
      DF11_ASSIGN_OR_RETURN(item, ParsePrimary());
    } else {
      DF11_ASSIGN_OR_RETURN(item, ParseExpression(with_condexpr));
    }
    tuple->kids.push_back(std::move(item));
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!tuple->kids.empty()) return std::move(tuple->kids[0]);
    if (!explicit_parens) return Fail(Cur(), "expected an expression, got " + Describe(Cur()));
  }
  return tuple;
}

bool ParserBase::IsTupleEnd(std::initializer_list<const char*> extra_end) const {
  const Token& c = Cur();
  if (c.type == TT::kVarEnd || c.type == TT::kBlockEnd || (c.type == TT::kOperator && c.value == ")")) return true;
  for (const char* e : extra_end) {
    if (c.type == TT::kName && c.value == e) return true;
  }
  return false;
}

StatusOr<ExprPtr> ParserBase::ParseExpression(bool with_condexpr) {
  DepthGuard guard(&depth_);
  DF11_RETURN_IF_ERROR(CheckDepth());
  if (!with_condexpr) return ParseOr();
  DF11_ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
  while (IsName("if")) {
    const Token at = Cur();
    Advance();
    DF11_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
    ExprPtr else_expr;
    if (SkipName("else")) {
      DF11_ASSIGN_OR_RETURN(else_expr, ParseExpression(true));
    }
    expr1 = Node(Expr::Kind::kCondExpr, at, std::move(expr1), std::move(test), std::move(else_expr));
  }
  return expr1;
}

// left (word right)*, left-associative: `a or b or c` is or(or(a, b), c).
StatusOr<ExprPtr> ParserBase::ParseChain(const char* word, Expr::Kind kind, StatusOr<ExprPtr> (ParserBase::*next)()) {
  DF11_ASSIGN_OR_RETURN(ExprPtr left, (this->*next)());
  while (IsName(word)) {
    const Token at = Cur();
    Advance();
    DF11_ASSIGN_OR_RETURN(ExprPtr right, (this->*next)());
    left = Node(kind, at, std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> ParserBase::ParseOr() { return ParseChain("or", Expr::Kind::kOr, &ParserBase::ParseAnd); }
StatusOr<ExprPtr> ParserBase::ParseAnd() { return ParseChain("and", Expr::Kind::kAnd, &ParserBase::ParseNot); }

StatusOr<ExprPtr> ParserBase::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(&depth_);
    DF11_RETURN_IF_ERROR(CheckDepth());
    const Token at = Cur();
    Advance();
    DF11_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    return Node(Expr::Kind::kNot, at, std::move(operand));
  }
  return ParseCompare();
}

StatusOr<ExprPtr> ParserBase::ParseCompare() {
  const Token start = Cur();
  DF11_ASSIGN_OR_RETURN(ExprPtr expr, ParseMath1());
  ExprPtr cmp;
  while (true) {
    std::string op;
    const Token& c = Cur();
    if (c.type == TT::kOperator && (c.value == "==" || c.value == "!=" || c.value == "<" ||
                                    c.value == "<=" || c.value == ">" || c.value == ">=")) {
      op = c.value;
      Advance();
    } else if (IsName("in")) {
      op = "in";
      Advance();
    } else if (IsName("not") && Look().type == TT::kName && Look().value == "in") {
      op = "notin";
      Advance();
      Advance();
    } else {
      break;
    }
    if (!cmp) cmp = Node(Expr::Kind::kCompare, start, std::move(expr));
    DF11_ASSIGN_OR_RETURN(ExprPtr rhs, ParseMath1());
    cmp->ops.push_back(op);
    cmp->kids.push_back(std::move(rhs));
  }
  return cmp ? std::move(cmp) : std::move(expr);
}

StatusOr<ExprPtr> ParserBase::Binary(ExprPtr left, const Token& at, std::string op, ExprPtr right) {
  auto n = Node(Expr::Kind::kBinary, at, std::move(left), std::move(right));
  n->attr = std::move(op);
  return n;
}

// left (op right)* for the operators `ops` of one precedence level, left-associative.
StatusOr<ExprPtr> ParserBase::ParseBinaryLevel(std::initializer_list<const char*> ops,
                                               StatusOr<ExprPtr> (ParserBase::*next)()) {
  const Token start = Cur();
  DF11_ASSIGN_OR_RETURN(ExprPtr left, (this->*next)());
  while (std::any_of(ops.begin(), ops.end(), [&](const char* op) { return IsOp(op); })) {
    std::string op = Cur().value;
    Advance();
    DF11_ASSIGN_OR_RETURN(ExprPtr right, (this->*next)());
    DF11_ASSIGN_OR_RETURN(left, Binary(std::move(left), start, op, std::move(right)));
  }
  return left;
}

StatusOr<ExprPtr> ParserBase::ParseMath1() { return ParseBinaryLevel({"+", "-"}, &ParserBase::ParseConcat); }

StatusOr<ExprPtr> ParserBase::ParseConcat() {
  const Token start = Cur();
  DF11_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
  if (!IsOp("~")) return first;
  auto n = Node(Expr::Kind::kConcat, start, std::move(first));
  while (SkipOp("~")) {
    DF11_ASSIGN_OR_RETURN(ExprPtr next, ParseMath2());
    n->kids.push_back(std::move(next));
  }
  return n;
}

StatusOr<ExprPtr> ParserBase::ParseMath2() {
  return ParseBinaryLevel({"*", "/", "//", "%"}, &ParserBase::ParsePow);
}

StatusOr<ExprPtr> ParserBase::ParsePow() {
  const Token start = Cur();
  DF11_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
  while (SkipOp("**")) {
    DF11_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
    DF11_ASSIGN_OR_RETURN(left, Binary(std::move(left), start, "**", std::move(right)));
  }
  return left;
}

StatusOr<ExprPtr> ParserBase::ParseUnary(bool with_filter) {
  DepthGuard guard(&depth_);
  DF11_RETURN_IF_ERROR(CheckDepth());
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    node = Node(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur());
    Advance();
    DF11_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    node->kids.push_back(std::move(operand));
  } else {
    DF11_ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  DF11_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    DF11_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

StatusOr<ExprPtr> ParserBase::ParsePrimary() {
  DepthGuard guard(&depth_);
  DF11_RETURN_IF_ERROR(CheckDepth());
  const Token tok = Cur();
  if (tok.type == TT::kName) {
    Advance();
    if (tok.value == "true" || tok.value == "True" || tok.value == "false" || tok.value == "False") {
      return Literal(tok, Value(tok.value == "true" || tok.value == "True"));
    }
    if (tok.value == "none" || tok.value == "None") return Literal(tok, Value::None());
    auto n = Node(Expr::Kind::kName, tok);
    n->name = tok.value;
    return n;
  }
  if (tok.type == TT::kString) {
    std::string s;
    while (Cur().type == TT::kString) {
      s += Cur().value;
      Advance();
    }
    return Literal(tok, Value(std::move(s)));
  }
  if (tok.type == TT::kInteger || tok.type == TT::kFloat) {
    Advance();
    if (tok.type == TT::kInteger) return IntegerLiteral(tok);
    return Literal(tok, Value(std::strtod(tok.value.c_str(), nullptr)));
  }
  if (tok.type == TT::kOperator && tok.value == "(") {
    Advance();
    DF11_ASSIGN_OR_RETURN(ExprPtr inner, ParseTuple(false, true, {}, true));
    DF11_RETURN_IF_ERROR(ExpectOp(")"));
    return inner;
  }
  if (tok.type == TT::kOperator && tok.value == "[") return ParseList();
  if (tok.type == TT::kOperator && tok.value == "{") return ParseDict();
  return Fail(tok, "unexpected " + Describe(tok));
}

StatusOr<ExprPtr> ParserBase::ParseList() {
  auto n = Node(Expr::Kind::kList, Cur());
  Advance();
  while (!IsOp("]")) {
    if (!n->kids.empty()) DF11_RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp("]")) break;
    DF11_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
    n->kids.push_back(std::move(item));
  }
  Advance();
  return n;
}

StatusOr<ExprPtr> ParserBase::ParseDict() {
  auto n = Node(Expr::Kind::kDict, Cur());
  Advance();
  while (!IsOp("}")) {
    if (!n->kids.empty()) DF11_RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp("}")) break;
    DF11_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
    DF11_RETURN_IF_ERROR(ExpectOp(":"));
    DF11_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
    n->kids.push_back(std::move(key));
    n->kids.push_back(std::move(value));
  }
  Advance();
  return n;
}

StatusOr<ExprPtr> ParserBase::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      DF11_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      DF11_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

StatusOr<ExprPtr> ParserBase::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      DF11_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node), false));
    } else if (IsName("is")) {
      DF11_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      DF11_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

StatusOr<ExprPtr> ParserBase::ParseSubscript(ExprPtr node) {
  const Token tok = Cur();
  Advance();
  if (tok.value == ".") {
    const Token attr = Cur();
    Advance();
    if (attr.type == TT::kName) {
      auto n = Node(Expr::Kind::kGetAttr, tok, std::move(node));
      n->name = attr.value;
      return n;
    }
    if (attr.type != TT::kInteger) return Fail(attr, "expected name or number");
    return Node(Expr::Kind::kGetItem, tok, std::move(node), IntegerLiteral(attr));
  }
  auto n = Node(Expr::Kind::kGetItem, tok, std::move(node));
  auto tuple = Node(Expr::Kind::kTuple, tok);
  while (!IsOp("]")) {
    if (!tuple->kids.empty()) DF11_RETURN_IF_ERROR(ExpectOp(","));
    DF11_ASSIGN_OR_RETURN(ExprPtr sub, ParseSubscribed());
    tuple->kids.push_back(std::move(sub));
  }
  Advance();
  if (tuple->kids.size() == 1) {
    n->kids.push_back(std::move(tuple->kids[0]));
  } else {
    n->kids.push_back(std::move(tuple));
  }
  return n;
}

StatusOr<ExprPtr> ParserBase::ParseSubscribed() {
  const Token start = Cur();
  std::vector<ExprPtr> parts;
  if (IsOp(":")) {
    Advance();
    parts.push_back(nullptr);
  } else {
    DF11_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
    if (!IsOp(":")) return e;
    Advance();
    parts.push_back(std::move(e));
  }
  if (IsOp(":") || IsOp("]") || IsOp(",")) {
    parts.push_back(nullptr);
  } else {
    DF11_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
    parts.push_back(std::move(e));
  }
  if (SkipOp(":")) {
    if (IsOp("]") || IsOp(",")) {
      parts.push_back(nullptr);
    } else {
      DF11_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
      parts.push_back(std::move(e));
    }
  } else {
    parts.push_back(nullptr);
  }
  auto n = Node(Expr::Kind::kSlice, start);
  n->kids = std::move(parts);
  return n;
}

StatusOr<std::unique_ptr<ArgList>> ParserBase::ParseCallArgs() {
  const Token open = Cur();
  DF11_RETURN_IF_ERROR(ExpectOp("("));
  auto args = std::make_unique<ArgList>();
  bool require_comma = false;
  auto invalid = [&] { return Fail(open, "invalid syntax for function call expression"); };
  while (!IsOp(")")) {
    if (require_comma) {
      DF11_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
    }
    if (IsOp("*")) {
      if (args->star || args->star_star) return invalid();
      Advance();
      DF11_ASSIGN_OR_RETURN(args->star, ParseExpression(true));
    } else if (IsOp("**")) {
      if (args->star_star) return invalid();
      Advance();
      DF11_ASSIGN_OR_RETURN(args->star_star, ParseExpression(true));
    } else if (Cur().type == TT::kName && Look().type == TT::kOperator && Look().value == "=") {
      if (args->star_star) return invalid();
      std::string key = Cur().value;
      Advance();
      Advance();
      DF11_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
      args->keyword.emplace_back(std::move(key), std::move(v));
    } else {
      if (args->star || args->star_star || !args->keyword.empty()) return invalid();
      DF11_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
      args->positional.push_back(std::move(v));
    }
    require_comma = true;
  }
  Advance();
  return args;
}

StatusOr<ExprPtr> ParserBase::ParseCall(ExprPtr callee) {
  auto n = Node(Expr::Kind::kCall, Cur(), std::move(callee));
  DF11_ASSIGN_OR_RETURN(n->args, ParseCallArgs());
  return n;
}

StatusOr<std::string> ParserBase::DottedName() {
  DF11_ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (SkipOp(".")) {
    DF11_ASSIGN_OR_RETURN(std::string part, ExpectName());
    name += "." + part;
  }
  return name;
}

// `node | f | g(...)`; with start_inline the first filter has no leading pipe.
StatusOr<ExprPtr> ParserBase::ParseFilter(ExprPtr node, bool start_inline) {
  while (IsOp("|") || start_inline) {
    if (!start_inline) Advance();
    start_inline = false;
    const Token at = Cur();
    DF11_ASSIGN_OR_RETURN(std::string name, DottedName());
    DF11_RETURN_IF_ERROR(CheckFilterName(name, at));
    auto n = Node(Expr::Kind::kFilter, at, std::move(node));
    n->name = name;
    if (IsOp("(")) {
      DF11_ASSIGN_OR_RETURN(n->args, ParseCallArgs());
    }
    node = std::move(n);
  }
  return node;
}

StatusOr<ExprPtr> ParserBase::ParseTest(ExprPtr node) {
  Advance();  // is
  bool negated = SkipName("not");
  const Token at = Cur();
  DF11_ASSIGN_OR_RETURN(std::string name, DottedName());
  DF11_RETURN_IF_ERROR(CheckTestName(name, at));
  auto n = Node(Expr::Kind::kTest, at, std::move(node));
  n->name = name;
  n->negated = negated;
  const Token& c = Cur();
  if (IsOp("(")) {
    DF11_ASSIGN_OR_RETURN(n->args, ParseCallArgs());
  } else if ((c.type == TT::kName || c.type == TT::kString || c.type == TT::kInteger ||
              c.type == TT::kFloat || (c.type == TT::kOperator && (c.value == "(" || c.value == "[" || c.value == "{"))) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Fail(c, "you cannot chain multiple tests with is");
    DF11_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    DF11_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    n->args = std::make_unique<ArgList>();
    n->args->positional.push_back(std::move(arg));
  }
  return n;
}

Status ParserBase::CheckFilterName(const std::string& name, const Token& at) {
  if (HasFilter(name)) return Status::Ok();
  if (IsJinjaFilter(name)) return Fail(at, "the '" + name + "' filter is not supported", StatusCode::kUnimplemented);
  return Fail(at, "no filter named '" + name + "'");
}

Status ParserBase::CheckTestName(const std::string& name, const Token& at) {
  if (HasTest(name)) return Status::Ok();
  if (IsJinjaTest(name)) return Fail(at, "the '" + name + "' test is not supported", StatusCode::kUnimplemented);
  return Fail(at, "no test named '" + name + "'");
}

}  // namespace df11::jinja
