// Template: Parse + Render glue (see template.h).
#include "runtime/template/jinja/template.h"

#include "runtime/template/jinja/parser.h"
#include "runtime/template/jinja/pystr.h"

namespace df11::jinja {

StatusOr<Template> Template::Parse(std::string_view source) {
  if (!IsValidUtf8(source)) return InvalidArgument("template is not valid UTF-8");
  DF11_ASSIGN_OR_RETURN(StmtPtr root, ParseTemplate(source));
  Template t;
  t.root_ = std::shared_ptr<const Stmt>(std::move(root));
  return t;
}

StatusOr<std::string> Template::Render(const Dict& vars, const RenderOptions& options) const {
  if (!root_) return FailedPrecondition("template was not parsed");
  Interpreter interpreter(vars, options);
  return interpreter.Render(*root_);
}

}  // namespace df11::jinja
