// Jinja parser: tokens -> statement list (ast.h), following jinja2's grammar and operator
// precedence (jinja2/parser.py), including its quirks (filters bind tighter than arithmetic,
// `**` is left-associative, `-x|f` applies f to -x). Supported tags: if/elif/else, for (with
// else, `if` filter, tuple targets), set (expression, namespace attribute, block), macro,
// call, filter, with, print, raw, break/continue, generation. Everything else fails with
// INVALID_ARGUMENT (not Jinja) or UNIMPLEMENTED (Jinja, but not supported here), naming the
// construct and its line/column; filters and tests are checked against the builtin tables.
#pragma once

#include <string_view>

#include "runtime/template/jinja/ast.h"

namespace df11::jinja {

// Parses a whole template into a kRoot statement, with scopes analyzed (AnalyzeScopes).
// Nesting deeper than kMaxParseDepth fails instead of recursing.
StatusOr<StmtPtr> ParseTemplate(std::string_view source);

// Fills Stmt::frame_undefined / MacroDef::frame_undefined for every frame under `root`.
void AnalyzeScopes(Stmt* root);

inline constexpr int kMaxParseDepth = 200;

}  // namespace df11::jinja
