// Jinja template lexer with the environment transformers uses: trim_blocks=True,
// lstrip_blocks=True, keep_trailing_newline=False, default delimiters. Mirrors jinja2's lexer
// (jinja2/lexer.py): newline normalization, `-`/`+` whitespace control, brace balancing inside
// tags, `{% raw %}`, Python string-literal escapes and integer/float literal syntax.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"

namespace df11::jinja {

struct Token {
  enum class Type : uint8_t {
    kText,        // template data between tags (value = text)
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,        // identifier or keyword (value = name)
    kString,      // string literal (value = decoded UTF-8)
    kInteger,     // value = decimal digits of the parsed integer
    kFloat,       // value = literal text without underscores
    kOperator,    // value = "+", "//", "==", "(", ...
    kEof,
  };
  Type type;
  std::string value;
  int line = 1;  // 1-based position of the token's first character in the template
  int col = 1;
};

const char* TokenTypeName(Token::Type type);

// Tokenizes a whole template. Errors are INVALID_ARGUMENT ("line L, col C: ...").
// `source` must be valid UTF-8.
StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace df11::jinja
